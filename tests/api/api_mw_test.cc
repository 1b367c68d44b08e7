// Memory windows through the public API, after ND2's ndmw and ndmemorytest (ndkpi.md §7.6):
// binds at varying offsets with data validated both ways, writes to a read-only window
// (NdWriteViolation), RDMA to an invalidated window (NdInvalidRead / NdInvalidWrite), accesses
// beyond the window (NdOverRead / NdOverWrite), deregistering an MR with a bound window
// (NdMRDeregister), rebinding, remote invalidation, the type-2 "bound to one QP" rule, and the
// NdkBind inline errors.
#include <cstring>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiMw : public EalTest {};

// b owns the memory and binds windows on its QP (the one a's requests arrive on).
struct Server {
  explicit Server(ApiPair& p, size_t len, uint32_t mr_flags = mr_flag::kAllowLocalWrite)
      : buf(len, 0) {
    mr = p.b.reg(buf.data(), buf.size(), mr_flags);
    EXPECT_EQ(p.b.pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess);
  }
  std::vector<uint8_t> buf;
  Handle<Mr> mr;
  Handle<Mw> mw;
};

TEST_F(ApiMw, BindsAtVaryingOffsetsMoveDataBothWays) {
  ConnectedPair p("mw_offsets");
  constexpr size_t kLen = 4 << 20, kWin = 8192;
  Server s(p, kLen);
  std::vector<uint8_t> src(kWin), back(kWin);
  auto ms = p.a.reg(src.data(), src.size(), 0);
  auto mb = p.a.reg(back.data(), back.size(), mr_flag::kAllowLocalWrite);
  const size_t offsets[] = {0, 1, 4095, 4096, 65537, (1 << 20) + 3, kLen - kWin};
  uint32_t prev = s.mw->get_remote_token();
  size_t a_done = 0, b_done = 0;
  uint32_t seed = 0;
  for (size_t off : offsets) {
    SCOPED_TRACE(off);
    uint8_t* win = s.buf.data() + off;
    ASSERT_EQ(p.b.qp->bind(ctx(off), *s.mr, *s.mw, win, kWin,
                           op_flag::kAllowRemoteRead | op_flag::kAllowRemoteWrite),
              Status::kSuccess);
    // The token changes with every bind and is readable before the bind completes.
    const uint32_t token = s.mw->get_remote_token();
    EXPECT_NE(token, prev);
    prev = token;
    ASSERT_TRUE(p.wait_done(a_done, ++b_done));
    EXPECT_EQ(p.b.done.back().type, OperationType::kBind);
    EXPECT_EQ(p.b.done.back().status, Status::kSuccess);
    fill(src, ++seed);
    const Sge ws{addr(src.data()), static_cast<uint32_t>(kWin), ms->get_local_token()};
    ASSERT_EQ(p.a.qp->write(ctx(1), {&ws, 1}, addr(win), token, 0), Status::kSuccess);
    const Sge rs{addr(back.data()), static_cast<uint32_t>(kWin), mb->get_local_token()};
    ASSERT_EQ(p.a.qp->read(ctx(2), {&rs, 1}, addr(win), token, 0), Status::kSuccess);
    a_done += 2;
    ASSERT_TRUE(p.wait_done(a_done, b_done));
    EXPECT_EQ(p.a.done[a_done - 2].status, Status::kSuccess);
    EXPECT_EQ(p.a.done[a_done - 1].status, Status::kSuccess);
    EXPECT_EQ(std::memcmp(win, src.data(), kWin), 0);
    EXPECT_EQ(back, src);
    // Invalidate before the next bind (rebinding requires it).
    ASSERT_EQ(p.b.qp->invalidate(ctx(3), *s.mw, 0), Status::kSuccess);
    ASSERT_TRUE(p.wait_done(a_done, ++b_done));
    EXPECT_EQ(p.b.done.back().type, OperationType::kInvalidate);
    EXPECT_EQ(p.b.done.back().status, Status::kSuccess);
  }
}

