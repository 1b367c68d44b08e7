// A client's connectors and listeners in urnicd (objects.h; docs/daemon.md "Connections"): each
// is a Connector or Listener of the public API on the daemon's adapter, so the daemon's own
// connection manager (IB CM on QP1) speaks for the client. Their callbacks run on the adapter's
// control thread and only queue events (CmQueue); the client takes them with kCmEvents, and a
// request's new connector enters the client's table only then, on the main thread.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "daemon/objects.h"
#include "daemon/server.h"

namespace urnic::daemon {

CmQueue::~CmQueue() {
  // Requests nobody took are refused as their connectors close (events_ goes after this body,
  // outside any lock of ours).
  ::close(event_fd_);
}

void CmQueue::push(ipc::CmEvent e, Connector* fresh) {
  Handle<Connector> c(fresh);
  {
    std::lock_guard lock(mu_);
    if (fresh == nullptr || events_.size() < kMaxPending) {
      events_.push_back({e, std::move(c)});
      c = Handle<Connector>();
    }
  }
  // A refused request's connector (still in `c`) closes here, outside the lock.
  const uint64_t one = 1;
  (void)!::write(event_fd_, &one, sizeof one);  // non-blocking (usable_eventfd)
}

std::vector<CmQueue::Pending> CmQueue::take(size_t max, bool* more) {
  std::vector<Pending> out;
  std::lock_guard lock(mu_);
  while (!events_.empty() && out.size() < max) {
    out.push_back(std::move(events_.front()));
    events_.pop_front();
  }
  *more = !events_.empty();
  return out;
}

namespace {

// The callbacks of the daemon's connectors and listeners (control thread).
void on_done(void* ctx, Status s) {
  auto* c = static_cast<CmCtx*>(ctx);
  c->queue->push({static_cast<uint32_t>(ipc::CmEventKind::kCompleted), c->handle,
                  static_cast<uint32_t>(s), 0, 0, 0});
}
void on_disconnected(void* ctx) {
  auto* c = static_cast<CmCtx*>(ctx);
  c->queue->push({static_cast<uint32_t>(ipc::CmEventKind::kDisconnected), c->handle, 0, 0, 0, 0});
}
void on_request(void* ctx, Connector* fresh) {
  auto* c = static_cast<CmCtx*>(ctx);
  const uint32_t dgram = fresh->is_datagram() ? 1 : 0;
  c->queue->push({static_cast<uint32_t>(ipc::CmEventKind::kRequest), c->handle, 0, 0, dgram, 0},
                 fresh);
}

// An address getter's result as a WireAddr (family 0 when it has none).
template <class Get>
void read_addr(Get get, ipc::WireAddr* w) {
  sockaddr_storage ss{};
  uint32_t len = sizeof ss;
  if (get(reinterpret_cast<sockaddr*>(&ss), &len) == Status::kSuccess)
    (void)ipc::to_wire(reinterpret_cast<const sockaddr*>(&ss), len, w);
}

// Connector::get_* into the reply of kInfo.
void connector_info(Connector& c, ipc::CmCallRep* rep) {
  uint32_t len = ipc::kCmDataMax;
  Status s = c.get_connection_data(&rep->inbound, &rep->outbound, rep->data, &len);
  if (s == Status::kBufferTooSmall) s = Status::kSuccess;  // the data are never longer
  rep->data_status = static_cast<uint32_t>(s);
  rep->data_length = s == Status::kSuccess ? std::min(len, ipc::kCmDataMax) : 0;
  rep->peer_status = static_cast<uint32_t>(c.get_datagram_peer(&rep->qpn, &rep->qkey));
  rep->datagram = c.is_datagram() ? 1 : 0;
  uint16_t reason = 0;
  if (c.get_reject_reason(&reason) == Status::kSuccess) rep->reject_reason = reason;
  read_addr([&](sockaddr* a, uint32_t* l) { return c.get_local_address(a, l); }, &rep->local);
  read_addr([&](sockaddr* a, uint32_t* l) { return c.get_peer_address(a, l); }, &rep->peer);
}

}  // namespace

Status ClientObjects::cm_channel(const ipc::CmChannelReq& q, int event_fd, ipc::HandleRep* rep) {
  if (event_fd < 0 || !usable_eventfd(event_fd) || q.adapter >= adapters_.size()) {
    if (event_fd >= 0) ::close(event_fd);
    return Status::kInvalidParameter;
  }
  const uint32_t h = count(Kind::kCmChannel) < quotas_.cqs ? add(Kind::kCmChannel) : 0;
  if (h == 0) {
    ::close(event_fd);
    return Status::kInsufficientResources;
  }
  Obj& o = table_[index_of(h)];
  o.adapter = q.adapter;
  o.queue = std::make_shared<CmQueue>(event_fd);
  rep->handle = h;
  return Status::kSuccess;
}

uint32_t ClientObjects::add_cm(Kind k, uint32_t channel) {
  if (find(channel, Kind::kCmChannel) == nullptr) return 0;
  if (count(Kind::kConnector) + count(Kind::kListener) >= quotas_.qps) return 0;
  const uint32_t h = add(k);
  if (h == 0) return 0;
  Obj& o = table_[index_of(h)];
  Obj& ch = *find(channel, Kind::kCmChannel);  // after add(): the table may have moved
  o.adapter = ch.adapter;
  o.cm_ctx = std::make_unique<CmCtx>(CmCtx{ch.queue, h});
  o.uses[0] = channel;
  ++ch.users;
  return h;
}

Status ClientObjects::cm_create(const ipc::CmCreateReq& q, ipc::HandleRep* rep) {
  if (find(q.channel, Kind::kCmChannel) == nullptr) return Status::kInvalidHandle;
  const bool listener = q.kind == static_cast<uint32_t>(ipc::CmKind::kListener);
  const uint32_t h = add_cm(listener ? Kind::kListener : Kind::kConnector, q.channel);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];
  Adapter& a = *adapters_[o.adapter].adapter;
  const Status s = listener
                       ? create_listener(a, on_request, o.cm_ctx.get(), nullptr, nullptr, &o.lis)
                       : create_connector(a, nullptr, nullptr, &o.conn);
  if (s != Status::kSuccess) {
    release(h);  // no callback was registered: the context goes with the slot
    return s;
  }
  rep->handle = h;
  return s;
}

