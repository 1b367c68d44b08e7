// The verbs layer's own objects: each embeds the rdma-core struct an application sees (compiled
// against Debian's rdma-core 44 headers, so every layout is the one the stock binaries were built
// with) and holds the urnic public-API object behind it. The verbs layer is one more consumer of
// include/urnic/ (issue 16: never a third object model); nothing here reaches the dataplane.
//
// Threading: libibverbs promises that every verb is thread-safe. The NDK objects underneath
// serialise per queue instead (ndkpi.md §7.1-§7.2), so each verbs queue (a QP's send queue, its
// receive queue, an SRQ, a CQ) takes a one-word spin lock around the NDK call: uncontended, it
// is one atomic exchange, and it is the price of the verbs contract, not of the dataplane.
#pragma once

#include <infiniband/verbs.h>
// verbs.h routes these names through inline wrappers; the library defines the functions behind
// them under their own names.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "urnic/urnic.h"

namespace urnic::verbs {

// Test-and-test-and-set: the verbs layer's per-queue lock (see the file comment).
class SpinLock {
 public:
  void lock() noexcept {
    while (flag_.exchange(true, std::memory_order_acquire))
      while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
  }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

// Sets errno and returns null: the failure convention of the verbs that return pointers.
template <class T = void>
T* fail_null(int err) noexcept {
  errno = err;
  return nullptr;
}

// The errno rdma-core documents for a urnic status (EINVAL, ENOMEM, EOPNOTSUPP ...).
int status_errno(Status s) noexcept;

struct Device;

// Where the devices come from: the environment (URNIC_*) or a config file (URNIC_CONFIG), read
// once per process; see docs/verbs.md.
struct Config {
  std::string devargs;  // URNIC_DEVARGS: a DPDK virtual device ("net_af_packet0,iface=veth0")
  std::string pci;      // URNIC_PCI: a PCI NIC bound to a DPDK driver
  std::string name = "urnic0";
  std::string ipv4, ipv6, mac;  // URNIC_IPV4 / URNIC_IPV6 may carry /LEN (the subnet)
  std::string routes;           // URNIC_ROUTES: routes separated by ';' (urnic/route.h syntax)
  std::string lcores;           // URNIC_LCORES: EAL's -l list verbatim (default: one lcore)
  int engine_cpu = -1;          // URNIC_ENGINE_CPU: the CPU of the progress thread
  std::string memory;           // auto | huge | nohuge
  unsigned memory_mb = 512;     // URNIC_MEMORY_MB
  std::string log_level;        // URNIC_LOG_LEVEL
  uint32_t max_qps = 1024;      // URNIC_MAX_QPS
  BrokenRules break_rules;      // URNIC_BREAK_RULES (testing builds: the rules by name)
  std::string error;            // why the configuration is unusable ("" when fine)
};

// One RNIC as ibverbs sees it: an ibv_device, and while some context has it open, the adapter.
struct Device {
  ibv_device dev{};  // first: ibv_device* <-> Device*
  unsigned index = 0;
  // Loopback pairs (no URNIC_DEVARGS / URNIC_PCI): this device's net_ring twin.
  bool ring = false;
  uint32_t ipv4 = 0;  // host order
  std::optional<std::array<uint8_t, 16>> ipv6;
  uint8_t ipv4_len = 0, ipv6_len = 0;  // the subnets (0: none)
  std::vector<Route> routes;
  std::optional<std::array<uint8_t, 6>> mac;
  uint16_t port = 0;
  std::unique_ptr<Adapter> adapter;
  AdapterExtension* ext = nullptr;
  AdapterInfo info{};
  uint32_t port_mtu = 1500;
};

struct Context;

// Process-wide state: configuration, EAL, the engine shared by every device, the device list.
class Runtime {
 public:
  static Runtime& get() noexcept;
  // The devices configured (EAL not needed). Empty with errno set when the config is bad.
  std::vector<Device*> devices() noexcept;
  // Brings EAL, ports, adapters and the engine up for the first open context; counts contexts.
  int acquire(Device* d) noexcept;  // 0 or an errno
  void release(Device* d) noexcept;
  const Config& config() const noexcept { return cfg_; }
  // An application thread with nothing to do (an empty ibv_poll_cq) runs one engine step, unless
  // another thread is in one (EngineConfig::shared_drive). Hot path: no lock, no syscall.
  void drive() noexcept;
  // An application thread is about to block (ibv_get_cq_event): the progress thread takes over
  // at once instead of after kAppActiveNs.
  void app_blocks() noexcept;

