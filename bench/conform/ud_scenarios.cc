// urnic-conform's datagram scenarios (issue 44 item 4): the peer's UD QP, as the libibverbs
// example ibv_ud_pingpong runs it (Q_Key 0x11111111; the server answers every datagram it
// receives with one of its own, to the address of the TCP exchange). The peer serves two
// datagrams per scenario and exits (`ibv_ud_pingpong -g 1 -n 2` in a loop): each scenario sends
// exactly two that count - one before its fault, one after - and judges by what comes back:
// a datagram the rules say to drop must get no answer, and the one after it must still get one
// (the fault neither broke the QP nor used up a receive).
#include <string>
#include <vector>

#include "bench/conform/craft.h"
#include "bench/conform/scenarios.h"
#include "dataplane/wire/opcode.h"

namespace urnic::conform {
namespace {

namespace opc = wire::opc;

constexpr uint32_t kQkey = 0x11111111;  // ibv_ud_pingpong's (and perftest's) Q_Key
constexpr size_t kSize = 64;            // fits any receive the peer posts (-s is 1024 by default)

// One datagram to the peer's QP from ours.
bool send_ud(Ctx& c, size_t len, uint8_t opcode = opc::kUdSendOnly, uint32_t qkey = kQkey,
             const TxFaults& f = {}) {
  wire::TransportHeaders th = hdr(opcode, c.psn, false);
  c.psn = psn_add(c.psn, 1);  // a UD sender's PSN counts up; the receiver does not check it
  th.deth.qkey = wire::Be32::of(qkey);
  wire::Deth::SrcQp::set(th.deth, c.own_qpn);
  if (opcode == opc::kUdSendOnlyImm) th.imm.imm = wire::Be32::of(0xC0DE0000u | c.msn);
  return c.link.send(th, bytes(len, static_cast<uint8_t>(c.psn)), f);
}

std::string describe_ud(const RxFrame& r) {
  char b[96];
  std::snprintf(b, sizeof b, " from QP %#x, Q_Key %#x", r.src_qp, r.qkey);
  return describe(r) + b;
}

// The peer's answer to a datagram that counts: a UD SEND from its QP with the Q_Key. Empty when
// it came, else what was wrong.
std::string answer(Ctx& c, const std::string& to) {
  RxFrame r;
  if (!c.link.recv(&r, c.wait_ms)) return "no answer to " + to;
  if (r.opcode != opc::kUdSendOnly && r.opcode != opc::kUdSendOnlyImm)
    return to + " was answered with " + describe(r);
  if (r.src_qp != c.peer.qpn || r.qkey != kQkey)
    return to + " was answered: " + describe_ud(r) + "; expected QP " + std::to_string(c.peer.qpn) +
           " and Q_Key 0x11111111";
  ++c.msn;
  return "";
}

// The pattern of the dropping scenarios: a valid datagram (answered), the faulty one `what`
// (sent by `fault`: no answer), a valid one (answered).
template <class Fault>
Outcome dropped(Ctx& c, const std::string& what, Fault fault) {
  send_ud(c, kSize);
  if (std::string e = answer(c, "a valid datagram"); !e.empty()) return fail(e);
  fault();
  const auto got = c.link.collect(2 * c.wait_ms);
  if (!got.empty()) return fail(what + " was answered: " + describe_ud(got.front()));
  send_ud(c, kSize);
  if (std::string e = answer(c, "the valid datagram after it"); !e.empty())
    return fail("no answer to " + what + "; then " + e);
  return pass("no answer to " + what + "; the valid datagrams before and after it answered");
}

Outcome echo(Ctx& c) {
  for (int i = 0; i < 2; ++i) {
    send_ud(c, kSize);
    if (std::string e = answer(c, "datagram " + std::to_string(i + 1)); !e.empty()) return fail(e);
  }
  return pass("both datagrams answered by a UD SEND from QP " + std::to_string(c.peer.qpn) +
              " with Q_Key 0x11111111");
}

Outcome qkey_mismatch(Ctx& c) {
  return dropped(c, "a datagram with Q_Key 0x22222222",
                 [&] { send_ud(c, kSize, opc::kUdSendOnly, 0x22222222); });
}

// A controlled Q_Key (high bit set) on the wire is a value like any other: it must match.
Outcome qkey_controlled(Ctx& c) {
  return dropped(c, "a datagram with Q_Key 0x91111111",
                 [&] { send_ud(c, kSize, opc::kUdSendOnly, 0x91111111); });
}

Outcome wrong_dest_qp(Ctx& c) {
  TxFaults f;
  f.dest_qp = static_cast<int>((c.peer.qpn + 0x1000) & 0xFFFFFF);
  return dropped(c, "a datagram for QP " + std::to_string(f.dest_qp),
                 [&] { send_ud(c, kSize, opc::kUdSendOnly, kQkey, f); });
}

Outcome bad_icrc(Ctx& c) {
  TxFaults f;
  f.corrupt_icrc = true;
  return dropped(c, "a datagram with a bad ICRC",
                 [&] { send_ud(c, kSize, opc::kUdSendOnly, kQkey, f); });
}

Outcome wrong_pkey(Ctx& c) {
  TxFaults f;
  f.pkey = 0x8123;
  return dropped(c, "a datagram with P_Key 0x8123",
                 [&] { send_ud(c, kSize, opc::kUdSendOnly, kQkey, f); });
}

// Larger than the path MTU (a UD message is one packet of at most the PMTU): --mtu must be the
// peer port's (its Ethernet MTU less 80, rounded down: 1500 -> 1024, 4200 -> 4096), and the
// link must carry 32 bytes more.
Outcome beyond_pmtu(Ctx& c) {
  const size_t len = c.peer.mtu + 32;
  return dropped(
      c, "a datagram of " + std::to_string(len) + " B (PMTU " + std::to_string(c.peer.mtu) + ")",
      [&] { send_ud(c, len); });
}

// An RC opcode to a UD QP: the transport does not match the QP's.
Outcome rc_opcode(Ctx& c) {
  return dropped(c, "an RC SEND ONLY to the UD QP", [&] {
    wire::TransportHeaders th = hdr(opc::kSendOnly, c.psn, false);
    c.link.send(th, bytes(kSize, 3));
  });
}

// With immediate data: a message like any other (answered), the second that counts.
Outcome with_imm(Ctx& c) {
  send_ud(c, kSize);
  if (std::string e = answer(c, "a valid datagram"); !e.empty()) return fail(e);
  send_ud(c, kSize, opc::kUdSendOnlyImm);
  if (std::string e = answer(c, "a SEND ONLY WITH IMMEDIATE"); !e.empty()) return fail(e);
  return pass("a datagram with immediate data is received like any other (answered)");
}

Outcome zero_length(Ctx& c) {
  send_ud(c, kSize);
  if (std::string e = answer(c, "a valid datagram"); !e.empty()) return fail(e);
  send_ud(c, 0);
  if (std::string e = answer(c, "a zero-length datagram"); !e.empty()) return fail(e);
  return pass("a zero-length datagram is a message (answered)");
}

}  // namespace

std::vector<Scenario> ud_scenarios() {
  return {
      {"ud_echo", "10.2.5 / 11.4.1.1: datagrams are received (answered from the peer's QP)",
       Needs::kUd, echo},
      {"ud_qkey_mismatch", "10.2.5 C10-15: a Q_Key other than the QP's: silently dropped",
       Needs::kUd, qkey_mismatch},
      {"ud_qkey_controlled", "10.2.5: a controlled Q_Key on the wire must match too", Needs::kUd,
       qkey_controlled},
      {"ud_wrong_dest_qp", "9.6: a DestQP with no QP behind it: dropped", Needs::kUd,
       wrong_dest_qp},
      {"ud_bad_icrc", "9.6 / A17 (ICRC): a bad ICRC is dropped silently", Needs::kUd, bad_icrc},
      {"ud_wrong_pkey", "9.6 / 10.9.3: a P_Key the port does not hold: dropped", Needs::kUd,
       wrong_pkey},
      {"ud_beyond_pmtu", "9.6 / 11.4.1.1: a datagram longer than the PMTU: dropped", Needs::kUd,
       beyond_pmtu},
      {"ud_rc_opcode", "9.6.1.1: an RC opcode to a UD QP: dropped", Needs::kUd, rc_opcode},
      {"ud_with_imm", "9.8.3: SEND ONLY WITH IMMEDIATE is a datagram like any other", Needs::kUd,
       with_imm},
      {"ud_zero_length", "9.8.3: a zero-length datagram is a message", Needs::kUd, zero_length},
  };
}

}  // namespace urnic::conform
