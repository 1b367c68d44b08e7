// The BTH opcode table (IBTA Vol. 1 §9.2.1 table 38-39, Annex A17.9.3 for the CNP).
//
// Headers after the BTH are not self-describing: a receiver must know from the opcode which
// extension headers follow and where. kOpcodeTable gives, per opcode, a mask of properties and
// headers, the total header length (BTH .. last extension header) and the offset of each
// extension header from the start of the BTH. RX computes `mask` once per frame and every stage
// only tests bits (house style rule 10; the same idea as rxe_opcode[] in rxe_opcode.c).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "dataplane/wire/headers.h"

namespace urnic::wire {

// Extension header kinds, in the fixed on-wire order (IBTA §9.2: BTH, RDETH, DETH, RETH,
// AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, payload).
enum class Hdr : uint8_t {
  kDeth,
  kReth,
  kAtomicEth,
  kAeth,
  kAtomicAckEth,
  kImmDt,
  kIeth,
  kCnpPad,
  kCount,
};

inline constexpr std::array<uint8_t, static_cast<size_t>(Hdr::kCount)> kHdrSize = {
    sizeof(Deth),         sizeof(Reth),  sizeof(AtomicEth), sizeof(Aeth),
    sizeof(AtomicAckEth), sizeof(ImmDt), sizeof(Ieth),      sizeof(CnpPad)};

// Property bits of an opcode. The low bits mirror Hdr so that `1u << Hdr` is a header bit.
namespace op {
inline constexpr uint32_t hdr_bit(Hdr h) { return 1u << static_cast<unsigned>(h); }
inline constexpr uint32_t kDeth = hdr_bit(Hdr::kDeth);
inline constexpr uint32_t kReth = hdr_bit(Hdr::kReth);
inline constexpr uint32_t kAtomicEth = hdr_bit(Hdr::kAtomicEth);
inline constexpr uint32_t kAeth = hdr_bit(Hdr::kAeth);
inline constexpr uint32_t kAtomicAckEth = hdr_bit(Hdr::kAtomicAckEth);
inline constexpr uint32_t kImmDt = hdr_bit(Hdr::kImmDt);
inline constexpr uint32_t kIeth = hdr_bit(Hdr::kIeth);
inline constexpr uint32_t kCnpPad = hdr_bit(Hdr::kCnpPad);
inline constexpr uint32_t kPayload = 1u << 8;  // may carry payload bytes
inline constexpr uint32_t kReq = 1u << 9;      // request: handled by the responder
inline constexpr uint32_t kResp = 1u << 10;    // response: handled by the completer
inline constexpr uint32_t kSend = 1u << 11;    // SEND operation
inline constexpr uint32_t kWrite = 1u << 12;   // RDMA WRITE operation
inline constexpr uint32_t kRead = 1u << 13;    // RDMA READ request or response
inline constexpr uint32_t kAtomic = 1u << 14;  // COMPARE & SWAP / FETCH & ADD (or its ACK)
inline constexpr uint32_t kRecv = 1u << 15;    // message consumes a receive WQE (IBTA §9.7.5.1)
inline constexpr uint32_t kComp = 1u << 16;    // last packet of a message that completes a recv
inline constexpr uint32_t kFirst = 1u << 17;   // first packet of a multi-packet message
inline constexpr uint32_t kMiddle = 1u << 18;  // middle packet
inline constexpr uint32_t kLast = 1u << 19;    // last packet of a multi-packet message
inline constexpr uint32_t kOnly = kFirst | kLast;  // single-packet message: both bits set
inline constexpr uint32_t kStart = kFirst;         // "starts a message" = first or only
inline constexpr uint32_t kEnd = kLast;            // "ends a message" = last or only
inline constexpr uint32_t kAck = 1u << 20;         // ACKNOWLEDGE / ATOMIC ACKNOWLEDGE
// The transport the opcode belongs to (its top three bits, IBTA table 38) or CNP.
inline constexpr uint32_t kRc = 1u << 21, kUc = 1u << 22, kUd = 1u << 23, kCnp = 1u << 24;
inline constexpr uint32_t kValid = 1u << 25;
}  // namespace op

// Opcode values (include/rdma/ib_pack.h; IBTA table 38).
namespace opc {
inline constexpr uint8_t kRc = 0x00, kUc = 0x20, kUd = 0x60, kCnpBase = 0x80;
inline constexpr uint8_t kSendFirst = 0x00, kSendMiddle = 0x01, kSendLast = 0x02,
                         kSendLastImm = 0x03, kSendOnly = 0x04, kSendOnlyImm = 0x05,
                         kWriteFirst = 0x06, kWriteMiddle = 0x07, kWriteLast = 0x08,
                         kWriteLastImm = 0x09, kWriteOnly = 0x0A, kWriteOnlyImm = 0x0B,
                         kReadRequest = 0x0C, kReadRespFirst = 0x0D, kReadRespMiddle = 0x0E,
                         kReadRespLast = 0x0F, kReadRespOnly = 0x10, kAcknowledge = 0x11,
                         kAtomicAcknowledge = 0x12, kCompareSwap = 0x13, kFetchAdd = 0x14,
                         kSendLastInv = 0x16, kSendOnlyInv = 0x17;
inline constexpr uint8_t kUdSendOnly = 0x64, kUdSendOnlyImm = 0x65;
inline constexpr uint8_t kCnp = 0x81;
}  // namespace opc

struct OpcodeInfo {
  std::string_view name;
  uint32_t mask = 0;
  uint8_t length = 0;  // BTH + extension headers, i.e. offset of the payload from the BTH
  std::array<uint8_t, static_cast<size_t>(Hdr::kCount)> offset{};  // from the start of the BTH

