// Helpers of the verbs tests (test_verbs_api): polling with a deadline, and moving an RC QP to
// RTS towards a peer QP by hand, as ibv_rc_pingpong does.
#pragma once

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace verbs_test {

// Polls `cq` until `n` completions arrived or 10 s passed; returns them.
inline std::vector<ibv_wc> poll_n(ibv_cq* cq, size_t n) {
  std::vector<ibv_wc> out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ibv_wc wc[8];
  while (out.size() < n && std::chrono::steady_clock::now() < end) {
    const int k = ibv_poll_cq(cq, 8, wc);
    EXPECT_GE(k, 0);
    for (int i = 0; i < k; ++i) out.push_back(wc[i]);
  }
  return out;
}

// RESET -> INIT -> RTR -> RTS towards QP `peer_qpn` of `peer` (its GID index 1, IPv4; the
// same device for a QP connected to one of its own).
inline void connect_rc(ibv_qp* qp, ibv_context* peer, uint32_t peer_qpn) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  ASSERT_EQ(
      ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
      0);
  a = {};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.dest_qp_num = peer_qpn;
  a.rq_psn = 100;
  a.max_dest_rd_atomic = 4;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  ASSERT_EQ(ibv_query_gid(peer, 1, 1, &a.ah_attr.grh.dgid), 0);
  a.ah_attr.grh.sgid_index = 1;
  a.ah_attr.grh.hop_limit = 64;
  ASSERT_EQ(ibv_modify_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0)
      << "errno " << errno;
  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 100;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 4;
  ASSERT_EQ(ibv_modify_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                              IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
            0);
}

}  // namespace verbs_test
