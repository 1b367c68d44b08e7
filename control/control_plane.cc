#include "control/control_plane.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "control/kernel_net.h"
#include "dataplane/port.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"

namespace urnic::ctl {
namespace {

using Clock = std::chrono::steady_clock;
using wire::Be16;
using wire::Be32;

constexpr wire::MacAddr kBroadcast = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

// RFC 4443 §2.3: the ICMPv6 checksum covers a pseudo-header (source, destination, upper-layer
// length, next header 58) and the message.
uint16_t icmpv6_checksum(const Gid& src, const Gid& dst, const uint8_t* msg, uint32_t len) {
  uint32_t sum = 0;
  auto add16 = [&](uint16_t v) { sum += v; };
  for (size_t i = 0; i < 16; i += 2) add16(static_cast<uint16_t>(src[i] << 8 | src[i + 1]));
  for (size_t i = 0; i < 16; i += 2) add16(static_cast<uint16_t>(dst[i] << 8 | dst[i + 1]));
  add16(static_cast<uint16_t>(len >> 16));
  add16(static_cast<uint16_t>(len & 0xFFFF));
  add16(wire::kIpProtoIcmpv6);
  for (uint32_t i = 0; i + 1 < len; i += 2) add16(static_cast<uint16_t>(msg[i] << 8 | msg[i + 1]));
  if (len & 1) add16(static_cast<uint16_t>(msg[len - 1] << 8));
  return wire::checksum_fold(sum);
}

Gid solicited_node(const Gid& target) {
  Gid g{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xFF, 0, 0, 0};
  g[13] = target[13];
  g[14] = target[14];
  g[15] = target[15];
  return g;
}

// RFC 2464 §7: IPv6 multicast maps to 33:33 + the low 32 bits.
wire::MacAddr multicast_mac(const Gid& g) { return {0x33, 0x33, g[12], g[13], g[14], g[15]}; }

bool is_link_local(const Gid& g) { return g[0] == 0xFE && (g[1] & 0xC0) == 0x80; }

}  // namespace

Gid gid_from_ipv4(uint32_t ip) noexcept {
  Gid g{};
  g[10] = g[11] = 0xFF;
  g[12] = static_cast<uint8_t>(ip >> 24);
  g[13] = static_cast<uint8_t>(ip >> 16);
  g[14] = static_cast<uint8_t>(ip >> 8);
  g[15] = static_cast<uint8_t>(ip);
  return g;
}

bool gid_is_ipv4(const Gid& g) noexcept {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return false;
  return g[10] == 0xFF && g[11] == 0xFF;
}

uint32_t gid_to_ipv4(const Gid& g) noexcept {
  return static_cast<uint32_t>(g[12]) << 24 | static_cast<uint32_t>(g[13]) << 16 |
         static_cast<uint32_t>(g[14]) << 8 | g[15];
}

Gid link_local_gid(const wire::MacAddr& mac) noexcept {
  Gid g{0xFE, 0x80};
  g[8] = mac[0] ^ 0x02;  // flip the universal/local bit
  g[9] = mac[1];
  g[10] = mac[2];
  g[11] = 0xFF;
  g[12] = 0xFE;
  g[13] = mac[3];
  g[14] = mac[4];
  g[15] = mac[5];
  return g;
}

ControlPlane::ControlPlane(const LocalAddresses& local, dp::Endpoint& ep)
    : local_(local),
      routes_(local.ipv4, local.ipv4_len, local.ipv6, local.ipv6_len, local.routes),
      ep_(ep) {
  rx_.init(1024);
}

std::optional<Gid> ControlPlane::hop(const Gid& dst) {
  std::optional<Gid> h;
  if (local_.kernel_ifindex != 0) {
    // The kernel's route, as rxe takes it; one through another interface is no route of ours.
    if (auto r = kernel_route(dst); r && r->oif == local_.kernel_ifindex) h = r->next_hop;
  } else {
    h = routes_.next_hop(dst);
  }
  if (!h) {
    std::lock_guard lock(mu_);
    ++counters_.no_route;
  }
  return h;
}

ControlPlane::~ControlPlane() {
  stop();
  rte_mbuf* m = nullptr;
  while (rx_.pop(m)) rte_pktmbuf_free(m);
}

bool ControlPlane::take(rte_mbuf* m) noexcept { return rx_.push(m); }

void ControlPlane::start() {
  if (running()) return;
  stop_.store(false, std::memory_order_relaxed);
  running_.store(true, std::memory_order_release);
  thread_ = std::thread([this] { loop(); });
  // Gratuitous ARP (RFC 5227 §3 announcement): peers update stale entries for our address.
  if (local_.ipv4 != 0) send_arp(wire::kArpRequest, kBroadcast, wire::MacAddr{}, local_.ipv4);
  if (local_.ipv6) {
    const Gid all_nodes{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
    send_na(*local_.ipv6, all_nodes, multicast_mac(all_nodes), false);
  }
}

void ControlPlane::stop() {
  if (!running()) return;
  stop_.store(true, std::memory_order_relaxed);
  thread_.join();
  running_.store(false, std::memory_order_release);
}

void ControlPlane::loop() {
  // The control thread is not a polling lcore: it naps when idle, longer the longer it stays
  // idle (50 us up to 1 ms), so that on small machines it does not compete with engines and
  // application threads, while a burst of slow-path work is still served promptly. After
  // 100 ms with nothing to do it naps 4 ms: an idle daemon's control threads (one per port) then
  // wake 250 times a second, not 1 000 (issue 38: an idle urnicd under 5 % of a core). API
  // requests wake it at once (wake()); frames and timers wait at most that long after a quiet
  // spell, well inside the CM's and neighbour resolution's timeouts (seconds).
  using us = std::chrono::microseconds;
  auto nap = us(50);
  us quiet{0};
  while (!stop_.load(std::memory_order_relaxed)) {
    if (poll_once()) {
      nap = us(50);
      quiet = us(0);
    } else {
      std::unique_lock lk(nap_mu_);
      if (nap_cv_.wait_for(lk, nap, [this] { return woken_; })) {
        nap = us(50);
        quiet = us(0);
      } else {
        quiet += nap;
        nap = quiet > us(100000) ? us(4000) : std::min(nap * 2, us(1000));
      }
      woken_ = false;
    }
  }
}

void ControlPlane::wake() {
  {
    std::lock_guard lk(nap_mu_);
    woken_ = true;
  }
  nap_cv_.notify_one();
}

bool ControlPlane::poll_once() {
  bool any = false;
  rte_mbuf* m = nullptr;
  for (int i = 0; i < 64 && rx_.pop(m); ++i) {
    handle(m);
    rte_pktmbuf_free(m);
    any = true;
  }
  run_timers();
  std::vector<std::pair<uint64_t, std::function<bool()>>> pollers;
  {
    std::lock_guard lock(mu_);
    pollers = pollers_;
  }
  for (auto& p : pollers) any |= p.second();
  return any;
}

uint64_t ControlPlane::add_poller(std::function<bool()> p) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_poller_id_++;
  pollers_.emplace_back(id, std::move(p));
  return id;
}

void ControlPlane::remove_poller(uint64_t id) {
  std::lock_guard lock(mu_);
  std::erase_if(pollers_, [id](const auto& p) { return p.first == id; });
}

void ControlPlane::set_mad_handler(std::function<void(const MadIn&)> h) {
  std::lock_guard lock(mu_);
  mad_handler_ = std::move(h);
}

ControlCounters ControlPlane::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

std::vector<Gid> ControlPlane::gids() const {
  std::vector<Gid> g{link_local_gid(local_.mac)};
  if (local_.ipv4 != 0) g.push_back(gid_from_ipv4(local_.ipv4));
  if (local_.ipv6) g.push_back(*local_.ipv6);
  return g;
}

bool ControlPlane::is_local(const Gid& g) const {
  const auto all = gids();
  return std::find(all.begin(), all.end(), g) != all.end();
}

void ControlPlane::handle(rte_mbuf* m) {
  const uint8_t* d = rte_pktmbuf_mtod(m, const uint8_t*);
  const uint32_t len = rte_pktmbuf_data_len(m);
  {
    std::lock_guard lock(mu_);
    ++counters_.frames_in;
  }
  if (len < sizeof(wire::EthHdr)) return;
  const uint16_t et = static_cast<uint16_t>(d[12] << 8 | d[13]);
  if (et == wire::kEtherTypeArp) {
    handle_arp(d, len);
  } else if (et == wire::kEtherTypeIpv6 && len >= 14 + sizeof(wire::Ipv6Hdr) &&
             d[14 + 6] == wire::kIpProtoIcmpv6) {
    handle_icmpv6(d, len);
  } else if (et == wire::kEtherTypeIpv4 || et == wire::kEtherTypeIpv6) {
    handle_ud(m);
  } else {
    std::lock_guard lock(mu_);
    ++counters_.frames_dropped;
  }
}

void ControlPlane::learn(const Gid& ip, const wire::MacAddr& mac) {
  std::lock_guard lock(mu_);
  auto it = neigh_.find(ip);
  if (it == neigh_.end()) {
    if (neigh_.size() >= kMaxLearnt && !evict_one_locked()) {
      ++counters_.neighbours_refused;
      return;
    }
    it = neigh_.emplace(ip, Neighbour{}).first;
  }
  Neighbour& n = it->second;
  if (n.is_static) return;
  n.mac = mac;
  n.resolved = true;
  n.expires = Clock::now() + kNeighbourTtl;
  n.tries = 0;
  cv_.notify_all();
}

bool ControlPlane::evict_one_locked() {
  const auto now = Clock::now();
  for (auto it = neigh_.begin(); it != neigh_.end(); ++it) {
    const Neighbour& n = it->second;
    // A resolution under way (tries > 0, unresolved) has a waiter: keep it.
    if (!n.is_static && ((n.resolved && now > n.expires) || (!n.resolved && n.tries == 0))) {
      neigh_.erase(it);
      return true;
    }
  }
  return false;
}

size_t ControlPlane::neighbours() const {
  std::lock_guard lock(mu_);
  return neigh_.size();
}

void ControlPlane::handle_arp(const uint8_t* d, uint32_t len) {
  if (len < sizeof(wire::EthHdr) + sizeof(wire::ArpHdr)) return;
  const auto& a = *reinterpret_cast<const wire::ArpHdr*>(d + sizeof(wire::EthHdr));
  if (a.htype.get() != 1 || a.ptype.get() != wire::kEtherTypeIpv4 || a.hlen != 6 || a.plen != 4)
    return;
  const uint32_t spa = a.spa.get(), tpa = a.tpa.get();
  const bool for_us = local_.ipv4 != 0 && tpa == local_.ipv4;
  // RFC 826: update an existing entry for the sender, or create one when we are the target.
  bool known = false;
  {
    std::lock_guard lock(mu_);
    known = neigh_.count(gid_from_ipv4(spa)) != 0;
    if (a.oper.get() == wire::kArpRequest) ++counters_.arp_requests_in;
    if (a.oper.get() == wire::kArpReply) ++counters_.arp_replies_in;
  }
  if (spa != 0 && (known || for_us)) learn(gid_from_ipv4(spa), a.sha);
  if (for_us && a.oper.get() == wire::kArpRequest) send_arp(wire::kArpReply, a.sha, a.sha, spa);
}

void ControlPlane::handle_icmpv6(const uint8_t* d, uint32_t len) {
  const auto& ip = *reinterpret_cast<const wire::Ipv6Hdr*>(d + 14);
  const uint32_t off = 14 + sizeof(wire::Ipv6Hdr);
  const uint32_t plen = ip.payload_length.get();
  if (off + plen > len || plen < sizeof(wire::Icmpv6Hdr) + sizeof(wire::NdMsg)) return;
  // RFC 4861 §7.1: ND messages carry hop limit 255 (so they cannot come from off-link).
  if (ip.hop_limit != 255) return;
  const uint8_t* msg = d + off;
  if (icmpv6_checksum(ip.src, ip.dst, msg, plen) != 0) return;
  const auto& icmp = *reinterpret_cast<const wire::Icmpv6Hdr*>(msg);
  const auto& nd = *reinterpret_cast<const wire::NdMsg*>(msg + sizeof(wire::Icmpv6Hdr));
  // Link-layer address option, if any.
  std::optional<wire::MacAddr> lla;
  for (uint32_t o = sizeof(wire::Icmpv6Hdr) + sizeof(wire::NdMsg); o + 8 <= plen;) {
    const auto& opt = *reinterpret_cast<const wire::NdLinkLayerOpt*>(msg + o);
    if (opt.len == 0) break;
    if ((opt.type == 1 && icmp.type == wire::kIcmpv6NeighborSolicit) ||
        (opt.type == 2 && icmp.type == wire::kIcmpv6NeighborAdvert))
      lla = opt.mac;
    o += opt.len * 8u;
  }
  const Gid unspecified{};
  if (icmp.type == wire::kIcmpv6NeighborSolicit) {
    {
      std::lock_guard lock(mu_);
      ++counters_.nd_solicits_in;
    }
    if (!is_local(nd.target)) return;
    if (ip.src != unspecified && lla) learn(ip.src, *lla);
    // Duplicate address detection probes (unspecified source) are answered to all-nodes.
    if (ip.src == unspecified) {
      const Gid all_nodes{0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
      send_na(nd.target, all_nodes, multicast_mac(all_nodes), false);
    } else {
      send_na(nd.target, ip.src, lla ? *lla : reinterpret_cast<const wire::EthHdr*>(d)->src, true);
    }
  } else if (icmp.type == wire::kIcmpv6NeighborAdvert) {
    {
      std::lock_guard lock(mu_);
      ++counters_.nd_adverts_in;
    }
    if (lla) learn(nd.target, *lla);
  }
}

void ControlPlane::handle_ud(rte_mbuf* m) {
  uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
  wire::ParsedFrame f;
  if (wire::parse(d, rte_pktmbuf_data_len(m), f) != wire::ParseError::kOk ||
      !(f.mask & wire::op::kUd)) {
    std::lock_guard lock(mu_);
    ++counters_.frames_dropped;
    return;
  }
  if (wire::Bth::DestQp::get(f.bth()) != 1) {
    // Only the GSI QP exists on the UD side (issue scope: enough UD to carry MADs).
    std::lock_guard lock(mu_);
    ++counters_.mads_not_qp1;
    return;
  }
  // IBTA §10.2.5 / C10-15: a UD datagram whose Q_Key differs from the QP's is dropped.
  if (f.deth().qkey.get() != kGsiQkey) {
    std::lock_guard lock(mu_);
    ++counters_.mads_bad_qkey;
    return;
  }
  MadIn in;
  if (f.l.ipv6) {
    in.src_gid = f.ipv6().src;
    in.dst_gid = f.ipv6().dst;
    in.traffic_class = static_cast<uint8_t>(wire::Ipv6Hdr::TrafficClass::get(f.ipv6()));
    in.hop_limit = f.ipv6().hop_limit;
  } else {
    in.src_gid = gid_from_ipv4(f.ipv4().src.get());
    in.dst_gid = gid_from_ipv4(f.ipv4().dst.get());
    in.traffic_class = f.ipv4().tos;
    in.hop_limit = f.ipv4().ttl;
  }
  in.src_mac = f.eth().src;
  in.src_qp = wire::Deth::SrcQp::get(f.deth());
  in.qkey = f.deth().qkey.get();
  in.pkey = f.bth().pkey.get();
  in.mad = f.payload();
  // The sender is a neighbour: its address and MAC are known now (saves an ARP round trip).
  learn(in.src_gid, in.src_mac);
  std::function<void(const MadIn&)> h;
  {
    std::lock_guard lock(mu_);
    ++counters_.mads_in;
    h = mad_handler_;
  }
  if (h) h(in);
}

bool ControlPlane::transmit(rte_mbuf* m) {
  if (ep_.control_send(m)) return true;
  rte_pktmbuf_free(m);
  return false;
}

void ControlPlane::send_arp(uint16_t oper, const wire::MacAddr& dst_mac, const wire::MacAddr& tha,
                            uint32_t tpa) {
  rte_mbuf* m = rte_pktmbuf_alloc(ep_.pool());
  if (m == nullptr) return;
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, wire::kArpFrameLen));
  wire::build_arp(d, oper, local_.mac, local_.ipv4, dst_mac, tha, tpa);
  transmit(m);
  std::lock_guard lock(mu_);
  if (oper == wire::kArpRequest) ++counters_.arp_requests_out;
  if (oper == wire::kArpReply) ++counters_.arp_replies_out;
}

