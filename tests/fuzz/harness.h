// Fuzz harnesses (issue 8), shared by the libFuzzer targets in tests/fuzz/ and by the regression
// replay test tests/unit/fuzz_regressions_test.cc: an input that once crashed a target is
// replayed by the normal (gcc) suite through exactly the same code. Header-only, so that a build
// without libFuzzer compiles it too.
//
// Each harness returns an empty string when every invariant held and a description of the first
// broken one otherwise; the fuzz targets abort on a non-empty result, the replay test fails.
//
//  - check_parse(): wire::parse() and the ICRC on arbitrary bytes held in a heap buffer of exactly
//    their size (ASan reports any read past the frame), cross-checked against the bitwise ICRC
//    reference and against a re-build with the frame builder.
//  - AdapterWorld: one endpoint without a port, its MR table and seven QPs in every state, fed a
//    sequence of frames through Engine::deliver_lc(). Every frame the stages emit parses with a
//    valid ICRC, no work request completes twice, no byte outside the memory the peer may write
//    changes (ASan also poisons what no QP may touch), and every mbuf returns to the pool.
//
// The CM has a harness of its own: tests/fuzz/cm_harness.h (fuzz_cm).
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../common/eal.h"
#include "dataplane/cq.h"
#include "dataplane/engine.h"
#include "dataplane/internal.h"
#include "dataplane/mr.h"
#include "dataplane/qp.h"
#include "dataplane/wire/frame.h"
#include "dataplane/wire/icrc.h"

namespace urnic::fuzz {

// =============================================================================================
// fuzz_parse
// =============================================================================================

inline std::string check_parse(const uint8_t* data, size_t size) {
  // Exactly `size` bytes on the heap, so ASan catches a read one past the end.
  std::unique_ptr<uint8_t[]> buf(new uint8_t[size]);
  if (size != 0) std::memcpy(buf.get(), data, size);
  wire::ParsedFrame f;
  const wire::ParseError e = wire::parse(buf.get(), size, f);
  if (e >= wire::ParseError::kCount || wire::to_string(e).empty()) return "bad ParseError value";
  if (e != wire::ParseError::kOk) return {};

  const wire::FrameLayout& l = f.l;
  if (!(l.l3_off < l.l4_off && l.l4_off < l.bth_off && l.bth_off < l.payload_off &&
        uint32_t{l.payload_off} + l.payload_len + l.pad == l.icrc_off && l.frame_len() <= size))
    return "parsed layout is inconsistent or outside the frame";
  if (f.opcode != buf[l.bth_off] || !f.info().valid()) return "opcode not taken from the BTH";

  // Every accessor a stage may use reads inside the frame.
  const wire::NetHeaders net = wire::net_headers_of(f);
  const wire::TransportHeaders th = wire::transport_headers_of(f);
  uint32_t sum = 0;
  for (uint8_t b : f.payload()) sum += b;
  static_cast<void>(sum);

  // The ICRC must leave the frame unchanged (it masks the variant fields in registers), and its
  // value must equal the bitwise reference (rxe_icrc.c semantics).
  const std::vector<uint8_t> before(buf.get(), buf.get() + size);
  const uint32_t crc = wire::icrc_compute(buf.get(), l);
  if (std::memcmp(before.data(), buf.get(), size) != 0) return "icrc_compute changed the frame";
  if (crc != wire::icrc_reference(buf.get(), l)) return "ICRC differs from the reference";
  const uint8_t* w = buf.get() + l.icrc_off;
  const uint32_t on_wire =
      uint32_t{w[0]} | uint32_t{w[1]} << 8 | uint32_t{w[2]} << 16 | uint32_t{w[3]} << 24;
  if (wire::icrc_check(buf.get(), l) != (crc == on_wire)) return "icrc_check disagrees";

  // Re-building from the parsed parameters gives a frame the parser accepts, with the same
  // opcode and payload and a valid ICRC.
  const std::vector<uint8_t> payload(f.payload().begin(), f.payload().end());
  const uint32_t want = wire::frame_length(net, f.opcode, l.payload_len);
  std::vector<uint8_t> out(want);
  const uint32_t n = wire::build_frame(out, net, th, payload);
  if (n == 0) {
    if (want <= 0xFFFF) return "build_frame refused the parameters of a parsed frame";
    return {};
  }
  if (n != want) return "build_frame length differs from frame_length";
  wire::ParsedFrame g;
  if (wire::parse(out.data(), n, g) != wire::ParseError::kOk) return "re-built frame not parsed";
  if (g.opcode != f.opcode || g.l.payload_len != l.payload_len || g.l.ipv6 != l.ipv6 ||
      g.l.vlan != l.vlan || !std::equal(payload.begin(), payload.end(), g.payload().begin()))
    return "re-built frame differs";
  if (!wire::icrc_check(out.data(), g.l)) return "re-built frame has a bad ICRC";
  return {};
}

// =============================================================================================
// fuzz_adapter
// =============================================================================================
//
// Input format: a sequence of records, each a 5-byte header and a frame:
//   ctl   bits 0-2  DestQP: QP index 0..6 (kQpns), 7 = keep the frame's DestQP
//         bit 3     IP addresses: make them the DestQP's peer -> the QP (as the QP's AV says)
//         bits 4-5  PSN: 0 keep, 1 the one expected, 2 expected + delta, 3 expected - delta
//                   (expected = the responder's ePSN for requests, the oldest unacknowledged
//                   PSN for responses; delta = arg >> 4)
//         bit 6     keys: point the RETH / AtomicETH / IETH key at a region (arg & 15) and
//                   the address into, at the edges of, or just past it (see fixup())
//         bit 7     keep the ICRC as sent (else it is recomputed after the fixups)
//   arg   region selector (bits 0-3) and PSN delta (bits 4-7)
//   dt    time advanced before the frame, in ms (local ACK timeouts and RNR waits fire)
//   len   frame length, 16 bits little-endian (clamped to what is left)
// Fixups are applied only to frames that parse, so that the fuzzer reaches the stages without
// having to forge an ICRC; frames that do not parse go in unchanged.

inline constexpr size_t kRecordHeader = 5;
inline constexpr uint8_t kCtlQpMask = 0x07;
inline constexpr uint8_t kCtlKeepQp = 0x07;
inline constexpr uint8_t kCtlFixAddr = 0x08;
inline constexpr uint8_t kCtlPsnShift = 4;
inline constexpr uint8_t kCtlPsnExpected = 1, kCtlPsnPlus = 2, kCtlPsnMinus = 3;
inline constexpr uint8_t kCtlFixKeys = 0x40;
inline constexpr uint8_t kCtlKeepIcrc = 0x80;
// At most this many records per input: bounds the time of one execution.
inline constexpr size_t kMaxRecords = 256;

// Appends one record to `out` (corpus generation and tests).
inline void append_record(std::vector<uint8_t>& out, uint8_t ctl, uint8_t arg, uint8_t dt,
                          const std::vector<uint8_t>& frame) {
  const auto len = static_cast<uint16_t>(std::min<size_t>(frame.size(), 0xFFFF));
  out.insert(out.end(), {ctl, arg, dt, static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8)});
  out.insert(out.end(), frame.begin(), frame.begin() + len);
}

