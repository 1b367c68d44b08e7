#include "bench/conform/link.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <cstring>

#include "dataplane/wire/icrc.h"
#include "dataplane/wire/opcode.h"
#include "urnic/runtime.h"

namespace urnic::conform {

using wire::Be16;
using wire::Be32;

namespace {

uint64_t ms_ticks(double ms) { return static_cast<uint64_t>(ms * 1e-3 * rte_get_tsc_hz()); }

constexpr wire::MacAddr kBroadcast{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

}  // namespace

bool Link::open(const std::string& devargs, uint32_t ipv4, std::string* err) {
  uint16_t id = 0;
  if (open_vdev_port(devargs, &id) != Status::kSuccess) {
    *err = "cannot open " + devargs + ": " + last_error();
    return false;
  }
  dp::PortConfig pc;
  pc.port_id = id;
  pc.mbufs = 4095;
  pc.mbuf_cache = 32;
  if (const Status s = port_.open(pc); s != Status::kSuccess) {
    *err = "cannot start port " + devargs + ": " + std::string(to_string(s));
    return false;
  }
  (void)port_mtu(id, &eth_mtu_);
  mac_ = port_.mac();
  ip_ = ipv4;
  return true;
}

uint32_t Link::link_mbps() const {
  rte_eth_link l{};
  if (rte_eth_link_get_nowait(port_.id(), &l) != 0 || l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN)
    return 0;
  return l.link_speed;
}

bool Link::tx(rte_mbuf* m) {
  if (holding_) {
    held_.push_back(m);
    return true;
  }
  if (port_.tx_burst(0, &m, 1) == 1) {
    ++frames_out;
    return true;
  }
  rte_pktmbuf_free(m);
  return false;
}

void Link::flush() {
  holding_ = false;
  for (size_t i = 0; i < held_.size();) {
    const uint16_t n = static_cast<uint16_t>(std::min<size_t>(held_.size() - i, 32));
    uint16_t sent = port_.tx_burst(0, held_.data() + i, n);
    frames_out += sent;
    // A full ring: what it refused is freed, as tx() does with a refused frame.
    for (uint16_t k = sent; k < n; ++k) rte_pktmbuf_free(held_[i + k]);
    i += n;
  }
  held_.clear();
}

void Link::set_faults(const FaultConfig& tx, const FaultConfig& rx) {
  if (tx.active()) tx_fault_ = std::make_unique<dp::FaultInjector>(tx);
  if (rx.active()) rx_fault_ = std::make_unique<dp::FaultInjector>(rx);
}

bool Link::tx_faulty(rte_mbuf* m) {
  if (!tx_fault_) return tx(m);
  // Room for a duplicate and every held-back frame released by this one (FaultInjector::apply).
  rte_mbuf* out[dp::FaultInjector::kMaxHeld + 2];
  const uint16_t n = tx_fault_->apply(&m, 1, out, dp::FaultInjector::kMaxHeld + 2, port_.pool());
  bool ok = true;
  for (uint16_t i = 0; i < n; ++i) ok &= tx(out[i]);
  return ok;  // a dropped frame was "sent": the scenario must see the peer's reaction to it
}

void Link::send_arp(uint16_t oper, const wire::MacAddr& dst, const wire::MacAddr& tha,
                    uint32_t tpa) {
  rte_mbuf* m = rte_pktmbuf_alloc(port_.pool());
  if (m == nullptr) return;
  auto* d = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, wire::kArpFrameLen));
  wire::build_arp(d, oper, mac_, ip_, dst, tha, tpa);
  (void)tx(m);
}

bool Link::resolve(uint32_t peer_ipv4, double timeout_s, std::string* err) {
  peer_ip_ = peer_ipv4;
  peer_known_ = false;
  const uint64_t end = rte_rdtsc() + ms_ticks(timeout_s * 1e3);
  uint64_t next = 0;
  while (!peer_known_) {
    const uint64_t now = rte_rdtsc();
    if (now >= end) {
      *err = "no ARP answer from the peer";
      return false;
    }
    if (now >= next) {
      send_arp(wire::kArpRequest, kBroadcast, wire::MacAddr{}, peer_ip_);
      next = now + ms_ticks(200);
    }
    poll();
  }
  return true;
}

