// NDK_OP_FLAG_DEFER through the public API (ndkpi.md §7.3; architecture.md §3 "deferred
// doorbell"): a chain of deferred posts is invisible to the engine until a post without DEFER
// publishes it, or a post fails inline (then everything deferred before the failure executes and
// completes, and the failed request never completes), including NDKPI's own example with two
// FastRegisters.
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiDefer : public EalTest {};

TEST_F(ApiDefer, DeferredChainIsInvisibleUntilTheDoorbell) {
  ConnectedPair p("defer_chain");
  std::vector<uint8_t> dst(64 * 16, 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  std::vector<uint8_t> src(64, 0xAB);
  auto ms = p.a.reg(src.data(), src.size(), 0);
  const Sge s{addr(src.data()), 64, ms->get_local_token()};
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(p.a.qp->write(ctx(i), {&s, 1}, addr(dst.data() + 64 * i), md->get_remote_token(),
                            op_flag::kDefer),
              Status::kSuccess);
  }
  // The engine runs and sees nothing: no byte moves, nothing completes.
  p.run_for(kQuiet);
  EXPECT_TRUE(p.a.done.empty());
  EXPECT_EQ(dst, std::vector<uint8_t>(dst.size(), 0));
  // The chain ends with a post without DEFER: all nine go, in order.
  ASSERT_EQ(p.a.qp->write(ctx(8), {&s, 1}, addr(dst.data() + 64 * 8), md->get_remote_token(), 0),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(9, 0));
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(p.a.done[i].request_context, ctx(i));
    EXPECT_EQ(p.a.done[i].status, Status::kSuccess);
    EXPECT_EQ(dst[64 * i], 0xAB);
  }
  EXPECT_EQ(dst[64 * 9], 0);
}

