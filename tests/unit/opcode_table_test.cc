// The opcode table against IBTA table 38 / rocev2.md §1.4: walks all 256 entries.
#include <gtest/gtest.h>

#include <set>

#include "dataplane/wire/opcode.h"

namespace urnic::wire {
namespace {

TEST(OpcodeTable, OffsetsAndLengthsAddUp) {
  int valid = 0;
  for (int i = 0; i < 256; ++i) {
    const OpcodeInfo& o = kOpcodeTable[i];
    if (!o.valid()) {
      EXPECT_EQ(o.mask, 0u) << i;
      continue;
    }
    ++valid;
    // Headers follow the BTH in the fixed order, back to back, and end at `length`.
    uint32_t at = sizeof(Bth);
    for (size_t h = 0; h < static_cast<size_t>(Hdr::kCount); ++h) {
      if (o.mask & op::hdr_bit(static_cast<Hdr>(h))) {
        EXPECT_EQ(o.offset[h], at) << o.name;
        at += kHdrSize[h];
      } else {
        EXPECT_EQ(o.offset[h], 0) << o.name;
      }
    }
    EXPECT_EQ(o.length, at) << o.name;
    // Exactly one transport, and request xor response (CNP is neither).
    const int transports =
        !!(o.mask & op::kRc) + !!(o.mask & op::kUc) + !!(o.mask & op::kUd) + !!(o.mask & op::kCnp);
    EXPECT_EQ(transports, 1) << o.name;
    if (!(o.mask & op::kCnp)) {
      EXPECT_NE(!!(o.mask & op::kReq), !!(o.mask & op::kResp)) << o.name;
    }
    // Every message packet is first, middle, last or only.
    EXPECT_NE(o.mask & (op::kFirst | op::kMiddle | op::kLast), 0u) << o.name;
    EXPECT_FALSE(o.name.empty());
  }
  // RC: 0x00-0x14, 0x16, 0x17 (23); UC: 0x20-0x2B (12); UD: 0x64, 0x65; CNP 0x81.
  EXPECT_EQ(valid, 23 + 12 + 2 + 1);
}

TEST(OpcodeTable, KnownEntries) {
  struct Row {
    uint8_t opcode;
    uint8_t length;
    uint32_t must;
  };
  const Row rows[] = {
      {0x00, 12, op::kReq | op::kSend | op::kFirst | op::kPayload | op::kRecv},
      {0x01, 12, op::kReq | op::kSend | op::kMiddle},
      {0x03, 16, op::kSend | op::kLast | op::kImmDt | op::kComp},
      {0x04, 12, op::kSend | op::kOnly | op::kComp},
      {0x06, 28, op::kWrite | op::kFirst | op::kReth},
      {0x09, 16, op::kWrite | op::kLast | op::kImmDt | op::kRecv | op::kComp},
      {0x0A, 28, op::kWrite | op::kOnly | op::kReth},
      {0x0B, 32, op::kWrite | op::kOnly | op::kReth | op::kImmDt | op::kRecv},
      {0x0C, 28, op::kReq | op::kRead | op::kReth},
      {0x0D, 16, op::kResp | op::kRead | op::kFirst | op::kAeth | op::kPayload},
      {0x0E, 12, op::kResp | op::kRead | op::kMiddle | op::kPayload},
      {0x10, 16, op::kResp | op::kRead | op::kOnly | op::kAeth},
      {0x11, 16, op::kResp | op::kAck | op::kAeth},
      {0x12, 24, op::kResp | op::kAck | op::kAtomic | op::kAeth | op::kAtomicAckEth},
      {0x13, 40, op::kReq | op::kAtomic | op::kAtomicEth},
      {0x14, 40, op::kReq | op::kAtomic | op::kAtomicEth},
      {0x16, 16, op::kSend | op::kLast | op::kIeth},
      {0x17, 16, op::kSend | op::kOnly | op::kIeth},
      {0x24, 12, op::kUc | op::kSend | op::kOnly},
      {0x2B, 32, op::kUc | op::kWrite | op::kReth | op::kImmDt},
      {0x64, 20, op::kUd | op::kSend | op::kDeth},
      {0x65, 24, op::kUd | op::kSend | op::kDeth | op::kImmDt},
      {0x81, 28, op::kCnp | op::kCnpPad},
  };
  for (const auto& r : rows) {
    const OpcodeInfo& o = kOpcodeTable[r.opcode];
    EXPECT_TRUE(o.valid()) << int(r.opcode);
    EXPECT_EQ(o.length, r.length) << o.name;
    EXPECT_TRUE(o.has(r.must)) << o.name;
  }
  // No payload on READ requests, ACKs and atomics; payload on every SEND/WRITE/READ response.
  for (uint8_t opcode : {0x0C, 0x11, 0x12, 0x13, 0x14, 0x81})
    EXPECT_FALSE(kOpcodeTable[opcode].mask & op::kPayload) << int(opcode);
  for (uint8_t opcode = 0; opcode <= 0x10; ++opcode)
    if (opcode != 0x0C) {
      EXPECT_TRUE(kOpcodeTable[opcode].mask & op::kPayload) << int(opcode);
    }
  // Middle packets never carry RETH/ImmDt/IETH (rocev2.md §6.2).
  for (uint8_t opcode : {0x01, 0x07, 0x0E, 0x21, 0x27})
    EXPECT_EQ(kOpcodeTable[opcode].length, sizeof(Bth)) << int(opcode);
}

TEST(OpcodeTable, NamesAreUnique) {
  std::set<std::string_view> names;
  int valid = 0;
  for (const auto& o : kOpcodeTable)
    if (o.valid()) {
      ++valid;
      names.insert(o.name);
    }
  EXPECT_EQ(static_cast<int>(names.size()), valid);
}

}  // namespace
}  // namespace urnic::wire
