// Negative cases of the RC data path over net_ring: every request the responder or the local
// checks must refuse, with the exact completion on both sides (NTSTATUS and the verbs status in
// provider_error_code), the QP states IBTA prescribes afterwards, the flush of everything else
// posted, and target memory byte-for-byte unchanged (guard bytes around every region).
//
// Expected outcomes: rocev2.md §3.4 (responder NAKs, then ERR) and §3.7 (requester WCs);
// ndkpi.md §3.3 (NTSTATUS per WC) and §7.6 (ND2 conformance: ndmemorytest, ndmval).
// House style rule 25: one scenario per test, each on a fresh RcPair.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dataplane/wire/headers.h"
#include "rc_fixture.h"

namespace urnic::test {
namespace {

using dp::WrOpcode;

void* ctx(uintptr_t i) { return reinterpret_cast<void*>(0x1000 + i); }

// Consecutive idle engine steps after which nothing is in flight: a frame sent in one step is
// received in the next (net_ring delivers at once), so two would do; eight leave a margin.
constexpr uint32_t kIdleSteps = 8;
constexpr uint64_t kMaxSettleSteps = 1'000'000;

// Drives the engine until it has been idle for kIdleSteps steps, then collects completions, so
// that any completion that should not exist has had every chance to appear.
void settle(RcPair& p) {
  uint32_t idle = 0;
  for (uint64_t i = 0; i < kMaxSettleSteps && idle < kIdleSteps; ++i)
    idle = p.engine().run_once() ? 0 : idle + 1;
  p.collect();
  EXPECT_EQ(idle, kIdleSteps) << "engine never went idle";
}

// Aligned host pages for fast-register regions.
struct PageBuf {
  explicit PageBuf(size_t npages)
      : n(npages * dp::kMrPageSize),
        p(static_cast<uint8_t*>(std::aligned_alloc(dp::kMrPageSize, n)), &std::free) {}
  size_t n;
  std::unique_ptr<uint8_t, decltype(&std::free)> p;
};

class RcNegative : public EalTest {
 protected:
  // One 64-byte receive posted on B, so that the flush of B's receive queue is visible.
  void post_b_receive(RcPair& p) {
    bkey_ = p.b.reg(brecv_.data(), brecv_.size(), mr_flag::kAllowLocalWrite);
    ASSERT_EQ(p.b.qp->post_recv(recv_wr(kBRecvCtx, brecv_.data(), 64, bkey_)), Status::kSuccess);
  }

  // Posts `w` on A (with one receive waiting on B) and checks the outcome of a request the
  // responder refuses with a NAK (rocev2.md §3.4, §3.7): A completes it with (st, wc) and enters
  // ERR, the responder enters ERR and flushes the receive (ndmemorytest: "peer's receive
  // ND_CANCELED"), and nothing else completes anywhere.
  void expect_refused(RcPair& p, const dp::SendWqe& w, Status st, WcStatus wc, OperationType type) {
    post_b_receive(p);
    ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
    ASSERT_TRUE(p.wait(1, 1));
    settle(p);
    ASSERT_EQ(p.a.send_done.size(), 1u);
    ASSERT_EQ(p.b.recv_done.size(), 1u);
    EXPECT_EQ(p.a.recv_done.size(), 0u);
    EXPECT_EQ(p.b.send_done.size(), 0u);
    expect_result(p.a.send_done[0], st, wc, type, w.request_context);
    expect_flushed(p.b.recv_done[0], OperationType::kReceive, kBRecvCtx);
    EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
    EXPECT_EQ(p.b.qp->state(), dp::QpState::kErr);
  }

