// Every RC operation over the loopback pair (issue: RC data path, Tests): SEND, SEND with
// immediate, RDMA WRITE, RDMA WRITE with immediate and RDMA READ for a matrix of message sizes
// (0, 1, MTU-1, MTU, MTU+1, 10*MTU+7, 1 MiB) x path MTUs (256, 1024, 4096) x SGE counts (1, 3),
// IPv4 and IPv6; data checked byte for byte on both sides (with guard bytes around every
// buffer) and every completion checked. Atomics, fences, silent success, deferred posting and an
// engine running on its own lcore follow.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "rc_fixture.h"

namespace urnic::test {
namespace {

using dp::WrOpcode;

constexpr uint32_t kGuard = 64;
constexpr uint8_t kGuardByte = 0xEE;

class RcOps : public EalTestWithParam<std::tuple<WrOpcode, uint32_t, bool>> {};

// Splits `len` bytes at `base` into `n` SGEs (the last takes the remainder; pieces may be 0).
void split(Sge* sge, uint8_t* base, uint32_t len, uint32_t n, uint32_t key) {
  const uint32_t piece = len / n;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t l = i + 1 == n ? len - piece * (n - 1) : piece;
    sge[i] = {reinterpret_cast<uint64_t>(base), l, key};
    base += l;
  }
}

bool guards_intact(const std::vector<uint8_t>& buf, size_t used_from, size_t used_to) {
  for (size_t i = 0; i < used_from; ++i)
    if (buf[i] != kGuardByte) return false;
  for (size_t i = used_to; i < buf.size(); ++i)
    if (buf[i] != kGuardByte) return false;
  return true;
}

TEST_P(RcOps, SizeByMtuBySgeMatrix) {
  const auto [op, mtu, ipv6] = GetParam();
  RcPair p("ops" + std::to_string(static_cast<int>(op)) + "_" + std::to_string(mtu) +
           (ipv6 ? "v6" : "v4"));
  p.connect(mtu, ipv6);
  const uint32_t sizes[] = {0, 1, mtu - 1, mtu, mtu + 1, 10 * mtu + 7, 1u << 20};
  const bool is_send = op == WrOpcode::kSend || op == WrOpcode::kSendWithImm;
  const bool uses_recv = is_send || op == WrOpcode::kWriteWithImm;
  size_t expect_send = 0, expect_recv = 0;
  uint32_t iter = 0;
  for (uint32_t size : sizes) {
    for (uint32_t nsge : {1u, 3u}) {
      SCOPED_TRACE("size " + std::to_string(size) + " sges " + std::to_string(nsge));
      ++iter;
      // Requester-local and responder-side buffers, each with guards on both sides.
      std::vector<uint8_t> local(size + 2 * kGuard, kGuardByte),
          remote(size + 2 * kGuard, kGuardByte);
      std::vector<uint8_t> payload(size);
      fill(payload, iter);
      const bool read = op == WrOpcode::kRead;
      // The data source: local for SEND/WRITE, remote for READ. (An empty payload has no
      // data(): memcpy from a null pointer is undefined even for 0 bytes.)
      if (size != 0) std::memcpy((read ? remote : local).data() + kGuard, payload.data(), size);
      const uint32_t rw =
          mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead;
      const uint32_t lkey = p.a.reg(local.data(), local.size(), mr_flag::kAllowLocalWrite);
      const uint32_t rkey = p.b.reg(remote.data(), remote.size(), rw);

      if (uses_recv) {
        dp::RecvWqe rw2;
        rw2.request_context = reinterpret_cast<void*>(uintptr_t{iter});
        // SEND: scatter into nsge pieces covering exactly `size` bytes of `remote`.
        if (is_send) {
          rw2.num_sge = nsge;
          rw2.length = size;
          split(rw2.sge, remote.data() + kGuard, size, nsge, rkey);
        }
        ASSERT_EQ(p.b.qp->post_recv(rw2), Status::kSuccess);
        ++expect_recv;
      }
      auto w = wqe(op, reinterpret_cast<void*>(uintptr_t{iter}));
      w.num_sge = static_cast<uint8_t>(nsge);
      w.length = size;
      split(w.sge, local.data() + kGuard, size, nsge, lkey);
      w.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + kGuard;
      w.rkey = rkey;
      w.imm_or_inv = 0xC0DE0000u | iter;
      ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
      ++expect_send;
      ASSERT_TRUE(p.wait(expect_send, expect_recv)) << "timed out";

      const ResultEx& sc = p.a.send_done.back();
      EXPECT_EQ(sc.status, Status::kSuccess) << to_string(sc.status);
      EXPECT_EQ(sc.request_context, reinterpret_cast<void*>(uintptr_t{iter}));
      EXPECT_EQ(sc.provider_error_code, 0u);
      EXPECT_EQ(sc.type, is_send ? OperationType::kSend
                         : read  ? OperationType::kRead
                                 : OperationType::kWrite);
      // The destination holds exactly the payload; the guards are untouched.
      const std::vector<uint8_t>& dst = read ? local : remote;
      EXPECT_TRUE(std::equal(payload.begin(), payload.end(), dst.begin() + kGuard));
      EXPECT_TRUE(guards_intact(dst, kGuard, kGuard + size));
      // The source is unchanged.
      const std::vector<uint8_t>& src = read ? remote : local;
      EXPECT_TRUE(std::equal(payload.begin(), payload.end(), src.begin() + kGuard));
      if (uses_recv) {
        const ResultEx& rc = p.b.recv_done.back();
        EXPECT_EQ(rc.status, Status::kSuccess);
        EXPECT_EQ(rc.type, OperationType::kReceive);
        EXPECT_EQ(rc.bytes_transferred, size);
        EXPECT_EQ(rc.request_context, reinterpret_cast<void*>(uintptr_t{iter}));
        const bool imm = op == WrOpcode::kSendWithImm || op == WrOpcode::kWriteWithImm;
        EXPECT_EQ((rc.flags & kResultHasImmediate) != 0, imm);
        if (imm) {
          EXPECT_EQ(rc.type_specific_completion_output, 0xC0DE0000u | iter);
        }
      }
      EXPECT_EQ(p.a.deregister(lkey), Status::kSuccess);
      EXPECT_EQ(p.b.deregister(rkey), Status::kSuccess);
    }
  }
  // Every completion accounted for, none extra.
  p.run_until([] { return false; }, 1000);
  EXPECT_EQ(p.a.send_done.size(), expect_send);
  EXPECT_EQ(p.b.recv_done.size(), expect_recv);
  EXPECT_TRUE(p.a.recv_done.empty());
  EXPECT_TRUE(p.b.send_done.empty());
  // Nothing was lost or retransmitted on a lossless link.
  EXPECT_EQ(p.a.qp->counters().retransmits, 0u);
  EXPECT_EQ(p.a.qp->counters().completions_ok, expect_send);
  EXPECT_EQ(p.b.qp->counters().completions_ok, expect_recv);
  EXPECT_GT(p.a.qp->counters().tx_packets, 0u);
}

std::string name_of(const ::testing::TestParamInfo<RcOps::ParamType>& info) {
  const auto [op, mtu, v6] = info.param;
  return std::string(dp::to_string(op)) + "_mtu" + std::to_string(mtu) + (v6 ? "_ipv6" : "_ipv4");
}

INSTANTIATE_TEST_SUITE_P(
    Ipv4, RcOps,
    ::testing::Combine(::testing::Values(WrOpcode::kSend, WrOpcode::kSendWithImm, WrOpcode::kWrite,
                                         WrOpcode::kWriteWithImm, WrOpcode::kRead),
                       ::testing::Values(256u, 1024u, 4096u), ::testing::Values(false)),
    name_of);
INSTANTIATE_TEST_SUITE_P(
    Ipv6, RcOps,
    ::testing::Combine(::testing::Values(WrOpcode::kSend, WrOpcode::kWrite, WrOpcode::kRead),
                       ::testing::Values(1024u, 4096u), ::testing::Values(true)),
    name_of);

class RcMore : public EalTest {};

TEST_F(RcMore, AtomicsCompareSwapAndFetchAdd) {
  RcPair p("atomics");
  p.connect(1024);
  alignas(8) uint64_t target[4] = {100, 7, 0, 0};
  alignas(8) uint64_t result[64] = {};
  const uint32_t rkey =
      p.b.reg(target, sizeof(target), mr_flag::kAllowRemoteAtomic | mr_flag::kAllowLocalWrite);
  const uint32_t lkey = p.a.reg(result, sizeof(result), mr_flag::kAllowLocalWrite);
  auto atomic = [&](WrOpcode op, uint64_t* word, uint64_t cmp_add, uint64_t swap, int slot) {
    auto w =
        data_wr(op, &result[slot], &result[slot], 8, lkey, reinterpret_cast<uint64_t>(word), rkey);
    w.compare_add = cmp_add;
    w.swap = swap;
    return p.a.qp->post_send(w);
  };
  // CAS that matches: swaps, returns the old value.
  ASSERT_EQ(atomic(WrOpcode::kCompareSwap, &target[0], 100, 555, 0), Status::kSuccess);
  // CAS that does not match: leaves memory, returns the current value.
  ASSERT_EQ(atomic(WrOpcode::kCompareSwap, &target[0], 100, 999, 1), Status::kSuccess);
  // 40 fetch-adds of 3 on target[1] (in flight together, max_rd_atomic 16).
  for (int i = 0; i < 40; ++i)
    ASSERT_EQ(atomic(WrOpcode::kFetchAdd, &target[1], 3, 0, 2 + i), Status::kSuccess);
  ASSERT_TRUE(p.wait(42, 0));
  for (const auto& r : p.a.send_done) EXPECT_EQ(r.status, Status::kSuccess);
  EXPECT_EQ(p.a.send_done[0].type, OperationType::kCompareSwap);
  EXPECT_EQ(p.a.send_done[2].type, OperationType::kFetchAdd);
  EXPECT_EQ(result[0], 100u);
  EXPECT_EQ(result[1], 555u);
  EXPECT_EQ(target[0], 555u);
  EXPECT_EQ(target[1], 7u + 40 * 3);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(result[2 + i], 7u + 3u * i) << i;  // executed in order
  // Completions in posting order.
  for (int i = 0; i < 42; ++i) EXPECT_EQ(p.a.send_done[i].request_context, &result[i]);
}

TEST_F(RcMore, SilentSuccessProducesNoCompletionButErrorsDo) {
  RcPair p("silent");
  p.connect(1024);
  std::vector<uint8_t> src(100, 1), dst(100, 0);
  const uint32_t lkey = p.a.reg(src.data(), src.size(), 0);
  const uint32_t rkey = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  for (int i = 0; i < 5; ++i) {
    auto w = wqe(WrOpcode::kWrite, nullptr, i < 4 ? op_flag::kSilentSuccess : 0);
    w.num_sge = 1;
    w.length = 100;
    w.sge[0] = {reinterpret_cast<uint64_t>(src.data()), 100, lkey};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data());
    w.rkey = rkey;
    ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
  }
  ASSERT_TRUE(p.wait(1, 0));
  p.run_until([] { return false; }, 1000);
  EXPECT_EQ(p.a.send_done.size(), 1u);  // only the signalled one
  EXPECT_EQ(p.a.qp->counters().completions_ok, 5u);
  // A silent request that fails still completes (IBTA §10.7.3.1).
  auto bad = wqe(WrOpcode::kWrite, &src, op_flag::kSilentSuccess);
  bad.num_sge = 1;
  bad.length = 100;
  bad.sge[0] = {reinterpret_cast<uint64_t>(src.data()), 100, lkey};
  bad.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + 1;  // one byte out of bounds
  bad.rkey = rkey;
  ASSERT_EQ(p.a.qp->post_send(bad), Status::kSuccess);
  ASSERT_TRUE(p.wait(2, 0));
  EXPECT_EQ(p.a.send_done[1].status, Status::kAccessViolation);
  EXPECT_EQ(p.a.send_done[1].request_context, &src);
}

