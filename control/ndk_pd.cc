// Protection domains, memory regions (normal and fast-register), memory windows and shared
// receive queues of the public API. Every MR-table change from this side (register, allocate,
// deregister) holds the adapter's mutex: the table's control-side calls must come one at a time.
#include <sys/mman.h>

#include <algorithm>

#include "control/ndk_internal.h"
#include "control/ndk_remote.h"

namespace urnic {
namespace detail {
namespace {

// Whether [a, a + len) is mapped in this process. msync(MS_ASYNC) checks that every page of
// the range belongs to a mapping (ENOMEM otherwise) and does nothing else for private memory:
// one system call whatever the size, and the memory is not touched.
bool mapped(uint64_t a, uint64_t len) noexcept {
  constexpr uint64_t kMask = kPageSize - 1;
  const uint64_t start = a & ~kMask;
  return msync(reinterpret_cast<void*>(start), a + len - start, MS_ASYNC) == 0;
}

constexpr uint32_t kMrFlags = mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteRead |
                              mr_flag::kAllowRemoteWrite | mr_flag::kRdmaReadSink |
                              mr_flag::kAllowRemoteAtomic;

// Creation of a PD's child: checks the PD is still usable, then registers the object.
Status adopt_child(PdImpl* pd, ObjectImpl* o) {
  AdapterImpl* a = pd->adapter;
  if (a->shutting_down || pd->life != Life::kLive) return Status::kInvalidDeviceState;
  a->adopt_locked(o, {pd});
  return Status::kSuccess;
}

}  // namespace

Status PdImpl::teardown_locked() {
  if (priv_token != 0) (void)adapter->ctl->mrs().deregister(priv_token);
  priv_token = 0;
  return Status::kSuccess;
}

MrImpl::MrImpl(AdapterImpl* a, PdImpl* p, bool f) : ImplOf(ObjectType::kMr, a), pd(p), fast(f) {}

Status MrImpl::teardown_locked() {
  if (state.load(std::memory_order_relaxed) != State::kEmpty) {
    // A window still bound to the region: the close waits (ndkpi.md §1.4, MR -> MW through
    // Bind) and the control thread tries again.
    if (adapter->ctl->mrs().deregister(key.load(std::memory_order_relaxed)) == Status::kDeviceBusy)
      return Status::kPending;
    state.store(State::kEmpty, std::memory_order_relaxed);
  }
  return Status::kSuccess;
}

MwImpl::MwImpl(AdapterImpl* a, PdImpl* p) : ImplOf(ObjectType::kMw, a), pd(p) {}

Status MwImpl::teardown_locked() {
  // Unbinds the window if it is bound (its region's bound count drops), then frees it.
  (void)adapter->ctl->mrs().deregister(key.load(std::memory_order_relaxed));
  return Status::kSuccess;
}

SrqImpl::SrqImpl(AdapterImpl* a, PdImpl* p, uint32_t depth, uint32_t max_sge,
                 SrqNotificationCallback cb, void* ctx)
    : ImplOf(ObjectType::kSrq, a), pd(p), srq(depth, max_sge), notify_cb(cb), notify_ctx(ctx) {
  srq.set_doorbell(&a->doorbell);
}

Status SrqImpl::teardown_locked() {
  // Its QPs (successors) are gone: no engine takes from it any more. Receives still posted are
  // dropped without completions (they have no QP, hence no CQ, to complete on).
  std::erase(adapter->srqs, this);
  if (engine < adapter->placed.size()) --adapter->placed[engine];
  return Status::kSuccess;
}

}  // namespace detail

// ---- Pd -----------------------------------------------------------------------------------------

// A PD whose close was requested (or that the adapter's close tore down: the MR table is gone
// then) creates nothing: checked first, before anything of the adapter is used.
Status Pd::create_mr(bool fast_register, CreateCompletion, void*, Handle<Mr>* out) noexcept {
  if (impl_->remote) return detail::remote_create_mr(impl_, fast_register, out);
  if (out == nullptr) return Status::kInvalidParameter;
  if (detail::is_closing(impl())) return Status::kInvalidDeviceState;
  return detail::log_create(
      "MR creation", detail::guarded([&] {
        auto mr = std::make_unique<detail::MrImpl>(impl()->adapter, impl(), fast_register);
        std::lock_guard lk(impl()->adapter->mu);
        if (Status s = detail::adopt_child(impl(), mr.get()); s != Status::kSuccess) return s;
        *out = Handle<Mr>(&mr.release()->pub_);
        return Status::kSuccess;
      }));
}

Status Pd::create_mw(CreateCompletion, void*, Handle<Mw>* out) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
  if (impl_->remote) return detail::remote_create_mw(impl_, out);
  return detail::log_create(
      "MW creation", detail::guarded([&] {
        auto mw = std::make_unique<detail::MwImpl>(impl()->adapter, impl());
        std::lock_guard lk(impl()->adapter->mu);
        uint32_t key = 0;
        if (Status s = impl()->adapter->ctl->mrs().alloc_window(impl()->pd, &key);
            s != Status::kSuccess)
          return s;
        mw->key.store(key, std::memory_order_relaxed);
        if (Status s = detail::adopt_child(impl(), mw.get()); s != Status::kSuccess) {
          (void)impl()->adapter->ctl->mrs().deregister(key);
          return s;
        }
        *out = Handle<Mw>(&mw.release()->pub_);
        return Status::kSuccess;
      }));
}