  static constexpr uintptr_t kBRecvTag = 0xB0;
  void* const kBRecvCtx = ctx(kBRecvTag);
  std::vector<uint8_t> brecv_ = std::vector<uint8_t>(64, 0x11);
  uint32_t bkey_ = 0;
};

// ---- 2. Region of another protection domain -------------------------------------------------

TEST_F(RcNegative, WriteIntoRegionOfAnotherPd) {
  RcPair p("neg_pd");
  p.connect(1024);
  Guarded dst(4096, 5);
  Handle<Pd> other_pd;
  ASSERT_EQ(p.b.adapter->create_pd(nullptr, nullptr, &other_pd), Status::kSuccess);
  Handle<Mr> mr;
  ASSERT_EQ(other_pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  ASSERT_EQ(mr->register_mr(dst.region(), dst.size(), kRemoteAll, nullptr, nullptr),
            Status::kSuccess);
  const uint32_t kdst = mr->get_remote_token();
  const auto before = dst.snapshot();
  std::vector<uint8_t> src(512);
  fill(src, 6);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  const auto w = data_wr(WrOpcode::kWrite, ctx(1), src.data(), 512, ksrc, dst.va(), kdst);
  expect_refused(p, w, Status::kAccessViolation, WcStatus::kRemAccessErr, OperationType::kWrite);
  EXPECT_EQ(first_diff(dst.bytes, before), -1);
}

// ---- 1, 3, 4, 5. Requests the responder refuses -----------------------------------------------

// One request A sends into B's region that B must refuse with a NAK, nothing executed: a bad
// R_Key (IBTA §9.7.5.1.5 / §10.6.3.1: the key must name a valid region whose tag matches), a
// region without the right the operation needs, a range outside the region (ndmemorytest
// NdOverWrite / NdOverRead), or a QP that does not accept the operation at all (IBTA §9.7.5.1.2:
// NAK invalid request).
struct Refused {
  const char* name;
  WrOpcode op;
  OperationType type;   // of A's failed completion
  uint32_t region_len;  // B's region
  uint32_t rights;      // its mr_flag rights
  int64_t offset;       // of the remote address: from the region's start, or (from_end) its end
  bool from_end;
  uint32_t len;  // bytes moved (8 for atomics)
  enum class Key : uint8_t { kRegion, kNeverRegistered, kOtherTag } key = Key::kRegion;
  uint32_t qp_access = kRemoteAccess;  // B's QP remote rights
  Status st = Status::kAccessViolation;
  WcStatus wc = WcStatus::kRemAccessErr;
  uint8_t nak = wire::aeth::kNakRemoteAccessError;  // the NAK code B sends, once
};

void PrintTo(const Refused& c, std::ostream* os) { *os << c.name; }

constexpr uint32_t kNoWrite =
    mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteAtomic;
constexpr uint32_t kNoRead = mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteAtomic;
constexpr uint32_t kNoAtomic =
    mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead;
using Key = Refused::Key;

const Refused kRefused[] = {
    // 1. Bad R_Key: index 4000 of B's table was never handed out (indices are allocated from 1
    // up); the region's index with another tag is what a stale key of a re-registered region
    // looks like.
    {"WriteWithNeverRegisteredRkey", WrOpcode::kWrite, OperationType::kWrite, 4096, kRemoteAll, 0,
     false, 256, Key::kNeverRegistered},
    {"WriteWithWrongTagRkey", WrOpcode::kWrite, OperationType::kWrite, 4096, kRemoteAll, 0, false,
     256, Key::kOtherTag},
    // 3. Missing rights (ndmemorytest NdWriteViolation: initiator ND_ACCESS_VIOLATION, peer
    // receive ND_CANCELED).
    {"WriteIntoReadOnlyRegion", WrOpcode::kWrite, OperationType::kWrite, 4096, kNoWrite, 0, false,
     256},
    {"ReadFromRegionWithoutRemoteRead", WrOpcode::kRead, OperationType::kRead, 4096, kNoRead, 128,
     false, 256},
    {"AtomicOnRegionWithoutRemoteAtomic", WrOpcode::kFetchAdd, OperationType::kFetchAdd, 4096,
     kNoAtomic, 64, false, 8},
    {"CompareSwapOnRegionWithoutRemoteAtomic", WrOpcode::kCompareSwap, OperationType::kCompareSwap,
     64, kNoAtomic, 8, false, 8},
    // 4. Bounds: [end - 15, end + 1); five packets at PMTU 1024 refused at the first, so no
    // packet writes anything; one byte before the start; a READ past the end.
    {"WriteOneBytePastTheEnd", WrOpcode::kWrite, OperationType::kWrite, 4096, kRemoteAll, -15, true,
     16},
    {"MultiPacketWriteOneBytePastTheEnd", WrOpcode::kWrite, OperationType::kWrite, 4096, kRemoteAll,
     0, false, 4097},
    {"WriteStartingBeforeTheStart", WrOpcode::kWrite, OperationType::kWrite, 4096, kRemoteAll, -1,
     false, 16},
    {"ReadPastTheEnd", WrOpcode::kRead, OperationType::kRead, 4096, kRemoteAll, -8, true, 16},
    // 5. QP access flags: B's QP accepts only READs, so a WRITE is an invalid request.
    {"WriteToQpWithoutRemoteWrite", WrOpcode::kWrite, OperationType::kWrite, 4096, kRemoteAll, 0,
     false, 256, Key::kRegion, qp_access::kRemoteRead, Status::kRemoteResources,
     WcStatus::kRemInvReqErr, wire::aeth::kNakInvalidRequest},
};

class RcRefused : public RcNegative, public ::testing::WithParamInterface<Refused> {};

TEST_P(RcRefused, NothingExecutesAndBothQpsFail) {
  const Refused& c = GetParam();
  const auto seed = static_cast<uint32_t>(&c - kRefused) * 2 + 1;
  RcPair p("neg_r" + std::to_string(seed));  // ring names are short
  p.connect(1024, false, 256, 256, c.qp_access);
  Guarded remote(c.region_len, seed);
  const uint32_t kreg = p.b.reg(remote.region(), remote.size(), c.rights);
  uint32_t rkey = kreg;
  if (c.key == Key::kNeverRegistered) rkey = dp::make_key(4000, 0x5A);
  if (c.key == Key::kOtherTag) rkey = dp::make_key(dp::key_index(kreg), dp::key_tag(kreg) ^ 0x5A);
  ASSERT_TRUE(c.key == Key::kRegion || rkey != kreg);
  const auto remote_before = remote.snapshot();
  // The local side: the WRITE's source, or the READ / atomic's sink (which must stay untouched).
  Guarded local(c.len, seed + 1);
  const uint32_t klocal = p.a.reg(local.region(), local.size(), mr_flag::kAllowLocalWrite);
  const auto local_before = local.snapshot();
  const uint64_t raddr = (c.from_end ? remote.va() + remote.size() : remote.va()) + c.offset;
  auto w = data_wr(c.op, ctx(1), local.region(), c.len, klocal, raddr, rkey);
  if (c.op == WrOpcode::kFetchAdd) w.compare_add = 1;
  if (c.op == WrOpcode::kCompareSwap) {
    // The compare would succeed if the CAS were (wrongly) executed.
    std::memcpy(&w.compare_add, remote.region() + c.offset, 8);
    w.swap = ~w.compare_add;
  }
  expect_refused(p, w, c.st, c.wc, c.type);
  EXPECT_EQ(first_diff(remote.bytes, remote_before), -1);
  EXPECT_EQ(first_diff(local.bytes, local_before), -1);  // no response data was placed
  EXPECT_EQ(p.b.qp->counters().naks_sent[c.nak], 1u);
}

INSTANTIATE_TEST_SUITE_P(Cases, RcRefused, ::testing::ValuesIn(kRefused),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- 6. Receive too small (ndmval) ------------------------------------------------------------

// A `len`-byte SEND into a 1023-byte receive at path MTU `mtu`: the receiver completes with
// STATUS_BUFFER_OVERFLOW (LOC_LEN_ERR), the sender with STATUS_REMOTE_RESOURCES (the NAK invalid
// request of IB; ndkpi.md §7.6 ndmval), both QPs enter ERR, B's second receive is flushed, and
// the bytes after the 1023 of the receive buffer are untouched.
void receive_too_small(RcPair& p, uint32_t mtu) {
  p.connect(mtu);
  constexpr uint32_t kRecvLen = 1023;
  Guarded rbuf(kRecvLen, 25);
  const uint32_t krbuf = p.b.reg(rbuf.bytes.data(), rbuf.bytes.size(), mr_flag::kAllowLocalWrite);
  const auto before = rbuf.snapshot();
  std::vector<uint8_t> spare(64, 0);
  const uint32_t kspare = p.b.reg(spare.data(), spare.size(), mr_flag::kAllowLocalWrite);
  ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(10), rbuf.region(), kRecvLen, krbuf)), Status::kSuccess);
  ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(11), spare.data(), 64, kspare)), Status::kSuccess);
  std::vector<uint8_t> src(1024);
  fill(src, 26);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(1), src.data(), 1024, ksrc)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(1, 2));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 1u);
  ASSERT_EQ(p.b.recv_done.size(), 2u);
  EXPECT_EQ(p.a.recv_done.size(), 0u);
  EXPECT_EQ(p.b.send_done.size(), 0u);
  expect_result(p.a.send_done[0], Status::kRemoteResources, WcStatus::kRemInvReqErr,
                OperationType::kSend, ctx(1));
  expect_result(p.b.recv_done[0], Status::kBufferOverflow, WcStatus::kLocLenErr,
                OperationType::kReceive, ctx(10));
  expect_flushed(p.b.recv_done[1], OperationType::kReceive, ctx(11));
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kErr);
  // The guard before the buffer and everything after its 1023 bytes: untouched. (What lands in
  // the 1023 bytes of an overflowed receive is undefined.)
  const std::vector<uint8_t> lead(rbuf.bytes.begin(), rbuf.bytes.begin() + kGuard);
  const std::vector<uint8_t> lead_before(before.begin(), before.begin() + kGuard);
  EXPECT_EQ(first_diff(lead, lead_before), -1);
  const std::vector<uint8_t> tail(rbuf.bytes.begin() + kGuard + kRecvLen, rbuf.bytes.end());
  const std::vector<uint8_t> tail_before(before.begin() + kGuard + kRecvLen, before.end());
  EXPECT_EQ(first_diff(tail, tail_before), -1);
}

