// A hostile peer (issue 8, protection): frames synthesized as if from the wire against one QP
// (protocol_fixture.h), checking that a peer without a valid key never reads or writes anything,
// that each wrong guess costs it its connection, that frames which do not belong to the
// connection (other source address, partition or QP) are dropped and counted without an answer
// and without disturbing the connection, that key tags are not predictable, and that an
// invalidation takes effect before the very next packet.
//
// The rest of the protection rules have their own tests: PD checks and per-operation rights on
// every local and remote access in tests/loopback/rc_negative_test.cc (WriteIntoRegionOfAnotherPd,
// ReadFromRegionWithoutRemoteRead, AtomicOnRegionWithoutRemoteAtomic, ReadIntoBufferWithoutLocal-
// Write, ...), memory windows bound to a QP in tests/unit/mr_window_test.cc, and the fuzz target
// fuzz_adapter (tests/fuzz/) checks after every input that no byte outside the regions granted
// for remote write changed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>

#include "protocol_fixture.h"

namespace urnic::test {
namespace {

class HostilePeer : public RcProtocol {
 protected:
  void SetUp() override {
    RcProtocol::SetUp();
    // Non-zero contents, so that any write (even of zeros) shows.
    const auto p = pattern(kMemSize, 0x5A);
    std::copy(p.begin(), p.end(), mem_.begin());
    snapshot_ = mem_;
  }

  // One request with a guessed key; returns what the QP emitted.
  std::vector<TxFrame> guess(uint8_t opcode, uint32_t rkey, uint64_t va, uint32_t len) {
    auto th = hdr(opcode, rq(0), true);
    if (opcode == opc::kFetchAdd || opcode == opc::kCompareSwap) {
      th.atomic_eth.va = wire::Be64::of(va);
      th.atomic_eth.rkey = wire::Be32::of(rkey);
      th.atomic_eth.swap_add = wire::Be64::of(0x1111);
      receive(th);
    } else {
      th.reth.va = wire::Be64::of(va);
      th.reth.rkey = wire::Be32::of(rkey);
      th.reth.dma_length = wire::Be32::of(len);
      if (opcode == opc::kReadRequest) {
        receive(th);
      } else {
        receive(th, pattern(len, 0xEE));
      }
    }
    responder_tx();
    return take_tx();
  }

  // A frame built from `net` / `th` as given (no fixups), with the byte `flip_from_end` bytes
  // before its end inverted when non-zero, through the RX path. Returns the drop reason
  // counted, or kCount if none was.
  dp::RxDrop raw(const wire::NetHeaders& net, const wire::TransportHeaders& th,
                 std::span<const uint8_t> payload, uint32_t flip_from_end = 0) {
    rte_mbuf* m = build(net, th, payload);
    if (m == nullptr) return dp::RxDrop::kCount;
    if (flip_from_end != 0)
      rte_pktmbuf_mtod(m, uint8_t*)[rte_pktmbuf_data_len(m) - flip_from_end] ^= 0x01;
    std::array<uint64_t, static_cast<size_t>(dp::RxDrop::kCount)> before{};
    std::copy(std::begin(ep_->counters().rx_drops), std::end(ep_->counters().rx_drops),
              before.begin());
    engine_.deliver_lc(*ep_, m, kT0);
    for (size_t i = 0; i < before.size(); ++i)
      if (ep_->counters().rx_drops[i] != before[i]) {
        EXPECT_EQ(ep_->counters().rx_drops[i], before[i] + 1) << "one frame, one drop";
        return static_cast<dp::RxDrop>(i);
      }
    return dp::RxDrop::kCount;
  }
  wire::TransportHeaders write_with_good_key(uint32_t psn, uint32_t len) {
    auto th = hdr(opc::kWriteOnly, psn, true);
    th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
    wire::Bth::DestQp::set(th.bth, kQpn);
    th.reth.va = wire::Be64::of(addr(kRecvOff));
    th.reth.rkey = wire::Be32::of(key_);
    th.reth.dma_length = wire::Be32::of(len);
    return th;
  }

