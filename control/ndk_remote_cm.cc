// Attach mode's connectors and listeners (control/ndk_remote.h): each public call is one CmCall
// to the daemon, whose own Connector or Listener (daemon/cm_objects.cc) checks it and acts; what
// completes later arrives on the adapter's CM channel and is delivered here by the event thread
// with the rules of connector.h: every callback on that thread, one at a time, a request's
// completion exactly once (kCancelled when the connector closes first), a connect event's
// connector owned by the consumer.
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "control/last_error.h"
#include "control/ndk_remote.h"

namespace urnic::detail {

struct RemoteConnectorImpl final : ImplOf<RemoteConnectorImpl, Connector> {
  RemoteConnectorImpl(AdapterImpl* a, uint32_t h, bool dgram)
      : ImplOf(ObjectType::kConnector, a, true), handle(h), datagram(dgram) {}
  bool closes_inline() const noexcept override { return true; }
  Status teardown_locked() override {
    adapter->remote_events->cm_objects.erase(handle);
    (void)remote::destroy(handle);  // the daemon's connector closes (a daemon gone took it)
    if (req_pending) {
      req_pending = false;
      adapter->defer_locked([cb = req_cb, ctx = req_ctx] { cb(ctx, Status::kCancelled); });
    }
    if (qp != nullptr) {
      --qp->successors;  // mu held
      qp = nullptr;
    }
    return Status::kSuccess;
  }

  const uint32_t handle;  // the daemon's
  std::atomic<bool> datagram;
  // ---- guarded by adapter->mu
  RemoteQpImpl* qp = nullptr;  // an antecedent from connect / accept on
  bool req_pending = false;
  RequestCompletion req_cb = nullptr;
  void* req_ctx = nullptr;
  QpState done_state = QpState::kErr;  // what the QP is once the request succeeds
  bool sets_state = false;
  DisconnectEventCallback disc_cb = nullptr;
  void* disc_ctx = nullptr;
};

struct RemoteListenerImpl final : ImplOf<RemoteListenerImpl, Listener> {
  RemoteListenerImpl(AdapterImpl* a, uint32_t h, ConnectEventCallback cb, void* ctx)
      : ImplOf(ObjectType::kListener, a, true), handle(h), event_cb(cb), event_ctx(ctx) {}
  bool closes_inline() const noexcept override { return true; }
  // The daemon's listener goes at once: from here on requests are refused (ndkpi.md §5.4).
  Status teardown_locked() override {
    adapter->remote_events->cm_objects.erase(handle);
    (void)remote::destroy(handle);
    return Status::kSuccess;
  }

