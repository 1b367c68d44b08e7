#include "control/cm/cma.h"

#include <algorithm>
#include <cstring>

namespace urnic::ctl::cm {
namespace {

// cma_ip_addr for IPv4: pad[3] = 0, then the address.
void put_addr(const Gid& g, uint8_t ip_version, std::array<uint8_t, 16>& out) noexcept {
  if (ip_version == 4) {
    out.fill(0);
    std::copy(g.begin() + 12, g.end(), out.begin() + 12);
  } else {
    out = g;
  }
}

Gid get_addr(const std::array<uint8_t, 16>& in, uint8_t ip_version) noexcept {
  Gid g = in;
  if (ip_version == 4) {
    std::fill(g.begin(), g.begin() + 10, 0);
    g[10] = g[11] = 0xFF;
  }
  return g;
}

}  // namespace

void put_sr_mark(std::span<uint8_t> pdata) noexcept {
  if (pdata.size() >= kSrMark.size())
    std::copy(kSrMark.begin(), kSrMark.end(), pdata.end() - kSrMark.size());
}

bool take_sr_mark(std::span<uint8_t> pdata) noexcept {
  if (pdata.size() < kSrMark.size()) return false;
  const auto tail = pdata.last(kSrMark.size());
  if (!std::equal(tail.begin(), tail.end(), kSrMark.begin())) return false;
  std::fill(tail.begin(), tail.end(), 0);
  return true;
}

void encode(const CmaHdr& h, std::span<uint8_t, kCmaHdrSize> out) noexcept {
  auto& w = *reinterpret_cast<CmaHdrWire*>(out.data());
  std::memset(&w, 0, sizeof(w));
  w.cma_version = h.version;
  CmaHdrWire::IpVersion::set(w, h.ip_version);
  w.port = Be16::of(h.src_port);
  put_addr(h.src, h.ip_version, w.src);
  put_addr(h.dst, h.ip_version, w.dst);
}

bool decode(std::span<const uint8_t, kCmaHdrSize> in, CmaHdr* out) noexcept {
  const auto& w = *reinterpret_cast<const CmaHdrWire*>(in.data());
  const uint8_t v = CmaHdrWire::IpVersion::get(w);
  if (w.cma_version != kCmaVersion || (v != 4 && v != 6)) return false;
  out->version = w.cma_version;
  out->ip_version = v;
  out->src_port = w.port.get();
  out->src = get_addr(w.src, v);
  out->dst = get_addr(w.dst, v);
  return true;
}

}  // namespace urnic::ctl::cm
