// Memory regions through the public API: RegisterMr and its errors (ND2 NdMRInvalidBuffer),
// tokens after re-registration, fast registration (InitializeFastRegisterMr, FastRegister with
// page arrays / FBO / base address, its inline errors, invalidate, re-register), remote
// invalidation by SendAndInvalidate (NDK_RESULT_EX ReceiveAndInvalidate), Read with local
// invalidate, and the PD's privileged token.
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiMr : public EalTest {};

// Page-aligned anonymous memory.
struct Pages {
  explicit Pages(size_t n) : len(n * kPageSize) {
    p = static_cast<uint8_t*>(
        mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(p, MAP_FAILED);
    std::memset(p, 0, len);
  }
  ~Pages() { munmap(p, len); }
  std::vector<uint64_t> lam(const Adapter& a, uint32_t* fbo, size_t off = 0, size_t n = 0) const {
    std::vector<uint64_t> pages((n == 0 ? len : n) / kPageSize + 1);
    uint32_t count = 0;
    EXPECT_EQ(a.build_lam(p + off, n == 0 ? len - off : n, pages, &count, fbo), Status::kSuccess);
    pages.resize(count);
    return pages;
  }
  uint8_t* p;
  size_t len;
};

// On B: a one-page fast-register MR, registered (request 1, not yet waited for) at `base` for
// remote writes, and a 64-byte receive buffer.
struct FrmrOnB {
  Pages mem{1};
  std::vector<uint64_t> pages;  // the page list must outlive the fast-register request
  Handle<Mr> fr;
  std::unique_ptr<LocalBuffer> rbuf;
  void set_up(ApiPair& p, uint64_t base) {
    uint32_t fbo = 0;
    pages = mem.lam(*p.b.adapter, &fbo);
    fr = p.b.fast_mr(1);
    ASSERT_TRUE(fr);
    ASSERT_EQ(
        p.b.qp->fast_register(ctx(1), *fr, pages, 0, kPageSize, base, op_flag::kAllowRemoteWrite),
        Status::kSuccess);
    rbuf = std::make_unique<LocalBuffer>(p.b, 64);
  }
};

TEST_F(ApiMr, RegisterErrors) {
  ApiPair p("mr_errors");
  Handle<Mr> mr, fr;
  ASSERT_EQ(p.a.pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  ASSERT_EQ(p.a.pd->create_mr(true, nullptr, nullptr, &fr), Status::kSuccess);
  std::vector<uint8_t> buf(8192);
  // NdMRInvalidBuffer: an empty or NULL buffer ...
  EXPECT_EQ(mr->register_mr(nullptr, 100, 0, nullptr, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(mr->register_mr(buf.data(), 0, 0, nullptr, nullptr), Status::kInvalidParameter);
  // ... and a length larger than the buffer (the range runs into unmapped memory).
  Pages three(3);
  ASSERT_EQ(munmap(three.p + 2 * kPageSize, kPageSize), 0);
  EXPECT_EQ(mr->register_mr(three.p, 3 * kPageSize, 0, nullptr, nullptr),
            Status::kInvalidBufferSize);
  EXPECT_EQ(mr->register_mr(three.p, 2 * kPageSize, 0, nullptr, nullptr), Status::kSuccess);
  three.len = 2 * kPageSize;
  EXPECT_EQ(mr->get_local_token(), mr->get_remote_token());
  // One buffer per MR at a time.
  EXPECT_EQ(mr->register_mr(buf.data(), 100, 0, nullptr, nullptr), Status::kInvalidDeviceState);
  EXPECT_EQ(mr->deregister_mr(nullptr, nullptr), Status::kSuccess);
  EXPECT_EQ(mr->deregister_mr(nullptr, nullptr), Status::kInvalidDeviceState);
  EXPECT_EQ(mr->register_mr(buf.data(), 100, 0x40000000u, nullptr, nullptr),
            Status::kInvalidParameter);
  // The wrong kind of MR for the call.
  EXPECT_EQ(fr->register_mr(buf.data(), 100, 0, nullptr, nullptr), Status::kInvalidDeviceRequest);
  EXPECT_EQ(mr->initialize_fast_register_mr(4, false, nullptr, nullptr),
            Status::kInvalidDeviceRequest);
  EXPECT_EQ(fr->initialize_fast_register_mr(0, false, nullptr, nullptr), Status::kInvalidParameter);
  EXPECT_EQ(fr->initialize_fast_register_mr(4, false, nullptr, nullptr), Status::kSuccess);
  EXPECT_EQ(fr->initialize_fast_register_mr(4, false, nullptr, nullptr),
            Status::kInvalidDeviceState);
  EXPECT_EQ(fr->deregister_mr(nullptr, nullptr), Status::kInvalidDeviceState);
}

TEST_F(ApiMr, ReRegistrationMakesTheOldTokenFail) {
  ConnectedPair p("mr_rereg");
  std::vector<uint8_t> dst(256, 0);
  Handle<Mr> mr;
  ASSERT_EQ(p.b.pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  ASSERT_EQ(mr->register_mr(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite, nullptr, nullptr),
            Status::kSuccess);
  const uint32_t old = mr->get_remote_token();
  ASSERT_EQ(mr->deregister_mr(nullptr, nullptr), Status::kSuccess);
  ASSERT_EQ(mr->register_mr(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite, nullptr, nullptr),
            Status::kSuccess);
  EXPECT_NE(mr->get_remote_token(), old);
  uint64_t v = 7;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(
      p.a.qp->write(ctx(1), {&s, 1}, addr(dst.data()), mr->get_remote_token(), op_flag::kInline),
      Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  ASSERT_EQ(p.a.qp->write(ctx(2), {&s, 1}, addr(dst.data()), old, op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 0));
  EXPECT_EQ(p.a.done[1].status, Status::kAccessViolation);
}

TEST_F(ApiMr, FastRegisterInlineErrors) {
  ConnectedPair p("mr_frerr");
  Pages mem(4);
  uint32_t fbo = 0;
  auto pages = mem.lam(*p.a.adapter, &fbo);
  ASSERT_EQ(pages.size(), 4u);
  Handle<Mr> fr, local, normal;
  ASSERT_EQ(p.a.pd->create_mr(true, nullptr, nullptr, &fr), Status::kSuccess);
  ASSERT_EQ(p.a.pd->create_mr(true, nullptr, nullptr, &local), Status::kSuccess);
  ASSERT_EQ(fr->initialize_fast_register_mr(2, true, nullptr, nullptr), Status::kSuccess);
  ASSERT_EQ(local->initialize_fast_register_mr(4, false, nullptr, nullptr), Status::kSuccess);
  normal = p.a.reg(mem.p, mem.len, 0);
  Qp& q = *p.a.qp;
  constexpr uint64_t kBase = 0x100000;
  const std::span<const uint64_t> two(pages.data(), 2);
  // More pages than the MR was initialised with.
  EXPECT_EQ(q.fast_register(nullptr, *fr, pages, 0, kPageSize, kBase, 0),
            Status::kImplementationLimit);
  // Remote rights of an MR initialised without remote access.
  EXPECT_EQ(q.fast_register(nullptr, *local, pages, 0, kPageSize, kBase, op_flag::kAllowRemoteRead),
            Status::kAccessViolation);
  // Length beyond pages * PAGE_SIZE - FBO.
  EXPECT_EQ(q.fast_register(nullptr, *fr, two, 100, 2 * kPageSize - 99, kBase + 100, 0),
            Status::kInvalidBufferSize);
  EXPECT_EQ(q.fast_register(nullptr, *fr, two, kPageSize, 10, kBase, 0),
            Status::kInvalidParameter);  // FBO must be inside the first page
  EXPECT_EQ(q.fast_register(nullptr, *fr, two, 100, 10, kBase, 0),
            Status::kInvalidParameter);  // base must be FBO + n * PAGE_SIZE
  const uint64_t odd[2] = {pages[0] + 8, pages[1]};
  EXPECT_EQ(q.fast_register(nullptr, *fr, odd, 0, 10, kBase, 0), Status::kInvalidParameter);
  EXPECT_EQ(q.fast_register(nullptr, *normal, two, 0, 10, kBase, 0), Status::kInvalidParameter);
  EXPECT_EQ(q.fast_register(nullptr, *fr, two, 0, 10, kBase, op_flag::kInline),
            Status::kInvalidParameter);
  // The largest length that fits passes; RDMA_READ_SINK is accepted (and not required).
  EXPECT_EQ(q.fast_register(ctx(1), *fr, two, 100, 2 * kPageSize - 100, kBase + 100,
                            op_flag::kAllowLocalWrite | op_flag::kRdmaReadSink),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.a.done[0].type, OperationType::kFastRegister);
}

// FastRegister with a first byte offset and a base address; peer writes and reads through it;
// invalidate; the peer's access then fails (and its connection with it); fast-register again
// with a new token.
TEST_F(ApiMr, FastRegisterInvalidateAndRegisterAgain) {
  ConnectedPair p("mr_frmr");
  Pages mem(3);
  uint32_t fbo = 0;
  // The region starts 100 bytes into the first page: FBO 100.
  auto pages = mem.lam(*p.b.adapter, &fbo, 100, 2 * kPageSize);
  ASSERT_EQ(fbo, 100u);
  ASSERT_EQ(pages.size(), 3u);
  Handle<Mr> fr = p.b.fast_mr(16);
  ASSERT_TRUE(fr);
  const uint64_t base = 0x40000000 + fbo;
  ASSERT_EQ(p.b.qp->fast_register(ctx(1), *fr, pages, fbo, 2 * kPageSize, base,
                                  op_flag::kAllowRemoteWrite | op_flag::kAllowRemoteRead),
            Status::kSuccess);
  const uint32_t t1 = fr->get_remote_token();
  ASSERT_TRUE(p.wait_done(0, 1));
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  // A write that spans the first page boundary lands at mem + 100 + 4000.
  std::vector<uint8_t> src(200);
  fill(src, 9);
  auto ms = p.a.reg(src.data(), src.size(), 0);
  const Sge ws{addr(src.data()), 200, ms->get_local_token()};
  ASSERT_EQ(p.a.qp->write(ctx(2), {&ws, 1}, base + 4000, t1, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 1));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(mem.p + 100 + 4000, src.data(), 200), 0);
  // Local invalidate, then fast-register again: the new token works, the old one is stale.
  ASSERT_EQ(p.b.qp->invalidate(ctx(3), *fr, 0), Status::kSuccess);
  ASSERT_EQ(p.b.qp->fast_register(ctx(4), *fr, pages, fbo, 2 * kPageSize, base,
                                  op_flag::kAllowRemoteWrite),
            Status::kSuccess);
  const uint32_t t2 = fr->get_remote_token();
  EXPECT_NE(t1, t2);
  ASSERT_TRUE(p.wait_done(1, 3));
  EXPECT_EQ(p.b.done[1].type, OperationType::kInvalidate);
  EXPECT_EQ(p.b.done[1].status, Status::kSuccess);
  EXPECT_EQ(p.b.done[2].status, Status::kSuccess);
  ASSERT_EQ(p.a.qp->write(ctx(5), {&ws, 1}, base, t2, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 3));
  EXPECT_EQ(p.a.done[1].status, Status::kSuccess);
  // Fast-registering a region that is still valid completes with INVALID_DEVICE_REQUEST.
  ASSERT_EQ(p.b.qp->fast_register(ctx(6), *fr, pages, fbo, kPageSize, base, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 4));
  EXPECT_EQ(p.b.done[3].status, Status::kInvalidDeviceRequest);
}

TEST_F(ApiMr, WriteThroughAnInvalidatedRegionFailsAndCancelsThePeersReceives) {
  ConnectedPair p("mr_frinv");
  FrmrOnB b;
  ASSERT_NO_FATAL_FAILURE(b.set_up(p, 0x10000));
  Handle<Mr>& fr = b.fr;
  ASSERT_EQ(p.b.qp->invalidate(ctx(2), *fr, 0), Status::kSuccess);
  ASSERT_EQ(p.b.qp->receive(ctx(3), {&b.rbuf->sge, 1}), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 2));
  uint64_t v = 1;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->write(ctx(4), {&s, 1}, 0x10000, fr->get_remote_token(), op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 3));
  EXPECT_EQ(p.a.done[0].status, Status::kAccessViolation);
  EXPECT_EQ(p.b.done[2].request_context, ctx(3));
  EXPECT_EQ(p.b.done[2].status, Status::kCancelled);
}

// SendAndInvalidate: the receiver's completion is ReceiveAndInvalidate with the token; plain
// GetCqResults returns it too; the token is invalid afterwards (a local invalidate of it fails).
TEST_F(ApiMr, SendAndInvalidateInvalidatesAtTheReceiver) {
  ConnectedPair p("mr_sendinv");
  FrmrOnB b;
  ASSERT_NO_FATAL_FAILURE(b.set_up(p, 0x20000));
  const uint32_t token = b.fr->get_remote_token();
  const Sge& r = b.rbuf->sge;
  ASSERT_EQ(p.b.qp->receive(ctx(2), {&r, 1}), Status::kSuccess);
  ASSERT_EQ(p.b.qp->receive(ctx(3), {&r, 1}), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(0, 1));
  uint64_t v = 4;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->send_and_invalidate(ctx(4), {&s, 1}, op_flag::kInline, token),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 2));
  EXPECT_EQ(p.a.done[0].type, OperationType::kSend);  // the sender's type is Send
  const ResultEx& rc = p.b.done[1];
  EXPECT_EQ(rc.status, Status::kSuccess);
  EXPECT_EQ(rc.type, OperationType::kReceiveAndInvalidate);
  EXPECT_TRUE(static_cast<uint32_t>(rc.type) & static_cast<uint32_t>(OperationType::kReceive));
  EXPECT_EQ(rc.type_specific_completion_output, token);
  // A write through the invalidated token now fails.
  ASSERT_EQ(p.a.qp->write(ctx(5), {&s, 1}, 0x20000, token, op_flag::kInline), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 3));
  EXPECT_EQ(p.a.done[1].status, Status::kAccessViolation);
}

