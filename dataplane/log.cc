#include "dataplane/log.h"

#include <array>
#include <cstdarg>
#include <cstdio>

namespace urnic::dp {
namespace {

constexpr std::array<const char*, kLogTypeCount> kNames = {"urnic.dp", "urnic.cm", "urnic.ctl",
                                                           "urnic.verbs", "urnic.daemon"};

struct Ids {
  std::array<int, kLogTypeCount> id{};
};

// A function-local static: C++ makes its one-time initialisation thread-safe, and once done a
// lookup is a load (an engine lcore logging a QP's ERR transition pays no lock for it).
// Registration allocates inside DPDK, so the first call should be on a control path: eal_init()
// makes it one.
const Ids& ids() noexcept {
  static const Ids ids = [] {
    Ids r;
    for (size_t i = 0; i < kLogTypeCount; ++i) {
      // _and_pick_level: an EAL --log-level pattern already parsed (EAL brought up before us)
      // still applies to the new type.
      const int id = rte_log_register_type_and_pick_level(kNames[i], kLogDefaultLevel);
      // Only out of memory fails: the lines then go out as USER1, at USER1's level.
      r.id[i] = id >= 0 ? id : RTE_LOGTYPE_USER1;
    }
    return r;
  }();
  return ids;
}

}  // namespace

void log_register() noexcept { (void)ids(); }

int log_type_id(LogType t) noexcept { return ids().id[static_cast<size_t>(t)]; }

const char* log_type_name(LogType t) noexcept { return kNames[static_cast<size_t>(t)]; }

void log_line(LogType t, uint32_t level, const char* fmt, ...) noexcept {
  const int id = log_type_id(t);
  if (!rte_log_can_log(static_cast<uint32_t>(id), level)) return;
  char text[kLogLineMax];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  rte_log(level, static_cast<uint32_t>(id), "%s: %s\n", log_type_name(t), text);
}

uint32_t failure_level(Status s) noexcept {
  switch (s) {
    // What the caller asked for was wrong (or asked at the wrong time): it learns so from the
    // status; the log has nothing to add unless someone is debugging.
    case Status::kInvalidParameter:
    case Status::kInvalidParameterMix:
    case Status::kInvalidHandle:
    case Status::kInvalidDeviceState:
    case Status::kInvalidDeviceRequest:
    case Status::kInvalidBufferSize:
    case Status::kInvalidAddress:
    case Status::kAccessViolation:
    case Status::kNotSupported:
    case Status::kBufferTooSmall:
      return RTE_LOG_DEBUG;
    default:  // out of resources, the device failed, or something unforeseen
      return RTE_LOG_NOTICE;
  }
}

Status log_failure(LogType t, Status s, const char* what) noexcept {
  if (s == Status::kSuccess || s == Status::kPending) return s;
  log_line(t, failure_level(s), "%s failed: %s (0x%08x)", what, status_name(s),
           static_cast<unsigned>(s));
  return s;
}

}  // namespace urnic::dp