  const uint32_t handle;
  const ConnectEventCallback event_cb;
  void* const event_ctx;
  // ---- guarded by adapter->mu
  bool listening = false;
  ipc::WireAddr local{};
};

namespace {

RemoteConnectorImpl* conn_of(ObjectImpl* c) { return static_cast<RemoteConnectorImpl*>(c); }
RemoteListenerImpl* listener_of(ObjectImpl* l) { return static_cast<RemoteListenerImpl*>(l); }

// WireAddr -> sockaddr by NDK's size protocol (kBufferTooSmall with the size needed); `w` is an
// address (its family set).
Status copy_out(const ipc::WireAddr& w, sockaddr* sa, uint32_t* len) {
  if (len == nullptr) return Status::kInvalidParameter;
  sockaddr_storage ss;
  const uint32_t need = ipc::from_wire(w, &ss);
  const bool fits = sa != nullptr && *len >= need;
  if (fits) std::memcpy(sa, &ss, need);
  *len = need;
  return fits ? Status::kSuccess : Status::kBufferTooSmall;
}

// One CmCall of `op` on `object`, with `data` (checked against `max` first).
struct Call {
  ipc::CmCallReq req{};
  ipc::CmCallRep rep{};
  Call(uint32_t object, ipc::CmOp op) {
    req.object = object;
    req.op = static_cast<uint32_t>(op);
  }
  Status data(const void* p, uint32_t n, uint32_t max) {
    if (p == nullptr && n != 0) return Status::kInvalidParameter;
    if (n > std::min(max, ipc::kCmDataMax)) return Status::kInvalidBufferSize;
    if (n != 0) std::memcpy(req.data, p, n);
    req.data_length = n;
    return Status::kSuccess;
  }
  Status run(const char* what) {
    return daemon_transact(ipc::MsgType::kCmCall, &req, sizeof req, &rep, sizeof rep, what);
  }
};

// Runs a request that completes later (connect, accept, resolve_datagram, disconnect), as the
// embedded ConnectorImpl::request does: kPending and the completion later, or, without a
// completion, the wait for it (not on the event thread, which delivers it). `q` (may be null)
// becomes an antecedent; on success the QP is in `done_state` when `sets_state`.
Status request(RemoteConnectorImpl* c, RequestCompletion completion, void* context, RemoteQpImpl* q,
               bool sets_state, QpState done_state, Call& call, const char* what) {
  AdapterImpl* a = c->adapter;
  if (completion == nullptr && a->on_control_thread()) return Status::kInvalidDeviceState;
  SyncWait sync;
  {
    std::lock_guard lk(a->mu);
    if (c->life != Life::kLive || a->shutting_down) return Status::kInvalidDeviceState;
    if (c->req_pending) return Status::kConnectionActive;
    c->req_pending = true;
    c->req_cb = completion != nullptr ? completion : &SyncWait::on_request;
    c->req_ctx = completion != nullptr ? context : &sync;
    c->sets_state = sets_state;
    c->done_state = done_state;
    if (q != nullptr && c->qp == nullptr) {
      c->qp = q;
      ++q->successors;
    }
  }
  const Status s = call.run(what);
  if (s != Status::kPending) {
    std::lock_guard lk(a->mu);
    c->req_pending = false;
    return s;
  }
  if (completion != nullptr) return Status::kPending;
  a->wait(sync.done);
  return sync.status;
}

// The QP a connect / accept names: an attached one of the connector's adapter.
RemoteQpImpl* qp_for(RemoteConnectorImpl* c, ObjectImpl* qp) {
  if (qp == nullptr || !qp->remote || qp->adapter != c->adapter || qp->type != ObjectType::kQp)
    return nullptr;
  return static_cast<RemoteQpImpl*>(qp);
}

// A connection's QP changed state in the daemon (its CM moved it): the cached state follows.
void set_state_locked(RemoteQpImpl* q, QpState s) {
  if (q == nullptr) return;
  q->attrs.state = s;
  q->state.store(s, std::memory_order_release);
}

// Adopts a new connector or listener (its daemon handle `h`), or destroys it in the daemon when
// the adapter is closing.
template <class Impl, class Pub>
Status adopt(AdapterImpl* a, Impl* o, Handle<Pub>* out) {
  {
    std::lock_guard lk(a->mu);
    if (!a->shutting_down) {
      a->adopt_locked(o, {});
      a->remote_events->cm_objects[o->handle] = o;
      *out = Handle<Pub>(&o->pub_);
      return Status::kSuccess;
    }
  }
  (void)remote::destroy(o->handle);
  delete o;
  return Status::kInvalidDeviceState;
}

Status create_cm(AdapterImpl* a, ipc::CmKind kind, uint32_t* handle) {
  ipc::CmCreateReq req{};
  if (Status s = a->remote_events->cm_channel(&req.channel); s != Status::kSuccess) return s;
  req.kind = static_cast<uint32_t>(kind);
  ipc::HandleRep rep{};
  const Status s =
      daemon_transact(ipc::MsgType::kCmCreate, &req, sizeof req, &rep, sizeof rep,
                      kind == ipc::CmKind::kListener ? "create_listener" : "create_connector");
  *handle = rep.handle;
  return s;
}

// One event of the channel (the event thread, mu held). A request's connector whose listener is
// gone is left in *orphan, for the caller to destroy without the lock.
void deliver_locked(AdapterImpl* a, const ipc::CmEvent& e, uint32_t* orphan) {
  auto& objs = a->remote_events->cm_objects;
  const auto it = objs.find(e.object);
  ObjectImpl* o = it != objs.end() ? it->second : nullptr;
  switch (static_cast<ipc::CmEventKind>(e.kind)) {
    case ipc::CmEventKind::kCompleted: {
      if (o == nullptr || o->type != ObjectType::kConnector) return;
      RemoteConnectorImpl* c = conn_of(o);
      if (!c->req_pending) return;
      c->req_pending = false;
      const auto s = static_cast<Status>(e.status);
      if (s == Status::kSuccess && c->sets_state) set_state_locked(c->qp, c->done_state);
      a->defer_locked([cb = c->req_cb, ctx = c->req_ctx, s] { cb(ctx, s); });
      return;
    }
    case ipc::CmEventKind::kDisconnected: {
      if (o == nullptr || o->type != ObjectType::kConnector) return;
      RemoteConnectorImpl* c = conn_of(o);
      set_state_locked(c->qp, QpState::kErr);  // the daemon's CM flushed it
      if (c->disc_cb == nullptr || c->life != Life::kLive) return;
      a->defer_locked([cb = c->disc_cb, ctx = c->disc_ctx] { cb(ctx); });
      c->disc_cb = nullptr;
      return;
    }
    case ipc::CmEventKind::kSrqLimit: {
      if (o == nullptr || o->type != ObjectType::kSrq) return;
      auto* q = static_cast<RemoteSrqImpl*>(o);
      if (q->notify_cb == nullptr || !q->events_.load(std::memory_order_acquire)) return;
      a->defer_locked([q] {
        if (q->events_.load(std::memory_order_acquire))
          q->notify_cb(q->notify_ctx, Status::kSuccess);
      });
      return;
    }
    case ipc::CmEventKind::kRequest: {
      if (o == nullptr || o->type != ObjectType::kListener || o->life != Life::kLive ||
          a->shutting_down) {
        *orphan = e.connector;
        return;
      }
      RemoteListenerImpl* l = listener_of(o);
      auto* ci = new RemoteConnectorImpl(a, e.connector, e.datagram != 0);
      a->adopt_locked(ci, {});
      objs[ci->handle] = ci;
      a->defer_locked([cb = l->event_cb, ctx = l->event_ctx, ci] { cb(ctx, &ci->pub_); });
      return;
    }
  }
}

}  // namespace

// ---- The channel -------------------------------------------------------------------------------

Status RemoteEvents::cm_channel(uint32_t* handle) noexcept {
  std::lock_guard lk(cm_mu_);
  if (const uint32_t h = cm_channel_.load(std::memory_order_acquire); h != 0) {
    *handle = h;
    return Status::kSuccess;
  }
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) return fail_with(Status::kInsufficientResources, "CM channel: no eventfd");
  ipc::CmChannelReq req{};
  req.adapter = a_->remote_index;
  ipc::HandleRep rep{};
  Status s = daemon_transact(ipc::MsgType::kCmChannel, &req, sizeof req, &rep, sizeof rep,
                             "CM channel", nullptr, fd);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &cm_fd_;
  if (s == Status::kSuccess && ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    (void)remote::destroy(rep.handle);
    s = fail_with(Status::kInsufficientResources, "CM channel: epoll_ctl failed");
  }
  if (s != Status::kSuccess) {
    ::close(fd);
    return s;
  }
  cm_fd_ = fd;
  cm_channel_.store(rep.handle, std::memory_order_release);
  *handle = rep.handle;
  return s;
}

