// urnic loopback demo: two adapters' ports wired back to back over a net_ring pair in one
// process, exchanging RoCEv2 frames built and parsed by urnic's wire library.
//
// Adapter A sends RC SEND messages (segmented FIRST/MIDDLE/LAST by path MTU, IPv4 or IPv6) to
// adapter B; B parses every frame, verifies its ICRC, checks the PSN sequence and the payload
// bytes, and answers with coalesced ACKs (AckReq on the last packet of each message, IBTA
// §9.7.2); A parses the ACKs and checks their PSNs. Both ports are polled from one thread.
//
// Usage: urnic-loopback-demo [-n messages] [-s size] [-m mtu] [-6]
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "control/eal.h"
#include "dataplane/port.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/psn.h"

using namespace urnic;
using wire::Psn;

namespace {

struct Options {
  uint64_t messages = 200000;
  uint32_t size = 4096;
  uint32_t mtu = 1024;
  bool ipv6 = false;
};

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value for %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-n") {
      o.messages = std::strtoull(next(), nullptr, 10);
    } else if (a == "-s") {
      o.size = static_cast<uint32_t>(std::strtoul(next(), nullptr, 10));
    } else if (a == "-m") {
      o.mtu = static_cast<uint32_t>(std::strtoul(next(), nullptr, 10));
    } else if (a == "-6") {
      o.ipv6 = true;
    } else {
      std::fprintf(stderr, "usage: %s [-n messages] [-s size] [-m mtu 256..4096] [-6]\n", argv[0]);
      std::exit(a == "-h" || a == "--help" ? 0 : 2);
    }
  }
  if (o.mtu != 256 && o.mtu != 512 && o.mtu != 1024 && o.mtu != 2048 && o.mtu != 4096) {
    std::fprintf(stderr, "path MTU must be 256, 512, 1024, 2048 or 4096\n");
    std::exit(2);
  }
  return o;
}

wire::NetHeaders net_for(bool v6, uint8_t self, uint8_t peer, uint32_t lqpn, uint32_t rqpn) {
  wire::NetHeaders n;
  n.src_mac = {2, 0, 0, 0, 0, self};
  n.dst_mac = {2, 0, 0, 0, 0, peer};
  n.ipv6 = v6;
  n.src_ip4 = 0xC0000200u | self;  // 192.0.2.x (documentation range)
  n.dst_ip4 = 0xC0000200u | peer;
  n.src_ip6 = {0x20, 0x01, 0x0d, 0xb8};
  n.src_ip6[15] = self;
  n.dst_ip6 = {0x20, 0x01, 0x0d, 0xb8};
  n.dst_ip6[15] = peer;
  n.udp_sport = wire::udp_sport_for(lqpn, rqpn);
  return n;
}

inline uint8_t pattern(uint64_t msg, uint32_t off) { return static_cast<uint8_t>(msg * 31 + off); }