TEST_F(RcNegative, SendLargerThanReceiveOnePacket) {
  RcPair p("neg_rlen_1");
  receive_too_small(p, 1024);
}

TEST_F(RcNegative, SendLargerThanReceiveMultiPacket) {
  // PMTU 256: three packets fit, the LAST overflows.
  RcPair p("neg_rlen_4");
  receive_too_small(p, 256);
}

// ---- 7. Local protection ----------------------------------------------------------------------

TEST_F(RcNegative, SendWithBadLkey) {
  RcPair p("neg_lkey_send");
  p.connect(1024);
  std::vector<uint8_t> src(256);
  fill(src, 27);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  Guarded rbuf(256, 28);
  const uint32_t krbuf = p.b.reg(rbuf.region(), rbuf.size(), mr_flag::kAllowLocalWrite);
  const auto before = rbuf.snapshot();
  ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(10), rbuf.region(), 256, krbuf)), Status::kSuccess);
  const uint32_t bad = dp::make_key(dp::key_index(ksrc), dp::key_tag(ksrc) ^ 0x5A);
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(1), src.data(), 256, bad)),
            Status::kSuccess);
  // A good SEND queued behind it is flushed when the QP enters ERR.
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(2), src.data(), 256, ksrc)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(2, 0));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 2u);
  expect_result(p.a.send_done[0], Status::kAccessViolation, WcStatus::kLocProtErr,
                OperationType::kSend, ctx(1));
  expect_flushed(p.a.send_done[1], OperationType::kSend, ctx(2));
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  // Nothing reached B: its receive is still posted, its QP untouched.
  EXPECT_EQ(p.b.recv_done.size(), 0u);
  EXPECT_EQ(p.b.send_done.size(), 0u);
  EXPECT_EQ(p.a.recv_done.size(), 0u);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kRts);
  EXPECT_EQ(first_diff(rbuf.bytes, before), -1);
}

