#include "json_report.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <sstream>

extern char** environ;

namespace accl::perf {
namespace {

std::string nowText() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &local);
  return buf;
}

std::string placementObject(const PlacementResult& p, bool cpuTime) {
  std::ostringstream s;
  s << "{\"" << (cpuTime ? "cpu_time" : "time") << "\":" << jsonNumber(p.timeUs)
    << ",\"alg_bw\":" << jsonNumber(p.algBw) << ",\"bus_bw\":" << jsonNumber(p.busBw)
    << ",\"nwrong\":" << (p.wrong < 0 ? "null" : jsonNumber(p.wrong)) << "}";
  return s.str();
}

}  // namespace

std::string jsonQuote(const std::string& text) {
  std::string out = "\"";
  for (const unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string jsonNumber(double value) {
  if (!std::isfinite(value)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", value);
  return buf;
}

JsonReport::JsonReport(const std::string& path, std::string* note) {
  std::string tryPath = path;
  for (int attempt = 0;; ++attempt) {
    file_.reset(std::fopen(tryPath.c_str(), "wx"));
    if (file_ || errno != EEXIST) break;
    tryPath = path + "." + std::to_string(attempt);
  }
  *note = file_ ? "# Writing JSON output to " + tryPath : "# skipping json output; " + tryPath + " not accessible";
  startTime_ = nowText();
}

JsonReport::~JsonReport() = default;

void JsonReport::setRun(int argc, char** argv, const Options& options, int ncclVersion,
                        const std::string& collective, int nranks, bool deviceBuffers) {
  args_.assign(argv, argv + argc);
  options_ = options;
  ncclVersion_ = ncclVersion;
  collective_ = collective;
  nranks_ = nranks;
  deviceBuffers_ = deviceBuffers;
}

void JsonReport::addDevice(const DeviceInfo& device) { devices_.push_back(device); }
void JsonReport::addRow(const RowResult& row) { rows_.push_back(row); }

std::string JsonReport::transportLabel() {
  if (const char* net = std::getenv("NCCL_NET"); net && *net) return net;
  if (const char* shm = std::getenv("NCCL_SHM_DISABLE"); shm && std::atoi(shm) == 1) return "net";
  return "auto";
}

std::string JsonReport::algorithmLabel() {
  if (const char* algo = std::getenv("NCCL_ALGO"); algo && *algo) return algo;
  return "auto";
}

void JsonReport::finish(int outOfBounds, double avgBusBw, double minBwCheck) {
  if (!file_) return;
  const Options& o = options_;
  const bool cpu = o.reportCpuTime != 0;
  std::ostringstream s;
  s << "{\"version\":2,\"start_time\":" << jsonQuote(startTime_) << ",\"args\":[";
  for (size_t i = 0; i < args_.size(); ++i) s << (i ? "," : "") << jsonQuote(args_[i]);
  s << "],\"env\":[";
  for (char** e = environ; e && *e; ++e) s << (e == environ ? "" : ",") << jsonQuote(*e);
  s << "],\"nccl_version\":" << ncclVersion_;
  s << ",\"config\":{\"nthreads\":" << o.nThreads << ",\"ngpus\":" << o.nGpus
    << ",\"minimum_bytes\":" << o.minBytes << ",\"maximum_bytes\":" << o.maxBytes;
  if (o.stepFactor > 1) s << ",\"step_factor\":" << o.stepFactor;
  else s << ",\"step_bytes\":" << o.stepBytes;
  s << ",\"warmup_iters\":" << o.warmupIters << ",\"iterations\":" << o.iters
    << ",\"aggregated_iterations\":" << o.aggIters << ",\"validation\":" << o.check << ",\"graph\":" << o.cudaGraph
    << ",\"blocking_collectives\":" << jsonQuote(o.blocking ? "true" : "false")
    << ",\"per_iter_timing\":" << jsonQuote(o.perIterTiming ? "true" : "false")
    << ",\"per_iter_skip\":" << o.perIterSkip
    << ",\"parallel_init\":" << jsonQuote(o.parallelInit ? "true" : "false") << "}";
  s << ",\"devices\":[";
  for (size_t i = 0; i < devices_.size(); ++i) {
    const DeviceInfo& d = devices_[i];
    s << (i ? "," : "") << "{\"rank\":" << d.rank << ",\"group\":" << d.group << ",\"pid\":" << d.pid
      << ",\"hostname\":" << jsonQuote(d.host) << ",\"device\":" << d.device
      << ",\"device_hex\":" << jsonQuote(d.pciHex) << ",\"device_info\":" << jsonQuote(d.name) << "}";
  }
  s << "],\"results\":[";
  for (size_t i = 0; i < rows_.size(); ++i) {
    const RowResult& r = rows_[i];
    char root[16];
    std::snprintf(root, sizeof root, "%6i", r.root);
    s << (i ? "," : "") << "{\"size\":" << r.bytes << ",\"count\":" << r.count << ",\"type\":" << jsonQuote(r.type)
      << ",\"redop\":" << jsonQuote(r.op) << ",\"root\":" << jsonQuote(root)
      << ",\"out_of_place\":" << placementObject(r.outOfPlace, cpu)
      << ",\"in_place\":" << placementObject(r.inPlace, cpu) << ",\"actual_iterations\":" << o.iters
      << ",\"experiment_name\":" << jsonQuote(collective_) << "}";
  }
  s << "],\"records\":[";
  const std::string transport = transportLabel(), algorithm = algorithmLabel();
  bool first = true;
  for (const RowResult& r : rows_) {
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      const PlacementResult& p = inPlace ? r.inPlace : r.outOfPlace;
      s << (first ? "" : ",") << "{\"collective\":" << jsonQuote(collective_) << ",\"bytes\":" << r.bytes
        << ",\"count\":" << r.count << ",\"type\":" << jsonQuote(r.type) << ",\"op\":" << jsonQuote(r.op)
        << ",\"root\":" << r.root << ",\"placement\":" << jsonQuote(inPlace ? "in_place" : "out_of_place")
        << ",\"time_us\":" << jsonNumber(p.timeUs) << ",\"algbw\":" << jsonNumber(p.algBw)
        << ",\"busbw\":" << jsonNumber(p.busBw) << ",\"wrong\":" << (p.wrong < 0 ? "null" : jsonNumber(p.wrong))
        << ",\"nranks\":" << nranks_ << ",\"transport\":" << jsonQuote(transport)
        << ",\"algorithm\":" << jsonQuote(algorithm) << ",\"time_kind\":" << jsonQuote(cpu ? "cpu" : "completion")
        << ",\"buffers\":" << jsonQuote(deviceBuffers_ ? "device" : "host") << "}";
      first = false;
    }
  }
  s << "],\"out_of_bounds\":{\"count\":" << outOfBounds << ",\"okay\":" << (outOfBounds ? "false" : "true") << "}";
  s << ",\"average_bus_bandwidth\":{\"bandwidth\":" << jsonNumber(avgBusBw) << ",\"okay\":"
    << (minBwCheck < 0 ? "\"unchecked\"" : (avgBusBw >= minBwCheck * 0.9 ? "true" : "false")) << "}";
  s << ",\"errors\":[],\"end_time\":" << jsonQuote(nowText()) << "}\n";
  const std::string text = s.str();
  std::fwrite(text.data(), 1, text.size(), file_.get());
  file_.reset();
}

}  // namespace accl::perf
