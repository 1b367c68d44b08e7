#include "control/xdp.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <rte_ethdev.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "urnic/config.h"

namespace urnic {
namespace {

// An fd closed with its scope.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool readable(const char* p) { return p != nullptr && *p != '\0' && ::access(p, R_OK) == 0; }

// The ifindex behind an ethdev port when its driver is net_af_xdp; 0 otherwise.
int af_xdp_ifindex(uint16_t port_id) {
  rte_eth_dev_info info{};
  if (!rte_eth_dev_is_valid_port(port_id) || rte_eth_dev_info_get(port_id, &info) != 0) return 0;
  if (info.driver_name == nullptr || std::strcmp(info.driver_name, "net_af_xdp") != 0) return 0;
  return static_cast<int>(info.if_index);
}

// An fd for the map called `name` of the XDP program attached to `ifindex`: -1 when the
// interface runs no program or one without such a map (not urnic's), with errno.
int program_map(int ifindex, const char* name) {
  uint32_t prog_id = 0;
  if (bpf_xdp_query_id(ifindex, 0, &prog_id) != 0 || prog_id == 0) {
    errno = ENOENT;
    return -1;
  }
  Fd prog(bpf_prog_get_fd_by_id(prog_id));
  if (prog.fd < 0) return -1;
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(prog.fd, &info, &len) != 0) return -1;
  std::vector<uint32_t> ids(info.nr_map_ids);
  info = bpf_prog_info{};
  info.nr_map_ids = static_cast<uint32_t>(ids.size());
  info.map_ids = reinterpret_cast<uintptr_t>(ids.data());
  len = sizeof info;
  if (bpf_obj_get_info_by_fd(prog.fd, &info, &len) != 0) return -1;
  for (uint32_t i = 0; i < info.nr_map_ids && i < ids.size(); ++i) {
    const int fd = bpf_map_get_fd_by_id(ids[i]);
    if (fd < 0) continue;
    bpf_map_info m{};
    uint32_t mlen = sizeof m;
    if (bpf_obj_get_info_by_fd(fd, &m, &mlen) == 0 && std::strcmp(m.name, name) == 0) return fd;
    ::close(fd);
  }
  errno = ENOENT;
  return -1;
}

// The name of the XDP program attached to `ifindex`, empty when none is (or it cannot be read).
std::string attached_program(int ifindex, uint32_t* prog_id) {
  *prog_id = 0;
  if (bpf_xdp_query_id(ifindex, 0, prog_id) != 0 || *prog_id == 0) return {};
  Fd prog(bpf_prog_get_fd_by_id(*prog_id));
  if (prog.fd < 0) return {};
  bpf_prog_info info{};
  uint32_t len = sizeof info;
  if (bpf_obj_get_info_by_fd(prog.fd, &info, &len) != 0) return {};
  return info.name;
}

// The lock file of (network namespace, interface): interface names and indexes are per
// namespace, so the namespace's inode is part of the name.
std::string claim_path(int ifindex) {
  struct stat ns {};
  const unsigned long long ino = ::stat("/proc/self/ns/net", &ns) == 0 ? ns.st_ino : 0;
  const char* dir = ::access("/run", W_OK) == 0 ? "/run/urnic" : "/tmp/urnic";
  (void)::mkdir(dir, 0755);
  return std::string(dir) + "/xdp-" + std::to_string(ino) + "-" + std::to_string(ifindex) + ".lock";
}

}  // namespace

int xdp_port_ifindex(uint16_t port_id) { return af_xdp_ifindex(port_id); }

Status xdp_claim_interface(const std::string& ifname, bool* removed, std::string* why) {
  *removed = false;
  const int ifindex = static_cast<int>(::if_nametoindex(ifname.c_str()));
  if (ifindex == 0) {
    *why = "no interface '" + ifname + "'";
    return Status::kDeviceNotReady;
  }
  const std::string path = claim_path(ifindex);
  // Kept open until the process ends: the kernel drops the lock with the process.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    *why = "cannot open " + path + ": " + std::strerror(errno);
    return Status::kDeviceNotReady;
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    *why = "interface '" + ifname + "' is in use by another urnic process (" + path + " is locked)";
    return Status::kDeviceBusy;
  }
  uint32_t prog_id = 0;
  if (attached_program(ifindex, &prog_id) != "urnic_xdp") return Status::kSuccess;
  // urnic's program with no process holding the interface: left by one that ended.
  if (bpf_xdp_detach(ifindex, 0, nullptr) != 0) {
    *why = "cannot remove the XDP program (id " + std::to_string(prog_id) +
           ") an ended urnic process left on '" + ifname + "': " + std::strerror(errno);
    return Status::kDeviceNotReady;
  }
  *removed = true;
  return Status::kSuccess;
}

std::string xdp_program_path() {
  if (const char* env = std::getenv("URNIC_XDP_PROG"); env != nullptr && *env != '\0')
    return env;  // the user's choice, even when it does not exist: DPDK's probe says so
  if (readable(kXdpProgBuild)) return kXdpProgBuild;
  if (readable(kXdpProgInstalled)) return kXdpProgInstalled;
  return {};
}

Status xdp_publish_addresses(uint16_t port_id, std::span<const XdpAddress> addrs, bool add,
                             std::string* why) {
  const int ifindex = af_xdp_ifindex(port_id);
  if (ifindex == 0) return Status::kSuccess;
  Fd map(program_map(ifindex, "urnic_addrs"));
  if (map.fd < 0) {
    // DPDK's default program (no xdp_prog=) takes every frame: nothing to name.
    if (errno == ENOENT) return Status::kSuccess;
    if (why != nullptr) *why = std::string("cannot reach urnic_addrs: ") + std::strerror(errno);
    return Status::kDeviceNotReady;
  }
  for (const XdpAddress& a : addrs) {
    const int rc = add ? bpf_map_update_elem(map.fd, a.addr.data(), &a.flags, BPF_ANY)
                       : bpf_map_delete_elem(map.fd, a.addr.data());
    if (rc != 0 && add) {
      if (why != nullptr) *why = std::string("urnic_addrs update: ") + std::strerror(errno);
      return Status::kDeviceNotReady;
    }
  }
  return Status::kSuccess;
}

Status xdp_counters(uint16_t port_id, XdpCounters* out) {
  const int ifindex = af_xdp_ifindex(port_id);
  if (ifindex == 0 || out == nullptr) return Status::kNotSupported;
  Fd map(program_map(ifindex, "urnic_stats"));
  if (map.fd < 0) return Status::kNotSupported;
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return Status::kNotSupported;
  std::vector<uint64_t> v(static_cast<size_t>(cpus));
  uint64_t* const fields[] = {&out->roce, &out->neigh, &out->passed, &out->no_socket};
  *out = XdpCounters{};
  for (uint32_t k = 0; k < 4; ++k) {
    if (bpf_map_lookup_elem(map.fd, &k, v.data()) != 0) return Status::kNotSupported;
    for (uint64_t x : v) *fields[k] += x;
  }
  return Status::kSuccess;
}

}  // namespace urnic
