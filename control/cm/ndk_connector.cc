// The public Connector and Listener (include/urnic/connector.h, listener.h) over the connection
// manager (control/cm/cm.h), with the object model of control/ndk_internal.h:
//   - one ctl::CmAgent per adapter, shared by the adapter itself (from its open to its close:
//     hold_cm_agent) and its connectors and listeners (destroyed with the last user; the
//     adapter's close waits for all of them);
//   - the CM's callbacks run on the adapter's control thread; each one takes the adapter's lock
//     and defers the consumer's callback (AdapterImpl::defer_locked), so that consumer callbacks
//     run one at a time, in order, and before the object's close callback;
//   - a QP named in connect / accept is an antecedent of the connector;
//   - closes finish on the control thread (closes_inline() is false): the CM is told first, so
//     no CM callback for the object can come after it is gone.
// Lock order: AdapterImpl::mu before the CM's lock; CM callbacks run without the CM's lock.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>
#include <functional>
#include <map>

#include <tbb/concurrent_hash_map.h>

#include "control/cm/cm_core.h"
#include "control/cm/cma.h"
#include "control/ndk_internal.h"
#include "control/ndk_remote.h"
#include "urnic/connector.h"
#include "urnic/listener.h"
#include "urnic/runtime.h"

namespace urnic {
namespace detail {
namespace {

struct AgentEntry {
  std::unique_ptr<ctl::CmAgent> agent;
  int users = 0;
};
// The agent of each adapter. Connectors and listeners of different adapters are created and
// closed from any application thread (and from callbacks) at once: a TBB concurrent map locks
// one adapter's entry at a time instead of a process-wide mutex. The entry's write lock also
// guards the adapter's cm_retired.
using AgentMap = tbb::concurrent_hash_map<AdapterImpl*, AgentEntry>;
AgentMap g_agents;

// AdapterConfig::Cm::drop_tx as the agent's test hook: loses the nth MAD of each listed
// attribute, counted in the adapter's cm_mads_dropped.
std::function<bool(const ctl::cm::Message&)> mad_dropper(AdapterImpl* a) {
  if (a->cm_settings.drop_tx.empty()) return nullptr;
  auto seen = std::make_shared<std::map<uint16_t, uint32_t>>();
  return [a, seen](const ctl::cm::Message& m) {
    const auto attr = static_cast<uint16_t>(ctl::cm::attr_id(m));
    const uint32_t n = ++(*seen)[attr];
    for (const auto& d : a->cm_settings.drop_tx) {
      if (d.attr_id == attr && d.nth == n) {
        a->cm_mads_dropped.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  };
}

ctl::CmAgent* acquire_agent(AdapterImpl* a) {
  AgentMap::accessor acc;
  g_agents.insert(acc, a);
  AgentEntry& e = acc->second;
  if (!e.agent) {
    ctl::CmConfig cfg;
    cfg.path_mtu = largest_path_mtu(a);  // the path MTU our REQs offer
    cfg.max_read_limit = kMaxReadLimit;
    cfg.cm_response_timeout = a->cm_settings.response_timeout;
    cfg.timewait = std::chrono::milliseconds(a->cm_settings.timewait_ms);
    cfg.selective_repeat = a->cm_settings.selective_repeat;
    cfg.testing_drop_tx = mad_dropper(a);
    cfg.broken = a->broken_rules;
    e.agent = std::make_unique<ctl::CmAgent>(*a->ctl, cfg);
  }
  ++e.users;
  return e.agent.get();
}

void add(CmCounters& t, const ctl::CmCounters& c) {
  t.mads_in += c.mads_in;
  t.mads_out += c.mads_out;
  t.duplicates += c.duplicates;
  t.unmatched += c.unmatched;
  t.retransmits += c.retransmits;
  t.timeouts += c.timeouts;
  t.rej_sent += c.rej_sent;
  t.rej_received += c.rej_received;
  t.mra_sent += c.mra_sent;
  t.mra_received += c.mra_received;
  for (uint64_t e : c.decode_errors) t.decode_errors += e;
}

void release_agent(AdapterImpl* a) {
  std::unique_ptr<ctl::CmAgent> last;
  {
    AgentMap::accessor acc;
    if (!g_agents.find(acc, a)) return;
    if (--acc->second.users == 0) {
      last = std::move(acc->second.agent);
      add(a->cm_retired, last->counters());
      g_agents.erase(acc);
    }
  }
  // ~CmAgent (outside the entry's lock) unhooks QP1 from the control plane.
}

// sockaddr <-> GID + port. IPv4 (and IPv4-mapped IPv6) addresses are ::ffff:a.b.c.d GIDs.
bool from_sockaddr(const sockaddr* sa, uint32_t len, ctl::cm::Gid* gid, uint16_t* port) {
  if (sa == nullptr) return false;
  if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(sa);
    *gid = ctl::gid_from_ipv4(ntohl(s->sin_addr.s_addr));
    *port = ntohs(s->sin_port);
    return true;
  }
  if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(sa);
    std::memcpy(gid->data(), &s->sin6_addr, 16);
    *port = ntohs(s->sin6_port);
    return true;
  }
  return false;
}

// Copies `s` out by NDK's size protocol: kBufferTooSmall with the size needed in *len.
template <class S>
Status copy_out(const S& s, sockaddr* sa, uint32_t* len) {
  const uint32_t need = sizeof(S);
  const bool fits = sa != nullptr && *len >= need;
  if (fits) std::memcpy(sa, &s, need);
  *len = need;
  return fits ? Status::kSuccess : Status::kBufferTooSmall;
}

Status to_sockaddr(const ctl::cm::Gid& gid, uint16_t port, sockaddr* sa, uint32_t* len) {
  if (len == nullptr) return Status::kInvalidParameter;
  if (ctl::gid_is_ipv4(gid)) {
    sockaddr_in s{};
    s.sin_family = AF_INET;
    s.sin_port = htons(port);
    s.sin_addr.s_addr = htonl(ctl::gid_to_ipv4(gid));
    return copy_out(s, sa, len);
  }
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(port);
  std::memcpy(&s.sin6_addr, gid.data(), 16);
  return copy_out(s, sa, len);
}

bool is_wildcard(const ctl::cm::Gid& g) {
  return g == ctl::cm::Gid{} || g == ctl::gid_from_ipv4(0);
}

// connect / resolve_datagram's `src` (may be null): one of the adapter's addresses, the one it
// would use towards `dst`, or the wildcard. kSuccess, kInvalidParameter or kInvalidAddress.
Status check_src(AdapterImpl* a, const sockaddr* src, uint32_t src_length,
                 const ctl::cm::Gid& dgid) {
  if (src == nullptr) return Status::kSuccess;
  ctl::cm::Gid sgid{};
  uint16_t sport = 0;
  if (!from_sockaddr(src, src_length, &sgid, &sport)) return Status::kInvalidParameter;
  if (!is_wildcard(sgid) &&
      (!a->ctl->control().is_local(sgid) || ctl::local_gid_for(*a->ctl, dgid) != sgid))
    return Status::kInvalidAddress;
  return Status::kSuccess;
}

static_assert(kMaxDatagramRequestData == ctl::cm::kMaxSidrReqUserData);
static_assert(kMaxDatagramReplyData == ctl::cm::kSidrRepPrivateData);

}  // namespace

void hold_cm_agent(AdapterImpl* a) { (void)acquire_agent(a); }
void drop_cm_agent(AdapterImpl* a) { release_agent(a); }

CmCounters cm_counters(AdapterImpl* a) {
  CmCounters t;
  {
    AgentMap::accessor acc;  // a write lock on the entry, made for the occasion if need be
    g_agents.insert(acc, a);
    t = a->cm_retired;
    if (acc->second.agent) add(t, acc->second.agent->counters());
    if (acc->second.users == 0 && !acc->second.agent) g_agents.erase(acc);
  }
  t.mads_dropped = a->cm_mads_dropped.load(std::memory_order_relaxed);
  return t;
}

struct ConnectorImpl final : ImplOf<ConnectorImpl, Connector> {
  // `from_listener`: the connection of a request; null for a new, active one.
  ConnectorImpl(AdapterImpl* a, std::shared_ptr<ctl::cm_detail::Conn> from_listener)
      : ImplOf(ObjectType::kConnector, a),
        agent(acquire_agent(a)),
        cm(agent->core()),
        conn(from_listener ? std::move(from_listener) : std::make_shared<ctl::cm_detail::Conn>()) {}
  ~ConnectorImpl() override { ConnectorImpl::release_unlocked(); }
  // The CM connection and this adapter's share of the agent go with the close, also when the
  // object itself is kept (defunct, after the adapter's close): the agent uses the adapter.
  void release_unlocked() noexcept override {
    if (agent == nullptr) return;
    cm->close(*conn);
    conn.reset();
    cm.reset();
    release_agent(adapter);
    agent = nullptr;
  }
  Status teardown_locked() override {
    // No CM callback for this connector after this (Core::close), and the request still
    // outstanding completes before the close callback (both deferred, in order).
    if (conn) cm->close(*conn);
    if (req_pending) {
      req_pending = false;
      adapter->defer_locked([cb = req_cb, ctx = req_ctx] {
        if (cb != nullptr) cb(ctx, Status::kCancelled);
      });
    }
    if (qp != nullptr) {
      --qp->successors;  // mu held: release_successor() without taking it again
      qp = nullptr;
    }
    return Status::kSuccess;
  }

