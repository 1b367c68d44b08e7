// Attach mode's side of the public API (control/ndk_remote.h): the Adapter opened by name from
// urnicd and its PDs, CQs, MRs and QPs, each backed by the daemon's object of the same kind.
#include "control/ndk_remote.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <system_error>

#include "control/control_plane.h"
#include "control/last_error.h"
#include "urnic/daemon.h"

namespace urnic {
namespace detail {

bool usable_locked(const AdapterImpl* a, std::initializer_list<ObjectImpl*> objs) {
  if (a->shutting_down) return false;
  return std::none_of(objs.begin(), objs.end(),
                      [](const ObjectImpl* m) { return m != nullptr && m->life != Life::kLive; });
}

Status adopt_remote_locked(ObjectImpl* o, std::initializer_list<ObjectImpl*> antecedents) {
  if (!usable_locked(o->adapter, antecedents)) return Status::kInvalidDeviceState;
  o->adapter->adopt_locked(o, antecedents);
  return Status::kSuccess;
}

namespace {

// The GID table as the embedded adapter's ctl::ControlPlane::gids() orders it: link-local,
// IPv4-mapped, IPv6.
std::vector<std::array<uint8_t, 16>> gids_of(const DaemonAdapter& d) {
  std::vector<std::array<uint8_t, 16>> g{ctl::link_local_gid(d.mac)};
  if (d.ipv4 != 0) g.push_back(ctl::gid_from_ipv4(d.ipv4));
  if (d.ipv6) g.push_back(*d.ipv6);
  return g;
}

}  // namespace

Status RemotePdImpl::teardown_locked() {
  // A daemon that is gone took its objects with it: nothing is left to wait for.
  if (handle != 0) (void)remote::destroy(handle);
  handle = 0;
  return Status::kSuccess;
}

Status RemoteMrImpl::teardown_locked() {
  if (handle != 0) (void)remote::destroy(handle);
  handle = 0;
  lkey.store(0, std::memory_order_relaxed);
  rkey.store(0, std::memory_order_relaxed);
  return Status::kSuccess;
}

// ---- CQs and their notifications -------------------------------------------------------------

RemoteCqImpl::~RemoteCqImpl() {
  if (event_fd >= 0) ::close(event_fd);
  if (const int fd = user_fd.load(std::memory_order_relaxed); fd >= 0) ::close(fd);
}

void* RemoteCqImpl::extension(const ExtensionId& id, Version v) noexcept {
  if (id == CqExtension::kId && version_ok(v, CqExtension::kVersion)) return &ext_;
  return nullptr;
}

Status RemoteCqImpl::teardown_locked() {
  (void)cq.destroy();  // a daemon that is gone took it with it
  return Status::kSuccess;
}

void RemoteCqImpl::stop_events() noexcept {
  events_.store(false, std::memory_order_release);
  if (adapter->remote_events) adapter->remote_events->remove(this);
}

RemoteEvents::RemoteEvents(AdapterImpl* a) : a_(a) {
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake fd
  if (ep_ < 0 || wake_ < 0 || ::epoll_ctl(ep_, EPOLL_CTL_ADD, wake_, &ev) != 0) {
    const int e = errno;
    if (ep_ >= 0) ::close(ep_);
    if (wake_ >= 0) ::close(wake_);
    throw std::system_error(e, std::generic_category(), "attach-mode event thread");
  }
  t_ = std::thread([this] { run(); });
}

RemoteEvents::~RemoteEvents() {
  stop_.store(true, std::memory_order_release);
  wake();
  t_.join();
  // The channel's connectors and listeners are closed by now (the adapter's close closes every
  // object first); a daemon that is gone took the channel with it.
  if (const uint32_t ch = cm_channel_.load(std::memory_order_acquire); ch != 0)
    (void)remote::destroy(ch);
  if (cm_fd_ >= 0) ::close(cm_fd_);
  ::close(ep_);
  ::close(wake_);
}

bool RemoteEvents::add(RemoteCqImpl* c) noexcept {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = c;
  return ::epoll_ctl(ep_, EPOLL_CTL_ADD, c->event_fd, &ev) == 0;
}

void RemoteEvents::remove(RemoteCqImpl* c) noexcept {
  (void)::epoll_ctl(ep_, EPOLL_CTL_DEL, c->event_fd, nullptr);
}

void RemoteEvents::wake() noexcept {
  const uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof one);
}

namespace {

// One notification of `c` (mu held): the consumer's eventfd now, its callback deferred.
void deliver_locked(AdapterImpl* a, RemoteCqImpl* c, Status s) {
  if (!c->events_.load(std::memory_order_acquire)) return;
  if (const int fd = c->user_fd.load(std::memory_order_acquire); fd >= 0) {
    const uint64_t one = 1;
    (void)!::write(fd, &one, sizeof one);
  }
  if (c->notify_cb == nullptr) return;
  a->defer_locked([c, s] {
    if (c->events_.load(std::memory_order_acquire)) c->notify_cb(c->notify_ctx, s);
  });
}

}  // namespace

void RemoteEvents::run() {
  while (!stop_.load(std::memory_order_acquire)) {
    epoll_event evs[16];
    // The timeout only bounds how late a stop is seen should a wake be lost; work wakes it.
    const int n = ::epoll_wait(ep_, evs, 16, 100);
    bool cm = false;
    {
      std::lock_guard lk(a_->mu);
      for (int i = 0; i < n; ++i) {
        uint64_t count = 0;
        if (evs[i].data.ptr == &cm_fd_) {  // the CM channel's: taken below, without the lock
          cm = ::read(cm_fd_, &count, sizeof count) == sizeof count;
          continue;
        }
        auto* c = static_cast<RemoteCqImpl*>(evs[i].data.ptr);
        // A CQ whose close began after epoll_wait returned is still alive: its close completes
        // in poll() below, on this thread.
        if (::read(c != nullptr ? c->event_fd : wake_, &count, sizeof count) != sizeof count)
          continue;
        for (uint64_t k = 0; c != nullptr && k < count; ++k)
          deliver_locked(a_, c, Status::kSuccess);
      }
      for (ObjectImpl* o : a_->objects) {
        if (o->type != ObjectType::kCq) continue;
        auto* c = static_cast<RemoteCqImpl*>(o);
        if (c->cancelled_.exchange(false, std::memory_order_acq_rel))
          deliver_locked(a_, c, Status::kCancelled);
      }
    }
    if (cm) remote_cm_events(a_, cm_channel_.load(std::memory_order_acquire));
    // Pending closes, then the callbacks, one at a time, without the lock.
    while (a_->poll()) {
    }
  }
}

void remote_arm(ObjectImpl* cq, CqNotify type) noexcept {
  if (is_closing(cq)) return;
  auto* c = static_cast<RemoteCqImpl*>(cq);
  uint32_t level = shm::kArmNone;
  switch (type) {
    case CqNotify::kErrors:
      level = shm::kArmErrors;
      break;
    case CqNotify::kSolicited:
      level = shm::kArmSolicited;
      break;
    case CqNotify::kAny:
      level = shm::kArmAny;
      break;
    default:
      return;  // NdkArmCq is VOID: an unknown type is ignored
  }
  if (c->cq.arm(level)) {
    // Satisfied by what waits in the ring already: fired here, delivered by the event thread.
    const uint64_t one = 1;
    (void)!::write(c->event_fd, &one, sizeof one);
  }
}

int remote_notification_fd(ObjectImpl* cq) noexcept {
  bool made = false;
  return lazy_eventfd(&static_cast<RemoteCqImpl*>(cq)->user_fd, &made);
}

bool remote_cancel_notification(ObjectImpl* cq) noexcept {
  auto* c = static_cast<RemoteCqImpl*>(cq);
  if (c->cq.disarm() == shm::kArmNone) return false;
  c->cancelled_.store(true, std::memory_order_release);
  c->adapter->wake_remote();
  return true;
}

// ---- QPs ---------------------------------------------------------------------------------------

void* RemoteQpImpl::extension(const ExtensionId& id, Version v) noexcept {
  if (id == QpExtension::kId && version_ok(v, QpExtension::kVersion)) return &ext_;
  if (id == QpConnectExtension::kId && version_ok(v, QpConnectExtension::kVersion)) return &conn_;
  return nullptr;
}

// ---- Creation ----------------------------------------------------------------------------------

Status remote_create_cq(AdapterImpl* a, uint32_t depth, CqNotificationCallback notification,
                        void* notification_context, Handle<Cq>* out) noexcept {
  if (out == nullptr || depth == 0 || depth > a->info.max_cq_depth)
    return Status::kInvalidParameter;
  return guarded([&] {
    auto c = std::make_unique<RemoteCqImpl>(a, notification, notification_context);
    c->event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (c->event_fd < 0) return fail_with(Status::kInsufficientResources, "create_cq: no eventfd");
    if (Status s = c->cq.create(a->remote_index, depth, c->event_fd); s != Status::kSuccess)
      return s;
    c->depth = depth;
    std::lock_guard lk(a->mu);
    // ~RemoteCq destroys the daemon's CQ on either refusal.
    if (a->shutting_down) return Status::kInvalidDeviceState;
    if (!a->remote_events->add(c.get()))
      return fail_with(Status::kInsufficientResources, "create_cq: epoll");
    a->adopt_locked(c.get(), {});
    *out = Handle<Cq>(&c.release()->pub_);
    return Status::kSuccess;
  });
}

Status remote_resize_cq(ObjectImpl* cq, uint32_t depth, RequestCompletion completion,
                        void* context) noexcept {
  auto* c = static_cast<RemoteCqImpl*>(cq);
  AdapterImpl* a = c->adapter;
  if (depth == 0 || depth > a->info.max_cq_depth) return Status::kInvalidParameter;
  // One request, done when it returns; a completion is still a callback of the event thread,
  // after this returned kPending, as NDK promises.
  const Status s = c->cq.resize(depth);
  if (s == Status::kSuccess) c->depth = depth;
  if (completion == nullptr) return s;
  {
    std::lock_guard lk(a->mu);
    a->defer_locked([completion, context, s] { completion(context, s); });
  }
  a->remote_events->wake();
  return Status::kPending;
}

Status remote_moderate_cq(ObjectImpl* cq, uint32_t interval_us, uint32_t count) noexcept {
  auto* c = static_cast<RemoteCqImpl*>(cq);
  constexpr uint32_t kMax = UINT32_MAX;                      // MAXULONG
  const bool count_off = count == kMax || count > c->depth;  // interval only
  // ndkpi.md §3.4: "count only" with "interval only" is a contradiction.
  if (interval_us == kMax && count_off) return Status::kInvalidParameterMix;
  ipc::ModerateCqReq req{};
  req.cq = c->cq.handle();
  req.interval_us = interval_us;
  req.count = count_off ? kMax : count;
  ipc::ReplyHead rep{};
  return daemon_transact(ipc::MsgType::kModerateCq, &req, sizeof req, &rep, sizeof rep,
                         "control_interrupt_moderation");
}

Status remote_create_pd(AdapterImpl* a, Handle<Pd>* out) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  return guarded([&] {
    auto p = std::make_unique<RemotePdImpl>(a);
    if (Status s = remote::create_pd(a->remote_index, &p->handle); s != Status::kSuccess) return s;
    std::lock_guard lk(a->mu);
    if (a->shutting_down) {
      (void)p->teardown_locked();
      return Status::kInvalidDeviceState;
    }
    a->adopt_locked(p.get(), {});
    *out = Handle<Pd>(&p.release()->pub_);
    return Status::kSuccess;
  });
}

