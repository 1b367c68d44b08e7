// First end-to-end checks of the RC data path over net_ring (one of each operation).
#include <gtest/gtest.h>

#include "rc_fixture.h"

namespace urnic::test {
namespace {

class RcSmoke : public EalTest {};

TEST_F(RcSmoke, SendWriteReadAtomic) {
  RcPair p("smoke0");
  p.connect(1024);
  std::vector<uint8_t> src(5000), dst(6000, 0xEE), rbuf(5000, 0);
  fill(src, 1);
  const uint32_t ksrc = p.a.reg(src.data(), src.size(), mr_flag::kAllowLocalWrite);
  const uint32_t kdst = p.b.reg(dst.data(), dst.size(),
                                mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite |
                                    mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteAtomic);
  const uint32_t krb = p.a.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);

  // SEND 5000 B into a posted receive.
  const dp::RecvWqe rw = recv_wr(&dst, dst.data(), 6000, kdst);
  ASSERT_EQ(p.b.qp->post_recv(rw), Status::kSuccess);
  auto s = data_wr(dp::WrOpcode::kSend, &src, src.data(), 5000, ksrc);
  ASSERT_EQ(p.a.qp->post_send(s), Status::kSuccess);
  ASSERT_TRUE(p.wait(1, 1));
  EXPECT_EQ(p.a.send_done[0].status, Status::kSuccess);
  EXPECT_EQ(p.b.recv_done[0].status, Status::kSuccess);
  EXPECT_EQ(p.b.recv_done[0].bytes_transferred, 5000u);
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), 5000), 0);
  EXPECT_EQ(dst[5000], 0xEE);

  // WRITE 3000 B at offset 100.
  fill(src, 2);
  auto w = data_wr(dp::WrOpcode::kWrite, nullptr, src.data(), 3000, ksrc,
                   reinterpret_cast<uint64_t>(dst.data()) + 100, kdst);
  ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
  ASSERT_TRUE(p.wait(2, 1));
  EXPECT_EQ(p.a.send_done[1].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(dst.data() + 100, src.data(), 3000), 0);

  // READ it back.
  auto r = data_wr(dp::WrOpcode::kRead, nullptr, rbuf.data(), 3000, krb,
                   reinterpret_cast<uint64_t>(dst.data()) + 100, kdst);
  ASSERT_EQ(p.a.qp->post_send(r), Status::kSuccess);
  ASSERT_TRUE(p.wait(3, 1));
  EXPECT_EQ(p.a.send_done[2].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(rbuf.data(), src.data(), 3000), 0);

  // FETCH_ADD on an aligned word of dst.
  uint64_t* word = reinterpret_cast<uint64_t*>(dst.data() + 5008);
  *word = 40;
  auto f = data_wr(dp::WrOpcode::kFetchAdd, nullptr, rbuf.data(), 8, krb,
                   reinterpret_cast<uint64_t>(word), kdst);
  f.compare_add = 2;
  ASSERT_EQ(p.a.qp->post_send(f), Status::kSuccess);
  ASSERT_TRUE(p.wait(4, 1));
  EXPECT_EQ(p.a.send_done[3].status, Status::kSuccess);
  EXPECT_EQ(*word, 42u);
  uint64_t orig = 0;
  std::memcpy(&orig, rbuf.data(), 8);
  EXPECT_EQ(orig, 40u);
}

}  // namespace
}  // namespace urnic::test
