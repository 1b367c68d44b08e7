// Congestion control at the protocol level (dataplane/congestion.{h,cc}, dcqcn.h; rocev2.md §5):
// the ECN codepoint and DSCP of what a QP sends, the notification point (CE-marked frames are
// answered with CNPs, at most one per interval) and the reaction point (a CNP cuts the QP's rate
// and the requester paces to it). Frames are synthesized and fed through the RX path; what the
// stages emit is read back from the TX buffer (protocol_fixture.h).
#include <rte_mbuf.h>

#include "dataplane/congestion.h"
#include "dataplane/fault.h"
#include "protocol_fixture.h"

namespace urnic::test {
namespace {

class Congestion : public RcProtocol {
 protected:
  // A CE-marked (or, with `ecn`, otherwise marked) WRITE ONLY of 16 bytes at `now`.
  void write_marked(uint32_t psn, uint64_t now, uint8_t ecn = dp::kEcnCe) {
    wire::NetHeaders net = peer_net();
    net.traffic_class = ecn;
    const auto data = pattern(16, static_cast<uint8_t>(psn));
    receive(reth(opc::kWriteOnly, psn, addr(kRecvOff), key_, 16), data, now, net);
  }
  // A CNP from the peer for our QP, as a ConnectX NP builds it (BECN, PSN 0, 16 zero bytes).
  void cnp(uint64_t now) {
    auto th = hdr(opc::kCnp, 0);
    wire::Bth::Becn::set(th.bth, 1u);
    wire::NetHeaders net = peer_net();
    net.traffic_class = 48 << 2 | dp::kEcnEct0;
    receive(th, {}, now, net);
  }
  // The TOS bytes and opcodes of the frames in the TX buffer (then emptied through take_tx,
  // which checks addresses and ICRCs).
  struct Out {
    uint8_t opcode, tos;
  };
  std::vector<Out> drain() {
    std::vector<Out> out;
    for (uint32_t i = 0; i < ep_->tx_count(); ++i) {
      wire::ParsedFrame f;
      auto* d = rte_pktmbuf_mtod(ep_->tx_at(i), uint8_t*);
      EXPECT_EQ(wire::parse(d, rte_pktmbuf_data_len(ep_->tx_at(i)), f), wire::ParseError::kOk);
      out.push_back({f.opcode, f.ipv4().tos});
    }
    take_tx();
    return out;
  }
  static size_t count(const std::vector<Out>& v, uint8_t opcode) {
    size_t n = 0;
    for (const Out& o : v) n += o.opcode == opcode;
    return n;
  }
  static uint64_t us(uint64_t n) { return dp::tsc_from_ns(n * 1000); }
};

TEST_F(Congestion, CeMarkedRequestIsAnsweredWithACnpAsConnectXBuildsIt) {
  bring_up();
  write_marked(rq(0), kT0);
  ASSERT_EQ(ep_->tx_count(), 1u);  // the WRITE asked for no ACK yet (coalesced): the CNP only
  rte_mbuf* m = ep_->tx_at(0);
  auto* d = rte_pktmbuf_mtod(m, uint8_t*);
  wire::ParsedFrame f;
  ASSERT_EQ(wire::parse(d, rte_pktmbuf_data_len(m), f), wire::ParseError::kOk);
  // ../shared/vectors/cnp_connectx4lx_hw.hex: 74 bytes, TOS 0xC2 (DSCP 48, ECT(0)), DF, UDP to
  // 4791, BTH 0x81 with BECN, P_Key 0xFFFF, DestQP the peer, PSN 0, no AckReq, 16 zero bytes.
  EXPECT_EQ(rte_pktmbuf_data_len(m), 74u);
  EXPECT_EQ(f.opcode, opc::kCnp);
  EXPECT_EQ(f.ipv4().tos, 0xC2);
  EXPECT_EQ(wire::Bth::Becn::get(f.bth()), 1u);
  EXPECT_EQ(wire::Bth::Fecn::get(f.bth()), 0u);
  EXPECT_EQ(f.bth().pkey.get(), 0xFFFF);
  EXPECT_EQ(wire::Bth::DestQp::get(f.bth()), kPeerQpn);
  EXPECT_EQ(wire::Bth::Psn::get(f.bth()), 0u);
  EXPECT_EQ(wire::Bth::AckReq::get(f.bth()), 0u);
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(d[f.l.bth_off + 12 + i], 0) << i;
  EXPECT_EQ(f.udp().dst_port.get(), wire::kRoceV2Port);
  EXPECT_TRUE(wire::icrc_check(d, f.l));
  take_tx();
  EXPECT_EQ(qp_->counters().ce_marked, 1u);
  EXPECT_EQ(qp_->counters().cnps_sent, 1u);
  // The WRITE itself was executed as usual.
  EXPECT_EQ(slice(mem_, kRecvOff, 16), pattern(16, static_cast<uint8_t>(rq(0))));
}

TEST_F(Congestion, AtMostOneCnpPerIntervalPerQp) {
  QpOptions o;
  o.cc.cnp_interval_us = 50;
  bring_up(o);
  write_marked(rq(0), kT0);
  write_marked(rq(1), kT0 + us(10));  // within 50 us of the last CNP: counted, not answered
  write_marked(rq(2), kT0 + us(49));
  write_marked(rq(3), kT0 + us(51));                // a new interval
  write_marked(rq(4), kT0 + us(60), dp::kEcnEct0);  // not CE: nothing
  const auto out = drain();
  EXPECT_EQ(count(out, opc::kCnp), 2u);
  EXPECT_EQ(qp_->counters().ce_marked, 4u);
  EXPECT_EQ(qp_->counters().cnps_sent, 2u);
}

TEST_F(Congestion, OffCountsCeButSendsNoCnpAndClaimsNoEct) {
  QpOptions o;
  o.cc.enabled = false;
  bring_up(o);
  write_marked(rq(0), kT0);
  EXPECT_EQ(ep_->tx_count(), 0u);
  EXPECT_EQ(qp_->counters().ce_marked, 1u);
  EXPECT_EQ(qp_->counters().cnps_sent, 0u);
  // Not-ECT on what the QP sends: the ACK the responder owes.
  write_marked(rq(1), kT0 + us(100), dp::kEcnNotEct);
  responder_tx();
  const auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode, opc::kAcknowledge);
  EXPECT_EQ(out[0].tos & dp::kEcnMask, dp::kEcnNotEct);
}

TEST_F(Congestion, DataFramesCarryEct0AndTheConfiguredDscp) {
  QpOptions o;
  o.cc.dscp = 26;
  bring_up(o);
  post_send(dp::WrOpcode::kWrite, 1, kSendSrcOff, 64);
  requester_tx();
  auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tos, 26 << 2 | dp::kEcnEct0);
  // dscp -1: the address vector's DSCP, with ECT(0) (or Not-ECT with congestion control off)
  // whatever ECN bits it named.
  CongestionConfig cc;
  EXPECT_EQ(dp::cc_traffic_class(cc, 10 << 2 | dp::kEcnCe), 10 << 2 | dp::kEcnEct0);
  cc.enabled = false;
  EXPECT_EQ(dp::cc_traffic_class(cc, 10 << 2 | dp::kEcnEct0), 10 << 2 | dp::kEcnNotEct);
  cc.dscp = 63;
  EXPECT_EQ(dp::cc_traffic_class(cc, 10 << 2), 63 << 2);
}

