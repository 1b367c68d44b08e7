// urnicd's configuration file and command-line overrides (config.h).
#include "daemon/config.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <fstream>

namespace urnic::daemon {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() > 31) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
  });
}

// A decimal (or, with `base` 8, octal) number in [lo, hi].
bool number(std::string_view v, uint64_t lo, uint64_t hi, uint32_t* out, int base = 10) {
  uint64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x, base);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty() || x < lo || x > hi) return false;
  *out = static_cast<uint32_t>(x);
  return true;
}

bool fail(std::string* err, std::string why) {
  *err = std::move(why);
  return false;
}

bool range_error(std::string* err, std::string_view key, std::string_view v, const char* range) {
  return fail(err, std::string(key) + " = '" + std::string(v) + "': want " + range);
}

bool apply_quota(Config* c, std::string_view k, std::string_view v, std::string* err) {
  uint32_t* field = k == "quota_pds"         ? &c->quota_pds
                    : k == "quota_cqs"       ? &c->quota_cqs
                    : k == "quota_qps"       ? &c->quota_qps
                    : k == "quota_mrs"       ? &c->quota_mrs
                    : k == "quota_shared_mb" ? &c->quota_shared_mb
                                             : nullptr;
  if (field == nullptr) return fail(err, "unknown key '" + std::string(k) + "' in [daemon]");
  if (!number(v, 0, 1u << 24, field)) return range_error(err, k, v, "0 .. 16777216");
  return true;
}

bool apply_daemon(Config* c, std::string_view k, std::string_view v, std::string* err) {
  const std::string val(v);
  if (k == "socket") {
    if (v.empty() || v.size() > 107) return range_error(err, k, v, "a path of 1 .. 107 bytes");
    c->socket = val;
  } else if (k == "socket_mode") {
    if (!number(v, 0, 0777, &c->socket_mode, 8))
      return range_error(err, k, v, "an octal mode 0 .. 0777");
  } else if (k == "socket_group") {
    c->socket_group = val;
  } else if (k == "lock_dir") {
    if (v.empty() || v.front() != '/') return range_error(err, k, v, "an absolute path");
    c->lock_dir = val;
  } else if (k == "lcores") {
    c->lcores = val;
  } else if (k == "engines") {
    if (!number(v, 1, 8, &c->engines)) return range_error(err, k, v, "1 .. 8");
  } else if (k == "memory") {
    if (v != "auto" && v != "nohuge" && v != "huge")
      return range_error(err, k, v, "auto, nohuge or huge");
    c->memory = val;
  } else if (k == "memory_mb") {
    if (!number(v, 64, 1u << 20, &c->memory_mb)) return range_error(err, k, v, "64 .. 1048576");
  } else if (k == "log_level") {
    c->log_level = val;
  } else if (k == "file_prefix") {
    if (!valid_name(v)) return range_error(err, k, v, "1 .. 31 of [A-Za-z0-9_.-]");
    c->file_prefix = val;
  } else if (k == "device_nodes") {
    if (!v.empty() && (v[0] != '/' || v.size() > 200 || v.find("..") != std::string_view::npos))
      return range_error(err, k, v, "empty, or an absolute directory path (e.g. /dev/infiniband)");
    c->device_nodes = val;
  } else if (k == "max_clients") {
    if (!number(v, 1, 65536, &c->max_clients)) return range_error(err, k, v, "1 .. 65536");
  } else if (k.substr(0, 6) == "quota_") {
    return apply_quota(c, k, v, err);
  } else if (k == "idle_sleep_us") {
    if (!number(v, 0, 100000, &c->idle_sleep_us)) return range_error(err, k, v, "0 .. 100000");
  } else {
    return fail(err, "unknown key '" + std::string(k) + "' in [daemon]");
  }
  return true;
}

bool route_bits_zero4(const std::array<uint8_t, 16>& a) {
  return a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] == 0;
}

