// urnic's log types in DPDK's log (rte_log dynamic types) and the one call that writes to them.
// Logging is for events off the hot path (house style rule 14): object creation failures, port
// bring-up, CM state changes, a QP entering ERR. Nothing per packet, per post or per poll.
//
// The types start at kLogDefaultLevel (NOTICE); EAL's --log-level option raises or lowers them
// like any DPDK type, e.g. --log-level=urnic.*:debug or --log-level=urnic.cm:info
// (RuntimeConfig::log_level or extra_args; README "Logging"). At run time:
// rte_log_set_level_pattern("urnic.*", RTE_LOG_DEBUG).
#pragma once

#include <rte_log.h>

#include <cstddef>
#include <cstdint>

#include "urnic/status.h"

namespace urnic::dp {

enum class LogType : uint8_t {
  kDp,      // "urnic.dp": the engine's rare events (a QP entering ERR, and why)
  kCm,      // "urnic.cm": the connection manager (state changes, rejects, timeouts)
  kCtl,     // "urnic.ctl": object life cycle, adapters, port bring-up
  kVerbs,   // "urnic.verbs": the libibverbs layer (verbs/)
  kDaemon,  // "urnic.daemon": urnicd (daemon/): clients coming and going, refused messages
};
inline constexpr size_t kLogTypeCount = 5;
// Quiet by default: a normal run prints nothing of urnic's; NOTICE and above are failures the
// operator should hear about. RuntimeConfig's default "*:warning" caps it further at WARNING.
inline constexpr uint32_t kLogDefaultLevel = RTE_LOG_NOTICE;

// Registers the types with DPDK, once per process (thread-safe; later calls return at once).
// eal_init() calls it before rte_eal_init, so EAL's --log-level options apply to the types in
// the order given, as for DPDK's own types; anything logging registers them too, should EAL have
// been brought up by someone else.
void log_register() noexcept;
// The DPDK log type id of `t` (registering first if need be), e.g. for rte_log_set_level.
int log_type_id(LogType t) noexcept;
// "urnic.dp", "urnic.cm", "urnic.ctl", "urnic.verbs", "urnic.daemon".
const char* log_type_name(LogType t) noexcept;

// Writes "<type name>: <text>\n" at `level` (RTE_LOG_ERR .. RTE_LOG_DEBUG) when the type's level
// lets it through; otherwise returns after one level check, formatting nothing. The text is
// formatted into a stack buffer (cut at kLogLineMax) and handed to rte_log, which writes it to
// DPDK's log stream (control/eal.cc). No heap allocation; the stream's lock and a write(2) are
// the cost, so callers on an engine lcore may use it only on rare transitions (see
// qp_to_error_lc).
inline constexpr size_t kLogLineMax = 256;
[[gnu::cold, gnu::format(printf, 3, 4)]] void log_line(LogType t, uint32_t level, const char* fmt,
                                                       ...) noexcept;

// Logs that `what` failed with `s` ("<what> failed: STATUS_... (0x...)"): a resource or device
// failure at NOTICE, a refused argument or a call in the wrong state (the caller's mistake, which
// the returned status already tells it) at DEBUG. kSuccess and kPending log nothing. Returns `s`,
// so that a return statement can wrap it.
Status log_failure(LogType t, Status s, const char* what) noexcept;
// The level log_failure() uses for `s`.
uint32_t failure_level(Status s) noexcept;
// NUL-terminated NTSTATUS name (to_string(Status) returns views of string literals).
inline const char* status_name(Status s) noexcept { return to_string(s).data(); }

}  // namespace urnic::dp
