// NDK_QP (ndkpi.md §2): a reliable-connected queue pair. Initiator work requests (send,
// send_and_invalidate, read, write, fast_register, invalidate, bind) go to its send queue,
// receives to its receive queue; both are lock-free single-producer rings the engine consumes.
//
// Threading (NDK posting rules, ndkpi.md §7.1): posts to one queue are serialised by the
// consumer (one thread at a time per queue); the send and the receive queue may be posted
// concurrently, and flush() may run concurrently with posts. Posting never locks, allocates,
// blocks or makes a system call.
//
// Buffers: SGEs name registered memory (or memory reachable through the PD's privileged
// token). The memory they name must stay valid until the request completes; the SGE array
// itself is copied during the call and may be reused when it returns. With op_flag::kInline the
// data itself is copied during the call: the buffers (whose tokens are then ignored) may be
// reused as soon as the call returns.
//
// Results: kSuccess means the request is queued and exactly one completion will appear on the
// QP's CQ (none for a successful op_flag::kSilentSuccess request; failures always complete).
// Any other status means nothing was queued and no completion will ever appear for it; a
// failing post also hands every earlier deferred request to the engine (ndkpi.md §7.3).
// Statuses common to every initiator post:
//   kInvalidDeviceState    close() was requested (the close is pending): no new work;
//   kConnectionInvalid     the QP is not connected (RESET, INIT or RTR);
//   kInvalidParameter      a flag not valid for the operation, or a malformed argument: a null
//                          SGE array with a non-zero count, an SGE whose address + length
//                          does not fit in 64 bits, an INLINE SGE at address 0;
//   kDataOverrun           more SGEs than the QP's max_initiator_request_sge (reads: also
//                          max_read_request_sge); INLINE requests are exempt;
//   kBufferOverflow        the SGEs total more than max_transfer_length;
//   kInvalidBufferSize     INLINE data above the QP's inline_data_size;
//   kNoMoreEntries         initiator_queue_depth requests are outstanding.
// A QP in the error state still accepts posts; they complete with kCancelled. Tokens are checked
// when a request executes: a token naming no region, of another PD or adapter, or a range
// outside the region completes with kAccessViolation, and the QP's later work with kCancelled
// (docs/api.md "Bad input"). Zero-length requests and zero-length SGEs are legal.
//
// Deferral (op_flag::kDefer): the request is written to the ring but not published; the engine
// sees it with the next post without kDefer, or with any failing post (the deferred doorbell).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "urnic/object.h"
#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

class Mr;
class Mw;

