// What librdmacm / the kernel's rdma_cm add on top of the IB CM (rocev2.md §4.4; Linux
// drivers/infiniband/core/cma.c): the service ID that carries the port, and the IP CM private
// data header (IBTA Annex A11 "RDMA IP CM Service") at the start of every REQ's private data.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <type_traits>

#include "control/cm/mad.h"

namespace urnic::ctl::cm {

// rdma_cm port spaces (enum rdma_ucm_port_space): the middle byte is the IP protocol.
inline constexpr uint16_t kPsTcp = 0x0106;
inline constexpr uint16_t kPsUdp = 0x0111;
inline constexpr uint16_t kPsIb = 0x013F;

// cma_get_service_id(): (port space << 16) + port, i.e. Annex A11's 40-bit prefix 0x0000000001,
// 8-bit IP protocol and 16-bit destination port. Port 18515 -> 0x0000000001064853.
constexpr uint64_t service_id_for(uint16_t port, uint16_t port_space = kPsTcp) noexcept {
  return (static_cast<uint64_t>(port_space) << 16) | port;
}
// Whether `sid` is an RDMA IP CM service ID (prefix 0x0000000001, Annex A11.2.1).
constexpr bool is_ip_service(uint64_t sid) noexcept { return (sid >> 24) == 1; }
constexpr uint8_t ip_protocol_of(uint64_t sid) noexcept { return static_cast<uint8_t>(sid >> 16); }
constexpr uint16_t port_of(uint64_t sid) noexcept { return static_cast<uint16_t>(sid); }
static_assert(service_id_for(18515) == 0x0000000001064853ull);

// struct cma_hdr (36 bytes): version, IP version in the high nibble, the *source* port, and the
// source and destination addresses. IPv4 addresses sit in the last 4 bytes of their 16-byte
// field with 12 zero bytes before them (not ::ffff:-mapped).
struct CmaHdrWire {
  uint8_t cma_version;
  Be8 ip_version;  // IPVer(4) | resv(4)
  Be16 port;
  std::array<uint8_t, 16> src;
  std::array<uint8_t, 16> dst;

  using IpVersion = BitField<&CmaHdrWire::ip_version, 0xf, 4>;
};
static_assert(sizeof(CmaHdrWire) == 36 && std::is_trivially_copyable_v<CmaHdrWire>);

inline constexpr uint8_t kCmaVersion = 0x00;  // CMA_VERSION: IP CM major.minor 0.0
inline constexpr size_t kCmaHdrSize = sizeof(CmaHdrWire);
// The application's share of a REQ's private data (92 - 36 = 56 bytes; rdma_cm's
// IB_CM_REQ_PRIVATE_DATA_SIZE - sizeof(struct cma_hdr)).
inline constexpr size_t kMaxReqUserData = kReqPrivateData - kCmaHdrSize;

// The application's share of a SIDR_REQ's private data (216 - 36 = 180 bytes): rdma_cm puts the
// same IP CM header at its start (cma_resolve_ib_udp).
inline constexpr size_t kMaxSidrReqUserData = kSidrReqPrivateData - kCmaHdrSize;
// rdma_cm's Q_Key for its UDP and IB port spaces (RDMA_UDP_QKEY), what rdma_accept() answers a
// SIDR_REQ with when the consumer names none.
inline constexpr uint32_t kRdmaUdpQkey = 0x01234567;
// IP protocol numbers in the service ID (port spaces kPsTcp and kPsUdp).
inline constexpr uint8_t kIpProtoTcp = 0x06;
inline constexpr uint8_t kIpProtoUdp = 0x11;

// Host form. Addresses are GIDs: IPv4 ones IPv4-mapped (::ffff:a.b.c.d), as everywhere else.
struct CmaHdr {
  uint8_t version = kCmaVersion;
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t src_port = 0;
  Gid src{};
  Gid dst{};
  friend bool operator==(const CmaHdr&, const CmaHdr&) = default;
};

// urnic's selective repeat (dataplane/reorder.h) is negotiated in the last 8 bytes of the REQ's
// and the REP's private data: an active side that wants it ends its REQ with this mark (only
// when the caller's data leaves the bytes free), a passive side that agrees ends its REP with it.
// A standard CM passes the bytes to its consumer as private data and never answers with them,
// so towards rdma_cm peers both QPs keep go-back-N. The receiver zeroes the mark before the
// consumer sees the private data.
inline constexpr std::array<uint8_t, 8> kSrMark = {'u', 'r', 'n', 'i', 'c', 'S', 'R', '1'};
inline constexpr size_t kMaxReqUserDataWithSr = kMaxReqUserData - kSrMark.size();
// Writes the mark into the last bytes of `pdata`.
void put_sr_mark(std::span<uint8_t> pdata) noexcept;
// Whether `pdata` ends with the mark; if so it is zeroed.
bool take_sr_mark(std::span<uint8_t> pdata) noexcept;

void encode(const CmaHdr& h, std::span<uint8_t, kCmaHdrSize> out) noexcept;
// False if the version is not 0.0 or the IP version is neither 4 nor 6 (rdma_cm rejects those).
bool decode(std::span<const uint8_t, kCmaHdrSize> in, CmaHdr* out) noexcept;

}  // namespace urnic::ctl::cm