Status remote_create_mr(ObjectImpl* pd, bool fast_register, Handle<Mr>* out) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  AdapterImpl* a = pd->adapter;
  return guarded([&] {
    auto m = std::make_unique<RemoteMrImpl>(a, static_cast<RemotePdImpl*>(pd));
    m->fast = fast_register;
    std::lock_guard lk(a->mu);
    if (Status s = adopt_remote_locked(m.get(), {pd}); s != Status::kSuccess) return s;
    *out = Handle<Mr>(&m.release()->pub_);
    return Status::kSuccess;
  });
}

Status remote_create_qp(ObjectImpl* pd, ObjectImpl* rcq, ObjectImpl* scq, void* qp_context,
                        uint32_t rq_depth, uint32_t sq_depth, uint32_t max_rsge, uint32_t max_ssge,
                        uint32_t inline_size, Handle<Qp>* out, ObjectImpl* srq,
                        const uint32_t* qkey) noexcept {
  AdapterImpl* a = pd->adapter;
  if (out == nullptr || !rcq->remote || !scq->remote || rcq->adapter != a || scq->adapter != a ||
      (srq != nullptr && (!srq->remote || srq->adapter != a)))
    return Status::kInvalidParameter;
  const AdapterInfo& i = a->info;
  if (rq_depth == 0 || rq_depth > i.max_receive_queue_depth || sq_depth == 0 ||
      sq_depth > i.max_initiator_queue_depth || max_rsge > i.max_receive_request_sge ||
      max_ssge > i.max_initiator_request_sge || inline_size > i.max_inline_data_size)
    return Status::kInvalidParameter;
  return guarded([&] {
    auto q = std::make_unique<RemoteQpImpl>(a);
    {
      std::lock_guard lk(a->mu);
      if (!usable_locked(a, {pd, rcq, scq, srq})) return Status::kInvalidDeviceState;
    }
    const auto& r = static_cast<RemoteCqImpl*>(rcq)->cq;
    const auto& s = static_cast<RemoteCqImpl*>(scq)->cq;
    const uint32_t srq_handle = srq != nullptr ? static_cast<RemoteSrqImpl*>(srq)->srq.handle() : 0;
    if (Status st = q->qp.create(static_cast<RemotePdImpl*>(pd)->handle, s, r, sq_depth, rq_depth,
                                 max_ssge, max_rsge, inline_size, qp_context, srq_handle, qkey);
        st != Status::kSuccess)
      return st;
    q->datagram = qkey != nullptr;
    q->pd = static_cast<RemotePdImpl*>(pd);
    if (qkey != nullptr) q->attrs.qkey = *qkey;
    std::lock_guard lk(a->mu);
    // Between the two locks a close may have begun: ~RemoteQp destroys the daemon's QP then.
    if (Status st = adopt_remote_locked(q.get(), {pd, rcq, scq, srq}); st != Status::kSuccess)
      return st;
    q->has_srq = srq != nullptr;
    *out = Handle<Qp>(&q.release()->pub_);
    return Status::kSuccess;
  });
}

