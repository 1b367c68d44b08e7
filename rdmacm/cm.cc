// Event channels, ids, addresses and routes.
#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

#include "rdmacm/internal.h"

using namespace urnic;
using namespace urnic::rdmacm;

namespace urnic::rdmacm {
namespace {

// The ids alive in this process. When a process exits with connections up, its kernel tears its
// ids down as the rdma_cm file closes, and ib_cm sends a DREQ for each established one
// (cm_destroy_id), so that the peers see DISCONNECTED: perftest's ib_atomic_lat -R server returns
// from main with its connection up, and its client waits for that event. urnic's CM lives in the
// process, so an exit hook does the same before the process goes.
struct LiveIds {
  std::mutex mu;
  std::set<Id*> ids;
};
LiveIds& live_ids() {
  static auto* l = new LiveIds;  // never destroyed: the exit hook runs after static destructors
  return *l;
}

// How long the exit waits for the peers' DREPs: an answer proves the DREQ left; a peer that is
// gone must not hold the exit up.
constexpr auto kExitDisconnectWait = std::chrono::seconds(1);

void disconnect_at_exit() noexcept {
  static std::atomic<int> left{0};  // static: a late completion may run after the wait ends
  auto done = [](void* c, Status) { static_cast<std::atomic<int>*>(c)->fetch_sub(1); };
  {
    LiveIds& l = live_ids();
    std::lock_guard lock(l.mu);
    for (Id* i : l.ids) {
      bool connected = false;
      {
        std::lock_guard il(i->mu);
        connected = i->state == IdState::kConnected && i->conn && !i->conn->is_datagram();
      }
      if (!connected) continue;
      left.fetch_add(1);
      if (i->conn->disconnect(done, &left) != Status::kPending) left.fetch_sub(1);
    }
  }
  const auto until = std::chrono::steady_clock::now() + kExitDisconnectWait;
  while (left.load() > 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the engine runs elsewhere
}

}  // namespace

Id::Id() {
  static std::once_flag hook;
  std::call_once(hook, [] { std::atexit(disconnect_at_exit); });
  LiveIds& l = live_ids();
  std::lock_guard lock(l.mu);
  l.ids.insert(this);
}

Id::~Id() {
  LiveIds& l = live_ids();
  std::lock_guard lock(l.mu);
  l.ids.erase(this);
}

void Channel::push(Event* e) noexcept {
  {
    std::lock_guard lock(mu);
    q.push_back(e);
  }
  const uint64_t one = 1;
  (void)!::write(ch.fd, &one, sizeof one);
}

std::vector<ibv_context*>& devices() noexcept {
  static std::vector<ibv_context*>* list = [] {
    auto* v = new std::vector<ibv_context*>();
    int n = 0;
    if (ibv_device** d = ibv_get_device_list(&n)) {
      for (int i = 0; i < n; ++i)
        if (ibv_context* c = ibv_open_device(d[i])) v->push_back(c);
      ibv_free_device_list(d);
    }
    return v;
  }();
  return *list;
}

bool is_wildcard(const sockaddr* a) noexcept {
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

bool is_loopback(const sockaddr* a) noexcept {
  if (a->sa_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  if (a->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
  return false;
}

socklen_t addr_len(const sockaddr* a) noexcept {
  return a->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

uint16_t port_of(const sockaddr* a) noexcept {
  return a->sa_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6*>(a)->sin6_port
                                  : reinterpret_cast<const sockaddr_in*>(a)->sin_port;
}

void set_port(sockaddr* a, uint16_t port) noexcept {
  if (a->sa_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(a)->sin6_port = port;
  else
    reinterpret_cast<sockaddr_in*>(a)->sin_port = port;
}

ibv_context* device_of_family(sa_family_t family) noexcept {
  sockaddr_storage any{};
  any.ss_family = family;
  return device_for(reinterpret_cast<sockaddr*>(&any), true);
}

namespace {
std::mutex held_mu;
std::set<std::pair<int, uint16_t>> held_ports;  // (port space, port) of ids bound to port 0
}  // namespace

uint16_t hold_ephemeral_port(rdma_port_space ps) noexcept {
  constexpr uint32_t kFirst = 49152, kCount = 65536 - kFirst;
  static std::atomic<uint32_t> salt{static_cast<uint32_t>(::getpid()) * 2654435761u};
  std::lock_guard lock(held_mu);
  if (held_ports.size() >= kCount) return 0;
  // A random start (two processes binding at once rarely pick the same), then the next free.
  const uint32_t start = salt.fetch_add(40503u) % kCount;
  for (uint32_t k = 0; k < kCount; ++k) {
    const auto port = static_cast<uint16_t>(kFirst + (start + k) % kCount);
    if (held_ports.emplace(static_cast<int>(ps), port).second) return port;
  }
  return 0;
}

void release_ephemeral_port(rdma_port_space ps, uint16_t port) noexcept {
  std::lock_guard lock(held_mu);
  held_ports.erase({static_cast<int>(ps), port});
}

ibv_context* device_for(const sockaddr* a, bool wildcard_ok) noexcept {
  if (a == nullptr || (a->sa_family != AF_INET && a->sa_family != AF_INET6)) return nullptr;
  const bool any = is_wildcard(a);
  for (ibv_context* c : devices()) {
    const LocalAddress l = verbs::ctx_of(c)->dev->ext->local_address();
    if (a->sa_family == AF_INET) {
      const uint32_t ip = ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr);
      if (l.ipv4 != 0 && (ip == l.ipv4 || (any && wildcard_ok))) return c;
    } else if (l.has_ipv6) {
      const auto* s6 = reinterpret_cast<const sockaddr_in6*>(a);
      if ((any && wildcard_ok) || std::memcmp(&s6->sin6_addr, l.ipv6.data(), 16) == 0) return c;
    }
  }
  return nullptr;
}

void post_event(Id* id, rdma_cm_event_type type, int status, const void* pdata, size_t plen,
                Id* listen_id, uint8_t resp_res, uint8_t init_depth) noexcept {
  // Out of memory on the control thread: nothing better to do than not report.
  if (Event* e = make_event(id, type, status, pdata, plen, listen_id, resp_res, init_depth))
    push_event(listen_id ? listen_id : id, e);
}

void push_event(Id* id, Event* e) noexcept { id->ch->push(e); }

Event* make_event(Id* id, rdma_cm_event_type type, int status, const void* pdata, size_t plen,
                  Id* listen_id, uint8_t resp_res, uint8_t init_depth) noexcept {
  auto* e = new (std::nothrow) Event();
  if (e == nullptr) return nullptr;
  e->ev.id = &id->id;
  e->ev.listen_id = listen_id ? &listen_id->id : nullptr;
  e->ev.event = type;
  e->ev.status = status;
  plen = std::min(plen, sizeof e->pdata);
  if (plen) std::memcpy(e->pdata, pdata, plen);
  e->ev.param.conn.private_data = plen ? e->pdata : nullptr;
  e->ev.param.conn.private_data_len = static_cast<uint8_t>(std::min<size_t>(plen, 255));
  e->ev.param.conn.responder_resources = resp_res;
  e->ev.param.conn.initiator_depth = init_depth;
  e->ev.param.conn.rnr_retry_count = 7;
  return e;
}

int complete(Id* id, rdma_cm_event_type want) noexcept {
  if (!id->sync) return 0;
  rdma_cm_event* ev = nullptr;
  if (rdma_get_cm_event(id->id.channel, &ev) != 0) return -1;
  const bool ok = ev->event == want && ev->status == 0;
  const int status = ev->status;
  rdma_ack_cm_event(ev);
  if (ok) return 0;
  errno = status < 0 ? -status : ECONNREFUSED;
  return -1;
}

void purge_events(Id* id) noexcept {
  std::vector<Event*> gone;
  {
    std::lock_guard lock(id->ch->mu);
    auto& q = id->ch->q;
    for (auto it = q.begin(); it != q.end();) {
      const bool mine = (*it)->ev.id == &id->id || (*it)->ev.listen_id == &id->id;
      if (mine) {
        gone.push_back(*it);
        it = q.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Event* e : gone) {
    uint64_t one = 0;
    (void)!::read(id->ch->ch.fd, &one, sizeof one);  // the eventfd counted it: count it off
    // A connection request nobody took: its id goes with it, refused.
    if (e->ev.listen_id == &id->id && e->ev.id != nullptr) {
      Id* child = id_of(e->ev.id);
      if (child->conn) (void)child->conn->reject(nullptr, 0);
      verbs::close_sync(child->conn);
      if (child->sync) rdma_destroy_event_channel(child->id.channel);
      delete child;
    }
    delete e;
  }
}

void set_qp_state(ibv_qp* qp, ibv_qp_state s) noexcept {
  if (qp == nullptr) return;
  verbs::VQp* q = verbs::qp_of(qp);
  std::lock_guard lock(q->sq_lock);
  q->fresh = false;
  qp->state = s;
}

}  // namespace urnic::rdmacm

namespace {

// Fills the route as rdma_cm does for RoCE: GIDs from the IP addresses, one path record.
void fill_route(Id* id) {
  rdma_addr& a = id->id.route.addr;
  auto gid_of = [](const sockaddr* s, ibv_gid* g) {
    std::memset(g, 0, sizeof *g);
    if (s->sa_family == AF_INET) {
      g->raw[10] = g->raw[11] = 0xFF;
      std::memcpy(&g->raw[12], &reinterpret_cast<const sockaddr_in*>(s)->sin_addr, 4);
    } else if (s->sa_family == AF_INET6) {
      std::memcpy(g->raw, &reinterpret_cast<const sockaddr_in6*>(s)->sin6_addr, 16);
    }
  };
  gid_of(&a.src_addr, &a.addr.ibaddr.sgid);
  gid_of(&a.dst_addr, &a.addr.ibaddr.dgid);
  a.addr.ibaddr.pkey = htobe16(0xFFFF);
  ibv_sa_path_rec& p = id->path;
  p = {};
  p.sgid = a.addr.ibaddr.sgid;
  p.dgid = a.addr.ibaddr.dgid;
  p.pkey = htobe16(0xFFFF);
  p.hop_limit = 64;
  p.traffic_class = id->tos;
  p.reversible = 1;
  p.numb_path = 1;
  ibv_port_attr pa{};
  p.mtu =
      id->id.verbs && ___ibv_query_port(id->id.verbs, 1, &pa) == 0 ? pa.active_mtu : IBV_MTU_1024;
  p.rate = IBV_RATE_100_GBPS;
  p.packet_life_time = 14;
  id->id.route.path_rec = &p;
  id->id.route.num_paths = 1;
}

}  // namespace

extern "C" {

rdma_event_channel* rdma_create_event_channel(void) {
  auto* c = new (std::nothrow) Channel();
  if (c == nullptr) return verbs::fail_null<rdma_event_channel>(ENOMEM);
  c->ch.fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (c->ch.fd < 0) {
    delete c;
    return nullptr;
  }
  return &c->ch;
}

void rdma_destroy_event_channel(rdma_event_channel* channel) {
  if (channel == nullptr) return;
  auto* c = reinterpret_cast<Channel*>(channel);
  ::close(channel->fd);
  for (Event* e : c->q) delete e;
  delete c;
}

int rdma_get_cm_event(rdma_event_channel* channel, rdma_cm_event** event) {
  if (channel == nullptr || event == nullptr) return fail(EINVAL);
  uint64_t one = 0;
  if (::read(channel->fd, &one, sizeof one) != sizeof one) return -1;  // EAGAIN, EINTR
  auto* c = reinterpret_cast<Channel*>(channel);
  Event* e = nullptr;
  {
    std::lock_guard lock(c->mu);
    if (c->q.empty()) return fail(EAGAIN);
    e = c->q.front();
    c->q.pop_front();
  }
  // Handed out: rdma_destroy_id of its id (the listening id for a request) waits for the ack.
  Id* owner = id_of(e->ev.listen_id ? e->ev.listen_id : e->ev.id);
  {
    std::lock_guard lock(owner->mu);
    ++owner->events_out;
  }
  *event = &e->ev;
  return 0;
}

int rdma_ack_cm_event(rdma_cm_event* event) {
  if (event == nullptr) return fail(EINVAL);
  Id* id = id_of(event->listen_id ? event->listen_id : event->id);
  {
    std::lock_guard lock(id->mu);
    --id->events_out;
  }
  id->cv.notify_all();
  delete reinterpret_cast<Event*>(event);
  return 0;
}

const char* rdma_event_str(rdma_cm_event_type e) {
  static const char* const kNames[] = {
      "RDMA_CM_EVENT_ADDR_RESOLVED",   "RDMA_CM_EVENT_ADDR_ERROR",
      "RDMA_CM_EVENT_ROUTE_RESOLVED",  "RDMA_CM_EVENT_ROUTE_ERROR",
      "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
      "RDMA_CM_EVENT_CONNECT_ERROR",   "RDMA_CM_EVENT_UNREACHABLE",
      "RDMA_CM_EVENT_REJECTED",        "RDMA_CM_EVENT_ESTABLISHED",
      "RDMA_CM_EVENT_DISCONNECTED",    "RDMA_CM_EVENT_DEVICE_REMOVAL",
      "RDMA_CM_EVENT_MULTICAST_JOIN",  "RDMA_CM_EVENT_MULTICAST_ERROR",
      "RDMA_CM_EVENT_ADDR_CHANGE",     "RDMA_CM_EVENT_TIMEWAIT_EXIT"};
  const auto i = static_cast<unsigned>(e);
  return i < std::size(kNames) ? kNames[i] : "UNKNOWN EVENT";
}

int rdma_create_id(rdma_event_channel* channel, rdma_cm_id** id, void* context,
                   rdma_port_space ps) {
  if (id == nullptr) return fail(EINVAL);
  // IPoIB's port space needs multicast, which urnic does not offer.
  if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB && ps != RDMA_PS_UDP) return fail(EOPNOTSUPP);
  auto* i = new (std::nothrow) Id();
  if (i == nullptr) return fail(ENOMEM);
  if (channel == nullptr) {  // synchronous id: a channel of its own
    channel = rdma_create_event_channel();
    if (channel == nullptr) {
      delete i;
      return -1;
    }
    i->sync = true;
  }
  i->ch = reinterpret_cast<Channel*>(channel);
  i->id.channel = channel;
  i->id.context = context;
  i->id.ps = ps;
  i->id.qp_type = ps == RDMA_PS_UDP ? IBV_QPT_UD : IBV_QPT_RC;
  (void)devices();  // open the devices now, as rdma_cm does at its first call
  *id = &i->id;
  return 0;
}

int rdma_bind_addr(rdma_cm_id* id, sockaddr* addr) {
  if (id == nullptr || addr == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  // rdma_cm takes a loopback address as it takes the wildcard (cma_any_addr): bound, to no
  // device yet, keeping the address as given. libfabric's verbs provider binds "localhost" so for
  // a server given no address, and then picks the device from the interfaces' addresses.
  const bool loopback = is_loopback(addr);
  ibv_context* c = loopback ? device_of_family(addr->sa_family) : device_for(addr, true);
  if (c == nullptr) return fail(EADDRNOTAVAIL);
  if (i->state != IdState::kIdle) return fail(EINVAL);  // bound once (rdma_cm)
  std::memcpy(&id->route.addr.src_storage, addr, addr_len(addr));
  if (port_of(addr) == 0) {
    const uint16_t p = hold_ephemeral_port(id->ps);
    if (p == 0) return fail(EADDRNOTAVAIL);
    i->ephemeral_port = p;
    set_port(&id->route.addr.src_addr, htons(p));
  }
  // A wildcard bind belongs to no device until a connection request names one (rdma_cm).
  id->verbs = is_wildcard(addr) || loopback ? nullptr : c;
  id->port_num = 1;
  i->state = IdState::kBound;
  return 0;
}

int rdma_resolve_addr(rdma_cm_id* id, sockaddr* src, sockaddr* dst, int) {
  if (id == nullptr || dst == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  ibv_context* c = nullptr;
  if (src != nullptr) {
    c = device_for(src, true);
  } else if (id->verbs != nullptr) {
    c = id->verbs;
  } else {
    c = device_of_family(dst->sa_family);
  }
  if (c == nullptr) return fail(EADDRNOTAVAIL);
  id->verbs = c;
  id->port_num = 1;
  // The source: the device's own address of the destination's family (its port: ephemeral).
  const LocalAddress l = verbs::ctx_of(c)->dev->ext->local_address();
  sockaddr_storage s{};
  if (dst->sa_family == AF_INET) {
    auto* s4 = reinterpret_cast<sockaddr_in*>(&s);
    s4->sin_family = AF_INET;
    s4->sin_addr.s_addr = htonl(l.ipv4);
  } else {
    auto* s6 = reinterpret_cast<sockaddr_in6*>(&s);
    s6->sin6_family = AF_INET6;
    std::memcpy(&s6->sin6_addr, l.ipv6.data(), 16);
  }
  std::memcpy(&id->route.addr.src_storage, &s, sizeof s);
  std::memcpy(&id->route.addr.dst_storage, dst, addr_len(dst));
  fill_route(i);
  i->state = IdState::kAddrResolved;
  // The peer's MAC is resolved when the connection request is sent (ARP / ND in the adapter).
  post_event(i, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
  return complete(i, RDMA_CM_EVENT_ADDR_RESOLVED);
}

int rdma_resolve_route(rdma_cm_id* id, int) {
  if (id == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (i->state != IdState::kAddrResolved) return fail(EINVAL);
  fill_route(i);
  i->state = IdState::kRouteResolved;
  post_event(i, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
  return complete(i, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

int rdma_migrate_id(rdma_cm_id* id, rdma_event_channel* channel) {
  if (id == nullptr || channel == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  std::unique_lock lock(i->mu);
  i->cv.wait(lock, [&] { return i->events_out == 0; });
  if (i->sync) rdma_destroy_event_channel(id->channel);
  i->sync = false;
  i->ch = reinterpret_cast<Channel*>(channel);
  id->channel = channel;
  return 0;
}

int rdma_set_option(rdma_cm_id* id, int level, int optname, void* optval, size_t optlen) {
  if (id == nullptr || optval == nullptr) return fail(EINVAL);
  Id* i = id_of(id);
  if (level == RDMA_OPTION_ID && optname == RDMA_OPTION_ID_TOS && optlen == sizeof(uint8_t)) {
    // Applied to the path record only: urnic's Connector sends with the adapter's traffic class.
    if (*static_cast<uint8_t*>(optval) != 0) return fail(EOPNOTSUPP);
    i->tos = 0;
    return 0;
  }
  if (level == RDMA_OPTION_ID &&
      (optname == RDMA_OPTION_ID_REUSEADDR || optname == RDMA_OPTION_ID_AFONLY) &&
      optlen == sizeof(int))
    return 0;  // ports are not held in time-wait, and listeners are per family already
  return fail(optlen == 0 ? EINVAL : ENOSYS);
}

uint16_t rdma_get_src_port(rdma_cm_id* id) { return port_of(&id->route.addr.src_addr); }

uint16_t rdma_get_dst_port(rdma_cm_id* id) { return port_of(&id->route.addr.dst_addr); }

ibv_context** rdma_get_devices(int* num_devices) {
  const auto& d = devices();
  auto** list = static_cast<ibv_context**>(std::calloc(d.size() + 1, sizeof(ibv_context*)));
  if (list == nullptr) return verbs::fail_null<ibv_context*>(ENOMEM);
  for (size_t i = 0; i < d.size(); ++i) list[i] = d[i];
  if (num_devices) *num_devices = static_cast<int>(d.size());
  return list;
}

void rdma_free_devices(ibv_context** list) { std::free(list); }

}  // extern "C"
