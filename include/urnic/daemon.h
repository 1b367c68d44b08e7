// Attach mode (docs/daemon.md): a process that uses the ports a urnicd daemon owns instead of
// bringing up DPDK and a port itself (embedded mode, urnic/runtime.h, stays the default). The
// daemon owns the ports, their engines, ARP/ND, the connection manager and telemetry; a client
// attaches over the daemon's Unix socket:
//
//   if (urnic::attach() != urnic::Status::kSuccess) die(urnic::last_error());  // $URNIC_DAEMON
//   std::vector<urnic::DaemonAdapter> adapters;
//   urnic::daemon_adapters(&adapters);  // the daemon's adapters, by name
//
// This is the first stage of attach mode (issue 38): the connection, its versioned protocol and
// what a client may ask about the daemon's adapters. Objects (PDs, CQs, QPs, MRs) over the
// daemon's engines come with the shared rings; until then Adapter::open is embedded-only.
//
// Errors: every call returns a Status; when it is not kSuccess, last_error() (urnic/runtime.h)
// says why in one line. kDeviceNotReady: no daemon listens at the path; kAccessDenied: the
// socket's mode or owner does not let this user in; kNotSupported: the daemon speaks another
// major version of the protocol; kIoTimeout: the daemon did not answer within
// kDaemonReplyTimeoutMs; kDeviceRemoved: the daemon went away (exited, killed) - every later
// call fails the same way until detach() and a new attach(). Never hangs, never crashes on what
// the daemon sends. Threading: any thread; calls are serialised on the one connection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "urnic/counters.h"
#include "urnic/runtime.h"  // last_error()
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

// Where urnicd listens unless its configuration says otherwise (docs/daemon.md).
inline constexpr std::string_view kDefaultDaemonSocket = "/run/urnic/urnicd.sock";
// How long a request waits for the daemon's reply before kIoTimeout.
inline constexpr uint32_t kDaemonReplyTimeoutMs = 5000;

// The socket attach() uses when given none: $URNIC_DAEMON when set and not empty, else
// kDefaultDaemonSocket.
std::string daemon_socket_path();
// Whether the environment names a daemon ($URNIC_DAEMON set and not empty): what the drop-in
// verbs libraries look at to choose attach mode.
bool daemon_configured() noexcept;

// Connects this process to the daemon at `socket_path` (empty: daemon_socket_path()) and says
// hello: `client_name` (1 .. 31 of [A-Za-z0-9_.-]; empty: the program's name, cut to fit) is
// how the daemon's logs and urnicctl show it. kSuccess once the daemon accepted the protocol
// version; kInvalidDeviceState when attached already (detach first); kInvalidParameter for a
// bad name or a path longer than a Unix socket address takes (107 bytes); the errors above.
Status attach(std::string_view socket_path = {}, std::string_view client_name = {}) noexcept;
// Closes the connection; the daemon frees everything the process held. Idempotent.
void detach() noexcept;
// Whether attach() succeeded and detach() has not been called (true also after the daemon went
// away: calls then fail with kDeviceRemoved).
bool attached() noexcept;
// Whether the daemon is still there: false once its end of the connection is gone (it exited
// or was killed), or when not attached. Posting and polling never ask the daemon (they are
// memory operations on shared rings), so a loop that waits for completions calls this now and
// then (it costs one poll(2)) to end with a clear error rather than wait forever for a daemon
// that died. Any thread.
bool daemon_alive() noexcept;

struct DaemonInfo {
  std::string socket_path;
  uint32_t pid = 0;                               // the daemon's process id
  uint16_t version_major = 0, version_minor = 0;  // its protocol version
  uint32_t client_id = 0;  // this process's id in its logs, telemetry and urnicctl
};
// What attach() learnt (no round trip). kInvalidDeviceState when not attached.
Status daemon_info(DaemonInfo* out) noexcept;

// One of the daemon's adapters, as its configuration names it (e.g. "urnic0").
struct DaemonAdapter {
  std::string name;
  uint32_t ipv4 = 0;  // host order; 0: none
  std::optional<std::array<uint8_t, 16>> ipv6;
  std::array<uint8_t, 6> mac{};
  uint32_t engines = 1;
  uint32_t mtu = 0;  // the port's Ethernet MTU
};
// The daemon's adapters. kInvalidParameter for a null `out`.
Status daemon_adapters(std::vector<DaemonAdapter>* out) noexcept;
// One adapter's NDK_ADAPTER_INFO and its port's counters (either output may be null).
// kBadNetworkName when the daemon has no adapter of that name.
Status daemon_query_adapter(std::string_view name, AdapterInfo* info, PortCounters* port) noexcept;

// Memory for buffers to register (page-aligned, zeroed, `length` rounded up to whole pages).
// Attached: shared with the daemon from the start, so that its engines reach it with no copy and
// registering it moves nothing; embedded: private anonymous memory. Memory from anywhere else
// may be registered too: attach mode then moves its pages onto shared memory in place
// (docs/daemon.md "Memory"). kInvalidParameter for a null `out`, 0 or more than 1 TiB;
// kInsufficientResources (the daemon's shared-memory quota included).
Status alloc_memory(size_t length, void** out) noexcept;
// Gives back what alloc_memory returned: kInvalidParameter for any other address; kDeviceBusy
// while a memory region is registered in it (attached).
Status free_memory(void* address) noexcept;

// A process attached to the daemon.
struct DaemonClient {
  uint32_t id = 0, pid = 0, uid = 0, gid = 0;  // pid, uid, gid: SO_PEERCRED when it connected
  std::string name;
  uint64_t requests = 0, errors = 0;  // messages it sent, and those the daemon refused
  uint32_t shared = 0, pds = 0, cqs = 0, qps = 0, mrs = 0, srqs = 0;  // the objects it holds
  uint64_t shared_bytes = 0;
};
// Every attached client (this one included). Operators only: a process whose uid is 0 or the
// daemon's; anyone else gets kAccessDenied (a client cannot see another's objects, issue 38
// item 6).
Status daemon_clients(std::vector<DaemonClient>* out) noexcept;

}  // namespace urnic