TEST_F(ApiMr, LocalInvalidateOfAnInvalidRegionCompletesWithInvalidDeviceRequest) {
  ConnectedPair p("mr_invinv");
  Handle<Mr> fr = p.a.fast_mr(1, false);
  ASSERT_TRUE(fr);
  ASSERT_EQ(p.a.qp->invalidate(ctx(1), *fr, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kInvalidDeviceRequest);
  EXPECT_EQ(p.a.done[0].type, OperationType::kInvalidate);
}

TEST_F(ApiMr, ReadWithLocalInvalidateInvalidatesTheSink) {
  ConnectedPair p("mr_readinv");
  std::vector<uint8_t> remote(2048);
  fill(remote, 4);
  auto mr = p.b.reg(remote.data(), remote.size(), mr_flag::kAllowRemoteRead);
  Pages mem(1);
  uint32_t fbo = 0;
  auto pages = mem.lam(*p.a.adapter, &fbo);
  Handle<Mr> fr = p.a.fast_mr(1, false);
  ASSERT_TRUE(fr);
  ASSERT_EQ(p.a.qp->fast_register(ctx(1), *fr, pages, 0, kPageSize, addr(mem.p),
                                  op_flag::kAllowLocalWrite),
            Status::kSuccess);
  const Sge s{addr(mem.p), 2048, fr->get_local_token()};
  ASSERT_EQ(p.a.qp->read(ctx(2), {&s, 1}, addr(remote.data()), mr->get_remote_token(),
                         op_flag::kRdmaReadLocalInvalidate),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 0));
  EXPECT_EQ(p.a.done[0].status, Status::kSuccess);
  EXPECT_EQ(p.a.done[1].status, Status::kSuccess) << p.a.done[1].provider_error_code;
  EXPECT_EQ(std::memcmp(mem.p, remote.data(), 2048), 0);
  // The sink's token was invalidated with the read: invalidating it again fails.
  ASSERT_EQ(p.a.qp->invalidate(ctx(3), *fr, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(3, 0));
  EXPECT_EQ(p.a.done[2].status, Status::kInvalidDeviceRequest);
}

TEST_F(ApiMr, PrivilegedTokenIsLocalOnly) {
  ConnectedPair p("mr_priv");
  uint32_t t1 = 0, t2 = 0;
  ASSERT_EQ(p.b.pd->get_privileged_memory_region_token(&t1), Status::kSuccess);
  ASSERT_EQ(p.b.pd->get_privileged_memory_region_token(&t2), Status::kSuccess);
  EXPECT_EQ(t1, t2);
  // An unregistered receive buffer, named by its address and the privileged token.
  std::vector<uint8_t> rb(64, 0);
  const Sge r{addr(rb.data()), 64, t1};
  ASSERT_EQ(p.b.qp->receive(ctx(1), {&r, 1}), Status::kSuccess);
  uint64_t v = 0x0102030405060708ull;
  const Sge s{addr(&v), 8, 0};
  ASSERT_EQ(p.a.qp->send(ctx(2), {&s, 1}, op_flag::kInline), Status::kSuccess);
  ASSERT_TRUE(p.wait_done(1, 1));
  EXPECT_EQ(p.b.done[0].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(rb.data(), &v, 8), 0);
  // Never remote: the peer cannot write with it.
  ASSERT_EQ(p.a.qp->write(ctx(3), {&s, 1}, addr(rb.data()), t1, op_flag::kInline),
            Status::kSuccess);
  ASSERT_TRUE(p.wait_done(2, 1));
  EXPECT_EQ(p.a.done[1].status, Status::kAccessViolation);
}

}  // namespace
}  // namespace urnic::test
