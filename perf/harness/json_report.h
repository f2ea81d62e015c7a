// The -J/--json file: nccl-tests' layout (config, devices, results with out_of_place and
// in_place, out_of_bounds, average_bus_bandwidth) plus "records": one flat object per row
// and placement (collective, bytes, count, type, op, root, placement, time_us, algbw, busbw,
// wrong, nranks, transport, algorithm, buffers: "host" or "device"), which is what perf/plot reads.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "options.h"

namespace accl::perf {

struct PlacementResult {
  double timeUs = 0;
  double algBw = 0;
  double busBw = 0;
  double wrong = -1;  // < 0: not checked
};

struct RowResult {
  size_t bytes = 0;
  size_t count = 0;
  std::string type;
  std::string op;
  int root = -1;
  PlacementResult outOfPlace;
  PlacementResult inPlace;
};

struct DeviceInfo {
  int rank;
  int group;
  int pid;
  std::string host;
  int device;
  std::string name;
  std::string pciHex;  // "0000:19:00" (domain:bus:device)
};

class JsonReport {
 public:
  // Opens `path`, or path.0, path.1 ... when it exists; an unwritable path disables the report.
  // `note` receives the line to print ("# Writing JSON output to ...").
  JsonReport(const std::string& path, std::string* note);
  ~JsonReport();
  bool active() const { return file_ != nullptr; }

  void setRun(int argc, char** argv, const Options& options, int ncclVersion, const std::string& collective,
              int nranks, bool deviceBuffers);
  void addDevice(const DeviceInfo& device);
  void addRow(const RowResult& row);
  // Writes the whole document and closes the file.
  void finish(int outOfBounds, double avgBusBw, double minBwCheck);

  // Where the transport/algorithm labels come from (environment, else "auto").
  static std::string transportLabel();
  static std::string algorithmLabel();

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::unique_ptr<std::FILE, FileCloser> file_;
  std::string startTime_;
  std::vector<std::string> args_;
  Options options_;
  int ncclVersion_ = 0;
  std::string collective_;
  int nranks_ = 0;
  bool deviceBuffers_ = false;
  std::vector<DeviceInfo> devices_;
  std::vector<RowResult> rows_;
};

// JSON string literal of `text` (quotes included).
std::string jsonQuote(const std::string& text);
// A number, or null for NaN/inf (nccl-tests writes "nan"; a string breaks numeric readers).
std::string jsonNumber(double value);

}  // namespace accl::perf
