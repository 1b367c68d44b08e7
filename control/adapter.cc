#include "control/adapter.h"

#include <rte_cycles.h>

#include <algorithm>

#include "urnic/types.h"

namespace urnic::ctl {
namespace {

uint32_t round_pow2(uint32_t n) {
  uint32_t c = 1;
  while (c < n) c <<= 1;
  return c;
}

}  // namespace

Status Adapter::open(const AdapterConfig& cfg, dp::Engine* engine, std::unique_ptr<Adapter>* out) {
  if (engine == nullptr || engine->running() || cfg.max_qps < 3 || cfg.max_qps > (1u << 24))
    return Status::kInvalidParameter;
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
  a->control_ = std::make_unique<ControlPlane>(*a);
  a->ep_->set_control_sink(a->control_.get());
  engine->add_endpoint(a->ep_.get());
  if (cfg.start_control) a->control_->start();
  *out = std::move(a);
  return Status::kSuccess;
}

Adapter::~Adapter() {
  if (control_) control_->stop();
  // Engines must be stopped before their adapters go away; QPs are detached first so that a
  // still-owned engine (manual mode) no longer references them.
  for (auto& qp : qps_) {
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kDestroyQp;
    m.ep = ep_.get();
    m.qp = qp.get();
    (void)engine_->call(m);
  }
  if (ep_) ep_->tx_drop_all();
}

uint32_t Adapter::alloc_pd() { return next_pd_.fetch_add(1, std::memory_order_relaxed); }

Status Adapter::create_cq(uint32_t depth, std::unique_ptr<dp::Cq>* out) {
  if (depth == 0 || depth > kMaxCqDepth) return Status::kInvalidParameter;
  *out = std::make_unique<dp::Cq>(depth);
  return Status::kSuccess;
}

Status Adapter::register_mr(uint32_t pd, const void* addr, uint64_t length, uint32_t mr_flags,
                            uint32_t* key) {
  return mrs_->register_region(pd, reinterpret_cast<uint64_t>(addr), length,
                               dp::access_from_mr_flags(mr_flags), key);
}

Status Adapter::alloc_fast_register_mr(uint32_t pd, uint32_t max_pages, bool remote_access,
                                       uint32_t* key) {
  return mrs_->alloc_fast_register(pd, max_pages, remote_access, key);
}

Status Adapter::deregister_mr(uint32_t key) { return mrs_->deregister(key); }

Status Adapter::create_qp(const QpInit& init, dp::Qp** out) {
  if (init.send_cq == nullptr || init.recv_cq == nullptr || init.sq_depth == 0 ||
      init.rq_depth == 0 || init.sq_depth > 32768 || init.rq_depth > 32768 ||
      init.max_send_sge > dp::kMaxSge || init.max_recv_sge > dp::kMaxSge ||
      init.max_inline > dp::kMaxInline)
    return Status::kInvalidParameter;
  std::lock_guard lock(mu_);
  const uint32_t qpn = next_free_qpn();
  if (qpn == 0) return Status::kInsufficientResources;
  dp::QpConfig qc;
  qc.qpn = qpn;
  qc.pd = init.pd;
  qc.send_cq = init.send_cq;
  qc.recv_cq = init.recv_cq;
  qc.context = init.context;
  qc.sq_depth = round_pow2(init.sq_depth);
  qc.rq_depth = round_pow2(init.rq_depth);
  qc.max_send_sge = init.max_send_sge;
  qc.max_recv_sge = init.max_recv_sge;
  qc.max_inline = init.max_inline;
  auto qp = std::make_unique<dp::Qp>(qc);
  dp::MailboxMsg m;
  m.kind = dp::MailboxMsg::Kind::kAddQp;
  m.ep = ep_.get();
  m.qp = qp.get();
  if (Status s = engine_->call(m); s != Status::kSuccess) return s;
  *out = qp.get();
  qps_.push_back(std::move(qp));
  return Status::kSuccess;
}

uint32_t Adapter::next_free_qpn() {
  // QPNs are handed out from 2 up and reused only after destroy.
  for (uint32_t i = 0; i + 2 < cfg_.max_qps; ++i) {
    const uint32_t cand = 2 + (next_qpn_ - 2 + i) % (cfg_.max_qps - 2);
    if (ep_->qp(cand) == nullptr &&
        std::none_of(qps_.begin(), qps_.end(), [&](const auto& q) { return q->qpn() == cand; }) &&
        std::find(reserved_qpns_.begin(), reserved_qpns_.end(), cand) == reserved_qpns_.end()) {
      next_qpn_ = cand + 1;
      return cand;
    }
  }
  return 0;
}

uint32_t Adapter::reserve_qpn() {
  std::lock_guard lock(mu_);
  const uint32_t qpn = next_free_qpn();
  if (qpn != 0) reserved_qpns_.push_back(qpn);
  return qpn;
}

void Adapter::release_qpn(uint32_t qpn) {
  std::lock_guard lock(mu_);
  std::erase(reserved_qpns_, qpn);
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

Status Adapter::destroy_qp(dp::Qp* qp) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(qps_.begin(), qps_.end(), [&](const auto& q) { return q.get() == qp; });
  if (it == qps_.end()) return Status::kInvalidParameter;
  dp::MailboxMsg m;
  m.kind = dp::MailboxMsg::Kind::kDestroyQp;
  m.ep = ep_.get();
  m.qp = qp;
  (void)engine_->call(m);
  qps_.erase(it);
  return Status::kSuccess;
}

dp::QpCounters Adapter::qp_counter_totals() {
  std::lock_guard lock(mu_);
  dp::QpCounters t;
  for (const auto& qp : qps_) t.add(qp->counters);
  return t;
}

wire::NetHeaders Adapter::address_to(const Adapter& peer, bool ipv6) const {
  wire::NetHeaders n;
  n.src_mac = mac_;
  n.dst_mac = peer.mac_;
  n.ipv6 = ipv6;
  n.src_ip4 = cfg_.ipv4;
  n.dst_ip4 = peer.cfg_.ipv4;
  if (ipv6 && cfg_.ipv6 && peer.cfg_.ipv6) {
    n.src_ip6 = *cfg_.ipv6;
    n.dst_ip6 = *peer.cfg_.ipv6;
  }
  n.hop_limit = 64;
  return n;
}

}  // namespace urnic::ctl
