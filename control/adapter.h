// An RNIC adapter on one DPDK port (architecture.md §6): its port and mempool, its memory
// region table, protection domains, CQs and QPs, attached to an engine that runs its dataplane.
// This is the control plane's object model; the public NDK-style API (include/urnic/) is a thin
// layer over it.
//
// Threading: creation, modify and destroy calls come from the control side (any one thread at
// a time); posting goes straight to the QP rings (dp::Qp::post_send / post_recv) and polling to
// the CQ rings (dp::Cq::poll) from application threads, without locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "control/control_plane.h"
#include "dataplane/cq.h"
#include "dataplane/engine.h"
#include "dataplane/mr.h"
#include "dataplane/port.h"
#include "dataplane/qp.h"
#include "urnic/status.h"

namespace urnic::ctl {

struct AdapterConfig {
  uint16_t port_id = 0;              // an ethdev port already probed (see eal.h)
  dp::PortConfig port{};             // port_id is taken from above
  std::optional<wire::MacAddr> mac;  // default: the port's MAC
  uint32_t ipv4 = 0;                 // host order; the adapter's IPv4 GID is ::ffff:a.b.c.d
  std::optional<wire::Ipv6Addr> ipv6;
  uint32_t max_qps = 1024;  // QPNs 2 .. max_qps-1 (0 and 1 are reserved, IBTA §10.2.4)
  uint32_t max_mrs = 1u << 16;
  uint64_t key_seed = 0;      // 0: seeded from the TSC
  bool start_control = true;  // start the control thread (ARP, ND, QP1) at open
};

struct QpInit {
  uint32_t pd = 0;
  dp::Cq* send_cq = nullptr;
  dp::Cq* recv_cq = nullptr;
  void* context = nullptr;
  uint32_t sq_depth = 256;  // rounded up to a power of two
  uint32_t rq_depth = 256;
  uint32_t max_send_sge = dp::kMaxSge;
  uint32_t max_recv_sge = dp::kMaxSge;
  uint32_t max_inline = dp::kMaxInline;
};

class Adapter {
 public:
  // Opens the port and attaches the adapter's endpoint to `engine`, which must not be running
  // yet. kInvalidParameter / kDeviceNotReady / kInsufficientResources from the port.
  static Status open(const AdapterConfig& cfg, dp::Engine* engine, std::unique_ptr<Adapter>* out);
  ~Adapter();
  Adapter(const Adapter&) = delete;
  Adapter& operator=(const Adapter&) = delete;

  const wire::MacAddr& mac() const noexcept { return mac_; }
  uint32_t ipv4() const noexcept { return cfg_.ipv4; }
  const std::optional<wire::Ipv6Addr>& ipv6() const noexcept { return cfg_.ipv6; }
  dp::Endpoint& endpoint() noexcept { return *ep_; }
  dp::MrTable& mrs() noexcept { return *mrs_; }
  dp::Engine& engine() noexcept { return *engine_; }
  dp::Port& port() noexcept { return port_; }
  // The control plane: neighbours (ARP / ND), GIDs, QP1 management datagrams.
  ControlPlane& control() noexcept { return *control_; }

  uint32_t alloc_pd();

  // kInvalidParameter for depth 0 or above kMaxCqDepth.
  Status create_cq(uint32_t depth, std::unique_ptr<dp::Cq>* out);
  static constexpr uint32_t kMaxCqDepth = 1u << 20;

  // Registers [addr, addr + length) with NDK_MR_FLAG_* rights; *key is both lkey and rkey.
  Status register_mr(uint32_t pd, const void* addr, uint64_t length, uint32_t mr_flags,
                     uint32_t* key);
  Status alloc_fast_register_mr(uint32_t pd, uint32_t max_pages, bool remote_access, uint32_t* key);
  Status deregister_mr(uint32_t key);

  // Creates a QP in RESET, owned by the adapter. kInvalidParameter when a limit is exceeded,
  // kInsufficientResources when no QPN is free.
  Status create_qp(const QpInit& init, dp::Qp** out);
  // For QPs the NDK layer builds and installs on the engine itself (control/ndk_*.cc): a QP
  // number that neither create_qp nor another reservation hands out until release_qpn(). 0
  // when none is free.
  uint32_t reserve_qpn();
  void release_qpn(uint32_t qpn);
  // Applies a transition on the engine (IBTA §10.3.1 table; see dp::validate_modify).
  Status modify_qp(dp::Qp* qp, const dp::QpAttr& attr, uint32_t mask);
  // NdkFlush: every pending request completes with STATUS_CANCELLED; the QP enters ERR.
  Status flush_qp(dp::Qp* qp);
  Status destroy_qp(dp::Qp* qp);

  // Sum of the counters of every QP of this adapter (a snapshot: the engine keeps updating
  // them; each field is read once, so a total may lag by the packets of one step).
  dp::QpCounters qp_counter_totals();
  // The engine's per-endpoint counters for this adapter (packets, drops by reason).
  const dp::EngineCounters& endpoint_counters() { return ep_->counters(); }

  // The address vector for sending from this adapter to `peer` (same IP family as `ipv6`).
  wire::NetHeaders address_to(const Adapter& peer, bool ipv6 = false) const;

 private:
  explicit Adapter(const AdapterConfig& cfg) : cfg_(cfg) {}
  uint32_t next_free_qpn();  // must hold mu_; 0 when none is free
  AdapterConfig cfg_;
  dp::Port port_;
  wire::MacAddr mac_{};
  std::unique_ptr<dp::MrTable> mrs_;
  std::unique_ptr<dp::Endpoint> ep_;
  std::unique_ptr<ControlPlane> control_;
  dp::Engine* engine_ = nullptr;
  std::mutex mu_;  // control-side bookkeeping only; never on the post/poll path
  std::vector<std::unique_ptr<dp::Qp>> qps_;
  std::vector<uint32_t> reserved_qpns_;  // reserve_qpn()
  uint32_t next_qpn_ = 2;
  std::atomic<uint32_t> next_pd_{1};
};

}  // namespace urnic::ctl