// The world every input starts from.
inline constexpr uint32_t kPdA = 1;  // the QPs' protection domain
inline constexpr uint32_t kPdB = 2;  // another one
inline constexpr size_t kNumQps = 7;
// QP index -> QPN; the states are in kQpStates.
inline constexpr std::array<uint32_t, kNumQps> kQpns = {2, 3, 4, 5, 6, 7, 8};
enum QpIdx : size_t { kQReset, kQInit, kQRtr, kQRts, kQRts6, kQSqd, kQErr };
inline constexpr std::array<dp::QpState, kNumQps> kQpStates = {
    dp::QpState::kReset, dp::QpState::kInit, dp::QpState::kRtr, dp::QpState::kRts,
    dp::QpState::kRts,   dp::QpState::kSqd,  dp::QpState::kErr};
inline constexpr uint32_t kLocalIp = 0x0A000001;  // 10.0.0.1: the QPs
inline constexpr uint32_t kPeerIp = 0x0A000002;   // 10.0.0.2: the peer the fuzzer plays
inline constexpr wire::Ipv6Addr kLocalIp6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
inline constexpr wire::Ipv6Addr kPeerIp6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
inline constexpr wire::MacAddr kLocalMac{2, 0, 0, 0, 0, 1};
inline constexpr wire::MacAddr kPeerMac{2, 0, 0, 0, 0, 2};
inline constexpr uint32_t kPeerQpn = 0x51;
// First PSNs: the responder's ePSN and the requester's first PSN; sequences cross the 24-bit wrap.
inline constexpr uint32_t kRqStartPsn = 0xFFFFF0;
inline constexpr uint32_t kSqStartPsn = 0xFFFFF8;
// The RTS IPv4 QP's path MTU; the others use 1024.
inline constexpr uint32_t kMtuRts = 256;
inline constexpr uint32_t kMtuOther = 1024;

