// NDK_MW (ndkpi.md §4.5): a memory window, IB type 2 style. Created unbound; Qp::bind binds it
// to a sub-range of a registered MR with its own remote rights and a new token, for requests
// arriving on that QP only; Qp::invalidate (or a peer's SendAndInvalidate) unbinds it, and
// rebinding requires that first. While bound, the MR cannot be deregistered (kDeviceBusy) and its
// close pends. Accesses through an invalidated window fail with kAccessViolation at the
// initiator, and the connection is lost (ndkpi.md §7.6).
#pragma once

#include <cstdint>

#include "urnic/object.h"

namespace urnic {

class Mw final : public detail::ObjectOf<detail::MwImpl> {
 public:
  // NdkGetRemoteTokenFromMw: the token of the window's latest bind, valid as soon as
  // Qp::bind returned (before its completion). Any thread.
  uint32_t get_remote_token() const noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

}  // namespace urnic