TEST_F(RcNegative, ReadIntoBufferWithoutLocalWrite) {
  RcPair p("neg_lkey_read");
  p.connect(1024);
  Guarded remote(1024, 29);
  const uint32_t krem = p.b.reg(remote.region(), remote.size(), kRemoteAll);
  const auto remote_before = remote.snapshot();
  Guarded sink(512, 30);
  // Local read only: the region cannot receive READ response data (IBTA §10.6.3.1).
  const uint32_t ksink = p.a.reg(sink.region(), sink.size(), mr_flag::kAllowLocalRead);
  const auto sink_before = sink.snapshot();
  ASSERT_EQ(p.a.qp->post_send(
                data_wr(WrOpcode::kRead, ctx(1), sink.region(), 512, ksink, remote.va(), krem)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(1, 0));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 1u);
  expect_result(p.a.send_done[0], Status::kAccessViolation, WcStatus::kLocProtErr,
                OperationType::kRead, ctx(1));
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kRts);  // B answered a valid READ
  EXPECT_EQ(p.a.recv_done.size(), 0u);
  EXPECT_EQ(p.b.recv_done.size(), 0u);
  EXPECT_EQ(p.b.send_done.size(), 0u);
  EXPECT_EQ(first_diff(sink.bytes, sink_before), -1);
  EXPECT_EQ(first_diff(remote.bytes, remote_before), -1);
}

// ---- 8. Posting and modify validation ----------------------------------------------------------

TEST_F(RcNegative, PostAndModifyInWrongState) {
  RcPair p("neg_state");
  TestQp* qp = nullptr;
  ASSERT_EQ(p.a.create_qp(nullptr, 256, 256, &qp), Status::kSuccess);
  QpConnectExtension& ext = *qp->public_qp().query_extension<QpConnectExtension>();
  std::vector<uint8_t> buf(64, 0);
  const uint32_t key = p.a.reg(buf.data(), buf.size(), mr_flag::kAllowLocalWrite);
  const auto send = data_wr(WrOpcode::kSend, ctx(1), buf.data(), 64, key);
  const auto recv = recv_wr(ctx(2), buf.data(), 64, key);
  using namespace qp_attr_mask;
  using S = QpState;

  // A new QP is in INIT; back to RESET, where neither queue accepts work (NDK: a QP that is
  // not connected refuses initiator posts with kConnectionInvalid) and only RESET -> INIT (or
  // RESET / ERR) is legal.
  QpAttributes at;
  at.state = S::kReset;
  ASSERT_EQ(ext.modify(at, kState, nullptr, nullptr), Status::kSuccess);
  ASSERT_EQ(qp->state(), S::kReset);
  EXPECT_EQ(qp->post_send(send), Status::kConnectionInvalid);
  EXPECT_EQ(qp->post_recv(recv), Status::kInvalidDeviceState);
  const LocalAddress peer = address_of(*p.b.adapter);
  at.state = S::kRtr;
  at.av.dst_ipv4 = peer.ipv4;
  at.av.dst_mac = peer.mac;
  at.dest_qpn = 5;
  at.rq_psn = 0x100;
  const uint32_t rtr_mask =
      kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer;
  EXPECT_EQ(ext.modify(at, rtr_mask, nullptr, nullptr), Status::kInvalidDeviceState);
  EXPECT_EQ(qp->state(), S::kReset);
  at.state = S::kInit;
  at.access = qp_access::kRemoteWrite;
  ASSERT_EQ(ext.modify(at, kState | kAccessFlags, nullptr, nullptr), Status::kSuccess);

  // INIT: sends are refused; INIT -> RTS is illegal; INIT -> RTR checks its attributes.
  EXPECT_EQ(qp->state(), S::kInit);
  EXPECT_EQ(qp->post_send(send), Status::kConnectionInvalid);
  at.state = S::kRts;
  at.sq_psn = 0x200;
  const uint32_t rts_mask = kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic;
  EXPECT_EQ(ext.modify(at, rts_mask, nullptr, nullptr), Status::kInvalidDeviceState);
  EXPECT_EQ(qp->state(), S::kInit);
  at.state = S::kRtr;
  EXPECT_EQ(ext.modify(at, rtr_mask & ~kDestQpn, nullptr, nullptr), Status::kInvalidParameter);
  at.path_mtu = 1000;
  EXPECT_EQ(ext.modify(at, rtr_mask, nullptr, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(qp->state(), S::kInit);
  at.path_mtu = 1024;
  ASSERT_EQ(ext.modify(at, rtr_mask, nullptr, nullptr), Status::kSuccess);

  // RTR: sends still refused; RTR -> INIT is illegal; RTR -> RTS checks ranges.
  EXPECT_EQ(qp->state(), S::kRtr);
  EXPECT_EQ(qp->post_send(send), Status::kConnectionInvalid);
  at.state = S::kInit;
  EXPECT_EQ(ext.modify(at, kState, nullptr, nullptr), Status::kInvalidDeviceState);
  at.state = S::kRts;
  at.retry_cnt = 8;  // 3-bit field
  EXPECT_EQ(ext.modify(at, rts_mask, nullptr, nullptr), Status::kInvalidParameter);
  at.retry_cnt = 7;
  at.timeout = 32;  // 5-bit field
  EXPECT_EQ(ext.modify(at, rts_mask, nullptr, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(qp->state(), S::kRtr);

  // None of the refused posts left anything behind: nothing was ever written to either CQ.
  settle(p);
  EXPECT_EQ(p.a.send_done.size(), 0u);
  EXPECT_EQ(p.a.recv_done.size(), 0u);
  EXPECT_EQ(detail::CqImpl::of(*p.a.scq)->cq.produced(), 0u);
  EXPECT_EQ(detail::CqImpl::of(*p.a.rcq)->cq.produced(), 0u);
}

TEST_F(RcNegative, PostValidationInRts) {
  constexpr uint32_t kDepth = 16;
  RcPair p("neg_post");
  p.connect(1024, false, kDepth, kDepth);
  Guarded dst(kDepth * 64, 31);
  const uint32_t kdst = p.b.reg(dst.region(), dst.size(), kRemoteAll);
  std::vector<uint8_t> src(kDepth * 64);
  fill(src, 32);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);

  // More SGEs than the QP allows: STATUS_DATA_OVERRUN (ndkpi.md §3.3).
  auto many = data_wr(WrOpcode::kWrite, ctx(100), src.data(), 64, ksrc, dst.va(), kdst);
  many.num_sge = dp::kMaxSge + 1;
  EXPECT_EQ(p.a.qp->post_send(many), Status::kDataOverrun);
  // Atomic on an address that is not 8-byte aligned.
  auto mis = data_wr(WrOpcode::kFetchAdd, ctx(101), src.data(), 8, ksrc, dst.va() + 4, kdst);
  EXPECT_EQ(p.a.qp->post_send(mis), Status::kInvalidParameter);

  // Fill the send queue without running the engine: the next post finds it full.
  for (uint32_t i = 0; i < kDepth; ++i) {
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(i), src.data() + i * 64, 64, ksrc,
                                        dst.va() + i * 64, kdst)),
              Status::kSuccess)
        << i;
  }
  EXPECT_EQ(p.a.qp->post_send(
                data_wr(WrOpcode::kWrite, ctx(kDepth), src.data(), 64, ksrc, dst.va(), kdst)),
            Status::kNoMoreEntries);

  // Exactly the accepted WRITEs complete, successfully and in order.
  ASSERT_TRUE(p.wait(kDepth, 0));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), kDepth);
  for (uint32_t i = 0; i < kDepth; ++i)
    expect_result(p.a.send_done[i], Status::kSuccess, WcStatus::kSuccess, OperationType::kWrite,
                  ctx(i));
  EXPECT_EQ(p.a.recv_done.size() + p.b.recv_done.size() + p.b.send_done.size(), 0u);
  EXPECT_EQ(std::memcmp(dst.region(), src.data(), src.size()), 0);
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kRts);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kRts);
}