// Arena pages (4 KiB, page aligned). Pages not listed are guards. Only the ranges the peer may
// write (AdapterWorld::allowed_) may change; every other byte is compared with its first value.
inline constexpr uint32_t kPage = dp::kMrPageSize;
enum ArenaPage : uint32_t {
  kPgRw = 1,          // 2 pages: registered, every right -> remote write allowed
  kPgRo = 4,          // registered, remote read only
  kPgOtherPd = 6,     // registered with every right in PD B
  kPgFrmrValid = 8,   // 2 pages: FRMR fast-registered with every right
  kPgFrmrInval = 11,  // 2 pages: FRMR fast-registered with every right, then invalidated
  kPgFrmrRo = 14,     // FRMR fast-registered with remote read only
  kPgDereg = 16,      // registered with every right, then deregistered
  kPgRecv = 18,       // receive buffers (local write only)
  kPgSrc = 20,        // requester's SEND / WRITE source (local read only)
  kPgSink = 22,       // requester's READ / atomic sinks (local write)
  kArenaPages = 24,
};
// Registered sub-ranges start and end inside their pages, so an off-by-one access at either end
// lands on shadowed (and, under ASan, poisoned) bytes.
inline constexpr uint32_t kRwHead = 16, kRwTail = 24;
inline constexpr uint32_t kFrmrFbo = 104, kFrmrTail = 40;
inline constexpr uint64_t kFrmrValidIova = 0x7e0000000000;  // base_va the peer uses
inline constexpr uint64_t kFrmrInvalIova = 0x7e0000100000;
inline constexpr uint64_t kFrmrRoIova = 0x7e0000200000;
// Receive WQEs: 240-byte slices at a 256-byte stride in kPgRecv, two per QP (from INIT on).
inline constexpr uint32_t kRecvStride = 256, kRecvLen = 240, kRecvsPerQp = 2;

// Region selectors of the keys fixup (arg & 15, modulo kNumTargets).
enum Target : uint32_t {
  kTRw,
  kTRo,
  kTOtherPd,
  kTFrmrValid,
  kTFrmrInval,
  kTFrmrRo,
  kTDereg,
  kTRecv,
  kTFrmrFresh,  // allocated, never fast-registered
  kNumTargets
};

// What a libFuzzer target returns for a harness's verdict: 0, or (a broken invariant) the
// description on stderr and an abort, which libFuzzer reports with the input that caused it.
inline int verdict(const char* target, const std::string& err) {
  if (err.empty()) return 0;
  std::fprintf(stderr, "%s: %s\n", target, err.c_str());
  std::abort();
}

inline constexpr uint32_t kPoolSize = 1023;  // 2^n - 1: the mempool optimum
inline constexpr uint16_t kDataRoom = RTE_PKTMBUF_HEADROOM + 4096 + 512;

// EAL (no hugepages) and the mbuf pool, once per process. No per-lcore cache, so the available
// count is exact and a leaked mbuf shows.
inline rte_mempool* adapter_pool() {
  static rte_mempool* const pool = []() -> rte_mempool* {
    if (test::eal_up("0", 128, "*:error") != Status::kSuccess) return nullptr;
    return rte_pktmbuf_pool_create("urnic_fuzz", kPoolSize, 0, 0, kDataRoom, SOCKET_ID_ANY);
  }();
  return pool;
}

class AdapterWorld {
 public:
  explicit AdapterWorld(rte_mempool* pool)
      : pool_(pool),
        arena_(static_cast<uint8_t*>(std::aligned_alloc(kPage, size_t{kArenaPages} * kPage))),
        mrs_(64, 0x5eed),
        engine_(engine_config()),
        scq_(256),
        rcq_(256) {
    ep_ = std::make_unique<dp::Endpoint>(nullptr, 0, pool_, &mrs_, 16);
    (void)engine_.add_endpoint(ep_.get());
    tick_ms_ = dp::tsc_from_ns(1'000'000);
    // A pattern that differs from byte to byte (it repeats every page). memcpy / memcmp keep the
    // harness's own loops out of the coverage feedback and fast.
    static const std::array<uint8_t, kPage> pattern = [] {
      std::array<uint8_t, kPage> p{};
      for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(i * 131 + 7);
      return p;
    }();
    for (uint32_t p = 0; p < kArenaPages; ++p) std::memcpy(page(p), pattern.data(), kPage);
    setup_regions();
    for (size_t i = 0; i < kNumQps; ++i) setup_qp(i);
    tx_build();
    fail(check_tx());
    shadow_.assign(arena_.get(), arena_.get() + size_t{kArenaPages} * kPage);
    poison_unreachable();
  }

  ~AdapterWorld() {
    ASAN_UNPOISON_MEMORY_REGION(arena_.get(), shadow_.size());
    ep_->tx_drop_all();
    for (auto& qp : qps_) {
      if (qp == nullptr) continue;
      dp::MailboxMsg m;
      m.kind = dp::MailboxMsg::Kind::kDestroyQp;
      m.ep = ep_.get();
      m.qp = qp.get();
      static_cast<void>(engine_.call(m));
    }
  }
  AdapterWorld(const AdapterWorld&) = delete;
  AdapterWorld& operator=(const AdapterWorld&) = delete;

