#include "bench/conform/acking.h"

#include <rte_cycles.h>

#include "bench/conform/craft.h"
#include "dataplane/wire/opcode.h"

namespace urnic::conform {

namespace opc = wire::opc;

bool ends_message(uint8_t opcode) {
  return opcode == opc::kWriteOnly || opcode == opc::kWriteLast || opcode == opc::kWriteOnlyImm ||
         opcode == opc::kWriteLastImm || opcode == opc::kSendOnly || opcode == opc::kSendLast ||
         opcode == opc::kSendOnlyImm || opcode == opc::kSendLastImm;
}

void AckingResponder::run(double ms, double cnp_us, double cnp_from_ms, double cnp_to_ms,
                          const std::function<void(uint64_t, size_t)>& in_order,
                          std::vector<uint64_t>* cnp_tsc) {
  const double hz = static_cast<double>(rte_get_tsc_hz());
  const uint64_t start = rte_rdtsc();
  const uint64_t end = start + static_cast<uint64_t>(ms * 1e-3 * hz);
  const uint64_t cnp_from = start + static_cast<uint64_t>(cnp_from_ms * 1e-3 * hz);
  const uint64_t cnp_to = start + static_cast<uint64_t>(cnp_to_ms * 1e-3 * hz);
  const uint64_t cnp_gap = static_cast<uint64_t>(cnp_us * 1e-6 * hz);
  uint64_t next_cnp = cnp_from, since_ack = 0;
  for (uint64_t now = start; now < end; now = rte_rdtsc()) {
    RxFrame r;
    if (!c.link.recv(&r, 0.05)) continue;
    // As a notification point answers CE-marked requests: at most one CNP per cnp_us, sent
    // when a request arrives (DCQCN's NP). Tied to the requests, the CNPs reach the peer while
    // it sends, not in one burst after a pause of either process on a loaded host.
    if (cnp_gap != 0 && r.tsc >= next_cnp && r.tsc < cnp_to) {
      TxFaults f;
      f.becn = true;
      c.link.send(hdr(opc::kCnp, 0, false), {}, f);
      ++cnps;
      if (cnp_tsc != nullptr) cnp_tsc->push_back(rte_rdtsc());
      next_cnp = r.tsc + cnp_gap;
    }
    const int32_t d = static_cast<int32_t>(((r.psn - epsn) & 0xFFFFFF) << 8) >> 8;
    if (d == 0) {
      epsn = psn_add(epsn, 1);
      if (ends_message(r.opcode)) ++msn;
      if (in_order) in_order(r.tsc, r.payload.size());
    }
    if (d > 0) {
      // A gap (a frame lost on the way): NAK PSN sequence error once per ePSN, as a
      // responder does (IBTA §9.7.5.1.1), so the requester resends at once rather than after
      // its timeout. Without it one loss on a loaded host costs T and hides the reaction.
      if (!naked || naked_psn != epsn)
        c.link.send(aeth_frame(opc::kAcknowledge, epsn, kNakPsnSeq, msn), {});
      naked = true;
      naked_psn = epsn;
      continue;
    }
    if (r.ack_req || ++since_ack >= 16 || d < 0) {
      c.link.send(aeth_frame(opc::kAcknowledge, psn_add(epsn, -1), kAckUnlimited, msn), {});
      since_ack = 0;
    }
  }
}

}  // namespace urnic::conform
