// Writes the seed corpora of the fuzz targets: fuzz_gen_corpus <out-dir> creates
// <out-dir>/fuzz_parse/ and <out-dir>/fuzz_adapter/ (tests/fuzz/corpus/ holds the committed
// output). Seeds are the known-answer frames of tests/data/vectors/*.hex and frames built by
// wire::build_frame for every valid opcode; for fuzz_adapter they are wrapped in records
// (harness.h) addressed at the harness's QPs and regions, plus multi-frame exchanges that walk
// the responder and the completer through their main paths.
#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "dataplane/wire/frame.h"
#include "tests/common/frames.h"
#include "tests/fuzz/cm_harness.h"
#include "tests/fuzz/harness.h"

namespace {

namespace fz = urnic::fuzz;
namespace wire = urnic::wire;
namespace opc = wire::opc;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

using urnic::test::from_hex;

void write(const fs::path& dir, const std::string& name, const Bytes& b) {
  std::ofstream out(dir / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

wire::NetHeaders peer_net(bool ipv6, bool vlan = false) {
  wire::NetHeaders n;
  n.src_mac = fz::kPeerMac;
  n.dst_mac = fz::kLocalMac;
  n.ipv6 = ipv6;
  n.vlan = vlan;
  n.vlan_tci = 5;
  n.src_ip4 = fz::kPeerIp;
  n.dst_ip4 = fz::kLocalIp;
  n.src_ip6 = fz::kPeerIp6;
  n.dst_ip6 = fz::kLocalIp6;
  n.udp_sport = wire::udp_sport_for(fz::kPeerQpn, fz::kQpns[fz::kQRts]);
  return n;
}

// A frame from the peer: opcode, PSN 0 (the records' PSN fixup sets it), payload `plen` bytes.
// RETH / AtomicETH carry `va` (the keys fixup turns it into an address in the region it picks,
// see AdapterWorld::fixup) and `dma` bytes.
Bytes frame(uint8_t opcode, uint32_t plen, uint32_t dma = 0, bool ipv6 = false, bool vlan = false,
            uint8_t syndrome = wire::aeth::kAckNoCredit, size_t qp = fz::kQRts, uint64_t va = 0) {
  wire::TransportHeaders th;
  th.bth.opcode = opcode;
  th.bth.pkey = wire::Be16::of(wire::kDefaultPkey);
  wire::Bth::DestQp::set(th.bth, fz::kQpns[qp]);
  wire::Bth::AckReq::set(th.bth, 1u);
  th.reth.va = wire::Be64::of(va);
  th.reth.rkey = wire::Be32::of(0);
  th.reth.dma_length = wire::Be32::of(dma);
  th.atomic_eth.va = wire::Be64::of(va);
  th.atomic_eth.swap_add = wire::Be64::of(5);
  th.atomic_eth.compare = wire::Be64::of(0);
  wire::Aeth::Syndrome::set(th.aeth, syndrome);
  wire::Aeth::Msn::set(th.aeth, 1);
  th.atomic_ack.orig = wire::Be64::of(0x1122334455667788ull);
  th.imm.imm = wire::Be32::of(0xabcd);
  th.deth.qkey = wire::Be32::of(0x80010000);
  Bytes payload(plen);
  for (uint32_t i = 0; i < plen; ++i) payload[i] = static_cast<uint8_t>(i * 7 + opcode);
  const wire::NetHeaders net = peer_net(ipv6, vlan);
  Bytes out(wire::frame_length(net, opcode, plen));
  out.resize(wire::build_frame(out, net, th, payload));
  return out;
}

// The payload a request of this opcode carries on a path MTU of `mtu` (FIRST / MIDDLE exactly
// one MTU, LAST / ONLY less).
uint32_t request_payload(const wire::OpcodeInfo& info, uint32_t mtu) {
  if (!(info.mask & wire::op::kPayload)) return 0;
  if ((info.mask & wire::op::kOnly) == wire::op::kOnly) return 100;
  if (info.mask & wire::op::kLast) return 88;
  return mtu;
}

constexpr uint8_t ctl(size_t qp, uint8_t psn_mode, bool keys = true) {
  return static_cast<uint8_t>(qp | fz::kCtlFixAddr | psn_mode << fz::kCtlPsnShift |
                              (keys ? fz::kCtlFixKeys : 0));
}
constexpr uint8_t kExpected = fz::kCtlPsnExpected;
constexpr uint8_t kPlus = fz::kCtlPsnPlus;
constexpr uint8_t kMinus = fz::kCtlPsnMinus;
constexpr uint8_t delta(uint8_t d, uint8_t target = fz::kTRw) {
  return static_cast<uint8_t>(d << 4 | target);
}

}  // namespace

// ---- fuzz_cm: records of cm_harness.h. Each seed is a handshake the CM completes (or refuses)
// with the fixups pointing the peer's MADs at the listener and at the CM's own comm IDs.
namespace cmseed {
namespace cm = urnic::ctl::cm;
enum Op : uint8_t {
  kMad,
  kConnect,
  kComplete,
  kAccept,
  kReject,
  kDisconnect,
  kClose,
  kPoll,
  kRawWire,
  kRawControl
};
constexpr uint8_t kFixHdr = 0x01, kFixOurId = 0x02, kFixReq = 0x04, kFixV6 = 0x08;

void mad(Bytes& out, uint8_t fix, const cm::Message& m) {
  const auto b = cm::encode(m);
  out.insert(out.end(), {kMad, fix, 0});
  out.insert(out.end(), b.begin(), b.end());
}
void op(Bytes& out, Op o, uint8_t arg) { out.insert(out.end(), {o, arg}); }
void raw(Bytes& out, Op o, const Bytes& frame) {
  const auto len = static_cast<uint16_t>(frame.size());
  out.insert(out.end(), {o, static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8)});
  out.insert(out.end(), frame.begin(), frame.end());
}

// An ARP request from the peer for `target` (network order fields, RFC 826).
Bytes arp_request(uint32_t target) {
  namespace cmf = urnic::fuzz::cmf;
  Bytes f(urnic::test::kArpFrameLen);
  urnic::test::write_arp_request(f.data(), cmf::kCmPeerMac, cmf::kCmPeerIp, target);
  return f;
}

// A MAD in a UD SEND ONLY to QP1, as the peer's CM sends it over IPv4.
Bytes ud_mad(const cm::Message& m, uint32_t qkey) {
  return urnic::fuzz::cmf::ud_mad_frame(cm::encode(m), false, qkey);
}

cm::Message req(uint32_t id) {
  cm::Req r;
  r.local_comm_id = id;
  r.local_ca_guid = 0x0200'00ff'fe00'0012;
  r.local_qpn = 0x51;
  r.responder_resources = 2;
  r.initiator_depth = 2;
  r.remote_cm_response_timeout = 20;
  r.starting_psn = 0x123456;
  r.local_cm_response_timeout = 20;
  r.retry_count = 7;
  r.path_mtu = cm::mtu_code(1024);
  r.rnr_retry_count = 7;
  r.max_cm_retries = 15;
  r.primary.hop_limit = 64;
  r.primary.local_ack_timeout = 14;
  return {0x1000 + id, 0, r};
}
template <typename T>
cm::Message with_ids(uint32_t local, T body) {
  body.local_comm_id = local;
  return {0x2000 + local, 0, body};
}
}  // namespace cmseed

void write_cm_corpus(const fs::path& dir) {
  using namespace cmseed;
  fs::create_directories(dir);
  const uint8_t ours = kFixHdr | kFixOurId;
  {  // Passive: REQ, accept, RTU, then the peer disconnects.
    Bytes in;
    mad(in, kFixHdr | kFixReq, req(7));
    op(in, kAccept, 0);
    mad(in, ours, with_ids(7, cm::Rtu{}));
    cm::Dreq d;
    d.remote_qpn = 2;
    mad(in, ours, with_ids(7, d));
    in.push_back(kPoll);
    write(dir, "passive_accept_rtu_dreq", in);
  }
  {  // Passive over IPv6: REQ, duplicate REQ (MRA), reject.
    Bytes in;
    mad(in, kFixHdr | kFixReq | kFixV6, req(8));
    mad(in, kFixHdr | kFixReq | kFixV6, req(8));
    op(in, kReject, 0);
    write(dir, "passive_dup_req_reject_v6", in);
  }
  {  // Passive: the peer rejects our REP, then a stale RTU.
    Bytes in;
    mad(in, kFixHdr | kFixReq, req(9));
    op(in, kAccept, 0);
    cm::Rej rj;
    rj.message_rejected = cm::MsgResponse::kRep;
    mad(in, ours, with_ids(9, rj));
    mad(in, ours, with_ids(9, cm::Rtu{}));
    write(dir, "passive_rep_rejected", in);
  }
  {  // Active: REQ, REP, complete (RTU), we disconnect, DREP.
    Bytes in;
    op(in, kConnect, 0);
    cm::Rep rp;
    rp.local_qpn = 0x52;
    rp.starting_psn = 0x654321;
    rp.responder_resources = 2;
    rp.initiator_depth = 2;
    rp.rnr_retry_count = 7;
    rp.local_ca_guid = 0x0200'00ff'fe00'0012;
    mad(in, ours, with_ids(21, rp));
    op(in, kComplete, 0);
    op(in, kDisconnect, 0);
    mad(in, ours, with_ids(21, cm::Drep{}));
    write(dir, "active_rep_rtu_dreq_drep", in);
  }
  {  // Active: MRA, then REJ "no listener"; then a second connect closed at once.
    Bytes in;
    op(in, kConnect, 1);
    cm::Mra ma;
    ma.service_timeout = 10;
    mad(in, ours, with_ids(22, ma));
    cm::Rej rj;
    rj.reason = cm::RejReason::kInvalidServiceId;
    mad(in, ours, with_ids(22, rj));
    op(in, kConnect, 0x80);
    op(in, kClose, 1);
    write(dir, "active_mra_rej_close", in);
  }
  {  // Unmatched messages: DREQ and REP for no connection, a MAD of another class, a short one.
    Bytes in;
    mad(in, kFixHdr, with_ids(30, cm::Dreq{}));
    mad(in, kFixHdr, with_ids(31, cm::Rep{}));
    auto b = cm::encode(with_ids(32, cm::Rtu{}));
    b[1] = 0x81;  // management class
    in.insert(in.end(), {kMad, 0, 0});
    in.insert(in.end(), b.begin(), b.end());
    in.insert(in.end(), {kMad, 0, 100});
    in.insert(in.end(), b.begin(), b.begin() + 100);
    write(dir, "unmatched_and_malformed", in);
  }
  {  // SIDR, passive: SIDR_REQ to the datagram listener, a retry while undecided, the answer,
     // a retry after it; a SIDR_REQ nobody serves; a SIDR_REQ closed undecided.
    Bytes in;
    cm::SidrReq sr;
    sr.request_id = 50;
    mad(in, kFixHdr | kFixReq, {0x3000, 0, sr});
    mad(in, kFixHdr | kFixReq, {0x3000, 0, sr});
    op(in, kAccept, 0);
    mad(in, kFixHdr | kFixReq, {0x3000, 0, sr});
    sr.request_id = 51;
    mad(in, kFixHdr, {0x3001, 0, sr});
    sr.request_id = 52;
    mad(in, kFixHdr | kFixReq | kFixV6, {0x3002, 0, sr});
    op(in, kClose, 1);
    write(dir, "sidr_passive_dup_accept_unserved", in);
  }
  {  // SIDR, active: SIDR_REQ answered (status 0), a second one refused (status 2), a third one
     // closed while waiting, a stray SIDR_REP.
    Bytes in;
    cm::SidrRep ok;
    ok.qpn = 0x77;
    ok.qkey = 0x01234567;
    op(in, kConnect, 0x40);
    mad(in, ours, {0x3100, 0, ok});
    op(in, kConnect, 0x41);
    cm::SidrRep no;
    no.status = cm::SidrStatus::kRejected;
    mad(in, ours | 0x20, {0x3101, 0, no});
    op(in, kConnect, 0xC0);
    op(in, kClose, 2);
    mad(in, kFixHdr, {0x3102, 0, ok});
    in.push_back(kPoll);
    write(dir, "sidr_active_answer_refused_closed", in);
  }
  {  // Raw frames: ARP for us and for someone else, a REQ as a whole UD frame (right and wrong
     // Q_Key), a truncated ARP straight to the control plane, then a REQ through the fixups.
    namespace cmf = urnic::fuzz::cmf;
    Bytes in;
    raw(in, kRawWire, arp_request(cmf::kCmLocalIp));
    raw(in, kRawWire, arp_request(cmf::kCmLocalIp + 7));
    Bytes r = ud_mad(req(40), cmf::kGsiQkey);
    raw(in, kRawWire, r);
    raw(in, kRawWire, ud_mad(req(41), 0x1234));
    Bytes a = arp_request(cmf::kCmLocalIp);
    a.resize(20);
    raw(in, kRawControl, a);
    raw(in, kRawControl, r);
    mad(in, kFixHdr | kFixReq, req(42));
    in.push_back(kPoll);
    write(dir, "raw_arp_and_ud_frames", in);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <out-dir>\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  const fs::path parse_dir = root / "fuzz_parse", adapter_dir = root / "fuzz_adapter";
  fs::create_directories(parse_dir);
  fs::create_directories(adapter_dir);

  // ---- Known-answer vectors: raw for fuzz_parse; for fuzz_adapter once exactly as captured
  // (DestQP, addresses and ICRC kept) and once retargeted at the RTS QP.
  std::vector<fs::path> vectors;
  for (const auto& e : fs::directory_iterator(URNIC_VECTORS_DIR))
    if (e.path().extension() == ".hex") vectors.push_back(e.path());
  std::sort(vectors.begin(), vectors.end());
  for (const auto& p : vectors) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    const Bytes f = from_hex(ss.str());
    const std::string stem = p.stem().string();
    write(parse_dir, "vec_" + stem, f);
    Bytes raw, fixed;
    fz::append_record(raw, fz::kCtlKeepQp | fz::kCtlKeepIcrc, 0, 0, f);
    fz::append_record(fixed, ctl(fz::kQRts, kExpected), fz::kTRw, 0, f);
    write(adapter_dir, "vec_" + stem + "_raw", raw);
    write(adapter_dir, "vec_" + stem + "_rts", fixed);
  }

  // ---- Every valid opcode, built by the project's builder.
  for (unsigned op = 0; op < 256; ++op) {
    const wire::OpcodeInfo& info = wire::kOpcodeTable[op];
    if (!info.valid()) continue;
    char name[32];
    std::snprintf(name, sizeof(name), "op_%02x", op);
    const auto o = static_cast<uint8_t>(op);
    const uint32_t plen = (info.mask & wire::op::kPayload) ? 5 : 0;
    write(parse_dir, std::string(name) + "_v4", frame(o, plen));
    write(parse_dir, std::string(name) + "_v6", frame(o, plen, 0, true));
    write(parse_dir, std::string(name) + "_vlan", frame(o, plen, 0, false, true));

    // fuzz_adapter: a request in sequence at the RTS QP (MTU 256) naming the remote-write
    // region, or a response at the oldest unacknowledged PSN.
    const uint32_t rp = request_payload(info, fz::kMtuRts);
    const uint32_t dma = (info.mask & wire::op::kRead)                      ? 700
                         : (info.mask & wire::op::kOnly) == wire::op::kOnly ? rp
                                                                            : 600;
    Bytes rec;
    fz::append_record(rec, ctl(fz::kQRts, kExpected), fz::kTRw, 0, frame(o, rp, dma));
    write(adapter_dir, name, rec);
    Bytes rec6;
    fz::append_record(rec6, ctl(fz::kQRts6, kExpected), fz::kTRo, 0,
                      frame(o, request_payload(info, fz::kMtuOther), dma, true, false,
                            wire::aeth::kAckNoCredit, fz::kQRts6));
    write(adapter_dir, std::string(name) + "_v6", rec6);
  }

  // ---- Responder exchanges at the RTS QP (ePSN kRqStartPsn, MTU 256).
  auto seq = [&](const std::string& name, const std::vector<std::pair<uint8_t, Bytes>>& frames,
                 uint8_t arg = fz::kTRw, uint8_t psn_mode = kExpected) {
    Bytes in;
    for (const auto& [a, f] : frames)
      fz::append_record(in, ctl(fz::kQRts, psn_mode), a == 0xFF ? arg : a, 0, f);
    write(adapter_dir, name, in);
  };
  seq("resp_write_multi", {{0xFF, frame(opc::kWriteFirst, 256, 600)},
                           {0xFF, frame(opc::kWriteMiddle, 256)},
                           {0xFF, frame(opc::kWriteLast, 88)}});
  seq("resp_write_frmr", {{0xFF, frame(opc::kWriteOnly, 200, 200)}}, fz::kTFrmrValid);
  seq("resp_write_ro", {{0xFF, frame(opc::kWriteOnly, 64, 64)}}, fz::kTRo);
  seq("resp_write_other_pd", {{0xFF, frame(opc::kWriteOnly, 64, 64)}}, fz::kTOtherPd);
  // Accesses at a region's edges: ending exactly at its end (va mode 3), one byte past it, one
  // byte short of its start (mode 2 with kNear offsets +1 / -1, see AdapterWorld::fixup).
  // Exact ones must succeed (where the region grants the right), the others be refused.
  constexpr uint64_t kAtEnd = 3ull << 62, kPastEnd = kAtEnd | 1, kAtStart = 2ull << 62,
                     kBeforeStart = kAtStart | 2;
  const auto q = fz::kQRts;
  const uint8_t ack = wire::aeth::kAckNoCredit;
  for (const auto& [t, tname] :
       {std::pair{fz::kTRw, "rw"}, std::pair{fz::kTFrmrValid, "frmr"}, std::pair{fz::kTRo, "ro"}}) {
    for (const auto& [va, where] :
         {std::pair{kAtEnd, "end"}, std::pair{kPastEnd, "past_end"}, std::pair{kAtStart, "start"},
          std::pair{kBeforeStart, "before_start"}}) {
      const std::string n = std::string(where) + "_" + tname;
      seq("edge_write_" + n, {{0xFF, frame(opc::kWriteOnly, 64, 64, false, false, ack, q, va)}}, t);
      seq("edge_read_" + n, {{0xFF, frame(opc::kReadRequest, 0, 300, false, false, ack, q, va)}},
          t);
      seq("edge_atomic_" + n, {{0xFF, frame(opc::kFetchAdd, 0, 0, false, false, ack, q, va)}}, t);
    }
    seq(std::string("edge_write_multi_past_end_") + tname,
        {{0xFF, frame(opc::kWriteFirst, 256, 600, false, false, ack, q, kPastEnd)},
         {0xFF, frame(opc::kWriteMiddle, 256)},
         {0xFF, frame(opc::kWriteLast, 88)}},
        t);
  }
  seq("resp_write_invalidated", {{0xFF, frame(opc::kWriteOnly, 64, 64)}}, fz::kTFrmrInval);
  seq("resp_send_two", {{0xFF, frame(opc::kSendOnly, 200)}, {0xFF, frame(opc::kSendOnlyImm, 40)}});
  seq("resp_send_multi", {{0xFF, frame(opc::kSendFirst, 256)}, {0xFF, frame(opc::kSendLast, 8)}});
  seq("resp_send_inv_then_write", {{fz::kTFrmrValid, frame(opc::kSendOnlyInv, 16)},
                                   {fz::kTFrmrValid, frame(opc::kWriteOnly, 32, 32)}});
  seq("resp_read_dup",
      {{0xFF, frame(opc::kReadRequest, 0, 700)}, {0xFF, frame(opc::kSendOnly, 10)}});
  {
    Bytes in;
    fz::append_record(in, ctl(fz::kQRts, kExpected), fz::kTRw, 0, frame(opc::kReadRequest, 0, 700));
    fz::append_record(in, ctl(fz::kQRts, kMinus), delta(3), 0, frame(opc::kReadRequest, 0, 700));
    fz::append_record(in, ctl(fz::kQRts, kExpected), fz::kTRw, 0, frame(opc::kFetchAdd, 0));
    fz::append_record(in, ctl(fz::kQRts, kMinus), delta(1), 0, frame(opc::kFetchAdd, 0));
    fz::append_record(in, ctl(fz::kQRts, kExpected), fz::kTFrmrValid, 0,
                      frame(opc::kCompareSwap, 0));
    fz::append_record(in, ctl(fz::kQRts, kPlus), delta(2), 0, frame(opc::kSendOnly, 10));
    write(adapter_dir, "resp_read_atomic_dup_gap", in);
  }

  // ---- Completer exchanges at the RTS QP. Its requester has sent (from kSqStartPsn): SEND 300
  // (2 PSNs), WRITE 600 (3), READ 700 (3), FETCH_ADD, CMP_SWAP, SEND_IMM, WRITE_IMM, SEND_INV.
  {
    const uint8_t c = ctl(fz::kQRts, kPlus, false);
    Bytes in;
    fz::append_record(in, c, delta(4), 0, frame(opc::kAcknowledge, 0));  // SEND, WRITE
    fz::append_record(in, c, delta(0), 0, frame(opc::kReadRespFirst, 256));
    fz::append_record(in, c, delta(0), 0, frame(opc::kReadRespMiddle, 256));
    fz::append_record(in, c, delta(0), 0, frame(opc::kReadRespLast, 188));
    fz::append_record(in, c, delta(0), 0, frame(opc::kAtomicAcknowledge, 0));
    fz::append_record(in, c, delta(0), 0, frame(opc::kAtomicAcknowledge, 0));
    fz::append_record(in, c, delta(2), 0, frame(opc::kAcknowledge, 0));
    write(adapter_dir, "comp_all_complete", in);
  }
  {
    const uint8_t c = ctl(fz::kQRts, kPlus, false);
    Bytes in;
    fz::append_record(in, c, delta(1), 0,
                      frame(opc::kAcknowledge, 0, 0, false, false, wire::aeth::kNak));
    fz::append_record(in, c, delta(0), 0,
                      frame(opc::kAcknowledge, 0, 0, false, false, wire::aeth::kRnrNak | 1));
    fz::append_record(in, c, delta(9), 50, frame(opc::kAcknowledge, 0));  // implied NAK
    fz::append_record(in, c, delta(0), 200, frame(opc::kReadRespOnly, 0));
    write(adapter_dir, "comp_nak_rnr_timeout", in);
  }
  {
    const uint8_t c = ctl(fz::kQRts, kPlus, false);
    Bytes in;
    fz::append_record(in, c, delta(5), 0, frame(opc::kReadRespLast, 188));  // gap: re-request
    fz::append_record(in, c, delta(0), 0,
                      frame(opc::kAcknowledge, 0, 0, false, false,
                            wire::aeth::kNak | wire::aeth::kNakRemoteAccessError));
    write(adapter_dir, "comp_gap_then_access_nak", in);
  }
  write_cm_corpus(root / "fuzz_cm");
  std::printf("fuzz_gen_corpus: %zu vectors, corpus written to %s\n", vectors.size(), root.c_str());
  return 0;
}
