// Protocol tests of the RC stages (house style rule 25; eRPC tests/protocol_tests/rpc_req_test.cc).
//
// One QP lives on an Endpoint without a port, owned by an Engine that never runs a loop: the
// test thread is the engine's only thread, so it calls the `_lc` stage functions directly.
// Frames "from the peer" are synthesized with wire::build_frame and fed through
// Engine::deliver_lc (parse, ICRC, QP lookup, address check, then responder or completer);
// every frame the stages build stays in the endpoint's TX buffer, where the test parses it back
// and checks exactly what was emitted. Timers see synthetic TSC values; nothing sleeps.
//
// Each step is commented "Receive X (past/in-order/future/duplicate) -> Expect Y" (or "Post" /
// "Timer" for local events). PSNs start just below the 24-bit wrap so that every multi-packet
// exchange also crosses it.
#include <gtest/gtest.h>

#include "protocol_fixture.h"

namespace urnic::test {
namespace {

// =============================================================================================
// Responder
// =============================================================================================

TEST_F(RcProtocol, ResponderSendOnlyIsAckedAndCompletes) {
  bring_up();
  post_recv(1, kRecvOff, 1024);
  const auto msg = pattern(100, 1);

  // Receive SEND ONLY rq(0) with AckReq (in-order) -> Expect one ACK for rq(0), MSN 1, syndrome
  // 0x1f, and a receive completion with the 100 bytes.
  send_pkt(opc::kSendOnly, rq(0), true, msg);
  EXPECT_EQ(responder_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kAckNoCredit, 1);

  auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, Status::kSuccess);
  EXPECT_EQ(rc[0].bytes_transferred, 100u);
  EXPECT_EQ(rc[0].request_context, ctx(1));
  EXPECT_EQ(rc[0].type, OperationType::kReceive);
  EXPECT_EQ(std::memcmp(mem_.data() + kRecvOff, msg.data(), msg.size()), 0);
  EXPECT_EQ(mem_[kRecvOff + 100], 0);
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(1)));
  EXPECT_EQ(qp_->counters().acks_sent, 1u);

  // Nothing more is owed.
  EXPECT_EQ(responder_tx(), 0u);
}

TEST_F(RcProtocol, ResponderCoalescesAcks) {
  bring_up();
  for (uint32_t i = 0; i < 3; ++i) post_recv(10 + i, kRecvOff + i * 1024, 1024);

  // Receive SEND ONLY rq(0), rq(1), rq(2), each with AckReq (in-order), before the responder
  // builds anything -> Expect ONE ACK, for rq(2), MSN 3 (it acknowledges all three).
  for (uint32_t i = 0; i < 3; ++i) {
    const auto msg = pattern(50 + i, static_cast<uint8_t>(i));
    send_pkt(opc::kSendOnly, rq(static_cast<int32_t>(i)), true, msg);
  }
  EXPECT_EQ(responder_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(2), kAckNoCredit, 3);

  auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rc[i].request_context, ctx(10 + i));
    EXPECT_EQ(rc[i].bytes_transferred, 50u + i);
  }
}

TEST_F(RcProtocol, ResponderDuplicateSendIsReAckedNotReExecuted) {
  bring_up();
  post_recv(1, kRecvOff, 1024);
  post_recv(2, kRecvOff + 1024, 1024);
  const auto m0 = pattern(64, 10), m1 = pattern(64, 20);

  // Receive SEND ONLY rq(0) and rq(1) with AckReq (in-order) -> Expect ACK rq(1), MSN 2.
  send_pkt(opc::kSendOnly, rq(0), true, m0);
  send_pkt(opc::kSendOnly, rq(1), true, m1);
  responder_tx();
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(1), kAckNoCredit, 2);
  ASSERT_EQ(poll(rcq_).size(), 2u);

  // Post a third receive, which a re-executed duplicate would consume.
  post_recv(3, kRecvOff + 2048, 1024);

  // Receive SEND ONLY rq(0) again, different bytes (duplicate) -> Expect a re-ACK with
  // PSN = ePSN - 1 = rq(1) and the current MSN 2; no receive completion, no memory written.
  const auto bogus = pattern(64, 99);
  send_pkt(opc::kSendOnly, rq(0), true, bogus);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(1), kAckNoCredit, 2);
  EXPECT_TRUE(poll(rcq_).empty());
  EXPECT_EQ(std::memcmp(mem_.data() + kRecvOff, m0.data(), m0.size()), 0);
  EXPECT_EQ(mem_[kRecvOff + 2048], 0);
  EXPECT_EQ(qp_->counters().duplicate_requests, 1u);
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(2)));

  // Receive SEND ONLY rq(2) (in-order) -> Expect it to land in the third receive, proving the
  // duplicate did not consume it.
  const auto m2 = pattern(32, 30);
  send_pkt(opc::kSendOnly, rq(2), true, m2);
  responder_tx();
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(2), kAckNoCredit, 3);
  auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].request_context, ctx(3));
  EXPECT_EQ(std::memcmp(mem_.data() + kRecvOff + 2048, m2.data(), m2.size()), 0);
}

