// Connections: QPs on ids, connect / listen / accept / reject / disconnect over urnic's Connector
// and Listener, and the ids' teardown. The Connector's callbacks run on the adapter's control
// thread; they only queue events (and move the verbs QP's visible state).
#include <arpa/inet.h>

#include <cstring>

#include "rdmacm/internal.h"

using namespace urnic;
using namespace urnic::rdmacm;

namespace {

int fail_status(Status s) {
  switch (s) {
    case Status::kInvalidAddress:
      return fail(EADDRNOTAVAIL);
    case Status::kAddressAlreadyAssociated:
      return fail(EADDRINUSE);
    case Status::kConnectionActive:
      return fail(EISCONN);
    case Status::kConnectionAborted:
      return fail(ECONNABORTED);
    case Status::kTooManyAddresses:
      return fail(EADDRNOTAVAIL);
    default:
      return fail(verbs::status_errno(s));
  }
}

constexpr int kRejConsumerDefined = 28;  // IB CM REJ reason (IBTA 12.6.7.2), rdma_cm's status

// A REJECTED event's status: the REJ's reason, as the kernel's rdma_cm reports it (8 when
// nobody listens on the port, 28 when the peer's consumer rejected).
int reject_status(Connector& c) {
  uint16_t r = kRejConsumerDefined;
  (void)c.get_reject_reason(&r);
  return r;
}

void on_peer_disconnect(void* ctx) {
  Id* i = static_cast<Id*>(ctx);
  set_qp_state(i->id.qp, IBV_QPS_ERR);
  bool report = false;
  {
    std::lock_guard lock(i->mu);
    report = !i->disconnect_reported;
    i->disconnect_reported = true;
    i->state = IdState::kDisconnected;
  }
  if (report) post_event(i, RDMA_CM_EVENT_DISCONNECTED, 0);
}

void on_disconnect_done(void* ctx, Status s) {
  // Cancelled: the connector closed with our DREQ outstanding. rdma_destroy_qp right after
  // rdma_disconnect does that (cmtime's client); the kernel's rdma_cm still reports the
  // disconnect (when the DREP comes), and the application waits for it. rdma_destroy_id wants
  // no more events.
  if (s == Status::kCancelled && static_cast<Id*>(ctx)->destroying) return;
  on_peer_disconnect(ctx);
}

// The connection data the peer sent, as an event carries it.
struct PeerData {
  uint32_t ird = 0, ord = 0;
  uint8_t data[256]{};
  uint32_t len = sizeof data;
};
PeerData peer_data(Connector& c) {
  PeerData d;
  if (c.get_connection_data(&d.ird, &d.ord, d.data, &d.len) != Status::kSuccess) d.len = 0;
  d.len = std::min<uint32_t>(d.len, sizeof d.data);
  return d;
}

// Active side: the peer answered the connection request.
void on_connected(void* ctx, Status s) {
  Id* i = static_cast<Id*>(ctx);
  if (s == Status::kCancelled) return;
  if (s != Status::kSuccess) {
    const PeerData d = s == Status::kConnectionRefused ? peer_data(*i->conn) : PeerData{};
    i->state = IdState::kRouteResolved;
    if (s == Status::kConnectionRefused)
      post_event(i, RDMA_CM_EVENT_REJECTED, reject_status(*i->conn), d.data, d.len ? d.len : 0);
    else
      post_event(i, RDMA_CM_EVENT_UNREACHABLE,
                 s == Status::kHostUnreachable ? -EHOSTUNREACH : -ETIMEDOUT);
    return;
  }
  const PeerData d = peer_data(*i->conn);
  // As librdmacm does on the REP: RTR, RTS and the RTU, then ESTABLISHED.
  const Status c = i->conn->complete_connect(on_peer_disconnect, i, nullptr, nullptr);
  if (c != Status::kSuccess) {
    post_event(i, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNABORTED);
    return;
  }
  set_qp_state(i->id.qp, IBV_QPS_RTS);
  i->state = IdState::kConnected;
  post_event(i, RDMA_CM_EVENT_ESTABLISHED, 0, d.data, d.len, nullptr, static_cast<uint8_t>(d.ird),
             static_cast<uint8_t>(d.ord));
}

// Passive side: the active side completed (RTU) or gave up.
void on_accepted(void* ctx, Status s) {
  Id* i = static_cast<Id*>(ctx);
  // The QP's state and the event first, then rdma_accept returns: an application posts sends as
  // soon as it does, and a QP still in RTR would refuse them.
  if (s != Status::kCancelled && s != Status::kSuccess) {
    set_qp_state(i->id.qp, IBV_QPS_ERR);
    post_event(
        i, s == Status::kConnectionRefused ? RDMA_CM_EVENT_REJECTED : RDMA_CM_EVENT_CONNECT_ERROR,
        s == Status::kConnectionRefused ? reject_status(*i->conn) : -ETIMEDOUT);
  } else if (s == Status::kSuccess) {
    set_qp_state(i->id.qp, IBV_QPS_RTS);
    i->state = IdState::kConnected;
    post_event(i, RDMA_CM_EVENT_ESTABLISHED, 0);
  }
  {
    std::lock_guard lock(i->mu);
    i->accept_done = true;
  }
  i->cv.notify_all();
}

// A connection request reached one of a listening id's listeners: a new id carries it.
void on_request(void* ctx, Connector* c) {
  auto* lc = static_cast<ListenCtx*>(ctx);
  Id* parent = lc->parent;
  Handle<Connector> conn(c);
  auto* child = new (std::nothrow) Id();
  if (child == nullptr) {
    (void)c->reject(nullptr, 0);
    return;
  }
  child->conn = std::move(conn);
  child->parent = parent;
  child->id.verbs = lc->dev;
  child->id.context = parent->id.context;
  child->id.ps = parent->id.ps;
  child->id.port_num = 1;
  child->id.qp_type = c->is_datagram() ? IBV_QPT_UD : IBV_QPT_RC;
  child->state = IdState::kRequest;
  if (parent->sync) {
    // A synchronous listener's requests are synchronous ids too, each with its own channel.
    rdma_event_channel* ch = rdma_create_event_channel();
    if (ch == nullptr) {
      (void)child->conn->reject(nullptr, 0);
      delete child;
      return;
    }
    child->sync = true;
    child->ch = reinterpret_cast<Channel*>(ch);
  } else {
    child->ch = parent->ch;
  }
  child->id.channel = &child->ch->ch;
  uint32_t len = sizeof(sockaddr_storage);
  (void)child->conn->get_local_address(&child->id.route.addr.src_addr, &len);
  len = sizeof(sockaddr_storage);
  (void)child->conn->get_peer_address(&child->id.route.addr.dst_addr, &len);
  const PeerData d = peer_data(*child->conn);
  post_event(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0, d.data, d.len, parent,
             static_cast<uint8_t>(d.ird), static_cast<uint8_t>(d.ord));
}

ibv_pd* default_pd(Id* i) {
  if (i->id.pd == nullptr) {
    i->id.pd = ibv_alloc_pd(i->id.verbs);
    i->own_pd = i->id.pd != nullptr;
  }
  return i->id.pd;
}

// librdmacm creates the CQs (each with a completion channel) when the caller gives none.
int make_cqs(Id* i, ibv_qp_init_attr* a) {
  if (a->send_cq && a->recv_cq) return 0;
  ibv_context* c = i->id.verbs;
  i->id.send_cq_channel = ibv_create_comp_channel(c);
  i->id.recv_cq_channel = ibv_create_comp_channel(c);
  if (!i->id.send_cq_channel || !i->id.recv_cq_channel) return -1;
  i->id.send_cq =
      ibv_create_cq(c, std::max(1u, a->cap.max_send_wr), &i->id, i->id.send_cq_channel, 0);
  i->id.recv_cq =
      ibv_create_cq(c, std::max(1u, a->cap.max_recv_wr), &i->id, i->id.recv_cq_channel, 0);
  i->own_cqs = true;
  if (!i->id.send_cq || !i->id.recv_cq) return -1;
  if (!a->send_cq) a->send_cq = i->id.send_cq;
  if (!a->recv_cq) a->recv_cq = i->id.recv_cq;
  return 0;
}

void destroy_cqs(Id* i) {
  if (!i->own_cqs) return;
  if (i->id.send_cq) ibv_destroy_cq(i->id.send_cq);
  if (i->id.recv_cq) ibv_destroy_cq(i->id.recv_cq);
  if (i->id.send_cq_channel) ibv_destroy_comp_channel(i->id.send_cq_channel);
  if (i->id.recv_cq_channel) ibv_destroy_comp_channel(i->id.recv_cq_channel);
  i->id.send_cq = i->id.recv_cq = nullptr;
  i->id.send_cq_channel = i->id.recv_cq_channel = nullptr;
  i->own_cqs = false;
}

Qp& urnic_qp(ibv_qp* qp) { return *verbs::qp_of(qp)->h; }

// The connection now holds the QP: ibv_destroy_qp must close the connector first.
void hold_qp(Id* i) {
  verbs::VQp* q = verbs::qp_of(i->id.qp);
  q->release_ctx = i;
  q->release_hook = [](void* ctx) {
    Id* id = static_cast<Id*>(ctx);
    verbs::close_sync(id->conn);
    verbs::qp_of(id->id.qp)->release_hook = nullptr;
  };
}

}  // namespace

