#include "control/adapter.h"

#include <rte_cycles.h>

#include <algorithm>
#include <bit>

#include "urnic/config.h"
#include "urnic/types.h"

namespace urnic::ctl {

Status make_qp_config(const QpInit& init, uint32_t qpn, dp::QpConfig* out) noexcept {
  const bool srq = init.srq != nullptr;
  if (init.send_cq == nullptr || init.recv_cq == nullptr || init.sq_depth == 0 ||
      init.sq_depth > dp::kMaxQueueDepth || init.max_send_sge > dp::kMaxSge ||
      init.max_inline > dp::kMaxInline ||
      (!srq && (init.rq_depth == 0 || init.rq_depth > dp::kMaxQueueDepth ||
                init.max_recv_sge > dp::kMaxSge)))
    return Status::kInvalidParameter;
  dp::QpConfig c;
  c.qpn = qpn;
  c.pd = init.pd;
  c.send_cq = init.send_cq;
  c.recv_cq = init.recv_cq;
  c.context = init.context;
  c.sq_depth = std::bit_ceil(init.sq_depth);
  c.rq_depth = srq ? 1 : std::bit_ceil(init.rq_depth);
  c.max_send_sge = init.max_send_sge;
  c.max_recv_sge = srq ? init.srq->max_sge() : init.max_recv_sge;
  c.max_inline = init.max_inline;
  c.srq = init.srq;
  c.sq_limit = init.limit_outstanding ? init.sq_depth : 0;
  c.rq_limit = init.limit_outstanding && !srq ? init.rq_depth : 0;
  c.adaptive_retransmit = init.adaptive_retransmit;
  c.broken = init.broken_rules;
  c.cc = init.congestion;
  *out = c;
  return Status::kSuccess;
}
Status Adapter::open(const AdapterConfig& cfg, dp::Engine* engine, std::unique_ptr<Adapter>* out) {
  if (engine == nullptr || cfg.max_qps < 3 || cfg.max_qps > (1u << 24))
    return Status::kInvalidParameter;
  if (!kTesting && (cfg.tx_faults.active() || cfg.rx_faults.active()))
    return Status::kNotSupported;  // the injector is compiled out (URNIC_TESTING=OFF)
  std::unique_ptr<Adapter> a(new Adapter(cfg));
  dp::PortConfig pc = cfg.port;
  pc.port_id = cfg.port_id;
  if (Status s = a->port_.open(pc); s != Status::kSuccess) return s;
  a->mac_ = cfg.mac ? *cfg.mac : a->port_.mac();
  const uint64_t seed = cfg.key_seed != 0 ? cfg.key_seed : rte_get_tsc_cycles() | 1;
  a->mrs_ = std::make_unique<dp::MrTable>(cfg.max_mrs, seed);
  a->ep_ =
      std::make_unique<dp::Endpoint>(&a->port_, 0, a->port_.pool(), a->mrs_.get(), cfg.max_qps);
  a->engine_ = engine;
  a->qpn_held_ = std::make_unique<std::atomic<bool>[]>(cfg.max_qps);
  for (uint32_t q = 2; q < cfg.max_qps; ++q) a->free_qpns_.push(q);
  a->control_ =
      std::make_unique<ControlPlane>(LocalAddresses{a->mac_, cfg.ipv4, cfg.ipv6}, *a->ep_);
  a->ep_->set_control_sink(a->control_.get());
  if (cfg.tx_faults.active()) a->tx_fault_ = std::make_unique<dp::FaultInjector>(cfg.tx_faults);
  if (cfg.rx_faults.active()) a->rx_fault_ = std::make_unique<dp::FaultInjector>(cfg.rx_faults);
  a->ep_->set_faults(a->rx_fault_.get(), a->tx_fault_.get());
  // Through the engine's mailbox: it may be running (issue 14 item 6).
  if (Status s = engine->add_endpoint(a->ep_.get()); s != Status::kSuccess) return s;
  if (cfg.start_control) a->control_->start();
  *out = std::move(a);
  return Status::kSuccess;
}

Adapter::~Adapter() {
  if (control_) control_->stop();
  // The engine stops serving the endpoint (a no-op when the public adapter's close did so
  // already): an adapter opened on it added it, whether it runs or not.
  if (engine_ != nullptr && ep_) {
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kRemoveEndpoint;
    m.ep = ep_.get();
    (void)engine_->call(m);
  }
  // Every QP was destroyed by the objects that own them (control/ndk_qp.cc) before this.
  if (ep_) {
    ep_->tx_drop_all();
    ep_->set_faults(nullptr, nullptr);
    if (tx_fault_) tx_fault_->clear();
    if (rx_fault_) rx_fault_->clear();
  }
}

FaultCounters Adapter::tx_fault_counters() const noexcept {
  return tx_fault_ ? tx_fault_->counters() : FaultCounters{};
}

FaultCounters Adapter::rx_fault_counters() const noexcept {
  return rx_fault_ ? rx_fault_->counters() : FaultCounters{};
}

Status Adapter::set_faults(const FaultConfig& tx, const FaultConfig& rx) {
  if (!kTesting && (tx.active() || rx.active())) return Status::kNotSupported;
  std::unique_ptr<dp::FaultInjector> t, r;
  if (tx.active()) t = std::make_unique<dp::FaultInjector>(tx);
  if (rx.active()) r = std::make_unique<dp::FaultInjector>(rx);
  dp::MailboxMsg m;
  m.kind = dp::MailboxMsg::Kind::kSetFaults;
  m.ep = ep_.get();
  m.rx_fault = r.get();
  m.tx_fault = t.get();
  if (Status s = engine_->call(m); s != Status::kSuccess) return s;
  tx_fault_ = std::move(t);  // the old injectors are no longer used by the engine
  rx_fault_ = std::move(r);
  return Status::kSuccess;
}

uint32_t Adapter::alloc_pd() { return next_pd_.fetch_add(1, std::memory_order_relaxed); }

uint32_t Adapter::alloc_qpn() {
  uint32_t qpn = 0;
  if (!free_qpns_.try_pop(qpn)) return 0;
  qpn_held_[qpn].store(true, std::memory_order_relaxed);
  return qpn;
}

void Adapter::free_qpn(uint32_t qpn) {
  if (qpn < 2 || qpn >= cfg_.max_qps) return;
  // Only the holder's free returns the number: a second free finds it not held.
  if (qpn_held_[qpn].exchange(false, std::memory_order_relaxed)) free_qpns_.push(qpn);
}

Status Adapter::modify_qp(dp::Qp* qp, const dp::QpAttr& attr, uint32_t mask) {
  if (qp == nullptr) return Status::kInvalidParameter;
  dp::MailboxMsg m;
  m.kind = dp::MailboxMsg::Kind::kModifyQp;
  m.ep = ep_.get();
  m.qp = qp;
  m.attr = attr;
  m.mask = mask;
  return engine_->call(m);
}

Status Adapter::flush_qp(dp::Qp* qp) {
  if (qp == nullptr) return Status::kInvalidParameter;
  dp::MailboxMsg m;
  m.kind = dp::MailboxMsg::Kind::kFlushQp;
  m.ep = ep_.get();
  m.qp = qp;
  return engine_->call(m);
}

}  // namespace urnic::ctl