Status remote_create_srq(ObjectImpl* pd, uint32_t depth, uint32_t max_sge,
                         uint32_t notify_threshold, SrqNotificationCallback notification,
                         void* notification_context, uint64_t affinity, Handle<Srq>* out) noexcept {
  AdapterImpl* a = pd->adapter;
  const AdapterInfo& i = a->info;
  if (out == nullptr || depth == 0 || depth > i.max_srq_depth || max_sge == 0 ||
      max_sge > i.max_receive_request_sge)
    return Status::kInvalidParameter;
  const uint32_t engine = affinity == 0 ? 0 : static_cast<uint32_t>(std::countr_zero(affinity));
  return guarded([&] {
    auto q = std::make_unique<RemoteSrqImpl>(a, notification, notification_context);
    if (Status s = q->srq.create(static_cast<RemotePdImpl*>(pd)->handle, depth, max_sge, engine);
        s != Status::kSuccess)
      return s;
    {
      std::lock_guard lk(a->mu);
      if (Status s = adopt_remote_locked(q.get(), {pd}); s != Status::kSuccess) return s;
    }
    RemoteSrqImpl* r = q.release();
    *out = Handle<Srq>(&r->pub_);
    // A limit from the start: armed as Srq::modify arms it (the handle closes the SRQ if not).
    if (notify_threshold != 0) {
      if (Status s = remote_srq_modify(r, 0, notify_threshold); s != Status::kSuccess) {
        out->reset();
        return s;
      }
    }
    return Status::kSuccess;
  });
}

