// The adapter's control thread (architecture.md §1, §6): slow-path frames the engine hands over
// (ARP, IPv6 neighbour discovery, QP1 management datagrams), neighbour resolution with retries
// and a cache with expiry, gratuitous ARP at start, the GID table, and the UD transmit path of
// the GSI QP (QP1) used by the connection manager.
//
// Threading: the engine pushes received frames into an SPSC ring (ControlSink::take, engine
// side, never blocks); the control thread drains it. Frames to send go through the endpoint's
// control TX ring, which the engine moves into its TX burst. Everything else here runs on the
// control thread or on application threads under `mu_`; nothing here runs on an engine.
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "control/route.h"
#include "dataplane/engine.h"
#include "dataplane/ring.h"
#include "dataplane/wire/headers.h"
#include "urnic/status.h"

namespace urnic::dp {
class Endpoint;
}  // namespace urnic::dp

namespace urnic::ctl {

// What the control plane answers for and sends from: the adapter's own addresses.
struct LocalAddresses {
  wire::MacAddr mac{};
  uint32_t ipv4 = 0;  // host order; 0: none
  std::optional<wire::Ipv6Addr> ipv6;
  // Routing (urnic/route.h): the subnets' prefix lengths (0: none) and static routes.
  uint8_t ipv4_len = 0, ipv6_len = 0;
  std::vector<Route> routes;
  // Non-zero: the kernel interface urnic shares with the kernel (AF_XDP) and whose addresses it
  // uses; routes and neighbours then come from the kernel (kernel_net.h), and urnic sends no
  // ARP / ND of its own.
  int kernel_ifindex = 0;
};

// A RoCEv2 GID: an IPv6 address; IPv4 addresses appear IPv4-mapped (::ffff:a.b.c.d),
// rocev2.md §4.5.
using Gid = wire::Ipv6Addr;
Gid gid_from_ipv4(uint32_t ip) noexcept;
bool gid_is_ipv4(const Gid& g) noexcept;
uint32_t gid_to_ipv4(const Gid& g) noexcept;
// Link-local IPv6 address from a MAC (modified EUI-64, RFC 4291 appendix A): rxe's GID 0.
Gid link_local_gid(const wire::MacAddr& mac) noexcept;

// A management datagram received on QP1, with what the CM needs to answer it.
struct MadIn {
  Gid src_gid;  // IPv4-mapped for IPv4
  Gid dst_gid;
  wire::MacAddr src_mac;
  uint32_t src_qp = 0;
  uint32_t qkey = 0;
  uint16_t pkey = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  std::span<const uint8_t> mad;  // 256 bytes
};

struct ControlCounters {
  uint64_t frames_in = 0, frames_dropped = 0;
  uint64_t arp_requests_in = 0, arp_replies_in = 0, arp_requests_out = 0, arp_replies_out = 0;
  uint64_t nd_solicits_in = 0, nd_adverts_in = 0, nd_solicits_out = 0, nd_adverts_out = 0;
  uint64_t mads_in = 0, mads_out = 0, mads_bad_qkey = 0, mads_not_qp1 = 0;
  uint64_t resolve_timeouts = 0;
  uint64_t neighbours_refused = 0;  // not learnt: the table was full of live entries
  uint64_t no_route = 0;            // resolutions refused: no route to the destination
};

class ControlPlane : public dp::ControlSink {
 public:
  // Neighbour resolution: ARP requests are retried every kArpRetry up to kArpTries times; a
  // resolved entry is trusted for kNeighbourTtl (Linux's base_reachable_time is 30 s), after
  // which the next lookup re-resolves.
  static constexpr auto kArpRetry = std::chrono::milliseconds(200);
  static constexpr int kArpTries = 5;
  static constexpr auto kNeighbourTtl = std::chrono::seconds(60);
  // Entries learnt from the wire (ARP requests for us, ND, MAD senders) stop being added at this
  // size unless an expired or unused one can go: a peer flooding from many addresses must not
  // grow the table without bound. Resolutions we start ourselves always get an entry, so the
  // flood cannot keep us from reaching a peer.
  static constexpr size_t kMaxLearnt = 4096;
  // GSI Q_Key (IBTA §13.5.1; rxe GSI_QKEY).
  static constexpr uint32_t kGsiQkey = 0x80010000;

  // `ep` is the adapter's port queue: slow-path frames leave through its control ring, built in
  // mbufs of its pool.
  ControlPlane(const LocalAddresses& local, dp::Endpoint& ep);
  ~ControlPlane() override;

  // Starts / stops the control thread. start() also sends a gratuitous ARP for the adapter's
  // IPv4 address (and an unsolicited neighbour advertisement for its IPv6 addresses).
  void start();
  void stop();
  bool running() const noexcept { return running_.load(std::memory_order_acquire); }

  // Engine side (dp::ControlSink): takes ownership of `m`, or returns false when full.
  bool take(rte_mbuf* m) noexcept override;

  // The GID table: index 0 the link-local IPv6 GID, 1 the IPv4-mapped GID (if the adapter has
  // an IPv4 address), then configured IPv6 addresses. Mirrors rxe's table order.
  std::vector<Gid> gids() const;
  bool is_local(const Gid& g) const;

