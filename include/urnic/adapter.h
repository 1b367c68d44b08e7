// NDK_ADAPTER (ndkpi.md §1.5, §6): one RNIC on one DPDK port. Creates completion queues and
// protection domains, answers QueryAdapterInfo, and builds logical address mappings.
//
// Opening an adapter attaches its port queue to an engine and starts the adapter's control
// thread, which runs every callback of every object of the adapter (ndkpi.md §1.3; object.h).
// Closing (the destructor) blocks until every object of the adapter is closed and every
// callback has returned, as NDK's CLOSE_NDK_ADAPTER_HANDLER does; objects the consumer did not
// close are closed then: torn down (QPs flushed and detached, MRs deregistered, ...) but not
// freed. Such an object, held by a Handle or a raw pointer, may outlive the adapter (and its
// engine): every call on it fails harmlessly (kInvalidDeviceState, or 0 / false / nothing for
// the calls without a status), and its close (Handle::reset, the Handle's destructor,
// Handle::close, Object::close) frees it with kSuccess and no callback. Handles may so be
// released before or after the adapter, in any order; each object must still be closed once.
// Never close an adapter from inside a callback.
//
// Bringing up EAL and getting the port (PCI NIC, net_ring pair, net_tap ...) is outside NDK's
// surface (NDIS does it); urnic/runtime.h does it: runtime_init, then create_ring_port_pair,
// open_vdev_port or open_pci_port for AdapterConfig::port_id.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "urnic/congestion.h"
#include "urnic/counters.h"
#include "urnic/cq.h"
#include "urnic/engine.h"
#include "urnic/object.h"
#include "urnic/pd.h"
#include "urnic/route.h"
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

struct AdapterConfig {
  uint16_t port_id = 0;  // an ethdev port already probed (urnic/runtime.h)
  uint32_t ipv4 = 0;     // host order; 0: no IPv4 address
  std::optional<std::array<uint8_t, 16>> ipv6;
  // Routed RoCEv2 (urnic/route.h): the prefix lengths of the subnets ipv4 and ipv6 are in (0:
  // none, 1 .. 32 / 1 .. 128) and static routes to other subnets, each gateway inside one of
  // them. With neither for a family, every destination of it is on link. open() fails with
  // kInvalidParameter (and says why in the log) for a route it cannot use.
  uint8_t ipv4_prefix_len = 0, ipv6_prefix_len = 0;
  std::vector<Route> routes;
  std::optional<std::array<uint8_t, 6>> mac;  // default: the port's MAC
  uint32_t mbufs = 16383;                     // mempool size (2^n - 1)
  uint32_t max_qps = 1024;                    // QPNs 2 .. max_qps - 1
  uint32_t max_mrs = 1u << 16;                // MRs, FRMRs, MWs and privileged tokens together
  uint64_t key_seed = 0;                      // 0: memory keys seeded from the TSC
  // Fault injection on the RoCEv2 frames this adapter sends (tx) and receives (rx), at its port
  // boundary (urnic/counters.h). Testing builds only: an active config elsewhere fails open()
  // with kNotSupported.
  FaultConfig tx_faults, rx_faults;
  // Loss recovery between ACK timeouts and after them (IBTA §9.7.6.1.3 leaves the policy open).
  // true (the default): adaptive. Two smoothed round trips without progress, the oldest
  // unacknowledged packet is resent alone with AckReq (a READ: its first missing response
  // packet), which finds a lost tail long before the local ACK timer (T, the QP's timeout
  // attribute, 4.096 us * 2^timeout); each probe without an answer doubles the next wait, up to
  // T/32. From the second timeout in a row without progress, a QP waits a random [T, 2T], then
  // [2T, 4T], restarts its window at four packets and, until the window is whole again, halves
  // it on each further loss, so that QPs that overrun one buffer stop retrying in step. false:
  // plain go-back-N as rxe does it, the whole window again every T. Either way a QP fails after
  // retry_cnt timeouts without progress (probes are not retries), and any conforming responder
  // answers a probe (docs/design.md, "Faults from outside the endpoint").
  bool adaptive_retransmit = true;
  // Testing builds only: responder rules broken on purpose (urnic/counters.h).
  BrokenRules broken_rules;
  // Congestion control (urnic/congestion.h): ECN marking, CNPs for CE-marked frames, and DCQCN
  // rate control per QP, on by default with ConnectX's defaults. open() fails with
  // kInvalidParameter for a value out of its range: dscp -1..63, cnp_dscp 0..63, intervals and
  // periods up to 10 s (time_reset_us and alpha_period_us at least 1), rates up to 10 Tb/s with
  // 1 <= min_rate <= max_rate (when set), gd 1..30, min_dec_fac 1..100, g and initial_alpha up
  // to 1024, threshold up to 65535.
  CongestionConfig congestion;
  // The connection manager behind Connector / Listener (IB CM over QP1, as rdma_cm speaks it).
  struct Cm {
    // Path MTU our connection requests offer (256, 512, 1024, 2048 or 4096); the passive side
    // takes the request's. 0: the largest whose frames fit the port's MTU (port_mtu in
    // urnic/runtime.h), as rdma_cm derives it from the netdev (1500 -> 1024, 9000 -> 4096).
    uint32_t path_mtu = 0;
    // CM response timeout exponent for our REQ / REP / DREQ retransmissions, 4.096 us * 2^t
    // (rdma_cm: 20, ~4.3 s; 0 .. 31).
    uint8_t response_timeout = 20;
    // How long a finished connection keeps its communication ID before it may be reused, in
    // ms (1 .. 600000).
    uint32_t timewait_ms = 1000;
    // Selective repeat (QpAttributes::selective_repeat) between urnic peers: our connection
    // requests offer it and our listeners accept an offer, in the last 8 bytes of the REQ's and
    // the REP's private data (a mark standard peers pass by: the REQ carries it only when the
    // caller's private data leaves them free, i.e. up to 48 bytes; the REP's are beyond what a
    // urnic listener lets the consumer send). Both QPs use it only when both sides said yes;
    // towards any other peer they keep go-back-N. false: neither offered nor accepted.
    bool selective_repeat = true;
    // Testing builds (URNIC_TESTING) only, else open() fails with kNotSupported: the MADs the
    // CM sends that are lost on purpose, to exercise retransmission. Each rule loses the nth
    // (1-based) MAD whose attribute ID (IBTA 16.7.1: REQ 0x10, MRA 0x11, REJ 0x12, REP 0x13,
    // RTU 0x14, DREQ 0x15, DREP 0x16) is attr_id. Counted in CmCounters::mads_dropped.
    struct MadDrop {
      uint16_t attr_id = 0;
      uint32_t nth = 0;
    };
    std::vector<MadDrop> drop_tx;
  } cm;
};

