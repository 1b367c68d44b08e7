// Selective repeat at the protocol level (dataplane/reorder.h, requester.cc resend_selected_lc):
// the responder holds requests that arrive ahead of ePSN and runs them through its checks in
// PSN order once the hole is filled; it NAKs each missing PSN once, naming it in the MSN field;
// the requester resends only what is named, each PSN once, and the probe resends the oldest
// packet. Each test has a go-back-N twin or a counter that shows what happens without the rule
// it guards.
#include "protocol_fixture.h"

namespace urnic::test {
namespace {

class SelectiveRepeat : public RcProtocol {
 protected:
  static QpOptions sr(bool on = true) {
    QpOptions o;
    o.selective_repeat = on;
    return o;
  }
  // Packet `k` of a 4-packet (1 KiB) WRITE of `data` to the region's receive area, from PSN
  // rq(base); AckReq on the last packet only.
  void write_pkt(const std::vector<uint8_t>& data, int32_t base, uint32_t k) {
    static constexpr uint8_t kOps[4] = {opc::kWriteFirst, opc::kWriteMiddle, opc::kWriteMiddle,
                                        opc::kWriteLast};
    auto th = hdr(kOps[k], rq(base + static_cast<int32_t>(k)), k == 3);
    if (k == 0) {
      th.reth.va = wire::Be64::of(addr(kRecvOff));
      th.reth.rkey = wire::Be32::of(key_);
      th.reth.dma_length = wire::Be32::of(static_cast<uint32_t>(data.size()));
    }
    receive(th, std::span(data).subspan(k * kMtu, kMtu));
  }
  std::vector<uint8_t> region(uint32_t off, uint32_t len) const { return slice(mem_, off, len); }
};

TEST_F(SelectiveRepeat, EarlyPacketsAreHeldAndPlacedWhenTheHoleFills) {
  bring_up(sr());
  const auto data = pattern(4 * kMtu, 9);
  write_pkt(data, 0, 0);
  write_pkt(data, 0, 2);  // packet 1 lost
  write_pkt(data, 0, 3);
  EXPECT_EQ(qp_->counters().ooo_held, 2u);
  // Nothing past the hole is written before the hole is filled (exactly the in-order rules).
  EXPECT_EQ(region(kRecvOff + 2 * kMtu, 2 * kMtu), std::vector<uint8_t>(2 * kMtu, 0));
  responder_tx();
  auto out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  // One NAK for the hole, which its MSN field names.
  expect_ack(out[0], rq(1), kNakSeq, rq(1));

  write_pkt(data, 0, 1);  // the resend
  EXPECT_EQ(region(kRecvOff, 4 * kMtu), data);
  EXPECT_EQ(qp_->responder().epsn.value(), rq(4));
  EXPECT_EQ(qp_->responder().held.count, 0u);
  responder_tx();
  out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], rq(3), kAckNoCredit, 1);  // the whole WRITE, one message
}

TEST_F(SelectiveRepeat, WithoutItEarlyPacketsAreDroppedAndResentInBulk) {
  bring_up(sr(false));
  const auto data = pattern(4 * kMtu, 9);
  write_pkt(data, 0, 0);
  write_pkt(data, 0, 2);
  write_pkt(data, 0, 3);
  write_pkt(data, 0, 1);
  EXPECT_EQ(qp_->counters().ooo_held, 0u);
  EXPECT_EQ(qp_->responder().epsn.value(), rq(2));  // packets 2 and 3 must come again
  EXPECT_EQ(region(kRecvOff + 2 * kMtu, 2 * kMtu), std::vector<uint8_t>(2 * kMtu, 0));
}

// Held requests of several messages complete in posting order, each exactly once, and a copy of
// a held packet (a go-back-N pass, a duplicated frame) is not executed twice.
TEST_F(SelectiveRepeat, HeldSendsCompleteInOrderExactlyOnce) {
  bring_up(sr());
  for (uintptr_t i = 0; i < 3; ++i)
    post_recv(100 + i, kRecvOff + static_cast<uint32_t>(i) * 1024, 1024);
  const auto a = pattern(64, 1), b = pattern(64, 2), c = pattern(64, 3);
  send_pkt(opc::kSendOnly, rq(1), false, b);  // rq(0) lost
  send_pkt(opc::kSendOnly, rq(2), true, c);
  send_pkt(opc::kSendOnly, rq(1), false, b);  // a copy of a held packet
  EXPECT_TRUE(poll(rcq_).empty());
  EXPECT_EQ(qp_->counters().duplicate_requests, 1u);
  send_pkt(opc::kSendOnly, rq(0), true, a);
  const auto done = poll(rcq_);
  ASSERT_EQ(done.size(), 3u);
  for (uintptr_t i = 0; i < 3; ++i) {
    EXPECT_EQ(done[i].request_context, ctx(100 + i));
    EXPECT_EQ(done[i].status, Status::kSuccess);
    EXPECT_EQ(done[i].bytes_transferred, 64u);
  }
  EXPECT_EQ(region(kRecvOff, 64), a);
  EXPECT_EQ(region(kRecvOff + 1024, 64), b);
  EXPECT_EQ(region(kRecvOff + 2048, 64), c);
}