namespace {

// Builds Ethernet + IPv6 + ICMPv6 ND message with one link-layer option into `m`.
void build_nd(rte_mbuf* m, const wire::MacAddr& src_mac, const wire::MacAddr& dst_mac,
              const Gid& src, const Gid& dst, uint8_t type, uint32_t flags, const Gid& target,
              uint8_t opt_type) {
  constexpr uint32_t kMsg =
      sizeof(wire::Icmpv6Hdr) + sizeof(wire::NdMsg) + sizeof(wire::NdLinkLayerOpt);
  auto* d = reinterpret_cast<uint8_t*>(
      rte_pktmbuf_append(m, sizeof(wire::EthHdr) + sizeof(wire::Ipv6Hdr) + kMsg));
  auto& eth = *reinterpret_cast<wire::EthHdr*>(d);
  eth.dst = dst_mac;
  eth.src = src_mac;
  eth.ether_type = Be16::of(wire::kEtherTypeIpv6);
  auto& ip = *reinterpret_cast<wire::Ipv6Hdr*>(d + sizeof(wire::EthHdr));
  ip.vtc_flow = Be32::of(0x60000000u);
  ip.payload_length = Be16::of(kMsg);
  ip.next_header = wire::kIpProtoIcmpv6;
  ip.hop_limit = 255;
  ip.src = src;
  ip.dst = dst;
  uint8_t* msg = d + sizeof(wire::EthHdr) + sizeof(wire::Ipv6Hdr);
  auto& icmp = *reinterpret_cast<wire::Icmpv6Hdr*>(msg);
  icmp.type = type;
  icmp.code = 0;
  icmp.checksum = Be16::of(0);
  auto& nd = *reinterpret_cast<wire::NdMsg*>(msg + sizeof(wire::Icmpv6Hdr));
  nd.flags = Be32::of(flags);
  nd.target = target;
  auto& opt =
      *reinterpret_cast<wire::NdLinkLayerOpt*>(msg + sizeof(wire::Icmpv6Hdr) + sizeof(wire::NdMsg));
  opt.type = opt_type;
  opt.len = 1;
  opt.mac = src_mac;
  icmp.checksum = Be16::of(icmpv6_checksum(src, dst, msg, kMsg));
}

}  // namespace