TEST_F(RcProtocol, ResponderOutOfSequenceNaksOncePerGap) {
  bring_up();
  for (uint32_t i = 0; i < 4; ++i) post_recv(i, kRecvOff + i * 1024, 1024);
  const auto msg = pattern(40, 5);

  // Receive SEND ONLY rq(2) (future: rq(0), rq(1) missing) -> Expect exactly one NAK PSN
  // sequence error (0x60) carrying ePSN = rq(0), MSN 0; nothing executed.
  send_pkt(opc::kSendOnly, rq(2), true, msg);
  EXPECT_EQ(responder_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kNakSeq, 0);
  EXPECT_TRUE(poll(rcq_).empty());

  // Receive SEND ONLY rq(3) (future, same gap) -> Expect nothing: one NAK per gap.
  send_pkt(opc::kSendOnly, rq(3), true, msg);
  EXPECT_EQ(responder_tx(), 0u);
  EXPECT_TRUE(take_tx().empty());

  // Receive SEND ONLY rq(0) (in-order) -> Expect it processed and ACKed: ACK rq(0), MSN 1.
  send_pkt(opc::kSendOnly, rq(0), true, msg);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kAckNoCredit, 1);
  EXPECT_EQ(poll(rcq_).size(), 1u);

  // Receive SEND ONLY rq(2) (future again: a new gap at rq(1)) -> Expect a new NAK for rq(1).
  send_pkt(opc::kSendOnly, rq(2), true, msg);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(1), kNakSeq, 1);

  EXPECT_EQ(qp_->counters().out_of_sequence, 3u);
  EXPECT_EQ(qp_->counters().naks_sent[wire::aeth::kNakPsnSeqError], 2u);
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(1)));
  EXPECT_EQ(qp_->state(), QpState::kRts);
}

TEST_F(RcProtocol, ResponderRnrNakThenRetransmissionSucceeds) {
  bring_up();
  const auto msg = pattern(77, 3);

  // Receive SEND ONLY rq(0) (in-order) with no receive posted -> Expect an RNR NAK with
  // syndrome 0x20 | min_rnr_timer and the request's PSN; ePSN does not advance.
  send_pkt(opc::kSendOnly, rq(0), true, msg);
  EXPECT_EQ(responder_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), wire::aeth::kRnrNak | kRnrTimerCode, 0);
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(0)));
  EXPECT_EQ(qp_->counters().rnr_naks_sent, 1u);
  EXPECT_TRUE(poll(rcq_).empty());

  // Post a receive.
  post_recv(1, kRecvOff, 1024);

  // Receive SEND ONLY rq(0) (in-order retransmission) -> Expect ACK rq(0), MSN 1, completion.
  send_pkt(opc::kSendOnly, rq(0), true, msg);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kAckNoCredit, 1);
  auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, Status::kSuccess);
  EXPECT_EQ(rc[0].bytes_transferred, 77u);
  EXPECT_EQ(std::memcmp(mem_.data() + kRecvOff, msg.data(), msg.size()), 0);
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(1)));
}