  // Neighbours. lookup() never blocks; resolve() sends requests (with retries) and waits up to
  // `timeout` for the answer: kSuccess, kHostUnreachable when nobody answered or no route leads
  // to `ip`; an address of this adapter's own is its own MAC (the engines then loop frames to it
  // back: dp::Port::loopback). Not callable from the control
  // thread itself (use request() and lookup() there). Each takes the destination: a routed one
  // resolves to its gateway's MAC (route.h).
  std::optional<wire::MacAddr> lookup(const Gid& ip);
  Status resolve(const Gid& ip, wire::MacAddr* mac,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  void request(const Gid& ip);
  // Routes and neighbours come from the kernel (LocalAddresses::kernel_ifindex).
  bool kernel_routes() const noexcept { return local_.kernel_ifindex != 0; }
  // Entries in the neighbour table (static, resolved, and being resolved).
  size_t neighbours() const;
  // Installs a static entry (never expires), e.g. for peers that do not answer ARP.
  void add_static(const Gid& ip, const wire::MacAddr& mac);

  // QP1: handler for received MADs (runs on the control thread).
  void set_mad_handler(std::function<void(const MadIn&)> h);
  // Sends a 256-byte MAD from QP1 to `dst_qp` (normally 1) at `dst` (resolved neighbour
  // required; kHostUnreachable otherwise) as a UD SEND ONLY with DETH (Q_Key, source QP 1).
  Status send_mad(const Gid& dst, uint32_t dst_qp, uint32_t qkey, std::span<const uint8_t> mad,
                  uint8_t traffic_class = 0, uint8_t hop_limit = 64);
  // The transport headers send_mad() puts on a MAD: UD SEND ONLY from QP1 to `dst_qp`, default
  // P_Key, PSN `psn`, DETH with `qkey` and source QP 1, AckReq set (see the definition).
  static wire::TransportHeaders mad_headers(uint32_t dst_qp, uint32_t qkey, uint32_t psn) noexcept;

  // Work the control thread runs every iteration (CM timers, CQ notifications...). Returns
  // whether it did anything. Added before start() or from the control thread.
  // Returns an id for remove_poller().
  uint64_t add_poller(std::function<bool()> p);
  // Any thread: the control thread has work (an engine operation was queued), so it stops its
  // nap now rather than after up to 1 ms. Control path only: it may take a lock and a syscall.
  void wake();
  // Removes a poller (an object that installed one, e.g. a CM agent, goes away before the
  // adapter). An iteration already under way on the control thread may still call it once.
  void remove_poller(uint64_t id);

  ControlCounters counters() const;

  // One iteration of the control loop; public for tests that drive it without the thread.
  bool poll_once();

 private:
  void loop();
  void handle(rte_mbuf* m);
  void handle_arp(const uint8_t* d, uint32_t len);
  void handle_icmpv6(const uint8_t* d, uint32_t len);
  void handle_ud(rte_mbuf* m);
  void learn(const Gid& ip, const wire::MacAddr& mac);
  bool evict_one_locked();  // drops an expired or unused learnt entry; false if none
  void send_arp(uint16_t oper, const wire::MacAddr& dst_mac, const wire::MacAddr& tha,
                uint32_t tpa);
  void send_ns(const Gid& target);
  void send_na(const Gid& target, const Gid& dst, const wire::MacAddr& dst_mac, bool solicited);
  bool transmit(rte_mbuf* m);
  void run_timers();

  // The neighbour frames to `dst` go to (the destination or its gateway); nullopt, counted,
  // when no route leads there.
  std::optional<Gid> hop(const Gid& dst);
  // lookup() and request() for the neighbour itself (a destination on link, or a gateway).
  std::optional<wire::MacAddr> lookup_neighbour(const Gid& ip);
  // The MAC for one of the adapter's own addresses: its own, and from then on the engines loop
  // frames to it back (dp::Port::loopback).
  wire::MacAddr local_mac();
  void request_neighbour(const Gid& ip);
  Status resolve_in_kernel(const Gid& ip, wire::MacAddr* mac, std::chrono::milliseconds timeout);

  const LocalAddresses local_;
  const RouteTable routes_;
  dp::Endpoint& ep_;
  dp::SpscRing<rte_mbuf*> rx_;
  std::atomic<bool> running_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::mutex nap_mu_;  // the nap's wait and wake() (not mu_: wake() may run under other locks)
  std::condition_variable nap_cv_;
  bool woken_ = false;  // under nap_mu_
  struct Neighbour {
    wire::MacAddr mac{};
    bool resolved = false;
    bool is_static = false;
    std::chrono::steady_clock::time_point expires{};
    std::chrono::steady_clock::time_point next_try{};
    int tries = 0;
  };
  std::map<Gid, Neighbour> neigh_;
  std::function<void(const MadIn&)> mad_handler_;
  std::vector<std::pair<uint64_t, std::function<bool()>>> pollers_;
  uint64_t next_poller_id_ = 1;
  ControlCounters counters_;
  uint32_t ud_psn_ = 0;
};

}  // namespace urnic::ctl