// A READ and an atomic that arrive behind a hole execute once, in order, when it is filled.
TEST_F(SelectiveRepeat, HeldReadAndAtomicRunInOrder) {
  bring_up(sr());
  post_recv(1, kRecvOff, 1024);
  const auto src = pattern(200, 5);
  std::copy(src.begin(), src.end(), mem_.begin() + kReadSrcOff);
  read_request(rq(1), addr(kReadSrcOff), 200);  // rq(0) lost
  fetch_add(rq(2), addr(kAtomicOff), 5);
  EXPECT_EQ(qp_->counters().ooo_held, 2u);
  responder_tx();
  auto out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  expect_ack(out[0], rq(0), kNakSeq, rq(0));
  send_pkt(opc::kSendOnly, rq(0), false, pattern(8, 1));
  responder_tx();
  out = take_tx();
  ASSERT_GE(out.size(), 2u);
  EXPECT_EQ(out[0].opcode, opc::kReadRespOnly);
  EXPECT_EQ(out[0].psn, rq(1));
  EXPECT_EQ(out[0].payload, src);
  EXPECT_EQ(out[1].opcode, opc::kAtomicAcknowledge);
  EXPECT_EQ(out[1].psn, rq(2));
  uint64_t word = 0;
  std::memcpy(&word, mem_.data() + kAtomicOff, 8);
  EXPECT_EQ(word, 5u);  // added once
}

TEST_F(SelectiveRepeat, HeldFramesGoBackToThePoolOnReset) {
  bring_up(sr());
  const auto data = pattern(4 * kMtu, 9);
  write_pkt(data, 0, 2);
  write_pkt(data, 0, 3);
  EXPECT_EQ(qp_->responder().held.count, 2u);
  EXPECT_EQ(ep_->reorder_held(), 2u);
  dp::QpAttr a;
  a.state = QpState::kReset;
  ASSERT_EQ(modify(a, dp::qp_attr::kState), Status::kSuccess);
  EXPECT_EQ(qp_->responder().held.count, 0u);
  EXPECT_EQ(ep_->reorder_held(), 0u);
  // TearDown checks that every mbuf came back.
}

// Every PSN an early packet shows missing is NAKed at once (not one hole per round trip), each
// NAK acknowledging what precedes ePSN.
TEST_F(SelectiveRepeat, EachMissingPsnIsNakedOnce) {
  bring_up(sr());
  for (uintptr_t i = 0; i < 5; ++i)
    post_recv(100 + i, kRecvOff + static_cast<uint32_t>(i) * 1024, 1024);
  send_pkt(opc::kSendOnly, rq(0), false, pattern(8, 0));
  send_pkt(opc::kSendOnly, rq(2), false, pattern(8, 2));  // rq(1) missing
  send_pkt(opc::kSendOnly, rq(5), true, pattern(8, 5));   // rq(3), rq(4) missing
  send_pkt(opc::kSendOnly, rq(5), true, pattern(8, 5));   // a copy: nothing new
  responder_tx();
  auto out = take_tx();
  ASSERT_EQ(out.size(), 3u);
  expect_ack(out[0], rq(1), kNakSeq, rq(1));
  expect_ack(out[1], rq(1), kNakSeq, rq(3));
  expect_ack(out[2], rq(1), kNakSeq, rq(4));
}