Status Pd::create_srq(uint32_t depth, uint32_t max_receive_request_sge, uint32_t notify_threshold,
                      SrqNotificationCallback notification, void* notification_context,
                      CreateCompletion completion, void* request_context,
                      Handle<Srq>* out) noexcept {
  return create_srq(depth, max_receive_request_sge, notify_threshold, notification,
                    notification_context, 0, completion, request_context, out);
}

Status Pd::create_srq(uint32_t depth, uint32_t max_receive_request_sge, uint32_t notify_threshold,
                      SrqNotificationCallback notification, void* notification_context,
                      uint64_t affinity, CreateCompletion, void*, Handle<Srq>* out) noexcept {
  if (impl_->remote)
    return detail::remote_create_srq(impl_, depth, max_receive_request_sge, notify_threshold,
                                     notification, notification_context, affinity, out);
  const AdapterInfo& info = impl()->adapter->info;
  if (out == nullptr || depth == 0 || depth > info.max_srq_depth ||
      max_receive_request_sge > info.max_receive_request_sge)
    return Status::kInvalidParameter;
  if (detail::is_closing(impl())) return Status::kInvalidDeviceState;
  return detail::log_create(
      "SRQ creation", detail::guarded([&] {
        auto srq = std::make_unique<detail::SrqImpl>(impl()->adapter, impl(), depth,
                                                     max_receive_request_sge, notification,
                                                     notification_context);
        // Armed at creation, checked only as receives are consumed (an empty new SRQ is not "below
        // the threshold" until the consumer has posted to it).
        if (notify_threshold != 0) srq->srq.arm_limit(notify_threshold, false);
        detail::AdapterImpl* a = impl()->adapter;
        std::lock_guard lk(a->mu);
        const int e = a->shutting_down ? 0 : a->place_locked(affinity);
        if (e < 0) return Status::kInvalidParameter;
        if (Status s = detail::adopt_child(impl(), srq.get()); s != Status::kSuccess) return s;
        srq->engine = static_cast<uint8_t>(e);
        ++a->placed[srq->engine];
        a->srqs.push_back(srq.get());
        *out = Handle<Srq>(&srq.release()->pub_);
        return Status::kSuccess;
      }));
}

Status Pd::get_privileged_memory_region_token(uint32_t* token) noexcept {
  if (impl_->remote)
    return detail::remote_unsupported(
        "Pd::get_privileged_memory_region_token",
        "a token over all memory would reach the daemon's and other clients'");
  if (token == nullptr) return Status::kInvalidParameter;
  std::lock_guard lk(impl()->adapter->mu);
  // A PD whose close pends (it still has successors) hands out nothing new, like its creates.
  if (impl()->adapter->shutting_down || impl()->life != detail::Life::kLive)
    return Status::kInvalidDeviceState;
  if (impl()->priv_token == 0) {
    // The whole address space but page 0, local read and write, never remote (ndkpi.md §4.4):
    // logical addresses are virtual addresses here.
    uint32_t key = 0;
    const Status s = impl()->adapter->ctl->mrs().register_region(
        impl()->pd, kPageSize, UINT64_MAX - kPageSize, dp::access::kLocalWrite, &key);
    if (s != Status::kSuccess) return s;
    impl()->priv_token = key;
  }
  *token = impl()->priv_token;
  return Status::kSuccess;
}

// ---- Mr -----------------------------------------------------------------------------------------

Status Mr::register_mr(const void* address, size_t length, uint32_t flags, RequestCompletion,
                       void*) noexcept {
  // An MR whose close pends (a window is still bound to it) takes no new registration.
  if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
  const auto va = reinterpret_cast<uint64_t>(address);
  if (va == 0 || length == 0 || (flags & ~detail::kMrFlags) != 0 || length - 1 > UINT64_MAX - va)
    return Status::kInvalidParameter;
  if (impl_->remote) return detail::remote_register_mr(impl_, address, length, flags);
  if (impl()->fast) return Status::kInvalidDeviceRequest;
  if (length > impl()->adapter->info.max_registration_size) return Status::kInvalidBufferSize;
  if (!detail::mapped(va, length)) return Status::kInvalidBufferSize;
  std::lock_guard lk(impl()->adapter->mu);
  if (impl()->state.load(std::memory_order_relaxed) != detail::MrImpl::State::kEmpty)
    return Status::kInvalidDeviceState;
  uint32_t key = 0;
  const uint32_t acc = dp::access_from_mr_flags(flags);
  if (Status s = impl()->adapter->ctl->mrs().register_region(impl()->pd->pd, va, length, acc, &key);
      s != Status::kSuccess)
    return detail::log_create("MR registration", s);
  impl()->base.store(va, std::memory_order_relaxed);
  impl()->length.store(length, std::memory_order_relaxed);
  impl()->access.store(acc, std::memory_order_relaxed);
  impl()->key.store(key, std::memory_order_relaxed);
  // Release: a post on another thread that reads kRegistered (acquire) sees the fields.
  impl()->state.store(detail::MrImpl::State::kRegistered, std::memory_order_release);
  return Status::kSuccess;
}