  std::vector<uint8_t> snapshot_;
};

// IBTA §9.7.5.2.4 / o9-..: an R_Key violation is answered with NAK "remote access error" and the
// responder's QP enters ERR (§10.3.1 class C). So a peer gets one guess per connection: the
// correct key sent right after on the same connection is not executed either.
TEST_F(HostilePeer, WrongKeyNaksOnceAndTheConnectionIsGone) {
  bring_up();
  const uint32_t wrong = dp::make_key(key_ >> 8, static_cast<uint8_t>(dp::key_tag(key_) + 1));
  // Receive WRITE ONLY rq(0) with a wrong tag -> Expect NAK 0x62, QP in ERR, memory unchanged.
  auto tx = guess(opc::kWriteOnly, wrong, addr(kRecvOff), 64);
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kNakAccess, 0);
  EXPECT_EQ(qp_->state(), QpState::kErr);
  EXPECT_EQ(qp_->counters().naks_sent[wire::aeth::kNakRemoteAccessError], 1u);
  // Receive WRITE ONLY rq(1) with the right key -> Expect nothing: the connection is dead.
  auto th = hdr(opc::kWriteOnly, rq(1), true);
  th.reth.va = wire::Be64::of(addr(kRecvOff));
  th.reth.rkey = wire::Be32::of(key_);
  th.reth.dma_length = wire::Be32::of(64);
  receive(th, pattern(64, 1));
  EXPECT_EQ(responder_tx(), 0u);
  EXPECT_TRUE(take_tx().empty());
  EXPECT_EQ(qp_->counters().dropped_bad_state, 1u);
  EXPECT_EQ(mem_, snapshot_);
}

// 255 wrong tags of the region's index, 256 random keys and the keys around the region's index,
// each tried as WRITE, READ and FETCH_ADD on a connection of its own: every one is refused with
// exactly one NAK 0x62 (a READ returns no data), and no byte of the region changes.
TEST_F(HostilePeer, KeyGuessesOverManyConnectionsNeverSucceed) {
  std::vector<uint32_t> keys;
  const uint32_t index = key_ >> 8;
  for (uint32_t t = 0; t < 256; ++t)
    if (t != dp::key_tag(key_)) keys.push_back(dp::make_key(index, static_cast<uint8_t>(t)));
  uint64_t x = 0x9E3779B97F4A7C15ull;
  while (keys.size() < 255 + 256) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    const auto k = static_cast<uint32_t>(x);
    if (k != key_) keys.push_back(k);
  }
  for (uint32_t i : {0u, 1u, 2u, index + 1, index + 2, 0xFFFFFFu})
    for (uint8_t t : {uint8_t{0}, dp::key_tag(key_)}) keys.push_back(dp::make_key(i, t));
  keys.push_back(0);
  keys.push_back(0xFFFFFFFF);
  std::erase(keys, key_);  // the region's own key is no guess

  uint64_t naks = 0;
  for (uint8_t op : {opc::kWriteOnly, opc::kReadRequest, opc::kFetchAdd}) {
    for (uint32_t k : keys) {
      SCOPED_TRACE(testing::Message() << "opcode " << int{op} << " key 0x" << std::hex << k);
      reconnect();
      const uint64_t va = op == opc::kFetchAdd ? addr(kAtomicOff) : addr(kReadSrcOff);
      const auto tx = guess(op, k, va, 64);
      ASSERT_EQ(tx.size(), 1u);
      expect_ack(tx[0], rq(0), kNakAccess, 0);
      EXPECT_EQ(qp_->state(), QpState::kErr);
      naks += qp_->counters().naks_sent[wire::aeth::kNakRemoteAccessError];
    }
  }
  EXPECT_EQ(naks, 3 * keys.size());
  EXPECT_EQ(mem_, snapshot_);
  // The same requests with the right key do work (the guesses failed for the key alone).
  reconnect();
  const auto tx = guess(opc::kReadRequest, key_, addr(kReadSrcOff), 64);
  ASSERT_EQ(tx.size(), 1u);
  EXPECT_EQ(tx[0].opcode, opc::kReadRespOnly);
  EXPECT_EQ(tx[0].payload, slice(snapshot_, kReadSrcOff, 64));
}