struct Counters {
  uint64_t tx_frames = 0, rx_frames = 0, acks = 0, messages_ok = 0, bytes_ok = 0;
  uint64_t bad_parse = 0, bad_icrc = 0, bad_psn = 0, bad_payload = 0, bad_opcode = 0;
};

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse_args(argc, argv);
  ctl::EalOptions eo;
  eo.program = "urnic-loopback-demo";
  eo.lcores = "0";
  if (Status s = ctl::eal_init(eo); s != Status::kSuccess) {
    std::fprintf(stderr, "EAL bring-up failed: %s\n", to_string(s).data());
    return 1;
  }
  uint16_t pid_a = 0, pid_b = 0;
  if (ctl::create_ring_pair("demo", 1, &pid_a, &pid_b) != Status::kSuccess) {
    std::fprintf(stderr, "cannot create the net_ring pair\n");
    return 1;
  }
  dp::Port a, b;
  dp::PortConfig ca, cb;
  ca.port_id = pid_a;
  cb.port_id = pid_b;
  if (a.open(ca) != Status::kSuccess || b.open(cb) != Status::kSuccess) {
    std::fprintf(stderr, "cannot open the ports\n");
    return 1;
  }

  constexpr uint32_t kQpA = 0x11, kQpB = 0x12;
  const wire::NetHeaders net_ab = net_for(opt.ipv6, 1, 2, kQpA, kQpB);
  const wire::NetHeaders net_ba = net_for(opt.ipv6, 2, 1, kQpB, kQpA);
  const uint32_t pkts_per_msg = opt.size == 0 ? 1 : (opt.size + opt.mtu - 1) / opt.mtu;
  std::printf(
      "urnic loopback demo: %llu RC SEND messages of %u B, path MTU %u, %s, over net_ring\n",
      static_cast<unsigned long long>(opt.messages), opt.size, opt.mtu, opt.ipv6 ? "IPv6" : "IPv4");

  Counters c;
  Psn a_next(0x123456), b_expected(0x123456), a_acked = Psn(0x123456) - 1;
  uint64_t msg_tx = 0, pkt_in_msg = 0, msg_rx = 0;
  uint32_t rx_off = 0;  // receive offset inside the current message at B
  bool rx_ok = true;
  // Window: at most 256 unacknowledged packets, as a requester's send window would allow.
  constexpr int32_t kWindow = 256;
  rte_mbuf* burst[32];
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t last_acks = 0, last_progress = rte_get_tsc_cycles();

  while (c.acks < opt.messages) {
    // --- A: requester, fill a TX burst within the window.
    uint16_t n = 0;
    while (n < 32 && msg_tx < opt.messages && Psn::diff(a_next, a_acked) <= kWindow) {
      const uint32_t off = static_cast<uint32_t>(pkt_in_msg) * opt.mtu;
      const uint32_t len = std::min(opt.mtu, opt.size - std::min(opt.size, off));
      const bool first = pkt_in_msg == 0, last = pkt_in_msg + 1 == pkts_per_msg;
      wire::TransportHeaders th;
      th.bth.opcode = first && last ? wire::opc::kSendOnly
                      : first       ? wire::opc::kSendFirst
                      : last        ? wire::opc::kSendLast
                                    : wire::opc::kSendMiddle;
      th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
      wire::Bth::DestQp::set(th.bth, kQpB);
      wire::Bth::Psn::set(th.bth, a_next.value());
      wire::Bth::AckReq::set(th.bth, last ? 1u : 0u);
      rte_mbuf* m = rte_pktmbuf_alloc(a.pool());
      if (m == nullptr) break;
      const uint32_t flen = wire::frame_length(net_ab, th.bth.opcode, len);
      auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(flen)));
      const uint32_t at = wire::build_headers(p, net_ab, th, len);
      for (uint32_t k = 0; k < len; ++k) p[at + k] = pattern(msg_tx, off + k);
      wire::finish_frame(p, net_ab, th.bth.opcode, len);
      burst[n++] = m;
      ++a_next;
      if (last) {
        ++msg_tx;
        pkt_in_msg = 0;
      } else {
        ++pkt_in_msg;
      }
    }
    uint16_t sent = a.tx_burst(0, burst, n);
    c.tx_frames += sent;
    if (sent < n) {
      // Ring full: give back what did not go and rewind so it is rebuilt next round.
      for (uint16_t k = sent; k < n; ++k) rte_pktmbuf_free(burst[k]);
      std::fprintf(stderr, "net_ring full; demo stops\n");
      return 1;
    }

    // --- B: responder. Validate and consume, ACK message ends.
    rte_mbuf* in[32];
    rte_mbuf* acks[32];
    uint16_t nacks = 0;
    const uint16_t got = b.rx_burst(0, in, 32);
    for (uint16_t k = 0; k < got; ++k) {
      ++c.rx_frames;
      uint8_t* d = rte_pktmbuf_mtod(in[k], uint8_t*);
      wire::ParsedFrame f;
      if (wire::parse(d, rte_pktmbuf_data_len(in[k]), f) != wire::ParseError::kOk) {
        ++c.bad_parse;
      } else if (!wire::icrc_check(d, f.l)) {
        ++c.bad_icrc;
      } else if (Psn(wire::Bth::Psn::get(f.bth())) != b_expected) {
        ++c.bad_psn;
      } else if (!f.has(wire::op::kSend | wire::op::kReq)) {
        ++c.bad_opcode;
      } else {
        ++b_expected;
        if (f.has(wire::op::kFirst)) {
          rx_off = 0;
          rx_ok = true;
        }
        const auto pl = f.payload();
        for (uint32_t i = 0; i < pl.size(); ++i) rx_ok &= pl[i] == pattern(msg_rx, rx_off + i);
        rx_off += static_cast<uint32_t>(pl.size());
        if (f.has(wire::op::kLast)) {
          if (rx_ok && rx_off == opt.size) {
            ++c.messages_ok;
            c.bytes_ok += rx_off;
          } else {
            ++c.bad_payload;
          }
          ++msg_rx;
        }
        if (wire::Bth::AckReq::get(f.bth())) {
          wire::TransportHeaders th;
          th.bth.opcode = wire::opc::kAcknowledge;
          th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
          wire::Bth::DestQp::set(th.bth, kQpA);
          wire::Bth::Psn::set(th.bth, wire::Bth::Psn::get(f.bth()));
          wire::Aeth::Syndrome::set(th.aeth, wire::aeth::kAckNoCredit);
          wire::Aeth::Msn::set(th.aeth, static_cast<uint32_t>(msg_rx));
          rte_mbuf* m = rte_pktmbuf_alloc(b.pool());
          if (m != nullptr) {
            const uint32_t flen = wire::frame_length(net_ba, th.bth.opcode, 0);
            auto* p =
                reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(flen)));
            wire::build_frame({p, flen}, net_ba, th, {});
            acks[nacks++] = m;
          }
        }
      }
      rte_pktmbuf_free(in[k]);
    }
    const uint16_t acked = b.tx_burst(0, acks, nacks);
    for (uint16_t k = acked; k < nacks; ++k) rte_pktmbuf_free(acks[k]);

    // --- A: completer. Each ACK covers every PSN up to its own.
    const uint16_t back = a.rx_burst(0, in, 32);
    for (uint16_t k = 0; k < back; ++k) {
      uint8_t* d = rte_pktmbuf_mtod(in[k], uint8_t*);
      wire::ParsedFrame f;
      if (wire::parse(d, rte_pktmbuf_data_len(in[k]), f) == wire::ParseError::kOk &&
          wire::icrc_check(d, f.l) && f.opcode == wire::opc::kAcknowledge) {
        const Psn acked_psn(wire::Bth::Psn::get(f.bth()));
        if (Psn::after(acked_psn, a_acked)) {
          a_acked = acked_psn;
          ++c.acks;
        }
      } else {
        ++c.bad_parse;
      }
      rte_pktmbuf_free(in[k]);
    }
    if (c.bad_parse + c.bad_icrc + c.bad_psn + c.bad_payload + c.bad_opcode != 0) break;
    // Nothing here retransmits: a frame lost on the ring would stall the exchange, so a second
    // without progress ends the run (and it reports FAIL).
    if (c.acks != last_acks) {
      last_acks = c.acks;
      last_progress = rte_get_tsc_cycles();
    } else if (rte_get_tsc_cycles() - last_progress > rte_get_tsc_hz()) {
      std::fprintf(stderr, "no progress for 1 s\n");
      break;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::printf("  frames A->B      %llu (%u per message)\n",
              static_cast<unsigned long long>(c.tx_frames), pkts_per_msg);
  std::printf("  frames received  %llu, ICRC verified on every one\n",
              static_cast<unsigned long long>(c.rx_frames));
  std::printf("  messages intact  %llu of %llu (%llu payload bytes checked byte for byte)\n",
              static_cast<unsigned long long>(c.messages_ok),
              static_cast<unsigned long long>(opt.messages),
              static_cast<unsigned long long>(c.bytes_ok));
  std::printf("  ACKs received    %llu\n", static_cast<unsigned long long>(c.acks));
  std::printf(
      "  errors           parse %llu, icrc %llu, psn %llu, payload %llu, opcode %llu\n",
      static_cast<unsigned long long>(c.bad_parse), static_cast<unsigned long long>(c.bad_icrc),
      static_cast<unsigned long long>(c.bad_psn), static_cast<unsigned long long>(c.bad_payload),
      static_cast<unsigned long long>(c.bad_opcode));
  std::printf(
      "  elapsed          %.3f s: %.2f Mframes/s, %.2f Gb/s of payload (one thread polls both)\n",
      secs, static_cast<double>(c.tx_frames + c.acks) / secs / 1e6,
      static_cast<double>(c.bytes_ok) * 8 / secs / 1e9);
  const bool ok = c.messages_ok == opt.messages && c.acks == opt.messages;
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  a.close();
  b.close();
  return ok ? 0 : 1;
}