  // Feeds the records of one input; returns the first broken invariant ("" if none).
  std::string run(const uint8_t* data, size_t size) {
    if (!error_.empty()) return "setup: " + error_;
    size_t pos = 0;
    for (size_t rec = 0; rec < kMaxRecords && size - pos >= kRecordHeader; ++rec) {
      const uint8_t ctl = data[pos], arg = data[pos + 1], dt = data[pos + 2];
      size_t len = size_t{data[pos + 3]} | size_t{data[pos + 4]} << 8;
      pos += kRecordHeader;
      len = std::min(len, size - pos);
      now_ += dt * tick_ms_;
      for (auto& qp : qps_) {
        if (qp->requester().ack_deadline != 0 || qp->requester().rnr_deadline != 0)
          dp::requester_timers_lc(*ep_, *qp, now_);
      }
      if (!deliver(ctl, arg, data + pos, len)) return "mbuf pool exhausted: mbufs leaked";
      pos += len;
      tx_build();
      if (std::string e = check_tx(); !e.empty()) return e;
      if (std::string e = drain_cqs(); !e.empty()) return e;
    }
    if (verbose()) dump();
    return check_memory();
  }

 private:
  static dp::EngineConfig engine_config() {
    dp::EngineConfig c;
    c.max_qps = 16;
    return c;
  }
  uint8_t* page(uint32_t p) const { return arena_.get() + size_t{p} * kPage; }
  uint64_t addr(uint32_t p, uint32_t off = 0) const {
    return reinterpret_cast<uint64_t>(page(p)) + off;
  }
  void allow(uint64_t a, uint64_t len) {
    allowed_.emplace_back(a - reinterpret_cast<uint64_t>(arena_.get()), len);
  }
  void fail(const std::string& what) {
    if (error_.empty()) error_ = what;
  }

  void reg(Target t, uint32_t pd, uint64_t va, uint64_t len, uint32_t acc) {
    if (mrs_.register_region(pd, va, len, acc, &keys_[t]) != Status::kSuccess)
      fail("register_region");
    base_[t] = va;
    len_[t] = len;
  }
  void frmr(Target t, uint32_t first_page, uint32_t npages, uint64_t iova, uint32_t acc) {
    uint32_t key = 0;
    if (mrs_.alloc_fast_register(kPdA, npages, true, &key) != Status::kSuccess)
      fail("alloc_fast_register");
    std::array<uint64_t, 2> pages{addr(first_page), addr(first_page + 1)};
    const uint64_t len = uint64_t{npages} * kPage - kFrmrFbo - kFrmrTail;
    keys_[t] = mrs_.next_fast_register_key(key);
    if (mrs_.fast_register(keys_[t], kPdA, pages.data(), npages, kFrmrFbo, len, iova, acc) !=
        dp::MrCheck::kOk)
      fail("fast_register");
    base_[t] = iova;
    len_[t] = len;
  }

  void setup_regions() {
    using namespace dp::access;
    reg(kTRw, kPdA, addr(kPgRw, kRwHead), 2 * kPage - kRwHead - kRwTail, kAll);
    allow(base_[kTRw], len_[kTRw]);
    reg(kTRo, kPdA, addr(kPgRo, 8), kPage - 16, kRemoteRead);
    reg(kTOtherPd, kPdB, addr(kPgOtherPd), kPage, kAll);
    frmr(kTFrmrValid, kPgFrmrValid, 2, kFrmrValidIova, kAll);
    allow(addr(kPgFrmrValid, kFrmrFbo), len_[kTFrmrValid]);
    frmr(kTFrmrInval, kPgFrmrInval, 2, kFrmrInvalIova, kAll);
    if (mrs_.invalidate(keys_[kTFrmrInval], kPdA) != dp::MrCheck::kOk) fail("invalidate");
    frmr(kTFrmrRo, kPgFrmrRo, 1, kFrmrRoIova, kRemoteRead);
    reg(kTDereg, kPdA, addr(kPgDereg), kPage, kAll);
    if (mrs_.deregister(keys_[kTDereg]) != Status::kSuccess) fail("deregister");
    reg(kTRecv, kPdA, addr(kPgRecv), kPage, kLocalWrite);
    if (mrs_.alloc_fast_register(kPdA, 2, true, &keys_[kTFrmrFresh]) != Status::kSuccess)
      fail("alloc_fast_register");
    base_[kTFrmrFresh] = 0x7e0000300000;
    len_[kTFrmrFresh] = kPage;
    if (mrs_.register_region(kPdA, addr(kPgSrc), kPage, kLocalRead, &src_key_) != Status::kSuccess)
      fail("register src");
    if (mrs_.register_region(kPdA, addr(kPgSink), kPage, kLocalWrite | kReadSink, &sink_key_) !=
        Status::kSuccess)
      fail("register sink");
  }