  // Ends the outstanding request (control thread, from a CM completion).
  void finish(Status s) {
    std::lock_guard lk(adapter->mu);
    if (!req_pending) return;
    req_pending = false;
    adapter->defer_locked([cb = req_cb, ctx = req_ctx, s] {
      if (cb != nullptr) cb(ctx, s);
    });
  }
  void peer_disconnected() {
    std::lock_guard lk(adapter->mu);
    if (disc_cb == nullptr || life != Life::kLive) return;
    adapter->defer_locked([cb = disc_cb, ctx = disc_ctx] { cb(ctx); });
    disc_cb = nullptr;
  }
  // Runs the CM request `start(done)` (which returns kPending when `done` will run) as an NDK
  // request: with a completion, the call returns kPending and the completion runs later;
  // without one, the call waits for the outcome (not possible on the control thread, which
  // delivers it). `q` (may be null) becomes an antecedent of the connector.
  template <class Start>
  Status request(RequestCompletion completion, void* context, QpImpl* q, Start start) {
    if (completion == nullptr && adapter->on_control_thread()) return Status::kInvalidDeviceState;
    SyncWait sync;
    const RequestCompletion cb = completion != nullptr ? completion : &SyncWait::on_request;
    void* const ctx = completion != nullptr ? context : &sync;
    return guarded([&] {
      if (Status s = begin(cb, ctx, q); s != Status::kSuccess) return s;
      const Status s = start([c = this](Status st) { c->finish(st); });
      if (s != Status::kPending) {
        abort_request();
        return s;
      }
      if (completion != nullptr) return Status::kPending;
      adapter->wait(sync.done);
      return sync.status;
    });
  }
  void on_disconnect(DisconnectEventCallback cb, void* ctx) {
    std::lock_guard lk(adapter->mu);
    disc_cb = cb;
    disc_ctx = ctx;
  }
  // Starts a request; kConnectionActive when one is outstanding. `q` becomes an antecedent.
  Status begin(RequestCompletion cb, void* ctx, QpImpl* q) {
    std::lock_guard lk(adapter->mu);
    if (life != Life::kLive || adapter->shutting_down) return Status::kInvalidDeviceState;
    if (req_pending) return Status::kConnectionActive;
    req_pending = true;
    req_cb = cb;
    req_ctx = ctx;
    if (q != nullptr && qp == nullptr) {
      qp = q;
      ++q->successors;
    }
    return Status::kSuccess;
  }
  void abort_request() {
    std::lock_guard lk(adapter->mu);
    req_pending = false;
  }