void Link::handle(rte_mbuf* m, std::vector<RxFrame>* keep) {
  auto* d = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t len = rte_pktmbuf_data_len(m);
  if (len >= sizeof(wire::EthHdr) + sizeof(wire::ArpHdr) &&
      reinterpret_cast<const wire::EthHdr*>(d)->ether_type.get() == wire::kEtherTypeArp) {
    const auto& a = *reinterpret_cast<const wire::ArpHdr*>(d + sizeof(wire::EthHdr));
    if (peer_ip_ != 0 && a.spa.get() == peer_ip_) {
      peer_mac_ = a.sha;
      peer_known_ = true;
    }
    if (a.oper.get() == wire::kArpRequest && a.tpa.get() == ip_)
      send_arp(wire::kArpReply, a.sha, a.sha, a.spa.get());
    return;
  }
  wire::ParsedFrame f;
  const bool ok = wire::parse(d, len, f) == wire::ParseError::kOk;
  const uint32_t dqp = ok ? wire::Bth::DestQp::get(f.bth()) : 0;
  if (!ok || (dqp != local_qpn_ && !(f.opcode == wire::opc::kCnp && dqp == peer_qpn_))) {
    ++foreign_in;
    return;
  }
  ++frames_in;
  if (keep == nullptr) return;
  RxFrame r;
  r.opcode = f.opcode;
  r.psn = wire::Bth::Psn::get(f.bth());
  r.ack_req = wire::Bth::AckReq::get(f.bth()) != 0;
  r.becn = wire::Bth::Becn::get(f.bth()) != 0;
  r.tsc = rte_rdtsc();
  r.dest_qp = wire::Bth::DestQp::get(f.bth());
  r.icrc_ok = wire::icrc_check(d, f.l);
  if (f.has(wire::op::kAeth)) {
    r.has_aeth = true;
    r.syndrome = static_cast<uint8_t>(wire::Aeth::Syndrome::get(f.aeth()));
    r.msn = wire::Aeth::Msn::get(f.aeth());
  }
  if (f.has(wire::op::kAtomicAckEth)) r.orig = f.atomic_ack().orig.get();
  if (f.has(wire::op::kDeth)) {
    r.qkey = f.deth().qkey.get();
    r.src_qp = wire::Deth::SrcQp::get(f.deth());
  }
  if (f.has(wire::op::kImmDt)) {
    r.has_imm = true;
    r.imm = f.imm().imm.get();
  }
  const auto p = f.payload();
  r.payload.assign(p.begin(), p.end());
  keep->push_back(std::move(r));
}

void Link::poll() {
  constexpr uint16_t kBurst = 32;
  rte_mbuf* b[kBurst];
  uint16_t n = port_.rx_burst(0, b, kBurst);
  const bool idle = n == 0;
  rte_mbuf* faulty[2 * kBurst + dp::FaultInjector::kMaxHeld];
  rte_mbuf** in = b;
  if (rx_fault_) {
    constexpr uint16_t kCap = 2 * kBurst + dp::FaultInjector::kMaxHeld;
    n = idle ? rx_fault_->flush(faulty, kCap, rte_rdtsc())
             : rx_fault_->apply(b, n, faulty, kCap, port_.pool());
    in = faulty;
  }
  for (uint16_t i = 0; i < n; ++i) {
    handle(in[i], &pending_);
    rte_pktmbuf_free(in[i]);
  }
  if (!idle) return;
  if (tx_fault_) {
    rte_mbuf* held[dp::FaultInjector::kMaxHeld];
    const uint16_t k = tx_fault_->flush(held, dp::FaultInjector::kMaxHeld, rte_rdtsc());
    for (uint16_t i = 0; i < k; ++i) (void)tx(held[i]);
  }
  (void)port_.tx_kick(0);
}

bool Link::recv(RxFrame* out, double ms) {
  const uint64_t end = rte_rdtsc() + ms_ticks(ms);
  while (pending_.empty()) {
    if (rte_rdtsc() >= end) return false;
    poll();
  }
  *out = std::move(pending_.front());
  pending_.erase(pending_.begin());
  return true;
}

std::vector<RxFrame> Link::collect(double ms) {
  const uint64_t end = rte_rdtsc() + ms_ticks(ms);
  while (rte_rdtsc() < end) poll();
  std::vector<RxFrame> out = std::move(pending_);
  pending_.clear();
  return out;
}

bool Link::send(wire::TransportHeaders th, std::span<const uint8_t> payload, const TxFaults& f) {
  wire::NetHeaders net;
  net.src_mac = mac_;
  net.dst_mac = peer_mac_;
  net.src_ip4 = ip_;
  net.dst_ip4 = peer_ip_;
  net.udp_sport = wire::udp_sport_for(local_qpn_, peer_qpn_);
  th.bth.pkey = Be16::of(f.pkey >= 0 ? static_cast<uint16_t>(f.pkey) : wire::kDefaultPkey);
  wire::Bth::DestQp::set(th.bth, f.dest_qp >= 0 ? static_cast<uint32_t>(f.dest_qp) : peer_qpn_);
  if (f.becn) wire::Bth::Becn::set(th.bth, 1u);
  if (f.ecn >= 0) net.traffic_class = static_cast<uint8_t>(f.ecn & 0x3);
  const uint32_t len =
      wire::frame_length(net, th.bth.opcode, static_cast<uint32_t>(payload.size()));
  rte_mbuf* m = rte_pktmbuf_alloc(port_.pool());
  if (m == nullptr) return false;
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
  if (p == nullptr || wire::build_frame({p, len}, net, th, payload) != len) {
    rte_pktmbuf_free(m);
    return false;
  }
  if (f.corrupt_icrc) p[len - 1] ^= 0x01;
  return tx_faulty(m);
}

}  // namespace urnic::conform