TEST_F(RcProtocol, ResponderReadIsAnsweredAndDuplicatesReplayFromMemory) {
  bring_up();
  constexpr uint32_t kLen = 600;  // 256 + 256 + 88: FIRST, MIDDLE, LAST
  const auto before = pattern(kLen, 40);
  std::memcpy(mem_.data() + kReadSrcOff, before.data(), kLen);
  const uint64_t va = addr(kReadSrcOff);

  // Receive READ REQUEST rq(0), 600 bytes (in-order) -> Expect READ RESPONSE FIRST / MIDDLE /
  // LAST with PSNs rq(0..2), AETH (0x1f, MSN 1) on FIRST and LAST only, and the memory's bytes.
  read_request(rq(0), va, kLen);
  EXPECT_EQ(responder_tx(), 3u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 3u);
  const uint8_t ops[3] = {opc::kReadRespFirst, opc::kReadRespMiddle, opc::kReadRespLast};
  const uint32_t lens[3] = {256, 256, 88};
  for (uint32_t k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(tx[k].opcode, ops[k]);
    EXPECT_EQ(tx[k].psn, rq(static_cast<int32_t>(k)));
    EXPECT_FALSE(tx[k].ack_req);
    EXPECT_EQ(tx[k].has_aeth, k != 1);
    if (k != 1) {
      EXPECT_EQ(int{tx[k].syndrome}, int{kAckNoCredit});
      EXPECT_EQ(tx[k].msn, 1u);
    }
    EXPECT_EQ(tx[k].payload, slice(before, k * 256, lens[k]));
  }
  EXPECT_EQ(qp_->responder().epsn, Psn(rq(3)));

  // The memory changes after the first answer.
  const auto after = pattern(kLen, 90);
  std::memcpy(mem_.data() + kReadSrcOff, after.data(), kLen);

  // Receive READ REQUEST rq(0) again (duplicate) -> Expect the three responses again, re-read
  // from memory: they carry the NEW bytes (IBTA re-execution of a duplicate READ).
  read_request(rq(0), va, kLen);
  EXPECT_EQ(responder_tx(), 3u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 3u);
  for (uint32_t k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(tx[k].opcode, ops[k]);
    EXPECT_EQ(tx[k].psn, rq(static_cast<int32_t>(k)));
    EXPECT_EQ(tx[k].payload, slice(after, k * 256, lens[k]));
  }

  // Receive READ REQUEST rq(1), va + 256, 344 bytes (duplicate of the tail: the requester
  // re-requests what it is missing) -> Expect FIRST rq(1) / LAST rq(2) with bytes [256, 600).
  read_request(rq(1), va + 256, kLen - 256);
  EXPECT_EQ(responder_tx(), 2u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRespFirst);
  EXPECT_EQ(tx[0].psn, rq(1));
  EXPECT_EQ(tx[0].payload, slice(after, 256, 256));
  EXPECT_EQ(tx[1].opcode, opc::kReadRespLast);
  EXPECT_EQ(tx[1].psn, rq(2));
  EXPECT_EQ(tx[1].payload, slice(after, 512, 88));

  EXPECT_EQ(qp_->responder().epsn, Psn(rq(3)));
  EXPECT_EQ(qp_->responder().msn, 1u);
  EXPECT_EQ(qp_->counters().duplicate_requests, 2u);
}

TEST_F(RcProtocol, ResponderDuplicateAtomicIsNotExecutedAgain) {
  bring_up();
  auto* word = reinterpret_cast<uint64_t*>(mem_.data() + kAtomicOff);
  *word = 40;

  // Receive FETCH_ADD rq(0), add 2 (in-order) -> Expect ATOMIC ACK rq(0) with original 40,
  // MSN 1; memory becomes 42.
  fetch_add(rq(0), addr(kAtomicOff), 2);
  EXPECT_EQ(responder_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].opcode, opc::kAtomicAcknowledge);
  EXPECT_EQ(tx[0].psn, rq(0));
  EXPECT_EQ(int{tx[0].syndrome}, int{kAckNoCredit});
  EXPECT_EQ(tx[0].msn, 1u);
  EXPECT_EQ(tx[0].orig, 40u);
  EXPECT_EQ(*word, 42u);

  // Receive FETCH_ADD rq(0) again (duplicate) -> Expect ATOMIC ACK rq(0) with the SAVED
  // original 40; memory stays 42.
  fetch_add(rq(0), addr(kAtomicOff), 2);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].opcode, opc::kAtomicAcknowledge);
  EXPECT_EQ(tx[0].psn, rq(0));
  EXPECT_EQ(tx[0].orig, 40u);
  EXPECT_EQ(tx[0].msn, 1u);
  EXPECT_EQ(*word, 42u);
  EXPECT_EQ(qp_->counters().duplicate_requests, 1u);

  // Receive FETCH_ADD rq(1), add 2 (in-order) -> Expect original 42, memory 44.
  fetch_add(rq(1), addr(kAtomicOff), 2);
  EXPECT_EQ(responder_tx(), 1u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].psn, rq(1));
  EXPECT_EQ(tx[0].orig, 42u);
  EXPECT_EQ(tx[0].msn, 2u);
  EXPECT_EQ(*word, 44u);
}

