// Crafting request frames and judging the answers, shared by urnic-conform's scenarios.
#include "bench/conform/craft.h"

#include <cstdio>

#include "dataplane/wire/opcode.h"

namespace urnic::conform {

namespace opc = wire::opc;
using wire::Be32;
using wire::Be64;

uint32_t psn_add(uint32_t p, int n) { return (p + static_cast<uint32_t>(n)) & 0xFFFFFF; }

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed * 31 + i * 7 + (i >> 8));
  return v;
}

wire::TransportHeaders hdr(uint8_t opcode, uint32_t psn, bool ack_req) {
  wire::TransportHeaders th;
  th.bth.opcode = opcode;
  wire::Bth::Psn::set(th.bth, psn);
  wire::Bth::AckReq::set(th.bth, ack_req ? 1u : 0u);
  return th;
}

wire::TransportHeaders with_reth(uint8_t opcode, uint32_t psn, bool ack_req, uint64_t va,
                                 uint32_t rkey, uint32_t len) {
  wire::TransportHeaders th = hdr(opcode, psn, ack_req);
  th.reth.va = Be64::of(va);
  th.reth.rkey = Be32::of(rkey);
  th.reth.dma_length = Be32::of(len);
  return th;
}

std::string describe(const RxFrame& r) {
  char b[200];
  const auto name = wire::opcode_info(r.opcode).name;
  int n = std::snprintf(b, sizeof(b), "%.*s psn %#x", static_cast<int>(name.size()), name.data(),
                        r.psn);
  if (r.has_aeth) {
    const char* kind = (r.syndrome & 0xE0) == 0      ? "ACK"
                       : (r.syndrome & 0xE0) == 0x20 ? "RNR NAK"
                       : r.syndrome == kNakPsnSeq    ? "NAK PSN sequence error"
                       : r.syndrome == kNakInvalid   ? "NAK invalid request"
                       : r.syndrome == kNakAccess    ? "NAK remote access error"
                                                     : "NAK (other)";
    n += std::snprintf(b + n, sizeof(b) - n, " %s (syndrome %#x) msn %u", kind, r.syndrome, r.msn);
  }
  if (!r.payload.empty()) n += std::snprintf(b + n, sizeof(b) - n, ", %zu B", r.payload.size());
  if (r.opcode == opc::kAtomicAcknowledge)
    n +=
        std::snprintf(b + n, sizeof(b) - n, ", orig %llu", static_cast<unsigned long long>(r.orig));
  if (!r.icrc_ok) std::snprintf(b + n, sizeof(b) - n, ", BAD ICRC");
  return b;
}

Outcome pass(std::string s) { return {Verdict::kPass, std::move(s)}; }
Outcome fail(std::string s) { return {Verdict::kFail, std::move(s)}; }

bool is_ack(const RxFrame& r) {
  return r.opcode == opc::kAcknowledge && r.has_aeth && (r.syndrome & 0xE0) == 0 && r.icrc_ok;
}
bool is_nak(const RxFrame& r, uint8_t syndrome) {
  return r.opcode == opc::kAcknowledge && r.has_aeth && r.syndrome == syndrome && r.icrc_ok;
}

wire::TransportHeaders aeth_frame(uint8_t opcode, uint32_t psn, uint8_t syndrome, uint32_t msn) {
  wire::TransportHeaders th = hdr(opcode, psn, false);
  wire::Aeth::Syndrome::set(th.aeth, syndrome);
  wire::Aeth::Msn::set(th.aeth, msn);
  return th;
}

}  // namespace urnic::conform
