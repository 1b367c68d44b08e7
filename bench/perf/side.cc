#include "bench/perf/side.h"

#include <sched.h>
#include <sys/mman.h>

#include <random>

#include "urnic/types.h"

namespace urnic::perf {

void Driver::poll() noexcept {
  if (!manual_) return;
  if (engine_.run_once()) {
    idle_ = 0;
  } else if (idle_yield_ != 0 && ++idle_ >= idle_yield_) {
    // Shared cores (CI): let the peer process run.
    sched_yield();
    idle_ = 0;
  }
}

bool Side::create(Test test, uint32_t nqps, uint32_t sq_depth, uint32_t rq_depth,
                  const Geometry& geo, const std::array<uint8_t, 16>& gid, std::string* err) {
  geo_ = geo;
  pd_ = adapter_.alloc_pd();
  const uint32_t scq_depth = nqps * sq_depth + 64, rcq_depth = nqps * rq_depth + 64;
  if (adapter_.create_cq(scq_depth, &scq_) != Status::kSuccess ||
      adapter_.create_cq(rcq_depth, &rcq_) != Status::kSuccess) {
    *err = "cannot create the CQs";
    return false;
  }
  mem_len_ = geo_.per_qp() * nqps;
  void* m = ::mmap(nullptr, mem_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    *err = "cannot allocate " + std::to_string(mem_len_) + " bytes of buffers";
    mem_ = nullptr;
    return false;
  }
  mem_ = static_cast<uint8_t*>(m);
  const uint32_t flags = mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteRead |
                         mr_flag::kAllowRemoteWrite | mr_flag::kRdmaReadSink |
                         mr_flag::kAllowRemoteAtomic;
  if (Status s = adapter_.register_mr(pd_, mem_, mem_len_, flags, &key_); s != Status::kSuccess) {
    *err = "cannot register the buffer: " + std::string(to_string(s));
    return false;
  }
  registered_ = true;

  std::random_device rd;
  std::mt19937 rng(rd());
  const bool reads = test.verb == Verb::kRead || test.verb == Verb::kAtomic;
  for (uint32_t i = 0; i < nqps; ++i) {
    ctl::QpInit qi;
    qi.pd = pd_;
    qi.send_cq = scq_.get();
    qi.recv_cq = rcq_.get();
    qi.sq_depth = sq_depth;
    qi.rq_depth = rq_depth;
    qi.max_send_sge = 1;
    qi.max_recv_sge = 1;
    QpRes r;
    if (Status s = adapter_.create_qp(qi, &r.qp); s != Status::kSuccess) {
      *err = "cannot create QP " + std::to_string(i) + ": " + std::string(to_string(s));
      return false;
    }
    dp::QpAttr at;
    at.state = dp::QpState::kInit;
    at.access = dp::access::kRemoteRead | dp::access::kRemoteWrite | dp::access::kRemoteAtomic;
    if (Status s = adapter_.modify_qp(r.qp, at, dp::qp_attr::kState | dp::qp_attr::kAccessFlags);
        s != Status::kSuccess) {
      *err = "QP to INIT: " + std::string(to_string(s));
      return false;
    }
    uint8_t* base = mem_ + geo_.per_qp() * i;
    r.src = base;
    r.last = base + geo_.region();
    r.target = r.last + geo_.last_len();
    r.local.qpn = r.qp->qpn();
    r.local.psn = static_cast<uint32_t>(rng()) & 0xFFFFFF;  // perftest: lrand48() & 0xffffff
    r.local.out_reads = reads ? kMaxOutReads : 1;
    r.local.rkey = key_;
    r.local.vaddr = reinterpret_cast<uint64_t>(r.target);
    r.local.gid = gid;
    // Bulk data is a known stream; the advertised region holds one too when the peer reads it.
    fill_pattern(r.src, geo_.region(), bulk_seed(r.local.psn), 0);
    if (test.verb == Verb::kRead)
      fill_pattern(r.target, geo_.region(), region_seed(r.local.psn), 0);
    qps_.push_back(r);
  }
  return true;
}

bool Side::connect(size_t i, const Dest& remote, uint32_t mtu, const wire::NetHeaders& av,
                   std::string* err) {
  QpRes& r = qps_[i];
  r.remote = remote;
  namespace qa = dp::qp_attr;
  dp::QpAttr at;
  at.state = dp::QpState::kRtr;
  at.av = av;
  at.path_mtu = mtu;
  at.dest_qpn = remote.qpn;
  at.rq_psn = remote.psn;  // the advertised PSN is the advertiser's send PSN
  at.max_dest_rd_atomic = static_cast<uint8_t>(r.local.out_reads);
  at.min_rnr_timer = kMinRnrTimer;
  if (Status s = adapter_.modify_qp(r.qp, at,
                                    qa::kState | qa::kAv | qa::kPathMtu | qa::kDestQpn |
                                        qa::kRqPsn | qa::kMaxDestRdAtomic | qa::kMinRnrTimer);
      s != Status::kSuccess) {
    *err = "QP to RTR: " + std::string(to_string(s));
    return false;
  }
  at.state = dp::QpState::kRts;
  at.sq_psn = r.local.psn;
  at.timeout = kQpTimeout;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  const uint32_t out = remote.out_reads == 0 ? 1 : std::min(remote.out_reads, kMaxOutReads);
  at.max_rd_atomic = static_cast<uint8_t>(out);
  if (Status s = adapter_.modify_qp(r.qp, at,
                                    qa::kState | qa::kSqPsn | qa::kTimeout | qa::kRetryCnt |
                                        qa::kRnrRetry | qa::kMaxRdAtomic);
      s != Status::kSuccess) {
    *err = "QP to RTS: " + std::string(to_string(s));
    return false;
  }
  return true;
}

void Side::destroy() {
  for (auto& r : qps_)
    if (r.qp != nullptr) (void)adapter_.destroy_qp(r.qp);
  qps_.clear();
  if (registered_) (void)adapter_.deregister_mr(key_);
  registered_ = false;
  if (mem_ != nullptr) ::munmap(mem_, mem_len_);
  mem_ = nullptr;
  scq_.reset();
  rcq_.reset();
}

}  // namespace urnic::perf
