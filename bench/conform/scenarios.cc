#include "bench/conform/scenarios.h"

#include <algorithm>
#include <cstdio>

#include "bench/conform/craft.h"
#include "dataplane/wire/opcode.h"

namespace urnic::conform {
namespace {

namespace opc = wire::opc;
using wire::Be32;
using wire::Be64;

// An offset from the peer's advertised address that no region can reach (1 TiB): the advertised
// address need not be its region's start, so "just below" might still be inside.
constexpr uint64_t kFarAway = uint64_t{1} << 40;

// The next answer, or a description of the silence.
bool next(Ctx& c, RxFrame* r) { return c.link.recv(r, c.wait_ms); }

bool write_only(Ctx& c, uint32_t psn, const std::vector<uint8_t>& data, bool ack_req,
                uint64_t off = 0, const TxFaults& f = {}) {
  return c.link.send(with_reth(opc::kWriteOnly, psn, ack_req, c.peer.vaddr + off, c.peer.rkey,
                               static_cast<uint32_t>(data.size())),
                     data, f);
}

// A WRITE ONLY at ePSN with AckReq, answered by an ACK for it: the QP still works (after a
// frame that had to be dropped, or to set a known MSN). Advances psn and msn.
Outcome still_works(Ctx& c, const std::string& before) {
  const auto data = bytes(32, 99);
  write_only(c, c.psn, data, true, 2048);
  RxFrame r;
  if (!next(c, &r)) return fail(before + "; then a valid WRITE at ePSN got no answer");
  if (!is_ack(r) || r.psn != c.psn)
    return fail(before + "; then a valid WRITE at ePSN got " + describe(r));
  c.psn = psn_add(c.psn, 1);
  ++c.msn;
  return pass(before + "; a valid WRITE at the same PSN then: " + describe(r));
}

// Silence for twice the answer wait, then the QP must still take ePSN: the frame was dropped
// without a trace (no NAK, PSN not consumed).
Outcome silently_dropped(Ctx& c, const char* what) {
  const auto got = c.link.collect(2 * c.wait_ms);
  if (!got.empty()) return fail(std::string(what) + " answered: " + describe(got.front()));
  return still_works(c, std::string("no answer to ") + what);
}

// ---- WRITE ------------------------------------------------------------------------------------

Outcome write_acked(Ctx& c) {
  const auto data = bytes(64, 1);
  write_only(c, c.psn, data, true);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE ONLY with AckReq");
  if (!is_ack(r) || r.psn != c.psn)
    return fail(describe(r) + "; expected an ACK for psn " + std::to_string(c.psn));
  if (r.msn != c.msn + 1) return fail(describe(r) + "; expected MSN " + std::to_string(c.msn + 1));
  return pass(describe(r));
}

Outcome write_multi_packet(Ctx& c) {
  const uint32_t mtu = c.peer.mtu;
  const auto data = bytes(3 * mtu, 2);
  const uint64_t va = c.peer.vaddr;
  c.link.send(with_reth(opc::kWriteFirst, c.psn, false, va, c.peer.rkey, 3 * mtu),
              std::span(data).subspan(0, mtu));
  c.link.send(hdr(opc::kWriteMiddle, psn_add(c.psn, 1), false), std::span(data).subspan(mtu, mtu));
  c.link.send(hdr(opc::kWriteLast, psn_add(c.psn, 2), true), std::span(data).subspan(2 * mtu, mtu));
  RxFrame r;
  while (next(c, &r)) {
    if (!is_ack(r)) return fail(describe(r));
    if (r.psn == psn_add(c.psn, 2)) {
      if (r.msn != c.msn + 1)
        return fail(describe(r) + "; expected MSN " + std::to_string(c.msn + 1));
      return pass("FIRST/MIDDLE/LAST of " + std::to_string(mtu) + " B: " + describe(r));
    }
  }
  return fail("no ACK for the LAST packet");
}

Outcome psn_sequence_error(Ctx& c) {
  const auto data = bytes(64, 3);
  write_only(c, psn_add(c.psn, 5), data, true);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE 5 PSNs ahead of ePSN");
  if (!is_nak(r, kNakPsnSeq) || r.psn != c.psn)
    return fail(describe(r) + "; expected NAK PSN sequence error for ePSN " +
                std::to_string(c.psn));
  // Not executed: MSN unchanged, and ePSN still takes the next message.
  if (r.msn != c.msn) return fail(describe(r) + "; the MSN moved: the WRITE was executed");
  return still_works(c, describe(r));
}

Outcome duplicate_write(Ctx& c) {
  const auto a = bytes(64, 4), b = bytes(64, 5);
  write_only(c, c.psn, a, true, 256);
  RxFrame r;
  if (!next(c, &r) || !is_ack(r)) return fail("the first WRITE was not ACKed");
  const uint32_t msn = r.msn;
  write_only(c, c.psn, b, true, 256);  // the same PSN again, other bytes
  if (!next(c, &r)) return fail("no answer to a duplicate WRITE with AckReq");
  if (!is_ack(r)) return fail("duplicate WRITE: " + describe(r) + "; expected an ACK");
  if (r.msn != msn) return fail(describe(r) + "; the duplicate moved the MSN (executed again)");
  std::string seen = "duplicate answered: " + describe(r);
  // Not executed again: the bytes there are still the first WRITE's (READ them back, where the
  // peer's region allows it).
  const uint32_t rp = psn_add(c.psn, 1);
  c.link.send(with_reth(opc::kReadRequest, rp, true, c.peer.vaddr + 256, c.peer.rkey, 64), {});
  if (!next(c, &r)) return fail(seen + "; no answer to the READ back");
  // The peer may not allow READ at all: its region refuses it (remote access error), or its QP
  // was not enabled for it (invalid request; perftest's ib_write_bw on rxe). Then the bytes
  // cannot be looked at.
  if (is_nak(r, kNakAccess) || is_nak(r, kNakInvalid))
    return pass(seen + " (READ refused: " + describe(r) + ", so the bytes cannot be checked)");
  if (r.opcode != opc::kReadRespOnly || r.payload != a)
    return fail(seen + "; READ back: " + describe(r) +
                (r.payload == b ? " with the duplicate's bytes (executed again)" : ""));
  return pass(seen + "; READ back the first WRITE's bytes");
}

Outcome invalid_rkey(Ctx& c) {
  const auto data = bytes(64, 6);
  c.link.send(with_reth(opc::kWriteOnly, c.psn, true, c.peer.vaddr, c.peer.rkey ^ 0x5A5A00, 64),
              data);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE with a wrong R_Key");
  if (!is_nak(r, kNakAccess) || r.psn != c.psn)
    return fail(describe(r) + "; expected NAK remote access error");
  // §9.9.3.1.3: a remote access error moves the responder's QP to the error state.
  write_only(c, psn_add(c.psn, 1), data, true);
  const auto after = c.link.collect(2 * c.wait_ms);
  for (const RxFrame& a : after)
    if (is_ack(a)) return fail(describe(r) + "; but the QP still ACKed a later WRITE");
  return pass(describe(r) + "; nothing ACKed after it (QP in error)");
}

Outcome write_too_long(Ctx& c) {
  const auto data = bytes(128, 7);
  c.link.send(with_reth(opc::kWriteOnly, c.psn, true, c.peer.vaddr, c.peer.rkey, 64), data);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE ONLY carrying 128 B for a 64 B RETH");
  if (!is_nak(r, kNakInvalid) || r.psn != c.psn)
    return fail(describe(r) + "; expected NAK invalid request");
  return pass(describe(r));
}

Outcome middle_without_first(Ctx& c) {
  const auto data = bytes(c.peer.mtu, 8);
  c.link.send(hdr(opc::kWriteMiddle, c.psn, true), data);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE MIDDLE with no FIRST before it");
  if (!is_nak(r, kNakInvalid) || r.psn != c.psn)
    return fail(describe(r) + "; expected NAK invalid request");
  return pass(describe(r));
}

Outcome beyond_mtu(Ctx& c) {
  const uint32_t len = c.peer.mtu + 256;
  if (len + 100 > c.link.mtu_bytes())
    return {Verdict::kNotApplicable, "the link's MTU is too small"};
  const auto data = bytes(len, 9);
  write_only(c, c.psn, data, true);
  RxFrame r;
  const auto got = c.link.collect(2 * c.wait_ms);
  if (got.empty()) return still_works(c, "a WRITE ONLY of PMTU + 256 B dropped silently");
  if (is_nak(got.front(), kNakInvalid)) return pass(describe(got.front()));
  return fail(describe(got.front()) + "; expected NAK invalid request or a silent drop");
}

Outcome bad_icrc(Ctx& c) {
  TxFaults f;
  f.corrupt_icrc = true;
  write_only(c, c.psn, bytes(64, 10), true, 0, f);
  return silently_dropped(c, "a WRITE with a corrupted ICRC");
}

Outcome wrong_pkey(Ctx& c) {
  TxFaults f;
  f.pkey = 0x1234;  // a limited-membership key the peer's QP does not hold
  write_only(c, c.psn, bytes(64, 11), true, 0, f);
  return silently_dropped(c, "a WRITE with P_Key 0x1234");
}

Outcome limited_pkey(Ctx& c) {
  TxFaults f;
  f.pkey = 0x7FFF;  // the default partition, limited membership
  write_only(c, c.psn, bytes(64, 15), true, 0, f);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE with P_Key 0x7FFF (AckReq)");
  if (!is_ack(r) || r.psn != c.psn) return fail(describe(r) + "; expected an ACK");
  return pass(describe(r));
}

Outcome wrong_dest_qp(Ctx& c) {
  TxFaults f;
  f.dest_qp = static_cast<int>((c.peer.qpn + 0x1000) & 0xFFFFFF);
  write_only(c, c.psn, bytes(64, 12), true, 0, f);
  return silently_dropped(c, "a WRITE to a QP number that does not exist");
}

Outcome ack_coalescing(Ctx& c) {
  for (int i = 0; i < 4; ++i) write_only(c, psn_add(c.psn, i), bytes(32, 13), false, 64 * i);
  write_only(c, psn_add(c.psn, 4), bytes(32, 14), true, 512);
  RxFrame r;
  std::string seen;
  while (next(c, &r)) {
    if (!is_ack(r)) return fail(describe(r));
    seen += (seen.empty() ? "" : ", ") + describe(r);
    if (r.psn == psn_add(c.psn, 4)) {
      if (r.msn != c.msn + 5) return fail(seen + "; expected MSN " + std::to_string(c.msn + 5));
      return pass(seen);
    }
  }
  return fail((seen.empty() ? std::string("nothing") : seen) + "; no ACK for the one with AckReq");
}

// A NAK `syndrome` for ePSN in answer to what was just sent, or the failure.
Outcome expect_nak(Ctx& c, uint8_t syndrome, const char* what, const char* expected) {
  RxFrame r;
  if (!next(c, &r)) return fail(std::string("no answer to ") + what);
  if (!is_nak(r, syndrome) || r.psn != c.psn) return fail(describe(r) + "; expected " + expected);
  return pass(describe(r));
}

Outcome zero_length_write(Ctx& c) {
  // C9-88: a zero-length RDMA WRITE accesses nothing, so neither its R_Key nor its VA is checked.
  c.link.send(with_reth(opc::kWriteOnly, c.psn, true, 0xDEAD000, c.peer.rkey ^ 0x5A5A00, 0), {});
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a zero-length WRITE with a wrong R_Key");
  if (!is_ack(r) || r.psn != c.psn)
    return fail(describe(r) + "; expected an ACK (no R_Key check for zero length)");
  if (r.msn != c.msn + 1) return fail(describe(r) + "; expected MSN " + std::to_string(c.msn + 1));
  return pass(describe(r));
}

Outcome write_out_of_bounds(Ctx& c) {
  // The right R_Key, but the range is 1 TiB past the region's address: bounds are part of the
  // R_Key check (§9.4.1.1, §10.6.3.3).
  c.link.send(with_reth(opc::kWriteOnly, c.psn, true, c.peer.vaddr + kFarAway, c.peer.rkey, 64),
              bytes(64, 16));
  return expect_nak(c, kNakAccess, "a WRITE 1 TiB past the region's address",
                    "NAK remote access error");
}

Outcome first_then_only(Ctx& c) {
  // A new message may not begin before the previous one ended (§9.7.5.1.2): FIRST, then ONLY.
  const uint32_t mtu = c.peer.mtu;
  const auto data = bytes(2 * mtu, 17);
  c.link.send(with_reth(opc::kWriteFirst, c.psn, false, c.peer.vaddr, c.peer.rkey, 2 * mtu),
              std::span(data).subspan(0, mtu));
  c.psn = psn_add(c.psn, 1);
  write_only(c, c.psn, bytes(64, 18), true);
  return expect_nak(c, kNakInvalid, "a WRITE ONLY inside an unfinished WRITE",
                    "NAK invalid request");
}

Outcome duplicate_far_behind(Ctx& c) {
  // PSNs in [ePSN - 2^23, ePSN) are duplicates (§9.7.5.1.1), however old: ACKed, not NAKed as
  // out of sequence, and not executed.
  write_only(c, psn_add(c.psn, -(1 << 22)), bytes(64, 19), true, 768);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE 2^22 PSNs behind ePSN (AckReq)");
  if (!is_ack(r)) return fail(describe(r) + "; expected an ACK (a duplicate)");
  if (r.msn != c.msn) return fail(describe(r) + "; the MSN moved: the duplicate was executed");
  return still_works(c, describe(r));
}

Outcome rnr_nak(Ctx& c) {
  // A WRITE with immediate consumes a receive WQE; a write_bw server posts none, so the answer
  // is an RNR NAK carrying the QP's minimum RNR timer (§9.7.5.2.8), and the PSN is not
  // consumed: a plain WRITE at the same PSN then succeeds.
  wire::TransportHeaders th =
      with_reth(opc::kWriteOnlyImm, c.psn, true, c.peer.vaddr, c.peer.rkey, 32);
  th.imm.imm = Be32::of(0x12345678);
  c.link.send(th, bytes(32, 20));
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE with immediate and no receive posted");
  if (r.opcode != opc::kAcknowledge || !r.has_aeth || (r.syndrome & 0xE0) != 0x20 ||
      r.psn != c.psn || !r.icrc_ok)
    return fail(describe(r) + "; expected an RNR NAK for psn " + std::to_string(c.psn));
  if ((r.syndrome & 0x1F) != c.rnr_timer)
    return fail(describe(r) + "; the timer code is " + std::to_string(r.syndrome & 0x1F) +
                ", the QP's minimum RNR timer is " + std::to_string(c.rnr_timer));
  if (r.msn != c.msn) return fail(describe(r) + "; the MSN moved");
  return still_works(c, describe(r));
}

Outcome ack_credit_field(Ctx& c) {
  // End-to-end credits (§9.7.7.2): an ACK's low five bits are the receive WQEs the responder
  // advertises, or 0x1F (no credit information). A write_bw server posts no receives, so any
  // count above zero is wrong.
  write_only(c, c.psn, bytes(16, 21), true);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a WRITE with AckReq");
  if (!is_ack(r)) return fail(describe(r) + "; expected an ACK");
  const uint8_t code = r.syndrome & 0x1F;
  if (code != 0 && code != 0x1F)
    return fail(describe(r) + "; credit code " + std::to_string(code) +
                " advertises receive WQEs on a QP that has none posted");
  return pass(describe(r) + (code == 0x1F ? " (no credit information)" : " (0 credits)"));
}

// ---- READ -------------------------------------------------------------------------------------

// A READ of `len` bytes at `off`: the responses in order, or the failure. `resumed`: a
// re-request of an earlier READ's tail, whose first response may begin a new opcode sequence
// (FIRST / ONLY, as hfi1 does) or continue the original's (MIDDLE / LAST, as rxe does): IBTA
// §9.7.5.1.1 asks for the PSNs and the bytes, and a requester takes either.
Outcome read_once(Ctx& c, uint32_t psn, uint32_t len, uint64_t off, std::vector<uint8_t>* data,
                  bool resumed = false) {
  c.link.send(with_reth(opc::kReadRequest, psn, true, c.peer.vaddr + off, c.peer.rkey, len), {});
  const uint32_t n = (len + c.peer.mtu - 1) / c.peer.mtu;
  bool continued = false;
  data->clear();
  for (uint32_t k = 0; k < n; ++k) {
    RxFrame r;
    if (!next(c, &r))
      return fail("response " + std::to_string(k) + " of " + std::to_string(n) + " never came");
    uint8_t want = n == 1       ? opc::kReadRespOnly
                   : k == 0     ? opc::kReadRespFirst
                   : k + 1 == n ? opc::kReadRespLast
                                : opc::kReadRespMiddle;
    if (resumed && k == 0 && r.opcode == (n == 1 ? opc::kReadRespLast : opc::kReadRespMiddle)) {
      want = r.opcode;  // the original's sequence continued
      continued = true;
    }
    const uint32_t plen = k + 1 == n ? len - k * c.peer.mtu : c.peer.mtu;
    if (r.opcode != want || r.psn != psn_add(psn, static_cast<int>(k)) ||
        r.payload.size() != plen || !r.icrc_ok)
      return fail("response " + std::to_string(k) + ": " + describe(r));
    data->insert(data->end(), r.payload.begin(), r.payload.end());
  }
  return pass(std::to_string(n) + " responses, PSNs and lengths right" +
              (continued ? " (the first one continued the original's opcode sequence)" : ""));
}

Outcome read_responses(Ctx& c) {
  std::vector<uint8_t> d;
  return read_once(c, c.psn, 3 * c.peer.mtu + 100, 0, &d);
}

Outcome duplicate_read(Ctx& c) {
  std::vector<uint8_t> first, again;
  const uint32_t len = 2 * c.peer.mtu;
  Outcome o = read_once(c, c.psn, len, 0, &first);
  if (o.verdict != Verdict::kPass) return o;
  o = read_once(c, c.psn, len, 0, &again);  // the same PSN: a duplicate, executed again
  if (o.verdict != Verdict::kPass) return fail("duplicate READ: " + o.seen);
  if (again != first) return fail("the duplicate READ returned other bytes");
  return pass("answered again in full, same bytes: " + o.seen);
}

Outcome read_invalid_rkey(Ctx& c) {
  c.link.send(with_reth(opc::kReadRequest, c.psn, true, c.peer.vaddr, c.peer.rkey ^ 0x5A5A00, 64),
              {});
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a READ with a wrong R_Key");
  if (!is_nak(r, kNakAccess) || r.psn != c.psn)
    return fail(describe(r) + "; expected NAK remote access error");
  return pass(describe(r));
}

Outcome read_zero_length(Ctx& c) {
  // C9-88: a zero-length READ checks no R_Key; the answer is one RDMA READ Response Only with
  // no payload, and it consumes one PSN.
  c.link.send(with_reth(opc::kReadRequest, c.psn, true, 0xDEAD000, c.peer.rkey ^ 0x5A5A00, 0), {});
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a zero-length READ with a wrong R_Key");
  if (r.opcode != opc::kReadRespOnly || r.psn != c.psn || !r.payload.empty() || !r.icrc_ok)
    return fail(describe(r) + "; expected an empty READ RESPONSE ONLY");
  // The QP still works: the next READ at the next PSN (a read_bw server may not allow WRITE).
  std::vector<uint8_t> d;
  const Outcome o = read_once(c, psn_add(c.psn, 1), 16, 0, &d);
  if (o.verdict != Verdict::kPass) return fail(describe(r) + "; then a READ: " + o.seen);
  return pass(describe(r) + "; a READ at the next PSN then answered");
}

Outcome read_out_of_bounds(Ctx& c) {
  c.link.send(with_reth(opc::kReadRequest, c.psn, true, c.peer.vaddr + kFarAway, c.peer.rkey, 64),
              {});
  return expect_nak(c, kNakAccess, "a READ 1 TiB past the region's address",
                    "NAK remote access error");
}

Outcome read_response_aeth(Ctx& c) {
  // Table 38 / §9.3.5: READ RESPONSE FIRST, LAST and ONLY carry an AETH, MIDDLE does not; the
  // MSN counts the READ (C9-148).
  const uint32_t n = 3;
  c.link.send(with_reth(opc::kReadRequest, c.psn, true, c.peer.vaddr, c.peer.rkey, n * c.peer.mtu),
              {});
  std::string seen;
  for (uint32_t k = 0; k < n; ++k) {
    RxFrame r;
    if (!next(c, &r)) return fail(seen + "; response " + std::to_string(k) + " never came");
    seen += (seen.empty() ? "" : ", ") + describe(r);
    if (r.has_aeth != (k != 1))
      return fail(seen + (k == 1 ? "; a MIDDLE with an AETH" : "; no AETH"));
    if (r.has_aeth && (r.syndrome & 0xE0) != 0) return fail(seen + "; the AETH is not an ACK");
    if (r.has_aeth && r.msn != c.msn + 1)
      return fail(seen + "; expected MSN " + std::to_string(c.msn + 1));
  }
  return pass(seen);
}

Outcome duplicate_read_tail(Ctx& c) {
  // A requester that lost the middle of a READ re-requests the rest: the PSN of the first
  // missing response, the RETH moved on by what arrived (§9.7.5.1.1). The responder
  // answers from that PSN with the original bytes.
  std::vector<uint8_t> whole, tail;
  const uint32_t mtu = c.peer.mtu, len = 3 * mtu;
  Outcome o = read_once(c, c.psn, len, 0, &whole);
  if (o.verdict != Verdict::kPass) return o;
  // The re-request's first answer is a FIRST (or ONLY) again: a new response stream.
  o = read_once(c, psn_add(c.psn, 1), len - mtu, mtu, &tail, true);
  if (o.verdict != Verdict::kPass) return fail("re-request of the last 2 packets: " + o.seen);
  if (!std::equal(tail.begin(), tail.end(), whole.begin() + mtu))
    return fail("the re-requested tail differs from the original bytes");
  return pass("the tail from PSN +1 answered again, same bytes: " + o.seen);
}

// ---- ATOMIC -----------------------------------------------------------------------------------

void fetch_add(Ctx& c, uint32_t psn, uint64_t off, uint64_t add) {
  wire::TransportHeaders th = hdr(opc::kFetchAdd, psn, true);
  th.atomic_eth.va = Be64::of(c.peer.vaddr + off);
  th.atomic_eth.rkey = Be32::of(c.peer.rkey);
  th.atomic_eth.swap_add = Be64::of(add);
  th.atomic_eth.compare = Be64::of(0);
  c.link.send(th, {});
}

Outcome atomic_once(Ctx& c) {
  RxFrame a, b;
  fetch_add(c, c.psn, 0, 5);
  if (!next(c, &a)) return fail("no answer to a FETCH & ADD");
  if (a.opcode != opc::kAtomicAcknowledge || a.psn != c.psn || !a.icrc_ok)
    return fail(describe(a) + "; expected an ATOMIC ACKNOWLEDGE");
  // The duplicate (same PSN) replays the saved result; the next one sees one add only.
  fetch_add(c, c.psn, 0, 5);
  if (!next(c, &b)) return fail("no answer to a duplicate FETCH & ADD");
  if (b.opcode != opc::kAtomicAcknowledge || b.orig != a.orig)
    return fail("duplicate: " + describe(b) + "; expected the saved result " +
                std::to_string(a.orig));
  fetch_add(c, psn_add(c.psn, 1), 0, 0);
  RxFrame n;
  if (!next(c, &n) || n.opcode != opc::kAtomicAcknowledge)
    return fail("no answer to the next FETCH & ADD");
  if (n.orig != a.orig + 5)
    return fail("after one add of 5 to " + std::to_string(a.orig) + " the value is " +
                std::to_string(n.orig) + ": the duplicate was executed again");
  return pass(describe(a) + "; the duplicate replayed orig " + std::to_string(b.orig) +
              "; executed once");
}

Outcome atomic_misaligned(Ctx& c) {
  fetch_add(c, c.psn, 3, 1);
  RxFrame r;
  if (!next(c, &r)) return fail("no answer to a FETCH & ADD at an address not 8-byte aligned");
  if (!is_nak(r, kNakInvalid) || r.psn != c.psn)
    return fail(describe(r) + "; expected NAK invalid request");
  return pass(describe(r));
}

Outcome compare_swap(Ctx& c) {
  // §9.4.5: COMPARE & SWAP returns the original value and swaps only when it matched.
  auto cmp_swap = [&](uint32_t psn, uint64_t compare, uint64_t swap, RxFrame* r) {
    wire::TransportHeaders th = hdr(opc::kCompareSwap, psn, true);
    th.atomic_eth.va = Be64::of(c.peer.vaddr + 8);
    th.atomic_eth.rkey = Be32::of(c.peer.rkey);
    th.atomic_eth.swap_add = Be64::of(swap);
    th.atomic_eth.compare = Be64::of(compare);
    c.link.send(th, {});
    return next(c, r) && r->opcode == opc::kAtomicAcknowledge && r->psn == psn && r->icrc_ok;
  };
  RxFrame a, b, d;
  if (!cmp_swap(c.psn, 0, 0, &a)) return fail("no ATOMIC ACKNOWLEDGE for a COMPARE & SWAP");
  const uint64_t v = a.orig, other = v ^ 0xF0F0F0F0F0F0F0F0ull, fresh = v + 0x1111;
  if (!cmp_swap(psn_add(c.psn, 1), other, fresh, &b))
    return fail("second COMPARE & SWAP: no answer");
  if (b.orig != v)
    return fail("a mismatching compare changed the value to " + std::to_string(b.orig));
  if (!cmp_swap(psn_add(c.psn, 2), v, fresh, &d)) return fail("third COMPARE & SWAP: no answer");
  if (d.orig != v) return fail("the matching compare saw " + std::to_string(d.orig));
  RxFrame e;
  if (!cmp_swap(psn_add(c.psn, 3), 0, 0, &e)) return fail("fourth COMPARE & SWAP: no answer");
  if (e.orig != fresh)
    return fail("after a matching compare the value is " + std::to_string(e.orig) + ", not " +
                std::to_string(fresh));
  return pass("orig " + std::to_string(v) + "; a mismatch left it, a match swapped it to " +
              std::to_string(fresh));
}

Outcome atomic_invalid_rkey(Ctx& c) {
  wire::TransportHeaders th = hdr(opc::kFetchAdd, c.psn, true);
  th.atomic_eth.va = Be64::of(c.peer.vaddr);
  th.atomic_eth.rkey = Be32::of(c.peer.rkey ^ 0x5A5A00);
  th.atomic_eth.swap_add = Be64::of(1);
  c.link.send(th, {});
  return expect_nak(c, kNakAccess, "a FETCH & ADD with a wrong R_Key", "NAK remote access error");
}

}  // namespace

const char* to_string(Verdict v) {
  return v == Verdict::kPass ? "PASS" : v == Verdict::kFail ? "FAIL" : "NOT-APPLICABLE";
}

const char* needs_test(Needs n) {
  return n == Needs::kWrite    ? "write_bw"
         : n == Needs::kRead   ? "read_bw"
         : n == Needs::kAtomic ? "atomic_bw"
         : n == Needs::kCm     ? "rdma_cm"
         : n == Needs::kUd     ? "ud_pingpong"
                               : "write_bw_client";
}

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> k = [] {
    std::vector<Scenario> v = {
        {"write_acked", "9.7.5.1.6: AckReq is answered with an ACK carrying the MSN", Needs::kWrite,
         write_acked},
        {"write_multi_packet", "9.7.4.1 / 9.7.5.1.6: FIRST/MIDDLE/LAST of one PMTU, ACK for LAST",
         Needs::kWrite, write_multi_packet},
        {"psn_sequence_error", "9.7.5.1.1: a PSN past ePSN: NAK PSN sequence error, not executed",
         Needs::kWrite, psn_sequence_error},
        {"duplicate_write", "9.7.5.1.1: a duplicate is ACKed again, not executed again",
         Needs::kWrite, duplicate_write},
        {"invalid_rkey", "9.4.1.1 / 9.9.3: R_Key violation: NAK remote access error, QP to error",
         Needs::kWrite, invalid_rkey},
        {"write_length_error", "9.7.4.1: payload longer than the RETH length: NAK invalid request",
         Needs::kWrite, write_too_long},
        {"middle_without_first", "9.7.5.1.2: opcode out of sequence: NAK invalid request",
         Needs::kWrite, middle_without_first},
        {"beyond_pmtu", "9.7.4.1: a packet longer than the PMTU: NAK invalid request or dropped",
         Needs::kWrite, beyond_mtu},
        {"bad_icrc_dropped", "9.6 / A17 (ICRC): a bad ICRC is dropped silently", Needs::kWrite,
         bad_icrc},
        {"wrong_pkey_dropped", "9.6: a P_Key the QP does not hold is dropped silently",
         Needs::kWrite, wrong_pkey},
        {"limited_pkey_accepted",
         "10.9.3: a limited member's P_Key (0x7FFF) matches a full member's", Needs::kWrite,
         limited_pkey},
        {"wrong_dest_qp_dropped", "9.6: a DestQP with no QP behind it is dropped silently",
         Needs::kWrite, wrong_dest_qp},
        {"ack_coalescing",
         "9.7.5.1.6: ACKs may coalesce; the AckReq one is answered, MSN counts all", Needs::kWrite,
         ack_coalescing},
        {"zero_length_write", "9.4.3 / C9-88: a zero-length WRITE checks no R_Key and is ACKed",
         Needs::kWrite, zero_length_write},
        {"write_out_of_bounds", "9.4.1.1: a range outside the region: NAK remote access error",
         Needs::kWrite, write_out_of_bounds},
        {"first_then_only",
         "9.7.5.1.2: a new message inside an unfinished one: NAK invalid request", Needs::kWrite,
         first_then_only},
        {"duplicate_far_behind",
         "9.7.5.1.1: a PSN 2^22 behind ePSN is a duplicate: ACK, no execution", Needs::kWrite,
         duplicate_far_behind},
        {"rnr_nak", "9.7.5.2.8: no receive WQE: RNR NAK with the QP's timer, PSN not consumed",
         Needs::kWrite, rnr_nak},
        {"ack_credit_field", "9.7.7.2: an ACK advertises no credits it does not have (0 or 0x1F)",
         Needs::kWrite, ack_credit_field},
        {"read_responses", "9.7.4.1: READ responses FIRST..LAST, PSN per packet, PMTU lengths",
         Needs::kRead, read_responses},
        {"duplicate_read", "9.7.5.1.1: a duplicate READ is executed again", Needs::kRead,
         duplicate_read},
        {"read_invalid_rkey", "9.4.1.1: READ with a wrong R_Key: NAK remote access error",
         Needs::kRead, read_invalid_rkey},
        {"read_zero_length",
         "9.4.4 / C9-88: a zero-length READ checks no R_Key: one empty response", Needs::kRead,
         read_zero_length},
        {"read_out_of_bounds", "9.4.1.1: READ outside the region: NAK remote access error",
         Needs::kRead, read_out_of_bounds},
        {"read_response_aeth",
         "9.3.5 / C9-148: FIRST and LAST responses carry AETH and MSN, MIDDLE not", Needs::kRead,
         read_response_aeth},
        {"duplicate_read_tail", "9.7.5.1.1: a re-request of a READ's tail is answered from its PSN",
         Needs::kRead, duplicate_read_tail},
        {"duplicate_atomic",
         "9.7.5.1.1: a duplicate atomic replays the saved result, executed once", Needs::kAtomic,
         atomic_once},
        {"atomic_misaligned", "9.4.5: an atomic address not 8-byte aligned: NAK invalid request",
         Needs::kAtomic, atomic_misaligned},
        {"compare_swap", "9.4.5: COMPARE & SWAP returns the original and swaps only on a match",
         Needs::kAtomic, compare_swap},
        {"atomic_invalid_rkey",
         "9.4.5 / 9.9.3: an atomic with a wrong R_Key: NAK remote access error", Needs::kAtomic,
         atomic_invalid_rkey},
    };
    // The peer-client ones last (cc_scenarios ends with them): we serve the peer's client.
    for (const Scenario& r : cc_scenarios()) v.push_back(r);
    for (const Scenario& r : requester_scenarios()) v.push_back(r);
    for (const Scenario& r : cm_scenarios()) v.push_back(r);
    for (const Scenario& r : ud_scenarios()) v.push_back(r);
    return v;
  }();
  return k;
}

}  // namespace urnic::conform