  ctl::CmAgent* agent;                         // null once released
  std::shared_ptr<ctl::cm_detail::Core> cm;    // the agent's; null once released
  std::shared_ptr<ctl::cm_detail::Conn> conn;  // null once released
  // ---- guarded by adapter->mu
  QpImpl* qp = nullptr;
  bool req_pending = false;
  RequestCompletion req_cb = nullptr;
  void* req_ctx = nullptr;
  DisconnectEventCallback disc_cb = nullptr;
  void* disc_ctx = nullptr;
};

struct ListenerImpl final : ImplOf<ListenerImpl, Listener> {
  ListenerImpl(AdapterImpl* a, ConnectEventCallback cb, void* ctx)
      : ImplOf(ObjectType::kListener, a),
        agent(acquire_agent(a)),
        cm(agent->core()),
        listen(std::make_shared<ctl::cm_detail::Listen>()),
        event_cb(cb),
        event_ctx(ctx) {}
  ~ListenerImpl() override { ListenerImpl::release_unlocked(); }
  void release_unlocked() noexcept override {  // as ConnectorImpl's
    if (agent == nullptr) return;
    cm->close_listener(*listen);
    listen.reset();
    cm.reset();
    release_agent(adapter);
    agent = nullptr;
  }
  // A close refuses new requests at once (ndkpi.md §5.4).
  void stop_events() noexcept override { cm->pause(*listen, true); }
  Status teardown_locked() override {
    cm->close_listener(*listen);
    return Status::kSuccess;
  }