void ControlPlane::send_ns(const Gid& target) {
  rte_mbuf* m = rte_pktmbuf_alloc(ep_.pool());
  if (m == nullptr) return;
  const Gid dst = solicited_node(target);
  const Gid src =
      (!is_link_local(target) && local_.ipv6) ? *local_.ipv6 : link_local_gid(local_.mac);
  build_nd(m, local_.mac, multicast_mac(dst), src, dst, wire::kIcmpv6NeighborSolicit, 0, target, 1);
  transmit(m);
  std::lock_guard lock(mu_);
  ++counters_.nd_solicits_out;
}

void ControlPlane::send_na(const Gid& target, const Gid& dst, const wire::MacAddr& dst_mac,
                           bool solicited) {
  rte_mbuf* m = rte_pktmbuf_alloc(ep_.pool());
  if (m == nullptr) return;
  build_nd(m, local_.mac, dst_mac, target, dst, wire::kIcmpv6NeighborAdvert,
           wire::kNaOverride | (solicited ? wire::kNaSolicited : 0), target, 2);
  transmit(m);
  std::lock_guard lock(mu_);
  ++counters_.nd_adverts_out;
}

std::optional<wire::MacAddr> ControlPlane::lookup(const Gid& dst) {
  if (is_local(dst)) return local_mac();
  if (local_.kernel_ifindex != 0) {
    const std::optional<Gid> h = hop(dst);
    return h ? kernel_neighbour(local_.kernel_ifindex, *h) : std::nullopt;
  }
  const std::optional<Gid> h = routes_.next_hop(dst);
  if (!h) return std::nullopt;
  return lookup_neighbour(*h);
}

