#include "control/adapter.h"

#include <rte_cycles.h>

#include <algorithm>
#include <bit>

#include "control/kernel_net.h"
#include "control/xdp.h"
#include "dataplane/log.h"
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
std::vector<std::unique_ptr<dp::FaultInjector>> Adapter::make_faults(const FaultConfig& c,
                                                                     uint32_t engines) {
  std::vector<std::unique_ptr<dp::FaultInjector>> v(engines);
  if (!c.active()) return v;
  for (uint32_t i = 0; i < engines; ++i) {
    FaultConfig ci = c;
    ci.seed = c.seed + i;  // each queue its own pattern, the same for a given seed
    v[i] = std::make_unique<dp::FaultInjector>(ci);
  }
  return v;
}

// The adapter's addresses as urnic's XDP program names them: RoCEv2 to them, and their ARP / ND,
// are urnic's (it answers for them itself).
std::vector<XdpAddress> Adapter::xdp_addresses() const {
  std::vector<XdpAddress> v;
  // The kernel answers ARP / ND for its own addresses; urnic for the others.
  auto flags = [&](const Gid& g) {
    const bool kernels = std::any_of(kernel_addrs_.begin(), kernel_addrs_.end(),
                                     [&](const KernelAddress& k) { return k.addr == g; });
    return kernels ? xdp_addr::kRoce : xdp_addr::kRoce | xdp_addr::kNeigh;
  };
  if (cfg_.ipv4 != 0) {
    const Gid g = gid_from_ipv4(cfg_.ipv4);
    v.push_back(XdpAddress{g, flags(g)});
  }
  if (cfg_.ipv6) v.push_back(XdpAddress{*cfg_.ipv6, flags(*cfg_.ipv6)});
  // GID 0, the MAC's link-local address (as rxe's): UD peers that take the first GID (libfabric's
  // verbs provider, UCX) address it. The kernel holds the same address when its IPv6 is on.
  const Gid ll = link_local_gid(mac_);
  v.push_back(XdpAddress{ll, flags(ll)});
  return v;
}

// On an interface urnic shares with the kernel (AF_XDP): with no address configured the adapter
// takes the interface's own (its GIDs are then the kernel's addresses, as rxe's are), and when
// it uses any of the kernel's addresses, routes and neighbours come from the kernel.
Status Adapter::share_with_kernel() {
  kernel_ifindex_ = xdp_port_ifindex(cfg_.port_id);
  if (kernel_ifindex_ == 0) return Status::kSuccess;
  kernel_addrs_ = kernel_addresses(kernel_ifindex_);
  if (cfg_.ipv4 == 0 && !cfg_.ipv6) {
    for (const KernelAddress& k : kernel_addrs_) {
      if (gid_is_ipv4(k.addr) && cfg_.ipv4 == 0) {
        cfg_.ipv4 = gid_to_ipv4(k.addr);
        cfg_.ipv4_len = k.prefix;
      } else if (!gid_is_ipv4(k.addr) && !cfg_.ipv6) {
        cfg_.ipv6 = k.addr;
        cfg_.ipv6_len = k.prefix;
      }
    }
    if (cfg_.ipv4 == 0 && !cfg_.ipv6) {
      dp::log_line(dp::LogType::kCtl, RTE_LOG_ERR,
                   "port %u: no address given and its interface has none", cfg_.port_id);
      return Status::kInvalidParameter;
    }
  }
  uses_kernel_ = false;
  for (const XdpAddress& a : xdp_addresses())
    if ((a.flags & xdp_addr::kNeigh) == 0) uses_kernel_ = true;
  if (uses_kernel_ && !cfg_.routes.empty()) {
    dp::log_line(dp::LogType::kCtl, RTE_LOG_ERR,
                 "port %u: routes come from the kernel on an interface urnic shares with it "
                 "(an address of the interface's own); give no static route",
                 cfg_.port_id);
    return Status::kInvalidParameter;
  }
  return Status::kSuccess;
}