// NdWriteViolation: a write into a read-only window fails at the initiator with
// ACCESS_VIOLATION, and the peer's posted receive is cancelled (the connection is gone).
TEST_F(ApiMw, WriteToReadOnlyWindow) {
  ConnectedPair p("mw_ro");
  Server s(p, 8192);
  ASSERT_EQ(p.b.qp->bind(ctx(1), *s.mr, *s.mw, s.buf.data(), 4096, op_flag::kAllowRemoteRead),
            Status::kSuccess);
  const LocalBuffer rbuf(p.b, 64);
  ASSERT_EQ(p.b.qp->receive(ctx(2), {&rbuf.sge, 1}), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  uint64_t v = 0xFFFF;
  const Sge w{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->write(ctx(3), {&w, 1}, addr(s.buf.data()), s.mw->get_remote_token(),
                          op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 2));
  EXPECT_EQ(p.a.done[0].status, Status::kAccessViolation);
  EXPECT_EQ(p.b.done[1].request_context, ctx(2));
  EXPECT_EQ(p.b.done[1].status, Status::kCancelled);
  EXPECT_EQ(s.buf[0], 0);
}

// NdInvalidRead / NdInvalidWrite: RDMA to an invalidated window.
TEST_F(ApiMw, ReadAndWriteThroughAnInvalidatedWindow) {
  for (const bool read : {true, false}) {
    SCOPED_TRACE(read ? "read" : "write");
    ApiPair p(read ? "mw_inv_r" : "mw_inv_w");
    p.connect();
    Server s(p, 8192);
    ASSERT_EQ(p.b.qp->bind(ctx(1), *s.mr, *s.mw, s.buf.data(), 8192,
                           op_flag::kAllowRemoteRead | op_flag::kAllowRemoteWrite),
              Status::kSuccess);
    const uint32_t token = s.mw->get_remote_token();
    ASSERT_EQ(p.b.qp->invalidate(ctx(2), *s.mw, 0), Status::kSuccess);
    const LocalBuffer rbuf(p.b, 64);
    ASSERT_EQ(p.b.qp->receive(ctx(3), {&rbuf.sge, 1}), Status::kSuccess);
    ASSERT_TRUE(p.wait_done(0, 2));
    const LocalBuffer lbuf(p.a, 64);
    const Status st = read ? p.a.qp->read(ctx(4), {&lbuf.sge, 1}, addr(s.buf.data()), token, 0)
                           : p.a.qp->write(ctx(4), {&lbuf.sge, 1}, addr(s.buf.data()), token, 0);
    ASSERT_EQ(st, Status::kSuccess);
    ASSERT_TRUE(p.wait_done(1, 3));
    EXPECT_EQ(p.a.done[0].status, Status::kAccessViolation);
    EXPECT_EQ(p.b.done[2].status, Status::kCancelled);
  }
}

// NdOverRead / NdOverWrite: one byte beyond the window (still inside the MR).
TEST_F(ApiMw, AccessBeyondTheWindow) {
  for (const bool read : {true, false}) {
    SCOPED_TRACE(read ? "read" : "write");
    ApiPair p(read ? "mw_over_r" : "mw_over_w");
    p.connect();
    Server s(p, 8192);
    uint8_t* win = s.buf.data() + 1000;
    ASSERT_EQ(p.b.qp->bind(ctx(1), *s.mr, *s.mw, win, 1000,
                           op_flag::kAllowRemoteRead | op_flag::kAllowRemoteWrite),
              Status::kSuccess);
    ASSERT_TRUE(p.wait_done(0, 1));
    const LocalBuffer lbuf(p.a, 64);
    // The last 64 bytes of the window pass ...
    const uint64_t ok = addr(win) + 1000 - 64;
    const uint32_t token = s.mw->get_remote_token();
    ASSERT_EQ(read ? p.a.qp->read(ctx(2), {&lbuf.sge, 1}, ok, token, 0)
                   : p.a.qp->write(ctx(2), {&lbuf.sge, 1}, ok, token, 0),
              Status::kSuccess);
    ASSERT_TRUE(p.wait_done(1, 1));
    EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
    // ... one byte further does not.
    ASSERT_EQ(read ? p.a.qp->read(ctx(3), {&lbuf.sge, 1}, ok + 1, token, 0)
                   : p.a.qp->write(ctx(3), {&lbuf.sge, 1}, ok + 1, token, 0),
              Status::kSuccess);
    ASSERT_TRUE(p.wait_done(2, 1));
    EXPECT_EQ(p.a.done[1].status, Status::kAccessViolation);
  }
}

// NdMRDeregister: an MR with a bound window cannot be deregistered (DEVICE_BUSY); after the
// invalidate it can. An MR closed while a window is bound closes when the window goes.
TEST_F(ApiMw, DeregisterWithABoundWindowIsBusy) {
  ConnectedPair p("mw_dereg");
  Server s(p, 8192);
  ASSERT_EQ(p.b.qp->bind(ctx(1), *s.mr, *s.mw, s.buf.data(), 4096, op_flag::kAllowRemoteRead),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  EXPECT_EQ(s.mr->deregister_mr(nullptr, nullptr), Status::kDeviceBusy);
  ASSERT_EQ(p.b.qp->invalidate(ctx(2), *s.mw, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 2));
  EXPECT_EQ(s.mr->deregister_mr(nullptr, nullptr), Status::kSuccess);
  // Bound again over a new registration, then the MR is closed first: its close pends until
  // the window is closed.
  ASSERT_EQ(
      s.mr->register_mr(s.buf.data(), s.buf.size(), mr_flag::kAllowLocalWrite, nullptr, nullptr),
      Status::kSuccess);
  ASSERT_EQ(p.b.qp->bind(ctx(3), *s.mr, *s.mw, s.buf.data(), 4096, op_flag::kAllowRemoteWrite),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 3));
  EXPECT_EQ(p.b.done[2].status, Status::kSuccess);
  Completion mr_closed, mw_closed;
  ASSERT_EQ(s.mr.close(&Completion::on_close, &mr_closed), Status::kPending);
  p.run_for(kQuiet);
  EXPECT_EQ(mr_closed.count(), 0);
  // Closing the window unbinds it (no callback: it closes at once) and frees the MR.
  EXPECT_EQ(s.mw.close(&Completion::on_close, &mw_closed), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return mr_closed.count() == 1; }));
  EXPECT_EQ(mw_closed.count(), 0);
}

