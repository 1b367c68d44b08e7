// One side of a urnic-perf connection: an adapter's PD, CQs, QPs and the registered buffer
// they use, laid out the way perftest lays out its own (so a perftest peer's addressing fits),
// and the Driver that runs the engine when no lcore does. Everything goes through the public
// API (urnic::Pd, Cq, Qp, Mr and the manual-connect extension), as an application would.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "bench/perf/events.h"
#include "bench/perf/perf.h"
#include "urnic/urnic.h"

namespace urnic::perf {

// Runs the engine from this thread when it has no lcore of its own (EAL with one lcore): every
// wait of the benchmark calls poll().
class Driver {
 public:
  // `manual`: the engines no lcore runs, which this thread steps (none: poll() does nothing).
  Driver(std::vector<Engine*> manual, uint32_t idle_yield, EventWaiter* events = nullptr)
      : engines_(std::move(manual)),
        manual_(!engines_.empty()),
        idle_yield_(idle_yield),
        events_(events) {}
  void poll() noexcept;
  bool manual() const noexcept { return manual_; }
  // -e: where the CQs' notifications go (null: the runners poll).
  EventWaiter* events() const noexcept { return events_; }
  // What Oob calls between socket polls: null when the engine has its own lcore.
  std::function<void()> idle_fn() {
    if (!manual_) return nullptr;
    return [this] { poll(); };
  }

 private:
  std::vector<Engine*> engines_;
  bool manual_;
  uint32_t idle_yield_;
  uint32_t idle_ = 0;
  EventWaiter* events_;
};

// Per-QP buffer layout (perftest's: the advertised region follows the local one; messages of at
// most half the cycle buffer move through its first cycle_buffer bytes, larger ones start at 0).
//   src     `region` bytes: source of WRITE/SEND data, sink of READ/ATOMIC results
//   last    `max_size` bytes: the last message's source or sink (checked by the receiver)
//   target  `region` bytes: what the peer writes, reads, adds to or sends into (advertised VA)
struct Geometry {
  uint64_t max_size = 0;
  uint32_t cycle = kCycleBuffer;
  uint32_t cache_line = kCacheLine;
  uint64_t region() const { return round_up(max_size > cycle ? max_size : cycle, 4096); }
  uint64_t last_len() const { return round_up(max_size, 4096); }
  uint64_t per_qp() const { return 2 * region() + last_len(); }
};

// One work request of a test: the verb picks the public call (Qp::send / write / read,
// QpExtension::fetch_add with an add of 1).
struct Request {
  Verb verb = Verb::kWrite;
  Sge sge{};
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint32_t flags = 0;
  void* context = nullptr;
};

struct QpRes {
  Handle<Qp> qp;
  AddressHandle ah;  // UD: where its datagrams go (the peer's QPN is remote.qpn)
  QpExtension* ext = nullptr;
  QpConnectExtension* conn = nullptr;
  uint8_t* src = nullptr;
  uint8_t* last = nullptr;
  uint8_t* target = nullptr;
  Dest local;
  Dest remote;

  Status post(const Request& r) noexcept;
  Status receive(void* context, const Sge& sge) noexcept {
    return qp->receive(context, std::span<const Sge>(&sge, 1));
  }
};

// QP attributes from the command line.
struct SideOptions {
  bool selective_repeat = false;      // --sr: QpAttributes::selective_repeat on every QP
  uint8_t timeout = kQpTimeout;       // -u
  uint32_t out_reads = kMaxOutReads;  // -o: what a READ / atomic QP advertises and uses
  uint32_t inline_size = 0;           // -I: the QPs' inline data size
  bool ud = false;                    // -c UD: datagram QPs (Q_Key kUdQkey)
};

class Side {
 public:
  Side(Adapter& adapter, Driver& driver, const SideOptions& opts = {})
      : adapter_(adapter), driver_(driver), opts_(opts) {}
  ~Side() { destroy(); }
  Side(const Side&) = delete;
  Side& operator=(const Side&) = delete;

  // CQs, `nqps` QPs in INIT, the buffer (registered once, all rights) and the local records
  // (random PSNs, out_reads 128 for READ/ATOMIC tests, else 1; `gid` advertised).
  bool create(Test test, uint32_t nqps, uint32_t sq_depth, uint32_t rq_depth, const Geometry& geo,
              const std::array<uint8_t, 16>& gid, std::string* err);
  // RTR and RTS against `remote` (perftest's ctx_modify_qp_to_rtr/rts attributes) over `av`
  // (a zero dst_mac: the adapter resolves it).
  bool connect(size_t i, const Dest& remote, uint32_t mtu, const AddressVector& av,
               std::string* err);
  // The peer's record for QP i when the CM connected it (-R): no attributes to set.
  void set_remote(size_t i, const Dest& remote) { qps_[i].remote = remote; }
  // Closes everything, waiting for the QPs' closes (the engine steps through driver_).
  void destroy();

  Adapter& adapter() { return adapter_; }
  const Geometry& geo() const { return geo_; }
  // One send and one receive CQ per engine of the adapter (--engines): QP i completes into
  // those of engine i % engines, where it runs.
  std::span<Handle<Cq>> scqs() { return scq_; }
  std::span<Handle<Cq>> rcqs() { return rcq_; }
  uint32_t key() const { return key_; }
  std::vector<QpRes>& qps() { return qps_; }
  QpRes& qp(size_t i) { return qps_[i]; }

 private:
  bool create_qp(uint32_t i, uint32_t rq_depth, uint32_t sq_depth, QpRes* r, std::string* err);
  bool connect_datagram(QpRes& r, const AddressVector& av, std::string* err);

  Adapter& adapter_;
  Driver& driver_;
  SideOptions opts_;
  Geometry geo_;
  Handle<Pd> pd_;
  std::vector<Handle<Cq>> scq_, rcq_;
  Handle<Mr> mr_;
  std::vector<QpRes> qps_;
  uint8_t* mem_ = nullptr;
  size_t mem_len_ = 0;
  uint32_t key_ = 0;
};

}  // namespace urnic::perf