// The requester resends each NAKed packet alone, with AckReq, once however often it is named;
// the probe resends the oldest unacknowledged packet after 1/32 of the local ACK timeout.
TEST_F(SelectiveRepeat, RequesterResendsOnlyWhatIsNamed) {
  bring_up(sr());
  const auto src = pattern(4 * kMtu, 3);
  std::copy(src.begin(), src.end(), mem_.begin() + kSendSrcOff);
  post_send(dp::WrOpcode::kWrite, 1, kSendSrcOff, 4 * kMtu);
  EXPECT_EQ(requester_tx(), 4u);
  take_tx();
  ack(sq(1), kNakSeq, sq(1));
  EXPECT_EQ(requester_tx(), 1u);
  auto out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].opcode, opc::kWriteMiddle);
  EXPECT_EQ(out[0].psn, sq(1));
  EXPECT_TRUE(out[0].ack_req);
  EXPECT_EQ(out[0].payload, slice(src, kMtu, kMtu));
  EXPECT_EQ(qp_->counters().selective_retransmits, 1u);
  EXPECT_EQ(qp_->counters().retransmits, 1u);

  ack(sq(1), kNakSeq, sq(1));  // named again: resent already
  ack(sq(1), kNakSeq, sq(3));  // a second hole
  EXPECT_EQ(requester_tx(), 1u);
  out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn, sq(3));
  EXPECT_EQ(out[0].opcode, opc::kWriteLast);

  // Nothing moves: the probe (timeout 14: 67 ms, so 2.1 ms) resends the oldest packet.
  const uint64_t probe = dp::tsc_from_ns(dp::ack_timeout_ns(14) / 32);
  EXPECT_FALSE(timers(kT0 + probe / 2));
  EXPECT_TRUE(timers(kT0 + probe + 1));
  EXPECT_EQ(requester_tx(kT0 + probe + 1), 1u);
  out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].psn, sq(1));
  EXPECT_EQ(qp_->counters().selective_retransmits, 3u);
  EXPECT_EQ(qp_->counters().timeouts, 0u);

  ack(sq(3), kAckNoCredit, 1);
  const auto done = poll(scq_);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].request_context, ctx(1));
  EXPECT_EQ(done[0].status, Status::kSuccess);
}

// READ responses ahead of a lost one are held; the missing one alone is asked for again (a
// one-packet READ request with its PSN, which the responder answers from its saved request), and
// the READ completes with every byte in place.
TEST_F(SelectiveRepeat, ReadResponsesAheadAreHeldAndTheMissingOneAskedForAlone) {
  bring_up(sr());
  post_send(dp::WrOpcode::kRead, 1, kReadDstOff, 4 * kMtu);
  EXPECT_EQ(requester_tx(), 1u);
  take_tx();
  const auto data = pattern(4 * kMtu, 7);
  read_response(opc::kReadRespFirst, sq(0), slice(data, 0, kMtu), 1);
  read_response(opc::kReadRespMiddle, sq(2), slice(data, 2 * kMtu, kMtu), 1);  // sq(1) lost
  read_response(opc::kReadRespLast, sq(3), slice(data, 3 * kMtu, kMtu), 1);
  EXPECT_EQ(qp_->counters().ooo_held, 2u);
  EXPECT_EQ(requester_tx(), 1u);
  auto out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  expect_read_request(out[0], sq(1), kRemoteVa + kMtu, kMtu);  // that packet alone, not the rest
  EXPECT_TRUE(poll(scq_).empty());
  read_response(opc::kReadRespOnly, sq(1), slice(data, kMtu, kMtu), 1);
  const auto done = poll(scq_);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, Status::kSuccess);
  EXPECT_EQ(slice(mem_, kReadDstOff, 4 * kMtu), data);
  EXPECT_EQ(qp_->requester().held.count, 0u);
  EXPECT_EQ(qp_->counters().selective_retransmits, 1u);
}

TEST_F(SelectiveRepeat, WithoutItANakResendsEverythingFromTheHole) {
  bring_up(sr(false));
  post_send(dp::WrOpcode::kWrite, 1, kSendSrcOff, 4 * kMtu);
  EXPECT_EQ(requester_tx(), 4u);
  take_tx();
  ack(sq(1), kNakSeq, 0);
  EXPECT_EQ(requester_tx(), 3u);  // go-back-N: sq(1), sq(2), sq(3)
  EXPECT_EQ(qp_->counters().selective_retransmits, 0u);
}