TEST_F(RcProtocol, ResponderAckNeverOvertakesReadResponses) {
  bring_up();
  post_recv(1, kRecvOff, 1024);
  const auto data = pattern(600, 7);
  std::memcpy(mem_.data() + kReadSrcOff, data.data(), data.size());
  const auto msg = pattern(20, 8);

  // Receive READ REQUEST rq(0..2), then SEND ONLY rq(3) with AckReq (in-order) -> Expect the
  // three READ responses first and the ACK for rq(3) (MSN 2) after them, also when the
  // responder may build only two frames per call.
  read_request(rq(0), addr(kReadSrcOff), 600);
  send_pkt(opc::kSendOnly, rq(3), true, msg);
  EXPECT_EQ(responder_tx(2), 2u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRespFirst);
  EXPECT_EQ(tx[0].psn, rq(0));
  EXPECT_EQ(tx[1].opcode, opc::kReadRespMiddle);
  EXPECT_EQ(tx[1].psn, rq(1));
  EXPECT_EQ(responder_tx(), 2u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRespLast);
  EXPECT_EQ(tx[0].psn, rq(2));
  EXPECT_EQ(tx[0].msn, 1u);
  expect_ack(tx[1], rq(3), kAckNoCredit, 2);
  EXPECT_EQ(poll(rcq_).size(), 1u);
}

TEST_F(RcProtocol, ResponderOpcodeSequenceErrorNaksAndEntersError) {
  bring_up();
  post_recv(1, kRecvOff, 1024);
  const auto msg = pattern(kMtu, 2);

  // Receive SEND MIDDLE rq(0) with no SEND FIRST before it (in-order PSN, bad opcode sequence)
  // -> Expect NAK invalid request (0x61) for rq(0), the QP in ERR and the receive flushed.
  send_pkt(opc::kSendMiddle, rq(0), false, msg);
  responder_tx();
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kNakInvReq, 0);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(qp_->counters().naks_sent[wire::aeth::kNakInvalidRequest], 1u);
  auto rc = poll(rcq_);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, Status::kCancelled);
  EXPECT_EQ(rc[0].provider_error_code, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(mem_[kRecvOff], 0);

  // Receive SEND ONLY rq(0) (in-order, but the QP is in ERR) -> Expect nothing.
  send_pkt(opc::kSendOnly, rq(0), true, pattern(10, 1));
  EXPECT_EQ(responder_tx(), 0u);
  EXPECT_TRUE(take_tx().empty());
  EXPECT_EQ(qp_->counters().dropped_bad_state, 1u);
}

// =============================================================================================
// Requester and completer
// =============================================================================================

TEST_F(RcProtocol, RequesterSegmentsSendAndCompletesOnAck) {
  bring_up();
  const auto msg = pattern(600, 11);
  std::memcpy(mem_.data() + kSendSrcOff, msg.data(), msg.size());

  // Post a 600-byte SEND (MTU 256) -> Expect FIRST / MIDDLE / LAST with PSNs sq(0..2) (across
  // the PSN wrap), AckReq on the LAST only, and the message's bytes.
  post_send(dp::WrOpcode::kSend, 1, kSendSrcOff, 600);
  EXPECT_EQ(requester_tx(), 3u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 3u);
  const uint8_t ops[3] = {opc::kSendFirst, opc::kSendMiddle, opc::kSendLast};
  const uint32_t lens[3] = {256, 256, 88};
  for (uint32_t k = 0; k < 3; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(tx[k].opcode, ops[k]);
    EXPECT_EQ(tx[k].psn, sq(static_cast<int32_t>(k)));
    EXPECT_EQ(tx[k].ack_req, k == 2);
    EXPECT_EQ(tx[k].payload, slice(msg, k * 256, lens[k]));
  }
  EXPECT_NE(qp_->requester().ack_deadline, 0u);

  // Receive ACK sq(1) (in-order, covers FIRST and MIDDLE only) -> Expect no completion.
  ack(sq(1), kAckNoCredit, 0);
  EXPECT_TRUE(poll(scq_).empty());

  // Receive ACK sq(2) (in-order, covers LAST) -> Expect one successful send completion and the
  // ACK timer off.
  ack(sq(2), kAckNoCredit, 1);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, Status::kSuccess);
  EXPECT_EQ(sc[0].request_context, ctx(1));
  EXPECT_EQ(sc[0].type, OperationType::kSend);
  EXPECT_EQ(qp_->requester().ack_deadline, 0u);
  EXPECT_EQ(requester_tx(), 0u);
  EXPECT_EQ(qp_->counters().retransmits, 0u);
}