TEST_F(RcMore, DeferredPostsAreInvisibleUntilTheDoorbell) {
  RcPair p("defer");
  p.connect(1024);
  std::vector<uint8_t> src(64, 9), dst(64 * 8, 0);
  const uint32_t lkey = p.a.reg(src.data(), src.size(), 0);
  const uint32_t rkey = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowRemoteWrite);
  auto post = [&](int i, uint32_t flags) {
    auto w = wqe(WrOpcode::kWrite, nullptr, flags);
    w.num_sge = 1;
    w.length = 64;
    w.sge[0] = {reinterpret_cast<uint64_t>(src.data()), 64, lkey};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + 64 * i;
    w.rkey = rkey;
    return p.a.qp->post_send(w);
  };
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post(i, op_flag::kDefer), Status::kSuccess);
  EXPECT_EQ(p.a.qp->internal().send_ring().staged(), 3u);
  // The engine sees nothing: no frame leaves, nothing completes.
  p.run_until([] { return false; }, 2000);
  EXPECT_TRUE(p.a.send_done.empty());
  EXPECT_EQ(p.a.qp->counters().tx_packets, 0u);
  // An inline failure publishes the deferred ones first (ndkpi.md §7.3) and posts nothing.
  auto bad = wqe(WrOpcode::kWrite, nullptr, op_flag::kDefer);
  bad.num_sge = dp::kMaxSge + 1;
  EXPECT_EQ(p.a.qp->post_send(bad), Status::kDataOverrun);
  EXPECT_EQ(p.a.qp->internal().send_ring().staged(), 0u);
  ASSERT_TRUE(p.wait(3, 0));
  // A non-deferred post rings the doorbell for the ones before it.
  ASSERT_EQ(post(3, op_flag::kDefer), Status::kSuccess);
  ASSERT_EQ(post(4, 0), Status::kSuccess);
  ASSERT_TRUE(p.wait(5, 0));
  p.run_until([] { return false; }, 1000);
  EXPECT_EQ(p.a.send_done.size(), 5u);  // the failed post produced no completion
  for (int i = 0; i < 5; ++i) EXPECT_EQ(dst[64 * i], 9);
}

