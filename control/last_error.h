// The one-line reason behind urnic::last_error() (urnic/runtime.h), shared by the calls of
// runtime.h and daemon.h (control/runtime.cc keeps it, per thread).
#pragma once

#include <string>

#include "urnic/status.h"

namespace urnic::detail {

// Records `why` as this thread's last error and returns `s`.
Status fail_with(Status s, std::string why) noexcept;
// Clears this thread's last error and returns kSuccess.
Status succeed() noexcept;

}  // namespace urnic::detail