TEST_F(RcProtocol, WorkQueueSlotsFollowTheQpLimitsAndWrapIntact) {
  // A QP that asked for one SGE a side and no inline data has slots of the fixed fields and one
  // SGE (issue 14 item 3), and a post that would not fit its slot is refused before it is
  // copied: the SGE limit for data, and for an opcode that carries none, any SGE or inline
  // length it names.
  QpOptions o;
  o.max_send_sge = 1;
  o.max_recv_sge = 1;
  o.max_inline = 0;
  bring_up(o);
  EXPECT_EQ(qp_->send_ring().slot_bytes(), offsetof(dp::SendWqe, sge) + sizeof(Sge));
  EXPECT_EQ(qp_->recv_ring().slot_bytes(), offsetof(dp::RecvWqe, sge) + sizeof(Sge));
  EXPECT_LT(qp_->send_ring().slot_bytes(), sizeof(dp::SendWqe));

  dp::SendWqe two;
  two.opcode = dp::WrOpcode::kWrite;
  two.num_sge = 2;
  two.sge[0] = {addr(kSendSrcOff), 8, key_};
  two.sge[1] = {addr(kSendSrcOff + 8), 8, key_};
  two.length = 16;
  EXPECT_EQ(qp_->post_send(two), Status::kDataOverrun);
  dp::SendWqe inv;
  inv.opcode = dp::WrOpcode::kLocalInvalidate;
  inv.mr_key = key_;
  inv.num_sge = 3;  // names SGEs it has no use for, more than the slot holds
  EXPECT_EQ(qp_->post_send(inv), Status::kDataOverrun);
  inv.num_sge = 0;
  inv.flags = op_flag::kInline;
  inv.length = 64;  // an inline length on an opcode without data, beyond the slot
  EXPECT_EQ(qp_->post_send(inv), Status::kInvalidBufferSize);
  dp::RecvWqe r2;
  r2.num_sge = 2;
  r2.sge[0] = {addr(kRecvOff), 8, key_};
  r2.sge[1] = {addr(kRecvOff + 8), 8, key_};
  r2.length = 16;
  EXPECT_EQ(qp_->post_recv(r2), Status::kDataOverrun);
  EXPECT_EQ(qp_->send_ring().front(), nullptr);
  EXPECT_EQ(qp_->recv_ring().front(), nullptr);

  // Three rounds of 16 WRITEs through a 16-deep send ring and 16 requester slots, and two of 16
  // SENDs into 16-deep receives: every slot is reused, and each message goes out (and lands)
  // with its own SGE.
  const auto src = pattern(2048, 41);
  std::memcpy(mem_.data() + kSendSrcOff, src.data(), src.size());
  int32_t next = 0;
  for (uint32_t round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    for (uint32_t i = 0; i < 16; ++i)
      post_send(dp::WrOpcode::kWrite, 100 * round + i, kSendSrcOff + i * 97, 16 + i + round);
    EXPECT_EQ(requester_tx(), 16u);
    const auto tx = take_tx();
    ASSERT_EQ(tx.size(), 16u);
    for (uint32_t i = 0; i < 16; ++i) {
      EXPECT_EQ(tx[i].opcode, opc::kWriteOnly);
      EXPECT_EQ(tx[i].psn, sq(next + static_cast<int32_t>(i)));
      EXPECT_EQ(tx[i].payload, slice(src, i * 97, 16 + i + round)) << i;
    }
    next += 16;
    ack(sq(next - 1), kAckNoCredit, static_cast<uint32_t>(next));
    const auto sc = poll(scq_);
    ASSERT_EQ(sc.size(), 16u);
    for (uint32_t i = 0; i < 16; ++i) {
      EXPECT_EQ(sc[i].status, Status::kSuccess);
      EXPECT_EQ(sc[i].request_context, ctx(100 * round + i));
    }
  }
  for (uint32_t round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    for (uint32_t i = 0; i < 16; ++i) post_recv(200 + 16 * round + i, kRecvOff + i * 64, 64);
    std::vector<std::vector<uint8_t>> msgs;
    for (uint32_t i = 0; i < 16; ++i) {
      msgs.push_back(pattern(20 + i, static_cast<uint8_t>(round * 16 + i)));
      send_pkt(opc::kSendOnly, rq(static_cast<int32_t>(round * 16 + i)), true, msgs.back());
    }
    EXPECT_GE(responder_tx(), 1u);
    (void)take_tx();
    const auto rc = poll(rcq_);
    ASSERT_EQ(rc.size(), 16u);
    for (uint32_t i = 0; i < 16; ++i) {
      EXPECT_EQ(rc[i].status, Status::kSuccess);
      EXPECT_EQ(rc[i].request_context, ctx(200 + 16 * round + i));
      EXPECT_EQ(rc[i].bytes_transferred, 20 + i);
      EXPECT_EQ(slice(mem_, kRecvOff + i * 64, 20 + i), msgs[i]) << i;
    }
  }
  EXPECT_EQ(qp_->counters().retransmits, 0u);
}