Status Mr::deregister_mr(RequestCompletion, void*) noexcept {
  // The close already deregisters (once the bound windows are gone): kInvalidDeviceState, not
  // kDeviceBusy, so that the consumer does not retry on an object it has given up.
  if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
  if (impl_->remote) return detail::remote_deregister_mr(impl_);
  std::lock_guard lk(impl()->adapter->mu);
  if (impl()->state.load(std::memory_order_relaxed) != detail::MrImpl::State::kRegistered)
    return Status::kInvalidDeviceState;
  if (Status s =
          impl()->adapter->ctl->mrs().deregister(impl()->key.load(std::memory_order_relaxed));
      s != Status::kSuccess)
    return s;  // kDeviceBusy: a window is bound
  impl()->state.store(detail::MrImpl::State::kEmpty, std::memory_order_release);
  impl()->key.store(0, std::memory_order_relaxed);
  return Status::kSuccess;
}

Status Mr::initialize_fast_register_mr(uint32_t adapter_page_count, bool remote_access,
                                       RequestCompletion, void*) noexcept {
  if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
  if (impl_->remote) return detail::remote_init_frmr(impl_, adapter_page_count, remote_access);
  if (!impl()->fast) return Status::kInvalidDeviceRequest;
  if (adapter_page_count == 0) return Status::kInvalidParameter;
  if (adapter_page_count > impl()->adapter->info.frmr_page_count)
    return Status::kImplementationLimit;
  return detail::guarded([&] {
    std::lock_guard lk(impl()->adapter->mu);
    if (impl()->state.load(std::memory_order_relaxed) != detail::MrImpl::State::kEmpty)
      return Status::kInvalidDeviceState;
    uint32_t key = 0;
    if (Status s = impl()->adapter->ctl->mrs().alloc_fast_register(
            impl()->pd->pd, adapter_page_count, remote_access, &key);
        s != Status::kSuccess)
      return detail::log_create("fast-register MR initialisation",
                                s == Status::kNoMemory ? Status::kInsufficientResources : s);
    impl()->max_pages.store(adapter_page_count, std::memory_order_relaxed);
    impl()->remote_ok.store(remote_access, std::memory_order_relaxed);
    impl()->key.store(key, std::memory_order_relaxed);
    impl()->state.store(detail::MrImpl::State::kFrmr, std::memory_order_release);
    return Status::kSuccess;
  });
}

uint32_t Mr::get_local_token() const noexcept {
  if (impl_->remote) return detail::remote_token(impl_);
  return impl()->key.load(std::memory_order_acquire);
}
uint32_t Mr::get_remote_token() const noexcept {
  if (impl_->remote) return detail::remote_token(impl_);
  return impl()->key.load(std::memory_order_acquire);
}

// ---- Mw -----------------------------------------------------------------------------------------

uint32_t Mw::get_remote_token() const noexcept {
  if (impl_->remote) return detail::remote_mw_token(impl_);
  return impl()->key.load(std::memory_order_acquire);
}

// ---- Srq ----------------------------------------------------------------------------------------

Status Srq::receive(void* request_context, std::span<const Sge> sgl) noexcept {
  if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
  if (impl_->remote) [[unlikely]]
    return detail::remote_srq_receive(impl_, request_context, sgl);
  dp::RecvWqe w;
  w.request_context = request_context;
  if (Status s = detail::fill_sgl(w, sgl, impl()->srq.max_sge()); s != Status::kSuccess) return s;
  return impl()->srq.post(w);
}

Status Srq::modify(uint32_t depth, uint32_t notify_threshold, RequestCompletion, void*) noexcept {
  if (detail::is_closing(impl_)) return Status::kInvalidDeviceState;
  if (impl_->remote) return detail::remote_srq_modify(impl_, depth, notify_threshold);
  if (depth > impl()->adapter->info.max_srq_depth) return Status::kInvalidParameter;
  return detail::guarded([&] {
    std::lock_guard lk(impl()->adapter->mu);
    if (depth != 0 && !impl()->srq.set_depth(depth)) return Status::kInvalidParameter;
    if (notify_threshold != 0) impl()->srq.arm_limit(notify_threshold, true);
    return Status::kSuccess;
  });
}

}  // namespace urnic
