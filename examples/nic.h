// Bring-up shared by urnic's example and test tools: EAL, one virtual (or PCI) port, an engine on
// the second lcore, an adapter with its control thread, and the options that pick them:
//
//   --vdev=DEVARGS     DPDK device, e.g. net_af_packet0,iface=vdpdk0 (required)
//   --ip=A.B.C.D       the adapter's IPv4 address; its RoCEv2 GID is ::ffff:A.B.C.D (required)
//   --mac=XX:..:XX     MAC address (default: the port's)
//   --lcores=LIST      EAL lcores (default 0-1: the application on the first, the engine on the
//                      second)
//   --huge             EAL on hugepages (default: without)
//   --tx-loss-ppm=N    drop N ppm of the RoCEv2 frames urnic sends (fault injector, testing
//                      builds); --loss-seed=S seeds it
//   --tx-drop=OP:N     drop the Nth frame with BTH opcode OP (hex) urnic sends (repeatable)
//
// Tools call take_nic_options() first, which removes these from argv, then parse their own.
#pragma once

#include <netinet/in.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "urnic/urnic.h"

namespace urnic::tools {

struct NicOptions {
  std::string vdev;
  uint32_t ipv4 = 0;
  std::optional<std::array<uint8_t, 6>> mac;
  std::string lcores = "0-1";
  bool huge = false;
  uint32_t tx_loss_ppm = 0;
  uint64_t loss_seed = 1;
  std::vector<std::pair<uint16_t, uint32_t>> tx_drops;  // opcode, nth
  AdapterConfig::Cm cm;  // connection manager settings (set by the tool, not from argv)
};

using Gid = std::array<uint8_t, 16>;

// Removes urnic's options from argv (compacting it, argc updated). Returns false and prints
// why on a malformed option.
bool take_nic_options(int* argc, char** argv, NicOptions* opts);
// One line per NIC option, for the tools' usage text.
const char* nic_usage();

std::string gid_string(const Gid& gid);  // inet_ntop form, e.g. ::ffff:10.99.0.2

// Everything through the public API (urnic/urnic.h): runtime_init, open_vdev_port,
// Adapter::open with the fault injectors in its config, one PD.
class Nic {
 public:
  Nic() = default;
  // Closes the PD, then the adapter (the tool's own objects must be closed by then), then stops
  // the engine.
  ~Nic();
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  // Brings everything up; prints the reason and returns an error status on failure.
  Status open(const NicOptions& opts);

  Adapter& adapter() { return *adapter_; }
  Pd& pd() { return *pd_; }
  const NicOptions& options() const { return opts_; }
  Gid gid() const;  // the IPv4-mapped GID of --ip (GID index 1)

  // One "urnic:" line with the QP and port counters (retransmits, NAKs, drops, faults).
  std::string counters_line();
  // Prints counters_line() on a line of its own and flushes stdout (the tests read it).
  void print_counters();

 private:
  NicOptions opts_;
  Engine engine_{engine_config()};
  std::unique_ptr<Adapter> adapter_;
  Handle<Pd> pd_;
  static EngineConfig engine_config();
};

// The completion of one NDK request or event, for the callbacks (which run on the adapter's
// control thread) and the tool thread that waits for it.
class Done {
 public:
  // A RequestCompletion: `ctx` is the Done.
  static void on_request(void* ctx, Status s) noexcept;
  // A DisconnectEventCallback: completes with kSuccess.
  static void on_event(void* ctx) noexcept;
  // The status, once completed within `t`; nullopt otherwise.
  std::optional<Status> wait(std::chrono::milliseconds t);
  bool done();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Status> status_;
};

// Creates an MR of `pd` and registers [p, p + n) with mr_flag rights `flags`; the handle keeps
// it registered. kSuccess with *mr and *token (local = remote token) set, or the failing status.
Status register_buffer(Pd& pd, void* p, size_t n, uint32_t flags, Handle<Mr>* mr, uint32_t* token);

// Listens on `port` of every adapter address and keeps the first connection request; later
// ones are rejected (the tools serve one connection).
class FirstRequest {
 public:
  Status listen(Adapter& adapter, uint16_t port);
  // The request's connector once one came within `t` (the caller owns it), else empty.
  Handle<Connector> wait(std::chrono::milliseconds t);

 private:
  static void on_connect(void* ctx, Connector* c) noexcept;
  Handle<Listener> listener_;
  std::atomic<Connector*> first_{nullptr};
  Done arrived_;
};

// Connects `qp` to `dst` (its port set) through a new connector, retrying with a fresh one
// while the peer does not listen yet (kConnectionRefused) or does not answer ARP yet
// (kHostUnreachable), for up to `patience`: a peer process started at the same time may not be
// up. kSuccess with *conn set (get_connection_data, then complete_connect), else the last status.
Status connect_retry(Adapter& adapter, Qp& qp, const sockaddr_in& dst,
                     std::span<const uint8_t> private_data, std::chrono::milliseconds patience,
                     Handle<Connector>* conn);

// Polls `cq` into `out` until it has at least `want` entries or `timeout` passes; yields the CPU
// after a run of empty polls (small machines: the engine, the control thread and a peer share
// the cores). Returns the number of entries in `out`.
size_t poll_cq(Cq& cq, std::vector<ResultEx>& out, size_t want, std::chrono::milliseconds timeout);

}  // namespace urnic::tools