void remote_cm_events(AdapterImpl* a, uint32_t channel) noexcept {
  bool more = true;
  while (more) {
    ipc::CmEventsReq req{};
    req.channel = channel;
    ipc::CmEventsRep rep{};
    if (daemon_transact(ipc::MsgType::kCmEvents, &req, sizeof req, &rep, sizeof rep, "CM events") !=
        Status::kSuccess)
      return;  // a daemon that is gone: every object's calls say so from now on
    more = rep.more != 0;
    std::vector<uint32_t> orphans;
    {
      std::lock_guard lk(a->mu);
      for (uint32_t i = 0; i < rep.count; ++i) {
        uint32_t orphan = 0;
        deliver_locked(a, rep.events[i], &orphan);
        if (orphan != 0) orphans.push_back(orphan);
      }
    }
    // Refused as the daemon closes them (nobody listens any more).
    for (uint32_t h : orphans) (void)remote::destroy(h);
  }
}

// ---- SRQ limits --------------------------------------------------------------------------------

Status RemoteSrqImpl::teardown_locked() {
  if (on_channel) adapter->remote_events->cm_objects.erase(srq.handle());
  (void)srq.destroy();  // its QPs (successors) are gone; a daemon that is gone took it along
  return Status::kSuccess;
}

Status remote_srq_modify(ObjectImpl* so, uint32_t depth, uint32_t notify_threshold) noexcept {
  auto* q = static_cast<RemoteSrqImpl*>(so);
  AdapterImpl* a = q->adapter;
  if (depth > a->info.max_srq_depth) return Status::kInvalidParameter;
  return guarded([&] {
    ipc::ModifySrqReq req{};
    if (Status s = a->remote_events->cm_channel(&req.channel); s != Status::kSuccess) return s;
    {
      std::lock_guard lk(a->mu);
      if (q->life != Life::kLive) return Status::kInvalidDeviceState;
      if (!q->on_channel) a->remote_events->cm_objects[q->srq.handle()] = q;
      q->on_channel = true;
    }
    req.srq = q->srq.handle();
    req.depth = depth;
    req.threshold = notify_threshold;
    ipc::ReplyHead rep{};
    return daemon_transact(ipc::MsgType::kModifySrq, &req, sizeof req, &rep, sizeof rep,
                           "Srq::modify");
  });
}