// ---- 9. Stale key after invalidation ----------------------------------------------------------

// A fast-register region on B over four host pages mapped out of order, so that a WRITE that
// crosses pages shows whether each byte went through the page list.
struct Frmr {
  static constexpr uint32_t kPages = 4;
  static constexpr uint32_t kFbo = 100;
  static constexpr uint64_t kLength = kPages * dp::kMrPageSize - kFbo - 200;
  // NdkFastRegister: the base address is the FBO plus a whole number of pages.
  static constexpr uint64_t kBaseVa = 0x7000'0000'0000ull + kFbo;

  explicit Frmr(uint32_t seed) : host(kPages) {
    std::vector<uint8_t> pattern(host.n);
    fill(pattern, seed);
    std::memcpy(host.p.get(), pattern.data(), host.n);
    const uint64_t base = addr(host.p.get());
    const uint32_t order[kPages] = {2, 0, 3, 1};
    for (uint32_t i = 0; i < kPages; ++i) pages[i] = base + order[i] * dp::kMrPageSize;
  }
  std::vector<uint8_t> bytes() const {
    return std::vector<uint8_t>(host.p.get(), host.p.get() + host.n);
  }
  // Host offset (into `host`) of region offset `off`.
  size_t host_offset(uint64_t off) const {
    const uint64_t pos = off + kFbo;
    return pages[pos / dp::kMrPageSize] - addr(host.p.get()) + pos % dp::kMrPageSize;
  }

  PageBuf host;
  uint64_t pages[kPages] = {};
  Handle<Mr> mr;  // the fast-register MR on B, once fast_register_on_b() ran
};

// Creates the fast-register MR on B and fast-registers it with a work request on B's QP
// (NdkFastRegister); returns its new token.
uint32_t fast_register_on_b(RcPair& p, Frmr& fr) {
  EXPECT_EQ(p.b.pd->create_mr(true, nullptr, nullptr, &fr.mr), Status::kSuccess);
  if (!fr.mr) return 0;
  EXPECT_EQ(fr.mr->initialize_fast_register_mr(Frmr::kPages, true, nullptr, nullptr),
            Status::kSuccess);
  EXPECT_EQ(p.b.qp->public_qp().fast_register(
                ctx(0xF0), *fr.mr, fr.pages, Frmr::kFbo, Frmr::kLength, Frmr::kBaseVa,
                op_flag::kAllowRemoteWrite | op_flag::kAllowRemoteRead),
            Status::kSuccess);
  const uint32_t key = fr.mr->get_remote_token();
  const size_t n = p.b.send_done.size();
  EXPECT_TRUE(p.run_until([&] { return p.b.send_done.size() > n; }));
  if (p.b.send_done.size() > n)
    expect_result(p.b.send_done[n], Status::kSuccess, WcStatus::kSuccess,
                  OperationType::kFastRegister, ctx(0xF0));
  return key;
}

