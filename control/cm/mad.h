// IB Communication Management messages as Linux's ib_cm and librdmacm put them on the wire
// (IBTA Vol. 1 §12.6-12.7, §12.11 and §13.4; rocev2.md §4.3): the 24-byte MAD common header and
// the REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ and SIDR_REP bodies, each as a packed wire
// struct with big-endian fields and BitField accessors (house style rules 8 and 9), plus a plain
// host-side struct that the connection manager works with. encode() and decode() convert between
// the two.
//
// Bit fields inside a byte or word start at its most significant bit, as the IBTA tables (and
// Linux's include/rdma/ibta_vol1_c12.h CM_FIELD*_LOC macros) number them. Offsets in the comments
// are relative to the start of the CM message, i.e. byte 24 of the MAD.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <type_traits>
#include <variant>

#include "dataplane/wire/endian.h"
#include "dataplane/wire/headers.h"

namespace urnic::ctl::cm {

using wire::Be16;
using wire::Be32;
using wire::Be64;
using wire::Be8;
using wire::BitField;
using Gid = wire::Ipv6Addr;

// A MAD is always 256 bytes (IBTA §13.4.2).
inline constexpr size_t kMadSize = 256;
inline constexpr size_t kMadHdrSize = 24;
inline constexpr size_t kCmMsgSize = kMadSize - kMadHdrSize;  // 232

inline constexpr uint8_t kBaseVersion = 1;
inline constexpr uint8_t kMgmtClassCm = 0x07;  // Communication Management, IBTA table 150
inline constexpr uint8_t kCmClassVersion = 2;  // IB_CM_CLASS_VERSION
inline constexpr uint8_t kMethodSend = 0x03;   // the CM uses only Send (IBTA §12.6.1)

// Attribute IDs of the CM class (IBTA table 191; Linux cm_msgs.h).
enum class AttrId : uint16_t {
  kClassPortInfo = 0x0001,
  kReq = 0x0010,
  kMra = 0x0011,
  kRej = 0x0012,
  kRep = 0x0013,
  kRtu = 0x0014,
  kDreq = 0x0015,
  kDrep = 0x0016,
  kSidrReq = 0x0017,
  kSidrRep = 0x0018,
  kLap = 0x0019,
  kApr = 0x001A,
};
const char* to_string(AttrId a) noexcept;

// REJ reasons (IBTA table 195; Linux enum ib_cm_rej_reason).
enum class RejReason : uint16_t {
  kNoQp = 1,
  kNoEec = 2,
  kNoResources = 3,
  kTimeout = 4,
  kUnsupported = 5,
  kInvalidCommId = 6,
  kInvalidCommInstance = 7,
  kInvalidServiceId = 8,
  kInvalidTransportType = 9,
  kStaleConn = 10,
  kRdcNotExist = 11,
  kInvalidGid = 12,
  kInvalidLid = 13,
  kInvalidSl = 14,
  kInvalidTrafficClass = 15,
  kInvalidHopLimit = 16,
  kInvalidPacketRate = 17,
  kInvalidAltGid = 18,
  kInvalidAltLid = 19,
  kInvalidAltSl = 20,
  kInvalidAltTrafficClass = 21,
  kInvalidAltHopLimit = 22,
  kInvalidAltPacketRate = 23,
  kPortCmRedirect = 24,
  kPortRedirect = 25,
  kInvalidMtu = 26,
  kInsufficientRespResources = 27,
  kConsumerDefined = 28,
  kInvalidRnrRetry = 29,
  kDuplicateLocalCommId = 30,
  kInvalidClassVersion = 31,
  kInvalidFlowLabel = 32,
  kInvalidAltFlowLabel = 33,
  kVendorOptionNotSupported = 35,
};
const char* to_string(RejReason r) noexcept;

// SIDR_REP status (IBTA §12.11.2; Linux enum ib_cm_sidr_status).
enum class SidrStatus : uint8_t {
  kValid = 0,                  // the QPN and Q_Key are valid
  kServiceIdNotSupported = 1,  // nobody serves the service ID
  kRejected = 2,               // the service provider rejected the request
  kNoQp = 3,
  kRedirect = 4,  // ClassPortInfo in the additional information
  kUnsupportedVersion = 5,
};

// Which message a REJ or an MRA answers (the 2-bit "Message REJected" / "Message MRAed").
enum class MsgResponse : uint8_t { kReq = 0, kRep = 1, kOther = 2 };

// IB path MTU codes (enum ibv_mtu): 1 = 256 ... 5 = 4096; 0 for anything else.
constexpr uint8_t mtu_code(uint32_t bytes) noexcept {
  switch (bytes) {
    case 256:
      return 1;
    case 512:
      return 2;
    case 1024:
      return 3;
    case 2048:
      return 4;
    case 4096:
      return 5;
    default:
      return 0;
  }
}
constexpr uint32_t mtu_bytes(uint8_t code) noexcept {
  return code >= 1 && code <= 5 ? 128u << code : 0;
}

// CM timeouts are 5-bit exponents: 4.096 us * 2^t (IBTA §12.7.4). In nanoseconds.
constexpr uint64_t cm_timeout_ns(uint8_t t) noexcept { return 4096ull << (t & 31); }

// ---- Wire structs -------------------------------------------------------------------------------

// MAD common header, IBTA §13.4.2 (24 bytes).
struct MadHdr {
  uint8_t base_version;
  uint8_t mgmt_class;
  uint8_t class_version;
  Be8 method;  // R (response bit) | Method(7)
  Be16 status;
  Be16 class_specific;
  Be64 tid;
  Be16 attr_id;
  Be16 resv;
  Be32 attr_mod;

