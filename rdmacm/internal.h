// librdmacm on urnic (issue 16 item 4): rdma_cm ids and event channels over urnic's Connector
// and Listener (IB CM over QP1 as the kernel's rdma_cm speaks it, so urnic stays interoperable
// with it), and the QPs and CQs of urnic's libibverbs.so.1. This library links only that one: it
// reaches the public API (include/urnic/) and the verbs objects through libibverbs.so.1's
// exports, so that one process has one urnic.
#pragma once

#include <rdma/rdma_cma.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "urnic/connector.h"
#include "urnic/listener.h"
#include "verbs/internal.h"

namespace urnic::rdmacm {

struct Id;

// A queued event with room for the private data it carries (REP: up to 196 bytes).
struct Event {
  rdma_cm_event ev{};
  uint8_t pdata[256]{};
};

// rdma_event_channel: a semaphore eventfd counts the queued events (pollable, as rdma-core's
// fd is); the queue holds them.
struct Channel {
  rdma_event_channel ch{};  // first
  std::mutex mu;
  std::deque<Event*> q;
  void push(Event* e) noexcept;
};

enum class IdState {
  kIdle,
  kBound,
  kAddrResolved,
  kRouteResolved,
  kConnecting,
  kConnected,
  kListening,
  kRequest,
  kDisconnected
};

// What a listener's connect event needs: the listening id and the device it listens on.
struct ListenCtx {
  Id* parent = nullptr;
  ibv_context* dev = nullptr;
};

struct Id {
  // Every id is listed while it lives, for the exit hook (cm.cc: disconnect_at_exit).
  Id();
  ~Id();
  Id(const Id&) = delete;
  Id& operator=(const Id&) = delete;

  rdma_cm_id id{};  // first: rdma_cm_id* <-> Id*
  Channel* ch = nullptr;
  bool sync = false;  // created without a channel: each call waits for its own event
  std::mutex mu;      // state below, against the control thread's callbacks
  std::condition_variable cv;
  IdState state = IdState::kIdle;
  int events_out = 0;  // events handed out, not yet acknowledged (rdma_destroy_id waits for them)
  Handle<Connector> conn;
  std::vector<Handle<Listener>> listeners;
  std::vector<std::unique_ptr<ListenCtx>> listen_ctx;
  // rdma_create_ep on a passive id: the QP attributes each rdma_get_request's id gets.
  bool ep_qp = false;
  ibv_qp_init_attr ep_attr{};
  ibv_pd* ep_pd = nullptr;
  Id* parent = nullptr;  // the listening id of a connection request
  ibv_sa_path_rec path{};
  bool own_pd = false, own_cqs = false;
  bool disconnect_reported = false;
  bool destroying = false;   // rdma_destroy_id runs: no more events for the application
  bool accept_done = false;  // the passive side's accept completed (on_accepted)
  uint8_t tos = 0;
  // Host order: the port rdma_bind_addr picked for port 0, held until the id is destroyed.
  uint16_t ephemeral_port = 0;
};
inline Id* id_of(rdma_cm_id* id) noexcept { return reinterpret_cast<Id*>(id); }

// rdma_cm's failure convention: errno set, -1 returned.
inline int fail(int err) noexcept {
  errno = err;
  return -1;
}

// The contexts of every device, opened once (librdmacm shares one context per device too).
std::vector<ibv_context*>& devices() noexcept;
// The device that owns IP address `a` (any port), or with a wildcard the first device of its
// family; null when none does.
ibv_context* device_for(const sockaddr* a, bool wildcard_ok) noexcept;
bool is_wildcard(const sockaddr* a) noexcept;
bool is_loopback(const sockaddr* a) noexcept;  // 127.0.0.0/8 or ::1
// The first device with an address of `family` (what a wildcard bind of it finds); null if none.
ibv_context* device_of_family(sa_family_t family) noexcept;
socklen_t addr_len(const sockaddr* a) noexcept;
// An AF_INET / AF_INET6 address's port, in network order, and setting it.
uint16_t port_of(const sockaddr* a) noexcept;
void set_port(sockaddr* a, uint16_t port) noexcept;
// rdma_cm picks the port of a bind to port 0 at the bind, so that rdma_get_src_port names it
// before rdma_listen (qperf sends it to its client that way): a port of the CM's ephemeral range
// (49152-65535) that no other id of this process holds in `ps`, or 0 when every one is held.
uint16_t hold_ephemeral_port(rdma_port_space ps) noexcept;
void release_ephemeral_port(rdma_port_space ps, uint16_t port) noexcept;

// Queues event `type` with `status` on `id`'s channel (control thread or caller).
void post_event(Id* id, rdma_cm_event_type type, int status, const void* pdata = nullptr,
                size_t plen = 0, Id* listen_id = nullptr, uint8_t resp_res = 0,
                uint8_t init_depth = 0) noexcept;
// post_event in two steps, for events with more to fill in (RDMA_CM_EVENT_ESTABLISHED's UD
// parameters): make_event builds it (null when out of memory), push_event queues it.
Event* make_event(Id* id, rdma_cm_event_type type, int status, const void* pdata = nullptr,
                  size_t plen = 0, Id* listen_id = nullptr, uint8_t resp_res = 0,
                  uint8_t init_depth = 0) noexcept;
void push_event(Id* id, Event* e) noexcept;
// Synchronous ids (no channel): waits for the event the last call produced, returns 0 when it is
// `want`, else -1 with errno.
int complete(Id* id, rdma_cm_event_type want) noexcept;

// rdma_destroy_id: the id's events still queued (not handed out) are dropped with it.
void purge_events(Id* id) noexcept;

// The verbs QP's state as the application sees it, after the connection manager moved it.
void set_qp_state(ibv_qp* qp, ibv_qp_state s) noexcept;

// ---- RDMA_PS_UDP ids (rdmacm/datagram.cc) -------------------------------------------------------
// A new UD QP of an id: INIT with rdma_cm's Q_Key, RTR, RTS (librdmacm's order). 0 or an errno.
int init_ud_qp(ibv_qp* qp);
// rdma_connect / rdma_accept of a UD id: a SIDR request / reply (rdma_cm's return convention).
int connect_datagram(Id* i, const rdma_conn_param* param);
int accept_datagram(Id* i, const rdma_conn_param* param);

}  // namespace urnic::rdmacm