TEST_F(RcProtocol, RequesterGoesBackNOnSequenceNak) {
  bring_up();
  const auto msg = pattern(600, 12);
  std::memcpy(mem_.data() + kSendSrcOff, msg.data(), msg.size());
  post_send(dp::WrOpcode::kSend, 1, kSendSrcOff, 600);
  ASSERT_EQ(requester_tx(), 3u);
  take_tx();

  // Receive NAK PSN sequence error for sq(1) (the MIDDLE was lost) -> Expect MIDDLE and LAST
  // retransmitted (go-back-N from the NAK's PSN), counted as retransmits; no completion yet.
  ack(sq(1), kNakSeq, 0);
  EXPECT_TRUE(poll(scq_).empty());
  EXPECT_EQ(requester_tx(), 2u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kSendMiddle);
  EXPECT_EQ(tx[0].psn, sq(1));
  EXPECT_EQ(tx[0].payload, slice(msg, 256, 256));
  EXPECT_EQ(tx[1].opcode, opc::kSendLast);
  EXPECT_EQ(tx[1].psn, sq(2));
  EXPECT_TRUE(tx[1].ack_req);
  EXPECT_EQ(tx[1].payload, slice(msg, 512, 88));
  EXPECT_EQ(qp_->counters().retransmits, 2u);
  EXPECT_EQ(qp_->counters().naks_received[wire::aeth::kNakPsnSeqError], 1u);

  // Receive ACK sq(2) (in-order) -> Expect the send to complete successfully.
  ack(sq(2), kAckNoCredit, 1);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, Status::kSuccess);
  EXPECT_EQ(requester_tx(), 0u);
}

TEST_F(RcProtocol, RequesterWaitsOutRnrNakBeforeResending) {
  bring_up();
  constexpr uint8_t kRnrCode = 14;  // 1.28 ms
  const uint64_t wait = dp::tsc_from_ns(uint64_t{dp::rnr_timer_us(kRnrCode)} * 1000);
  ASSERT_GT(wait, 1u);
  const auto msg = pattern(100, 13);
  std::memcpy(mem_.data() + kSendSrcOff, msg.data(), msg.size());
  post_send(dp::WrOpcode::kSend, 1, kSendSrcOff, 100);
  ASSERT_EQ(requester_tx(), 1u);
  take_tx();

  // Receive RNR NAK sq(0), timer code 14 (in-order) -> Expect nothing resent before the RNR
  // wait is over, however often the requester and the timers run.
  ack(sq(0), wire::aeth::kRnrNak | kRnrCode, 0, kT0);
  EXPECT_EQ(qp_->counters().rnr_naks_received, 1u);
  EXPECT_EQ(requester_tx(kT0), 0u);
  EXPECT_FALSE(timers(kT0 + wait - 1));
  EXPECT_EQ(requester_tx(kT0 + wait - 1), 0u);
  EXPECT_TRUE(take_tx().empty());
  EXPECT_TRUE(poll(scq_).empty());

  // Timer: the RNR wait ends -> Expect the SEND resent from the NAKed PSN.
  EXPECT_TRUE(timers(kT0 + wait));
  EXPECT_EQ(requester_tx(kT0 + wait), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].opcode, opc::kSendOnly);
  EXPECT_EQ(tx[0].psn, sq(0));
  EXPECT_EQ(tx[0].payload, msg);
  EXPECT_EQ(qp_->counters().retransmits, 1u);

  // Receive ACK sq(0) (in-order) -> Expect success.
  ack(sq(0), kAckNoCredit, 1, kT0 + wait);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, Status::kSuccess);
}

TEST_F(RcProtocol, RequesterRetransmitsAfterAckTimeout) {
  bring_up();
  const uint64_t timeout = dp::tsc_from_ns(dp::ack_timeout_ns(14));
  const auto msg = pattern(600, 14);
  std::memcpy(mem_.data() + kSendSrcOff, msg.data(), msg.size());
  post_send(dp::WrOpcode::kSend, 1, kSendSrcOff, 600);
  ASSERT_EQ(requester_tx(kT0), 3u);
  take_tx();
  EXPECT_EQ(qp_->requester().ack_deadline, kT0 + timeout);

  // Receive ACK sq(0) (in-order, coalesced: only FIRST acknowledged) -> Expect the timer
  // re-armed and nothing completed.
  ack(sq(0), kAckNoCredit, 0, kT0);
  EXPECT_TRUE(poll(scq_).empty());

  // Timer: just before the deadline -> Expect nothing.
  EXPECT_FALSE(timers(kT0 + timeout - 1));
  EXPECT_EQ(requester_tx(kT0 + timeout - 1), 0u);

  // Timer: the ACK timeout expires with no further response -> Expect go-back-N from the oldest
  // unacknowledged PSN sq(1): MIDDLE and LAST resent, timeouts == 1.
  EXPECT_TRUE(timers(kT0 + timeout));
  EXPECT_EQ(qp_->counters().timeouts, 1u);
  EXPECT_EQ(requester_tx(kT0 + timeout), 2u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kSendMiddle);
  EXPECT_EQ(tx[0].psn, sq(1));
  EXPECT_EQ(tx[1].opcode, opc::kSendLast);
  EXPECT_EQ(tx[1].psn, sq(2));
  EXPECT_EQ(qp_->counters().retransmits, 2u);

  // Receive ACK sq(2) (in-order) -> Expect success.
  ack(sq(2), kAckNoCredit, 1, kT0 + timeout);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, Status::kSuccess);
}