TEST_F(RcMore, ReadFenceWaitsForEarlierReads) {
  RcPair p("fence");
  p.connect(256);
  std::vector<uint8_t> remote(64 * 1024), local(64 * 1024, 0), src(16, 5);
  fill(remote, 77);
  const uint32_t rkey =
      p.b.reg(remote.data(), remote.size(), mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteWrite);
  const uint32_t lkey = p.a.reg(local.data(), local.size(), mr_flag::kAllowLocalWrite);
  const uint32_t skey = p.a.reg(src.data(), src.size(), 0);
  // A 64 KiB READ (256 response packets), then a fenced WRITE into the region being read.
  auto r = data_wr(WrOpcode::kRead, nullptr, local.data(), 64 * 1024, lkey,
                   reinterpret_cast<uint64_t>(remote.data()), rkey);
  ASSERT_EQ(p.a.qp->post_send(r), Status::kSuccess);
  auto w = wqe(WrOpcode::kWrite, nullptr, op_flag::kReadFence);
  w.num_sge = 1;
  w.length = 16;
  w.sge[0] = {reinterpret_cast<uint64_t>(src.data()), 16, skey};
  w.remote_addr = reinterpret_cast<uint64_t>(remote.data()) + 64 * 1024 - 16;
  w.rkey = rkey;
  ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
  std::vector<uint8_t> expect = remote;
  ASSERT_TRUE(p.wait(2, 0));
  // The READ saw the bytes from before the WRITE.
  EXPECT_EQ(std::memcmp(local.data(), expect.data(), local.size()), 0);
  EXPECT_EQ(remote[64 * 1024 - 1], 5);
}

