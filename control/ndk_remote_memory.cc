// Attach mode's memory windows and fast-register MRs (ndk_remote.h): the client side of the
// daemon's own (docs/daemon.md "Memory windows and fast-register MRs"). The daemon's public API
// makes each check of the embedded calls; Qp::bind and Qp::fast_register wait for its verdict
// (RemoteQp::post_sync), so they return the embedded statuses and the new token.
#include "control/ndk_remote.h"
#include "urnic/mr.h"
#include "urnic/mw.h"

namespace urnic::detail {
namespace {

constexpr uint32_t kLocalFlags = op_flag::kSilentSuccess | op_flag::kReadFence | op_flag::kDefer;

// `o` as an attached object of `a` of type `t`, or null.
template <class Impl>
Impl* attached_as(ObjectImpl* o, const AdapterImpl* a, ObjectType t) noexcept {
  return o != nullptr && o->remote && o->adapter == a && o->type == t ? static_cast<Impl*>(o)
                                                                      : nullptr;
}

}  // namespace

Status RemoteMwImpl::teardown_locked() {
  if (handle != 0) (void)remote::destroy(handle);
  handle = 0;
  return Status::kSuccess;
}

Status remote_create_mw(ObjectImpl* pd, Handle<Mw>* out) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  AdapterImpl* a = pd->adapter;
  return guarded([&] {
    auto w = std::make_unique<RemoteMwImpl>(a, static_cast<RemotePdImpl*>(pd));
    std::lock_guard lk(a->mu);
    if (!usable_locked(a, {pd})) return Status::kInvalidDeviceState;
    uint32_t token = 0;
    if (Status s = remote::create_mw(w->pd->handle, &w->handle, &token); s != Status::kSuccess)
      return s;
    w->token.store(token, std::memory_order_relaxed);
    if (Status s = adopt_remote_locked(w.get(), {pd}); s != Status::kSuccess) return s;
    *out = Handle<Mw>(&w.release()->pub_);
    return Status::kSuccess;
  });
}

uint32_t remote_mw_token(const ObjectImpl* mw) noexcept {
  return static_cast<const RemoteMwImpl*>(mw)->token.load(std::memory_order_acquire);
}

Status remote_init_frmr(ObjectImpl* mr, uint32_t pages, bool remote_access) noexcept {
  auto* m = static_cast<RemoteMrImpl*>(mr);
  if (!m->fast) return Status::kInvalidDeviceRequest;
  if (pages == 0) return Status::kInvalidParameter;
  if (pages > m->adapter->info.frmr_page_count) return Status::kImplementationLimit;
  std::lock_guard lk(m->adapter->mu);
  if (m->handle != 0) return Status::kInvalidDeviceState;
  uint32_t h = 0, token = 0;
  if (Status s = remote::init_frmr(m->pd->handle, pages, remote_access, &h, &token);
      s != Status::kSuccess)
    return s;
  m->handle = h;
  m->max_pages.store(pages, std::memory_order_relaxed);
  m->remote_ok.store(remote_access, std::memory_order_relaxed);
  m->lkey.store(token, std::memory_order_relaxed);
  m->rkey.store(token, std::memory_order_release);
  return Status::kSuccess;
}

Status remote_fast_register(ObjectImpl* qp, void* ctx, ObjectImpl* mr,
                            std::span<const uint64_t> pages, uint32_t fbo, size_t length,
                            uint64_t base_va, uint32_t flags) noexcept {
  auto* q = static_cast<RemoteQpImpl*>(qp);
  auto* m = attached_as<RemoteMrImpl>(mr, q->adapter, ObjectType::kMr);
  if (is_closing(q) || (m != nullptr && is_closing(m))) return Status::kInvalidDeviceState;
  // An MR of another adapter, or not an initialised fast-register MR of this QP's PD.
  if (m == nullptr || !m->fast || m->pd != q->pd ||
      m->max_pages.load(std::memory_order_relaxed) == 0 ||
      (pages.data() == nullptr && !pages.empty()))
    return Status::kInvalidParameter;
  if (q->datagram || !q->qp.fast_register_ok())
    return fail_with(Status::kInvalidDeviceRequest,
                     "fast_register: not on this QP (a datagram QP, or a daemon older than 1.7)");
  // The daemon checks the rest as the embedded call does; the page count bounds our copy.
  if (pages.size() > m->max_pages.load(std::memory_order_relaxed))
    return Status::kImplementationLimit;
  uint32_t token = 0;
  const remote::RemoteQp::SyncRequest r{
      shm::SendOp::kFastRegister, flags, m->handle, fbo, base_va, length, pages};
  const Status s = q->qp.post_sync(ctx, r, &token);
  if (s == Status::kSuccess) {
    m->lkey.store(token, std::memory_order_relaxed);
    m->rkey.store(token, std::memory_order_release);
  } else if (s == Status::kInvalidParameter) {
    // Most likely the one check of attach mode alone (the others are the client's own).
    return fail_with(s,
                     "fast_register: refused by urnicd: a page outside the memory this process "
                     "shares with it (register the buffer, or allocate it with "
                     "urnic::alloc_memory), or a malformed request");
  }
  return s;
}

Status remote_invalidate(ObjectImpl* qp, void* ctx, ObjectImpl* target, uint32_t flags) noexcept {
  auto* q = static_cast<RemoteQpImpl*>(qp);
  if (is_closing(q) || (target != nullptr && is_closing(target)))
    return Status::kInvalidDeviceState;
  if ((flags & ~kLocalFlags) != 0 || q->datagram) return Status::kInvalidParameter;
  // As embedded: only fast-register MRs and windows of this QP's PD; the daemon's check would
  // fail the QP, so a mismatch is refused here.
  uint32_t handle = 0;
  if (auto* m = attached_as<RemoteMrImpl>(target, q->adapter, ObjectType::kMr);
      m != nullptr && m->fast && m->pd == q->pd)
    handle = m->handle;
  else if (auto* w = attached_as<RemoteMwImpl>(target, q->adapter, ObjectType::kMw);
           w != nullptr && w->pd == q->pd)
    handle = w->handle;
  if (handle == 0) return Status::kInvalidParameter;
  return q->qp.post(shm::SendOp::kInvalidate, ctx, {}, 0, handle, flags);
}

Status remote_bind(ObjectImpl* qp, void* ctx, ObjectImpl* mr, ObjectImpl* mw, const void* address,
                   size_t length, uint32_t flags) noexcept {
  auto* q = static_cast<RemoteQpImpl*>(qp);
  auto* m = attached_as<RemoteMrImpl>(mr, q->adapter, ObjectType::kMr);
  auto* w = attached_as<RemoteMwImpl>(mw, q->adapter, ObjectType::kMw);
  if (is_closing(q) || (m != nullptr && is_closing(m)) || (w != nullptr && is_closing(w)))
    return Status::kInvalidDeviceState;
  if (m == nullptr || w == nullptr || m->fast || m->handle == 0 || q->datagram)
    return Status::kInvalidParameter;
  uint32_t token = 0;
  const remote::RemoteQp::SyncRequest r{shm::SendOp::kBind,
                                        flags,
                                        m->handle,
                                        w->handle,
                                        reinterpret_cast<uint64_t>(address),
                                        length,
                                        {}};
  const Status s = q->qp.post_sync(ctx, r, &token);
  if (s == Status::kSuccess) w->token.store(token, std::memory_order_release);
  return s;
}

}  // namespace urnic::detail