TEST_F(ApiDefer, InlineFailureInTheMiddlePublishesTheEarlierOnesOnly) {
  ConnectedPair p("defer_fail");
  std::vector<uint8_t> dst(64 * 8, 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  uint64_t v = 0x1111111111111111ull;
  const Sge s{addr(&v), 8, 0};
  auto post = [&](int i, uint32_t flags) {
    return p.a.qp->write(ctx(i), {&s, 1}, addr(dst.data() + 64 * i), md->get_remote_token(),
                         op_flag::kInline | flags);
  };
  ASSERT_EQ(post(0, op_flag::kDefer), Status::kSuccess);
  ASSERT_EQ(post(1, op_flag::kDefer), Status::kSuccess);
  // Fails inline: 17 SGEs (the QP takes 16).
  std::vector<Sge> many(17, Sge{addr(&v), 0, 1});
  EXPECT_EQ(p.a.qp->write(ctx(2), many, addr(dst.data()), md->get_remote_token(), op_flag::kDefer),
            Status::kDataOverrun);
  // The consumer skips the rest of the chain; the provider has handed 0 and 1 to the engine.
  ASSERT_TRUE(p.wait_done(2, 0));
  p.run_for(kQuiet);
  ASSERT_EQ(p.a.done.size(), 2u);
  EXPECT_EQ(p.a.done[0].request_context, ctx(0));
  EXPECT_EQ(p.a.done[1].request_context, ctx(1));
  EXPECT_EQ(dst[0], 0x11);
  EXPECT_EQ(dst[64], 0x11);
  // The QP is unaffected by the failed post (ndkpi.md §7.1): a new chain works.
  ASSERT_EQ(post(3, op_flag::kDefer), Status::kSuccess);
  ASSERT_EQ(post(4, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(4, 0));
  EXPECT_EQ(p.a.done[2].request_context, ctx(3));
  EXPECT_EQ(p.a.done[3].request_context, ctx(4));
  // Every kind of inline failure publishes: a flag not valid for the op, too much inline data.
  ASSERT_EQ(post(5, op_flag::kDefer), Status::kSuccess);
  EXPECT_EQ(p.a.qp->read(ctx(9), {&s, 1}, addr(dst.data()), md->get_remote_token(),
                         op_flag::kDefer | op_flag::kInline),
            Status::kInvalidParameter);
  ASSERT_TRUE(p.wait_done(5, 0));
  ASSERT_EQ(post(6, op_flag::kDefer), Status::kSuccess);
  std::vector<uint8_t> big(257);
  const Sge bs{addr(big.data()), 257, 0};
  EXPECT_EQ(p.a.qp->send(ctx(9), {&bs, 1}, op_flag::kDefer | op_flag::kInline),
            Status::kInvalidBufferSize);
  ASSERT_TRUE(p.wait_done(6, 0));
  p.run_for(kQuiet);
  EXPECT_EQ(p.a.done.size(), 6u);
  for (const auto& r : p.a.done) EXPECT_NE(r.request_context, ctx(9));
}

// The NDKPI deferral example (ndkpi.md §7.3): FR(DEFER) succeeds, FR(DEFER) fails inline; the
// consumer skips the send that would have ended the chain. The first FastRegister executes and
// completes (its region becomes usable by the peer); the failed one never completes.
TEST_F(ApiDefer, NdkExampleTwoFastRegistersSecondFails) {
  ConnectedPair p("defer_frmr");
  constexpr size_t kLen = 4 * kPageSize;
  void* mem = mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  std::memset(mem, 0, kLen);
  uint64_t pages[4];
  uint32_t npages = 0, fbo = 0;
  ASSERT_EQ(p.b.adapter->build_lam(mem, kLen, pages, &npages, &fbo), Status::kSuccess);
  ASSERT_EQ(npages, 4u);
  ASSERT_EQ(fbo, 0u);
  Handle<Mr> fr1, fr2;
  ASSERT_EQ(p.b.pd->create_mr(true, nullptr, nullptr, &fr1), Status::kSuccess);
  ASSERT_EQ(p.b.pd->create_mr(true, nullptr, nullptr, &fr2), Status::kSuccess);
  ASSERT_EQ(fr1->initialize_fast_register_mr(4, true, nullptr, nullptr), Status::kSuccess);
  ASSERT_EQ(fr2->initialize_fast_register_mr(4, false, nullptr, nullptr), Status::kSuccess);
  const uint32_t before = fr1->get_remote_token();
  constexpr uint64_t kBase = 0x7000000000ull;
  ASSERT_EQ(p.b.qp->fast_register(ctx(1), *fr1, pages, 0, kLen, kBase,
                                  op_flag::kAllowRemoteWrite | op_flag::kDefer),
            Status::kSuccess);
  // The new token is readable as soon as the post returned.
  const uint32_t token = fr1->get_remote_token();
  EXPECT_NE(token, before);
  // Remote rights of an MR initialised without remote access: STATUS_ACCESS_VIOLATION, inline.
  EXPECT_EQ(p.b.qp->fast_register(ctx(2), *fr2, pages, 0, kLen, kBase,
                                  op_flag::kAllowRemoteWrite | op_flag::kDefer),
            Status::kAccessViolation);
  ASSERT_TRUE(p.wait_done(0, 1));
  p.run_for(kQuiet);
  ASSERT_EQ(p.b.done.size(), 1u);
  EXPECT_EQ(p.b.done[0].request_context, ctx(1));
  EXPECT_EQ(p.b.done[0].type, OperationType::kFastRegister);
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  // The first region works: the peer writes through its token at the base address + 5000.
  uint64_t v = 0x5555;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->write(ctx(3), {&s, 1}, kBase + 5000, token, op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 1));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  uint64_t got = 0;
  std::memcpy(&got, static_cast<uint8_t*>(mem) + 5000, 8);
  EXPECT_EQ(got, 0x5555u);
  fr1.reset();
  fr2.reset();
  p.b.qp.reset();
  p.run_for(kQuiet);
  munmap(mem, kLen);
}

TEST_F(ApiDefer, FullQueueFailurePublishesTheChain) {
  ApiPair p("defer_full");
  Handle<Qp> qa, qb;
  ASSERT_NO_FATAL_FAILURE(p.connect_more_qps(4, 4, 64, &qa, &qb));
  std::vector<uint8_t> dst(64, 0);
  auto md = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  uint64_t v = 3;
  const Sge s{addr(&v), 8, 0};
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(qa->write(ctx(i), {&s, 1}, addr(dst.data()), md->get_remote_token(),
                        op_flag::kInline | op_flag::kDefer),
              Status::kSuccess);
  }
  p.run_for(kQuiet);
  EXPECT_TRUE(p.a.done.empty());
  // A consumer that never ends its chain but overfills the queue: the failing post publishes.
  EXPECT_EQ(qa->write(ctx(4), {&s, 1}, addr(dst.data()), md->get_remote_token(),
                      op_flag::kInline | op_flag::kDefer),
            Status::kNoMoreEntries);
  ASSERT_TRUE(p.wait_done(4, 0));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p.a.done[i].request_context, ctx(i));
}

}  // namespace
}  // namespace urnic::test