TEST_F(RcMore, InlineSend) {
  RcPair p("inline");
  p.connect(1024);
  std::vector<uint8_t> dst(200, 0);
  const uint32_t rkey = p.b.reg(dst.data(), dst.size(), mr_flag::kAllowLocalWrite);
  dp::RecvWqe rw;
  rw.num_sge = 1;
  rw.length = 200;
  rw.sge[0] = {reinterpret_cast<uint64_t>(dst.data()), 200, rkey};
  ASSERT_EQ(p.b.qp->post_recv(rw), Status::kSuccess);
  auto w = wqe(WrOpcode::kSend, nullptr, op_flag::kInline);
  w.length = 150;
  for (uint32_t i = 0; i < 150; ++i) w.inline_data[i] = static_cast<uint8_t>(i * 7);
  ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
  ASSERT_TRUE(p.wait(1, 1));
  EXPECT_EQ(p.b.recv_done[0].bytes_transferred, 150u);
  for (uint32_t i = 0; i < 150; ++i) ASSERT_EQ(dst[i], static_cast<uint8_t>(i * 7));
  // Too much inline data fails inline.
  auto big = wqe(WrOpcode::kSend, nullptr, op_flag::kInline);
  big.length = dp::kMaxInline + 1;
  EXPECT_EQ(p.a.qp->post_send(big), Status::kInvalidBufferSize);
}