TEST_F(RcNegative, WriteWithKeyAfterLocalInvalidate) {
  RcPair p("neg_inv_local");
  p.connect(1024);
  Frmr fr(33);
  const uint32_t key = fast_register_on_b(p, fr);
  ASSERT_EQ(p.b.send_done.size(), 1u);
  post_b_receive(p);

  // 6000 bytes at region offset 3000: three pages of the list, which are host pages 2, 0, 3.
  constexpr uint64_t kOff = 3000;
  constexpr uint32_t kLen = 6000;
  std::vector<uint8_t> src(kLen);
  fill(src, 34);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  auto expected = fr.bytes();
  for (uint32_t i = 0; i < kLen; ++i) expected[fr.host_offset(kOff + i)] = src[i];
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(1), src.data(), kLen, ksrc,
                                      Frmr::kBaseVa + kOff, key)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(1, 0));
  expect_result(p.a.send_done[0], Status::kSuccess, WcStatus::kSuccess, OperationType::kWrite,
                ctx(1));
  EXPECT_EQ(first_diff(fr.bytes(), expected), -1);

  // Local invalidate on B's QP (IBTA §10.6.6): the key no longer names a valid region.
  ASSERT_EQ(p.b.qp->public_qp().invalidate(ctx(0xF1), *fr.mr, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait(1, 0, 2));
  expect_result(p.b.send_done[1], Status::kSuccess, WcStatus::kSuccess, OperationType::kInvalidate,
                ctx(0xF1));

  // The same WRITE again through the stale key: refused, nothing written.
  std::vector<uint8_t> src2(kLen);
  fill(src2, 35);
  const uint32_t ksrc2 = p.a.reg(src2.data(), src2.size(), mr_flag::kAllowLocalWrite);
  const auto before = fr.bytes();
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(2), src2.data(), kLen, ksrc2,
                                      Frmr::kBaseVa + kOff, key)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(2, 1, 2));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 2u);
  ASSERT_EQ(p.b.send_done.size(), 2u);
  ASSERT_EQ(p.b.recv_done.size(), 1u);
  EXPECT_EQ(p.a.recv_done.size(), 0u);
  expect_result(p.a.send_done[1], Status::kAccessViolation, WcStatus::kRemAccessErr,
                OperationType::kWrite, ctx(2));
  expect_flushed(p.b.recv_done[0], OperationType::kReceive, kBRecvCtx);
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(first_diff(fr.bytes(), before), -1);
}

TEST_F(RcNegative, WriteWithKeyAfterRemoteInvalidate) {
  RcPair p("neg_inv_remote");
  p.connect(1024);
  Frmr fr(36);
  const uint32_t key = fast_register_on_b(p, fr);
  ASSERT_EQ(p.b.send_done.size(), 1u);
  std::vector<uint8_t> rbuf(64, 0);
  const uint32_t krbuf = p.b.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(10), rbuf.data(), 64, krbuf)), Status::kSuccess);
  ASSERT_EQ(p.b.qp->post_recv(recv_wr(ctx(11), rbuf.data(), 64, krbuf)), Status::kSuccess);

  // SEND with Invalidate (IBTA §9.3.8 IETH): B's receive reports the invalidated key.
  std::vector<uint8_t> msg(64);
  fill(msg, 37);
  const uint32_t kmsg = p.a.reg(msg.data(), msg.size(), mr_flag::kAllowLocalWrite);
  auto s = data_wr(WrOpcode::kSendWithInv, ctx(1), msg.data(), 64, kmsg);
  s.imm_or_inv = key;
  ASSERT_EQ(p.a.qp->post_send(s), Status::kSuccess);
  ASSERT_TRUE(p.wait(1, 1));
  expect_result(p.a.send_done[0], Status::kSuccess, WcStatus::kSuccess, OperationType::kSend,
                ctx(1));
  const ResultEx& r = p.b.recv_done[0];
  expect_result(r, Status::kSuccess, WcStatus::kSuccess, OperationType::kReceiveAndInvalidate,
                ctx(10));
  EXPECT_EQ(r.type_specific_completion_output, key);
  EXPECT_EQ(r.bytes_transferred, 64u);
  EXPECT_NE(r.flags & kResultInvalidated, 0u);
  EXPECT_EQ(rbuf, msg);

  // A WRITE through the invalidated key is refused and writes nothing.
  std::vector<uint8_t> src(512);
  fill(src, 38);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  const auto before = fr.bytes();
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(2), src.data(), 512, ksrc,
                                      Frmr::kBaseVa + 1000, key)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(2, 2));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 2u);
  ASSERT_EQ(p.b.recv_done.size(), 2u);
  EXPECT_EQ(p.b.send_done.size(), 1u);  // the fast-register only
  EXPECT_EQ(p.a.recv_done.size(), 0u);
  expect_result(p.a.send_done[1], Status::kAccessViolation, WcStatus::kRemAccessErr,
                OperationType::kWrite, ctx(2));
  expect_flushed(p.b.recv_done[1], OperationType::kReceive, ctx(11));
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(first_diff(fr.bytes(), before), -1);
}