uint32_t ClientObjects::adopt_connector(Handle<Connector> c, uint32_t channel) {
  const uint32_t h = add_cm(Kind::kConnector, channel);
  if (h != 0) table_[index_of(h)].conn = std::move(c);
  return h;  // 0: `c` closes here, which refuses its request
}

Status ClientObjects::cm_events(const ipc::CmEventsReq& q, ipc::CmEventsRep* rep) {
  Obj* ch = find(q.channel, Kind::kCmChannel);
  if (ch == nullptr) return Status::kInvalidHandle;
  const std::shared_ptr<CmQueue> queue = ch->queue;
  bool more = false;
  std::vector<CmQueue::Pending> got = queue->take(ipc::kCmEventsPerReply, &more);
  for (CmQueue::Pending& p : got) {
    if (p.ev.kind == static_cast<uint32_t>(ipc::CmEventKind::kRequest)) {
      // Its listener gone meanwhile, or no room for it: the request is refused as it closes.
      if (find(p.ev.object, Kind::kListener) == nullptr) continue;
      p.ev.connector = adopt_connector(std::move(p.fresh), q.channel);
      if (p.ev.connector == 0) continue;
    }
    rep->events[rep->count++] = p.ev;
  }
  rep->more = more ? 1 : 0;
  return Status::kSuccess;
}