// ---- Creation ----------------------------------------------------------------------------------

Status remote_create_connector(AdapterImpl* a, Handle<Connector>* out) noexcept {
  return guarded([&] {
    uint32_t h = 0;
    if (Status s = create_cm(a, ipc::CmKind::kConnector, &h); s != Status::kSuccess) return s;
    return adopt(a, new RemoteConnectorImpl(a, h, false), out);
  });
}

Status remote_create_listener(AdapterImpl* a, ConnectEventCallback cb, void* ctx,
                              Handle<Listener>* out) noexcept {
  return guarded([&] {
    uint32_t h = 0;
    if (Status s = create_cm(a, ipc::CmKind::kListener, &h); s != Status::kSuccess) return s;
    return adopt(a, new RemoteListenerImpl(a, h, cb, ctx), out);
  });
}

// ---- Connector
// -----------------------------------------------------------------------------------

Status remote_connect(ObjectImpl* co, ObjectImpl* qp, const sockaddr* src, uint32_t src_length,
                      const sockaddr* dst, uint32_t dst_length, uint32_t inbound, uint32_t outbound,
                      const void* data, uint32_t data_length, RequestCompletion completion,
                      void* context) noexcept {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  RemoteConnectorImpl* c = conn_of(co);
  RemoteQpImpl* q = qp_for(c, qp);
  Call call(c->handle, ipc::CmOp::kConnect);
  if (q == nullptr || dst == nullptr || !ipc::to_wire(src, src_length, &call.req.src) ||
      !ipc::to_wire(dst, dst_length, &call.req.dst) || call.req.dst.port == 0)
    return Status::kInvalidParameter;
  if (Status s = call.data(data, data_length, kMaxCallerData); s != Status::kSuccess) return s;
  call.req.qp = q->qp.handle();
  call.req.inbound = inbound;
  call.req.outbound = outbound;
  return request(c, completion, context, q, false, QpState::kErr, call, "Connector::connect");
}

Status remote_complete_connect(ObjectImpl* co, DisconnectEventCallback cb, void* ctx) noexcept {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  RemoteConnectorImpl* c = conn_of(co);
  {
    std::lock_guard lk(c->adapter->mu);
    c->disc_cb = cb;
    c->disc_ctx = ctx;
  }
  Call call(c->handle, ipc::CmOp::kCompleteConnect);
  const Status s = call.run("Connector::complete_connect");
  if (s == Status::kSuccess) {
    std::lock_guard lk(c->adapter->mu);
    set_state_locked(c->qp, QpState::kRts);
  }
  return s;
}