TEST_F(RcProtocol, RequesterFailsWithTimeoutWhenRetriesAreExhausted) {
  QpOptions o;
  o.retry_cnt = 0;
  bring_up(o);
  const uint64_t timeout = dp::tsc_from_ns(dp::ack_timeout_ns(14));
  post_send(dp::WrOpcode::kSend, 1, kSendSrcOff, 100);
  post_send(dp::WrOpcode::kSend, 2, kSendSrcOff, 100);
  ASSERT_EQ(requester_tx(kT0), 2u);
  take_tx();

  // Timer: the ACK timeout expires with retry_cnt 0 -> Expect the first send to fail with
  // RETRY_EXC_ERR (STATUS_IO_TIMEOUT), the second to flush, the QP in ERR, nothing resent.
  EXPECT_TRUE(timers(kT0 + timeout));
  EXPECT_EQ(qp_->counters().timeouts, 1u);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].request_context, ctx(1));
  EXPECT_EQ(sc[0].status, Status::kIoTimeout);
  EXPECT_EQ(sc[0].provider_error_code, static_cast<uint32_t>(WcStatus::kRetryExcErr));
  EXPECT_EQ(sc[1].request_context, ctx(2));
  EXPECT_EQ(sc[1].status, Status::kCancelled);
  EXPECT_EQ(requester_tx(kT0 + timeout), 0u);
  EXPECT_TRUE(take_tx().empty());
}

TEST_F(RcProtocol, RequesterImpliedNakReissuesRead) {
  bring_up();
  constexpr uint32_t kLen = 600;  // 3 response PSNs: sq(0..2); the SEND gets sq(3)
  post_send(dp::WrOpcode::kRead, 1, kReadDstOff, kLen);
  post_send(dp::WrOpcode::kSend, 2, kSendSrcOff, 100);

  // Post READ then SEND -> Expect READ REQUEST sq(0) (RETH: va, rkey, 600) and SEND ONLY sq(3).
  ASSERT_EQ(requester_tx(), 2u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRequest);
  EXPECT_EQ(tx[0].psn, sq(0));
  EXPECT_TRUE(tx[0].ack_req);
  EXPECT_EQ(tx[0].va, kRemoteVa);
  EXPECT_EQ(tx[0].rkey, kRemoteRkey);
  EXPECT_EQ(tx[0].dma_length, kLen);
  EXPECT_EQ(tx[1].opcode, opc::kSendOnly);
  EXPECT_EQ(tx[1].psn, sq(3));

  // Receive ACK sq(3) (beyond the READ, whose responses never came: implied NAK) -> Expect no
  // completion, and go-back-N from the READ: the READ REQUEST sq(0) for all 600 bytes again,
  // then the SEND.
  ack(sq(3), kAckNoCredit, 2);
  EXPECT_EQ(qp_->counters().implied_naks, 1u);
  EXPECT_TRUE(poll(scq_).empty());
  EXPECT_EQ(requester_tx(), 2u);
  tx = take_tx();
  ASSERT_EQ(tx.size(), 2u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRequest);
  EXPECT_EQ(tx[0].psn, sq(0));
  EXPECT_EQ(tx[0].va, kRemoteVa);
  EXPECT_EQ(tx[0].dma_length, kLen);
  EXPECT_EQ(tx[1].opcode, opc::kSendOnly);
  EXPECT_EQ(tx[1].psn, sq(3));

  // Receive READ RESPONSE FIRST / MIDDLE / LAST sq(0..2) (in-order), then ACK sq(3)
  // (duplicate of the earlier one, now in order) -> Expect the READ then the SEND to complete,
  // in posting order, and the READ's bytes in the sink.
  const auto data = pattern(kLen, 15);
  read_response(opc::kReadRespFirst, sq(0), slice(data, 0, 256), 1);
  read_response(opc::kReadRespMiddle, sq(1), slice(data, 256, 256), 1);
  read_response(opc::kReadRespLast, sq(2), slice(data, 512, 88), 1);
  ack(sq(3), kAckNoCredit, 2);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 2u);
  EXPECT_EQ(sc[0].request_context, ctx(1));
  EXPECT_EQ(sc[0].type, OperationType::kRead);
  EXPECT_EQ(sc[0].status, Status::kSuccess);
  EXPECT_EQ(sc[0].bytes_transferred, kLen);
  EXPECT_EQ(sc[1].request_context, ctx(2));
  EXPECT_EQ(sc[1].type, OperationType::kSend);
  EXPECT_EQ(sc[1].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(mem_.data() + kReadDstOff, data.data(), kLen), 0);
  EXPECT_EQ(qp_->counters().implied_naks, 1u);
}

