// QueryAdapterInfo, and every limit it reports tested at the boundary: the limit passes, the
// limit + 1 fails with the status the API documents (ND2 NdLargeQPDepth / NdQpMax for the queue
// limits). LargeRequestThreshold is a hint, and MaxCallerData / MaxCalleeData belong to the
// Connector (IB CM private data), so they are only checked for their values here.
#include <sys/mman.h>

#include <atomic>
#include <thread>
#include <vector>

#include "control/ndk_internal.h"

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiLimits : public EalTest {};

// An address range reserved without memory behind it (never touched by these tests).
struct Reserved {
  explicit Reserved(size_t n) : len(n) {
    void* m = mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    p = m == MAP_FAILED ? nullptr : static_cast<uint8_t*>(m);
  }
  ~Reserved() {
    if (p != nullptr) munmap(p, len);
  }
  uint8_t* p;
  size_t len;
};

TEST_F(ApiLimits, QueryAdapterInfo) {
  ApiPair p("lim_info");
  AdapterInfo info;
  uint32_t size = 0;
  EXPECT_EQ(p.a.adapter->query_adapter_info(&info, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(p.a.adapter->query_adapter_info(&info, &size), Status::kBufferTooSmall);
  EXPECT_EQ(size, sizeof(AdapterInfo));
  size = 1000;
  EXPECT_EQ(p.a.adapter->query_adapter_info(nullptr, &size), Status::kBufferTooSmall);
  EXPECT_EQ(size, sizeof(AdapterInfo));
  size = sizeof(AdapterInfo) - 1;
  EXPECT_EQ(p.a.adapter->query_adapter_info(&info, &size), Status::kBufferTooSmall);
  size = sizeof(AdapterInfo);
  ASSERT_EQ(p.a.adapter->query_adapter_info(&info, &size), Status::kSuccess);
  EXPECT_EQ(info.version.major, 1);
  EXPECT_EQ(info.version.minor, 2);
  EXPECT_EQ(info.rdma_technology, RdmaTechnology::kRocev2);
  EXPECT_GE(info.frmr_page_count, 16u);
  EXPECT_GT(info.max_registration_size, 0u);
  EXPECT_GT(info.max_window_size, 0u);
  EXPECT_GE(info.max_initiator_request_sge, 1u);
  EXPECT_GE(info.max_read_request_sge, 1u);
  EXPECT_GT(info.max_srq_depth, 0u);  // SRQs supported
  EXPECT_EQ(info.max_caller_data, 56u);
  EXPECT_EQ(info.max_callee_data, 148u);
  EXPECT_GT(info.large_request_threshold, 0u);
  EXPECT_TRUE(info.adapter_flags & adapter_flag::kRdmaReadLocalInvalidateSupported);
  EXPECT_TRUE(info.adapter_flags & adapter_flag::kCqInterruptModerationSupported);
  EXPECT_TRUE(info.adapter_flags & adapter_flag::kRdmaReadSinkNotRequired);
  EXPECT_TRUE(info.adapter_flags & adapter_flag::kInOrderDmaSupported);
  EXPECT_TRUE(info.adapter_flags & adapter_flag::kCqResizeSupported);
  const AdapterInfo again = p.a.adapter->adapter_info();
  EXPECT_EQ(again.max_cq_depth, info.max_cq_depth);
}

// A port serves one adapter: a second open says so (STATUS_DEVICE_BUSY), and leaves the first
// adapter working; once the first is closed the port can be opened again.
TEST_F(ApiLimits, SamePortOpenedTwiceIsBusy) {
  ApiPair p("twice");
  for (uint16_t port : {p.port_a, p.port_b}) {
    AdapterConfig c;
    c.port_id = port;
    c.ipv4 = 0xC0000263;
    Engine e;
    std::unique_ptr<Adapter> again;
    EXPECT_EQ(Adapter::open(c, e, &again), Status::kDeviceBusy);
    EXPECT_EQ(again, nullptr);
  }
  // The first adapters still move data.
  p.connect();
  uint64_t v = 0x1122334455667788ull, dst = 0;
  auto mr = p.b.reg(&dst, sizeof(dst), mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite);
  const Sge sge{addr(&v), sizeof(v), 0};
  ASSERT_EQ(p.a.qp->write(ctx(1), {&sge, 1}, addr(&dst), mr->get_remote_token(), op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  EXPECT_EQ(dst, v);
}

TEST_F(ApiLimits, CqDepth) {
  ApiPair p("lim_cq");
  const uint32_t max = p.a.adapter->adapter_info().max_cq_depth;
  Handle<Cq> cq;
  EXPECT_EQ(p.a.adapter->create_cq(max, nullptr, nullptr, nullptr, nullptr, &cq), Status::kSuccess);
  cq.reset();
  EXPECT_EQ(p.a.adapter->create_cq(max + 1, nullptr, nullptr, nullptr, nullptr, &cq),
            Status::kInvalidParameter);
  EXPECT_EQ(p.a.adapter->create_cq(0, nullptr, nullptr, nullptr, nullptr, &cq),
            Status::kInvalidParameter);
}

// NdQpMax (every parameter at its maximum) and NdLargeQPDepth (one above).
TEST_F(ApiLimits, QpCreationLimits) {
  ApiPair p("lim_qp");
  const AdapterInfo i = p.a.adapter->adapter_info();
  Cq& cq = *p.a.cq;
  Pd& pd = *p.a.pd;
  Handle<Qp> q;
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, i.max_receive_queue_depth, i.max_initiator_queue_depth,
                         i.max_receive_request_sge, i.max_initiator_request_sge,
                         i.max_inline_data_size, nullptr, nullptr, &q),
            Status::kSuccess);
  q.reset();
  const uint32_t rq = i.max_receive_queue_depth, sq = i.max_initiator_queue_depth;
  const uint32_t rs = i.max_receive_request_sge, ss = i.max_initiator_request_sge;
  const uint32_t in = i.max_inline_data_size;
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, rq + 1, 1, 1, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, 1, sq + 1, 1, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, 1, 1, rs + 1, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, 1, 1, 1, ss + 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, 1, 1, 1, 1, in + 1, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, 0, 1, 1, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  EXPECT_EQ(pd.create_qp(cq, cq, nullptr, 1, 0, 1, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  // A CQ of another adapter.
  EXPECT_EQ(pd.create_qp(*p.b.cq, cq, nullptr, 1, 1, 1, 1, 0, nullptr, nullptr, &q),
            Status::kInvalidParameter);
  EXPECT_FALSE(q);
}

TEST_F(ApiLimits, SrqLimits) {
  ApiPair p("lim_srq");
  const AdapterInfo i = p.a.adapter->adapter_info();
  Handle<Srq> srq;
  EXPECT_EQ(p.a.pd->create_srq(i.max_srq_depth + 1, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq),
            Status::kInvalidParameter);
  EXPECT_EQ(p.a.pd->create_srq(1, i.max_receive_request_sge + 1, 0, nullptr, nullptr, nullptr,
                               nullptr, &srq),
            Status::kInvalidParameter);
  ASSERT_EQ(p.a.pd->create_srq(i.max_srq_depth, i.max_receive_request_sge, 0, nullptr, nullptr,
                               nullptr, nullptr, &srq),
            Status::kSuccess);
  srq.reset();
  ASSERT_EQ(p.a.pd->create_srq(1, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq),
            Status::kSuccess);
  EXPECT_EQ(srq->modify(i.max_srq_depth, 0, nullptr, nullptr), Status::kSuccess);
  EXPECT_EQ(srq->modify(i.max_srq_depth + 1, 0, nullptr, nullptr), Status::kInvalidParameter);
}

TEST_F(ApiLimits, SgesPerRequest) {
  ApiPair p("lim_sge");
  p.connect();  // QPs with the maximum SGE counts
  const AdapterInfo i = p.a.adapter->adapter_info();
  std::vector<uint8_t> local(64), remote(64), rbuf(64);
  auto ml = p.a.reg(local.data(), local.size(), mr_flag::kAllowLocalWrite);
  auto mr =
      p.b.reg(remote.data(), remote.size(), mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead);
  auto mrb = p.b.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  auto sges = [](std::vector<uint8_t>& b, const Handle<Mr>& m, uint32_t n) {
    std::vector<Sge> v;
    for (uint32_t k = 0; k < n; ++k) v.push_back({addr(b.data() + k), 1, m->get_local_token()});
    return v;
  };
  const uint64_t ra = addr(remote.data());
  const uint32_t rt = mr->get_remote_token();
  const uint32_t ms = i.max_initiator_request_sge, mrd = i.max_read_request_sge;
  const uint32_t mrs = i.max_receive_request_sge;
  EXPECT_EQ(p.a.qp->write(ctx(1), sges(local, ml, ms), ra, rt, 0), Status::kSuccess);
  EXPECT_EQ(p.a.qp->write(ctx(9), sges(local, ml, ms + 1), ra, rt, 0), Status::kDataOverrun);
  EXPECT_EQ(p.a.qp->read(ctx(2), sges(local, ml, mrd), ra, rt, 0), Status::kSuccess);
  EXPECT_EQ(p.a.qp->read(ctx(9), sges(local, ml, mrd + 1), ra, rt, 0), Status::kDataOverrun);
  EXPECT_EQ(p.b.qp->receive(ctx(3), sges(rbuf, mrb, mrs)), Status::kSuccess);
  EXPECT_EQ(p.b.qp->receive(ctx(9), sges(rbuf, mrb, mrs + 1)), Status::kDataOverrun);
  EXPECT_EQ(p.a.qp->send(ctx(4), sges(local, ml, ms), 0), Status::kSuccess);
  EXPECT_EQ(p.a.qp->send(ctx(9), sges(local, ml, ms + 1), 0), Status::kDataOverrun);
  ASSERT_TRUE(p.wait_done(3, 1));
  for (const auto& r : p.a.done) EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.b.done[0].bytes_transferred, mrs);
  // INLINE requests may have more SGEs than the QP takes (their bytes are copied).
  std::vector<Sge> many(ms + 4, Sge{addr(local.data()), 1, 0});
  EXPECT_EQ(p.a.qp->write(ctx(5), many, ra, rt, op_flag::kInline), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(4, 1));
}

TEST_F(ApiLimits, InlineDataSize) {
  ApiPair p("lim_inline");
  p.connect();  // QPs with inline_data_size = the maximum
  const uint32_t max = p.a.adapter->adapter_info().max_inline_data_size;
  std::vector<uint8_t> data(max + 1, 3), dst(max + 1, 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  const Sge ok{addr(data.data()), max, 0}, over{addr(data.data()), max + 1, 0};
  EXPECT_EQ(
      p.a.qp->write(ctx(1), {&ok, 1}, addr(dst.data()), md->get_remote_token(), op_flag::kInline),
      Status::kSuccess);
  EXPECT_EQ(
      p.a.qp->write(ctx(2), {&over, 1}, addr(dst.data()), md->get_remote_token(), op_flag::kInline),
      Status::kInvalidBufferSize);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(dst[max - 1], 3);
  EXPECT_EQ(dst[max], 0);
}

// MaxTransferLength: posts of exactly the limit are accepted (they are flushed before any byte
// moves), one byte more is BUFFER_OVERFLOW.
TEST_F(ApiLimits, TransferLength) {
  ConnectedPair p("lim_xfer");
  const uint32_t max = p.a.adapter->adapter_info().max_transfer_length;
  Reserved mem(size_t{max} + 2 * kPageSize);
  if (mem.p == nullptr) GTEST_SKIP() << "cannot reserve the address range";
  auto ma = p.a.reg(mem.p, size_t{max} + kPageSize, mr_flag::kAllowLocalWrite);
  auto mb = p.b.reg(mem.p, size_t{max} + kPageSize, mr_flag::kAllowLocalWrite);
  const Sge la{addr(mem.p), max, ma->get_local_token()};
  const Sge lb{addr(mem.p), max, mb->get_local_token()};
  const Sge over[2] = {la, {addr(mem.p), 1, ma->get_local_token()}};
  const Sge overb[2] = {lb, {addr(mem.p), 1, mb->get_local_token()}};
  EXPECT_EQ(p.b.qp->receive(ctx(1), {&lb, 1}), Status::kSuccess);
  EXPECT_EQ(p.b.qp->receive(ctx(9), overb), Status::kBufferOverflow);
  EXPECT_EQ(p.a.qp->write(ctx(9), over, 0x1000, 1, 0), Status::kBufferOverflow);
  EXPECT_EQ(p.a.qp->read(ctx(9), over, 0x1000, 1, 0), Status::kBufferOverflow);
  // Accepted but kept back (deferred), then flushed with the QP: nothing is ever transferred.
  EXPECT_EQ(p.a.qp->write(ctx(2), {&la, 1}, 0x1000, 1, op_flag::kDefer), Status::kSuccess);
  p.a.qp->flush();
  p.b.qp->flush();
  auto* ext = p.a.qp->query_extension<QpConnectExtension>();
  ASSERT_TRUE(p.run_until([&] { return ext->state() == QpState::kErr; }));
  uint64_t v = 0;
  const Sge tiny{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->write(ctx(3), {&tiny, 1}, 0x1000, 1, op_flag::kInline), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 1));
  EXPECT_EQ(p.a.done[0].request_context, ctx(2));
  EXPECT_EQ(p.a.done[0].status, Status::kCancelled);
  EXPECT_EQ(p.a.done[1].status, Status::kCancelled);
  EXPECT_EQ(p.b.done[0].request_context, ctx(1));
  EXPECT_EQ(p.b.done[0].status, Status::kCancelled);
}

// MaxRegistrationSize and MaxWindowSize: the registration never touches the memory, so an
// address range reserved without memory does.
TEST_F(ApiLimits, RegistrationAndWindowSize) {
  ConnectedPair p("lim_reg");
  const AdapterInfo i = p.b.adapter->adapter_info();
  Reserved mem(i.max_registration_size + kPageSize);
  if (mem.p == nullptr) GTEST_SKIP() << "cannot reserve the address range";
  Handle<Mr> mr;
  ASSERT_EQ(p.b.pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  EXPECT_EQ(mr->register_mr(mem.p, i.max_registration_size + 1, mr_flag::kAllowLocalWrite, nullptr,
                            nullptr),
            Status::kInvalidBufferSize);
  ASSERT_EQ(
      mr->register_mr(mem.p, i.max_registration_size, mr_flag::kAllowLocalWrite, nullptr, nullptr),
      Status::kSuccess);
  ASSERT_LE(i.max_window_size, i.max_registration_size);
  Handle<Mw> mw;
  ASSERT_EQ(p.b.pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess);
  EXPECT_EQ(
      p.b.qp->bind(ctx(1), *mr, *mw, mem.p, i.max_window_size + 1, op_flag::kAllowRemoteWrite),
      Status::kInvalidBufferSize);
  ASSERT_EQ(p.b.qp->bind(ctx(2), *mr, *mw, mem.p, i.max_window_size, op_flag::kAllowRemoteWrite),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  EXPECT_EQ(p.b.done[0].request_context, ctx(2));
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  ASSERT_EQ(p.b.qp->invalidate(ctx(3), *mw, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 2));
  EXPECT_EQ(mr->deregister_mr(nullptr, nullptr), Status::kSuccess);
}

TEST_F(ApiLimits, FastRegisterPageCount) {
  ApiPair p("lim_frmr");
  const uint32_t max = p.a.adapter->adapter_info().frmr_page_count;
  Handle<Mr> a, b;
  ASSERT_EQ(p.a.pd->create_mr(true, nullptr, nullptr, &a), Status::kSuccess);
  ASSERT_EQ(p.a.pd->create_mr(true, nullptr, nullptr, &b), Status::kSuccess);
  EXPECT_EQ(a->initialize_fast_register_mr(max + 1, true, nullptr, nullptr),
            Status::kImplementationLimit);
  EXPECT_EQ(a->initialize_fast_register_mr(max, true, nullptr, nullptr), Status::kSuccess);
  EXPECT_EQ(b->initialize_fast_register_mr(16, false, nullptr, nullptr), Status::kSuccess);
}

// IRD / ORD: the read limits a connection may set (manual connect; a Connector clamps).
TEST_F(ApiLimits, ReadLimits) {
  ApiPair p("lim_rd");
  const AdapterInfo i = p.a.adapter->adapter_info();
  Handle<Qp> q, peer;
  ASSERT_NO_FATAL_FAILURE(p.create_qps(4, 4, 0, &q, &peer));
  auto* ext = q->query_extension<QpConnectExtension>();
  QpAttributes at;
  at.state = QpState::kRtr;
  at.av.dst_ipv4 = p.b.address().ipv4;
  at.av.dst_mac = p.b.address().mac;
  at.dest_qpn = peer->query_extension<QpConnectExtension>()->qpn();
  using namespace qp_attr_mask;
  const uint32_t rtr =
      kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer;
  at.max_dest_rd_atomic = static_cast<uint8_t>(i.max_inbound_read_limit + 1);
  EXPECT_EQ(ext->modify(at, rtr, nullptr, nullptr), Status::kInvalidParameter);
  at.max_dest_rd_atomic = static_cast<uint8_t>(i.max_inbound_read_limit);
  EXPECT_EQ(ext->modify(at, rtr, nullptr, nullptr), Status::kSuccess);
  at.state = QpState::kRts;
  const uint32_t rts = kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic;
  at.max_rd_atomic = static_cast<uint8_t>(i.max_outbound_read_limit + 1);
  EXPECT_EQ(ext->modify(at, rts, nullptr, nullptr), Status::kInvalidParameter);
  at.max_rd_atomic = static_cast<uint8_t>(i.max_outbound_read_limit);
  EXPECT_EQ(ext->modify(at, rts, nullptr, nullptr), Status::kSuccess);
  EXPECT_EQ(ext->state(), QpState::kRts);
}

// The GID table (ibv_query_gid) and the source GID of a manual connect (sgid_index): index 0
// is the link-local address from the MAC, then the IPv4-mapped and the IPv6 address; a source
// GID of the other IP version, or one past the table, is refused; link-local GIDs carry data.
TEST_F(ApiLimits, GidTableAndSourceGid) {
  ApiPair p("lim_gid");
  auto* ext = p.a.adapter->query_extension<AdapterExtension>();
  ASSERT_NE(ext, nullptr);
  ASSERT_EQ(ext->gid_count(), 3u);
  std::array<uint8_t, 16> g{};
  ASSERT_EQ(ext->query_gid(0, &g), Status::kSuccess);  // MAC 02:00:00:00:00:01, U/L bit flipped
  EXPECT_EQ(g,
            (std::array<uint8_t, 16>{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 1}));
  ASSERT_EQ(ext->query_gid(1, &g), Status::kSuccess);
  EXPECT_EQ(g, (std::array<uint8_t, 16>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1}));
  ASSERT_EQ(ext->query_gid(2, &g), Status::kSuccess);
  EXPECT_EQ(g,
            (std::array<uint8_t, 16>{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(ext->query_gid(3, &g), Status::kInvalidParameter);
  EXPECT_EQ(ext->query_gid(0, nullptr), Status::kInvalidParameter);

  Handle<Qp> q;
  ASSERT_EQ(p.a.pd->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &q),
            Status::kSuccess);
  auto* conn = q->query_extension<QpConnectExtension>();
  QpAttributes at;
  at.state = QpState::kRtr;
  at.av.dst_mac = p.b.address().mac;
  at.dest_qpn = 0x100;
  using namespace qp_attr_mask;
  const uint32_t rtr =
      kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic | kMinRnrTimer;
  for (const auto& [ipv6, index] : {std::pair{false, 2}, {false, 0}, {true, 1}, {true, 3}}) {
    at.av.ipv6 = ipv6;
    at.av.sgid_index = index;
    EXPECT_EQ(conn->modify(at, rtr, nullptr, nullptr), Status::kInvalidParameter)
        << "ipv6 " << ipv6 << " sgid_index " << index;
  }
  at.av.ipv6 = false;
  at.av.sgid_index = 1;  // the same attributes with a matching source GID are fine
  at.av.dst_ipv4 = p.b.address().ipv4;
  EXPECT_EQ(conn->modify(at, rtr, nullptr, nullptr), Status::kSuccess);

  ConnectParams cp;
  cp.ipv6 = true;
  cp.sgid_index = 0;
  p.connect(cp);
  std::vector<uint8_t> local(5000), remote(5000, 0);
  fill(local, 9);
  auto ml = p.a.reg(local.data(), local.size(), 0);
  auto mr = p.b.reg(remote.data(), remote.size(), mr_flag::kAllowRemoteWrite);
  const Sge ws{addr(local.data()), 5000, ml->get_local_token()};
  ASSERT_EQ(p.a.qp->write(ctx(1), {&ws, 1}, addr(remote.data()), mr->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  EXPECT_EQ(remote, local);
}

// The QP number allocator (an internal stage, driven directly on purpose: the public create
// path would serialise the threads on the engine). Several threads take and return numbers at
// once; no number is ever held twice, a second free of a number is ignored, and afterwards
// every number 2 .. max_qps - 1 is free exactly once.
TEST_F(ApiLimits, QpNumbersAreUniqueUnderConcurrentAllocation) {
  ApiPair p("lim_qpn");
  ctl::Adapter& ad = *p.a.adapter->impl().ctl;
  const uint32_t max = AdapterConfig{}.max_qps;  // the fixture keeps the default: QPNs 2 .. max - 1
  std::vector<std::atomic<uint8_t>> held(max);
  std::atomic<uint64_t> twice{0}, got{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      std::vector<uint32_t> mine;
      for (int i = 0; i < 20000; ++i) {
        if (const uint32_t q = ad.alloc_qpn(); q != 0) {
          if (q >= max || held[q].exchange(1) != 0) twice.fetch_add(1);
          got.fetch_add(1);
          mine.push_back(q);
        }
        if (mine.size() > 8 || (i & 3) == 0) {
          if (mine.empty()) continue;
          held[mine.back()].store(0);
          ad.free_qpn(mine.back());
          ad.free_qpn(mine.back());  // the second free must not return it twice
          mine.pop_back();
        }
      }
      for (uint32_t q : mine) {
        held[q].store(0);
        ad.free_qpn(q);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(twice.load(), 0u);
  EXPECT_GT(got.load(), 0u);
  std::vector<uint8_t> seen(max, 0);
  for (uint32_t i = 2; i < max; ++i) {
    const uint32_t q = ad.alloc_qpn();
    ASSERT_NE(q, 0u) << "only " << i - 2 << " numbers free";
    ASSERT_LT(q, max);
    EXPECT_EQ(seen[q]++, 0) << q;
  }
  EXPECT_EQ(ad.alloc_qpn(), 0u);
  for (uint32_t q = 2; q < max; ++q) ad.free_qpn(q);
}

}  // namespace
}  // namespace urnic::test