Status ClientObjects::cm_call(const ipc::CmCallReq& q, ipc::CmCallRep* rep) {
  if (Obj* c = find(q.object, Kind::kConnector)) return connector_call(*c, q, rep);
  if (Obj* l = find(q.object, Kind::kListener)) return listener_call(*l, q, rep);
  return Status::kInvalidHandle;
}

Status ClientObjects::listener_call(Obj& o, const ipc::CmCallReq& q, ipc::CmCallRep* rep) {
  Listener& l = *o.lis;
  auto local = [&] {
    read_addr([&](sockaddr* a, uint32_t* n) { return l.get_local_address(a, n); }, &rep->local);
  };
  switch (static_cast<ipc::CmOp>(q.op)) {
    case ipc::CmOp::kListen: {
      sockaddr_storage ss;
      const uint32_t len = ipc::from_wire(q.src, &ss);
      const auto* sa = reinterpret_cast<const sockaddr*>(&ss);
      const Status s = q.flag != 0 ? l.listen_datagram(sa, len, nullptr, nullptr)
                                   : l.listen(sa, len, nullptr, nullptr);
      if (s == Status::kSuccess) local();
      return s;
    }
    case ipc::CmOp::kPause:
      l.control_connect_events(q.flag != 0);
      return Status::kSuccess;
    case ipc::CmOp::kInfo:
      local();
      return Status::kSuccess;
    default:
      return Status::kInvalidDeviceRequest;  // a connector's call
  }
}

Status ClientObjects::connector_call(Obj& o, const ipc::CmCallReq& q, ipc::CmCallRep* rep) {
  Connector& c = *o.conn;
  CmCtx* ctx = o.cm_ctx.get();
  const uint8_t* data = q.data_length != 0 ? q.data : nullptr;
  sockaddr_storage src, dst;
  const uint32_t src_len = ipc::from_wire(q.src, &src), dst_len = ipc::from_wire(q.dst, &dst);
  const auto* srcp = src_len != 0 ? reinterpret_cast<const sockaddr*>(&src) : nullptr;
  const auto* dstp = reinterpret_cast<const sockaddr*>(&dst);
  // kConnect and kAccept name a QP of the connector's adapter; the connector holds it from then
  // (as NDK's connector holds its QP as an antecedent), so it cannot be destroyed first.
  Qp* qp = nullptr;
  const auto op = static_cast<ipc::CmOp>(q.op);
  if (op == ipc::CmOp::kConnect || op == ipc::CmOp::kAccept) {
    Obj* qo = find(q.qp, Kind::kQp);
    if (qo == nullptr) return Status::kInvalidHandle;
    if (qo->adapter != o.adapter) return Status::kInvalidParameter;
    qp = qo->qp.get();
    if (o.uses[1] == 0) {
      o.uses[1] = q.qp;
      ++qo->users;
    }
  }
  switch (op) {
    case ipc::CmOp::kConnect:
      return c.connect(*qp, srcp, src_len, dstp, dst_len, q.inbound, q.outbound, data,
                       q.data_length, on_done, ctx);
    case ipc::CmOp::kCompleteConnect:
      return c.complete_connect(on_disconnected, ctx, nullptr, nullptr);
    case ipc::CmOp::kAccept:
      return c.accept(*qp, q.inbound, q.outbound, data, q.data_length, on_disconnected, ctx,
                      on_done, ctx);
    case ipc::CmOp::kReject:
      return c.reject(data, q.data_length);
    case ipc::CmOp::kResolveDatagram:
      return c.resolve_datagram(srcp, src_len, dstp, dst_len, data, q.data_length, on_done, ctx);
    case ipc::CmOp::kAcceptDatagram:
      return c.accept_datagram(q.qpn, q.qkey, data, q.data_length);
    case ipc::CmOp::kDisconnect:
      return c.disconnect(on_done, ctx);
    case ipc::CmOp::kInfo:
      connector_info(c, rep);
      return Status::kSuccess;
    default:
      return Status::kInvalidDeviceRequest;  // a listener's call
  }
}

}  // namespace urnic::daemon