  // A request reached the CM listener (control thread, no CM lock held).
  void on_request(std::shared_ptr<ctl::cm_detail::Conn> c) {
    std::unique_lock lk(adapter->mu);
    if (life != Life::kLive || adapter->shutting_down ||
        (!is_wildcard(address) && cm->info(*c).local_gid != address)) {
      lk.unlock();
      (void)cm->reject(*c, {});
      return;
    }
    auto* ci = new ConnectorImpl(adapter, std::move(c));
    adapter->adopt_locked(ci, {});
    adapter->defer_locked([cb = event_cb, ctx = event_ctx, ci] { cb(ctx, &ci->pub_); });
  }

  ctl::CmAgent* agent;                             // null once released
  std::shared_ptr<ctl::cm_detail::Core> cm;        // the agent's; null once released
  std::shared_ptr<ctl::cm_detail::Listen> listen;  // null once released
  const ConnectEventCallback event_cb;
  void* const event_ctx;
  // ---- guarded by adapter->mu
  ctl::cm::Gid address{};
  bool listening = false;
};

// Registers a new connector or listener with its adapter, or deletes it when the adapter is
// closing. It is made before the adapter's lock is taken: its constructor acquires the
// adapter's CM agent (acquire_agent), which may create it.
template <class Impl, class Pub>
Status adopt_new(AdapterImpl* a, Impl* o, Handle<Pub>* out) {
  std::lock_guard lk(a->mu);
  if (a->shutting_down) {
    delete o;
    return Status::kInvalidDeviceState;
  }
  a->adopt_locked(o, {});
  *out = Handle<Pub>(&o->pub_);
  return Status::kSuccess;
}

}  // namespace detail

// ---- Connector
// ------------------------------------------------------------------------------------

Status Connector::connect(Qp& qp, const sockaddr* src, uint32_t src_length, const sockaddr* dst,
                          uint32_t dst_length, uint32_t inbound_read_limit,
                          uint32_t outbound_read_limit, const void* private_data,
                          uint32_t private_data_length, RequestCompletion completion,
                          void* request_context) noexcept {
  if (impl_->remote)
    return detail::remote_connect(impl_, detail::QpImpl::base_of(qp), src, src_length, dst,
                                  dst_length, inbound_read_limit, outbound_read_limit, private_data,
                                  private_data_length, completion, request_context);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::QpImpl::base_of(qp)->remote) return Status::kInvalidParameter;  // another adapter
  // Closed (or defunct: its adapter, engine and CM may be gone): nothing below may be reached.
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  detail::AdapterImpl* a = c_->adapter;
  detail::QpImpl* q = detail::QpImpl::of(qp);
  ctl::cm::Gid dgid{};
  uint16_t dport = 0;
  if (q->adapter != a || !detail::from_sockaddr(dst, dst_length, &dgid, &dport) || dport == 0 ||
      (private_data == nullptr && private_data_length != 0))
    return Status::kInvalidParameter;
  if (private_data_length > detail::kMaxCallerData) return Status::kInvalidBufferSize;
  if (Status s = detail::check_src(a, src, src_length, dgid); s != Status::kSuccess) return s;
  return c_->request(completion, request_context, q, [&](ctl::CmCompletion done) {
    return c_->cm->connect(c_->conn, &q->qp, dgid, dport, {inbound_read_limit, outbound_read_limit},
                           {static_cast<const uint8_t*>(private_data), private_data_length},
                           std::move(done));
  });
}