// Messages up to 1 GiB (IBTA allows 2^31): one WRITE of 1 GiB and one READ of it back, every
// byte compared, with the packet and completion counters accounting for all of it.
TEST_F(RcMore, OneGibWriteAndReadBack) {
  RcPair p("gib");
  p.connect(4096);
  constexpr uint64_t kLen = 1ull << 30;
  std::unique_ptr<uint64_t[]> src(new uint64_t[kLen / 8]), dst(new uint64_t[kLen / 8]),
      back(new uint64_t[kLen / 8]);
  for (uint64_t i = 0; i < kLen / 8; ++i) {
    src[i] = i * 0x9E3779B97F4A7C15ull;
    dst[i] = 0;
    back[i] = 0;
  }
  const uint32_t ks = p.a.reg(src.get(), kLen, 0);
  const uint32_t kb = p.a.reg(back.get(), kLen, mr_flag::kAllowLocalWrite);
  const uint32_t kd =
      p.b.reg(dst.get(), kLen, mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead);
  auto w = data_wr(WrOpcode::kWrite, nullptr, src.get(), static_cast<uint32_t>(kLen), ks,
                   reinterpret_cast<uint64_t>(dst.get()), kd);
  ASSERT_EQ(p.a.qp->post_send(w), Status::kSuccess);
  auto r = data_wr(WrOpcode::kRead, nullptr, back.get(), static_cast<uint32_t>(kLen), kb,
                   reinterpret_cast<uint64_t>(dst.get()), kd);
  ASSERT_EQ(p.a.qp->post_send(r), Status::kSuccess);
  ASSERT_TRUE(p.wait(2, 0));
  EXPECT_EQ(p.a.send_done[0].status, Status::kSuccess);
  EXPECT_EQ(p.a.send_done[1].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(dst.get(), src.get(), kLen), 0);
  EXPECT_EQ(std::memcmp(back.get(), src.get(), kLen), 0);
  // 2^30 / 4096 = 262144 WRITE packets and as many READ responses.
  EXPECT_EQ(p.b.qp->counters().rx_packets, 262144u + 1);
  EXPECT_GE(p.b.qp->counters().tx_packets, 262144u);
  EXPECT_EQ(p.a.qp->counters().completions_by_status[0], 2u);
}

