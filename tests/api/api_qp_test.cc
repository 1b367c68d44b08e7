// QP operations through the public API: send / receive (with SGE lists, inline, solicited,
// zero length), read, write, send-and-invalidate, the immediate-data and atomic extensions,
// flags (silent success, read fence), posting limits, flush, and the ND2 conformance cases of
// ndkpi.md §7.6 that concern QPs (receive smaller than the send, send with no receive posted,
// receives flushed). Each expects the exact NTSTATUS.
#include <cstring>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiQp : public EalTest {};

TEST_F(ApiQp, SendReceiveWithSgeListsAndContexts) {
  ConnectedPair p("qp_send");
  std::vector<uint8_t> src(3000), dst(3000, 0);
  fill(src, 1);
  auto ms = p.a.reg(src.data(), src.size(), 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowLocalWrite);
  // Three receive SGEs, two send SGEs.
  const Sge rs[] = {{addr(dst.data()), 1000, md->get_local_token()},
                    {addr(dst.data() + 1000), 1000, md->get_local_token()},
                    {addr(dst.data() + 2000), 1000, md->get_local_token()}};
  ASSERT_EQ(p.b.qp->receive(ctx(7), rs), Status::kSuccess);
  const Sge ss[] = {{addr(src.data()), 1500, ms->get_local_token()},
                    {addr(src.data() + 1500), 1500, ms->get_local_token()}};
  ASSERT_EQ(p.a.qp->send(ctx(1), ss, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 1));
  const ResultEx& sc = p.a.done[0];
  EXPECT_EQ(sc.status, Status::kSuccess);
  EXPECT_EQ(sc.type, OperationType::kSend);
  EXPECT_EQ(sc.request_context, ctx(1));
  EXPECT_EQ(sc.qp_context, &p.a);
  const ResultEx& rc = p.b.done[0];
  EXPECT_EQ(rc.status, Status::kSuccess);
  EXPECT_EQ(rc.type, OperationType::kReceive);
  EXPECT_EQ(rc.bytes_transferred, 3000u);
  EXPECT_EQ(rc.request_context, ctx(7));
  EXPECT_EQ(rc.qp_context, &p.b);
  EXPECT_EQ(dst, src);
}

TEST_F(ApiQp, InlineSendAndWriteReuseTheBufferAtOnce) {
  ConnectedPair p("qp_inline");
  std::vector<uint8_t> dst(512, 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  const Sge rs{addr(dst.data()), 256, md->get_local_token()};
  ASSERT_EQ(p.b.qp->receive(nullptr, {&rs, 1}), Status::kSuccess);
  uint8_t buf[200];
  for (int i = 0; i < 200; ++i) buf[i] = static_cast<uint8_t>(i);
  // Tokens of inline SGEs are ignored; the bytes are copied during the call.
  const Sge in[] = {{addr(buf), 100, 0xDEAD}, {addr(buf + 100), 100, 0xBEEF}};
  ASSERT_EQ(p.a.qp->send(ctx(1), in, op_flag::kInline), Status::kSuccess);
  std::memset(buf, 0xFF, sizeof(buf));
  const Sge w{addr(buf), 8, 0};
  ASSERT_EQ(p.a.qp->write(ctx(2), {&w, 1}, addr(dst.data() + 300), md->get_remote_token(),
                          op_flag::kInline),
            Status::kSuccess);
  std::memset(buf, 0, 8);
  ASSERT_TRUE(p.wait_done(2, 1));
  for (int i = 0; i < 200; ++i) ASSERT_EQ(dst[i], static_cast<uint8_t>(i)) << i;
  for (int i = 300; i < 308; ++i) ASSERT_EQ(dst[i], 0xFF) << i;
  EXPECT_EQ(p.b.done[0].bytes_transferred, 200u);
}

TEST_F(ApiQp, ReadAndWriteMoveEveryByte) {
  ConnectedPair p("qp_rdma");
  std::vector<uint8_t> local(100000), remote(100000), back(100000, 0);
  fill(local, 3);
  auto ml = p.a.reg(local.data(), local.size(), 0);
  auto mb = p.a.reg(back.data(), back.size(), mr_flag::kAllowLocalWrite);
  auto mr =
      p.b.reg(remote.data(), remote.size(), mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead);
  const Sge ws{addr(local.data()), 100000, ml->get_local_token()};
  ASSERT_EQ(p.a.qp->write(ctx(1), {&ws, 1}, addr(remote.data()), mr->get_remote_token(), 0),
            Status::kSuccess);
  const Sge rs{addr(back.data()), 100000, mb->get_local_token()};
  // The fence keeps the READ behind nothing here (no earlier READ); it is accepted.
  ASSERT_EQ(p.a.qp->read(ctx(2), {&rs, 1}, addr(remote.data()), mr->get_remote_token(),
                         op_flag::kReadFence),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 0));
  EXPECT_EQ(p.a.done[0].type, OperationType::kWrite);
  EXPECT_EQ(p.a.done[1].type, OperationType::kRead);
  EXPECT_EQ(p.a.done[1].status, Status::kSuccess);
  EXPECT_EQ(remote, local);
  EXPECT_EQ(back, local);
}