Status Connector::complete_connect(DisconnectEventCallback disconnect_event,
                                   void* disconnect_context, RequestCompletion, void*) noexcept {
  if (impl_->remote)
    return detail::remote_complete_connect(impl_, disconnect_event, disconnect_context);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  return detail::guarded([&] {
    c_->on_disconnect(disconnect_event, disconnect_context);
    return c_->cm->complete_connect(*c_->conn, [c = c_] { c->peer_disconnected(); });
  });
}

Status Connector::accept(Qp& qp, uint32_t inbound_read_limit, uint32_t outbound_read_limit,
                         const void* private_data, uint32_t private_data_length,
                         DisconnectEventCallback disconnect_event, void* disconnect_context,
                         RequestCompletion completion, void* request_context) noexcept {
  if (impl_->remote)
    return detail::remote_accept(impl_, detail::QpImpl::base_of(qp), inbound_read_limit,
                                 outbound_read_limit, private_data, private_data_length,
                                 disconnect_event, disconnect_context, completion, request_context);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::QpImpl::base_of(qp)->remote) return Status::kInvalidParameter;  // another adapter
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  detail::AdapterImpl* a = c_->adapter;
  detail::QpImpl* q = detail::QpImpl::of(qp);
  if (q->adapter != a || (private_data == nullptr && private_data_length != 0))
    return Status::kInvalidParameter;
  if (private_data_length > detail::kMaxCalleeData) return Status::kInvalidBufferSize;
  return c_->request(completion, request_context, q, [&](ctl::CmCompletion done) {
    c_->on_disconnect(disconnect_event, disconnect_context);
    return c_->cm->accept(
        *c_->conn, &q->qp, {inbound_read_limit, outbound_read_limit},
        {static_cast<const uint8_t*>(private_data), private_data_length},
        [c = c_] { c->peer_disconnected(); }, std::move(done));
  });
}

Status Connector::reject(const void* private_data, uint32_t private_data_length) noexcept {
  if (impl_->remote) return detail::remote_reject(impl_, private_data, private_data_length);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  if (private_data == nullptr && private_data_length != 0) return Status::kInvalidParameter;
  if (private_data_length > detail::kMaxCalleeData) return Status::kInvalidBufferSize;
  return detail::guarded([&] {
    return c_->cm->reject(*c_->conn,
                          {static_cast<const uint8_t*>(private_data), private_data_length});
  });
}

Status Connector::resolve_datagram(const sockaddr* src, uint32_t src_length, const sockaddr* dst,
                                   uint32_t dst_length, const void* private_data,
                                   uint32_t private_data_length, RequestCompletion completion,
                                   void* request_context) noexcept {
  if (impl_->remote)
    return detail::remote_resolve_datagram(impl_, src, src_length, dst, dst_length, private_data,
                                           private_data_length, completion, request_context);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  ctl::cm::Gid dgid{};
  uint16_t dport = 0;
  if (!detail::from_sockaddr(dst, dst_length, &dgid, &dport) || dport == 0 ||
      (private_data == nullptr && private_data_length != 0))
    return Status::kInvalidParameter;
  if (private_data_length > kMaxDatagramRequestData) return Status::kInvalidBufferSize;
  if (Status s = detail::check_src(c_->adapter, src, src_length, dgid); s != Status::kSuccess)
    return s;
  return c_->request(completion, request_context, nullptr, [&](ctl::CmCompletion done) {
    return c_->cm->resolve(c_->conn, dgid, dport,
                           {static_cast<const uint8_t*>(private_data), private_data_length},
                           std::move(done));
  });
}