  void modify(dp::Qp& qp, const dp::QpAttr& a, uint32_t mask) {
    dp::MailboxMsg m;
    m.kind = dp::MailboxMsg::Kind::kModifyQp;
    m.ep = ep_.get();
    m.qp = &qp;
    m.attr = a;
    m.mask = mask;
    const Status st = engine_.call(m);
    if (st != Status::kSuccess)
      fail(std::string("modify to ") + dp::to_string(a.state) + ": " + std::string(to_string(st)));
  }

  void post_recv(dp::Qp& qp, size_t slot, uint32_t key) {
    dp::RecvWqe r;
    r.request_context = reinterpret_cast<void*>(slot + 1);
    r.num_sge = 1;
    r.length = kRecvLen;
    r.sge[0] = {addr(kPgRecv, static_cast<uint32_t>(slot * kRecvStride)), kRecvLen, key};
    if (qp.post_recv(r) != Status::kSuccess) fail("post_recv");
    ++recvs_posted_;
    allow(r.sge[0].addr, kRecvLen);
  }

  void post(dp::Qp& qp, dp::WrOpcode op, uint32_t len, uint64_t local, uint32_t lkey,
            uint32_t flags = 0) {
    dp::SendWqe w;
    w.opcode = op;
    w.request_context = reinterpret_cast<void*>(uintptr_t{0x1000} + static_cast<uint8_t>(op));
    w.flags = flags;
    w.length = len;
    w.remote_addr = 0x100000 + 8 * static_cast<uint64_t>(op);  // the peer's memory
    w.rkey = 0x4242;
    w.imm_or_inv = 0x99;
    w.compare_add = 1;
    w.swap = 2;
    if (flags & op_flag::kInline) {
      std::memcpy(w.inline_data, page(kPgSrc), len);
    } else if (len != 0) {
      w.num_sge = 1;
      w.sge[0] = {local, len, lkey};
    }
    if (qp.post_send(w) != Status::kSuccess) fail("post_send");
    ++sends_posted_;
    if (lkey == sink_key_) allow(local, len);
  }

  void setup_qp(size_t i) {
    dp::QpConfig qc;
    qc.qpn = kQpns[i];
    qc.pd = kPdA;
    qc.send_cq = &scq_;
    qc.recv_cq = &rcq_;
    qc.context = reinterpret_cast<void*>(i + 1);
    qc.sq_depth = 16;
    qc.rq_depth = 16;
    qps_[i] = std::make_unique<dp::Qp>(qc);
    dp::Qp& qp = *qps_[i];
    dp::MailboxMsg add;
    add.kind = dp::MailboxMsg::Kind::kAddQp;
    add.ep = ep_.get();
    add.qp = &qp;
    if (engine_.call(add) != Status::kSuccess) fail("add QP");
    const dp::QpState target = kQpStates[i];
    if (target == dp::QpState::kReset) return;

    namespace qa = dp::qp_attr;
    using namespace dp::access;
    dp::QpAttr a;
    a.state = dp::QpState::kInit;
    a.access = i == kQRts6 ? kRemoteRead : kRemoteRead | kRemoteWrite | kRemoteAtomic;
    modify(qp, a, qa::kState | qa::kAccessFlags);
    // Two receives per QP; the second receive of the IPv6 QP names a region without local
    // write, so a SEND into it fails with a local protection error.
    post_recv(qp, i * kRecvsPerQp, keys_[kTRecv]);
    post_recv(qp, i * kRecvsPerQp + 1, i == kQRts6 ? keys_[kTRo] : keys_[kTRecv]);
    if (target == dp::QpState::kInit) return;

    a.state = dp::QpState::kRtr;
    a.av.src_mac = kLocalMac;
    a.av.dst_mac = kPeerMac;
    a.av.ipv6 = i == kQRts6;
    a.av.src_ip4 = kLocalIp;
    a.av.dst_ip4 = kPeerIp;
    a.av.src_ip6 = kLocalIp6;
    a.av.dst_ip6 = kPeerIp6;
    a.path_mtu = i == kQRts ? kMtuRts : kMtuOther;
    a.dest_qpn = kPeerQpn;
    a.rq_psn = kRqStartPsn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    modify(qp, a,
           qa::kState | qa::kAv | qa::kPathMtu | qa::kDestQpn | qa::kRqPsn | qa::kMaxDestRdAtomic |
               qa::kMinRnrTimer);
    if (target == dp::QpState::kRtr) return;

    a.state = dp::QpState::kRts;
    a.sq_psn = kSqStartPsn;
    a.timeout = 14;
    a.retry_cnt = 3;
    a.rnr_retry = 3;
    a.max_rd_atomic = 4;
    modify(
        qp, a,
        qa::kState | qa::kSqPsn | qa::kTimeout | qa::kRetryCnt | qa::kRnrRetry | qa::kMaxRdAtomic);

    // Work for the requester, so that ACKs, NAKs and responses have something to complete.
    using dp::WrOpcode;
    if (i == kQRts) {
      post(qp, WrOpcode::kSend, 300, addr(kPgSrc), src_key_);
      post(qp, WrOpcode::kWrite, 600, addr(kPgSrc), src_key_);
      post(qp, WrOpcode::kRead, 700, addr(kPgSink), sink_key_);
      post(qp, WrOpcode::kFetchAdd, 8, addr(kPgSink, 1024), sink_key_);
      post(qp, WrOpcode::kCompareSwap, 8, addr(kPgSink, 1032), sink_key_);
      post(qp, WrOpcode::kSendWithImm, 100, 0, 0, op_flag::kInline);
      post(qp, WrOpcode::kWriteWithImm, 0, 0, 0);
      post(qp, WrOpcode::kSendWithInv, 20, addr(kPgSrc), src_key_);
    } else if (i == kQRts6) {
      post(qp, WrOpcode::kRead, 300, addr(kPgSink, 2048), sink_key_);
      post(qp, WrOpcode::kSend, 50, addr(kPgSrc), src_key_);
    } else if (i == kQSqd || i == kQErr) {
      post(qp, WrOpcode::kSend, 200, addr(kPgSrc), src_key_);
      post(qp, WrOpcode::kRead, 64, addr(kPgSink, 3072 + 128 * (i - kQSqd)), sink_key_);
      tx_build();
      fail(check_tx());
      a.state = target;
      modify(qp, a, qa::kState);
    }
  }