Status remote_srq_receive(ObjectImpl* srq, void* ctx, std::span<const Sge> sgl) noexcept {
  return static_cast<RemoteSrqImpl*>(srq)->srq.receive(ctx, sgl);
}

// ---- MR ----------------------------------------------------------------------------------------

Status remote_register_mr(ObjectImpl* mr, const void* address, size_t length,
                          uint32_t flags) noexcept {
  auto* m = static_cast<RemoteMrImpl*>(mr);
  AdapterImpl* a = m->adapter;
  std::lock_guard lk(a->mu);
  if (m->fast) return Status::kInvalidDeviceRequest;
  if (m->handle != 0) return Status::kInvalidDeviceState;
  if (length > a->info.max_registration_size) return Status::kInvalidBufferSize;
  // The engine reaches only memory shared with the daemon: move the pages there first (kept if
  // they are already, control/shared_memory.cc).
  if (Status s = ensure_shared(address, length); s != Status::kSuccess) return s;
  uint32_t h = 0, lkey = 0, rkey = 0;
  if (Status s = remote::register_mr(m->pd->handle, address, length, flags, &h, &lkey, &rkey);
      s != Status::kSuccess)
    return s;
  m->handle = h;
  m->lkey.store(lkey, std::memory_order_release);
  m->rkey.store(rkey, std::memory_order_release);
  return Status::kSuccess;
}