Status Connector::get_datagram_peer(uint32_t* qpn, uint32_t* qkey) noexcept {
  if (impl_->remote) return detail::remote_datagram_peer(impl_, qpn, qkey);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  return detail::guarded([&] { return c_->cm->datagram_peer(*c_->conn, qpn, qkey); });
}

Status Connector::get_reject_reason(uint16_t* reason) noexcept {
  if (reason == nullptr) return Status::kInvalidParameter;
  if (impl_->remote) return detail::remote_reject_reason(impl_, reason);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  const uint16_t r = c_->cm->info(*c_->conn).reject_reason;
  if (r == 0) return Status::kConnectionInvalid;
  *reason = r;
  return Status::kSuccess;
}

const char* reject_reason_name(uint16_t reason) noexcept {
  return ctl::cm::to_string(static_cast<ctl::cm::RejReason>(reason));
}

bool Connector::is_datagram() const noexcept {
  if (impl_->remote) return detail::remote_is_datagram(impl_);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return false;
  return c_->cm->info(*c_->conn).datagram;
}

Status Connector::accept_datagram(uint32_t qpn, uint32_t qkey, const void* private_data,
                                  uint32_t private_data_length) noexcept {
  if (impl_->remote)
    return detail::remote_accept_datagram(impl_, qpn, qkey, private_data, private_data_length);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  if (private_data == nullptr && private_data_length != 0) return Status::kInvalidParameter;
  if (private_data_length > kMaxDatagramReplyData) return Status::kInvalidBufferSize;
  return detail::guarded([&] {
    return c_->cm->accept_datagram(
        *c_->conn, qpn, qkey, {static_cast<const uint8_t*>(private_data), private_data_length});
  });
}

Status Connector::get_connection_data(uint32_t* inbound_read_limit, uint32_t* outbound_read_limit,
                                      void* private_data, uint32_t* private_data_length) noexcept {
  if (impl_->remote)
    return detail::remote_connection_data(impl_, inbound_read_limit, outbound_read_limit,
                                          private_data, private_data_length);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  return detail::guarded([&] {
    ctl::ReadLimits lim;
    const Status s =
        c_->cm->get_connection_data(*c_->conn, &lim, private_data, private_data_length);
    if (s == Status::kSuccess || s == Status::kBufferTooSmall) {
      if (inbound_read_limit != nullptr) *inbound_read_limit = lim.inbound;
      if (outbound_read_limit != nullptr) *outbound_read_limit = lim.outbound;
    }
    return s;
  });
}

Status Connector::get_local_address(sockaddr* address, uint32_t* length) noexcept {
  if (impl_->remote) return detail::remote_connector_address(impl_, false, address, length);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  const ctl::CmConnInfo i = c_->cm->info(*c_->conn);
  if (i.local_gid == ctl::cm::Gid{}) return Status::kConnectionInvalid;
  return detail::to_sockaddr(i.local_gid, i.local_port, address, length);
}

Status Connector::get_peer_address(sockaddr* address, uint32_t* length) noexcept {
  if (impl_->remote) return detail::remote_connector_address(impl_, true, address, length);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  const ctl::CmConnInfo i = c_->cm->info(*c_->conn);
  if (i.peer_gid == ctl::cm::Gid{}) return Status::kConnectionInvalid;
  return detail::to_sockaddr(i.peer_gid, i.peer_port, address, length);
}

Status Connector::disconnect(RequestCompletion completion, void* request_context) noexcept {
  if (impl_->remote) return detail::remote_disconnect(impl_, completion, request_context);
  detail::ConnectorImpl* const c_ = impl();
  if (detail::is_closing(c_)) return Status::kInvalidDeviceState;
  return c_->request(completion, request_context, nullptr, [&](ctl::CmCompletion done) {
    return c_->cm->disconnect(*c_->conn, std::move(done));
  });
}