 private:
  Runtime();
  int bring_up_locked() noexcept;
  void tear_down_locked() noexcept;
  void attach_devices() noexcept;
  bool attached_ = false;  // URNIC_DAEMON: the devices are a urnicd's adapters
  std::mutex mu_;
  Config cfg_;
  std::vector<std::unique_ptr<Device>> devs_;
  void progress_loop() noexcept;
  std::unique_ptr<Engine> engine_;
  std::thread progress_;
  std::mutex pmu_;
  std::condition_variable pcv_;
  std::atomic<int64_t> last_app_drive_{0};
  unsigned users_ = 0;
  bool up_ = false;
};

struct VCq;
struct VQp;

// ibv_context: the verbs_context (extended ops) with the ibv_context at its end.
struct Context {
  verbs_context vctx{};  // must stay first; vctx.context is what the application holds
  Device* dev = nullptr;
  // Asynchronous events (ibv_get_async_event): a semaphore eventfd counts the queued events.
  std::mutex ev_mu;
  std::deque<ibv_async_event> events;
  void push_event(const ibv_async_event& e) noexcept;
};

inline Context* ctx_of(ibv_context* c) noexcept {
  return reinterpret_cast<Context*>(reinterpret_cast<uint8_t*>(c) -
                                    offsetof(verbs_context, context));
}
inline Adapter& adapter_of(ibv_context* c) noexcept { return *ctx_of(c)->dev->adapter; }

struct VPd {
  ibv_pd pd{};
  Handle<urnic::Pd> h;
  std::atomic<int> users{0};  // MRs, MWs, SRQs, QPs, AHs of this PD
};
inline VPd* pd_of(ibv_pd* p) noexcept { return reinterpret_cast<VPd*>(p); }

struct VMr {
  ibv_mr mr{};
  Handle<urnic::Mr> h;
};

struct VMw {
  ibv_mw mw{};
  Handle<urnic::Mw> h;
};

struct Channel {
  ibv_comp_channel ch{};  // ch.fd is an epoll set of the CQs' notification eventfds
  std::mutex mu;
  std::deque<VCq*> pending;  // notifications read from an eventfd but not yet returned
};

struct VCq {
  // ibv_cq is the start of ibv_cq_ex (rdma-core's ibv_cq_ex_to_cq casts): an extended CQ
  // (ibv_create_cq_ex, verbs/cq_ex.cc) uses the whole, every other path the first part.
  union {
    ibv_cq cq;
    ibv_cq_ex cqx{};
  };
  ibv_wc cur{};  // poll-by-field (ibv_start_poll .. ibv_end_poll): the completion being read
  Handle<urnic::Cq> h;
  int efd = -1;  // the CQ's notification eventfd (CqExtension), when it has a channel
  SpinLock lock;
  std::atomic<int> users{0};      // QPs completing into it
  uint32_t events_delivered = 0;  // under cq.mutex, for destroy (waits for the acks)
  Context* ctx = nullptr;
};
inline VCq* cq_of(ibv_cq* c) noexcept { return reinterpret_cast<VCq*>(c); }

struct VSrq {
  ibv_srq srq{};
  Handle<urnic::Srq> h;
  SpinLock lock;
  uint32_t max_wr = 0, max_sge = 0, limit = 0;
  std::atomic<int> users{0};
  Context* ctx = nullptr;
};
inline VSrq* srq_of(ibv_srq* s) noexcept { return reinterpret_cast<VSrq*>(s); }

// The ibv_wr_* batch being built on a QP (ibv_wr_start .. ibv_wr_complete): an operation is
// held until its data (set_sge / set_inline) arrives, then posted deferred; the last one is
// posted without kDefer by wr_complete, which rings the doorbell for the whole batch.
struct WrBuild {
  enum class Op : uint8_t {
    kNone,
    kSend,
    kSendImm,
    kSendInv,
    kWrite,
    kWriteImm,
    kRead,
    kCas,
    kFaa
  };
  Op op = Op::kNone;
  uint64_t wr_id = 0;
  uint32_t flags = 0;  // ibv_send_flags
  uint32_t rkey = 0, imm = 0;
  uint64_t raddr = 0, compare_add = 0, swap = 0;
  std::vector<Sge> sgl;
  bool inl = false;
  std::vector<uint8_t> inline_buf;  // wr_set_inline_data_list gathers here
  ibv_ah* ah = nullptr;             // wr_set_ud_addr (datagram QPs)
  uint32_t remote_qpn = 0, remote_qkey = 0;
  bool ready = false;  // op and data complete, not yet posted
  int error = 0;       // first failure of the batch (wr_complete returns it)
};

struct VQp {
  ibv_qp_ex qpx{};  // qpx.qp_base is the application's ibv_qp
  Handle<urnic::Qp> h;
  QpExtension* ext = nullptr;
  QpConnectExtension* conn = nullptr;
  VCq* scq = nullptr;
  VCq* rcq = nullptr;
  VSrq* srq = nullptr;
  VPd* pd = nullptr;
  bool sq_sig_all = false;
  bool ud = false;  // IBV_QPT_UD: a urnic datagram QP (urnic/datagram.h)
  // A new urnic QP is in INIT; ibverbs' starts in RESET. Until the application's first modify
  // the verbs layer reports RESET and maps RESET->INIT onto INIT->INIT.
  bool fresh = true;
  ibv_qp_cap cap{};
  SpinLock sq_lock, rq_lock;
  WrBuild wr;
  // Set by urnic's librdmacm while a connection holds the QP: a QP given to a Connector is the
  // connector's antecedent (ndkpi.md §1.4), so ibv_destroy_qp, which rdma_cm applications call
  // directly, closes the connector first.
  void (*release_hook)(void* ctx) = nullptr;
  void* release_ctx = nullptr;
};
inline VQp* qp_of(ibv_qp* q) noexcept { return reinterpret_cast<VQp*>(q); }

// An address handle: ibverbs' struct first, then urnic's resolved handle.
struct VAh {
  ibv_ah ah{};
  AddressHandle h;
};
inline VAh* ah_of(ibv_ah* a) noexcept { return reinterpret_cast<VAh*>(a); }

// ops tables (one file each)
void fill_device_ops(Context& c) noexcept;
void fill_memory_ops(Context& c) noexcept;
void fill_cq_ops(Context& c) noexcept;
// The CQ behind ibv_create_cq and ibv_create_cq_ex (cq.cc): null with errno set on failure.
VCq* create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
               int comp_vector) noexcept;
// Converts a result to a work completion (cq.cc).
void to_wc(const ResultEx& r, ibv_wc* wc) noexcept;
// ibv_create_cq_ex (cq_ex.cc).
ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* attr);
void fill_qp_ops(Context& c) noexcept;
void fill_post_ops(Context& c) noexcept;
void init_wr_ops(VQp& q) noexcept;

// Synchronous close of an NDK object: waits for a pending close (the control thread completes
// it; the engine runs on its own lcore).
template <class T>
void close_sync(Handle<T>& h) noexcept;
void close_object_sync(Object* o) noexcept;
template <class T>
void close_sync(Handle<T>& h) noexcept {
  if (T* p = h.release()) close_object_sync(p);
}

// Unsignalled completions: urnic flags for an ibv_send_flags set on a QP.
uint32_t op_flags(const VQp& q, unsigned send_flags) noexcept;

}  // namespace urnic::verbs
