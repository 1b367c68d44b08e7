// Bring-up: the DPDK environment (EAL) and the ports adapters are opened on, so that a program
// needs no DPDK call and no header outside include/urnic/. In NDK this is NDIS's job; here it
// is the step before Adapter::open (adapter.h):
//
//   urnic::RuntimeConfig rc;
//   rc.memory = urnic::RuntimeConfig::Memory::kNoHuge;  // no hugepages, no root needed
//   rc.lcores = "0-1";                                  // this thread on 0, an engine on 1
//   if (urnic::runtime_init(rc) != urnic::Status::kSuccess) die(urnic::last_error());
//   uint16_t a = 0, b = 0;  // two ports wired back to back, for a loopback pair
//   if (urnic::create_ring_port_pair("demo", 1, &a, &b) != urnic::Status::kSuccess) ...
//   urnic::Engine engine;
//   engine.launch(urnic::worker_lcores().at(0));  // after the adapters are opened
//
// A port is an ethdev port id: from create_ring_port_pair (net_ring, loopback in one process),
// open_vdev_port (net_af_packet, net_tap ...) or open_pci_port (a NIC bound to a DPDK driver);
// give it to AdapterConfig::port_id.
//
// Errors: every call returns a Status and never crashes on bad input; when it is not kSuccess,
// last_error() says why in one line. Threading: control side; call from one thread at a time
// (runtime_init serialises itself; the port calls must not race each other).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "urnic/status.h"