Status Adapter::open(const AdapterConfig& cfg, std::span<dp::Engine* const> engines,
                     std::unique_ptr<Adapter>* out) {
  if (engines.empty() || engines.size() > dp::Steering::kMaxEngines || cfg.max_qps < 3 ||
      cfg.max_qps > (1u << 24))
    return Status::kInvalidParameter;
  for (dp::Engine* e : engines)
    if (e == nullptr) return Status::kInvalidParameter;
  if (!kTesting && (cfg.tx_faults.active() || cfg.rx_faults.active()))
    return Status::kNotSupported;  // the injector is compiled out (URNIC_TESTING=OFF)
  if (std::string why; RouteTable::check(cfg.ipv4, cfg.ipv4_len, cfg.ipv6, cfg.ipv6_len, cfg.routes,
                                         &why) != Status::kSuccess) {
    dp::log_line(dp::LogType::kCtl, RTE_LOG_ERR, "port %u: %s", cfg.port_id, why.c_str());
    return Status::kInvalidParameter;
  }
  const auto n = static_cast<uint32_t>(engines.size());
  std::unique_ptr<Adapter> a(new Adapter(cfg));
  dp::PortConfig pc = cfg.port;
  pc.port_id = cfg.port_id;
  pc.queues = static_cast<uint16_t>(n);
  if (Status s = a->port_.open(pc); s != Status::kSuccess) return s;
  a->mac_ = cfg.mac ? *cfg.mac : a->port_.mac();  // before the XDP addresses (its link-local)
  if (Status s = a->share_with_kernel(); s != Status::kSuccess) return s;
  // An AF_XDP port running urnic's XDP program hands urnic only the frames for these addresses.
  std::string why;
  if (Status s = xdp_publish_addresses(cfg.port_id, a->xdp_addresses(), true, &why);
      s != Status::kSuccess) {
    dp::log_line(dp::LogType::kCtl, RTE_LOG_ERR, "port %u: XDP program: %s", cfg.port_id,
                 why.c_str());
    return s;
  }
  a->xdp_published_ = true;
  const uint64_t seed = cfg.key_seed != 0 ? cfg.key_seed : rte_get_tsc_cycles() | 1;
  a->mrs_ = std::make_unique<dp::MrTable>(cfg.max_mrs, seed);
  if (n > 1) a->steering_ = std::make_unique<dp::Steering>(n, cfg.max_qps);
  if (a->port_.qpn_flow()) a->flows_ = std::make_unique<dp::Port::QpnRules[]>(cfg.max_qps);
  a->tx_fault_ = make_faults(cfg.tx_faults, n);
  a->rx_fault_ = make_faults(cfg.rx_faults, n);
  for (uint32_t i = 0; i < n; ++i) {
    auto ep = std::make_unique<dp::Endpoint>(&a->port_, static_cast<uint16_t>(i),
                                             a->port_.pool(static_cast<uint16_t>(i)), a->mrs_.get(),
                                             cfg.max_qps);
    ep->set_steering(a->steering_.get());
    ep->set_faults(a->rx_fault_[i].get(), a->tx_fault_[i].get());
    a->eps_.push_back(std::move(ep));
  }
  a->qpn_held_ = std::make_unique<std::atomic<bool>[]>(cfg.max_qps);
  for (uint32_t q = 2; q < cfg.max_qps; ++q) a->free_qpns_.push(q);
  // ARP, ND and QP1 go through engine 0's queue (the others hand such frames to it).
  a->control_ = std::make_unique<ControlPlane>(
      LocalAddresses{a->mac_, a->cfg_.ipv4, a->cfg_.ipv6, a->cfg_.ipv4_len, a->cfg_.ipv6_len,
                     a->cfg_.routes, a->uses_kernel_ ? a->kernel_ifindex_ : 0},
      *a->eps_[0]);
  a->eps_[0]->set_control_sink(a->control_.get());
  // Through each engine's mailbox: it may be running (issue 14 item 6). On a failure the
  // destructor removes the endpoints added so far.
  for (uint32_t i = 0; i < n; ++i) {
    if (Status s = engines[i]->add_endpoint(a->eps_[i].get()); s != Status::kSuccess) return s;
    a->engines_.push_back(engines[i]);
  }
  if (cfg.start_control) a->control_->start();
  *out = std::move(a);
  return Status::kSuccess;
}

