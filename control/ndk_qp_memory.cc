// The memory work requests of the public API's QPs (ndkpi.md §4.3, §4.5): FastRegister,
// Invalidate and Bind, embedded or routed to attach mode (control/ndk_remote_memory.cc).
#include "control/ndk_internal.h"
#include "control/ndk_qp_post.h"
#include "control/ndk_remote.h"
#include "urnic/mw.h"

namespace urnic {
namespace detail {
namespace {

// The impl of an MR or a memory window; null for an object of any other type.
ObjectImpl* memory_impl(Object& o) noexcept {
  if (o.object_type() == ObjectType::kMr) return MrImpl::base_of(static_cast<const Mr&>(o));
  if (o.object_type() == ObjectType::kMw) return MwImpl::base_of(static_cast<const Mw&>(o));
  return nullptr;
}

}  // namespace
}  // namespace detail

using dp::WrOpcode;

Status Qp::fast_register(void* request_context, Mr& mr,
                         std::span<const uint64_t> adapter_page_array, uint32_t fbo, size_t length,
                         uint64_t base_virtual_address, uint32_t flags) noexcept {
  using detail::fail;
  if (impl_->remote)
    return detail::remote_fast_register(impl_, request_context, detail::MrImpl::base_of(mr),
                                        adapter_page_array, fbo, length, base_virtual_address,
                                        flags);
  if (detail::MrImpl::base_of(mr)->remote) return fail(impl(), Status::kInvalidParameter);
  detail::MrImpl* m = detail::MrImpl::of(mr);
  if (detail::is_closing(impl()) || detail::is_closing(m))
    return fail(impl(), Status::kInvalidDeviceState);
  if ((flags & ~detail::kFastRegisterFlags) != 0) return fail(impl(), Status::kInvalidParameter);
  // An MR of another PD (or of another adapter, whose PDs are never this QP's) is refused.
  // Acquire pairs with the release store of initialize_fast_register_mr.
  if (m->pd != impl()->pd ||
      m->state.load(std::memory_order_acquire) != detail::MrImpl::State::kFrmr)
    return fail(impl(), Status::kInvalidParameter);
  // The page array is read when the request executes: a null one with pages is malformed.
  if (adapter_page_array.data() == nullptr && !adapter_page_array.empty())
    return fail(impl(), Status::kInvalidParameter);
  // NdkFastRegister: remote rights need an MR initialised with RemoteAccess.
  if ((flags & detail::kRemoteRightBits) != 0 && !m->remote_ok.load(std::memory_order_relaxed))
    return fail(impl(), Status::kAccessViolation);
  const size_t npages = adapter_page_array.size();
  if (npages == 0 || fbo >= kPageSize) return fail(impl(), Status::kInvalidParameter);
  if (npages > m->max_pages.load(std::memory_order_relaxed))
    return fail(impl(), Status::kImplementationLimit);
  if (length > npages * kPageSize - fbo) return fail(impl(), Status::kInvalidBufferSize);
  // BaseVirtualAddress = FBO + n * PAGE_SIZE (ndkpi.md §4.3).
  if (base_virtual_address % kPageSize != fbo) return fail(impl(), Status::kInvalidParameter);
  for (uint64_t p : adapter_page_array) {
    if (p == 0 || p % kPageSize != 0) return fail(impl(), Status::kInvalidParameter);
  }
  dp::SendWqe w;
  w.opcode = WrOpcode::kFastRegister;
  w.request_context = request_context;
  w.flags = flags;
  w.pages = adapter_page_array.data();
  w.npages = static_cast<uint32_t>(npages);
  w.fbo = fbo;
  w.fr_length = length;
  w.base_va = base_virtual_address;
  w.access = dp::access_from_op_flags(flags);
  // The new token is readable as soon as this call returns (ndkpi.md §4.3).
  w.mr_key =
      impl()->adapter->ctl->mrs().next_fast_register_key(m->key.load(std::memory_order_relaxed));
  const Status s = detail::post(impl(), w);
  if (s == Status::kSuccess) m->key.store(w.mr_key, std::memory_order_release);
  return s;
}

Status Qp::invalidate(void* request_context, Object& mr_or_mw, uint32_t flags) noexcept {
  using detail::fail;
  detail::ObjectImpl* target = detail::memory_impl(mr_or_mw);
  if (impl_->remote) return detail::remote_invalidate(impl_, request_context, target, flags);
  if (detail::is_closing(impl())) return fail(impl(), Status::kInvalidDeviceState);
  // An attached adapter's MR or window is not this adapter's.
  if (target != nullptr && target->remote) return fail(impl(), Status::kInvalidParameter);
  if ((flags & ~detail::kLocalFlags) != 0) return fail(impl(), Status::kInvalidParameter);
  uint32_t key = 0;
  // The object's type decides how it is read; any other type (a CQ, PD, QP, SRQ) is refused.
  // An MR or MW of another PD or adapter is refused by the PD comparison.
  if (mr_or_mw.object_type() == ObjectType::kMr) {
    detail::MrImpl* m = detail::MrImpl::of(static_cast<Mr&>(mr_or_mw));
    if (detail::is_closing(m)) return fail(impl(), Status::kInvalidDeviceState);
    // Only fast-registered MRs are invalidated; a registered one is deregistered instead.
    if (m->pd != impl()->pd ||
        m->state.load(std::memory_order_acquire) != detail::MrImpl::State::kFrmr)
      return fail(impl(), Status::kInvalidParameter);
    key = m->key.load(std::memory_order_acquire);
  } else if (mr_or_mw.object_type() == ObjectType::kMw) {
    detail::MwImpl* m = detail::MwImpl::of(static_cast<Mw&>(mr_or_mw));
    if (detail::is_closing(m)) return fail(impl(), Status::kInvalidDeviceState);
    if (m->pd != impl()->pd) return fail(impl(), Status::kInvalidParameter);
    key = m->key.load(std::memory_order_acquire);
  } else {
    return fail(impl(), Status::kInvalidParameter);
  }
  dp::SendWqe w;
  w.opcode = WrOpcode::kLocalInvalidate;
  w.request_context = request_context;
  w.flags = flags;
  w.mr_key = key;
  return detail::post(impl(), w);
}

Status Qp::bind(void* request_context, Mr& mr, Mw& mw, const void* virtual_address, size_t length,
                uint32_t flags) noexcept {
  using detail::fail;
  if (impl_->remote)
    return detail::remote_bind(impl_, request_context, detail::MrImpl::base_of(mr),
                               detail::MwImpl::base_of(mw), virtual_address, length, flags);
  if (detail::MrImpl::base_of(mr)->remote || detail::MwImpl::base_of(mw)->remote)
    return fail(impl(), Status::kInvalidParameter);
  detail::MrImpl* m = detail::MrImpl::of(mr);
  detail::MwImpl* win = detail::MwImpl::of(mw);
  // An MR whose close pends (a window is still bound to it) takes no new window.
  if (detail::is_closing(impl()) || detail::is_closing(m) || detail::is_closing(win))
    return fail(impl(), Status::kInvalidDeviceState);
  if ((flags & ~detail::kBindFlags) != 0) return fail(impl(), Status::kInvalidParameter);
  const auto va = reinterpret_cast<uint64_t>(virtual_address);
  // Zero-based windows are not supported (ndkpi.md §2.2); a window lies inside its MR; the MR
  // and the window belong to this QP's PD (so not to another adapter).
  if (m->pd != impl()->pd || win->pd != impl()->pd || va == 0 ||
      m->state.load(std::memory_order_acquire) != detail::MrImpl::State::kRegistered)
    return fail(impl(), Status::kInvalidParameter);
  if (length > impl()->adapter->info.max_window_size)
    return fail(impl(), Status::kInvalidBufferSize);
  const uint64_t base = m->base.load(std::memory_order_relaxed);
  const uint64_t mlen = m->length.load(std::memory_order_relaxed);
  if (va < base || va - base > mlen || length > mlen - (va - base))
    return fail(impl(), Status::kInvalidParameter);
  // NdkBind: a window granting remote write (or atomics) needs an MR with local write.
  const uint32_t acc =
      dp::access_from_op_flags(flags & detail::kRemoteRightFlags) &
      (dp::access::kRemoteRead | dp::access::kRemoteWrite | dp::access::kRemoteAtomic);
  if ((acc & (dp::access::kRemoteWrite | dp::access::kRemoteAtomic)) != 0 &&
      (m->access.load(std::memory_order_relaxed) & dp::access::kLocalWrite) == 0)
    return fail(impl(), Status::kAccessViolation);
  dp::SendWqe w;
  w.opcode = WrOpcode::kBind;
  w.request_context = request_context;
  w.flags = flags;
  w.rkey = m->key.load(std::memory_order_relaxed);
  w.base_va = va;
  w.fr_length = length;
  w.access = acc;
  // The window's new token is readable as soon as this call returns (ndkpi.md §2.2).
  w.mr_key =
      impl()->adapter->ctl->mrs().next_fast_register_key(win->key.load(std::memory_order_relaxed));
  const Status s = detail::post(impl(), w);
  if (s == Status::kSuccess) win->key.store(w.mr_key, std::memory_order_release);
  return s;
}

}  // namespace urnic
