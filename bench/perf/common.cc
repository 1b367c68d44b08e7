// The connection record perftest exchanges and the verification patterns.
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "bench/perf/perf.h"

namespace urnic::perf {

std::array<char, kRecordSize> format_record(const Dest& d) {
  // KEY_PRINT_FMT_GID: "%04x:%04x:%06x:%06x:%08x:%016Lx:" + 16 x "%02x:" + "%08x:" = 107
  // characters and the NUL; perftest writes the whole 108-byte buffer.
  std::array<char, kRecordSize> r{};
  int n = std::snprintf(r.data(), r.size(), "%04x:%04x:%06x:%06x:%08x:%016" PRIx64 ":", d.lid,
                        d.out_reads, d.qpn, d.psn, d.rkey, d.vaddr);
  for (uint8_t b : d.gid) n += std::snprintf(r.data() + n, r.size() - n, "%02x:", b);
  std::snprintf(r.data() + n, r.size() - n, "%08x:", d.srqn);
  return r;
}

bool parse_record(const char* rec, size_t n, Dest* d) {
  if (n < kRecordSize - 1) return false;
  char buf[kRecordSize + 1] = {};
  std::memcpy(buf, rec, kRecordSize - 1);
  unsigned lid = 0, out = 0, qpn = 0, psn = 0, rkey = 0, srqn = 0;
  unsigned long long va = 0;
  int used = 0;
  if (std::sscanf(buf, "%x:%x:%x:%x:%x:%llx:%n", &lid, &out, &qpn, &psn, &rkey, &va, &used) != 6 ||
      used != 50)
    return false;
  const char* p = buf + used;
  for (int i = 0; i < 16; ++i, p += 3) {
    unsigned b = 0;
    if (std::sscanf(p, "%2x:", &b) != 1 || p[2] != ':') return false;
    d->gid[i] = static_cast<uint8_t>(b);
  }
  if (std::sscanf(p, "%8x:", &srqn) != 1) return false;
  d->lid = lid;
  d->out_reads = out;
  d->qpn = qpn & 0xFFFFFF;
  d->psn = psn & 0xFFFFFF;
  d->rkey = rkey;
  d->vaddr = va;
  d->srqn = srqn;
  return true;
}

namespace {

constexpr uint64_t mix(uint64_t x) noexcept {
  // splitmix64 finaliser: every 8-byte word of a stream is a distinct hash of its index.
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint8_t byte_at(uint64_t seed, uint64_t off) noexcept {
  return static_cast<uint8_t>(mix(seed ^ (off >> 3) * 0xD6E8FEB86659FD93ull) >> (8 * (off & 7)));
}

}  // namespace

void fill_pattern(uint8_t* p, uint64_t n, uint64_t seed, uint64_t off0) noexcept {
  uint64_t i = 0;
  for (; i < n && ((off0 + i) & 7) != 0; ++i) p[i] = byte_at(seed, off0 + i);
  for (; i + 8 <= n; i += 8) {
    const uint64_t w = mix(seed ^ ((off0 + i) >> 3) * 0xD6E8FEB86659FD93ull);
    std::memcpy(p + i, &w, 8);  // little-endian: byte k of the word is byte_at(.., off + k)
  }
  for (; i < n; ++i) p[i] = byte_at(seed, off0 + i);
}

uint64_t check_pattern(const uint8_t* p, uint64_t n, uint64_t seed, uint64_t off0) noexcept {
  for (uint64_t i = 0; i < n; ++i)
    if (p[i] != byte_at(seed, off0 + i)) return i;
  return n;
}

uint64_t region_seed(uint32_t psn) noexcept { return mix(0x7265676E00000000ull | psn); }
uint64_t bulk_seed(uint32_t psn) noexcept { return mix(0x62756C6B00000000ull | psn); }
uint64_t last_seed(uint32_t psn, uint64_t size) noexcept {
  return mix(mix(0x6C61737400000000ull | psn) ^ size);
}

}  // namespace urnic::perf