  using Response = BitField<&MadHdr::method, 0x1, 7>;
  using Method = BitField<&MadHdr::method, 0x7f, 0>;
};
static_assert(sizeof(MadHdr) == kMadHdrSize);

// One path of a REQ (primary at 52, alternate at 96; 44 bytes), IBTA table 187.
struct PathWire {
  Be16 local_lid;
  Be16 remote_lid;
  Gid local_gid;
  Gid remote_gid;
  Be32 w36;  // FlowLabel(20) | resv(6) | PacketRate(6)
  using FlowLabel = BitField<&PathWire::w36, 0xfffff, 12>;
  using PacketRate = BitField<&PathWire::w36, 0x3f, 0>;
  uint8_t traffic_class;
  uint8_t hop_limit;
  Be8 b42;  // SL(4) | SubnetLocal(1) | resv(3)
  using Sl = BitField<&PathWire::b42, 0xf, 4>;
  using SubnetLocal = BitField<&PathWire::b42, 0x1, 3>;
  Be8 b43;  // LocalAckTimeout(5) | resv(3)
  using LocalAckTimeout = BitField<&PathWire::b43, 0x1f, 3>;
};
static_assert(sizeof(PathWire) == 44);

// ConnectRequest, IBTA table 187.
struct ReqWire {
  Be32 local_comm_id;  // 0
  Be32 resv4;          // 4 (vendor ID of newer kernels' ECE; ignored)
  Be64 service_id;     // 8
  Be64 local_ca_guid;  // 16
  Be32 resv24;         // 24
  Be32 local_qkey;     // 28
  Be32 w32;            // LocalQPN(24) | ResponderResources(8)
  Be32 w36;            // LocalEECN(24) | InitiatorDepth(8)
  Be32 w40;   // RemoteEECN(24) | RemoteCMResponseTimeout(5) | TransportServiceType(2) | E2EFC(1)
  Be32 w44;   // StartingPSN(24) | LocalCMResponseTimeout(5) | RetryCount(3)
  Be16 pkey;  // 48
  Be8 b50;    // PathMTU(4) | RDCExists(1) | RNRRetryCount(3)
  Be8 b51;    // MaxCMRetries(4) | SRQ(1) | ExtendedTransportType(3)
  PathWire primary;                      // 52
  PathWire alternate;                    // 96
  std::array<uint8_t, 92> private_data;  // 140

  using LocalQpn = BitField<&ReqWire::w32, 0xffffff, 8>;
  using ResponderResources = BitField<&ReqWire::w32, 0xff, 0>;
  using LocalEecn = BitField<&ReqWire::w36, 0xffffff, 8>;
  using InitiatorDepth = BitField<&ReqWire::w36, 0xff, 0>;
  using RemoteEecn = BitField<&ReqWire::w40, 0xffffff, 8>;
  using RemoteCmResponseTimeout = BitField<&ReqWire::w40, 0x1f, 3>;
  using TransportServiceType = BitField<&ReqWire::w40, 0x3, 1>;
  using E2eFlowControl = BitField<&ReqWire::w40, 0x1, 0>;
  using StartingPsn = BitField<&ReqWire::w44, 0xffffff, 8>;
  using LocalCmResponseTimeout = BitField<&ReqWire::w44, 0x1f, 3>;
  using RetryCount = BitField<&ReqWire::w44, 0x7, 0>;
  using PathMtu = BitField<&ReqWire::b50, 0xf, 4>;
  using RdcExists = BitField<&ReqWire::b50, 0x1, 3>;
  using RnrRetryCount = BitField<&ReqWire::b50, 0x7, 0>;
  using MaxCmRetries = BitField<&ReqWire::b51, 0xf, 4>;
  using Srq = BitField<&ReqWire::b51, 0x1, 3>;
  using ExtendedTransportType = BitField<&ReqWire::b51, 0x7, 0>;
};

// MessageReceiptAcknowledgement, IBTA table 189.
struct MraWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  Be8 b8;                                 // MessageMRAed(2) | resv(6)
  Be8 b9;                                 // ServiceTimeout(5) | resv(3)
  std::array<uint8_t, 222> private_data;  // 10