Status create_connector(Adapter& adapter, CreateCompletion, void*,
                        Handle<Connector>* out) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  detail::AdapterImpl* a = &adapter.impl();
  if (a->remote) return detail::remote_create_connector(a, out);
  return detail::guarded(
      [&] { return detail::adopt_new(a, new detail::ConnectorImpl(a, nullptr), out); });
}

// ---- Listener
// -------------------------------------------------------------------------------------

namespace detail {

namespace {

// Listener::listen and listen_datagram: in rdma_cm port space `port_space` (cm::kPsTcp, kPsUdp).
Status listen_in(ListenerImpl* l, const sockaddr* address, uint32_t address_length,
                 uint16_t port_space) noexcept {
  if (is_closing(l)) return Status::kInvalidDeviceState;
  AdapterImpl* a = l->adapter;
  ctl::cm::Gid g{};
  uint16_t port = 0;
  if (!from_sockaddr(address, address_length, &g, &port)) return Status::kInvalidParameter;
  if (!is_wildcard(g) && !a->ctl->control().is_local(g)) return Status::kInvalidAddress;
  return guarded([&] {
    {
      std::lock_guard lk(a->mu);
      if (l->life != Life::kLive) return Status::kInvalidDeviceState;
      if (l->listening) return Status::kInvalidParameter;
      l->address = g;
    }
    const Status s = l->cm->listen(
        l->listen, port, [l](auto c) { l->on_request(std::move(c)); }, port_space);
    if (s == Status::kSuccess) {
      std::lock_guard lk(a->mu);
      l->listening = true;
    }
    return s;
  });
}

}  // namespace
}  // namespace detail

Status Listener::listen(const sockaddr* address, uint32_t address_length, RequestCompletion,
                        void*) noexcept {
  if (impl_->remote) return detail::remote_listen(impl_, address, address_length, false);
  detail::ListenerImpl* const l_ = impl();
  return detail::listen_in(l_, address, address_length, ctl::cm::kPsTcp);
}

Status Listener::listen_datagram(const sockaddr* address, uint32_t address_length,
                                 RequestCompletion, void*) noexcept {
  if (impl_->remote) return detail::remote_listen(impl_, address, address_length, true);
  detail::ListenerImpl* const l_ = impl();
  return detail::listen_in(l_, address, address_length, ctl::cm::kPsUdp);
}

Status Listener::get_local_address(sockaddr* address, uint32_t* length) noexcept {
  if (impl_->remote) return detail::remote_listener_address(impl_, address, length);
  detail::ListenerImpl* const l_ = impl();
  if (detail::is_closing(l_)) return Status::kInvalidDeviceState;
  ctl::cm::Gid g;
  {
    std::lock_guard lk(l_->adapter->mu);
    if (!l_->listening) return Status::kInvalidDeviceState;
    g = l_->address;
  }
  if (detail::is_wildcard(g)) {
    // The wildcard: report the adapter's own address of that family.
    if (const auto lg = ctl::local_gid_for(*l_->adapter->ctl, ctl::gid_from_ipv4(1))) g = *lg;
  }
  return detail::to_sockaddr(g, l_->cm->port(*l_->listen), address, length);
}

// A closing listener refuses requests already (ListenerImpl::stop_events).
void Listener::control_connect_events(bool pause) noexcept {
  if (impl_->remote) return detail::remote_pause(impl_, pause);
  detail::ListenerImpl* const l_ = impl();
  if (!detail::is_closing(l_)) l_->cm->pause(*l_->listen, pause);
}

Status create_listener(Adapter& adapter, ConnectEventCallback connect_event,
                       void* connect_event_context, CreateCompletion, void*,
                       Handle<Listener>* out) noexcept {
  if (out == nullptr || connect_event == nullptr) return Status::kInvalidParameter;
  detail::AdapterImpl* a = &adapter.impl();
  if (a->remote)
    return detail::remote_create_listener(a, connect_event, connect_event_context, out);
  return detail::guarded([&] {
    return detail::adopt_new(a, new detail::ListenerImpl(a, connect_event, connect_event_context),
                             out);
  });
}

}  // namespace urnic
