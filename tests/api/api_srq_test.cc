// Shared receive queues through the public API (ndkpi.md §2.5): QPs sharing one SRQ (each
// receive completes on the consuming QP's receive CQ with that QP's context, in posting order),
// SrqReceive limits, ModifySrq (growing past the ring allocated at creation while receives are
// outstanding, shrinking, the limit notification's arming rules), an empty SRQ (RNR, the
// connection survives), and closing an SRQ before its QPs.
#include <cstring>
#include <mutex>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiSrq : public EalTest {};

struct SrqNotes {
  std::atomic<int> n{0};
  std::atomic<Status> last{Status::kPending};
  static void cb(void* c, Status s) {
    auto* self = static_cast<SrqNotes*>(c);
    self->last.store(s);
    self->n.fetch_add(1, std::memory_order_release);
  }
  int count() const { return n.load(std::memory_order_acquire); }
};

// b: an SRQ shared by two QPs with their own receive CQs; a: two QPs connected to them.
struct SrqSetup {
  SrqSetup(ApiPair& p, uint32_t depth, uint32_t threshold = 0, SrqNotes* notes = nullptr,
           const ConnectParams& cp = {})
      : buf(1 << 16, 0) {
    EXPECT_EQ(p.b.pd->create_srq(depth, 2, threshold, notes ? &SrqNotes::cb : nullptr, notes,
                                 nullptr, nullptr, &srq),
              Status::kSuccess);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(p.b.adapter->create_cq(256, nullptr, nullptr, nullptr, nullptr, &rcq[i]),
                Status::kSuccess);
      EXPECT_EQ(p.b.pd->create_qp_with_srq(*rcq[i], *p.b.cq, *srq, &qctx[i], 16, 1, 64, nullptr,
                                           nullptr, &qb[i]),
                Status::kSuccess);
      EXPECT_EQ(
          p.a.pd->create_qp(*p.a.cq, *p.a.cq, nullptr, 16, 64, 1, 1, 64, nullptr, nullptr, &qa[i]),
          Status::kSuccess);
      ApiPair::connect_qps(p.a, *qa[i], p.b, *qb[i], cp);
    }
    mr = p.b.reg(buf.data(), buf.size(), mr_flag::kAllowLocalWrite);
  }
  ~SrqSetup() {
    for (int i = 0; i < 2; ++i) {
      qa[i].reset();
      qb[i].reset();
      rcq[i].reset();
    }
    srq.reset();
  }
  Status post(uint32_t i) {
    const Sge s{addr(buf.data() + 64 * i), 64, mr->get_local_token()};
    return srq->receive(ctx(i), {&s, 1});
  }
  Status send(int qp, uint64_t v) {
    const Sge s{addr(&v), 8, 0};
    return qa[qp]->send(nullptr, {&s, 1}, op_flag::kInline);
  }
  size_t drain(int qp) {
    ResultEx r[16];
    size_t total = 0;
    for (size_t n; (n = rcq[qp]->get_results_ex(r)) != 0; total += n)
      got[qp].insert(got[qp].end(), r, r + n);
    return total;
  }
  size_t received() const { return got[0].size() + got[1].size(); }

  std::vector<uint8_t> buf;
  Handle<Mr> mr;
  Handle<Srq> srq;
  Handle<Cq> rcq[2];
  Handle<Qp> qa[2], qb[2];
  int qctx[2] = {};
  std::vector<ResultEx> got[2];
};