TEST_F(ApiMw, RebindWithoutInvalidateCompletesWithInvalidDeviceRequest) {
  ConnectedPair p("mw_rebind");
  Server s(p, 8192);
  // A window of another PD (b's, posted on a's QP) fails inline.
  EXPECT_EQ(p.a.qp->invalidate(ctx(1), *s.mw, 0), Status::kInvalidParameter);
  EXPECT_EQ(p.a.qp->bind(ctx(1), *s.mr, *s.mw, s.buf.data(), 64, op_flag::kAllowRemoteRead),
            Status::kInvalidParameter);
  Handle<Mw> win;
  ASSERT_EQ(p.b.pd->create_mw(nullptr, nullptr, &win), Status::kSuccess);
  ASSERT_EQ(p.b.qp->bind(ctx(2), *s.mr, *win, s.buf.data(), 4096, op_flag::kAllowRemoteRead),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  // A second bind without invalidate completes with INVALID_DEVICE_REQUEST.
  ASSERT_EQ(p.b.qp->bind(ctx(3), *s.mr, *win, s.buf.data(), 4096, op_flag::kAllowRemoteRead),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 2));
  EXPECT_EQ(p.b.done[1].status, Status::kInvalidDeviceRequest);
  EXPECT_EQ(p.b.done[1].type, OperationType::kBind);
}

