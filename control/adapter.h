// The internal side of one adapter (architecture.md §6): its port and mempools, its memory region
// table, its endpoint on each of its engines (one port queue each; dataplane/steering.h for how
// frames reach the engine of their QP), the QP number allocator and the control plane. It is the
// one internal layer under the public NDK-style objects (control/ndk_*.cc): every PD, CQ, QP, SRQ,
// MR and MW is created there, through the public API, and uses this adapter's tables. It owns no
// QPs itself (docs/design.md, "One object model").
//
// Threading: control side only. The QPN allocator is safe from any thread; the rest is set up at
// open and read afterwards.
#pragma once

#include <tbb/concurrent_queue.h>
#include <atomic>
#include <cstdint>
#include <memory>

#include <optional>
#include <span>
#include <vector>

#include "control/control_plane.h"
#include "control/kernel_net.h"
#include "control/xdp.h"
#include "dataplane/cq.h"
#include "dataplane/engine.h"
#include "dataplane/fault.h"
#include "dataplane/mr.h"
#include "dataplane/port.h"
#include "dataplane/qp.h"
#include "dataplane/srq.h"
#include "dataplane/steering.h"
#include "urnic/status.h"

namespace urnic::ctl {

struct AdapterConfig {
  uint16_t port_id = 0;              // an ethdev port already probed (see eal.h)
  dp::PortConfig port{};             // port_id is taken from above
  std::optional<wire::MacAddr> mac;  // default: the port's MAC
  uint32_t ipv4 = 0;                 // host order; the adapter's IPv4 GID is ::ffff:a.b.c.d
  std::optional<wire::Ipv6Addr> ipv6;
  // Routing (urnic/route.h): the subnets' prefix lengths (0: none) and static routes.
  uint8_t ipv4_len = 0, ipv6_len = 0;
  std::vector<Route> routes;
  uint32_t max_qps = 1024;  // QPNs 2 .. max_qps-1 (0 and 1 are reserved, IBTA §10.2.4)
  uint32_t max_mrs = 1u << 16;
  uint64_t key_seed = 0;      // 0: seeded from the TSC
  bool start_control = true;  // start the control thread (ARP, ND, QP1) at open
  // Fault injection at the port boundary (testing builds; kNotSupported otherwise when active).
  FaultConfig tx_faults, rx_faults;
};

// A QP's set-up parameters; make_qp_config() turns them into the dataplane's QpConfig. The one QP
// set-up path: the NDK layer (control/ndk_qp.cc) and Adapter::create_qp both use it.
struct QpInit {
  uint32_t pd = 0;
  dp::Cq* send_cq = nullptr;
  dp::Cq* recv_cq = nullptr;
  dp::Srq* srq = nullptr;  // receives from this SRQ instead of an own receive queue
  void* context = nullptr;
  uint32_t sq_depth = 256;  // 1 .. dp::kMaxQueueDepth, rounded up to a power of two
  uint32_t rq_depth = 256;  // (ignored with an SRQ)
  uint32_t max_send_sge = dp::kMaxSge;
  uint32_t max_recv_sge = dp::kMaxSge;
  uint32_t max_inline = dp::kMaxInline;
  bool limit_outstanding = false;    // NDK: at most sq_depth / rq_depth requests outstanding
  bool adaptive_retransmit = false;  // dp::QpConfig::adaptive_retransmit
  BrokenRules broken_rules;          // dp::QpConfig::broken
  CongestionConfig congestion;       // dp::QpConfig::cc
};
// kInvalidParameter (as `*out` untouched) when a depth or limit is out of range.
Status make_qp_config(const QpInit& init, uint32_t qpn, dp::QpConfig* out) noexcept;

class Adapter {
 public:
  // Opens the port with one queue pair per engine and attaches endpoint i (queue i) to
  // engines[i] (1 .. dp::Steering::kMaxEngines of them; the same engine may serve several
  // queues). kInvalidParameter for no engine or too many; kDeviceNotReady /
  // kInsufficientResources from the port.
  static Status open(const AdapterConfig& cfg, std::span<dp::Engine* const> engines,
                     std::unique_ptr<Adapter>* out);
  static Status open(const AdapterConfig& cfg, dp::Engine* engine, std::unique_ptr<Adapter>* out) {
    return open(cfg, std::span<dp::Engine* const>(&engine, 1), out);
  }
  ~Adapter();
  Adapter(const Adapter&) = delete;
  Adapter& operator=(const Adapter&) = delete;