Adapter::~Adapter() {
  if (control_) control_->stop();
  // Each engine stops serving its endpoint (a no-op when the public adapter's close did so
  // already): an adapter opened on it added it, whether it runs or not.
  for (size_t i = 0; i < engines_.size(); ++i) {
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kRemoveEndpoint;
    m.ep = eps_[i].get();
    (void)engines_[i]->call(m);
  }
  // Every QP was destroyed by the objects that own them (control/ndk_qp.cc) before this.
  for (size_t i = 0; i < eps_.size(); ++i) {
    eps_[i]->tx_drop_all();
    eps_[i]->set_faults(nullptr, nullptr);
    if (tx_fault_[i]) tx_fault_[i]->clear();
    if (rx_fault_[i]) rx_fault_[i]->clear();
  }
  // Frames still in the hand-off rings go back to the pools before the port frees them.
  steering_.reset();
  // Another adapter may open the port again (with other addresses): forget ours.
  if (xdp_published_) (void)xdp_publish_addresses(cfg_.port_id, xdp_addresses(), false, nullptr);
}

dp::EngineCounters Adapter::endpoint_counters() {
  dp::EngineCounters c = eps_[0]->counters();
  for (size_t i = 1; i < eps_.size(); ++i) c.add(eps_[i]->counters());
  return c;
}

namespace {
// The injectors' counters summed over the engines (none installed: zero).
FaultCounters sum_faults(const std::vector<std::unique_ptr<dp::FaultInjector>>& v) noexcept {
  FaultCounters c;
  for (const auto& f : v)
    if (f) c.add(f->counters());
  return c;
}
}  // namespace

FaultCounters Adapter::tx_fault_counters() const noexcept { return sum_faults(tx_fault_); }

FaultCounters Adapter::rx_fault_counters() const noexcept { return sum_faults(rx_fault_); }

Status Adapter::set_faults(const FaultConfig& tx, const FaultConfig& rx) {
  if (!kTesting && (tx.active() || rx.active())) return Status::kNotSupported;
  auto t = make_faults(tx, engines());
  auto r = make_faults(rx, engines());
  for (uint32_t i = 0; i < engines(); ++i) {
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kSetFaults;
    m.ep = eps_[i].get();
    m.rx_fault = r[i].get();
    m.tx_fault = t[i].get();
    if (Status s = engines_[i]->call(m); s != Status::kSuccess) return s;
    tx_fault_[i] = std::move(t[i]);  // the old injectors are no longer used by the engine
    rx_fault_[i] = std::move(r[i]);
  }
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
  if (qpn_held_[qpn].exchange(false, std::memory_order_relaxed)) {
    if (steering_) steering_->set_owner(qpn, dp::Steering::kNoOwner);
    if (flows_) port_.unsteer_qpn(flows_[qpn]);
    free_qpns_.push(qpn);
  }
}

void Adapter::place_qpn(uint32_t qpn, uint32_t engine) noexcept {
  if (qpn >= cfg_.max_qps) return;
  if (steering_) steering_->set_owner(qpn, static_cast<uint8_t>(engine));
  if (flows_) flows_[qpn] = port_.steer_qpn(qpn, static_cast<uint16_t>(engine));
}

Status Adapter::modify_qp(dp::Qp* qp, const dp::QpAttr& attr, uint32_t mask) {
  if (qp == nullptr) return Status::kInvalidParameter;
  dp::MailboxMsg m;
  m.kind = dp::MailboxMsg::Kind::kModifyQp;
  m.ep = eps_[qp->config().engine].get();
  m.qp = qp;
  m.attr = attr;
  m.mask = mask;
  return engines_[qp->config().engine]->call(m);
}

Status Adapter::flush_qp(dp::Qp* qp) {
  if (qp == nullptr) return Status::kInvalidParameter;
  dp::MailboxMsg m;
  m.kind = dp::MailboxMsg::Kind::kFlushQp;
  m.ep = eps_[qp->config().engine].get();
  m.qp = qp;
  return engines_[qp->config().engine]->call(m);
}

}  // namespace urnic::ctl