// READ_FENCE: a WRITE into the bytes a long READ is reading waits until the READ completed, so
// the READ returns the bytes from before the WRITE.
TEST_F(ApiQp, ReadFenceHoldsAWriteBehindEarlierReads) {
  ApiPair p("qp_fence");
  ConnectParams cp;
  cp.mtu = 256;  // a 64 KiB READ is 256 response packets
  p.connect(cp);
  std::vector<uint8_t> remote(64 * 1024), local(64 * 1024, 0);
  fill(remote, 11);
  const std::vector<uint8_t> before = remote;
  auto mr =
      p.b.reg(remote.data(), remote.size(), mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteWrite);
  auto ml = p.a.reg(local.data(), local.size(), mr_flag::kAllowLocalWrite);
  const Sge rs{addr(local.data()), static_cast<uint32_t>(local.size()), ml->get_local_token()};
  ASSERT_EQ(p.a.qp->read(ctx(1), {&rs, 1}, addr(remote.data()), mr->get_remote_token(), 0),
            Status::kSuccess);
  uint64_t v = 0xFFFFFFFFFFFFFFFFull;
  const Sge ws{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->write(ctx(2), {&ws, 1}, addr(remote.data()) + remote.size() - 8,
                          mr->get_remote_token(), op_flag::kInline | op_flag::kReadFence),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.a.done[1].status, Status::kSuccess);
  EXPECT_EQ(local, before);
  EXPECT_EQ(remote[remote.size() - 1], 0xFF);
}