TEST_F(ApiMw, InvalidateOfAnUnboundWindowCompletesWithInvalidDeviceRequest) {
  ConnectedPair p("mw_unbound");
  Handle<Mw> mw;
  ASSERT_EQ(p.b.pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess);
  ASSERT_EQ(p.b.qp->invalidate(ctx(1), *mw, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  EXPECT_EQ(p.b.done[0].status, Status::kInvalidDeviceRequest);
  EXPECT_EQ(p.b.done[0].type, OperationType::kInvalidate);
}

TEST_F(ApiMw, BindInlineErrors) {
  ConnectedPair p("mw_binderr");
  Server ro(p, 8192, 0);  // an MR without local write
  Server rw(p, 8192);
  Qp& q = *p.b.qp;
  // NdkBind: a window granting write needs an MR with local write.
  EXPECT_EQ(q.bind(nullptr, *ro.mr, *ro.mw, ro.buf.data(), 100, op_flag::kAllowRemoteWrite),
            Status::kAccessViolation);
  EXPECT_EQ(q.bind(nullptr, *ro.mr, *ro.mw, ro.buf.data(), 100, op_flag::kAllowRemoteAtomic),
            Status::kAccessViolation);
  // Outside the MR, zero address, unknown flags.
  EXPECT_EQ(q.bind(nullptr, *rw.mr, *rw.mw, rw.buf.data() + 8000, 193, op_flag::kAllowRemoteRead),
            Status::kInvalidParameter);
  EXPECT_EQ(q.bind(nullptr, *rw.mr, *rw.mw, nullptr, 100, op_flag::kAllowRemoteRead),
            Status::kInvalidParameter);
  EXPECT_EQ(q.bind(nullptr, *rw.mr, *rw.mw, rw.buf.data(), 100, op_flag::kInline),
            Status::kInvalidParameter);
  // A fast-register MR cannot carry windows.
  Handle<Mr> fr = p.b.fast_mr(2);
  ASSERT_TRUE(fr);
  EXPECT_EQ(q.bind(nullptr, *fr, *rw.mw, rw.buf.data(), 100, op_flag::kAllowRemoteRead),
            Status::kInvalidParameter);
  // A read-only window over the read-only MR is fine; the largest range is the whole MR.
  EXPECT_EQ(q.bind(ctx(1), *ro.mr, *ro.mw, ro.buf.data(), 8192, op_flag::kAllowRemoteRead),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
}

// Type 2 windows: accessible only through the QP they are bound to.
TEST_F(ApiMw, WindowIsBoundToOneQp) {
  ConnectedPair p("mw_qp");
  Server s(p, 8192);
  Handle<Qp> qa2, qb2;
  ASSERT_NO_FATAL_FAILURE(p.connect_more_qps(8, 8, 64, &qa2, &qb2));
  ASSERT_EQ(p.b.qp->bind(ctx(1), *s.mr, *s.mw, s.buf.data(), 4096, op_flag::kAllowRemoteWrite),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  uint64_t v = 0x77;
  const Sge w{addr(&v), 8, 0};
  // Through the bound QP: fine. Through the other connection: access violation.
  ASSERT_EQ(p.a.qp->write(ctx(2), {&w, 1}, addr(s.buf.data()), s.mw->get_remote_token(),
                          op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 1));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  EXPECT_EQ(s.buf[0], 0x77);
  ASSERT_EQ(qa2->write(ctx(3), {&w, 1}, addr(s.buf.data()) + 8, s.mw->get_remote_token(),
                       op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 1));
  EXPECT_EQ(p.a.done[1].status, Status::kAccessViolation);
  EXPECT_EQ(s.buf[8], 0);
}

TEST_F(ApiMw, SendAndInvalidateUnbindsTheWindow) {
  ConnectedPair p("mw_sendinv");
  Server s(p, 8192);
  ASSERT_EQ(p.b.qp->bind(ctx(1), *s.mr, *s.mw, s.buf.data(), 4096, op_flag::kAllowRemoteWrite),
            Status::kSuccess);
  const uint32_t token = s.mw->get_remote_token();
  const Sge r{addr(s.buf.data() + 4096), 64, s.mr->get_local_token()};
  ASSERT_EQ(p.b.qp->receive(ctx(2), {&r, 1}), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  uint64_t v = 1;
  const Sge w{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->send_and_invalidate(ctx(3), {&w, 1}, op_flag::kInline, token),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 2));
  EXPECT_EQ(p.b.done[1].type, OperationType::kReceiveAndInvalidate);
  EXPECT_EQ(p.b.done[1].type_specific_completion_output, token);
  // The window is unbound now: the MR may be deregistered.
  EXPECT_EQ(s.mr->deregister_mr(nullptr, nullptr), Status::kSuccess);
}

}  // namespace
}  // namespace urnic::test