Status remote_deregister_mr(ObjectImpl* mr) noexcept {
  auto* m = static_cast<RemoteMrImpl*>(mr);
  std::lock_guard lk(m->adapter->mu);
  if (m->fast || m->handle == 0) return Status::kInvalidDeviceState;
  // A window bound to it: the daemon refuses (kDeviceBusy) and the MR stays registered.
  if (Status s = remote::destroy(m->handle); s != Status::kSuccess) return s;
  m->handle = 0;
  m->lkey.store(0, std::memory_order_relaxed);
  m->rkey.store(0, std::memory_order_relaxed);
  return Status::kSuccess;
}

uint32_t remote_token(const ObjectImpl* mr) noexcept {
  return static_cast<const RemoteMrImpl*>(mr)->rkey.load(std::memory_order_acquire);
}

// ---- CQ and QP: the rings ---------------------------------------------------------------------

size_t remote_poll(ObjectImpl* cq, std::span<Result> out) noexcept {
  return static_cast<RemoteCqImpl*>(cq)->cq.poll(out);
}
size_t remote_poll(ObjectImpl* cq, std::span<ResultEx> out) noexcept {
  return static_cast<RemoteCqImpl*>(cq)->cq.poll(out);
}

Status remote_post(ObjectImpl* qp, shm::SendOp op, uint32_t allowed, void* ctx,
                   std::span<const Sge> sgl, uint64_t remote_address, uint32_t remote_token,
                   uint32_t flags, uint32_t imm) noexcept {
  if (is_closing(qp)) return Status::kInvalidDeviceState;
  if ((flags & ~allowed) != 0) return Status::kInvalidParameter;
  return static_cast<RemoteQpImpl*>(qp)->qp.post(op, ctx, sgl, remote_address, remote_token, flags,
                                                 imm);
}

Status remote_atomic(ObjectImpl* qp, shm::SendOp op, void* ctx, const Sge& result,
                     uint64_t remote_address, uint32_t remote_token, uint64_t compare_add,
                     uint64_t swap, uint32_t flags) noexcept {
  constexpr uint32_t kLocal = op_flag::kSilentSuccess | op_flag::kReadFence | op_flag::kDefer;
  if (is_closing(qp)) return Status::kInvalidDeviceState;
  if ((flags & ~kLocal) != 0 || result.length != sizeof(uint64_t) ||
      result.addr > UINT64_MAX - sizeof(uint64_t) || (remote_address & 7) != 0)
    return Status::kInvalidParameter;
  return static_cast<RemoteQpImpl*>(qp)->qp.post(op, ctx, {&result, 1}, remote_address,
                                                 remote_token, flags, 0, compare_add, swap);
}

Status remote_create_address_handle(AdapterImpl* a, const AddressVector& av,
                                    AddressHandle* out) noexcept {
  return guarded([&] {
    {
      std::lock_guard lk(a->mu);
      if (a->shutting_down) return Status::kInvalidDeviceState;
    }
    uint32_t h = 0;
    if (Status s = remote::create_ah(a->remote_index, av, &h); s != Status::kSuccess) return s;
    AddressHandleAccess::set_remote(out, a, av, h);
    return Status::kSuccess;
  });
}