// ND2: nSge 0 is allowed: zero-byte sends, writes and reads complete normally.
TEST_F(ApiQp, ZeroLengthRequests) {
  ConnectedPair p("qp_zero");
  std::vector<uint8_t> dst(64, 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  ASSERT_EQ(p.b.qp->receive(ctx(1), {}), Status::kSuccess);
  ASSERT_EQ(p.a.qp->send(ctx(2), {}, 0), Status::kSuccess);
  ASSERT_EQ(p.a.qp->write(ctx(3), {}, addr(dst.data()), md->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_EQ(p.a.qp->read(ctx(4), {}, addr(dst.data()), md->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(3, 1));
  for (const auto& r : p.a.done) EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].bytes_transferred, 0u);
}

TEST_F(ApiQp, ImmediateDataAndAtomicsThroughTheExtension) {
  ConnectedPair p("qp_ext");
  auto* ext = p.a.qp->query_extension<QpExtension>();
  ASSERT_NE(ext, nullptr);
  // An unknown interface, or a newer major, is not supported.
  void* iface = nullptr;
  EXPECT_EQ(p.a.qp->query_extension(ExtensionId{1, 2}, Version{1, 0}, &iface),
            Status::kNotSupported);
  EXPECT_EQ(p.a.qp->query_extension(QpExtension::kId, Version{2, 0}, &iface),
            Status::kNotSupported);
  EXPECT_EQ(p.a.cq->query_extension<QpExtension>(), nullptr);

  std::vector<uint8_t> dst(64, 0);
  alignas(8) uint64_t word[2] = {10, 100};
  alignas(8) uint64_t result[2] = {0, 0};
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite);
  auto mw = p.b.reg(word, sizeof(word), mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteAtomic);
  auto mres = p.a.reg(result, sizeof(result), mr_flag::kAllowLocalWrite);
  const Sge r1{addr(dst.data()), 16, md->get_local_token()};
  ASSERT_EQ(p.b.qp->receive(ctx(10), {&r1, 1}), Status::kSuccess);
  ASSERT_EQ(p.b.qp->receive(ctx(11), {}), Status::kSuccess);  // for the write with immediate
  uint8_t payload[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const Sge ps{addr(payload), 8, 0};
  ASSERT_EQ(ext->send_with_immediate(ctx(1), {&ps, 1}, op_flag::kInline, 0xA1B2C3D4),
            Status::kSuccess);
  ASSERT_EQ(ext->write_with_immediate(ctx(2), {&ps, 1}, addr(dst.data() + 32),
                                      md->get_remote_token(), op_flag::kInline, 0x01020304),
            Status::kSuccess);
  const Sge res0{addr(&result[0]), 8, mres->get_local_token()};
  const Sge res1{addr(&result[1]), 8, mres->get_local_token()};
  ASSERT_EQ(ext->compare_swap(ctx(3), res0, addr(&word[0]), mw->get_remote_token(), 10, 77, 0),
            Status::kSuccess);
  ASSERT_EQ(ext->fetch_add(ctx(4), res1, addr(&word[1]), mw->get_remote_token(), 5, 0),
            Status::kSuccess);
  // Misaligned atomics and a result buffer that is not 8 bytes fail inline.
  EXPECT_EQ(ext->fetch_add(nullptr, res1, addr(&word[1]) + 1, mw->get_remote_token(), 5, 0),
            Status::kInvalidParameter);
  const Sge bad{addr(&result[1]), 4, mres->get_local_token()};
  EXPECT_EQ(ext->fetch_add(nullptr, bad, addr(&word[1]), mw->get_remote_token(), 5, 0),
            Status::kInvalidParameter);
  ASSERT_TRUE(p.wait_done(4, 2));
  EXPECT_EQ(p.a.done[2].type, OperationType::kCompareSwap);
  EXPECT_EQ(p.a.done[3].type, OperationType::kFetchAdd);
  for (const auto& r : p.a.done) EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(word[0], 77u);
  EXPECT_EQ(word[1], 105u);
  EXPECT_EQ(result[0], 10u);
  EXPECT_EQ(result[1], 100u);
  const ResultEx& s1 = p.b.done[0];
  EXPECT_EQ(s1.request_context, ctx(10));
  EXPECT_TRUE(s1.flags & kResultHasImmediate);
  EXPECT_EQ(s1.type_specific_completion_output, 0xA1B2C3D4u);
  EXPECT_EQ(s1.bytes_transferred, 8u);
  const ResultEx& s2 = p.b.done[1];
  EXPECT_EQ(s2.request_context, ctx(11));
  EXPECT_TRUE(s2.flags & kResultHasImmediate);
  EXPECT_EQ(s2.type_specific_completion_output, 0x01020304u);
  EXPECT_EQ(s2.bytes_transferred, 8u);
  EXPECT_EQ(std::memcmp(dst.data(), payload, 8), 0);
  EXPECT_EQ(std::memcmp(dst.data() + 32, payload, 8), 0);
}

TEST_F(ApiQp, SilentSuccessCompletesNothingButErrorsDo) {
  ConnectedPair p("qp_silent");
  std::vector<uint8_t> dst(64, 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  uint64_t v = 42;
  const Sge s{addr(&v), 8, 0};
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(p.a.qp->write(ctx(i), {&s, 1}, addr(dst.data()), md->get_remote_token(),
                            op_flag::kInline | op_flag::kSilentSuccess),
              Status::kSuccess);
  }
  ASSERT_EQ(
      p.a.qp->write(ctx(4), {&s, 1}, addr(dst.data()), md->get_remote_token(), op_flag::kInline),
      Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  p.run_for(std::chrono::milliseconds(20));
  ASSERT_EQ(p.a.done.size(), 1u);
  EXPECT_EQ(p.a.done[0].request_context, ctx(4));
  // A silent request that fails still completes: one byte past the region.
  ASSERT_EQ(p.a.qp->write(ctx(5), {&s, 1}, addr(dst.data()) + 57, md->get_remote_token(),
                          op_flag::kInline | op_flag::kSilentSuccess),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 0));
  EXPECT_EQ(p.a.done[1].status, Status::kAccessViolation);
  EXPECT_EQ(p.a.done[1].request_context, ctx(5));
}

TEST_F(ApiQp, FlagsNotValidForTheOperationFailInline) {
  ConnectedPair p("qp_flags");
  const LocalBuffer buf(p.a, 8);
  EXPECT_EQ(p.a.qp->read(nullptr, {&buf.sge, 1}, 0x1000, 1, op_flag::kInline),
            Status::kInvalidParameter);
  EXPECT_EQ(p.a.qp->write(nullptr, {&buf.sge, 1}, 0x1000, 1, op_flag::kSendAndSolicitEvent),
            Status::kInvalidParameter);
  EXPECT_EQ(p.a.qp->send(nullptr, {&buf.sge, 1}, op_flag::kAllowRemoteRead),
            Status::kInvalidParameter);
  EXPECT_EQ(p.a.qp->send(nullptr, {&buf.sge, 1}, 0x80000000u), Status::kInvalidParameter);
  EXPECT_EQ(p.a.qp->invalidate(nullptr, *p.a.cq, 0), Status::kInvalidParameter);
  // A normally registered MR is deregistered, not invalidated.
  EXPECT_EQ(p.a.qp->invalidate(nullptr, *buf.mr, 0), Status::kInvalidParameter);
  p.run_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(p.a.done.empty());  // failed posts never complete
}

TEST_F(ApiQp, PostingBeforeConnectAndReceiveOnNewQp) {
  ApiPair p("qp_state");
  Handle<Qp> q;
  ASSERT_EQ(p.a.pd->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q),
            Status::kSuccess);
  EXPECT_EQ(q->query_extension<QpConnectExtension>()->state(), QpState::kInit);
  const LocalBuffer buf(p.a, 8);
  // NDK: receives may be posted before the connection; initiator posts need one.
  EXPECT_EQ(q->receive(ctx(1), {&buf.sge, 1}), Status::kSuccess);
  EXPECT_EQ(q->send(ctx(2), {&buf.sge, 1}, 0), Status::kConnectionInvalid);
  EXPECT_EQ(q->write(ctx(3), {&buf.sge, 1}, 0x1000, 1, 0), Status::kConnectionInvalid);
  // Closing the QP flushes the receive.
  Completion closed;
  ASSERT_EQ(q.close(&Completion::on_close, &closed), Status::kPending);
  ASSERT_TRUE(p.run_until([&] { return closed.count() == 1 && p.a.done.size() == 1; }));
  EXPECT_EQ(p.a.done[0].status, Status::kCancelled);
  EXPECT_EQ(p.a.done[0].request_context, ctx(1));
}

// ND2 NdReceiveFlushQP: two receives, then Flush: both complete STATUS_CANCELLED, in order; a
// send posted after the flush completes cancelled too.
TEST_F(ApiQp, FlushCancelsReceivesInOrder) {
  ConnectedPair p("qp_flush");
  const LocalBuffer buf(p.b, 32);
  ASSERT_EQ(p.b.qp->receive(ctx(1), {&buf.sge, 1}), Status::kSuccess);
  ASSERT_EQ(p.b.qp->receive(ctx(2), {&buf.sge, 1}), Status::kSuccess);
  p.b.qp->flush();
  ASSERT_TRUE(p.wait_done(0, 2));
  EXPECT_EQ(p.b.done[0].status, Status::kCancelled);
  EXPECT_EQ(p.b.done[0].request_context, ctx(1));
  EXPECT_EQ(p.b.done[0].provider_error_code, static_cast<uint32_t>(WcStatus::kWrFlushErr));
  EXPECT_EQ(p.b.done[1].status, Status::kCancelled);
  EXPECT_EQ(p.b.done[1].request_context, ctx(2));
  EXPECT_EQ(p.b.qp->query_extension<QpConnectExtension>()->state(), QpState::kErr);
  uint64_t v = 1;
  const Sge in{addr(&v), 8, 0};
  ASSERT_EQ(p.b.qp->send(ctx(3), {&in, 1}, op_flag::kInline), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 3));
  EXPECT_EQ(p.b.done[2].status, Status::kCancelled);
  EXPECT_EQ(p.b.done[2].type, OperationType::kSend);
}