namespace urnic {

// EAL options (each maps to DPDK EAL arguments, listed in brackets).
struct RuntimeConfig {
  enum class Memory {
    kAuto,       // hugepages when a hugetlbfs mount has enough free pages, else kNoHuge
    kNoHuge,     // ordinary memory [--no-huge --no-shconf]: works anywhere, no root needed
    kHugepages,  // hugepages [--in-memory]: no files left behind; needs a hugetlbfs mount
  };
  std::string program = "urnic";  // argv[0] EAL sees (its log lines name it)
  Memory memory = Memory::kAuto;
  unsigned memory_mb = 512;  // [-m]; 1 .. 1048576
  // The lcores EAL may use [-l], e.g. "0-1" or "0,2"; empty: all cores. The first is the main
  // lcore (the thread that calls runtime_init); the others are workers, on which engines are
  // launched (worker_lcores()).
  std::string lcores;
  // DPDK log level [--log-level], e.g. "*:warning", "*:debug", "pmd.net.ring:info",
  // "urnic.*:debug" (urnic's own types: urnic.dp, urnic.cm, urnic.ctl, urnic.verbs; README
  // "Logging"); empty: EAL's default. A further --log-level in extra_args wins over this one.
  std::string log_level = "*:warning";
  // Let EAL scan the PCI bus (needed by open_pci_port). false: [--no-pci], no PCI device is
  // touched. `pci_allow` limits the scan to these devices [-a BDF each] and implies pci; empty:
  // every device bound to a DPDK driver.
  bool pci = false;
  std::vector<std::string> pci_allow;
  // DPDK's telemetry socket, where every adapter's counters are published under /urnic/ for other
  // processes (`dpdk-telemetry.py -f urnic<pid>`; docs/api.md "Telemetry"). false:
  // [--no-telemetry].
  bool telemetry = true;
  // DPDK's runtime directory [--file-prefix]: /var/run/dpdk/<file_prefix>/, where the telemetry
  // socket is (`dpdk-telemetry.py -f <file_prefix>`). Empty: urnic<pid>, removed when the
  // process exits (and, at bring-up, those of urnic processes that died without exiting). urnicd
  // uses a stable one ("urnicd"); two processes must not share one.
  std::string file_prefix;
  // Appended verbatim after the arguments above, e.g. {"--vdev=net_tap0,iface=t0"}.
  std::vector<std::string> extra_args;
};

// Brings up EAL with `config`. Once per process: when EAL is already up (a second call, or a
// library that brought it up itself), returns kSuccess and joins it whatever `config` says.
// Checked before EAL sees them (kInvalidParameter, nothing done): memory_mb, memory, log_level;
// kInsufficientResources for kHugepages without free hugepages. Then EAL itself:
// kInvalidParameter when it rejects the arguments (a bad lcore list or extra argument),
// kInsufficientResources when it cannot get memory. DPDK cannot retry a failed bring-up: after
// EAL failed, every later call returns kInvalidDeviceState (restart the process). EAL prints
// its own diagnostics (usage text) too.
Status runtime_init(const RuntimeConfig& config) noexcept;
// Whether EAL is up (runtime_init succeeded, in this process).
bool runtime_running() noexcept;

// The EAL arguments runtime_init would pass for `config` (without argv[0]), for logs and
// diagnostics. Empty if memory runs out.
std::vector<std::string> runtime_args(const RuntimeConfig& config) noexcept;

// The lcore of the thread that called runtime_init, and the worker lcores EAL was given, in
// increasing order (what Engine::launch takes: one engine per worker). Empty / 0 before
// runtime_init.
unsigned main_lcore() noexcept;
std::vector<unsigned> worker_lcores() noexcept;

// Creates two net_ring ports wired back to back (what `a` transmits `b` receives, and vice
// versa), `queues` queue pairs each (one per engine that serves them; 1 .. 16). `name` (1 .. 16
// characters of [A-Za-z0-9_-]) must be unique in the process: the ports are <name>_a and
// <name>_b. kSuccess with *a and *b set; kInvalidDeviceState before runtime_init;
// kInvalidParameter (bad name or queue count, null output); kAddressAlreadyExists (the name was
// used); kInsufficientResources.
Status create_ring_port_pair(std::string_view name, uint16_t queues, uint16_t* a,
                             uint16_t* b) noexcept;

// Probes a DPDK virtual device from its devargs ("net_af_packet0,iface=veth0", "net_tap0,
// iface=t0") and returns its port (a device probed already gives its port again; opening an
// adapter on a port twice is refused by Adapter::open). kSuccess with *port_id set;
// kInvalidDeviceState before runtime_init; kInvalidParameter (empty or malformed devargs, null
// output); kDeviceNotReady (no such driver, or it refused the device: no such interface,
// permissions); kNotSupported (the device is not an Ethernet port, e.g. crypto_null). For
// net_af_packet, unless the devargs say otherwise, one queue pair and ring slots that hold a
// frame of path MTU 4096 (the driver's default 2 KiB slots truncate them): qpairs=1,
// framesz=4352, blocksz and framecnt to match (512 slots). For net_af_xdp, unless the devargs
// name an xdp_prog=, urnic's own XDP program (port_xdp_counters below): $URNIC_XDP_PROG, else
// the build tree's or the installed urnic_xdp.o.
Status open_vdev_port(std::string_view devargs, uint16_t* port_id) noexcept;

// The port of a PCI NIC bound to a DPDK-compatible driver (vfio-pci, uio_pci_generic, or a
// bifurcated driver such as mlx5), by its address in domain:bus:device.function or
// bus:device.function form ("0000:03:00.0", "03:00.0"); probes it if EAL has not. kSuccess with
// *port_id set; kInvalidDeviceState before runtime_init, or when EAL was brought up without PCI
// (RuntimeConfig::pci false); kInvalidParameter (not a PCI address, null output);
// kDeviceNotReady (no such device, not bound to a DPDK driver, not in pci_allow, or its driver
// failed); kNotSupported (the device is not an Ethernet port).
Status open_pci_port(std::string_view pci_address, uint16_t* port_id) noexcept;

// The largest Ethernet MTU (IP packet bytes, without the Ethernet header) frames sent on the
// port may carry: for a kernel interface behind net_af_packet, the interface's own MTU (the
// kernel drops larger frames whatever the ethdev says); otherwise the ethdev MTU, capped at the
// driver's maximum (net_tap in DPDK 22.11: 1504). What rxe calls the port's active MTU before
// the RoCE headers come off. kSuccess with *mtu set; kInvalidDeviceState before runtime_init;
// kInvalidParameter (no such port, null output).
Status port_mtu(uint16_t port_id, uint32_t* mtu) noexcept;

// A net_af_xdp port runs urnic's XDP program (bpf/urnic_xdp.c; README "AF_XDP"), which sends
// RoCEv2 for the port's adapter's addresses, and ARP / ND for those it answers, to urnic's AF_XDP
// sockets and every other frame to the kernel. Its frame counts since it was attached, summed
// over CPUs:
struct XdpCounters {
  uint64_t roce = 0;       // RoCEv2 frames sent to urnic
  uint64_t neigh = 0;      // ARP / ND frames sent to urnic
  uint64_t passed = 0;     // frames left to the kernel (not urnic's)
  uint64_t no_socket = 0;  // urnic's frames on a queue where urnic has no socket: to the kernel
};
// kSuccess with *out set; kNotSupported when the port is not net_af_xdp or its interface runs
// another program (DPDK's default, or an xdp_prog= of the user's); kInvalidDeviceState before
// runtime_init; kInvalidParameter (null output).
Status port_xdp_counters(uint16_t port_id, XdpCounters* out) noexcept;

// Why the last call of this header made on this thread failed, in one line; "" after a
// success. Valid until the next such call on the same thread.
const char* last_error() noexcept;

}  // namespace urnic