extern "C" {

int rdma_create_qp_ex(rdma_cm_id* id, ibv_qp_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr || id->verbs == nullptr) return fail(EINVAL);
  if (id->qp != nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || attr->pd == nullptr) {
    attr->pd = default_pd(i);
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
  }
  if (attr->pd == nullptr || attr->pd->context != id->verbs) return fail(EINVAL);
  if (!attr->srq) attr->srq = id->srq;
  if (make_cqs(i, reinterpret_cast<ibv_qp_init_attr*>(attr)) != 0) {
    destroy_cqs(i);
    return -1;
  }
  ibv_qp* qp = ibv_create_qp_ex(id->verbs, attr);
  if (qp == nullptr) return -1;
  id->qp = qp;
  // A UD QP needs no connection: rdma_cm moves it to RTS at once with its Q_Key.
  if (attr->qp_type == IBV_QPT_UD) {
    if (const int e = init_ud_qp(qp); e != 0) {
      ibv_destroy_qp(qp);
      id->qp = nullptr;
      return fail(e);
    }
    return 0;
  }
  // rdma_cm moves a new QP to INIT at once, so receives may be posted before the connection; the
  // urnic QP underneath is in INIT already.
  set_qp_state(qp, IBV_QPS_INIT);
  return 0;
}