std::optional<wire::MacAddr> ControlPlane::lookup_neighbour(const Gid& ip) {
  if (local_.kernel_ifindex != 0) return kernel_neighbour(local_.kernel_ifindex, ip);
  std::lock_guard lock(mu_);
  auto it = neigh_.find(ip);
  if (it == neigh_.end() || !it->second.resolved) return std::nullopt;
  if (!it->second.is_static && Clock::now() > it->second.expires) return std::nullopt;
  return it->second.mac;
}

// One of the adapter's own addresses: its own MAC, and the engines loop frames to it back
// (dp::Port::loopback), as rxe and hardware deliver a QP's traffic to a QP of the same device.
wire::MacAddr ControlPlane::local_mac() {
  if (ep_.port() != nullptr) ep_.port()->enable_loopback();
  return local_.mac;
}

void ControlPlane::add_static(const Gid& ip, const wire::MacAddr& mac) {
  std::lock_guard lock(mu_);
  Neighbour& n = neigh_[ip];
  n.mac = mac;
  n.resolved = n.is_static = true;
  cv_.notify_all();
}

void ControlPlane::request(const Gid& dst) {
  if (const std::optional<Gid> h = hop(dst)) request_neighbour(*h);
}

void ControlPlane::request_neighbour(const Gid& ip) {
  if (local_.kernel_ifindex != 0) {
    (void)kernel_probe_neighbour(local_.kernel_ifindex, ip);
    return;
  }
  bool send = false;
  {
    std::lock_guard lock(mu_);
    Neighbour& n = neigh_[ip];
    if (n.is_static || (n.resolved && Clock::now() <= n.expires)) return;
    if (n.tries == 0) {
      n.tries = 1;
      n.next_try = Clock::now() + kArpRetry;
      send = true;
    }
  }
  if (!send) return;
  if (gid_is_ipv4(ip)) {
    send_arp(wire::kArpRequest, kBroadcast, wire::MacAddr{}, gid_to_ipv4(ip));
  } else {
    send_ns(ip);
  }
}