// A READ none of whose responses came (its request was lost) while a later READ's are held:
// the responder never sent it, so it is asked for whole, once, not one packet per PSN of the
// gap (which recovered it one packet per probe: 90 % of read_bw's time at 5 % loss).
TEST_F(SelectiveRepeat, AReadWithNoResponseIsAskedForWholeWhileLaterOnesAreHeld) {
  bring_up(sr());
  post_send(dp::WrOpcode::kRead, 1, kReadDstOff, 4 * kMtu);
  post_send(dp::WrOpcode::kRead, 2, kReadDstOff + 4 * kMtu, 4 * kMtu);
  EXPECT_EQ(requester_tx(), 2u);
  take_tx();
  const auto data = pattern(8 * kMtu, 5);
  // The first READ's request lost: the second's four responses arrive, all ahead.
  read_response(opc::kReadRespFirst, sq(4), slice(data, 4 * kMtu, kMtu), 2);
  read_response(opc::kReadRespMiddle, sq(5), slice(data, 5 * kMtu, kMtu), 2);
  read_response(opc::kReadRespMiddle, sq(6), slice(data, 6 * kMtu, kMtu), 2);
  read_response(opc::kReadRespLast, sq(7), slice(data, 7 * kMtu, kMtu), 2);
  EXPECT_EQ(qp_->counters().ooo_held, 4u);
  EXPECT_EQ(requester_tx(), 1u);
  auto out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  expect_read_request(out[0], sq(0), kRemoteVa, 4 * kMtu);  // the whole READ
  EXPECT_EQ(requester_tx(), 0u);  // asked once for the four PSNs of the gap
  for (uint32_t k = 0; k < 4; ++k) {
    static constexpr uint8_t kOps[4] = {opc::kReadRespFirst, opc::kReadRespMiddle,
                                        opc::kReadRespMiddle, opc::kReadRespLast};
    read_response(kOps[k], sq(static_cast<int32_t>(k)), slice(data, k * kMtu, kMtu), 1);
  }
  const auto done = poll(scq_);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].request_context, ctx(1));
  EXPECT_EQ(done[1].request_context, ctx(2));
  EXPECT_EQ(done[0].status, Status::kSuccess);
  EXPECT_EQ(done[1].status, Status::kSuccess);
  EXPECT_EQ(slice(mem_, kReadDstOff, 8 * kMtu), data);
  EXPECT_EQ(qp_->requester().held.count, 0u);
  EXPECT_EQ(qp_->counters().selective_retransmits, 1u);
}

// Two holes in one READ's responses: each is asked for alone, by its own PSN and address.
TEST_F(SelectiveRepeat, TwoMissingReadResponsesAreEachAskedForAlone) {
  bring_up(sr());
  post_send(dp::WrOpcode::kRead, 1, kReadDstOff, 5 * kMtu);
  EXPECT_EQ(requester_tx(), 1u);
  take_tx();
  const auto data = pattern(5 * kMtu, 8);
  read_response(opc::kReadRespFirst, sq(0), slice(data, 0, kMtu), 1);
  read_response(opc::kReadRespMiddle, sq(2), slice(data, 2 * kMtu, kMtu), 1);  // sq(1) lost
  read_response(opc::kReadRespLast, sq(4), slice(data, 4 * kMtu, kMtu), 1);    // sq(3) lost
  EXPECT_EQ(requester_tx(), 2u);
  auto out = take_tx();
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const uint32_t k = i == 0 ? 1 : 3;
    expect_read_request(out[i], sq(k), kRemoteVa + k * kMtu, kMtu);
  }
  read_response(opc::kReadRespOnly, sq(1), slice(data, kMtu, kMtu), 1);
  read_response(opc::kReadRespOnly, sq(3), slice(data, 3 * kMtu, kMtu), 1);
  const auto done = poll(scq_);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, Status::kSuccess);
  EXPECT_EQ(slice(mem_, kReadDstOff, 5 * kMtu), data);
}

// A READ starts only when all its response PSNs fit the window (256 PSNs, the reorder buffer),
// unless nothing is outstanding: a response further ahead of the one awaited cannot be held.
TEST_F(SelectiveRepeat, AReadStartsOnlyWhenAllItsResponsesFitTheWindow) {
  bring_up(sr());
  for (uintptr_t c = 1; c <= 3; ++c)  // 100 packets each: the third would end 300 PSNs ahead
    post_send(dp::WrOpcode::kRead, c, kReadDstOff, 100 * kMtu);
  EXPECT_EQ(requester_tx(), 2u);
  auto out = take_tx();
  ASSERT_EQ(out.size(), 2u);
  expect_read_request(out[1], sq(100), kRemoteVa, 100 * kMtu);
  EXPECT_EQ(requester_tx(), 0u);
}