namespace detail {
struct AdapterImpl;
}  // namespace detail

class Adapter {
 public:
  // Engines one adapter may spread over (Adapter::open with several).
  static constexpr uint32_t kMaxEngines = 8;

  // Opens the port `config.port_id` and attaches it to `engine`, launched or not (launch it
  // whenever; objects may be created either way; an engine serves up to 8 adapters at once).
  // Returns kSuccess with *out set; kInvalidParameter for a bad configuration (a field out of
  // its range) or port id; kInsufficientResources when the engine serves 8 adapters already;
  // kDeviceBusy (with an error logged) when another adapter of this process has the port open;
  // kDeviceNotReady when the driver refuses the port; kInsufficientResources when memory or
  // mempools cannot be had. Control side; blocks briefly.
  static Status open(const AdapterConfig& config, Engine& engine,
                     std::unique_ptr<Adapter>* out) noexcept;
  // The same over several engines (issue 14: one port served by many cores): the port gets one
  // RX/TX queue pair per engine, engines[i] polling queue i (1 .. kMaxEngines of them, else
  // kInvalidParameter; the driver must offer that many queues, else kInsufficientResources).
  // Each QP runs on one engine for its whole life, the engine of its CQs, chosen when the CQ is
  // created (create_cq's affinity); frames a queue receives for another engine's QP are handed
  // to that engine (counted in PortCounters::handoffs_out / handoffs_in), as are ARP, neighbour
  // discovery and QP1 frames to engine 0, whose queue carries the control plane's. Where the
  // port offers RSS on UDP it spreads frames over the queues; each QP sends from its own UDP
  // source port so that a peer's RSS spreads our QPs too. The engines may be launched or driven
  // with run_once(), each by its own thread.
  static Status open(const AdapterConfig& config, std::span<Engine* const> engines,
                     std::unique_ptr<Adapter>* out) noexcept;
  // Attach mode (urnic/daemon.h): opens the adapter `name` (as the daemon's configuration names
  // it, e.g. "urnic0") of the urnicd this process is attached to, attaching first (attach()'s
  // socket: $URNIC_DAEMON or the default) if it is not. The daemon owns the port and its engines;
  // the objects created from this adapter are the daemon's, reached over shared rings, with the
  // API unchanged (docs/daemon.md "The public API in attach mode" lists what attach mode does not
  // offer yet: those calls return kNotSupported). kSuccess with *out set; kBadNetworkName when
  // the daemon has no such adapter; kInvalidParameter for an empty name or a null `out`; attach()'s
  // errors (last_error() says why). Control side.
  static Status open(std::string_view name, std::unique_ptr<Adapter>* out) noexcept;
  // Whether this adapter is a daemon's (opened by name).
  bool attached_mode() const noexcept;
  // How many engines the adapter spreads over.
  uint32_t engines() const noexcept;
  // Blocking close (see the file comment). When the engine is not launched, the calling thread
  // runs engine steps while it waits. Objects still open outlive it, inert, until closed.
  ~Adapter();
  Adapter(const Adapter&) = delete;
  Adapter& operator=(const Adapter&) = delete;