TEST_F(Congestion, CnpCutsTheRateAndTheRequesterPacesToIt) {
  QpOptions o;
  o.cc.dcqcn.first_cnp_rate_mbps = 100;  // the first CNP sets 100 Mb/s: 80 ns per byte
  o.cc.dcqcn.time_reset_us = 1'000'000;  // no timer increase during the test
  o.cc.dcqcn.byte_reset = 0;             // nor a byte-counter one
  bring_up(o);
  cnp(kT0);
  EXPECT_EQ(qp_->counters().cnps_received, 1u);
  EXPECT_EQ(qp_->counters().cc_rate_decreases, 1u);
  EXPECT_EQ(qp_->counters().cc_paced_mbps, 100u);
  EXPECT_EQ(ep_->tx_count(), 0u);  // a CNP is never answered
  // 12 WRITEs of 2 KiB: 96 packets of 256 bytes, about 32 KiB on the wire.
  for (uintptr_t i = 0; i < 12; ++i) post_send(dp::WrOpcode::kWrite, i + 1, kSendSrcOff, 2048);
  const uint64_t t0 = kT0 + us(1000);
  const uint32_t first = requester_tx(t0);  // the idle QP's 8 KiB of credit, then paced
  const uint64_t bytes0 = qp_->counters().tx_bytes;
  EXPECT_GT(first, 20u);
  EXPECT_LT(first, 40u);
  EXPECT_EQ(requester_tx(t0 + us(1)), 0u);  // the next slot is a frame time (~25 us) away
  // Over the next 1000 us, 100 Mb/s carries 12 500 bytes: the pacer sends that within a frame.
  uint32_t more = 0;
  for (uint64_t t = 2; t <= 1000; ++t) more += requester_tx(t0 + us(t));
  const uint64_t bytes = qp_->counters().tx_bytes - bytes0;
  EXPECT_GT(more, 0u);
  EXPECT_GE(bytes, 12'500u - 400);
  EXPECT_LE(bytes, 12'500u + 400);
  take_tx();
}

// The fault injector's CE marks (FaultConfig::ce_ppm, urnic-perf --inject=ce=...): an ECT frame
// leaves CE-marked with its IPv4 header checksum still right and its ICRC still valid (the ECN
// bits are masked out of it), so the receiving QP counts the mark and answers with a CNP; a
// Not-ECT frame is never marked (RFC 3168 §5); an IPv6 frame gets CE in its traffic class.
TEST_F(Congestion, InjectedCeMarksReachTheNotificationPointIntact) {
  bring_up();
  FaultConfig fc;
  fc.ce_ppm = 1'000'000;
  dp::FaultInjector inj(fc);
  auto through = [&](rte_mbuf* m) {
    rte_mbuf* out[4];
    EXPECT_EQ(inj.apply(&m, 1, out, 4, g_pool), 1u);
    return out[0];
  };
  const auto data = pattern(16, 1);
  auto write = [&](uint32_t psn) {  // as receive() completes it: the P_Key and our QP
    auto th = reth(opc::kWriteOnly, psn, addr(kRecvOff), key_, 16);
    th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
    wire::Bth::DestQp::set(th.bth, kQpn);
    return th;
  };
  wire::NetHeaders net = peer_net();
  net.traffic_class = 10 << 2 | dp::kEcnEct0;
  rte_mbuf* m = through(build(net, write(rq(0)), data));
  ASSERT_NE(m, nullptr);
  const uint8_t* ip = rte_pktmbuf_mtod(m, uint8_t*) + 14;
  EXPECT_EQ(ip[1], 10 << 2 | dp::kEcnCe);  // the DSCP kept
  uint32_t sum = 0;  // RFC 791: the header's words, checksum included, sum to 0xFFFF
  for (int w = 0; w < 10; ++w) sum += static_cast<uint32_t>(ip[2 * w] << 8 | ip[2 * w + 1]);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  EXPECT_EQ(sum, 0xFFFFu) << "IPv4 header checksum broken by the mark";
  const uint64_t drops = total_rx_drops();
  engine_.deliver_lc(*ep_, m, kT0);
  EXPECT_EQ(total_rx_drops(), drops) << "the marked frame failed the RX checks (ICRC?)";
  EXPECT_EQ(qp_->counters().ce_marked, 1u);
  EXPECT_EQ(count(drain(), opc::kCnp), 1u);
  EXPECT_EQ(inj.counters().ce_marked, 1u);

  net.traffic_class = 10 << 2 | dp::kEcnNotEct;
  m = through(build(net, write(rq(1)), data));
  EXPECT_EQ(rte_pktmbuf_mtod(m, uint8_t*)[15], 10 << 2);
  rte_pktmbuf_free(m);
  EXPECT_EQ(inj.counters().ce_marked, 1u);

  net.ipv6 = true;
  net.traffic_class = 10 << 2 | dp::kEcnEct0;
  m = through(build(net, write(rq(1)), data));
  wire::ParsedFrame f;
  ASSERT_EQ(wire::parse(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_data_len(m), f),
            wire::ParseError::kOk);
  EXPECT_TRUE(f.l.ipv6);
  EXPECT_EQ(wire::Ipv6Hdr::TrafficClass::get(f.ipv6()), 10u << 2 | dp::kEcnCe);
  EXPECT_EQ(dp::frame_ecn(f), dp::kEcnCe);
  rte_pktmbuf_free(m);
  EXPECT_EQ(inj.counters().ce_marked, 2u);
}

TEST_F(Congestion, CnpWithCongestionControlOffIsCountedAndIgnored) {
  QpOptions o;
  o.cc.enabled = false;
  bring_up(o);
  cnp(kT0);
  EXPECT_EQ(qp_->counters().cnps_received, 1u);
  EXPECT_EQ(qp_->counters().cc_rate_decreases, 0u);
  EXPECT_EQ(qp_->counters().cc_paced_mbps, 0u);
  post_send(dp::WrOpcode::kWrite, 1, kSendSrcOff, 2048);
  EXPECT_EQ(requester_tx(kT0 + 1), 8u);  // all 8 packets at once: not paced
  take_tx();
}

TEST_F(Congestion, PerQpSettingsByModifyReplaceTheAdapters) {
  // Created with the defaults (on, DSCP from the AV); the modify to RTR turns congestion control
  // off for this QP and sets DSCP 12: Not-ECT frames with DSCP 12, CE counted, no CNP.
  QpOptions o;
  o.cc.enabled = false;
  o.cc.dscp = 12;
  o.cc_by_modify = true;
  bring_up(o);
  EXPECT_FALSE(qp_->attr().cc.enabled);
  write_marked(rq(0), kT0);
  EXPECT_EQ(ep_->tx_count(), 0u);
  EXPECT_EQ(qp_->counters().ce_marked, 1u);
  post_send(dp::WrOpcode::kWrite, 1, kSendSrcOff, 64);
  requester_tx();
  const auto out = drain();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tos, 12 << 2 | dp::kEcnNotEct);
  // After RTR the settings are fixed: a modify RTS -> RTS naming them is refused.
  dp::QpAttr a = qp_->attr();
  a.state = QpState::kRts;
  EXPECT_EQ(modify(a, dp::qp_attr::kState | dp::qp_attr::kCongestion), Status::kInvalidParameter);
}

}  // namespace
}  // namespace urnic::test