TEST_F(RcProtocol, RequesterReRequestsRestOfReadAfterResponseGap) {
  bring_up();
  constexpr uint32_t kLen = 600;
  const auto data = pattern(kLen, 16);
  post_send(dp::WrOpcode::kRead, 1, kReadDstOff, kLen);
  ASSERT_EQ(requester_tx(), 1u);
  take_tx();

  // Receive READ RESPONSE FIRST sq(0) (in-order) -> Expect nothing to send, no completion.
  read_response(opc::kReadRespFirst, sq(0), slice(data, 0, 256), 1);
  EXPECT_EQ(requester_tx(), 0u);
  EXPECT_TRUE(poll(scq_).empty());

  // Receive READ RESPONSE LAST sq(2) (future: MIDDLE sq(1) lost) -> Expect a READ REQUEST for
  // the rest: PSN sq(1), RETH va advanced by one MTU, length 600 - 256.
  read_response(opc::kReadRespLast, sq(2), slice(data, 512, 88), 1);
  EXPECT_EQ(qp_->counters().implied_naks, 1u);
  EXPECT_EQ(requester_tx(), 1u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_read_request(tx[0], sq(1), kRemoteVa + kMtu, kLen - kMtu);
  EXPECT_EQ(tx[0].rkey, kRemoteRkey);

  // Receive READ RESPONSE LAST sq(2) again (future, same gap) -> Expect no second re-request.
  read_response(opc::kReadRespLast, sq(2), slice(data, 512, 88), 1);
  EXPECT_EQ(qp_->counters().implied_naks, 1u);
  EXPECT_EQ(requester_tx(), 0u);
  EXPECT_TRUE(take_tx().empty());

  // Receive the answer to the re-request: READ RESPONSE FIRST sq(1), LAST sq(2) (in-order)
  // -> Expect the READ to complete with all 600 bytes.
  read_response(opc::kReadRespFirst, sq(1), slice(data, 256, 256), 1);
  read_response(opc::kReadRespLast, sq(2), slice(data, 512, 88), 1);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, Status::kSuccess);
  EXPECT_EQ(sc[0].type, OperationType::kRead);
  EXPECT_EQ(std::memcmp(mem_.data() + kReadDstOff, data.data(), kLen), 0);
}

TEST_F(RcProtocol, RequesterRemoteAccessNakFailsAndFlushes) {
  bring_up();
  post_send(dp::WrOpcode::kWrite, 1, kSendSrcOff, 100);
  post_send(dp::WrOpcode::kSend, 2, kSendSrcOff, 100);
  post_send(dp::WrOpcode::kSend, 3, kSendSrcOff, 100);
  ASSERT_EQ(requester_tx(), 3u);
  auto tx = take_tx();
  ASSERT_EQ(tx.size(), 3u);
  EXPECT_EQ(tx[0].opcode, opc::kWriteOnly);
  EXPECT_EQ(tx[0].psn, sq(0));

  // Receive NAK remote access error (0x62) for sq(0) (in-order) -> Expect the WRITE to fail with
  // REM_ACCESS_ERR (STATUS_ACCESS_VIOLATION), the QP in ERR, and the two later SENDs flushed
  // (STATUS_CANCELLED), in posting order.
  ack(sq(0), kNakAccess, 0);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(qp_->counters().naks_received[wire::aeth::kNakRemoteAccessError], 1u);
  auto sc = poll(scq_);
  ASSERT_EQ(sc.size(), 3u);
  EXPECT_EQ(sc[0].request_context, ctx(1));
  EXPECT_EQ(sc[0].status, Status::kAccessViolation);
  EXPECT_EQ(sc[0].provider_error_code, static_cast<uint32_t>(WcStatus::kRemAccessErr));
  EXPECT_EQ(sc[0].type, OperationType::kWrite);
  for (uint32_t i = 1; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(sc[i].request_context, ctx(1 + i));
    EXPECT_EQ(sc[i].status, Status::kCancelled);
    EXPECT_EQ(sc[i].provider_error_code, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  }
  EXPECT_EQ(requester_tx(), 0u);
  EXPECT_TRUE(take_tx().empty());
}

}  // namespace
}  // namespace urnic::test