TEST_F(ApiSrq, TwoQpsShareOneSrqInPostingOrder) {
  ConnectedPair p("srq_share");
  SrqSetup s(p, 8);
  for (uint32_t i = 0; i < 6; ++i) ASSERT_EQ(s.post(i), Status::kSuccess);
  // QP 0, QP 1, QP 0, QP 1, QP 1, QP 0: each takes the oldest receive left.
  const int order[] = {0, 1, 0, 1, 1, 0};
  for (int k = 0; k < 6; ++k) {
    ASSERT_EQ(s.send(order[k], 0x100 + k), Status::kSuccess);
    ASSERT_TRUE(p.run_until([&] {
      s.drain(0);
      s.drain(1);
      return s.received() == static_cast<size_t>(k + 1);
    }));
  }
  size_t idx[2] = {0, 0};
  for (int k = 0; k < 6; ++k) {
    const ResultEx& r = s.got[order[k]][idx[order[k]]++];
    EXPECT_EQ(r.status, Status::kSuccess);
    EXPECT_EQ(r.request_context, ctx(k)) << k;   // the k-th receive posted
    EXPECT_EQ(r.qp_context, &s.qctx[order[k]]);  // the consuming QP's context
    EXPECT_EQ(r.bytes_transferred, 8u);
    uint64_t v = 0;
    std::memcpy(&v, s.buf.data() + 64 * k, 8);
    EXPECT_EQ(v, 0x100u + k);
  }
  // The QPs' own receive queues are the SRQ.
  const Sge rs{addr(s.buf.data()), 8, s.mr->get_local_token()};
  EXPECT_EQ(s.qb[0]->receive(nullptr, {&rs, 1}), Status::kInvalidDeviceRequest);
}

TEST_F(ApiSrq, ReceiveLimits) {
  ApiPair p("srq_limits");
  SrqSetup s(p, 3);
  std::vector<Sge> three(3, Sge{addr(s.buf.data()), 8, s.mr->get_local_token()});
  EXPECT_EQ(s.srq->receive(nullptr, three), Status::kDataOverrun);  // max SGE 2
  for (uint32_t i = 0; i < 3; ++i) ASSERT_EQ(s.post(i), Status::kSuccess);
  EXPECT_EQ(s.post(3), Status::kNoMoreEntries);
  const Sge huge[2] = {{addr(s.buf.data()), 1u << 31, 1}, {addr(s.buf.data()), 1, 1}};
  EXPECT_EQ(s.srq->receive(nullptr, huge), Status::kBufferOverflow);
}