// ---- 10. Flush --------------------------------------------------------------------------------

TEST_F(RcNegative, FlushCancelsQueuedWorkInOrder) {
  // ndmemorytest NdReceiveFlushQP, extended to sends and to posts made after the flush.
  RcPair p("neg_flush");
  p.connect(1024);
  std::vector<uint8_t> buf(256, 0);
  const uint32_t key = p.a.reg(buf.data(), buf.size(), mr_flag::kAllowLocalWrite);
  constexpr uint32_t kN = 3;
  for (uint32_t i = 0; i < kN; ++i)
    ASSERT_EQ(p.a.qp->post_recv(recv_wr(ctx(10 + i), buf.data(), 64, key)), Status::kSuccess);
  for (uint32_t i = 0; i < kN; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(i), buf.data(), 64, key)),
              Status::kSuccess);
  // NdkFlush returns at once; the engine applies it at its next step, before sending anything.
  p.a.qp->flush();
  ASSERT_TRUE(p.wait_submitted(p.a));
  ASSERT_TRUE(p.run_until([&] { return p.a.qp->state() == QpState::kErr; }, 1));
  // Work posted to a QP in ERR is accepted and flushed (IBTA §10.3.1; rocev2.md §3.7).
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(kN), buf.data(), 64, key)),
            Status::kSuccess);
  ASSERT_EQ(p.a.qp->post_recv(recv_wr(ctx(10 + kN), buf.data(), 64, key)), Status::kSuccess);
  ASSERT_TRUE(p.wait(kN + 1, 0, 0, kN + 1));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), kN + 1);
  ASSERT_EQ(p.a.recv_done.size(), kN + 1);
  for (uint32_t i = 0; i <= kN; ++i) {
    expect_flushed(p.a.send_done[i], OperationType::kSend, ctx(i));
    expect_flushed(p.a.recv_done[i], OperationType::kReceive, ctx(10 + i));
  }
  // Nothing was transmitted: B saw nothing and is unaffected.
  EXPECT_EQ(p.b.recv_done.size() + p.b.send_done.size(), 0u);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kRts);
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
}

TEST_F(RcNegative, FlushCancelsSendsInFlight) {
  // B has no receive posted: A's SENDs are on the wire and RNR-NAKed (rnr_retry 7 = forever)
  // until the flush cancels them.
  RcPair p("neg_flush_rnr");
  p.connect(1024);
  std::vector<uint8_t> buf(256, 0);
  const uint32_t key = p.a.reg(buf.data(), buf.size(), mr_flag::kAllowLocalWrite);
  constexpr uint32_t kN = 3;
  for (uint32_t i = 0; i < kN; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(i), buf.data(), 64, key)),
              Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return p.a.qp->counters().rnr_naks_received >= 2; }));
  EXPECT_EQ(p.a.send_done.size(), 0u);
  p.a.qp->flush();
  ASSERT_TRUE(p.wait(kN, 0));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), kN);
  for (uint32_t i = 0; i < kN; ++i) expect_flushed(p.a.send_done[i], OperationType::kSend, ctx(i));
  EXPECT_EQ(p.a.recv_done.size() + p.b.recv_done.size() + p.b.send_done.size(), 0u);
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
}

// ---- 11. Entering ERR flushes what is queued behind the failure --------------------------------

TEST_F(RcNegative, FailedWriteFlushesEverythingBehindIt) {
  RcPair p("neg_err_flush");
  p.connect(1024);
  Guarded dst(4096, 39);
  const uint32_t kdst = p.b.reg(dst.region(), dst.size(), kRemoteAll);
  const auto before = dst.snapshot();
  std::vector<uint8_t> src(1024);
  fill(src, 40);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  post_b_receive(p);
  const uint32_t bad = dp::make_key(dp::key_index(kdst), dp::key_tag(kdst) ^ 0x5A);
  // All posted before the engine runs: the good requests are on the wire right behind the bad
  // WRITE, and the responder, in ERR after its NAK, drops them (they must not execute).
  ASSERT_EQ(
      p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(0), src.data(), 256, ksrc, dst.va(), bad)),
      Status::kSuccess);
  for (uint32_t i = 1; i <= 3; ++i)
    ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(i), src.data() + i * 256, 256, ksrc,
                                        dst.va() + i * 256, kdst)),
              Status::kSuccess);
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kSend, ctx(4), src.data(), 64, ksrc)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(5, 1));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 5u);
  ASSERT_EQ(p.b.recv_done.size(), 1u);
  EXPECT_EQ(p.a.recv_done.size() + p.b.send_done.size(), 0u);
  expect_result(p.a.send_done[0], Status::kAccessViolation, WcStatus::kRemAccessErr,
                OperationType::kWrite, ctx(0));
  for (uint32_t i = 1; i <= 3; ++i) expect_flushed(p.a.send_done[i], OperationType::kWrite, ctx(i));
  expect_flushed(p.a.send_done[4], OperationType::kSend, ctx(4));
  expect_flushed(p.b.recv_done[0], OperationType::kReceive, kBRecvCtx);
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(first_diff(dst.bytes, before), -1);
}