Status remote_accept(ObjectImpl* co, ObjectImpl* qp, uint32_t inbound, uint32_t outbound,
                     const void* data, uint32_t data_length, DisconnectEventCallback disc,
                     void* disc_ctx, RequestCompletion completion, void* context) noexcept {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  RemoteConnectorImpl* c = conn_of(co);
  RemoteQpImpl* q = qp_for(c, qp);
  if (q == nullptr) return Status::kInvalidParameter;
  Call call(c->handle, ipc::CmOp::kAccept);
  if (Status s = call.data(data, data_length, kMaxCalleeData); s != Status::kSuccess) return s;
  call.req.qp = q->qp.handle();
  call.req.inbound = inbound;
  call.req.outbound = outbound;
  {
    std::lock_guard lk(c->adapter->mu);
    c->disc_cb = disc;
    c->disc_ctx = disc_ctx;
  }
  return request(c, completion, context, q, true, QpState::kRts, call, "Connector::accept");
}

Status remote_reject(ObjectImpl* co, const void* data, uint32_t data_length) noexcept {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  Call call(conn_of(co)->handle, ipc::CmOp::kReject);
  if (Status s = call.data(data, data_length, kMaxCalleeData); s != Status::kSuccess) return s;
  return call.run("Connector::reject");
}

Status remote_resolve_datagram(ObjectImpl* co, const sockaddr* src, uint32_t src_length,
                               const sockaddr* dst, uint32_t dst_length, const void* data,
                               uint32_t data_length, RequestCompletion completion,
                               void* context) noexcept {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  RemoteConnectorImpl* c = conn_of(co);
  Call call(c->handle, ipc::CmOp::kResolveDatagram);
  if (dst == nullptr || !ipc::to_wire(src, src_length, &call.req.src) ||
      !ipc::to_wire(dst, dst_length, &call.req.dst) || call.req.dst.port == 0)
    return Status::kInvalidParameter;
  if (Status s = call.data(data, data_length, kMaxDatagramRequestData); s != Status::kSuccess)
    return s;
  c->datagram.store(true, std::memory_order_relaxed);
  return request(c, completion, context, nullptr, false, QpState::kErr, call,
                 "Connector::resolve_datagram");
}

namespace {

// kInfo: what the daemon's connector knows now.
Status info(ObjectImpl* co, ipc::CmCallRep* rep) {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  Call call(conn_of(co)->handle, ipc::CmOp::kInfo);
  const Status s = call.run("Connector (query)");
  *rep = call.rep;
  return s;
}

}  // namespace

Status remote_datagram_peer(ObjectImpl* co, uint32_t* qpn, uint32_t* qkey) noexcept {
  ipc::CmCallRep rep{};
  if (Status s = info(co, &rep); s != Status::kSuccess) return s;
  const auto s = static_cast<Status>(rep.peer_status);
  if (s == Status::kSuccess) {
    if (qpn != nullptr) *qpn = rep.qpn;
    if (qkey != nullptr) *qkey = rep.qkey;
  }
  return s;
}

Status remote_reject_reason(ObjectImpl* co, uint16_t* reason) noexcept {
  ipc::CmCallRep rep{};
  if (Status s = info(co, &rep); s != Status::kSuccess) return s;
  if (rep.reject_reason == 0) return Status::kConnectionInvalid;
  *reason = rep.reject_reason;
  return Status::kSuccess;
}

bool remote_is_datagram(ObjectImpl* co) noexcept {
  if (is_closing(co)) return false;
  return conn_of(co)->datagram.load(std::memory_order_relaxed);
}