int rdma_create_qp(rdma_cm_id* id, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (id == nullptr || attr == nullptr) return fail(EINVAL);
  ibv_qp_init_attr_ex ax{};
  std::memcpy(&ax, attr, sizeof *attr);
  ax.pd = pd;
  ax.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
  if (rdma_create_qp_ex(id, &ax) != 0) return -1;
  attr->cap = ax.cap;
  attr->send_cq = ax.send_cq;
  attr->recv_cq = ax.recv_cq;
  return 0;
}

void rdma_destroy_qp(rdma_cm_id* id) {
  if (id == nullptr || id->qp == nullptr) return;
  // The QP is the connector's antecedent (ndkpi.md §1.4): ibv_destroy_qp closes the connector
  // first (hold_qp).
  ibv_destroy_qp(id->qp);
  id->qp = nullptr;
}

int rdma_connect(rdma_cm_id* id, rdma_conn_param* param) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (i->state != IdState::kRouteResolved) return fail(EINVAL);
  if (id->ps == RDMA_PS_UDP) return connect_datagram(i, param);
  // The Connector moves a QP it is given: a QP created outside the id (param->qp_num) is not
  // offered.
  if (id->qp == nullptr) return fail(EOPNOTSUPP);
  Status s = i->conn ? Status::kSuccess
                     : create_connector(verbs::adapter_of(id->verbs), nullptr, nullptr, &i->conn);
  if (s != Status::kSuccess) return fail_status(s);
  const uint32_t ird = param ? param->responder_resources : 1;
  const uint32_t ord = param ? param->initiator_depth : 1;
  i->state = IdState::kConnecting;
  hold_qp(i);
  s = i->conn->connect(
      urnic_qp(id->qp), &id->route.addr.src_addr, addr_len(&id->route.addr.src_addr),
      &id->route.addr.dst_addr, addr_len(&id->route.addr.dst_addr), ird, ord,
      param ? param->private_data : nullptr, param ? param->private_data_len : 0, on_connected, i);
  if (s != Status::kPending) {
    i->state = IdState::kRouteResolved;
    return fail_status(s);
  }
  return complete(i, RDMA_CM_EVENT_ESTABLISHED);
}