// Frames that do not belong to the connection - another source address, another partition,
// another destination QP, a bad ICRC - are dropped with their reason counted, answered with
// nothing, and leave the QP's state and PSN alone: the real peer's next request succeeds.
TEST_F(HostilePeer, FramesFromOutsideTheConnectionAreDroppedAndCounted) {
  bring_up();
  const auto data = pattern(64, 0x77);
  struct Case {
    const char* what;
    dp::RxDrop expect;
    void (*mutate)(wire::NetHeaders&, wire::TransportHeaders&);
  };
  const Case cases[] = {
      {"spoofed source IPv4", dp::RxDrop::kBadAddress,
       [](wire::NetHeaders& n, wire::TransportHeaders&) { n.src_ip4 = 0x0A000063; }},
      {"to another local address", dp::RxDrop::kBadAddress,
       [](wire::NetHeaders& n, wire::TransportHeaders&) { n.dst_ip4 = 0x0A000064; }},
      {"IPv6 instead of IPv4", dp::RxDrop::kBadAddress,
       [](wire::NetHeaders& n, wire::TransportHeaders&) { n.ipv6 = true; }},
      // The parser already refuses a P_Key other than the default partition's (IBTA §9.6.1.1).
      {"other partition", dp::RxDrop::kMalformed,
       [](wire::NetHeaders&, wire::TransportHeaders& t) { t.bth.pkey = wire::Be16::of(0x8001); }},
      {"no such QP", dp::RxDrop::kNoQp,
       [](wire::NetHeaders&, wire::TransportHeaders& t) { wire::Bth::DestQp::set(t.bth, 0x99); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    wire::NetHeaders net = peer_net();
    auto th = write_with_good_key(rq(0), 64);
    c.mutate(net, th);
    EXPECT_EQ(raw(net, th, data), c.expect) << dp::to_string(c.expect);
    EXPECT_EQ(responder_tx(), 0u);
    EXPECT_TRUE(take_tx().empty());
    EXPECT_EQ(qp_->state(), QpState::kRts);
  }
  // A corrupted frame (a payload byte flipped): the ICRC check drops it.
  EXPECT_EQ(raw(peer_net(), write_with_good_key(rq(0), 64), data, 10), dp::RxDrop::kBadIcrc);
  EXPECT_TRUE(take_tx().empty());
  EXPECT_EQ(mem_, snapshot_);
  EXPECT_EQ(qp_->counters().rx_packets, 0u);
  // The legitimate peer's WRITE at the same PSN is executed and acknowledged.
  EXPECT_EQ(raw(peer_net(), write_with_good_key(rq(0), 64), data), dp::RxDrop::kCount);
  responder_tx();
  const auto tx = take_tx();
  ASSERT_EQ(tx.size(), 1u);
  expect_ack(tx[0], rq(0), kAckNoCredit, 1);
  EXPECT_EQ(slice(mem_, kRecvOff, 64), data);
}

// The peer as a hostile responder: answers that do not fit the request - a READ response longer
// than asked, a READ response to an atomic, an atomic ACK to a READ, responses nobody asked for -
// never write into the requester's buffers (not even inside the registered sink), and the
// request fails with BAD_RESP_ERR (STATUS_INTERNAL_ERROR; rocev2.md §3.6) or the frame is
// dropped as stale.
TEST_F(HostilePeer, HostileResponderCannotWriteIntoTheRequestersBuffers) {
  struct Case {
    const char* what;
    dp::WrOpcode op;
    uint32_t len;
    uint8_t answer;  // opcode of the response
    uint32_t answer_len;
  };
  const Case cases[] = {
      {"READ answered with more bytes", dp::WrOpcode::kRead, 100, opc::kReadRespOnly, 200},
      {"READ answered with fewer bytes", dp::WrOpcode::kRead, 100, opc::kReadRespOnly, 60},
      {"READ answered with an atomic ACK", dp::WrOpcode::kRead, 8, opc::kAtomicAcknowledge, 0},
      {"FETCH_ADD answered with READ data", dp::WrOpcode::kFetchAdd, 8, opc::kReadRespOnly, 8},
      {"WRITE answered with READ data", dp::WrOpcode::kWrite, 64, opc::kReadRespOnly, 64},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    reconnect();
    post_send(c.op, 1, kReadDstOff, c.len);
    ASSERT_EQ(requester_tx(), 1u);
    take_tx();
    auto th = hdr(c.answer, sq(0));
    wire::Aeth::Syndrome::set(th.aeth, kAckNoCredit);
    wire::Aeth::Msn::set(th.aeth, 1);
    th.atomic_ack.orig = wire::Be64::of(0xDEADBEEFDEADBEEFull);
    receive(th, pattern(c.answer_len, 0x99));
    const auto sc = poll(scq_);
    ASSERT_EQ(sc.size(), 1u);
    EXPECT_EQ(sc[0].status, Status::kInternalError);
    EXPECT_EQ(sc[0].provider_error_code, static_cast<uint32_t>(WcStatus::kBadRespErr));
    EXPECT_EQ(qp_->state(), QpState::kErr);
    EXPECT_EQ(mem_, snapshot_);
  }
  // Responses with no request outstanding are dropped and counted.
  reconnect();
  read_response(opc::kReadRespOnly, sq(0), pattern(64, 0x42), 1);
  auto th = hdr(opc::kAtomicAcknowledge, sq(0));
  wire::Aeth::Syndrome::set(th.aeth, kAckNoCredit);
  receive(th);
  EXPECT_EQ(qp_->counters().dropped_stale, 2u);
  EXPECT_TRUE(poll(scq_).empty());
  EXPECT_EQ(qp_->state(), QpState::kRts);
  EXPECT_EQ(mem_, snapshot_);
}

// Key tags come from a seeded generator (dp::MrTable): not sequential, spread over the whole
// 8-bit space, never the previous tag of the same entry (or its successor), and different for
// different seeds - so neither the next key of a region nor another adapter's keys can be
// inferred from keys seen on the wire.
TEST_F(HostilePeer, KeyTagsAreUnpredictable) {
  constexpr uint32_t kRegions = 1024;
  std::vector<uint8_t> buf(64);
  auto tags_of = [&](uint64_t seed) {
    dp::MrTable t(kRegions + 1, seed);
    std::vector<uint8_t> tags;
    for (uint32_t i = 0; i < kRegions; ++i) {
      uint32_t k = 0;
      EXPECT_EQ(t.register_region(1, reinterpret_cast<uint64_t>(buf.data()), buf.size(),
                                  dp::access::kAll, &k),
                Status::kSuccess);
      tags.push_back(dp::key_tag(k));
    }
    return tags;
  };
  const auto a = tags_of(0x1234), b = tags_of(0x5678);
  size_t successors = 0, same_as_other_seed = 0;
  for (size_t i = 0; i + 1 < a.size(); ++i)
    successors += static_cast<uint8_t>(a[i] + 1) == a[i + 1] || a[i] == a[i + 1];
  for (size_t i = 0; i < a.size(); ++i) same_as_other_seed += a[i] == b[i];
  // A uniform draw repeats or counts up with probability 2/256 (expected 8 of 1023).
  EXPECT_LT(successors, 30u);
  EXPECT_LT(same_as_other_seed, 30u);  // expected 4 of 1024
  EXPECT_GT(std::set<uint8_t>(a.begin(), a.end()).size(), 200u);

  // Re-registering one entry: each new tag differs from the last one and its successor.
  dp::MrTable t(2, 0x9999);
  uint32_t prev = 0;
  ASSERT_EQ(t.register_region(1, reinterpret_cast<uint64_t>(buf.data()), buf.size(),
                              dp::access::kAll, &prev),
            Status::kSuccess);
  std::set<uint8_t> seen;
  for (int i = 0; i < 500; ++i) {
    ASSERT_EQ(t.deregister(prev), Status::kSuccess);
    uint32_t k = 0;
    ASSERT_EQ(t.register_region(1, reinterpret_cast<uint64_t>(buf.data()), buf.size(),
                                dp::access::kAll, &k),
              Status::kSuccess);
    ASSERT_EQ(k >> 8, prev >> 8);  // same entry
    EXPECT_NE(dp::key_tag(k), dp::key_tag(prev));
    EXPECT_NE(dp::key_tag(k), static_cast<uint8_t>(dp::key_tag(prev) + 1));
    // The old key is dead at once.
    EXPECT_NE(t.check(prev, 1, reinterpret_cast<uint64_t>(buf.data()), 1, dp::access::kRemoteRead),
              dp::MrCheck::kOk);
    seen.insert(dp::key_tag(k));
    prev = k;
  }
  EXPECT_GT(seen.size(), 200u);
}

// IBTA §10.6.6 / §9.4.1.2 (C9-...): a SEND with Invalidate invalidates the key before the
// responder processes the next packet; a WRITE with that key arriving right behind it, in the
// same burst, is refused and the memory stays as it was.
TEST_F(HostilePeer, InvalidationTakesEffectBeforeTheNextPacket) {
  bring_up();
  // A fast-register region over a page of its own, granting remote write.
  constexpr uint32_t kPg = dp::kMrPageSize;
  std::unique_ptr<uint8_t, decltype(&std::free)> page(
      static_cast<uint8_t*>(std::aligned_alloc(kPg, kPg)), &std::free);
  ASSERT_NE(page, nullptr);
  std::memset(page.get(), 0x3C, kPg);
  uint32_t frmr = 0;
  ASSERT_EQ(mrs_.alloc_fast_register(kPd, 1, true, &frmr), Status::kSuccess);
  const uint32_t key = mrs_.next_fast_register_key(frmr);
  const uint64_t pg = reinterpret_cast<uint64_t>(page.get());
  constexpr uint64_t kIova = 0x7a0000000000;
  ASSERT_EQ(mrs_.fast_register(key, kPd, &pg, 1, 0, kPg, kIova,
                               dp::access::kRemoteWrite | dp::access::kLocalWrite),
            dp::MrCheck::kOk);
  post_recv(1, kRecvOff, 256);

  // Receive SEND ONLY WITH INVALIDATE rq(0) (IETH = key), then WRITE ONLY rq(1) with that key,
  // both before the responder runs -> Expect ACK for rq(0), NAK 0x62 for rq(1), page unchanged.
  auto send = hdr(opc::kSendOnlyInv, rq(0), true);
  send.ieth.rkey = wire::Be32::of(key);
  receive(send, pattern(16, 3));
  auto write = hdr(opc::kWriteOnly, rq(1), true);
  write.reth.va = wire::Be64::of(kIova);
  write.reth.rkey = wire::Be32::of(key);
  write.reth.dma_length = wire::Be32::of(32);
  receive(write, pattern(32, 4));
  responder_tx();
  const auto tx = take_tx();
  ASSERT_GE(tx.size(), 1u);
  expect_ack(tx.back(), rq(1), kNakAccess, 1);
  for (uint32_t i = 0; i < kPg; ++i) ASSERT_EQ(page.get()[i], 0x3C) << "byte " << i;
  const auto rc = poll(rcq_);
  ASSERT_GE(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, Status::kSuccess);
  EXPECT_EQ(rc[0].type, OperationType::kReceiveAndInvalidate);
  EXPECT_EQ(rc[0].type_specific_completion_output, key);
  EXPECT_EQ(mrs_.check(key, kPd, kIova, 1, dp::access::kRemoteWrite), dp::MrCheck::kInvalidated);
  ASSERT_EQ(mrs_.deregister(key), Status::kSuccess);
}

}  // namespace
}  // namespace urnic::test