Status remote_accept_datagram(ObjectImpl* co, uint32_t qpn, uint32_t qkey, const void* data,
                              uint32_t data_length) noexcept {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  Call call(conn_of(co)->handle, ipc::CmOp::kAcceptDatagram);
  if (Status s = call.data(data, data_length, kMaxDatagramReplyData); s != Status::kSuccess)
    return s;
  call.req.qpn = qpn;
  call.req.qkey = qkey;
  return call.run("Connector::accept_datagram");
}

Status remote_connection_data(ObjectImpl* co, uint32_t* inbound, uint32_t* outbound, void* data,
                              uint32_t* data_length) noexcept {
  if (data_length == nullptr) return Status::kInvalidParameter;
  ipc::CmCallRep rep{};
  if (Status s = info(co, &rep); s != Status::kSuccess) return s;
  if (static_cast<Status>(rep.data_status) != Status::kSuccess)
    return static_cast<Status>(rep.data_status);
  const uint32_t n = std::min(*data_length, rep.data_length);
  if (data != nullptr && n != 0) std::memcpy(data, rep.data, n);
  const bool fits = *data_length >= rep.data_length;
  *data_length = rep.data_length;
  if (inbound != nullptr) *inbound = rep.inbound;
  if (outbound != nullptr) *outbound = rep.outbound;
  return fits ? Status::kSuccess : Status::kBufferTooSmall;
}

Status remote_connector_address(ObjectImpl* co, bool peer, sockaddr* address,
                                uint32_t* length) noexcept {
  ipc::CmCallRep rep{};
  if (Status s = info(co, &rep); s != Status::kSuccess) return s;
  const ipc::WireAddr& w = peer ? rep.peer : rep.local;
  if (w.family == 0) return Status::kConnectionInvalid;
  return copy_out(w, address, length);
}

Status remote_disconnect(ObjectImpl* co, RequestCompletion completion, void* context) noexcept {
  if (is_closing(co)) return Status::kInvalidDeviceState;
  RemoteConnectorImpl* c = conn_of(co);
  Call call(c->handle, ipc::CmOp::kDisconnect);
  // The QP is flushed either way, before the completion runs: its cached state follows here.
  const Status s =
      request(c, completion, context, nullptr, false, QpState::kErr, call, "Connector::disconnect");
  if (s == Status::kSuccess || s == Status::kPending) {
    std::lock_guard lk(c->adapter->mu);
    set_state_locked(c->qp, QpState::kErr);
  }
  return s;
}

// ---- Listener
// ------------------------------------------------------------------------------------

Status remote_listen(ObjectImpl* lo, const sockaddr* address, uint32_t length,
                     bool datagram) noexcept {
  if (is_closing(lo)) return Status::kInvalidDeviceState;
  RemoteListenerImpl* l = listener_of(lo);
  Call call(l->handle, ipc::CmOp::kListen);
  if (address == nullptr || !ipc::to_wire(address, length, &call.req.src))
    return Status::kInvalidParameter;
  {
    std::lock_guard lk(l->adapter->mu);
    if (l->listening) return Status::kInvalidParameter;
  }
  call.req.flag = datagram ? 1 : 0;
  const Status s = call.run(datagram ? "Listener::listen_datagram" : "Listener::listen");
  if (s == Status::kSuccess) {
    std::lock_guard lk(l->adapter->mu);
    l->listening = true;
    l->local = call.rep.local;
  }
  return s;
}

Status remote_listener_address(ObjectImpl* lo, sockaddr* address, uint32_t* length) noexcept {
  if (is_closing(lo)) return Status::kInvalidDeviceState;
  RemoteListenerImpl* l = listener_of(lo);
  ipc::WireAddr w;
  {
    std::lock_guard lk(l->adapter->mu);
    if (!l->listening || l->local.family == 0) return Status::kInvalidDeviceState;
    w = l->local;
  }
  return copy_out(w, address, length);
}

void remote_pause(ObjectImpl* lo, bool pause) noexcept {
  if (is_closing(lo)) return;
  Call call(listener_of(lo)->handle, ipc::CmOp::kPause);
  call.req.flag = pause ? 1 : 0;
  (void)call.run("Listener::control_connect_events");
}

}  // namespace urnic::detail