Status remote_send_datagram(ObjectImpl* qp, void* ctx, std::span<const Sge> sgl, uint32_t flags,
                            const AddressHandle& destination, uint32_t remote_qpn,
                            uint32_t remote_qkey, const uint32_t* immediate) noexcept {
  auto* q = static_cast<RemoteQpImpl*>(qp);
  if (is_closing(q)) return Status::kInvalidDeviceState;
  if (!q->datagram) return Status::kInvalidDeviceRequest;
  constexpr uint32_t kAllowed =
      op_flag::kSilentSuccess | op_flag::kSendAndSolicitEvent | op_flag::kInline | op_flag::kDefer;
  if ((flags & ~kAllowed) != 0 || remote_qpn > 0xFFFFFF ||
      AddressHandleAccess::adapter(destination) != q->adapter)
    return Status::kInvalidParameter;
  // One datagram is one packet (IBTA §9.8.2): refused here as the embedded post refuses it.
  uint64_t total = 0;
  for (const Sge& s : sgl) total += s.length;
  if (total > q->qp.max_datagram()) return Status::kBufferOverflow;
  const uint64_t ah = AddressHandleAccess::remote_handle(destination);
  return q->qp.post(immediate != nullptr ? shm::SendOp::kDatagramImm : shm::SendOp::kDatagram, ctx,
                    sgl, ah | uint64_t{remote_qkey} << 32, remote_qpn, flags,
                    immediate != nullptr ? *immediate : 0);
}

Status remote_query_counters(const AdapterImpl* a, uint32_t engine, AdapterCounters* out) noexcept {
  ipc::QueryCountersReq req{};
  req.adapter = a->remote_index;
  req.engine = engine;
  ipc::QueryCountersRep rep{};
  const Status s = daemon_transact(ipc::MsgType::kQueryCounters, &req, sizeof req, &rep, sizeof rep,
                                   "query_counters");
  if (s == Status::kSuccess) *out = rep.counters;
  return s;
}

QpCounters remote_qp_counters(const ObjectImpl* qp) noexcept {
  const auto* q = static_cast<const RemoteQpImpl*>(qp);
  ipc::QueryCountersReq req{};
  req.adapter = q->adapter->remote_index;
  req.engine = ipc::kAllEngines;
  req.qp = q->qp.handle();
  ipc::QueryCountersRep rep{};
  if (daemon_transact(ipc::MsgType::kQueryCounters, &req, sizeof req, &rep, sizeof rep,
                      "QpExtension::counters") != Status::kSuccess)
    return QpCounters{};
  return rep.counters.qps;
}

uint32_t remote_max_datagram(const ObjectImpl* qp) noexcept {
  return static_cast<const RemoteQpImpl*>(qp)->qp.max_datagram();
}

Status remote_receive(ObjectImpl* qp, void* ctx, std::span<const Sge> sgl) noexcept {
  auto* q = static_cast<RemoteQpImpl*>(qp);
  // As embedded: a QP with an SRQ has no receive queue of its own (posting to its unused ring
  // would fail it in the daemon).
  if (q->has_srq) return Status::kInvalidDeviceRequest;
  return q->qp.receive(ctx, sgl);
}

void remote_flush(ObjectImpl* qp) noexcept {
  QpAttributes err;
  err.state = QpState::kErr;
  (void)remote_modify(qp, err, qp_attr_mask::kState);
}

// ---- QpConnectExtension ------------------------------------------------------------------------

uint32_t remote_qpn(const ObjectImpl* qp) noexcept {
  return static_cast<const RemoteQpImpl*>(qp)->qp.qpn();
}

QpState remote_qp_state(const ObjectImpl* qp) noexcept {
  return static_cast<const RemoteQpImpl*>(qp)->state.load(std::memory_order_acquire);
}