// The kernel resolves (its ARP / ND, its timers and retries); we ask it to, then read its table
// until the answer or the deadline.
Status ControlPlane::resolve_in_kernel(const Gid& ip, wire::MacAddr* mac,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  bool probed = false;
  for (;;) {
    if (auto m = kernel_neighbour(local_.kernel_ifindex, ip)) {
      *mac = *m;
      return Status::kSuccess;
    }
    if (!probed) probed = kernel_probe_neighbour(local_.kernel_ifindex, ip);
    if (Clock::now() >= deadline) {
      std::lock_guard lock(mu_);
      ++counters_.resolve_timeouts;
      return Status::kHostUnreachable;
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(5));  // the kernel tells us nothing: poll
  }
}

void ControlPlane::run_timers() {
  std::vector<Gid> resend;
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    for (auto& [ip, n] : neigh_) {
      if (n.is_static || n.tries == 0) continue;
      if (n.resolved && now <= n.expires) continue;
      if (now < n.next_try) continue;
      if (n.tries >= kArpTries) {
        n.tries = 0;  // give up; a later request() starts over
        ++counters_.resolve_timeouts;
        cv_.notify_all();
        continue;
      }
      ++n.tries;
      n.next_try = now + kArpRetry;
      resend.push_back(ip);
    }
  }
  for (const Gid& ip : resend) {
    if (gid_is_ipv4(ip)) {
      send_arp(wire::kArpRequest, kBroadcast, wire::MacAddr{}, gid_to_ipv4(ip));
    } else {
      send_ns(ip);
    }
  }
}

