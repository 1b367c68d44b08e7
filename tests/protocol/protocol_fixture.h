// The fixture of the RC protocol tests (rc_protocol_test.cc), of the hostile-peer tests
// (hostile_peer_test.cc) and of the raw-QP exhaustion tests (fault/exhaustion_test.cc, RawQp):
// one QP on an Endpoint without a port, owned by an Engine that never runs a loop, so the test
// thread calls the `_lc` stage functions directly. Frames "from the peer" are synthesized with
// wire::build_frame and fed through Engine::deliver_lc (parse, ICRC, QP lookup, address check,
// then responder or completer); every frame the stages build stays in the endpoint's TX buffer,
// where the test parses it back. Timers see synthetic TSC values.
#pragma once
#include <gtest/gtest.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "../common/eal.h"
#include "dataplane/cq.h"
#include "dataplane/engine.h"
#include "dataplane/internal.h"
#include "dataplane/mr.h"
#include "dataplane/qp.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"

namespace urnic::test {

using dp::QpState;
using wire::Psn;
namespace opc = wire::opc;

constexpr uint32_t kQpn = 7;
constexpr uint32_t kPeerQpn = 0x51;
constexpr uint32_t kPd = 3;
constexpr uint32_t kMtu = 256;
constexpr uint32_t kBudget = 64;
constexpr uint32_t kLocalIp = 0x0A000001;  // 10.0.0.1, this QP
constexpr uint32_t kPeerIp = 0x0A000002;   // 10.0.0.2, the synthesized peer
constexpr wire::MacAddr kLocalMac{2, 0, 0, 0, 0, 1};
constexpr wire::MacAddr kPeerMac{2, 0, 0, 0, 0, 2};
constexpr uint8_t kRnrTimerCode = 12;  // 0.64 ms (rc_pingpong's value)
constexpr uint8_t kAckNoCredit = wire::aeth::kAckNoCredit;
constexpr uint8_t kNakSeq = wire::aeth::kNak | wire::aeth::kNakPsnSeqError;           // 0x60
constexpr uint8_t kNakInvReq = wire::aeth::kNak | wire::aeth::kNakInvalidRequest;     // 0x61
constexpr uint8_t kNakAccess = wire::aeth::kNak | wire::aeth::kNakRemoteAccessError;  // 0x62
// Synthetic TSC of every test's first event; timers are reached by adding tsc_from_ns() to it.
constexpr uint64_t kT0 = 1'000'000'000;
// mbufs in the shared pool; no per-lcore cache, so the available count is exact and every test
// checks at teardown that all of them came back (nothing leaked by the stages or the test).
constexpr uint32_t kPoolSize = 1023;

// Layout of the one registered test region (registered for every right).
constexpr uint32_t kMemSize = 16384;
constexpr uint32_t kRecvOff = 0;         // responder receive buffers, 1 KiB each
constexpr uint32_t kReadSrcOff = 4096;   // responder READ source
constexpr uint32_t kAtomicOff = 8192;    // responder atomic word (8-byte aligned)
constexpr uint32_t kSendSrcOff = 10240;  // requester SEND / WRITE source
constexpr uint32_t kReadDstOff = 12288;  // requester READ sink
// Remote address and key the requester tests name (the peer's memory; never touched here).
constexpr uint64_t kRemoteVa = 0x7f0000001000;
constexpr uint32_t kRemoteRkey = 0x4242;

inline rte_mempool* g_pool = nullptr;

struct QpOptions {
  uint32_t rq_psn = 0xFFFFFE;  // responder: requests PSNs rq(0), rq(1), ... cross the wrap
  uint32_t sq_psn = 0xFFFFFF;  // requester: the second packet sent has PSN 0
  uint8_t timeout = 14;        // 67 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  CongestionConfig cc{};  // dp::QpConfig::cc (the maximum rate: 100 Gb/s when left 0)
  // Give `cc` to the QP with the modify to RTR (qp_attr::kCongestion) instead of at creation.
  bool cc_by_modify = false;
  bool selective_repeat = false;  // qp_attr::kSelectiveRepeat with the modify to RTR
  // dp::QpConfig's limits, which size the work queue slots (send_wqe_slot_bytes).
  uint32_t max_send_sge = dp::kMaxSge;
  uint32_t max_recv_sge = dp::kMaxSge;
  uint32_t max_inline = dp::kMaxInline;
};

// One frame the stages emitted, decoded.
struct TxFrame {
  uint8_t opcode = 0;
  uint32_t psn = 0;
  uint32_t dest_qp = 0;
  bool ack_req = false;
  bool has_aeth = false;
  uint8_t syndrome = 0;
  uint32_t msn = 0;
  uint64_t va = 0;  // RETH
  uint32_t rkey = 0;
  uint32_t dma_length = 0;
  uint64_t orig = 0;  // AtomicAckETH
  std::vector<uint8_t> payload;
};

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

inline std::vector<uint8_t> slice(const std::vector<uint8_t>& v, size_t off, size_t len) {
  return {v.begin() + static_cast<ptrdiff_t>(off), v.begin() + static_cast<ptrdiff_t>(off + len)};
}

inline void* ctx(uintptr_t n) { return reinterpret_cast<void*>(n); }

class RcProtocol : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(eal_up("0", 256), Status::kSuccess);
    if (g_pool == nullptr) {
      g_pool = rte_pktmbuf_pool_create("rc_protocol", kPoolSize, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       SOCKET_ID_ANY);
    }
    ASSERT_NE(g_pool, nullptr);
  }

  void SetUp() override {
    ASSERT_NE(g_pool, nullptr);
    mem_.assign(kMemSize, 0);
    ASSERT_EQ(mrs_.register_region(kPd, reinterpret_cast<uint64_t>(mem_.data()), mem_.size(),
                                   dp::access::kAll, &key_),
              Status::kSuccess);
    ep_ = std::make_unique<dp::Endpoint>(nullptr, 0, g_pool, &mrs_, 64);
    (void)engine_.add_endpoint(ep_.get());
  }

  void TearDown() override {
    EXPECT_EQ(destroy_qp(), Status::kSuccess);
    EXPECT_EQ(rte_mempool_avail_count(g_pool), kPoolSize) << "mbufs leaked";
  }

  // ---- Setup: add the QP to the engine and walk it RESET -> INIT -> RTR -> RTS ---------------

  void bring_up(const QpOptions& o = {}) {
    opts_ = o;
    dp::QpConfig qc;
    qc.qpn = kQpn;
    qc.pd = kPd;
    qc.send_cq = &scq_;
    qc.recv_cq = &rcq_;
    qc.sq_depth = 16;
    qc.rq_depth = 16;
    qc.max_send_sge = o.max_send_sge;
    qc.max_recv_sge = o.max_recv_sge;
    qc.max_inline = o.max_inline;
    if (!o.cc_by_modify) qc.cc = o.cc;
    qp_ = std::make_unique<dp::Qp>(qc);
    if (o.selective_repeat) {
      ASSERT_TRUE(qp_->prepare_selective_repeat());
    }
    dp::MailboxMsg add;
    add.kind = dp::MailboxMsg::Kind::kAddQp;
    add.ep = ep_.get();
    add.qp = qp_.get();
    ASSERT_EQ(engine_.call(add), Status::kSuccess);

    using namespace dp::qp_attr;
    dp::QpAttr a;
    a.state = QpState::kInit;
    a.access = dp::access::kRemoteRead | dp::access::kRemoteWrite | dp::access::kRemoteAtomic;
    ASSERT_EQ(modify(a, kState | kAccessFlags), Status::kSuccess);
    a.state = QpState::kRtr;
    a.av.src_mac = kLocalMac;
    a.av.dst_mac = kPeerMac;
    a.av.src_ip4 = kLocalIp;
    a.av.dst_ip4 = kPeerIp;
    a.path_mtu = kMtu;
    a.dest_qpn = kPeerQpn;
    a.rq_psn = o.rq_psn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = kRnrTimerCode;
    a.cc = o.cc;
    a.selective_repeat = o.selective_repeat;
    ASSERT_EQ(modify(a, kState | kAv | kPathMtu | kDestQpn | kRqPsn | kMaxDestRdAtomic |
                            kMinRnrTimer | (o.cc_by_modify ? kCongestion : 0) |
                            (o.selective_repeat ? kSelectiveRepeat : 0)),
              Status::kSuccess);
    a.state = QpState::kRts;
    a.sq_psn = o.sq_psn;
    a.timeout = o.timeout;
    a.retry_cnt = o.retry_cnt;
    a.rnr_retry = o.rnr_retry;
    a.max_rd_atomic = 4;
    ASSERT_EQ(modify(a, kState | kSqPsn | kTimeout | kRetryCnt | kRnrRetry | kMaxRdAtomic),
              Status::kSuccess);
    ASSERT_EQ(qp_->state(), QpState::kRts);
  }

  // Drops what the TX buffer holds and removes the QP (if any) from the engine.
  Status destroy_qp() {
    ep_->tx_drop_all();
    if (qp_ == nullptr) return Status::kSuccess;
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kDestroyQp;
    m.ep = ep_.get();
    m.qp = qp_.get();
    const Status st = engine_.call(m);
    if (st == Status::kSuccess) qp_.reset();
    return st;
  }

  // Tears the QP down and builds a new one (same QPN, same peer, same options): a fresh
  // connection.
  void reconnect() {
    ASSERT_EQ(destroy_qp(), Status::kSuccess);
    bring_up(opts_);
  }

  Status modify(const dp::QpAttr& a, uint32_t mask) {
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kModifyQp;
    m.ep = ep_.get();
    m.qp = qp_.get();
    m.attr = a;
    m.mask = mask;
    return engine_.call(m);
  }

  // PSN k packets after the first one the responder expects / the requester sends.
  uint32_t rq(int32_t k) const { return (Psn(opts_.rq_psn) + k).value(); }
  uint32_t sq(int32_t k) const { return (Psn(opts_.sq_psn) + k).value(); }
  uint64_t addr(uint32_t off) const { return reinterpret_cast<uint64_t>(mem_.data()) + off; }

  // ---- Frames from the peer ------------------------------------------------------------------

  static wire::TransportHeaders hdr(uint8_t opcode, uint32_t psn, bool ack_req = false) {
    wire::TransportHeaders th;
    th.bth.opcode = opcode;
    wire::Bth::Psn::set(th.bth, psn);
    wire::Bth::AckReq::set(th.bth, ack_req ? 1u : 0u);
    return th;
  }
  // A request with a RETH (WRITE FIRST / ONLY, READ REQUEST), AckReq set.
  static wire::TransportHeaders reth(uint8_t opcode, uint32_t psn, uint64_t va, uint32_t rkey,
                                     uint32_t len) {
    auto th = hdr(opcode, psn, true);
    th.reth.va = wire::Be64::of(va);
    th.reth.rkey = wire::Be32::of(rkey);
    th.reth.dma_length = wire::Be32::of(len);
    return th;
  }

  // Builds the frame the peer would send (the QP's address vector mirrored, DestQP = the QP)
  // and hands it to the RX path.
  // `net`: the peer's addresses (peer_net() unless a test changes a field, e.g. the ECN bits).
  void receive(wire::TransportHeaders th, std::span<const uint8_t> payload = {}, uint64_t now = kT0,
               const wire::NetHeaders& net = peer_net()) {
    th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
    wire::Bth::DestQp::set(th.bth, kQpn);
    rte_mbuf* m = build(net, th, payload);
    ASSERT_NE(m, nullptr);
    const uint64_t drops_before = total_rx_drops();
    engine_.deliver_lc(*ep_, m, now);
    EXPECT_EQ(total_rx_drops(), drops_before) << "the RX checks dropped a synthesized frame";
  }

  // The peer's addresses, as frames from it carry them (the QP's address vector mirrored).
  static wire::NetHeaders peer_net() {
    wire::NetHeaders net;
    net.src_mac = kPeerMac;
    net.dst_mac = kLocalMac;
    net.src_ip4 = kPeerIp;
    net.dst_ip4 = kLocalIp;
    net.udp_sport = wire::udp_sport_for(kPeerQpn, kQpn);
    return net;
  }

  // The frame `net` / `th` / `payload` describe, exactly as given, in an mbuf of the test pool
  // (null, with a test failure, if it cannot be built).
  static rte_mbuf* build(const wire::NetHeaders& net, const wire::TransportHeaders& th,
                         std::span<const uint8_t> payload) {
    const uint32_t len =
        wire::frame_length(net, th.bth.opcode, static_cast<uint32_t>(payload.size()));
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    EXPECT_NE(m, nullptr);
    if (m == nullptr) return nullptr;
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
    if (p == nullptr || wire::build_frame({p, len}, net, th, payload) != len) {
      ADD_FAILURE() << "could not build a " << len << "-byte frame";
      rte_pktmbuf_free(m);
      return nullptr;
    }
    return m;
  }

  uint64_t total_rx_drops() {
    uint64_t n = 0;
    for (uint64_t d : ep_->counters().rx_drops) n += d;
    return n;
  }

  void send_pkt(uint8_t opcode, uint32_t psn, bool ack_req, std::span<const uint8_t> payload) {
    receive(hdr(opcode, psn, ack_req), payload);
  }
  void read_request(uint32_t psn, uint64_t va, uint32_t len) {
    receive(reth(opc::kReadRequest, psn, va, key_, len));
  }
  void fetch_add(uint32_t psn, uint64_t va, uint64_t add) {
    auto th = hdr(opc::kFetchAdd, psn, true);
    th.atomic_eth.va = wire::Be64::of(va);
    th.atomic_eth.rkey = wire::Be32::of(key_);
    th.atomic_eth.swap_add = wire::Be64::of(add);
    receive(th);
  }
  void ack(uint32_t psn, uint8_t syndrome, uint32_t msn, uint64_t now = kT0) {
    auto th = hdr(opc::kAcknowledge, psn);
    wire::Aeth::Syndrome::set(th.aeth, syndrome);
    wire::Aeth::Msn::set(th.aeth, msn);
    receive(th, {}, now);
  }
  void read_response(uint8_t opcode, uint32_t psn, std::span<const uint8_t> payload, uint32_t msn,
                     uint64_t now = kT0) {
    auto th = hdr(opcode, psn);
    wire::Aeth::Syndrome::set(th.aeth, kAckNoCredit);
    wire::Aeth::Msn::set(th.aeth, msn);
    receive(th, payload, now);
  }

  // ---- Local work ----------------------------------------------------------------------------

  void post_recv(uintptr_t context, uint32_t off, uint32_t len) {
    dp::RecvWqe w;
    w.request_context = ctx(context);
    w.num_sge = 1;
    w.length = len;
    w.sge[0] = {addr(off), len, key_};
    ASSERT_EQ(qp_->post_recv(w), Status::kSuccess);
  }

  // A SEND / WRITE / READ of `len` bytes at `off` in the test region (remote side for WRITE and
  // READ: kRemoteVa / kRemoteRkey).
  void post_send(dp::WrOpcode op, uintptr_t context, uint32_t off, uint32_t len) {
    dp::SendWqe w;
    w.opcode = op;
    w.request_context = ctx(context);
    w.num_sge = 1;
    w.length = len;
    w.sge[0] = {addr(off), len, key_};
    w.remote_addr = kRemoteVa;
    w.rkey = kRemoteRkey;
    ASSERT_EQ(qp_->post_send(w), Status::kSuccess);
  }

  // ---- Running the stages and reading what they emitted --------------------------------------

  uint32_t responder_tx(uint32_t budget = kBudget, uint64_t now = kT0) {
    return dp::responder_tx_lc(*ep_, *qp_, budget, now);
  }
  uint32_t requester_tx(uint64_t now = kT0) {
    return dp::requester_tx_lc(*ep_, *qp_, kBudget, now);
  }
  bool timers(uint64_t now) { return dp::requester_timers_lc(*ep_, *qp_, now); }

  // Parses, checks and frees every frame in the TX buffer.
  std::vector<TxFrame> take_tx() {
    std::vector<TxFrame> out;
    for (uint32_t i = 0; i < ep_->tx_count(); ++i) {
      rte_mbuf* m = ep_->tx_at(i);
      auto* data = rte_pktmbuf_mtod(m, uint8_t*);
      wire::ParsedFrame f;
      TxFrame t;
      const wire::ParseError pe = wire::parse(data, rte_pktmbuf_data_len(m), f);
      EXPECT_EQ(pe, wire::ParseError::kOk) << wire::to_string(pe);
      if (pe == wire::ParseError::kOk) {
        // Addressed by the QP's address vector.
        EXPECT_FALSE(f.l.ipv6);
        EXPECT_EQ(f.ipv4().src.get(), kLocalIp);
        EXPECT_EQ(f.ipv4().dst.get(), kPeerIp);
        t.opcode = f.opcode;
        t.psn = wire::Bth::Psn::get(f.bth());
        t.dest_qp = wire::Bth::DestQp::get(f.bth());
        t.ack_req = wire::Bth::AckReq::get(f.bth()) != 0;
        t.has_aeth = (f.mask & wire::op::kAeth) != 0;
        if (t.has_aeth) {
          t.syndrome = static_cast<uint8_t>(wire::Aeth::Syndrome::get(f.aeth()));
          t.msn = wire::Aeth::Msn::get(f.aeth());
        }
        if (f.mask & wire::op::kReth) {
          t.va = f.reth().va.get();
          t.rkey = f.reth().rkey.get();
          t.dma_length = f.reth().dma_length.get();
        }
        if (f.mask & wire::op::kAtomicAckEth) t.orig = f.atomic_ack().orig.get();
        t.payload.assign(f.payload().begin(), f.payload().end());
        EXPECT_EQ(t.dest_qp, kPeerQpn);
        EXPECT_TRUE(wire::icrc_check(data, f.l)) << "bad ICRC on opcode " << int{t.opcode};
      }
      out.push_back(std::move(t));
    }
    ep_->tx_drop_all();
    return out;
  }

  static std::vector<ResultEx> poll(dp::Cq& cq) {
    std::vector<ResultEx> out;
    ResultEx r[16];
    for (size_t n; (n = cq.poll(r)) != 0;) out.insert(out.end(), r, r + n);
    return out;
  }

  // Expects a READ REQUEST with PSN `psn` for `len` bytes at `va`.
  static void expect_read_request(const TxFrame& t, uint32_t psn, uint64_t va, uint32_t len) {
    EXPECT_EQ(t.opcode, opc::kReadRequest);
    EXPECT_EQ(t.psn, psn);
    EXPECT_EQ(t.va, va);
    EXPECT_EQ(t.dma_length, len);
  }

  // Expects one plain ACK (or NAK) frame.
  static void expect_ack(const TxFrame& t, uint32_t psn, uint8_t syndrome, uint32_t msn) {
    EXPECT_EQ(t.opcode, opc::kAcknowledge);
    EXPECT_EQ(t.psn, psn);
    EXPECT_TRUE(t.has_aeth);
    EXPECT_EQ(int{t.syndrome}, int{syndrome});
    EXPECT_EQ(t.msn, msn);
    EXPECT_TRUE(t.payload.empty());
  }

  QpOptions opts_;
  std::vector<uint8_t> mem_;
  dp::MrTable mrs_{64, 0x5eed};
  uint32_t key_ = 0;
  dp::Cq scq_{64}, rcq_{64};
  std::unique_ptr<dp::Endpoint> ep_;
  dp::Engine engine_;
  std::unique_ptr<dp::Qp> qp_;
};

}  // namespace urnic::test
