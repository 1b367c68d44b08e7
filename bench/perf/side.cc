#include "bench/perf/side.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

namespace urnic::perf {
namespace {

// Closes `h` and waits until the object is gone (a QP's close pends while its work is flushed),
// stepping the engine when this thread drives it.
template <class T>
void close_and_wait(Handle<T>& h, Driver& d) {
  std::atomic<bool> gone{false};
  auto on_closed = [](void* c) { static_cast<std::atomic<bool>*>(c)->store(true); };
  if (h.close(on_closed, &gone) != Status::kPending) return;
  while (!gone.load()) {
    d.poll();
    if (!d.manual()) std::this_thread::yield();
  }
}

std::string what(const char* step, Status s) {
  return std::string(step) + ": " + std::string(to_string(s));
}

}  // namespace

void Driver::poll() noexcept {
  if (!manual_) return;
  bool any = false;
  for (Engine* e : engines_) any |= e->run_once();
  if (any) {
    idle_ = 0;
  } else if (idle_yield_ != 0 && ++idle_ >= idle_yield_) {
    // Shared cores (CI): let the peer process run.
    sched_yield();
    idle_ = 0;
  }
}

Status QpRes::post(const Request& r) noexcept {
  const std::span<const Sge> sgl(&r.sge, 1);
  switch (r.verb) {
    case Verb::kSend:
      if (ah.valid())
        return ext->send_datagram(r.context, {&r.sge, 1}, r.flags, ah, remote.qpn, kUdQkey);
      return qp->send(r.context, sgl, r.flags);
    case Verb::kWrite:
      return qp->write(r.context, sgl, r.remote_addr, r.rkey, r.flags);
    case Verb::kRead:
      return qp->read(r.context, sgl, r.remote_addr, r.rkey, r.flags);
    case Verb::kAtomic:
      return ext->fetch_add(r.context, r.sge, r.remote_addr, r.rkey, 1, r.flags);
  }
  return Status::kInvalidParameter;
}

bool Side::create(Test test, uint32_t nqps, uint32_t sq_depth, uint32_t rq_depth,
                  const Geometry& geo, const std::array<uint8_t, 16>& gid, std::string* err) {
  geo_ = geo;
  // One CQ per direction and engine holds the queues of that engine's QPs: -q / --engines and
  // -t / -r multiply.
  const uint32_t engines = adapter_.engines();
  const uint64_t per_engine = (uint64_t{nqps} + engines - 1) / engines;
  const uint64_t scq_need = per_engine * sq_depth + 64, rcq_need = per_engine * rq_depth + 64;
  const uint32_t max_cq = adapter_.adapter_info().max_cq_depth;
  if (scq_need > max_cq || rcq_need > max_cq) {
    *err = std::to_string(nqps) + " QPs with queues of " + std::to_string(sq_depth) + " / " +
           std::to_string(rq_depth) + " need a CQ of " +
           std::to_string(std::max(scq_need, rcq_need)) + " entries; the adapter's largest is " +
           std::to_string(max_cq) + ": lower -q, -t or -r";
    return false;
  }
  const auto scq_depth = static_cast<uint32_t>(scq_need),
             rcq_depth = static_cast<uint32_t>(rcq_need);
  if (Status s = adapter_.create_pd(nullptr, nullptr, &pd_); s != Status::kSuccess) {
    *err = what("cannot create the PD", s);
    return false;
  }
  // -e: the CQs notify the waiter (events.h); otherwise nobody arms them.
  EventWaiter* ev = driver_.events();
  const CqNotificationCallback notify = ev != nullptr ? &EventWaiter::on_notify : nullptr;
  scq_.resize(engines);
  rcq_.resize(engines);
  for (uint32_t e = 0; e < engines; ++e) {
    const uint64_t on = uint64_t{1} << e;  // NdkCreateCq's affinity: engine e
    if (Status s = adapter_.create_cq(scq_depth, notify, ev, on, nullptr, nullptr, &scq_[e]);
        s != Status::kSuccess) {
      *err = what("cannot create the send CQ", s);
      return false;
    }
    if (Status s = adapter_.create_cq(rcq_depth, notify, ev, on, nullptr, nullptr, &rcq_[e]);
        s != Status::kSuccess) {
      *err = what("cannot create the receive CQ", s);
      return false;
    }
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
  if (Status s = pd_->create_mr(false, nullptr, nullptr, &mr_); s != Status::kSuccess) {
    *err = what("cannot create the MR", s);
    return false;
  }
  if (Status s = mr_->register_mr(mem_, mem_len_, flags, nullptr, nullptr); s != Status::kSuccess) {
    *err = what("cannot register the buffer", s);
    return false;
  }
  key_ = mr_->get_remote_token();  // = the local token (mr.h)

  std::random_device rd;
  std::mt19937 rng(rd());
  const bool reads = test.verb == Verb::kRead || test.verb == Verb::kAtomic;
  for (uint32_t i = 0; i < nqps; ++i) {
    QpRes r;
    if (!create_qp(i, rq_depth, sq_depth, &r, err)) return false;
    uint8_t* base = mem_ + geo_.per_qp() * i;
    r.src = base;
    r.last = base + geo_.region();
    r.target = r.last + geo_.last_len();
    r.local.qpn = r.conn->qpn();
    r.local.psn = static_cast<uint32_t>(rng()) & 0xFFFFFF;  // perftest: lrand48() & 0xffffff
    r.local.out_reads = reads ? opts_.out_reads : 1;
    r.local.rkey = key_;
    r.local.vaddr = reinterpret_cast<uint64_t>(r.target);
    r.local.gid = gid;
    // Bulk data is a known stream; the advertised region holds one too when the peer reads it.
    fill_pattern(r.src, geo_.region(), bulk_seed(r.local.psn), 0);
    if (test.verb == Verb::kRead)
      fill_pattern(r.target, geo_.region(), region_seed(r.local.psn), 0);
    qps_.push_back(std::move(r));
  }
  return true;
}

bool Side::create_qp(uint32_t i, uint32_t rq_depth, uint32_t sq_depth, QpRes* r, std::string* err) {
  const uint32_t engines = adapter_.engines();
  Cq& rcq = *rcq_[i % engines];
  Cq& scq = *scq_[i % engines];
  // A datagram QP starts in INIT with its Q_Key; an RC QP is taken there with every access
  // right (the peer's READs, WRITEs and atomics).
  const Status s = opts_.ud ? create_datagram_qp(*pd_, rcq, scq, nullptr, nullptr, rq_depth,
                                                 sq_depth, 1, 1, opts_.inline_size, kUdQkey, &r->qp)
                            : pd_->create_qp(rcq, scq, nullptr, rq_depth, sq_depth, 1, 1,
                                             opts_.inline_size, nullptr, nullptr, &r->qp);
  if (s != Status::kSuccess) {
    *err = "cannot create QP " + std::to_string(i) + ": " + std::string(to_string(s));
    return false;
  }
  r->ext = r->qp->query_extension<QpExtension>();
  r->conn = r->qp->query_extension<QpConnectExtension>();
  if (r->ext == nullptr || r->conn == nullptr) {
    *err = "the QP lacks the urnic extensions";
    return false;
  }
  if (opts_.ud) return true;
  QpAttributes at;
  at.state = QpState::kInit;
  at.access = qp_access::kAll;
  if (Status st =
          r->conn->modify(at, qp_attr_mask::kState | qp_attr_mask::kAccessFlags, nullptr, nullptr);
      st != Status::kSuccess) {
    *err = what("QP to INIT", st);
    return false;
  }
  return true;
}

// UD (perftest's ctx_modify_qp_to_rtr / rts for UD): RTR and RTS with the send PSN, and an
// address handle to the peer's GID.
bool Side::connect_datagram(QpRes& r, const AddressVector& av, std::string* err) {
  QpAttributes at;
  at.state = QpState::kRtr;
  if (Status s = r.conn->modify(at, qp_attr_mask::kState, nullptr, nullptr);
      s != Status::kSuccess) {
    *err = what("QP to RTR", s);
    return false;
  }
  at.state = QpState::kRts;
  at.sq_psn = r.local.psn;
  if (Status s = r.conn->modify(at, qp_attr_mask::kState | qp_attr_mask::kSqPsn, nullptr, nullptr);
      s != Status::kSuccess) {
    *err = what("QP to RTS", s);
    return false;
  }
  if (Status s = create_address_handle(adapter_, av, &r.ah); s != Status::kSuccess) {
    *err = s == Status::kHostUnreachable
               ? "no ARP/ND answer from the peer (or its gateway), or no route to it (--route)"
               : what("address handle", s);
    return false;
  }
  return true;
}

bool Side::connect(size_t i, const Dest& remote, uint32_t mtu, const AddressVector& av,
                   std::string* err) {
  QpRes& r = qps_[i];
  r.remote = remote;
  if (opts_.ud) return connect_datagram(r, av, err);
  namespace qa = qp_attr_mask;
  QpAttributes at;
  at.state = QpState::kRtr;
  at.av = av;
  at.path_mtu = mtu;
  at.dest_qpn = remote.qpn;
  at.rq_psn = remote.psn;  // the advertised PSN is the advertiser's send PSN
  at.max_dest_rd_atomic = static_cast<uint8_t>(r.local.out_reads);
  at.min_rnr_timer = kMinRnrTimer;
  at.selective_repeat = opts_.selective_repeat;
  if (Status s = r.conn->modify(at,
                                qa::kState | qa::kAv | qa::kPathMtu | qa::kDestQpn | qa::kRqPsn |
                                    qa::kMaxDestRdAtomic | qa::kMinRnrTimer | qa::kSelectiveRepeat,
                                nullptr, nullptr);
      s != Status::kSuccess) {
    *err = s == Status::kHostUnreachable ? "no ARP/ND answer from the peer (or, behind a router, "
                                           "its gateway), or no route to it (--route)"
                                         : what("QP to RTR", s);
    return false;
  }
  at.state = QpState::kRts;
  at.sq_psn = r.local.psn;
  at.timeout = opts_.timeout;
  at.retry_cnt = 7;
  at.rnr_retry = 7;
  // What the peer can take, and no more than -o here.
  const uint32_t out = remote.out_reads == 0 ? 1 : std::min(remote.out_reads, opts_.out_reads);
  at.max_rd_atomic = static_cast<uint8_t>(out);
  if (Status s = r.conn->modify(
          at,
          qa::kState | qa::kSqPsn | qa::kTimeout | qa::kRetryCnt | qa::kRnrRetry | qa::kMaxRdAtomic,
          nullptr, nullptr);
      s != Status::kSuccess) {
    *err = what("QP to RTS", s);
    return false;
  }
  return true;
}

void Side::destroy() {
  Driver& d = driver_;
  // QPs first (their close flushes outstanding work), then the registration: the buffer is
  // unmapped only once nothing can reach it.
  for (auto& r : qps_) close_and_wait(r.qp, d);
  qps_.clear();
  close_and_wait(mr_, d);
  if (mem_ != nullptr) ::munmap(mem_, mem_len_);
  mem_ = nullptr;
  for (auto& c : scq_) close_and_wait(c, d);
  for (auto& c : rcq_) close_and_wait(c, d);
  scq_.clear();
  rcq_.clear();
  close_and_wait(pd_, d);
}

}  // namespace urnic::perf