bool apply_address(PortConfig* p, std::string_view k, std::string_view v, std::string* err) {
  const std::string val(v);
  std::array<uint8_t, 16> a{};
  bool v4 = false;
  if (k == "ipv4") {
    if (parse_address(val, &a, &p->ipv4_len, &v4) != Status::kSuccess || !v4 || route_bits_zero4(a))
      return range_error(err, k, v, "a dotted IPv4 address other than 0.0.0.0, with /LEN optional");
    p->ipv4 = uint32_t{a[12]} << 24 | uint32_t{a[13]} << 16 | uint32_t{a[14]} << 8 | a[15];
  } else if (k == "ipv6") {
    if (parse_address(val, &a, &p->ipv6_len, &v4) != Status::kSuccess || v4)
      return range_error(err, k, v, "an IPv6 address, with /LEN optional");
    p->ipv6 = a;
  } else if (k == "route") {
    Route r;
    std::string why;
    if (parse_route(val, &r, &why) != Status::kSuccess) return fail(err, why);
    p->routes.push_back(r);
  } else {
    std::array<uint8_t, 6> m{};
    if (parse_mac(v, &m) != Status::kSuccess)
      return range_error(err, k, v, "a MAC address aa:bb:cc:dd:ee:ff");
    p->mac = m;
  }
  return true;
}

bool apply_port(PortConfig* p, std::string_view k, std::string_view v, std::string* err) {
  if (k == "devargs") {
    if (v.empty() || v.find(' ') != std::string_view::npos)
      return range_error(err, k, v, "DPDK device arguments, e.g. net_af_packet0,iface=veth0");
    p->devargs = std::string(v);
  } else if (k == "pci") {
    if (v.empty()) return range_error(err, k, v, "a PCI address, e.g. 0000:03:00.0");
    p->pci = std::string(v);
  } else if (k == "ring") {
    const size_t colon = v.rfind(':');
    if (colon == std::string_view::npos || !valid_name(v.substr(0, colon)) || colon > 14 ||
        (v.substr(colon + 1) != "a" && v.substr(colon + 1) != "b"))
      return range_error(err, k, v, "PAIR:a or PAIR:b (PAIR 1 .. 14 of [A-Za-z0-9_.-])");
    p->ring = std::string(v);
  } else if (k == "ipv4" || k == "ipv6" || k == "mac" || k == "route") {
    return apply_address(p, k, v, err);
  } else if (k == "engines") {
    if (!number(v, 1, 8, &p->engines)) return range_error(err, k, v, "1 .. 8");
  } else if (k == "mbufs") {
    if (!number(v, 1023, 1u << 22, &p->mbufs)) return range_error(err, k, v, "1023 .. 4194304");
  } else if (k == "max_qps") {
    if (!number(v, 4, 1u << 17, &p->max_qps)) return range_error(err, k, v, "4 .. 131072");
  } else {
    return fail(err, "unknown key '" + std::string(k) + "' in [port " + p->name + "]");
  }
  return true;
}

PortConfig* port_named(Config* c, std::string_view name) {
  for (auto& p : c->ports)
    if (p.name == name) return &p;
  c->ports.push_back(PortConfig{});
  c->ports.back().name = std::string(name);
  return &c->ports.back();
}

}  // namespace

bool apply(Config* c, std::string_view section, std::string_view key, std::string_view value,
           std::string* err) {
  if (section == "daemon") return apply_daemon(c, key, value, err);
  if (section.substr(0, 5) == "port ") {
    const std::string_view name = trim(section.substr(5));
    if (!valid_name(name))
      return fail(err, "[port " + std::string(name) + "]: a name is 1 .. 31 of [A-Za-z0-9_.-]");
    return apply_port(port_named(c, name), key, value, err);
  }
  return fail(err, "unknown section [" + std::string(section) + "]");
}