// ndmval: a 1024-byte send into a 1023-byte receive. The receiver sees BUFFER_OVERFLOW, the
// sender REMOTE_RESOURCES (IB behaviour, which RoCE follows; ndkpi.md §7.6).
TEST_F(ApiQp, ReceiveSmallerThanTheSend) {
  ConnectedPair p("qp_small");
  std::vector<uint8_t> src(1024, 7), dst(1023, 0);
  auto ms = p.a.reg(src.data(), src.size(), 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowLocalWrite);
  const Sge r{addr(dst.data()), 1023, md->get_local_token()};
  ASSERT_EQ(p.b.qp->receive(ctx(1), {&r, 1}), Status::kSuccess);
  const Sge s{addr(src.data()), 1024, ms->get_local_token()};
  ASSERT_EQ(p.a.qp->send(ctx(2), {&s, 1}, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 1));
  EXPECT_EQ(p.b.done[0].status, Status::kBufferOverflow);
  EXPECT_EQ(p.a.done[0].status, Status::kRemoteResources);
}

// ND2 NdSendNoReceive: a send with no receive posted at the peer fails with IO_TIMEOUT once the
// RNR retries are exhausted.
TEST_F(ApiQp, SendWithNoReceivePostedTimesOut) {
  ApiPair p("qp_rnr");
  ConnectParams cp;
  cp.rnr_retry = 3;
  cp.min_rnr_timer = 1;
  p.connect(cp);
  uint64_t v = 5;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->send(ctx(1), {&s, 1}, op_flag::kInline), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kIoTimeout);
  EXPECT_EQ(p.a.done[0].provider_error_code, static_cast<uint32_t>(WcStatus::kRnrRetryExcErr));
}