  using MessageMraed = BitField<&MraWire::b8, 0x3, 6>;
  using ServiceTimeout = BitField<&MraWire::b9, 0x1f, 3>;
};

// ConnectReject, IBTA table 194.
struct RejWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  Be8 b8;  // MessageRejected(2) | resv(6)
  using MessageRejected = BitField<&RejWire::b8, 0x3, 6>;
  Be8 b9;  // RejectInfoLength(7) | resv(1)
  using RejectInfoLength = BitField<&RejWire::b9, 0x7f, 1>;
  Be16 reason;
  std::array<uint8_t, 72> ari;            // 12: additional reject information
  std::array<uint8_t, 148> private_data;  // 84
};

// ConnectReply, IBTA table 196.
struct RepWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  Be32 local_qkey;
  Be32 w12;                               // LocalQPN(24) | resv(8)
  Be32 w16;                               // LocalEECN(24) | resv(8)
  Be32 w20;                               // StartingPSN(24) | resv(8)
  uint8_t responder_resources;            // 24
  uint8_t initiator_depth;                // 25
  Be8 b26;                                // TargetACKDelay(5) | FailoverAccepted(2) | E2EFC(1)
  Be8 b27;                                // RNRRetryCount(3) | SRQ(1) | resv(4)
  Be64 local_ca_guid;                     // 28
  std::array<uint8_t, 196> private_data;  // 36

  using LocalQpn = BitField<&RepWire::w12, 0xffffff, 8>;
  using LocalEecn = BitField<&RepWire::w16, 0xffffff, 8>;
  using StartingPsn = BitField<&RepWire::w20, 0xffffff, 8>;
  using TargetAckDelay = BitField<&RepWire::b26, 0x1f, 3>;
  using FailoverAccepted = BitField<&RepWire::b26, 0x3, 1>;
  using E2eFlowControl = BitField<&RepWire::b26, 0x1, 0>;
  using RnrRetryCount = BitField<&RepWire::b27, 0x7, 5>;
  using Srq = BitField<&RepWire::b27, 0x1, 4>;
};

// ReadyToUse, IBTA table 198.
struct RtuWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  std::array<uint8_t, 224> private_data;
};

// DisconnectRequest, IBTA table 200.
struct DreqWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  Be32 w8;  // RemoteQPN/EECN(24) | resv(8)
  std::array<uint8_t, 220> private_data;

  using RemoteQpn = BitField<&DreqWire::w8, 0xffffff, 8>;
};

// DisconnectReply, IBTA table 201.
struct DrepWire {
  Be32 local_comm_id;
  Be32 remote_comm_id;
  std::array<uint8_t, 224> private_data;
};

// ServiceIDResolutionRequest, IBTA §12.11.1 (Linux cm_msgs.h struct cm_sidr_req_msg). rdma_cm
// puts its IP CM header at the start of the private data, as in a REQ.
struct SidrReqWire {
  Be32 request_id;                        // 0
  Be16 pkey;                              // 4
  Be16 resv6;                             // 6 (vendor ID of newer kernels' ECE; ignored)
  Be64 service_id;                        // 8
  std::array<uint8_t, 216> private_data;  // 16
};

// ServiceIDResolutionResponse, IBTA §12.11.2 (Linux struct cm_sidr_rep_msg).
struct SidrRepWire {
  Be32 request_id;                        // 0: the SIDR_REQ's
  uint8_t status;                         // 4: SidrStatus
  uint8_t info_length;                    // 5: additional information length
  Be16 resv6;                             // 6 (ECE vendor ID; ignored)
  Be32 w8;                                // QPN(24) | resv(8)
  Be64 service_id;                        // 12
  Be32 qkey;                              // 20
  std::array<uint8_t, 72> info;           // 24: ClassPortInfo of a redirect
  std::array<uint8_t, 136> private_data;  // 96