  // The engine's tx-build phase (engine.cc phase_tx_build) for this endpoint's QPs.
  void tx_build() {
    for (auto& qp : qps_) {
      if (qp == nullptr) continue;
      if (qp->state() == dp::QpState::kErr) {
        if (!qp->send_ring().empty() || !qp->recv_ring().empty()) dp::qp_to_error_lc(*ep_, *qp);
        continue;
      }
      if (ep_->tx_space() != 0) dp::responder_tx_lc(*ep_, *qp, ep_->tx_space(), now_);
      if (ep_->tx_space() != 0) dp::requester_tx_lc(*ep_, *qp, ep_->tx_space(), now_);
      dp::qp_retire_lc(*ep_, *qp);
    }
  }

  // Every frame the stages built parses and carries a valid ICRC; then it is dropped.
  std::string check_tx() {
    std::string err;
    for (uint32_t i = 0; i < ep_->tx_count() && err.empty(); ++i) {
      rte_mbuf* m = ep_->tx_at(i);
      wire::ParsedFrame f;
      uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
      if (wire::parse(p, rte_pktmbuf_data_len(m), f) != wire::ParseError::kOk) {
        err = "a stage emitted a frame that does not parse";
      } else if (!wire::icrc_check(p, f.l)) {
        err = "a stage emitted a frame with a bad ICRC";
      } else if (wire::Bth::DestQp::get(f.bth()) != kPeerQpn) {
        err = "a stage emitted a frame to a QP other than its peer";
      }
    }
    ep_->tx_drop_all();
    return err;
  }

  // Every work request completes at most once: never more completions than were posted.
  std::string drain_cqs() {
    ResultEx r[64];
    for (size_t n; (n = scq_.poll(r)) != 0;) sends_done_ += n;
    for (size_t n; (n = rcq_.poll(r)) != 0;) recvs_done_ += n;
    if (sends_done_ > sends_posted_ || recvs_done_ > recvs_posted_ || scq_.overrun() ||
        rcq_.overrun())
      return "more completions than work requests posted";
    return {};
  }

  // URNIC_FUZZ_VERBOSE=1: what an input did (to check that seeds reach the stages).
  static bool verbose() {
    static const bool v = std::getenv("URNIC_FUZZ_VERBOSE") != nullptr;
    return v;
  }
  void dump() const {
    const dp::EngineCounters& c = ep_->counters();
    std::fprintf(stderr, "drops:");
    for (size_t i = 0; i < static_cast<size_t>(dp::RxDrop::kCount); ++i)
      std::fprintf(stderr, " %s=%llu", dp::to_string(static_cast<dp::RxDrop>(i)),
                   static_cast<unsigned long long>(c.rx_drops[i]));
    std::fprintf(stderr, "\n");
    for (const auto& qp : qps_) {
      const dp::QpCounters& q = qp->counters();
      std::fprintf(stderr,
                   "qp %u %s: rx %llu acks_sent %llu naks_sent %llu/%llu/%llu/%llu rnr %llu dup "
                   "%llu ooo %llu acks_rx %llu naks_rx %llu/%llu/%llu/%llu ok %llu err %llu "
                   "flushed %llu retx %llu\n",
                   qp->qpn(), dp::to_string(qp->state()), ull(q.rx_packets), ull(q.acks_sent),
                   ull(q.naks_sent[0]), ull(q.naks_sent[1]), ull(q.naks_sent[2]),
                   ull(q.naks_sent[3]), ull(q.rnr_naks_sent), ull(q.duplicate_requests),
                   ull(q.out_of_sequence), ull(q.acks_received), ull(q.naks_received[0]),
                   ull(q.naks_received[1]), ull(q.naks_received[2]), ull(q.naks_received[3]),
                   ull(q.completions_ok), ull(q.completions_error), ull(q.completions_flushed),
                   ull(q.retransmits));
    }
  }
  static unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