  // NdkQueryAdapterInfo. `*buffer_size` is the size of `*info` in bytes on input; kSuccess
  // with *info filled, or kBufferTooSmall (or a null `info`) with *buffer_size set to
  // sizeof(AdapterInfo). kInvalidParameter if buffer_size is null. Any thread.
  Status query_adapter_info(AdapterInfo* info, uint32_t* buffer_size) const noexcept;
  AdapterInfo adapter_info() const noexcept;

  // A snapshot of what the adapter counted (urnic/counters.h): the sum over its live QPs, its
  // port queue's packets and drops by reason, and the fault injectors'. kInvalidParameter for a
  // null `out`. Any thread; never pends.
  Status query_counters(AdapterCounters* out) const noexcept;
  // Engine `engine`'s share of AdapterCounters::port (its port queue): kInvalidParameter for a
  // null `out` or an engine the adapter does not have; kInvalidDeviceState once it is closing.
  Status query_engine_counters(uint32_t engine, PortCounters* out) const noexcept;

  // NdkCreateCq: a CQ of `depth` entries (1 .. max_cq_depth, else kInvalidParameter).
  // `notification` (may be null) is called with `notification_context` when an arm is
  // satisfied, a notification is cancelled, or the CQ overruns. kSuccess with *out set;
  // kInsufficientResources; kInvalidDeviceState while the adapter is closing. Never pends. Any
  // thread.
  Status create_cq(uint32_t depth, CqNotificationCallback notification, void* notification_context,
                   CreateCompletion completion, void* request_context, Handle<Cq>* out) noexcept;
  // NdkCreateCq with its affinity: the engines the CQ may live on, bit i for the adapter's
  // engine i (0: any). The CQ goes to the allowed engine with the fewest CQs and SRQs, so that
  // the default spreads QPs evenly; every QP completing into it runs there
  // (CqExtension::engine says which). kInvalidParameter when the mask names none of the
  // adapter's engines; otherwise as above.
  Status create_cq(uint32_t depth, CqNotificationCallback notification, void* notification_context,
                   uint64_t affinity, CreateCompletion completion, void* request_context,
                   Handle<Cq>* out) noexcept;
  // NdkCreatePd. kSuccess with *out set; kInsufficientResources; kInvalidDeviceState while the
  // adapter is closing. Never pends. Any thread.
  Status create_pd(CreateCompletion completion, void* request_context, Handle<Pd>* out) noexcept;

  // NdkBuildLAM: the logical address mapping of [address, address + length): the adapter page
  // addresses (kPageSize aligned; here the host virtual pages themselves) and the first byte
  // offset into the first page. `pages` receives at most pages.size() entries; kSuccess with
  // *page_count and *fbo set, or kBufferTooSmall with *page_count set to the number needed.
  // kInvalidParameter for a null address, zero length, a range passing 2^64, a null
  // out-parameter, or a null `pages` array with a non-zero size. Never pends; no memory is
  // pinned or touched. Any thread.
  Status build_lam(const void* address, size_t length, std::span<uint64_t> pages,
                   uint32_t* page_count, uint32_t* fbo) const noexcept;
  // NdkReleaseLAM: nothing is held for a mapping, so this does nothing.
  void release_lam(std::span<const uint64_t> pages) const noexcept;

  // NdkQueryExtension on the adapter (AdapterExtension). kSuccess with *iface set, or
  // kNotSupported.
  Status query_extension(const ExtensionId& id, Version version, void** iface) noexcept;
  template <class E>
  E* query_extension() noexcept {
    return detail::query_extension_as<E>(*this);
  }

  detail::AdapterImpl& impl() noexcept { return *impl_; }

 private:
  explicit Adapter(detail::AdapterImpl* impl) noexcept : impl_(impl) {}
  detail::AdapterImpl* impl_;
};

}  // namespace urnic