int rdma_listen(rdma_cm_id* id, int) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  sockaddr* a = &id->route.addr.src_addr;
  if (i->state == IdState::kIdle) {
    // rdma_cm binds an unbound id to the IPv4 wildcard, port picked, before it listens.
    sockaddr_in any{};
    any.sin_family = AF_INET;
    if (rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&any)) != 0) return -1;
  }
  if (i->state != IdState::kBound) return fail(EINVAL);
  std::vector<ibv_context*> devs;
  if (id->verbs) {
    devs.push_back(id->verbs);
  } else {
    for (ibv_context* c : devices()) {
      const LocalAddress l = verbs::ctx_of(c)->dev->ext->local_address();
      if (a->sa_family == AF_INET ? l.ipv4 != 0 : l.has_ipv6) devs.push_back(c);
    }
  }
  if (devs.empty()) return fail(EADDRNOTAVAIL);
  // Every device listens on the address as bound (the wildcard stays the wildcard for each);
  // with port 0 the first picks the port and the others take the same.
  sockaddr_storage want{};
  std::memcpy(&want, a, addr_len(a));
  auto* w = reinterpret_cast<sockaddr*>(&want);
  if (is_loopback(a)) {
    // Bound to loopback, which rdma_cm takes as the wildcard: every device listens on all its
    // addresses (none has a loopback address); the id keeps reporting the loopback address.
    want = sockaddr_storage{};
    want.ss_family = a->sa_family;
    set_port(w, port_of(a));
  }
  for (ibv_context* c : devs) {
    auto lc = std::make_unique<ListenCtx>();
    lc->parent = i;
    lc->dev = c;
    Handle<Listener> l;
    Status s = create_listener(verbs::adapter_of(c), on_request, lc.get(), nullptr, nullptr, &l);
    if (s == Status::kSuccess)
      s = id->ps == RDMA_PS_UDP ? l->listen_datagram(w, addr_len(w), nullptr, nullptr)
                                : l->listen(w, addr_len(w), nullptr, nullptr);
    if (s != Status::kSuccess) {
      verbs::close_sync(l);
      for (auto& h : i->listeners) verbs::close_sync(h);
      i->listeners.clear();
      i->listen_ctx.clear();
      return fail_status(s);
    }
    // Port 0: the first listener picked one; the others listen on the same. The id reports the
    // address it was bound to (a wildcard stays one, as rdma_cm's does) with that port.
    sockaddr_storage got{};
    uint32_t len = sizeof got;
    if (l->get_local_address(reinterpret_cast<sockaddr*>(&got), &len) == Status::kSuccess) {
      const uint16_t port = port_of(reinterpret_cast<const sockaddr*>(&got));
      set_port(w, port);
      set_port(a, port);
    }
    i->listeners.push_back(std::move(l));
    i->listen_ctx.push_back(std::move(lc));
  }
  i->state = IdState::kListening;
  return 0;
}