// The engine on its own lcore, the test thread posting and polling through the rings: many
// messages of mixed operations, every completion counted, every byte checked.
TEST_F(RcMore, EngineOnLcoreWithConcurrentPostAndPoll) {
  dp::EngineConfig ec;
  ec.idle_yield_after = 256;  // CI machines have 2 cores shared with other test processes
  RcPair p("threaded", ec);
  p.connect(1024);
  ASSERT_TRUE(p.engine().launch(1));
  constexpr uint32_t kMsgs = 4000, kSize = 3000;
  std::vector<uint8_t> src(kSize * 8), dst(kSize * 8, 0), rbuf(kSize * 8, 0);
  fill(src, 5);
  const uint32_t lkey = p.a.reg(src.data(), src.size(), 0);
  const uint32_t rbk = p.a.reg(rbuf.data(), rbuf.size(), mr_flag::kAllowLocalWrite);
  const uint32_t rkey =
      p.b.reg(dst.data(), dst.size(),
              mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead);
  uint32_t posted = 0, recvs = 0;
  bool pending_recv = false;
  while (posted < kMsgs) {
    const uint32_t slot = posted % 8;
    dp::SendWqe w;
    const uint32_t kind = posted % 3;
    w.opcode = kind == 0 ? WrOpcode::kWrite : kind == 1 ? WrOpcode::kSend : WrOpcode::kRead;
    w.num_sge = 1;
    w.length = kSize;
    w.request_context = reinterpret_cast<void*>(uintptr_t{posted});
    w.sge[0] = {reinterpret_cast<uint64_t>((kind == 2 ? rbuf : src).data()) + slot * kSize, kSize,
                kind == 2 ? rbk : lkey};
    w.remote_addr = reinterpret_cast<uint64_t>(dst.data()) + slot * kSize;
    w.rkey = rkey;
    if (kind == 1 && !pending_recv) {
      dp::RecvWqe rw;
      rw.num_sge = 1;
      rw.length = kSize;
      rw.sge[0] = {reinterpret_cast<uint64_t>(dst.data()) + slot * kSize, kSize, rkey};
      if (p.b.qp->post_recv(rw) != Status::kSuccess) {
        p.collect();
        continue;
      }
      ++recvs;
    }
    const Status s = p.a.qp->post_send(w);
    if (s == Status::kNoMoreEntries) {
      // Send queue full: drain completions and retry. The receive posted for this SEND stays
      // posted and is used by the retry, so the next iteration must not post another.
      p.collect();
      pending_recv = kind == 1;
      continue;
    }
    ASSERT_EQ(s, Status::kSuccess);
    pending_recv = false;
    ++posted;
    p.collect();
  }
  ASSERT_TRUE(p.run_until([&] { return p.a.send_done.size() >= kMsgs; }, 1ull << 40));
  p.engine().stop();
  p.collect();
  ASSERT_EQ(p.a.send_done.size(), kMsgs);
  for (uint32_t i = 0; i < kMsgs; ++i) {
    ASSERT_EQ(p.a.send_done[i].status, Status::kSuccess) << i;
    ASSERT_EQ(p.a.send_done[i].request_context, reinterpret_cast<void*>(uintptr_t{i})) << i;
  }
  EXPECT_GE(p.b.recv_done.size(), 1u);
  for (const auto& r : p.b.recv_done) EXPECT_EQ(r.status, Status::kSuccess);
  // Every slot of dst holds the source pattern, and every READ brought it back.
  EXPECT_EQ(std::memcmp(dst.data(), src.data(), dst.size()), 0);
  EXPECT_EQ(std::memcmp(rbuf.data(), src.data(), rbuf.size()), 0);
}

}  // namespace
}  // namespace urnic::test