TEST_F(ApiSrq, GrowingPastTheRingKeepsOrderAndOutstandingReceives) {
  ConnectedPair p("srq_grow");
  SrqSetup s(p, 4);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(s.post(i), Status::kSuccess);
  EXPECT_EQ(s.post(4), Status::kNoMoreEntries);
  // 40 does not fit the 4-slot ring: a larger one takes over at the next post; the four
  // posted in the old ring are consumed first.
  ASSERT_EQ(s.srq->modify(40, 0, nullptr, nullptr), Status::kSuccess);
  for (uint32_t i = 4; i < 40; ++i) ASSERT_EQ(s.post(i), Status::kSuccess) << i;
  EXPECT_EQ(s.post(40), Status::kNoMoreEntries);
  // Shrinking below what is outstanding fails; above the adapter's maximum too; 0 keeps it.
  EXPECT_EQ(s.srq->modify(39, 0, nullptr, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(s.srq->modify(p.b.adapter->adapter_info().max_srq_depth + 1, 0, nullptr, nullptr),
            Status::kInvalidParameter);
  EXPECT_EQ(s.srq->modify(0, 0, nullptr, nullptr), Status::kSuccess);
  for (int k = 0; k < 40; ++k) {
    ASSERT_EQ(s.send(k % 2, k), Status::kSuccess);
    ASSERT_TRUE(p.run_until([&] {
      s.drain(0);
      s.drain(1);
      return s.received() == static_cast<size_t>(k + 1);
    }));
  }
  for (int k = 0; k < 40; ++k) {
    const ResultEx& r = s.got[k % 2][k / 2];
    EXPECT_EQ(r.request_context, ctx(k)) << k;
    uint64_t v = 0;
    std::memcpy(&v, s.buf.data() + 64 * k, 8);
    EXPECT_EQ(v, static_cast<uint64_t>(k));
  }
  // Shrinking to what is outstanding (none now) works, and limits posting again.
  ASSERT_EQ(s.srq->modify(2, 0, nullptr, nullptr), Status::kSuccess);
  EXPECT_EQ(s.post(50), Status::kSuccess);
  EXPECT_EQ(s.post(51), Status::kSuccess);
  EXPECT_EQ(s.post(52), Status::kNoMoreEntries);
}

TEST_F(ApiSrq, LimitNotificationFiresOnceUntilRearmed) {
  ConnectedPair p("srq_limit");
  SrqNotes notes;
  SrqSetup s(p, 16, 2, &notes);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_EQ(s.post(i), Status::kSuccess);
  p.run_for(kQuiet);
  EXPECT_EQ(notes.count(), 0);  // armed at creation, not fired by the empty SRQ
  // Level 4 -> 3 -> 2: not below 2 yet.
  for (int k = 0; k < 2; ++k) ASSERT_EQ(s.send(0, k), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] {
    s.drain(0);
    return s.received() == 2;
  }));
  p.run_for(kQuiet);
  EXPECT_EQ(notes.count(), 0);
  // 2 -> 1: below the threshold, one notification.
  ASSERT_EQ(s.send(1, 2), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return notes.count() == 1; }));
  EXPECT_EQ(notes.last.load(), Status::kSuccess);
  // Disarmed after firing: 1 -> 0 notifies nobody; a modify with threshold 0 does not re-arm.
  ASSERT_EQ(s.srq->modify(0, 0, nullptr, nullptr), Status::kSuccess);
  ASSERT_EQ(s.send(1, 3), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] {
    s.drain(1);
    return s.received() == 4;
  }));
  p.run_for(kQuiet);
  EXPECT_EQ(notes.count(), 1);
  // Re-armed with a threshold the level (0) is already below: fires at once.
  ASSERT_EQ(s.srq->modify(0, 1, nullptr, nullptr), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return notes.count() == 2; }));
  // Re-armed above the level after posting: fires when consumption crosses it.
  for (uint32_t i = 10; i < 13; ++i) ASSERT_EQ(s.post(i), Status::kSuccess);
  ASSERT_EQ(s.srq->modify(0, 3, nullptr, nullptr), Status::kSuccess);
  p.run_for(kQuiet);
  EXPECT_EQ(notes.count(), 2);
  ASSERT_EQ(s.send(0, 4), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] { return notes.count() == 3; }));
}

// ND2: a send arriving at a QP whose SRQ is empty must not kill the connection (RNR).
TEST_F(ApiSrq, EmptySrqIsReceiverNotReady) {
  ConnectedPair p("srq_rnr");
  ConnectParams cp;
  cp.rnr_retry = 7;  // retry forever
  SrqSetup s(p, 8, 0, nullptr, cp);
  ASSERT_EQ(s.send(0, 42), Status::kSuccess);
  p.run_for(kQuiet);
  EXPECT_EQ(s.drain(0), 0u);
  ASSERT_EQ(s.post(0), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] {
    s.drain(0);
    return s.received() == 1;
  }));
  EXPECT_EQ(s.got[0][0].status, Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
}

TEST_F(ApiSrq, CloseBeforeItsQpsPends) {
  ConnectedPair p("srq_close");
  SrqSetup s(p, 8);
  ASSERT_EQ(s.post(0), Status::kSuccess);
  Completion srq_closed;
  ASSERT_EQ(s.srq.close(&Completion::on_close, &srq_closed), Status::kPending);
  p.run_for(kQuiet);
  EXPECT_EQ(srq_closed.count(), 0);
  // The QPs still take from it meanwhile.
  ASSERT_EQ(s.send(0, 1), Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] {
    s.drain(0);
    return s.received() == 1;
  }));
  s.qb[0].reset();
  p.run_for(kQuiet);
  EXPECT_EQ(srq_closed.count(), 0);
  s.qb[1].reset();
  ASSERT_TRUE(p.run_until([&] { return srq_closed.count() == 1; }));
}

}  // namespace
}  // namespace urnic::test