TEST_F(RcNegative, FailedWriteAfterGoodWrite) {
  // The NAK acknowledges everything before its PSN (rocev2.md §3.4): the first WRITE succeeds,
  // the second fails, the third is flushed.
  RcPair p("neg_err_mid");
  p.connect(1024);
  Guarded dst(4096, 41);
  const uint32_t kdst = p.b.reg(dst.region(), dst.size(), kRemoteAll);
  std::vector<uint8_t> src(1024);
  fill(src, 42);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  const uint32_t bad = dp::make_key(dp::key_index(kdst), dp::key_tag(kdst) ^ 0x5A);
  auto expected = dst.snapshot();
  std::memcpy(expected.data() + kGuard, src.data(), 256);
  ASSERT_EQ(
      p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(0), src.data(), 256, ksrc, dst.va(), kdst)),
      Status::kSuccess);
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(1), src.data() + 256, 256, ksrc,
                                      dst.va() + 256, bad)),
            Status::kSuccess);
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(2), src.data() + 512, 256, ksrc,
                                      dst.va() + 512, kdst)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(3, 0));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 3u);
  EXPECT_EQ(p.a.recv_done.size() + p.b.recv_done.size() + p.b.send_done.size(), 0u);
  expect_result(p.a.send_done[0], Status::kSuccess, WcStatus::kSuccess, OperationType::kWrite,
                ctx(0));
  expect_result(p.a.send_done[1], Status::kAccessViolation, WcStatus::kRemAccessErr,
                OperationType::kWrite, ctx(1));
  expect_flushed(p.a.send_done[2], OperationType::kWrite, ctx(2));
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(first_diff(dst.bytes, expected), -1);
}

TEST_F(RcNegative, ReadAndAtomicBeforeFailedWriteStillComplete) {
  // The responder answers in PSN order (IBTA §9.7.5.1; rocev2.md §3.4): the READ response and
  // the ATOMIC ACKNOWLEDGE of requests before the refused WRITE go out before its NAK, so those
  // requests complete successfully; only the WRITE fails.
  RcPair p("neg_err_rd");
  p.connect(1024);
  Guarded remote(4096, 43);
  const uint32_t krem = p.b.reg(remote.region(), remote.size(), kRemoteAll);
  uint64_t word = 0;
  std::memcpy(&word, remote.region() + 2048, 8);
  auto expected_remote = remote.snapshot();
  const uint64_t added = word + 5;
  std::memcpy(expected_remote.data() + kGuard + 2048, &added, 8);
  std::vector<uint8_t> sink(1024 + 8, 0);
  const uint32_t ksink = p.a.reg(sink.data(), sink.size(), mr_flag::kAllowLocalWrite);
  const uint32_t bad = dp::make_key(dp::key_index(krem), dp::key_tag(krem) ^ 0x5A);

  ASSERT_EQ(p.a.qp->post_send(
                data_wr(WrOpcode::kRead, ctx(0), sink.data(), 1024, ksink, remote.va(), krem)),
            Status::kSuccess);
  auto f =
      data_wr(WrOpcode::kFetchAdd, ctx(1), sink.data() + 1024, 8, ksink, remote.va() + 2048, krem);
  f.compare_add = 5;
  ASSERT_EQ(p.a.qp->post_send(f), Status::kSuccess);
  ASSERT_EQ(p.a.qp->post_send(
                data_wr(WrOpcode::kWrite, ctx(2), sink.data(), 64, ksink, remote.va() + 3072, bad)),
            Status::kSuccess);
  ASSERT_EQ(p.a.qp->post_send(data_wr(WrOpcode::kWrite, ctx(3), sink.data(), 64, ksink,
                                      remote.va() + 3072, krem)),
            Status::kSuccess);
  ASSERT_TRUE(p.wait(4, 0));
  settle(p);
  ASSERT_EQ(p.a.send_done.size(), 4u);
  EXPECT_EQ(p.a.recv_done.size() + p.b.recv_done.size() + p.b.send_done.size(), 0u);
  expect_result(p.a.send_done[0], Status::kSuccess, WcStatus::kSuccess, OperationType::kRead,
                ctx(0));
  expect_result(p.a.send_done[1], Status::kSuccess, WcStatus::kSuccess, OperationType::kFetchAdd,
                ctx(1));
  expect_result(p.a.send_done[2], Status::kAccessViolation, WcStatus::kRemAccessErr,
                OperationType::kWrite, ctx(2));
  expect_flushed(p.a.send_done[3], OperationType::kWrite, ctx(3));
  EXPECT_EQ(std::memcmp(sink.data(), remote.region(), 1024), 0);
  uint64_t orig = 0;
  std::memcpy(&orig, sink.data() + 1024, 8);
  EXPECT_EQ(orig, word);
  EXPECT_EQ(first_diff(remote.bytes, expected_remote), -1);
  EXPECT_EQ(p.a.qp->state(), dp::QpState::kErr);
  EXPECT_EQ(p.b.qp->state(), dp::QpState::kErr);
}

}  // namespace
}  // namespace urnic::test