Status ControlPlane::resolve(const Gid& dst, wire::MacAddr* mac,
                             std::chrono::milliseconds timeout) {
  if (is_local(dst)) {
    *mac = local_mac();
    return Status::kSuccess;
  }
  const std::optional<Gid> h = hop(dst);
  if (!h) return Status::kHostUnreachable;
  const Gid& ip = *h;
  if (local_.kernel_ifindex != 0) return resolve_in_kernel(ip, mac, timeout);
  if (auto m = lookup_neighbour(ip)) {
    *mac = *m;
    return Status::kSuccess;
  }
  {
    std::lock_guard lock(mu_);
    neigh_[ip].tries = 0;  // a fresh series of requests
  }
  request_neighbour(ip);
  std::unique_lock lock(mu_);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    auto it = neigh_.find(ip);
    if (it != neigh_.end() && it->second.resolved &&
        (it->second.is_static || Clock::now() <= it->second.expires)) {
      *mac = it->second.mac;
      return Status::kSuccess;
    }
    if (!running()) {
      // No control thread: drive the retries from here.
      lock.unlock();
      poll_once();
      lock.lock();
    }
    if (Clock::now() >= deadline) return Status::kHostUnreachable;
    cv_.wait_for(lock, std::chrono::milliseconds(5));
  }
}