TEST_F(ApiQp, QueueDepthIsExactAndSilentRequestsCount) {
  ApiPair p("qp_depth");
  Handle<Qp> qa, qb;
  // Depths that are not powers of two: the limit is the depth, not the ring's capacity.
  ASSERT_NO_FATAL_FAILURE(p.connect_more_qps(3, 5, 64, &qa, &qb));
  std::vector<uint8_t> dst(64);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  uint64_t v = 9;
  const Sge s{addr(&v), 8, 0};
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(qa->write(ctx(i), {&s, 1}, addr(dst.data()), md->get_remote_token(),
                        op_flag::kInline | op_flag::kSilentSuccess | op_flag::kDefer),
              Status::kSuccess)
        << i;
  }
  // The sixth fails inline (and rings the doorbell for the five deferred ones).
  EXPECT_EQ(qa->write(ctx(5), {&s, 1}, addr(dst.data()), md->get_remote_token(), op_flag::kInline),
            Status::kNoMoreEntries);
  // Once the silent ones retired, there is room again.
  ASSERT_TRUE(p.run_until([&] {
    return qa->write(ctx(6), {&s, 1}, addr(dst.data()), md->get_remote_token(), op_flag::kInline) ==
           Status::kSuccess;
  }));
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].request_context, ctx(6));
  // Receive queue: three, then full.
  const Sge r{addr(dst.data()), 8, md->get_local_token()};
  for (int i = 0; i < 3; ++i) ASSERT_EQ(qb->receive(ctx(i), {&r, 1}), Status::kSuccess);
  EXPECT_EQ(qb->receive(ctx(3), {&r, 1}), Status::kNoMoreEntries);
}

// urnic extension: a QP's own congestion-control settings through QpConnectExtension::modify
// (qp_attr_mask::kCongestion), allowed up to RTR and checked against the adapter's ranges; a
// maximum rate left 0 becomes the adapter's (its link speed: net_ring reports 10 Gb/s).
TEST_F(ApiQp, PerQpCongestionSettingsThroughTheExtension) {
  ApiPair p("qp_cc");
  Handle<Qp> q;
  ASSERT_EQ(p.a.pd->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q),
            Status::kSuccess);
  auto* ext = q->query_extension<QpConnectExtension>();
  ASSERT_NE(ext, nullptr);
  QpAttributes before;
  ASSERT_EQ(ext->query(&before), Status::kSuccess);
  EXPECT_TRUE(before.congestion.enabled);  // the adapter's default
  EXPECT_NE(before.congestion.dcqcn.max_rate_mbps, 0u);
  using namespace qp_attr_mask;
  QpAttributes at;
  at.state = QpState::kInit;
  at.congestion.dscp = 64;  // out of range
  EXPECT_EQ(ext->modify(at, kState | kCongestion, nullptr, nullptr), Status::kInvalidParameter);
  at.congestion = congestion_slow_fabric();
  at.congestion.enabled = false;
  at.congestion.dscp = 26;
  ASSERT_EQ(ext->modify(at, kState | kCongestion, nullptr, nullptr), Status::kSuccess);
  QpAttributes after;
  ASSERT_EQ(ext->query(&after), Status::kSuccess);
  EXPECT_FALSE(after.congestion.enabled);
  EXPECT_EQ(after.congestion.dscp, 26);
  EXPECT_EQ(after.congestion.cnp_interval_us, 50u);
  EXPECT_EQ(after.congestion.dcqcn.time_reset_us, 1500u);
  EXPECT_EQ(after.congestion.dcqcn.max_rate_mbps, before.congestion.dcqcn.max_rate_mbps);
}

}  // namespace
}  // namespace urnic::test