  constexpr bool valid() const noexcept { return mask & op::kValid; }
  constexpr bool has(uint32_t bits) const noexcept { return (mask & bits) == bits; }
  constexpr uint8_t off(Hdr h) const noexcept { return offset[static_cast<size_t>(h)]; }
};

namespace detail {

constexpr OpcodeInfo make_op(std::string_view name, uint32_t mask) {
  OpcodeInfo info;
  info.name = name;
  info.mask = mask | op::kValid;
  uint8_t at = sizeof(Bth);
  for (size_t h = 0; h < static_cast<size_t>(Hdr::kCount); ++h) {
    if (mask & (1u << h)) {
      info.offset[h] = at;
      at = static_cast<uint8_t>(at + kHdrSize[h]);
    }
  }
  info.length = at;
  return info;
}

// The SEND / RDMA WRITE opcodes are shared by RC (0x00) and UC (0x20) with the same headers
// (IBTA table 38); `t` is the transport prefix, `tm` its mask bit.
constexpr void add_send_write(std::array<OpcodeInfo, 256>& t, uint8_t base, uint32_t tm,
                              std::string_view prefix_names[12]) {
  using namespace op;
  const uint32_t send = tm | kReq | kSend | kRecv | kPayload;
  const uint32_t write = tm | kReq | kWrite | kPayload;
  t[base + opc::kSendFirst] = make_op(prefix_names[0], send | kFirst);
  t[base + opc::kSendMiddle] = make_op(prefix_names[1], send | kMiddle);
  t[base + opc::kSendLast] = make_op(prefix_names[2], send | kLast | kComp);
  t[base + opc::kSendLastImm] = make_op(prefix_names[3], send | kLast | kComp | kImmDt);
  t[base + opc::kSendOnly] = make_op(prefix_names[4], send | kOnly | kComp);
  t[base + opc::kSendOnlyImm] = make_op(prefix_names[5], send | kOnly | kComp | kImmDt);
  t[base + opc::kWriteFirst] = make_op(prefix_names[6], write | kFirst | kReth);
  t[base + opc::kWriteMiddle] = make_op(prefix_names[7], write | kMiddle);
  t[base + opc::kWriteLast] = make_op(prefix_names[8], write | kLast);
  t[base + opc::kWriteLastImm] = make_op(prefix_names[9], write | kLast | kImmDt | kRecv | kComp);
  t[base + opc::kWriteOnly] = make_op(prefix_names[10], write | kOnly | kReth);
  t[base + opc::kWriteOnlyImm] =
      make_op(prefix_names[11], write | kOnly | kReth | kImmDt | kRecv | kComp);
}

constexpr std::array<OpcodeInfo, 256> build_opcode_table() {
  using namespace op;
  std::array<OpcodeInfo, 256> t{};
  std::string_view rc_names[12] = {
      "RC_SEND_FIRST",          "RC_SEND_MIDDLE",       "RC_SEND_LAST",
      "RC_SEND_LAST_WITH_IMM",  "RC_SEND_ONLY",         "RC_SEND_ONLY_WITH_IMM",
      "RC_RDMA_WRITE_FIRST",    "RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_LAST",
      "RC_RDMA_WRITE_LAST_IMM", "RC_RDMA_WRITE_ONLY",   "RC_RDMA_WRITE_ONLY_IMM"};
  std::string_view uc_names[12] = {
      "UC_SEND_FIRST",          "UC_SEND_MIDDLE",       "UC_SEND_LAST",
      "UC_SEND_LAST_WITH_IMM",  "UC_SEND_ONLY",         "UC_SEND_ONLY_WITH_IMM",
      "UC_RDMA_WRITE_FIRST",    "UC_RDMA_WRITE_MIDDLE", "UC_RDMA_WRITE_LAST",
      "UC_RDMA_WRITE_LAST_IMM", "UC_RDMA_WRITE_ONLY",   "UC_RDMA_WRITE_ONLY_IMM"};
  add_send_write(t, opc::kRc, kRc, rc_names);
  add_send_write(t, opc::kUc, kUc, uc_names);

  // RC-only operations.
  const uint32_t rread = kRc | kRead;
  t[opc::kReadRequest] = make_op("RC_RDMA_READ_REQUEST", rread | kReq | kOnly | kReth);
  t[opc::kReadRespFirst] =
      make_op("RC_RDMA_READ_RESPONSE_FIRST", rread | kResp | kFirst | kAeth | kPayload);
  t[opc::kReadRespMiddle] =
      make_op("RC_RDMA_READ_RESPONSE_MIDDLE", rread | kResp | kMiddle | kPayload);
  t[opc::kReadRespLast] =
      make_op("RC_RDMA_READ_RESPONSE_LAST", rread | kResp | kLast | kAeth | kPayload);
  t[opc::kReadRespOnly] =
      make_op("RC_RDMA_READ_RESPONSE_ONLY", rread | kResp | kOnly | kAeth | kPayload);
  t[opc::kAcknowledge] = make_op("RC_ACKNOWLEDGE", kRc | kResp | kAck | kOnly | kAeth);
  t[opc::kAtomicAcknowledge] = make_op(
      "RC_ATOMIC_ACKNOWLEDGE", kRc | kResp | kAck | kAtomic | kOnly | kAeth | kAtomicAckEth);
  t[opc::kCompareSwap] = make_op("RC_COMPARE_SWAP", kRc | kReq | kAtomic | kOnly | kAtomicEth);
  t[opc::kFetchAdd] = make_op("RC_FETCH_ADD", kRc | kReq | kAtomic | kOnly | kAtomicEth);
  // 0x15 is reserved for RC (RESYNC exists only for RD).
  t[opc::kSendLastInv] = make_op("RC_SEND_LAST_WITH_INVALIDATE",
                                 kRc | kReq | kSend | kRecv | kPayload | kLast | kComp | kIeth);
  t[opc::kSendOnlyInv] = make_op("RC_SEND_ONLY_WITH_INVALIDATE",
                                 kRc | kReq | kSend | kRecv | kPayload | kOnly | kComp | kIeth);

  // UD: one packet per message, DETH always present (IBTA §9.2.1, table 38).
  t[opc::kUdSendOnly] =
      make_op("UD_SEND_ONLY", kUd | kReq | kSend | kRecv | kComp | kPayload | kOnly | kDeth);
  t[opc::kUdSendOnlyImm] = make_op("UD_SEND_ONLY_WITH_IMM", kUd | kReq | kSend | kRecv | kComp |
                                                                kPayload | kOnly | kDeth | kImmDt);

  // Congestion Notification Packet (RoCEv2 Annex A17.9.3): BTH + 16 reserved bytes.
  t[opc::kCnp] = make_op("CNP", kCnp | kOnly | kCnpPad);
  return t;
}

}  // namespace detail

inline constexpr std::array<OpcodeInfo, 256> kOpcodeTable = detail::build_opcode_table();

constexpr const OpcodeInfo& opcode_info(uint8_t opcode) noexcept { return kOpcodeTable[opcode]; }

// Spot checks against IBTA table 38 and rocev2.md §1.4 (the unit test walks every entry).
static_assert(kOpcodeTable[opc::kWriteOnlyImm].length == 12 + 16 + 4);
static_assert(kOpcodeTable[opc::kAtomicAcknowledge].off(Hdr::kAtomicAckEth) == 16);
static_assert(kOpcodeTable[opc::kUdSendOnlyImm].off(Hdr::kImmDt) == 20);
static_assert(kOpcodeTable[opc::kCnp].length == 28);
static_assert(!kOpcodeTable[0x15].valid() && !kOpcodeTable[0x18].valid());

}  // namespace urnic::wire
