// NDK_ADAPTER (ndkpi.md §1.5, §6): one RNIC on one DPDK port. Creates completion queues and
// protection domains, answers QueryAdapterInfo, and builds logical address mappings.
//
// Opening an adapter attaches its port queue to an engine and starts the adapter's control
// thread, which runs every callback of every object of the adapter (ndkpi.md §1.3; object.h).
// Closing (the destructor) blocks until every object of the adapter is closed and every
// callback has returned, as NDK's CLOSE_NDK_ADAPTER_HANDLER does; objects the consumer did not
// close are closed then. Never close an adapter from inside a callback, and do not keep a
// Handle of one of its objects past it (the handle would close a freed object).
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

#include "urnic/counters.h"
#include "urnic/cq.h"
#include "urnic/engine.h"
#include "urnic/object.h"
#include "urnic/pd.h"
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

struct AdapterConfig {
  uint16_t port_id = 0;  // an ethdev port already probed (urnic/runtime.h)
  uint32_t ipv4 = 0;     // host order; 0: no IPv4 address
  std::optional<std::array<uint8_t, 16>> ipv6;
  std::optional<std::array<uint8_t, 6>> mac;  // default: the port's MAC
  uint32_t mbufs = 16383;                     // mempool size (2^n - 1)
  uint32_t max_qps = 1024;                    // QPNs 2 .. max_qps - 1
  uint32_t max_mrs = 1u << 16;                // MRs, FRMRs, MWs and privileged tokens together
  uint64_t key_seed = 0;                      // 0: memory keys seeded from the TSC
  // Fault injection on the RoCEv2 frames this adapter sends (tx) and receives (rx), at its port
  // boundary (urnic/counters.h). Testing builds only: an active config elsewhere fails open()
  // with kNotSupported.
  FaultConfig tx_faults, rx_faults;
};

namespace detail {
struct AdapterImpl;
}  // namespace detail

class Adapter {
 public:
  // Opens the port `config.port_id` and attaches it to `engine`, which must not be launched yet
  // (launch it afterwards; objects may be created either way). Returns kSuccess with *out set;
  // kInvalidParameter for a bad configuration or port id, or a launched engine;
  // kDeviceBusy (with an error logged) when another adapter of this process has the port open;
  // kDeviceNotReady when the driver refuses the port; kInsufficientResources when memory or
  // mempools cannot be had. Control side; blocks briefly.
  static Status open(const AdapterConfig& config, Engine& engine,
                     std::unique_ptr<Adapter>* out) noexcept;
  // Blocking close (see the file comment). When the engine is not launched, the calling thread
  // runs engine steps while it waits.
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

  // NdkCreateCq: a CQ of `depth` entries (1 .. max_cq_depth, else kInvalidParameter).
  // `notification` (may be null) is called with `notification_context` when an arm is
  // satisfied, a notification is cancelled, or the CQ overruns. kSuccess with *out set;
  // kInsufficientResources; kInvalidDeviceState while the adapter is closing. Never pends. Any
  // thread.
  Status create_cq(uint32_t depth, CqNotificationCallback notification, void* notification_context,
                   CreateCompletion completion, void* request_context, Handle<Cq>* out) noexcept;
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
