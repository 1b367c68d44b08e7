// Shared by the port tests (port_loopback_test.cc over net_ring, port_vdev_test.cc over
// net_af_packet, net_tap and hugepages): sends numbered RoCEv2 SEND ONLY frames from one
// dp::Port to another and checks each one on arrival (parse, ICRC, order, length, payload bytes).
//
// The loop interleaves TX and RX with a bounded number of frames in flight, so that a PMD whose
// receive side is a fixed-size kernel ring (af_packet's PACKET_RX_RING, a tap's queue) is never
// overrun by the test itself. It polls without sleeping and gives up when nothing has moved for
// a deadline, so a lost frame fails the test instead of hanging it.
#pragma once

#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_pause.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <vector>

#include "dataplane/port.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"

namespace urnic::loopback {

// Addresses of side `from` (1 or 2) talking to side 3 - from: 02:00:00:00:00:0x, 192.0.2.x and
// 2001:db8::x (documentation ranges).
inline wire::NetHeaders net_for(bool v6, uint8_t from) {
  wire::NetHeaders n;
  n.src_mac = {2, 0, 0, 0, 0, from};
  n.dst_mac = {2, 0, 0, 0, 0, static_cast<uint8_t>(3 - from)};
  n.ipv6 = v6;
  n.src_ip4 = 0xC0000200u | from;
  n.dst_ip4 = 0xC0000200u | (3u - from);
  n.src_ip6 = {0x20, 0x01, 0x0d, 0xb8};
  n.src_ip6[15] = from;
  n.dst_ip6 = {0x20, 0x01, 0x0d, 0xb8};
  n.dst_ip6[15] = static_cast<uint8_t>(3 - from);
  n.udp_sport = wire::udp_sport_for(0x11, 0x12);
  return n;
}

// True when the frame is IPv4 or IPv6 (optionally VLAN-tagged) carrying UDP to port 4791.
// Decided from the raw bytes, independently of the parser under test, so that frames the kernel
// emits on a veth or tap (ARP, IPv6 neighbour discovery, MLD) are told apart from ours.
inline bool is_roce_v2(const uint8_t* d, uint32_t len) noexcept {
  auto be16 = [d](uint32_t off) { return static_cast<uint16_t>(d[off] << 8 | d[off + 1]); };
  uint32_t off = 12;  // EtherType
  if (len < off + 2) return false;
  uint16_t type = be16(off);
  off += 2;
  if (type == wire::kEtherTypeVlan) {
    if (len < off + 4) return false;
    type = be16(off + 2);
    off += 4;
  }
  uint32_t l4 = 0;
  if (type == wire::kEtherTypeIpv4) {
    if (len < off + 20 || d[off + 9] != wire::kIpProtoUdp) return false;
    l4 = off + (d[off] & 0x0fu) * 4;
  } else if (type == wire::kEtherTypeIpv6) {
    if (len < off + 40 || d[off + 6] != wire::kIpProtoUdp) return false;
    l4 = off + 40;
  } else {
    return false;
  }
  return len >= l4 + 4 && be16(l4 + 2) == wire::kRoceV2Port;
}

struct Exchange {
  bool ipv6 = false;
  uint8_t from = 1;  // sender's side for net_for(); the receiver is 3 - from
  uint32_t count = 1000;
  // Payload bytes of frame i (1 .. the path MTU).
  std::function<uint32_t(uint32_t i)> payload_len = [](uint32_t i) { return 1 + i % 300; };
  // Frames built but not yet received. 256 is below every receive ring the tests use (af_packet
  // framecnt, tap and veth queues of 1000) and above one burst, so the pipe stays busy.
  uint32_t max_in_flight = 256;
  // Give up when neither TX nor RX has moved for this long.
  uint32_t idle_timeout_ms = 5000;
};

struct ExchangeResult {
  uint32_t sent = 0;
  uint32_t received = 0;  // RoCEv2 frames that arrived (checked, whether good or bad)
  uint32_t bad = 0;       // of those, frames that failed a check
  uint32_t foreign = 0;   // other frames seen on the receive queue (skipped)
};

// Sends x.count SEND ONLY frames, frame i with PSN i and payload bytes (i + k) mod 256, from
// queue 0 of `tx` to queue 0 of `rx`, and checks that they arrive intact and in order. Records a
// non-fatal gtest failure for each of the first few bad frames and when frames are lost.
inline ExchangeResult exchange(dp::Port& tx, dp::Port& rx, const Exchange& x) {
  constexpr uint16_t kBurst = 32;
  constexpr uint32_t kReportedFailures = 5;  // enough to diagnose; a lost frame fails all after it
  const wire::NetHeaders net = net_for(x.ipv6, x.from);
  ExchangeResult r;
  std::vector<uint8_t> payload;
  rte_mbuf* pending[kBurst];
  uint16_t pending_head = 0, pending_n = 0;
  uint32_t built = 0;
  const uint64_t idle_cycles = rte_get_tsc_hz() / 1000 * x.idle_timeout_ms;
  uint64_t last_progress = rte_rdtsc();

  while (r.sent < x.count || r.received < x.count) {
    bool progress = false;
    // Build the next burst once the previous one is on the wire, within the in-flight window.
    if (pending_n == 0 && built < x.count) {
      const uint32_t window = x.max_in_flight - std::min(x.max_in_flight, built - r.received);
      const uint32_t n = std::min({uint32_t{kBurst}, x.count - built, window});
      pending_head = 0;
      for (uint32_t k = 0; k < n; ++k, ++built) {
        wire::TransportHeaders th;
        th.bth.opcode = wire::opc::kSendOnly;
        th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
        wire::Bth::DestQp::set(th.bth, 0x12u);
        wire::Bth::Psn::set(th.bth, built);
        wire::Bth::AckReq::set(th.bth, 1u);
        payload.resize(x.payload_len(built));
        for (size_t b = 0; b < payload.size(); ++b) payload[b] = static_cast<uint8_t>(built + b);
        rte_mbuf* m = rte_pktmbuf_alloc(tx.pool());
        const uint32_t len =
            wire::frame_length(net, th.bth.opcode, static_cast<uint32_t>(payload.size()));
        auto* p =
            m == nullptr
                ? nullptr
                : reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
        if (p == nullptr || wire::build_frame({p, len}, net, th, payload) != len) {
          ADD_FAILURE() << "cannot build frame " << built << " (" << len << " bytes)";
          rte_pktmbuf_free(m);
          for (uint16_t j = 0; j < pending_n; ++j) rte_pktmbuf_free(pending[j]);
          return r;
        }
        pending[pending_n++] = m;
      }
    }
    if (pending_n > 0) {
      const uint16_t n = tx.tx_burst(0, pending + pending_head, pending_n);
      pending_head = static_cast<uint16_t>(pending_head + n);
      pending_n = static_cast<uint16_t>(pending_n - n);
      r.sent += n;
      progress |= n > 0;
    }

    rte_mbuf* in[kBurst];
    const uint16_t n = rx.rx_burst(0, in, kBurst);
    for (uint16_t k = 0; k < n; ++k) {
      rte_mbuf* m = in[k];
      uint8_t* d = rte_pktmbuf_mtod(m, uint8_t*);
      const uint32_t len = rte_pktmbuf_data_len(m);
      if (!is_roce_v2(d, len)) {
        ++r.foreign;
        rte_pktmbuf_free(m);
        continue;
      }
      // Only our frames count as progress: a kernel chattering on the link must not keep a
      // stalled exchange alive.
      progress = true;
      const uint32_t seq = r.received;
      const uint32_t want_payload = x.payload_len(seq);
      std::ostringstream why;
      wire::ParsedFrame f;
      const wire::ParseError e = wire::parse(d, len, f);
      if (m->nb_segs != 1) {
        why << "arrived in " << m->nb_segs << " segments";
      } else if (e != wire::ParseError::kOk) {
        why << "parse error " << wire::to_string(e);
      } else if (!wire::icrc_check(d, f.l)) {
        why << "bad ICRC";
      } else if (f.l.ipv6 != x.ipv6 || f.opcode != wire::opc::kSendOnly) {
        why << "ipv6 " << f.l.ipv6 << " opcode " << int{f.opcode};
      } else if (wire::Bth::Psn::get(f.bth()) != seq) {
        why << "psn " << wire::Bth::Psn::get(f.bth()) << " (a frame was lost or reordered)";
      } else if (f.l.payload_len != want_payload ||
                 len != wire::frame_length(net, f.opcode, want_payload)) {
        why << "payload " << f.l.payload_len << " B in a " << len << " B frame, want payload "
            << want_payload << " B";
      } else {
        for (uint32_t b = 0; b < f.l.payload_len && why.tellp() == 0; ++b)
          if (f.payload()[b] != static_cast<uint8_t>(seq + b)) why << "payload byte " << b;
      }
      if (why.tellp() != 0 && ++r.bad <= kReportedFailures)
        ADD_FAILURE() << "frame " << seq << ": " << why.str();
      ++r.received;
      rte_pktmbuf_free(m);
    }

    const uint64_t now = rte_rdtsc();
    if (progress) {
      last_progress = now;
    } else if (now - last_progress > idle_cycles) {
      break;
    } else {
      rte_pause();
    }
  }
  for (uint16_t j = 0; j < pending_n; ++j) rte_pktmbuf_free(pending[pending_head + j]);
  EXPECT_EQ(r.sent, x.count) << "TX made no progress for " << x.idle_timeout_ms
                             << " ms (queue full, or the in-flight window held by lost frames)";
  EXPECT_EQ(r.received, x.count) << "frames lost";
  EXPECT_EQ(r.bad, 0u);
  return r;
}

}  // namespace urnic::loopback