wire::TransportHeaders ControlPlane::mad_headers(uint32_t dst_qp, uint32_t qkey,
                                                 uint32_t psn) noexcept {
  wire::TransportHeaders th;
  th.bth.opcode = wire::opc::kUdSendOnly;
  th.bth.pkey = Be16::of(wire::kDefaultPkey);
  wire::Bth::DestQp::set(th.bth, dst_qp);
  // AckReq asks the responder to schedule an acknowledgement for the packet (IBTA §9.2, BTH);
  // the unreliable services have no acknowledgements (§9.8), so a UD receiver ignores the bit
  // and either value is correct. Set it as Linux rxe does on QP1: its GSI QP is not IB_QPT_UD,
  // so the commit that clears AckReq for UD and UC QPs (4adcaf969d77, already in the 6.1.192
  // kernel of the rxe captures, whose ibv_ud_pingpong frames have it clear) leaves it set on
  // every MAD, and our MADs look like rxe's in a capture.
  wire::Bth::AckReq::set(th.bth, 1u);
  wire::Bth::Psn::set(th.bth, psn);
  th.deth.qkey = Be32::of(qkey);
  wire::Deth::SrcQp::set(th.deth, 1u);
  return th;
}

Status ControlPlane::send_mad(const Gid& dst, uint32_t dst_qp, uint32_t qkey,
                              std::span<const uint8_t> mad, uint8_t traffic_class,
                              uint8_t hop_limit) {
  const auto mac = lookup(dst);
  if (!mac) return Status::kHostUnreachable;
  wire::NetHeaders net;
  net.src_mac = local_.mac;
  net.dst_mac = *mac;
  net.traffic_class = traffic_class;
  net.hop_limit = hop_limit;
  if (gid_is_ipv4(dst)) {
    net.src_ip4 = local_.ipv4;
    net.dst_ip4 = gid_to_ipv4(dst);
  } else {
    net.ipv6 = true;
    net.src_ip6 = (!is_link_local(dst) && local_.ipv6) ? *local_.ipv6 : link_local_gid(local_.mac);
    net.dst_ip6 = dst;
  }
  net.udp_sport = wire::udp_sport_for(1, dst_qp);
  uint32_t psn;
  {
    std::lock_guard lock(mu_);
    psn = ud_psn_++;
  }
  const wire::TransportHeaders th = mad_headers(dst_qp, qkey, psn);
  rte_mbuf* m = rte_pktmbuf_alloc(ep_.pool());
  if (m == nullptr) return Status::kInsufficientResources;
  const uint32_t len = wire::frame_length(net, th.bth.opcode, static_cast<uint32_t>(mad.size()));
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
  if (p == nullptr || wire::build_frame({p, len}, net, th, mad) != len) {
    rte_pktmbuf_free(m);
    return Status::kInvalidParameter;
  }
  if (!transmit(m)) return Status::kInsufficientResources;
  std::lock_guard lock(mu_);
  ++counters_.mads_out;
  return Status::kSuccess;
}

}  // namespace urnic::ctl