  const wire::MacAddr& mac() const noexcept { return mac_; }
  uint32_t ipv4() const noexcept { return cfg_.ipv4; }
  const std::optional<wire::Ipv6Addr>& ipv6() const noexcept { return cfg_.ipv6; }
  // Engine i of the adapter and its endpoint (port queue i); engine 0's endpoint carries the
  // control plane's frames.
  uint32_t engines() const noexcept { return static_cast<uint32_t>(eps_.size()); }
  dp::Endpoint& endpoint(uint32_t i = 0) noexcept { return *eps_[i]; }
  dp::Engine& engine(uint32_t i = 0) noexcept { return *engines_[i]; }
  dp::MrTable& mrs() noexcept { return *mrs_; }
  // Null with one engine. set_owner() before a QP's kAddQp on engine i, cleared after its
  // kDestroyQp.
  dp::Steering* steering() noexcept { return steering_.get(); }
  dp::Port& port() noexcept { return port_; }
  // The control plane: neighbours (ARP / ND), GIDs, QP1 management datagrams.
  ControlPlane& control() noexcept { return *control_; }

  uint32_t alloc_pd();

  // A QP number (2 .. max_qps - 1, IBTA §10.2.4 reserves 0 and 1) that no other QP of this
  // adapter holds until free_qpn(); 0 when none is free. The free numbers wait in a FIFO, so a
  // freed number is reused as late as possible (a stale peer packet is less likely to hit its
  // successor). Any thread, lock-free: many application threads create QPs at once (a TBB
  // concurrent queue; the control side, never the post/poll path). Freeing a number that is
  // not held does nothing.
  uint32_t alloc_qpn();
  void free_qpn(uint32_t qpn);
  // A held QP number's QP will run on engine `engine`: frames for it that another engine's queue
  // receives are handed to that one (dataplane/steering.h). Before its kAddQp; free_qpn()
  // forgets it.
  // Where the port steers by destination QP (dp::Port::qpn_flow), its rules send the QP's frames
  // to that engine's queue.
  void place_qpn(uint32_t qpn, uint32_t engine) noexcept;

  // Applies a transition on the engine (IBTA §10.3.1 table; see dp::validate_modify) and waits
  // for it: for the connection manager, which runs on the control thread of a launched engine.
  Status modify_qp(dp::Qp* qp, const dp::QpAttr& attr, uint32_t mask);
  // NdkFlush: every pending request completes with STATUS_CANCELLED; the QP enters ERR.
  Status flush_qp(dp::Qp* qp);

  // The engines' per-endpoint counters for this adapter (packets, drops by reason): engine i's,
  // and their sum; and the fault injectors' (zero when none is installed), summed over the
  // engines.
  const dp::EngineCounters& endpoint_counters(uint32_t i) { return eps_[i]->counters(); }
  dp::EngineCounters endpoint_counters();
  FaultCounters tx_fault_counters() const noexcept;
  // Replaces the fault injectors (an inactive config removes one) on the engine, between two
  // bursts; the old injectors' counters are gone with them. kNotSupported in a build without
  // URNIC_TESTING when a config is active. Control side, one thread at a time.
  Status set_faults(const FaultConfig& tx, const FaultConfig& rx);
  FaultCounters rx_fault_counters() const noexcept;

 private:
  explicit Adapter(const AdapterConfig& cfg) : cfg_(cfg) {}
  std::vector<XdpAddress> xdp_addresses() const;
  Status share_with_kernel();
  AdapterConfig cfg_;
  bool xdp_published_ = false;
  int kernel_ifindex_ = 0;  // AF_XDP: the interface shared with the kernel
  std::vector<KernelAddress> kernel_addrs_;
  bool uses_kernel_ = false;  // an address of the kernel's: its routes and neighbours
  dp::Port port_;
  wire::MacAddr mac_{};
  std::unique_ptr<dp::MrTable> mrs_;
  std::vector<std::unique_ptr<dp::Endpoint>> eps_;
  std::vector<dp::Engine*> engines_;
  std::unique_ptr<dp::Steering> steering_;
  // By QPN, the port's rte_flow rules for the QP (only when port_.qpn_flow()).
  std::unique_ptr<dp::Port::QpnRules[]> flows_;
  std::unique_ptr<ControlPlane> control_;
  // Per engine (null: none installed).
  std::vector<std::unique_ptr<dp::FaultInjector>> tx_fault_, rx_fault_;
  // Makes one injector per engine for `c` (none when inactive): the seeds differ per engine.
  static std::vector<std::unique_ptr<dp::FaultInjector>> make_faults(const FaultConfig& c,
                                                                     uint32_t engines);
  tbb::concurrent_queue<uint32_t> free_qpns_;      // the QPN allocator's FIFO
  std::unique_ptr<std::atomic<bool>[]> qpn_held_;  // by QPN: handed out, not yet freed
  std::atomic<uint32_t> next_pd_{1};
};

}  // namespace urnic::ctl