// A READ's hole was asked for again, and then a response came for a request sent after that:
// responses return in request order, so the resend (or its answer) was lost, and it goes again
// at once rather than at the probe.
TEST_F(SelectiveRepeat, AResendOvertakenByALaterRequestsResponseGoesAgain) {
  bring_up(sr());
  post_send(dp::WrOpcode::kRead, 1, kReadDstOff, 4 * kMtu);
  EXPECT_EQ(requester_tx(), 1u);
  take_tx();
  const auto data = pattern(4 * kMtu, 9);
  read_response(opc::kReadRespFirst, sq(0), slice(data, 0, kMtu), 1);
  read_response(opc::kReadRespMiddle, sq(2), slice(data, 2 * kMtu, kMtu), 1);  // sq(1) lost
  read_response(opc::kReadRespLast, sq(3), slice(data, 3 * kMtu, kMtu), 1);
  EXPECT_EQ(requester_tx(kT0 + 10), 1u);  // sq(1) asked for alone
  take_tx();
  post_send(dp::WrOpcode::kRead, 2, kReadDstOff + 4 * kMtu, kMtu);
  EXPECT_EQ(requester_tx(kT0 + 20), 1u);  // the later READ, sent after the resend
  take_tx();
  const auto later = pattern(kMtu, 10);
  read_response(opc::kReadRespOnly, sq(4), later, 2, kT0 + 30);  // held: sq(1) still missing
  EXPECT_EQ(requester_tx(kT0 + 40), 1u);
  auto out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  expect_read_request(out[0], sq(1), kRemoteVa + kMtu, kMtu);
  EXPECT_EQ(qp_->counters().sr_probes, 0u);
  read_response(opc::kReadRespOnly, sq(1), slice(data, kMtu, kMtu), 1, kT0 + 50);
  const auto done = poll(scq_);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].request_context, ctx(2));
  EXPECT_EQ(slice(mem_, kReadDstOff, 4 * kMtu), data);
  EXPECT_EQ(slice(mem_, kReadDstOff + 4 * kMtu, kMtu), later);
}

// A response released from the reorder buffer waited there for the hole: it gives no round-trip
// sample (one that did stretched srtt by the whole recovery, and the probe with it).
TEST_F(SelectiveRepeat, AHeldResponseGivesNoRoundTripSample) {
  bring_up(sr());
  const uint64_t us = dp::tsc_from_ns(1000);
  const auto data = pattern(4 * kMtu, 12);
  post_send(dp::WrOpcode::kRead, 1, kReadDstOff, kMtu);
  EXPECT_EQ(requester_tx(kT0), 1u);
  take_tx();
  read_response(opc::kReadRespOnly, sq(0), slice(data, 0, kMtu), 1, kT0 + 20 * us);
  ASSERT_EQ(poll(scq_).size(), 1u);
  const uint64_t srtt = qp_->requester().srtt;
  ASSERT_NE(srtt, 0u);
  const uint64_t t = kT0 + 100 * us;
  post_send(dp::WrOpcode::kRead, 2, kReadDstOff, 2 * kMtu);
  post_send(dp::WrOpcode::kRead, 3, kReadDstOff + 2 * kMtu, kMtu);
  EXPECT_EQ(requester_tx(t), 2u);
  take_tx();
  read_response(opc::kReadRespFirst, sq(1), slice(data, 0, kMtu), 2, t + 20 * us);
  read_response(opc::kReadRespOnly, sq(3), slice(data, 2 * kMtu, kMtu), 3, t + 21 * us);  // held
  EXPECT_EQ(requester_tx(t + 22 * us), 1u);  // sq(2) asked for again
  take_tx();
  read_response(opc::kReadRespOnly, sq(2), slice(data, kMtu, kMtu), 2, t + 1000 * us);
  EXPECT_EQ(poll(scq_).size(), 2u);
  EXPECT_EQ(qp_->requester().srtt, srtt);
}

