// NDK_MR (ndkpi.md §4.2-§4.3): a memory region. Either a normal registration of a virtually
// contiguous range of this process (register_mr), or a fast-register region
// (initialize_fast_register_mr) that FastRegister work requests (Qp::fast_register) map onto a
// page list and Invalidate work requests unmap.
//
// Tokens are 32-bit opaque values in host order: an index into the adapter's key table and a tag
// that changes on every registration, fast-register and invalidation, so stale tokens fail. The
// local and the remote token of an MR are the same value.
//
// Threading: the calls of one MR are serialised by the consumer; different MRs may be used from
// different threads concurrently. Registration never touches, pins or dereferences the memory;
// the range must stay mapped while it is registered. No call here pends. Once close() was
// requested (it pends while a window is bound to the region) every call below but the token
// getters returns kInvalidDeviceState.
#pragma once

#include <cstddef>
#include <cstdint>

#include "urnic/object.h"
#include "urnic/status.h"

namespace urnic {

class Mr final : public detail::ObjectOf<detail::MrImpl> {
 public:
  // NdkRegisterMr: registers [address, address + length) with mr_flag::* rights. kSuccess;
  // kInvalidParameter for a null address, zero length or unknown flags; kInvalidBufferSize for
  // a length above max_registration_size or a range that is not mapped in this process (ND2
  // NdMRInvalidBuffer); kInvalidDeviceRequest on a fast-register MR; kInvalidDeviceState if
  // already registered (one buffer per MR at a time); kInsufficientResources when the key table
  // is full. Never pends.
  Status register_mr(const void* address, size_t length, uint32_t flags,
                     RequestCompletion completion, void* request_context) noexcept;
  // NdkDeregisterMr: kSuccess (the tokens fail from now on; the MR may be registered again);
  // kDeviceBusy while a memory window is bound to the region (ND2 NdMRDeregister);
  // kInvalidDeviceState if not registered. Never pends.
  Status deregister_mr(RequestCompletion completion, void* request_context) noexcept;
  // NdkInitializeFastRegisterMr: reserves `adapter_page_count` pages (1 .. frmr_page_count)
  // for FastRegister work requests; `remote_access` must be true if they will grant remote
  // rights. kSuccess; kImplementationLimit above frmr_page_count; kInvalidParameter for 0;
  // kInvalidDeviceRequest on a normal MR; kInvalidDeviceState if already initialised;
  // kInsufficientResources. Never pends.
  Status initialize_fast_register_mr(uint32_t adapter_page_count, bool remote_access,
                                     RequestCompletion completion, void* request_context) noexcept;

  // NdkGetLocalTokenFromMr / NdkGetRemoteTokenFromMr: valid after register_mr or
  // initialize_fast_register_mr; for a fast-register MR, the token of its latest FastRegister
  // as soon as Qp::fast_register returned. 0 when there is none. Any thread.
  uint32_t get_local_token() const noexcept;
  uint32_t get_remote_token() const noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

}  // namespace urnic
