// The software switch (soft_switch.h).
#include "switch/soft_switch.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_ip.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "dataplane/wire/headers.h"

namespace urnic::sw {
namespace {

constexpr uint16_t kBurst = 32;
constexpr uint16_t kMaxFrame = 9216;  // the largest frame a port receives (jumbo)

// Sets CE in the frame's IP ECN field if the frame is ECN-capable (ECT(0) or ECT(1), RFC 3168
// §5); false when it is not (Not-ECT, or not IP). The ICRC does not cover the ECN bits (rocev2.md
// §2.1), so a marked RoCEv2 frame stays valid; the IPv4 header checksum is recomputed.
bool mark_ce(rte_mbuf* m) noexcept {
  auto* d = rte_pktmbuf_mtod(m, uint8_t*);
  const uint32_t len = rte_pktmbuf_data_len(m);
  uint32_t off = 12;
  if (len < off + 2) return false;
  uint16_t type = static_cast<uint16_t>(d[off] << 8 | d[off + 1]);
  off += 2;
  if (type == wire::kEtherTypeVlan) {
    if (len < off + 4) return false;
    type = static_cast<uint16_t>(d[off + 2] << 8 | d[off + 3]);
    off += 4;
  }
  if (type == wire::kEtherTypeIpv4 && len >= off + 20) {
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(d + off);
    if ((ip->type_of_service & 3) == 0) return false;
    ip->type_of_service |= 3;
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    return true;
  }
  if (type == wire::kEtherTypeIpv6 && len >= off + 40) {
    // Traffic class: the low nibble of byte 0 and the high nibble of byte 1; ECN is its low two
    // bits, i.e. bits 5..4 of byte 1.
    if ((d[off + 1] & 0x30) == 0) return false;
    d[off + 1] |= 0x30;
    return true;
  }
  return false;
}

}  // namespace

void DepthHistogram::add(uint32_t bytes) noexcept {
  ++count[std::min<uint32_t>(bytes / kBucketBytes, kBuckets - 1)];
  ++total;
}

uint32_t DepthHistogram::quantile(double q) const noexcept {
  if (total == 0) return 0;
  const auto want = static_cast<uint64_t>(q * static_cast<double>(total));
  uint64_t seen = 0;
  for (uint32_t i = 0; i < kBuckets; ++i) {
    seen += count[i];
    if (seen > want || seen == total) return (i + 1) * kBucketBytes;
  }
  return kBuckets * kBucketBytes;
}

SoftSwitch::SoftSwitch(const SwitchConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {
  macs_.reserve(kMaxMacs);
  const double hz = static_cast<double>(rte_get_tsc_hz());
  if (cfg.rate_mbps != 0)
    tsc_per_byte_q16_ = static_cast<uint64_t>(hz * 8.0 * 65536.0 / (cfg.rate_mbps * 1e6));
  delay_tsc_ = static_cast<uint64_t>(hz * cfg.delay_us / 1e6);
  static std::atomic<uint32_t> serial{0};
  const std::string name = "urnic_sw" + std::to_string(serial.fetch_add(1));
  // Jumbo-sized buffers: af_packet and tap copy each received frame into one mbuf, and RoCEv2
  // frames at path MTU 4096 do not fit the default 2 KiB.
  pool_ = rte_pktmbuf_pool_create(name.c_str(), 4095, 0, 0, RTE_PKTMBUF_HEADROOM + kMaxFrame,
                                  SOCKET_ID_ANY);
  if (cfg.impair.active()) impair_ = std::make_unique<dp::FaultInjector>(cfg.impair);
}

SoftSwitch::~SoftSwitch() {
  if (impair_) impair_->clear();
  for (Port& p : ports_) {
    for (uint32_t i = 0; i < p.count; ++i) rte_pktmbuf_free(p.ring[(p.head + i) % p.ring.size()].m);
  }
  for (Port& p : ports_) rte_eth_dev_stop(p.port_id);
  if (pool_ != nullptr) rte_mempool_free(pool_);
}

int SoftSwitch::add_port(uint16_t port_id) {
  if (pool_ == nullptr || !rte_eth_dev_is_valid_port(port_id)) return -1;
  // One queue each way, received frames in the switch's own pool (af_packet copies into it;
  // net_ring hands over the sender's mbufs, which go back to the sender's pool when freed).
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(port_id, 1, 1, &conf) != 0 ||
      rte_eth_rx_queue_setup(port_id, 0, 1024, rte_eth_dev_socket_id(port_id), nullptr, pool_) !=
          0 ||
      rte_eth_tx_queue_setup(port_id, 0, 1024, rte_eth_dev_socket_id(port_id), nullptr) != 0 ||
      rte_eth_dev_start(port_id) != 0)
    return -1;
  rte_eth_promiscuous_enable(port_id);  // a switch port takes every destination
  Port p;
  p.port_id = port_id;
  // Enough entries for a full buffer of minimum-size frames.
  p.ring.resize(cfg_.buffer_bytes / 60 + kBurst + 1);
  ports_.push_back(std::move(p));
  return static_cast<int>(ports_.size() - 1);
}

const FaultCounters* SoftSwitch::impair_counters() const noexcept {
  return impair_ ? &impair_->counters() : nullptr;
}

bool SoftSwitch::red_hit(uint32_t depth) noexcept {
  if (depth <= cfg_.kmin_bytes) return false;
  if (depth >= cfg_.kmax_bytes) return true;
  const double p = cfg_.pmax * (depth - cfg_.kmin_bytes) /
                   static_cast<double>(cfg_.kmax_bytes - cfg_.kmin_bytes);
  return static_cast<double>(rng_.next() >> 11) * 0x1.0p-53 < p;
}

int SoftSwitch::lookup(const wire::MacAddr& mac) const noexcept {
  for (const Learned& l : macs_)
    if (l.mac == mac) return static_cast<int>(l.port);
  return -1;
}

void SoftSwitch::learn(const wire::MacAddr& mac, uint32_t port) noexcept {
  if (mac[0] & 1) return;  // never learn a group address
  for (Learned& l : macs_) {
    if (l.mac == mac) {
      l.port = port;
      return;
    }
  }
  if (macs_.size() < kMaxMacs) macs_.push_back({mac, port});
}

void SoftSwitch::enqueue(Port& p, rte_mbuf* m, uint64_t now) noexcept {
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  p.hist.add(p.bytes);
  if (p.bytes + len > cfg_.buffer_bytes || p.count == p.ring.size()) {
    ++p.c.tail_drops;
    rte_pktmbuf_free(m);
    return;
  }
  if (red_hit(p.bytes)) {
    if (cfg_.ecn && mark_ce(m)) {
      ++p.c.ce_marked;
    } else {
      ++p.c.red_drops;
      rte_pktmbuf_free(m);
      return;
    }
  }
  if (p.count == 0 && p.next_free < now + delay_tsc_) p.next_free = now + delay_tsc_;
  p.ring[(p.head + p.count) % p.ring.size()] = {m, now + delay_tsc_};
  ++p.count;
  p.bytes += len;
  p.c.max_depth = std::max(p.c.max_depth, p.bytes);
}

void SoftSwitch::forward(uint32_t in, rte_mbuf* m, uint64_t now) noexcept {
  auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
  if (rte_pktmbuf_data_len(m) < 14) {
    rte_pktmbuf_free(m);
    return;
  }
  wire::MacAddr dst, src;
  std::memcpy(dst.data(), d, 6);
  std::memcpy(src.data(), d + 6, 6);
  learn(src, in);
  const int out = lookup(dst);
  if (out == static_cast<int>(in)) {
    rte_pktmbuf_free(m);  // already on its segment
    return;
  }
  if (out >= 0) {
    enqueue(ports_[static_cast<uint32_t>(out)], m, now);
    return;
  }
  // Flood: a copy (a reference) to every other port.
  for (uint32_t o = 0; o < ports_.size(); ++o) {
    if (o == in) continue;
    rte_mbuf_refcnt_update(m, 1);
    enqueue(ports_[o], m, now);
  }
  rte_pktmbuf_free(m);
}

bool SoftSwitch::drain(Port& p, uint64_t now) noexcept {
  rte_mbuf* out[kBurst];
  uint16_t n = 0;
  // The line: frame after frame, each taking its bytes' time at the rate, without a gap while
  // the queue holds frames (a late step sends what the line would have sent meanwhile); an idle
  // line starts again when a frame arrives (enqueue).
  uint64_t line = p.next_free;
  while (n < kBurst && n < p.count) {
    const Entry& e = p.ring[(p.head + n) % p.ring.size()];
    if (e.due > now || line > now) break;
    line += (rte_pktmbuf_pkt_len(e.m) * tsc_per_byte_q16_) >> 16;
    out[n++] = e.m;
  }
  if (n == 0) return false;
  const uint16_t sent = rte_eth_tx_burst(p.port_id, 0, out, n);
  for (uint16_t i = 0; i < n; ++i) {
    const uint32_t len = rte_pktmbuf_pkt_len(out[i]);
    p.bytes -= len;
    if (i < sent) {
      ++p.c.tx_frames;
      p.c.tx_bytes += len;
    } else {
      ++p.c.tx_errors;
      rte_pktmbuf_free(out[i]);
    }
  }
  p.head = static_cast<uint32_t>((p.head + n) % p.ring.size());
  p.count -= n;
  p.next_free = line;
  return true;
}

bool SoftSwitch::step(uint64_t now) noexcept {
  bool any = false;
  rte_mbuf* in[kBurst];
  rte_mbuf* passed[2 * kBurst + dp::FaultInjector::kMaxHeld];
  for (uint32_t i = 0; i < ports_.size(); ++i) {
    uint16_t n = rte_eth_rx_burst(ports_[i].port_id, 0, in, kBurst);
    for (uint16_t k = 0; k < n; ++k) {
      ++ports_[i].c.rx_frames;
      ports_[i].c.rx_bytes += rte_pktmbuf_pkt_len(in[k]);
    }
    rte_mbuf** frames = in;
    if (impair_) {
      n = n != 0 ? impair_->apply(in, n, passed, static_cast<uint16_t>(std::size(passed)), pool_)
                 : impair_->flush(passed, static_cast<uint16_t>(std::size(passed)), now);
      frames = passed;
    }
    for (uint16_t k = 0; k < n; ++k) forward(i, frames[k], now);
    any |= n != 0;
  }
  for (Port& p : ports_) any |= drain(p, now);
  return any;
}

}  // namespace urnic::sw
