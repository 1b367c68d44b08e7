// EAL bring-up from an options struct, and creation of the virtual ports the project uses.
//
// EAL can be initialised once per process. eal_init() is idempotent: a second call with any
// options joins the running EAL and returns kSuccess, so several adapters (or a test and the
// adapters it creates) can each ask for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "urnic/status.h"

namespace urnic::ctl {

struct EalOptions {
  enum class Memory {
    kAuto,    // hugepages when a hugetlbfs mount has free pages, else --no-huge
    kNoHuge,  // --no-huge --no-shconf -m <memory_mb>: works anywhere, no root needed
    kHuge,    // --in-memory on hugepages (no shared files, several processes side by side)
  };
  std::string program = "urnic";
  Memory memory = Memory::kAuto;
  unsigned memory_mb = 512;
  bool no_pci = true;                  // false to let EAL probe PCI NICs (with pci_allow)
  std::vector<std::string> pci_allow;  // -a <BDF> for each
  std::vector<std::string> vdevs;      // --vdev <devargs> for each
  std::string lcores;                  // -l <list>; empty: EAL's default (all cores)
  std::string log_level = "*:warning";
  bool telemetry = true;  // false: --no-telemetry
  // --file-prefix: the runtime directory /var/run/dpdk/<prefix>/ (telemetry socket). Empty:
  // urnic<pid>, removed at exit (as are those of dead urnic processes found at bring-up).
  std::string file_prefix;
  std::vector<std::string> extra;  // appended verbatim
};

// The argv that eal_init() passes to rte_eal_init() for these options (without argv[0]).
std::vector<std::string> eal_args(const EalOptions& opts);

// Brings up EAL, or joins it when it is already up. kInvalidParameter if EAL rejects the
// arguments, kInsufficientResources if it cannot get memory.
Status eal_init(const EalOptions& opts);
bool eal_running() noexcept;

// DPDK's log lines (EAL's and urnic's own, dataplane/log.h) go to stderr through a stream
// eal_init() installs. While a tap is set, each line (with its newline, not NUL-terminated) also
// goes to it, on the thread that logged it, an engine lcore's included: a tap must be quick and
// must not log. Tests read what was logged this way. nullptr removes it; a no-op when EAL was
// not brought up by eal_init().
using LogTap = void (*)(void* ctx, const char* line, size_t len);
void set_log_tap(LogTap tap, void* ctx) noexcept;

// True when /proc/mounts has a hugetlbfs mount and /proc/meminfo reports free hugepages.
bool hugepages_available();

// Probes a virtual device ("net_tap0,iface=t0", "net_af_packet0,iface=veth0") and returns its
// ethdev port id. kInvalidParameter if the device cannot be probed.
Status probe_vdev(std::string_view devargs, uint16_t* port_id);

// Creates two net_ring ethdev ports wired back to back: what `a` transmits `b` receives and
// vice versa, one ring per direction and queue. The ports are named <name>_a and <name>_b.
Status create_ring_pair(std::string_view name, uint16_t queues, uint16_t* a, uint16_t* b);

}  // namespace urnic::ctl