  using Qpn = BitField<&SidrRepWire::w8, 0xffffff, 8>;
};

static_assert(offsetof(ReqWire, primary) == 52 && offsetof(ReqWire, alternate) == 96);
static_assert(offsetof(ReqWire, private_data) == 140 && sizeof(ReqWire) == kCmMsgSize);
static_assert(offsetof(MraWire, private_data) == 10 && sizeof(MraWire) == kCmMsgSize);
static_assert(offsetof(RejWire, ari) == 12 && offsetof(RejWire, private_data) == 84);
static_assert(sizeof(RejWire) == kCmMsgSize);
static_assert(offsetof(RepWire, local_ca_guid) == 28 && offsetof(RepWire, private_data) == 36);
static_assert(sizeof(RepWire) == kCmMsgSize);
static_assert(sizeof(RtuWire) == kCmMsgSize && sizeof(DrepWire) == kCmMsgSize);
static_assert(offsetof(DreqWire, private_data) == 12 && sizeof(DreqWire) == kCmMsgSize);
static_assert(offsetof(SidrReqWire, service_id) == 8 && offsetof(SidrReqWire, private_data) == 16);
static_assert(sizeof(SidrReqWire) == kCmMsgSize && alignof(SidrReqWire) == 1);
static_assert(offsetof(SidrRepWire, w8) == 8 && offsetof(SidrRepWire, service_id) == 12);
static_assert(offsetof(SidrRepWire, qkey) == 20 && offsetof(SidrRepWire, info) == 24);
static_assert(offsetof(SidrRepWire, private_data) == 96 && sizeof(SidrRepWire) == kCmMsgSize);
static_assert(std::is_trivially_copyable_v<SidrRepWire> && alignof(SidrRepWire) == 1);
static_assert(std::is_trivially_copyable_v<ReqWire> && alignof(ReqWire) == 1);
static_assert(std::is_trivially_copyable_v<RepWire> && alignof(RepWire) == 1);

// ---- Host-side messages -------------------------------------------------------------------------

// Private data field sizes (IBTA §12.6; Linux IB_CM_*_PRIVATE_DATA_SIZE).
inline constexpr size_t kReqPrivateData = 92;
inline constexpr size_t kMraPrivateData = 222;
inline constexpr size_t kRejPrivateData = 148;
inline constexpr size_t kRepPrivateData = 196;
inline constexpr size_t kRtuPrivateData = 224;
inline constexpr size_t kDreqPrivateData = 220;
inline constexpr size_t kDrepPrivateData = 224;
inline constexpr size_t kRejAriLength = 72;
inline constexpr size_t kSidrReqPrivateData = 216;
inline constexpr size_t kSidrRepPrivateData = 136;
inline constexpr size_t kSidrRepInfoLength = 72;

// End-to-End Flow Control bit of our REQ and REP (IBTA tables 187 and 196): 1 says the CA
// implements end-to-end credits (§9.7.7.2), 0 that it always advertises "invalid credits". Our
// ACKs carry AETH credit code 31, no credit information (wire::aeth::kAckNoCredit), so 0: what
// the Linux rdma_cm peers in the rxe captures send too (rdma_cm copies conn_param.flow_control,
// which rping, ucmatose and perftest leave 0). A peer's bit is decoded and otherwise ignored: we
// never throttle on credits.
inline constexpr bool kE2eFlowControl = false;

// LID 0xFFFF: the permissive LID, what Linux puts in a REQ on routed RoCE (hop limit > 1).
inline constexpr uint16_t kPermissiveLid = 0xFFFF;

struct Path {
  uint16_t local_lid = kPermissiveLid;
  uint16_t remote_lid = kPermissiveLid;
  Gid local_gid{};
  Gid remote_gid{};
  uint32_t flow_label = 0;
  uint8_t packet_rate = 0;
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint8_t sl = 0;
  bool subnet_local = false;
  uint8_t local_ack_timeout = 0;
  friend bool operator==(const Path&, const Path&) = default;
};

struct Req {
  uint32_t local_comm_id = 0;
  uint64_t service_id = 0;
  uint64_t local_ca_guid = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;
  uint8_t responder_resources = 0;
  uint32_t local_eecn = 0;
  uint8_t initiator_depth = 0;
  uint32_t remote_eecn = 0;
  uint8_t remote_cm_response_timeout = 0;
  uint8_t transport_service_type = 0;  // 0 RC, 1 UC, 3 XRC (with extended type)
  bool e2e_flow_control = false;
  uint32_t starting_psn = 0;
  uint8_t local_cm_response_timeout = 0;
  uint8_t retry_count = 0;
  uint16_t pkey = wire::kDefaultPkey;
  uint8_t path_mtu = 0;  // mtu_code()
  bool rdc_exists = false;
  uint8_t rnr_retry_count = 0;
  uint8_t max_cm_retries = 0;
  bool srq = false;
  uint8_t extended_transport_type = 0;
  Path primary;
  Path alternate{0, 0};
  std::array<uint8_t, kReqPrivateData> private_data{};
  friend bool operator==(const Req&, const Req&) = default;
};