Status remote_modify(ObjectImpl* qp, const QpAttributes& at, uint32_t mask) noexcept {
  auto* q = static_cast<RemoteQpImpl*>(qp);
  // The daemon checks every range and the transition (its engine applies it synchronously).
  const Status s = q->qp.modify(at, mask);
  if (s != Status::kSuccess) return s;
  QpAttributes& k = q->attrs;
  namespace m = qp_attr_mask;
  if (mask & m::kAccessFlags) k.access = at.access;
  if (mask & m::kPathMtu) k.path_mtu = at.path_mtu;
  if (mask & m::kDestQpn) k.dest_qpn = at.dest_qpn;
  if (mask & m::kRqPsn) k.rq_psn = at.rq_psn;
  if (mask & m::kSqPsn) k.sq_psn = at.sq_psn;
  if (mask & m::kMaxDestRdAtomic) k.max_dest_rd_atomic = at.max_dest_rd_atomic;
  if (mask & m::kMaxRdAtomic) k.max_rd_atomic = at.max_rd_atomic;
  if (mask & m::kTimeout) k.timeout = at.timeout;
  if (mask & m::kRetryCnt) k.retry_cnt = at.retry_cnt;
  if (mask & m::kRnrRetry) k.rnr_retry = at.rnr_retry;
  if (mask & m::kMinRnrTimer) k.min_rnr_timer = at.min_rnr_timer;
  if (mask & m::kAv) k.av = at.av;
  if (mask & m::kSelectiveRepeat) k.selective_repeat = at.selective_repeat;
  if (mask & m::kQkey) k.qkey = at.qkey;
  if (mask & m::kState) {
    k.state = at.state;
    q->state.store(at.state, std::memory_order_release);
  }
  return s;
}

Status remote_query(const ObjectImpl* qp, QpAttributes* out) noexcept {
  const auto* q = static_cast<const RemoteQpImpl*>(qp);
  *out = q->attrs;
  out->state = q->state.load(std::memory_order_acquire);
  return Status::kSuccess;
}

}  // namespace detail

// ---- Adapter::open by name ----------------------------------------------------------------------

Status Adapter::open(std::string_view name, std::unique_ptr<Adapter>* out) noexcept {
  if (out == nullptr || name.empty())
    return detail::fail_with(Status::kInvalidParameter, "Adapter::open: no adapter name");
  return detail::guarded([&]() -> Status {
    // Attaches on first use (the socket from URNIC_DAEMON or the default path).
    if (!attached())
      if (Status s = attach(); s != Status::kSuccess) return s;
    std::vector<DaemonAdapter> all;
    if (Status s = daemon_adapters(&all); s != Status::kSuccess) return s;
    const auto it = std::find_if(all.begin(), all.end(),
                                 [&](const DaemonAdapter& d) { return d.name == name; });
    if (it == all.end())
      return detail::fail_with(Status::kBadNetworkName,
                               "Adapter::open: the daemon has no adapter '" + std::string(name) +
                                   "' (urnicctl lists them)");
    auto impl = std::make_unique<detail::AdapterImpl>();
    if (Status s = daemon_query_adapter(name, &impl->info, nullptr); s != Status::kSuccess)
      return s;
    impl->remote = true;
    impl->remote_index = static_cast<uint32_t>(it - all.begin());
    impl->remote_address.mac = it->mac;
    impl->remote_address.ipv4 = it->ipv4;
    if (it->ipv6) {
      impl->remote_address.has_ipv6 = true;
      impl->remote_address.ipv6 = *it->ipv6;
    }
    impl->remote_gids = detail::gids_of(*it);
    impl->placed.assign(it->engines, 0);  // engines() says how many the daemon's adapter has
    impl->remote_events.reset(new detail::RemoteEvents(impl.get()));
    std::unique_ptr<Adapter> a(new Adapter(impl.get()));
    impl.release()->pub = a.get();
    *out = std::move(a);
    return detail::succeed();
  });
}

bool Adapter::attached_mode() const noexcept { return impl_->remote; }

void detail::AdapterImpl::StopEvents::operator()(RemoteEvents* e) const noexcept { delete e; }

void detail::AdapterImpl::wake_remote() noexcept {
  if (remote_events) remote_events->wake();
}

}  // namespace urnic