  static void free_ext(void* addr, void* opaque) {
    std::free(addr);
    delete static_cast<rte_mbuf_ext_shared_info*>(opaque);
  }

  void fixup(uint8_t ctl, uint8_t arg, uint8_t* buf, const wire::ParsedFrame& f) {
    auto& bth = *reinterpret_cast<wire::Bth*>(buf + f.l.bth_off);
    if ((ctl & kCtlQpMask) != kCtlKeepQp) wire::Bth::DestQp::set(bth, kQpns[ctl & kCtlQpMask]);
    const dp::Qp* qp = ep_->qp(wire::Bth::DestQp::get(bth));
    if (qp == nullptr) return;
    if (ctl & kCtlFixAddr) {
      const wire::NetHeaders& av = qp->attr().av;
      if (f.l.ipv6) {
        auto& ip = *reinterpret_cast<wire::Ipv6Hdr*>(buf + f.l.l3_off);
        ip.src = av.dst_ip6;
        ip.dst = av.src_ip6;
      } else {
        auto& ip = *reinterpret_cast<wire::Ipv4Hdr*>(buf + f.l.l3_off);
        ip.src = wire::Be32::of(av.dst_ip4);
        ip.dst = wire::Be32::of(av.src_ip4);
      }
    }
    const uint32_t psn_mode = (ctl >> kCtlPsnShift) & 3;
    if (psn_mode != 0) {
      const wire::Psn expected =
          (f.mask & wire::op::kReq) ? qp->responder().epsn : qp->requester().una;
      const auto delta = static_cast<int32_t>(arg >> 4);
      const wire::Psn p = psn_mode == kCtlPsnPlus    ? expected + delta
                          : psn_mode == kCtlPsnMinus ? expected - delta
                                                     : expected;
      wire::Bth::Psn::set(bth, p.value());
    }
    if (ctl & kCtlFixKeys) {
      const uint32_t t = (arg & 15u) % kNumTargets;
      // The frame's own address bits choose where: the top two select anywhere in (or just
      // past) the region, at its start, or with the access of `len` bytes ending at the region's
      // end; the low four bits then pick a small offset from there, so that a boundary case is
      // one likely mutation away.
      static constexpr std::array<int64_t, 16> kNear = {0,  1, -1, 2,  -2,  3,   -3,   4,
                                                        -4, 8, -8, 16, -16, 256, -256, 4096};
      auto place = [&](wire::Be64& va, wire::Be32& rkey, uint64_t len) {
        rkey = wire::Be32::of(keys_[t]);
        const uint64_t raw = va.get();
        const auto near = static_cast<uint64_t>(kNear[raw & 15]);
        switch (raw >> 62) {
          case 0:
          case 1:
            va = wire::Be64::of(base_[t] + raw % (len_[t] + 64));
            break;
          case 2:
            va = wire::Be64::of(base_[t] + near);
            break;
          default:
            va = wire::Be64::of(base_[t] + len_[t] - len + near);
            break;
        }
      };
      uint8_t* b = buf + f.l.bth_off;
      const wire::OpcodeInfo& info = f.info();
      if (f.mask & wire::op::kReth) {
        auto& r = *reinterpret_cast<wire::Reth*>(b + info.off(wire::Hdr::kReth));
        place(r.va, r.rkey, r.dma_length.get());
      }
      if (f.mask & wire::op::kAtomicEth) {
        auto& a = *reinterpret_cast<wire::AtomicEth*>(b + info.off(wire::Hdr::kAtomicEth));
        place(a.va, a.rkey, sizeof(uint64_t));
      }
      if (f.mask & wire::op::kIeth) {
        auto& ie = *reinterpret_cast<wire::Ieth*>(b + info.off(wire::Hdr::kIeth));
        ie.rkey = wire::Be32::of(keys_[t]);
      }
    }
  }

