// verbs_system.cc: libibverbs behind the seam. Entry points come from dlsym; the data-path
// calls (post send/recv, poll CQ) are inline in verbs.h and go through the device's ops.
#include "transports/ib/verbs_system.h"
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <cstring>
#include <fstream>
#include <map>

namespace accl::ib {
namespace {

struct Entry {
  ibv_device** (*getList)(int*);
  void (*freeList)(ibv_device**);
  const char* (*getName)(ibv_device*);
  ibv_context* (*open)(ibv_device*);
  int (*close)(ibv_context*);
  int (*queryPort)(ibv_context*, uint8_t, ibv_port_attr*);
  int (*queryGid)(ibv_context*, uint8_t, int, ibv_gid*);
  ibv_pd* (*allocPd)(ibv_context*);
  int (*deallocPd)(ibv_pd*);
  ibv_mr* (*regMr)(ibv_pd*, void*, size_t, int);
  int (*deregMr)(ibv_mr*);
  ibv_cq* (*createCq)(ibv_context*, int, void*, ibv_comp_channel*, int);
  int (*destroyCq)(ibv_cq*);
  ibv_qp* (*createQp)(ibv_pd*, ibv_qp_init_attr*);
  int (*destroyQp)(ibv_qp*);
  int (*modifyQp)(ibv_qp*, ibv_qp_attr*, int);
  const char* (*statusStr)(ibv_wc_status);  // optional: the status in words
};

template <typename F>
bool load(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

ibv_mtu toMtu(int bytes) {
  return bytes >= 4096 ? IBV_MTU_4096 : bytes >= 2048 ? IBV_MTU_2048 : bytes >= 1024 ? IBV_MTU_1024
                                      : bytes >= 512  ? IBV_MTU_512  : IBV_MTU_256;
}

class SystemVerbs final : public Verbs {
 public:
  SystemVerbs(void* lib, const Entry& e, ibv_context* ctx, std::string device, int port)
      : lib_(lib), e_(e), ctx_(ctx), device_(std::move(device)), port_(port) {}
  ~SystemVerbs() override {
    for (auto& [n, qp] : qps_) e_.destroyQp(qp);
    for (auto& [id, mr] : mrs_) e_.deregMr(mr);
    for (auto& [id, cq] : cqs_) e_.destroyCq(cq);
    for (auto& [id, pd] : pds_) e_.deallocPd(pd);
    e_.close(ctx_);
    dlclose(lib_);
  }

  ncclResult_t queryPort(PortInfo* out) override {
    ibv_port_attr pa{};
    if (e_.queryPort(ctx_, static_cast<uint8_t>(port_), &pa) != 0) return ncclSystemError;
    out->lid = pa.lid;
    out->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    out->mtu = 128 << pa.active_mtu;
    out->active = pa.state == IBV_PORT_ACTIVE;
    gidTableLen_ = pa.gid_tbl_len;
    return ncclSuccess;
  }
  ncclResult_t queryGids(std::vector<GidEntry>* out) override {
    out->clear();
    for (int i = 0; i < gidTableLen_; i++) {
      ibv_gid g{};
      if (e_.queryGid(ctx_, static_cast<uint8_t>(port_), i, &g) != 0) continue;
      GidEntry ent;
      ent.index = i;
      std::memcpy(ent.gid.data(), g.raw, 16);
      if (ent.gid == Gid{}) continue;  // unused slot
      // The GID's RoCE version is only in sysfs.
      std::ifstream f("/sys/class/infiniband/" + device_ + "/ports/" + std::to_string(port_) +
                      "/gid_attrs/types/" + std::to_string(i));
      std::string type;
      std::getline(f, type);
      ent.type = type.find("v2") != std::string::npos ? GidType::RoceV2 : GidType::IbOrRoceV1;
      out->push_back(ent);
    }
    return ncclSuccess;
  }
  ncclResult_t allocPd(uint64_t* pd) override {
    ibv_pd* p = e_.allocPd(ctx_);
    if (!p) return ncclSystemError;
    *pd = next_++;
    pds_[*pd] = p;
    return ncclSuccess;
  }
  ncclResult_t regMr(uint64_t pd, void* addr, size_t size, uint64_t* mr, MrKeys* keys) override {
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    ibv_mr* m = e_.regMr(pds_.at(pd), addr, size, access);
    if (!m) return ncclSystemError;
    *mr = next_++;
    mrs_[*mr] = m;
    *keys = {m->lkey, m->rkey};
    return ncclSuccess;
  }
  ncclResult_t deregMr(uint64_t mr) override {
    auto it = mrs_.find(mr);
    if (it == mrs_.end()) return ncclInvalidArgument;
    int rc = e_.deregMr(it->second);
    mrs_.erase(it);
    return rc == 0 ? ncclSuccess : ncclSystemError;
  }
  ncclResult_t createCq(int depth, uint64_t* cq) override {
    ibv_cq* c = e_.createCq(ctx_, depth, nullptr, nullptr, 0);
    if (!c) return ncclSystemError;
    *cq = next_++;
    cqs_[*cq] = c;
    return ncclSuccess;
  }
  ncclResult_t createQp(uint64_t pd, uint64_t cq, uint32_t* qpn) override {
    ibv_qp_init_attr a{};
    a.send_cq = a.recv_cq = cqs_.at(cq);
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = a.cap.max_recv_wr = 64;
    a.cap.max_send_sge = a.cap.max_recv_sge = 1;
    ibv_qp* q = e_.createQp(pds_.at(pd), &a);
    if (!q) return ncclSystemError;
    *qpn = q->qp_num;
    qps_[*qpn] = q;
    return ncclSuccess;
  }
  ncclResult_t modifyQp(uint32_t qpn, QpState state, const QpAttrs& in) override {
    ibv_qp_attr a{};
    int mask = IBV_QP_STATE;
    if (state == QpState::Reset || state == QpState::Error) {
      a.qp_state = state == QpState::Reset ? IBV_QPS_RESET : IBV_QPS_ERR;
    } else if (state == QpState::Init) {
      a.qp_state = IBV_QPS_INIT;
      a.port_num = static_cast<uint8_t>(port_);
      a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
      mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    } else if (state == QpState::Rtr) {
      a.qp_state = IBV_QPS_RTR;
      a.path_mtu = toMtu(in.mtu);
      a.dest_qp_num = in.remoteQpn;
      a.rq_psn = in.remotePsn & 0xffffff;
      a.max_dest_rd_atomic = 1;
      a.min_rnr_timer = 12;
      a.ah_attr.dlid = in.dlid;
      a.ah_attr.port_num = static_cast<uint8_t>(port_);
      if (in.global) {
        a.ah_attr.is_global = 1;
        std::memcpy(a.ah_attr.grh.dgid.raw, in.dgid.data(), 16);
        a.ah_attr.grh.sgid_index = static_cast<uint8_t>(in.sgidIndex);
        a.ah_attr.grh.hop_limit = 255;
      }
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
              IBV_QP_MIN_RNR_TIMER;
    } else {
      a.qp_state = IBV_QPS_RTS;
      a.sq_psn = in.localPsn & 0xffffff;
      a.timeout = in.timeout;
      a.retry_cnt = in.retryCnt;
      a.rnr_retry = in.rnrRetry;
      a.max_rd_atomic = 1;
      mask |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    }
    return e_.modifyQp(qps_.at(qpn), &a, mask) == 0 ? ncclSuccess : ncclSystemError;
  }
  ncclResult_t postWrite(uint32_t qpn, uint64_t wrId, const void* local, uint32_t lkey, size_t len, uint64_t remote,
                         uint32_t rkey, bool withImm, uint32_t imm) override {
    ibv_sge sge{reinterpret_cast<uintptr_t>(local), static_cast<uint32_t>(len), lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = wrId;
    wr.sg_list = len ? &sge : nullptr;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = withImm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = imm;  // ACCL peers share byte order; sizes travel as written
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(qps_.at(qpn), &wr, &bad) == 0 ? ncclSuccess : ncclSystemError;
  }
  ncclResult_t postRecv(uint32_t qpn, uint64_t wrId) override {
    ibv_recv_wr wr{}, *bad = nullptr;
    wr.wr_id = wrId;
    return ibv_post_recv(qps_.at(qpn), &wr, &bad) == 0 ? ncclSuccess : ncclSystemError;
  }
  ncclResult_t pollCq(uint64_t cq, std::vector<WorkCompletion>* out) override {
    out->clear();
    ibv_wc wc[16];
    int n = ibv_poll_cq(cqs_.at(cq), 16, wc);
    if (n < 0) return ncclSystemError;
    for (int i = 0; i < n; i++) {
      WorkCompletion w;
      w.wrId = wc[i].wr_id;
      w.ok = wc[i].status == IBV_WC_SUCCESS;
      if (!w.ok)
        w.status = e_.statusStr ? e_.statusStr(wc[i].status)
                                : "verbs status " + std::to_string(static_cast<int>(wc[i].status));
      w.isRecv = (wc[i].opcode & IBV_WC_RECV) != 0;
      w.hasImm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
      w.imm = wc[i].imm_data;
      out->push_back(w);
    }
    return ncclSuccess;
  }

 private:
  void* lib_;
  Entry e_;
  ibv_context* ctx_;
  std::string device_;
  int port_;
  int gidTableLen_ = 0;
  uint64_t next_ = 1;
  std::map<uint64_t, ibv_pd*> pds_;
  std::map<uint64_t, ibv_mr*> mrs_;
  std::map<uint64_t, ibv_cq*> cqs_;
  std::map<uint32_t, ibv_qp*> qps_;
};

}  // namespace

std::unique_ptr<Verbs> openSystemVerbs(const std::string& device, int port, std::string* why) {
  void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *why = "libibverbs.so.1 not found (rdma-core not installed)";
    return nullptr;
  }
  Entry e{};
  bool ok = load(lib, "ibv_get_device_list", &e.getList) && load(lib, "ibv_free_device_list", &e.freeList) &&
            load(lib, "ibv_get_device_name", &e.getName) && load(lib, "ibv_open_device", &e.open) &&
            load(lib, "ibv_close_device", &e.close) && load(lib, "ibv_query_port", &e.queryPort) &&
            load(lib, "ibv_query_gid", &e.queryGid) && load(lib, "ibv_alloc_pd", &e.allocPd) &&
            load(lib, "ibv_dealloc_pd", &e.deallocPd) && load(lib, "ibv_reg_mr", &e.regMr) &&
            load(lib, "ibv_dereg_mr", &e.deregMr) && load(lib, "ibv_create_cq", &e.createCq) &&
            load(lib, "ibv_destroy_cq", &e.destroyCq) && load(lib, "ibv_create_qp", &e.createQp) &&
            load(lib, "ibv_destroy_qp", &e.destroyQp) && load(lib, "ibv_modify_qp", &e.modifyQp);
  load(lib, "ibv_wc_status_str", &e.statusStr);
  if (!ok) {
    *why = "libibverbs.so.1 lacks a verbs entry point";
    dlclose(lib);
    return nullptr;
  }
  int n = 0;
  ibv_device** devs = e.getList(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; devs && i < n && !ctx; i++)
    if (device == e.getName(devs[i])) ctx = e.open(devs[i]);
  if (devs) e.freeList(devs);
  if (!ctx) {
    *why = "RDMA device " + device + " not found or cannot be opened";
    dlclose(lib);
    return nullptr;
  }
  return std::make_unique<SystemVerbs>(lib, e, ctx, device, port);
}

}  // namespace accl::ib