struct Mra {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  MsgResponse message_mraed = MsgResponse::kReq;
  uint8_t service_timeout = 0;
  std::array<uint8_t, kMraPrivateData> private_data{};
  friend bool operator==(const Mra&, const Mra&) = default;
};

struct Rej {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  MsgResponse message_rejected = MsgResponse::kReq;
  uint8_t ari_length = 0;
  RejReason reason = RejReason::kConsumerDefined;
  std::array<uint8_t, kRejAriLength> ari{};
  std::array<uint8_t, kRejPrivateData> private_data{};
  friend bool operator==(const Rej&, const Rej&) = default;
};

struct Rep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t local_qkey = 0;
  uint32_t local_qpn = 0;
  uint32_t local_eecn = 0;
  uint32_t starting_psn = 0;
  uint8_t responder_resources = 0;
  uint8_t initiator_depth = 0;
  uint8_t target_ack_delay = 0;
  uint8_t failover_accepted = 0;
  bool e2e_flow_control = false;
  uint8_t rnr_retry_count = 0;
  bool srq = false;
  uint64_t local_ca_guid = 0;
  std::array<uint8_t, kRepPrivateData> private_data{};
  friend bool operator==(const Rep&, const Rep&) = default;
};

struct Rtu {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kRtuPrivateData> private_data{};
  friend bool operator==(const Rtu&, const Rtu&) = default;
};

struct Dreq {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  uint32_t remote_qpn = 0;
  std::array<uint8_t, kDreqPrivateData> private_data{};
  friend bool operator==(const Dreq&, const Dreq&) = default;
};

struct Drep {
  uint32_t local_comm_id = 0;
  uint32_t remote_comm_id = 0;
  std::array<uint8_t, kDrepPrivateData> private_data{};
  friend bool operator==(const Drep&, const Drep&) = default;
};

struct SidrReq {
  uint32_t request_id = 0;
  uint16_t pkey = wire::kDefaultPkey;
  uint64_t service_id = 0;
  std::array<uint8_t, kSidrReqPrivateData> private_data{};
  friend bool operator==(const SidrReq&, const SidrReq&) = default;
};

struct SidrRep {
  uint32_t request_id = 0;
  SidrStatus status = SidrStatus::kValid;
  uint8_t info_length = 0;
  uint32_t qpn = 0;
  uint64_t service_id = 0;
  uint32_t qkey = 0;
  std::array<uint8_t, kSidrRepInfoLength> info{};
  std::array<uint8_t, kSidrRepPrivateData> private_data{};
  friend bool operator==(const SidrRep&, const SidrRep&) = default;
};

// One CM MAD: the transaction ID, the attribute modifier and one message body (the attribute ID
// follows from the body's type).
struct Message {
  uint64_t tid = 0;
  uint32_t attr_mod = 0;
  std::variant<Req, Mra, Rej, Rep, Rtu, Dreq, Drep, SidrReq, SidrRep> body;
  friend bool operator==(const Message&, const Message&) = default;
};
AttrId attr_id(const Message& m) noexcept;

// Why a received MAD was not decoded (each has a counter in the connection manager).
enum class MadError : uint8_t {
  kOk,
  kTooShort,         // fewer than 256 bytes
  kBaseVersion,      // not 1
  kNotCm,            // management class other than 0x07
  kClassVersion,     // CM class version other than 2 (Linux answers REJ 31; we drop)
  kMethod,           // not Send
  kUnsupportedAttr,  // ClassPortInfo, LAP, APR or unknown
  kCount,
};
const char* to_string(MadError e) noexcept;

// Writes `m` as a 256-byte MAD (header + body; reserved bytes zero).
void encode(const Message& m, std::span<uint8_t, kMadSize> out) noexcept;
std::array<uint8_t, kMadSize> encode(const Message& m) noexcept;
// Parses a received MAD. Wire input: never asserts; any problem is a MadError.
MadError decode(std::span<const uint8_t> mad, Message* out) noexcept;

}  // namespace urnic::ctl::cm