int rdma_get_request(rdma_cm_id* listen, rdma_cm_id** id) {
  if (listen == nullptr || id == nullptr || !id_of(listen)->sync) return fail(EINVAL);
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(listen->channel, &ev) != 0) return -1;
  if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    const int st = ev->status;
    rdma_ack_cm_event(ev);
    return fail(st < 0 ? -st : EINVAL);
  }
  rdma_cm_id* child = ev->id;
  rdma_ack_cm_event(ev);
  Id* l = id_of(listen);
  if (l->ep_qp) {
    ibv_qp_init_attr a = l->ep_attr;
    if (rdma_create_qp(child, l->ep_pd, &a) != 0) {
      (void)rdma_reject(child, nullptr, 0);
      rdma_destroy_id(child);
      return -1;
    }
  }
  *id = child;
  return 0;
}

int rdma_accept(rdma_cm_id* id, rdma_conn_param* param) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (i->state != IdState::kRequest || !i->conn) return fail(EINVAL);
  if (i->conn->is_datagram()) return accept_datagram(i, param);
  if (id->qp == nullptr) return fail(EOPNOTSUPP);  // as rdma_connect
  const uint32_t ird = param ? param->responder_resources : 1;
  const uint32_t ord = param ? param->initiator_depth : 1;
  hold_qp(i);
  // RTR before the call: its completion (another thread) may move the QP to RTS at once.
  set_qp_state(id->qp, IBV_QPS_RTR);
  i->state = IdState::kConnecting;
  const Status s =
      i->conn->accept(urnic_qp(id->qp), ird, ord, param ? param->private_data : nullptr,
                      param ? param->private_data_len : 0, on_peer_disconnect, i, on_accepted, i);
  if (s != Status::kPending) {
    set_qp_state(id->qp, IBV_QPS_INIT);
    i->state = IdState::kRequest;
    return fail_status(s);
  }
  // Linux's rdma_cm moves the QP to RTS before it sends the REP, so applications post sends as
  // soon as rdma_accept returns (perftest -R does). urnic's Connector moves it to RTS when the
  // RTU arrives: rdma_accept returns then, one round trip later (or when the active side gave
  // up; the event says which).
  {
    std::unique_lock lock(i->mu);
    i->cv.wait(lock, [&] { return i->accept_done; });
  }
  return complete(i, RDMA_CM_EVENT_ESTABLISHED);
}

int rdma_reject(rdma_cm_id* id, const void* private_data, uint8_t private_data_len) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (!i->conn || i->state != IdState::kRequest) return fail(EINVAL);
  const Status s = i->conn->reject(private_data, private_data_len);
  if (s != Status::kSuccess) return fail_status(s);
  i->state = IdState::kIdle;
  return 0;
}

int rdma_disconnect(rdma_cm_id* id) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (!i->conn) return fail(EINVAL);
  const Status s = i->conn->disconnect(on_disconnect_done, i);
  if (s == Status::kSuccess) return 0;  // the peer disconnected first: reported already
  if (s != Status::kPending) return fail_status(s);
  set_qp_state(id->qp, IBV_QPS_ERR);
  return complete(i, RDMA_CM_EVENT_DISCONNECTED);
}

int rdma_destroy_id(rdma_cm_id* id) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  // rdma_cm: every event reported on the id must be acknowledged first.
  {
    std::unique_lock lock(i->mu);
    i->cv.wait(lock, [&] { return i->events_out == 0; });
  }
  if (id->qp != nullptr) verbs::qp_of(id->qp)->release_hook = nullptr;  // the id goes first
  i->destroying = true;
  verbs::close_sync(i->conn);
  for (auto& l : i->listeners) verbs::close_sync(l);
  i->listeners.clear();
  purge_events(i);  // no callback queues more now
  if (id->qp == nullptr) {
    destroy_cqs(i);
    if (i->own_pd && ibv_dealloc_pd(id->pd) == 0) id->pd = nullptr;
  }
  if (i->sync) rdma_destroy_event_channel(id->channel);
  if (i->ephemeral_port != 0) release_ephemeral_port(id->ps, i->ephemeral_port);
  delete i;
  return 0;
}

int rdma_notify(rdma_cm_id* id, ibv_event_type) {
  // The connection is established by the CM's own RTU handling; nothing to report to it.
  return id ? 0 : fail(EINVAL);
}