// Responses held behind a hole and then nothing more: the probe goes two idle round trips (the
// smallest sample) after the last arrival, not two smoothed ones, which a busy pipeline's
// queueing stretched (here 20 us idle against 267 us smoothed).
TEST_F(SelectiveRepeat, AQuietPathIsProbedAfterTwoIdleRoundTrips) {
  bring_up(sr());
  const uint64_t us = dp::tsc_from_ns(1000);
  const auto data = pattern(4 * kMtu, 11);
  // Two clean READs: a 20 us and a 2 ms round trip (srtt (7 * 20 + 2000) / 8 = 267 us).
  uint64_t t = kT0;
  for (const uint64_t rtt : {20 * us, 2000 * us}) {
    post_send(dp::WrOpcode::kRead, 1, kReadDstOff, kMtu);
    EXPECT_EQ(requester_tx(t), 1u);
    take_tx();
    read_response(opc::kReadRespOnly, sq(t == kT0 ? 0 : 1), slice(data, 0, kMtu), 1, t + rtt);
    ASSERT_EQ(poll(scq_).size(), 1u);
    t += rtt + 100 * us;
  }
  post_send(dp::WrOpcode::kRead, 2, kReadDstOff, 4 * kMtu);
  EXPECT_EQ(requester_tx(t), 1u);
  take_tx();
  const uint64_t last = t + 30 * us;
  read_response(opc::kReadRespFirst, sq(2), slice(data, 0, kMtu), 2, t + 25 * us);
  read_response(opc::kReadRespMiddle, sq(4), slice(data, 2 * kMtu, kMtu), 2, last);  // sq(3) lost
  EXPECT_EQ(requester_tx(last), 1u);  // the hole, asked for once
  take_tx();
  EXPECT_FALSE(timers(last + 39 * us));
  EXPECT_TRUE(timers(last + 41 * us));
  EXPECT_EQ(requester_tx(last + 41 * us), 1u);
  auto out = take_tx();
  ASSERT_EQ(out.size(), 1u);
  expect_read_request(out[0], sq(3), kRemoteVa + kMtu, kMtu);
  EXPECT_EQ(qp_->counters().sr_probes, 1u);
}

// The local ACK timeout still ends in go-back-N and counts against retry_cnt (IBTA
// §9.7.6.1.3): probes are no retries.
TEST_F(SelectiveRepeat, TheTimeoutStillGoesBackAndCountsRetries) {
  QpOptions o = sr();
  o.retry_cnt = 0;
  bring_up(o);
  post_send(dp::WrOpcode::kWrite, 1, kSendSrcOff, 2 * kMtu);
  EXPECT_EQ(requester_tx(), 2u);
  take_tx();
  const uint64_t t = dp::tsc_from_ns(dp::ack_timeout_ns(14));
  // Probes up to the timeout. No round trip measured: the first after T/32, and each unanswered
  // one doubles the next wait (Karn's backoff), so at 1, 3, 7, 15 and 31 T/32, none between.
  for (const uint32_t i : {1u, 3u, 7u, 15u, 31u}) {
    if (i > 1) {
      EXPECT_FALSE(timers(kT0 + t * (i - 1) / 32 + 1)) << i;
    }
    EXPECT_TRUE(timers(kT0 + t * i / 32 + 1)) << i;
    requester_tx(kT0 + t * i / 32 + 1);
  }
  EXPECT_EQ(qp_->counters().sr_probes, 5u);
  take_tx();
  EXPECT_EQ(qp_->state(), QpState::kRts);
  EXPECT_TRUE(timers(kT0 + t + 1));
  EXPECT_EQ(qp_->state(), QpState::kErr);
  const auto done = poll(scq_);
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(done[0].request_context, ctx(1));
  EXPECT_EQ(done[0].provider_error_code, static_cast<uint32_t>(WcStatus::kRetryExcErr));
}

// The buffers are allocated on the control side only for QPs that use selective repeat
// (Qp::prepare_selective_repeat); a modify that sets it on a QP without them is refused rather
// than leaving the engine with none.
TEST_F(SelectiveRepeat, OnlyAPreparedQpTakesIt) {
  bring_up();  // without selective repeat
  EXPECT_FALSE(qp_->selective_repeat_ready());
  using namespace dp::qp_attr;
  dp::QpAttr a;
  a.state = QpState::kReset;
  ASSERT_EQ(modify(a, kState), Status::kSuccess);
  a.state = QpState::kInit;
  a.access = dp::access::kRemoteWrite;
  a.selective_repeat = true;
  EXPECT_EQ(modify(a, kState | kAccessFlags | kSelectiveRepeat), Status::kInsufficientResources);
  EXPECT_EQ(qp_->state(), QpState::kReset);
  ASSERT_TRUE(qp_->prepare_selective_repeat());
  EXPECT_TRUE(qp_->prepare_selective_repeat());  // idempotent
  EXPECT_EQ(modify(a, kState | kAccessFlags | kSelectiveRepeat), Status::kSuccess);
  EXPECT_TRUE(qp_->attr().selective_repeat);
}

}  // namespace
}  // namespace urnic::test