  // One received frame, in a heap buffer of exactly its length attached to an mbuf of the pool
  // (ASan then reports any read past the frame). False when the pool is empty.
  bool deliver(uint8_t ctl, uint8_t arg, const uint8_t* frame, size_t len) {
    auto* buf = static_cast<uint8_t*>(std::malloc(len == 0 ? 1 : len));
    if (len != 0) std::memcpy(buf, frame, len);
    wire::ParsedFrame f;
    if (wire::parse(buf, len, f) == wire::ParseError::kOk) {
      fixup(ctl, arg, buf, f);
      if (!(ctl & kCtlKeepIcrc)) wire::icrc_write(buf, f.l);
    }
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr) {
      std::free(buf);
      return false;
    }
    auto* shinfo = new rte_mbuf_ext_shared_info{};
    shinfo->free_cb = &AdapterWorld::free_ext;
    shinfo->fcb_opaque = shinfo;
    rte_mbuf_ext_refcnt_set(shinfo, 1);
    rte_pktmbuf_attach_extbuf(m, buf, 0, static_cast<uint16_t>(len), shinfo);
    m->data_len = static_cast<uint16_t>(len);
    m->pkt_len = static_cast<uint32_t>(len);
    engine_.deliver_lc(*ep_, m, now_);
    return true;
  }

  // No byte outside the ranges the peer may write (remote-write regions, posted receive
  // buffers, the requester's READ / atomic sinks) has changed.
  std::string check_memory() {
    ASAN_UNPOISON_MEMORY_REGION(arena_.get(), shadow_.size());
    std::sort(allowed_.begin(), allowed_.end());
    size_t from = 0;  // start of the next shadowed stretch
    auto compare = [&](size_t to) -> std::string {
      if (to <= from || std::memcmp(arena_.get() + from, shadow_.data() + from, to - from) == 0)
        return {};
      size_t i = from;
      while (arena_.get()[i] == shadow_[i]) ++i;
      return "byte changed outside the writable memory: page " + std::to_string(i / kPage) +
             " offset " + std::to_string(i % kPage);
    };
    for (const auto& [off, len] : allowed_) {
      if (std::string e = compare(off); !e.empty()) return e;
      from = std::max(from, off + len);
    }
    return compare(shadow_.size());
  }

  // Under ASan, every arena byte no QP can reach (guards, the other PD's region, the invalidated
  // FRMR, the deregistered region, the parts of pages outside a registration) is poisoned, so a
  // read or write of it is reported where it happens, not only as a changed byte at the end.
  // Without ASan this does nothing. All boundaries are 8-byte aligned (ASan's granule).
  void poison_unreachable() {
    std::vector<std::pair<uint64_t, uint64_t>> reach = {
        {base_[kTRw], len_[kTRw]},
        {base_[kTRo], len_[kTRo]},
        {addr(kPgFrmrValid, kFrmrFbo), len_[kTFrmrValid]},
        {addr(kPgFrmrRo, kFrmrFbo), len_[kTFrmrRo]},
        {addr(kPgRecv), kPage},
        {addr(kPgSrc), kPage},
        {addr(kPgSink), kPage}};
    std::sort(reach.begin(), reach.end());
    uint64_t from = addr(0);
    for (const auto& [a, len] : reach) {
      if (a > from) ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(from), a - from);
      from = std::max(from, a + len);
    }
    const uint64_t end = addr(kArenaPages);
    if (end > from) ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(from), end - from);
  }

  struct FreeDeleter {
    void operator()(uint8_t* p) const { std::free(p); }
  };

  rte_mempool* pool_;
  std::unique_ptr<uint8_t, FreeDeleter> arena_;
  dp::MrTable mrs_;
  dp::Engine engine_;
  dp::Cq scq_, rcq_;
  std::unique_ptr<dp::Endpoint> ep_;
  std::array<std::unique_ptr<dp::Qp>, kNumQps> qps_;
  std::array<uint32_t, kNumTargets> keys_{};
  std::array<uint64_t, kNumTargets> base_{};
  std::array<uint64_t, kNumTargets> len_{};
  uint32_t src_key_ = 0, sink_key_ = 0;
  std::vector<std::pair<size_t, size_t>> allowed_;  // arena offset, length
  std::vector<uint8_t> shadow_;
  uint64_t now_ = 1'000'000'000;
  uint64_t tick_ms_ = 0;
  size_t sends_posted_ = 0, recvs_posted_ = 0, sends_done_ = 0, recvs_done_ = 0;
  std::string error_;
};

// One fuzz_adapter input: a fresh world, the records, the memory check, then the mbuf count
// once the world (its QPs and TX buffer) is gone.
inline std::string check_adapter(const uint8_t* data, size_t size) {
  rte_mempool* pool = adapter_pool();
  if (pool == nullptr) return "EAL or mbuf pool unavailable";
  std::string err;
  {
    AdapterWorld w(pool);
    err = w.run(data, size);
  }
  if (err.empty() && rte_mempool_avail_count(pool) != kPoolSize)
    err = "mbufs not returned to the pool: " +
          std::to_string(kPoolSize - rte_mempool_avail_count(pool)) + " missing";
  return err;
}

}  // namespace urnic::fuzz