class Qp final : public detail::ObjectOf<detail::QpImpl> {
 public:
  // NdkSend: a SEND of the bytes the SGEs name. Flags: kSilentSuccess, kReadFence,
  // kSendAndSolicitEvent, kInline, kDefer.
  Status send(void* request_context, std::span<const Sge> sgl, uint32_t flags) noexcept;
  // NdkSendAndInvalidate: as send, and the receiver invalidates `remote_token` (one of its FRMR
  // or window tokens) before completing its receive (type kReceiveAndInvalidate there). A token
  // the receiver cannot invalidate breaks the connection.
  Status send_and_invalidate(void* request_context, std::span<const Sge> sgl, uint32_t flags,
                             uint32_t remote_token) noexcept;
  // NdkReceive: posts one receive (no flags). The SGE memory is written when a send arrives.
  // May be posted before the QP is connected. kSuccess; kDataOverrun (more SGEs than
  // max_receive_request_sge); kBufferOverflow (more than max_transfer_length); kNoMoreEntries
  // (receive_queue_depth outstanding); kInvalidDeviceRequest on a QP with an SRQ;
  // kInvalidParameter (a null SGE array with a non-zero count, an SGE passing 2^64);
  // kInvalidDeviceState in RESET or once close() was requested.
  Status receive(void* request_context, std::span<const Sge> sgl) noexcept;
  // NdkRead: reads the peer's [remote_address, + total SGE length) (host byte order; the peer's
  // token `remote_token`) into the SGEs, which need local write. Flags: kSilentSuccess,
  // kReadFence, kDefer, kRdmaReadLocalInvalidate (on success, the token of the first SGE is
  // invalidated).
  Status read(void* request_context, std::span<const Sge> sgl, uint64_t remote_address,
              uint32_t remote_token, uint32_t flags) noexcept;
  // NdkWrite: writes the SGEs' bytes to the peer at remote_address. Flags: kSilentSuccess,
  // kReadFence, kDefer, kInline.
  Status write(void* request_context, std::span<const Sge> sgl, uint64_t remote_address,
               uint32_t remote_token, uint32_t flags) noexcept;
  // NdkFastRegister: maps `length` bytes starting `fbo` bytes into the first of
  // `adapter_page_array` (kPageSize-aligned page addresses, e.g. from Adapter::build_lam) onto
  // the fast-register MR `mr`, at `base_virtual_address` (= fbo + n * kPageSize, not 0 unless
  // fbo is 0) for the peer. The MR gets a new token, readable with get_*_token as soon as this
  // returns. The page array must stay valid until the request completes. Flags: kSilentSuccess,
  // kReadFence, kDefer, kAllowLocalWrite, kAllowRemoteRead, kAllowRemoteWrite, kRdmaReadSink
  // (ignored: not required), kAllowRemoteAtomic (extension). Extra statuses:
  // kAccessViolation (remote rights asked of an MR initialised without remote access);
  // kImplementationLimit (more pages than the MR was initialised with); kInvalidBufferSize
  // (length above pages * kPageSize - fbo); kInvalidParameter (fbo >= kPageSize, a page
  // not aligned, a null page array, base_virtual_address not fbo + n * kPageSize, or `mr` not an
  // initialised fast-register MR of this QP's PD). The region must be invalid when the request
  // executes, else it completes with kInvalidDeviceRequest.
  Status fast_register(void* request_context, Mr& mr, std::span<const uint64_t> adapter_page_array,
                       uint32_t fbo, size_t length, uint64_t base_virtual_address,
                       uint32_t flags) noexcept;
  // NdkInvalidate: invalidates a fast-registered MR or a bound MW (`mr_or_mw`), in order with
  // the requests around it. Flags: kSilentSuccess, kReadFence, kDefer. kInvalidParameter for a
  // normally registered MR, an MR or MW of another PD (or adapter), or another object type.
  // Invalidating what is not valid completes with kInvalidDeviceRequest.
  Status invalidate(void* request_context, Object& mr_or_mw, uint32_t flags) noexcept;
  // NdkBind: binds `mw` to [virtual_address, + length) inside the registered MR `mr` with the
  // remote rights kAllowRemoteRead / kAllowRemoteWrite (and kAllowRemoteAtomic, extension),
  // for requests arriving on this QP. The window's new token is readable with
  // Mw::get_remote_token as soon as this returns. Flags also: kSilentSuccess, kReadFence,
  // kDefer. Extra statuses: kAccessViolation (a writable window over an MR without local
  // write); kInvalidBufferSize (length above max_window_size); kInvalidParameter (the range is
  // not inside the MR, address 0, or `mr` or `mw` is not of this QP's PD); kInvalidDeviceState
  // (an MR whose close is pending). Binding a window that is still bound completes with
  // kInvalidDeviceRequest (invalidate first), except with length 0, which invalidates it (IBTA
  // §10.6.7.2.1, a type 1 window's zero-length bind; its new token stays invalid until a bind).
  Status bind(void* request_context, Mr& mr, Mw& mw, const void* virtual_address, size_t length,
              uint32_t flags) noexcept;
  // NdkFlush: every outstanding request of both queues completes with kCancelled, in posting
  // order; the QP enters the error state. Returns at once; the completions follow. Any thread,
  // concurrently with posts.
  void flush() noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

}  // namespace urnic