int rdma_init_qp_attr(rdma_cm_id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  if (id == nullptr || qp_attr == nullptr || qp_attr_mask == nullptr) return fail(EINVAL);
  // INIT is fully known; RTR and RTS need what urnic's Connector negotiates and applies itself.
  if (qp_attr->qp_state != IBV_QPS_INIT) return fail(EINVAL);
  qp_attr->port_num = 1;
  qp_attr->pkey_index = 0;
  qp_attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  *qp_attr_mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  return 0;
}

int rdma_establish(rdma_cm_id* id) {
  // For QPs created outside the id (rdma_connect with param->qp_num), not offered (above).
  return fail(id ? EOPNOTSUPP : EINVAL);
}

int rdma_create_srq(rdma_cm_id* id, ibv_pd* pd, ibv_srq_init_attr* attr) {
  if (id == nullptr || attr == nullptr || id->verbs == nullptr) return fail(EINVAL);
  if (pd == nullptr) pd = default_pd(id_of(id));
  ibv_srq* srq = pd ? ibv_create_srq(pd, attr) : nullptr;
  if (srq == nullptr) return -1;
  id->srq = srq;
  return 0;
}

int rdma_create_srq_ex(rdma_cm_id* id, ibv_srq_init_attr_ex* attr) {
  if (id == nullptr || attr == nullptr) return fail(EINVAL);
  if (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE)) return fail(EOPNOTSUPP);
  if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
    return fail(EOPNOTSUPP);
  ibv_srq_init_attr a{};
  a.srq_context = attr->srq_context;
  a.attr = attr->attr;
  return rdma_create_srq(id, (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : nullptr, &a);
}

void rdma_destroy_srq(rdma_cm_id* id) {
  if (id == nullptr || id->srq == nullptr) return;
  ibv_destroy_srq(id->srq);
  id->srq = nullptr;
}

int rdma_create_ep(rdma_cm_id** id, rdma_addrinfo* res, ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (id == nullptr || res == nullptr) return fail(EINVAL);
  rdma_cm_id* cm = nullptr;
  if (rdma_create_id(nullptr, &cm, nullptr, static_cast<rdma_port_space>(res->ai_port_space)) != 0)
    return -1;
  int r = 0;
  if (res->ai_flags & RAI_PASSIVE) {
    r = rdma_bind_addr(cm, res->ai_src_addr);
    if (r == 0 && attr) {
      Id* i = id_of(cm);
      i->ep_qp = true;
      i->ep_attr = *attr;
      i->ep_pd = pd;
    }
  } else {
    r = rdma_resolve_addr(cm, res->ai_src_addr, res->ai_dst_addr, 2000);
    if (r == 0) r = rdma_resolve_route(cm, 2000);
    if (r == 0 && attr) r = rdma_create_qp(cm, pd, attr);
  }
  if (r != 0) {
    const int err = errno;
    rdma_destroy_id(cm);
    return fail(err);
  }
  *id = cm;
  return 0;
}

void rdma_destroy_ep(rdma_cm_id* id) {
  if (id == nullptr) return;
  rdma_destroy_qp(id);
  rdma_destroy_srq(id);
  rdma_destroy_id(id);
}

// Multicast needs UD QPs (issue 16 item 5); ECE is a ConnectX feature.
int rdma_join_multicast(rdma_cm_id*, sockaddr*, void*) { return fail(EOPNOTSUPP); }
int rdma_join_multicast_ex(rdma_cm_id*, rdma_cm_join_mc_attr_ex*, void*) {
  return fail(EOPNOTSUPP);
}
int rdma_leave_multicast(rdma_cm_id*, sockaddr*) { return fail(EOPNOTSUPP); }
int rdma_set_local_ece(rdma_cm_id*, ibv_ece*) { return fail(EOPNOTSUPP); }
int rdma_get_remote_ece(rdma_cm_id*, ibv_ece*) { return fail(EOPNOTSUPP); }
int rdma_reject_ece(rdma_cm_id*, const void*, uint8_t) { return fail(EOPNOTSUPP); }

}  // extern "C"