bool load_file(const std::string& path, Config* c, std::string* err) {
  std::ifstream f(path);
  if (!f) return fail(err, path + ": cannot be read");
  std::string line, section;
  for (int n = 1; std::getline(f, line); ++n) {
    const std::string where = path + ":" + std::to_string(n) + ": ";
    std::string_view l = trim(line);
    if (const size_t hash = l.find('#'); hash != std::string_view::npos)
      l = trim(l.substr(0, hash));
    if (l.empty()) continue;
    if (l.front() == '[') {
      if (l.back() != ']') return fail(err, where + "a section header ends with ']'");
      section = std::string(trim(l.substr(1, l.size() - 2)));
      if (section.substr(0, 5) == "port ") port_named(c, trim(std::string_view(section).substr(5)));
      continue;
    }
    const size_t eq = l.find('=');
    if (eq == std::string_view::npos) return fail(err, where + "want KEY = VALUE");
    if (section.empty()) return fail(err, where + "a key before any [section]");
    std::string why;
    if (!apply(c, section, trim(l.substr(0, eq)), trim(l.substr(eq + 1)), &why))
      return fail(err, where + why);
  }
  return true;
}

bool apply_override(Config* c, std::string_view set, std::string* err) {
  const size_t eq = set.find('=');
  const size_t dot = set.substr(0, eq).rfind('.');
  if (eq == std::string_view::npos || dot == std::string_view::npos)
    return fail(err, "--set '" + std::string(set) + "': want SECTION.KEY=VALUE");
  std::string section(set.substr(0, dot));
  if (section.substr(0, 5) == "port.") section[4] = ' ';
  return apply(c, section, set.substr(dot + 1, eq - dot - 1), set.substr(eq + 1), err);
}

bool finish(Config* c, std::string* err) {
  if (c->ports.empty()) {
    PortConfig a, b;
    a.name = "urnic0";
    a.ring = "urnic:a";
    a.ipv4 = 0xC0000201;  // 192.0.2.1 (TEST-NET-1: never leaves the process)
    b.name = "urnic1";
    b.ring = "urnic:b";
    b.ipv4 = 0xC0000202;
    c->ports = {a, b};
  }
  if (c->ports.size() > 16) return fail(err, "at most 16 ports");
  for (const auto& p : c->ports) {
    const int sources = !p.devargs.empty() + !p.pci.empty() + !p.ring.empty();
    if (sources != 1)
      return fail(err, "[port " + p.name + "]: give exactly one of devargs, pci or ring");
    if (p.engines > c->engines)
      return fail(err, "[port " + p.name + "]: engines = " + std::to_string(p.engines) +
                           " but the daemon runs " + std::to_string(c->engines));
    // An AF_XDP port beside the kernel may take the interface's own addresses (docs/daemon.md).
    if (p.ipv4 == 0 && !p.ipv6 && p.devargs.rfind("net_af_xdp", 0) != 0)
      return fail(err, "[port " + p.name +
                           "]: give ipv4 or ipv6 (only a net_af_xdp port may take its "
                           "interface's)");
    if (!p.ring.empty()) {
      const std::string pair = p.ring.substr(0, p.ring.size() - 1);
      const char other = p.ring.back() == 'a' ? 'b' : 'a';
      const bool found = std::any_of(c->ports.begin(), c->ports.end(),
                                     [&](const PortConfig& q) { return q.ring == pair + other; });
      if (!found) return fail(err, "[port " + p.name + "]: ring " + p.ring + " has no other side");
    }
    for (const auto& q : c->ports)
      if (&q != &p && !p.ring.empty() && q.ring == p.ring)
        return fail(err, "[port " + p.name + "]: ring " + p.ring + " is used twice");
  }
  return true;
}

std::string port_identity(const PortConfig& p, uint64_t netns_inode) {
  // "03:00.0" and "0000:03:00.0" name one device.
  if (!p.pci.empty())
    return "pci-" + (std::count(p.pci.begin(), p.pci.end(), ':') == 1 ? "0000:" + p.pci : p.pci);
  if (p.devargs.empty()) return {};
  // The kernel interface a vdev sits on, in its network namespace; else the vdev itself.
  std::string id;
  const size_t i = p.devargs.find("iface=");
  if (i != std::string::npos) {
    id = "iface-" + p.devargs.substr(i + 6, p.devargs.find(',', i) - (i + 6));
  } else {
    id = "vdev-" + p.devargs.substr(0, p.devargs.find(','));
  }
  for (char& ch : id)
    if (ch == '/') ch = '_';
  return "net" + std::to_string(netns_inode) + "-" + id;
}

}  // namespace urnic::daemon
