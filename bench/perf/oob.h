// perftest's out-of-band exchange over TCP (src/perftest_communication.c of perftest 4.5), so
// that ib_write_bw & co. can be the other side. Every step is a blind fixed-size exchange in
// which the client writes first and then reads, and the server reads first and then writes
// (ctx_xchg_data_ethernet): versions (16 bytes), the cycle buffer and cache line size (4 + 4
// bytes, big-endian, peers >= 5.32), the MTU as an ibv_mtu digit (2 bytes, peers >= 5.31), then
// 108-byte connection records (ctx_hand_shake) as often as the test's choreography says, the
// bandwidth report (5 x 8 bytes) and "done".
//
// Waiting never blocks an engine that this thread drives: every wait polls the socket without
// blocking and calls `idle` in between (see Driver in side.h).
//
// With perftest's -R the same steps run over RDMA instead (an OobLink, cm_link.h): each step is
// one message each way, and a connection record is perftest's binary struct pingpong_dest.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "bench/perf/perf.h"

namespace urnic::perf {

// Why an exchange step failed, for the tool's exit code.
enum class OobFailure : uint8_t {
  kNone,
  kNoPeer,    // the client could not connect, or no client came within the timeout
  kTimeout,   // the peer stopped answering: a step waited longer than the timeout
  kPeerGone,  // the peer closed the connection (it exited or was killed)
  kOther,     // a malformed record, an incompatible peer, a socket error
  kCanceled,  // the cancel flag was raised (SIGINT / SIGTERM under --run_infinitely)
};

// The options both sides must agree on, carried after the version string's NUL (perftest reads
// the string only): perftest's -b and --run_infinitely are "SYMMETRIC" but perftest 4.5 has no
// way to check them, so against perftest both sides must simply be told.
struct PeerModes {
  bool bidirectional = false;
  bool run_infinitely = false;
  bool selective_repeat = false;  // offered (--sr auto or on)
  friend bool operator==(const PeerModes&, const PeerModes&) = default;
};

// A message transport in place of the TCP socket (use_link). Each write of the exchange is one
// message; the peer reads it whole.
class OobLink {
 public:
  virtual ~OobLink() = default;
  // Posts one message of `n` bytes (false with *err when it cannot be posted).
  virtual bool send(const void* p, size_t n, std::string* err) = 0;
  // 1: every message posted went out; 0: not yet; -1: failed (*err).
  virtual int send_done(std::string* err) = 0;
  // 1: the next message, of exactly `n` bytes, copied to `p`; 0: none yet; -1: failed (*err).
  virtual int recv(void* p, size_t n, std::string* err) = 0;
  // A message arrived that recv() has not taken.
  virtual bool has_message() = 0;
  // The peer disconnected or the link broke.
  virtual bool closed() = 0;
};

class Oob {
 public:
  // `idle` runs between polls of the socket; null: block in poll(). Every wait for the peer
  // (accept, each read and write) gives up after `timeout_s` seconds.
  Oob(Role role, std::function<void()> idle, double timeout_s)
      : role_(role), idle_(std::move(idle)), timeout_s_(timeout_s) {}
  ~Oob() { close(); }
  Oob(const Oob&) = delete;
  Oob& operator=(const Oob&) = delete;

  // While `activity` (e.g. the port's received-frame count) keeps changing, the peer is alive
  // and busy (its run is under way): a wait does not time out then.
  void set_activity(std::function<uint64_t()> activity) { activity_ = std::move(activity); }

  // Server: listens on `port` and accepts one client.
  bool accept_one(uint16_t port);
  // Client: connects, retrying for up to `retry_s` seconds while the server is not listening.
  bool connect_to(const std::string& host, uint16_t port, double retry_s);

  // The version exchange. Our 16 bytes are "6.06" (perftest 4.5) and, after the NUL that ends
  // the string perftest parses, "urnic-perf" (or "urnic:" and the letters of `modes`: b, i): a
  // peer that carries it verifies our data.
  bool exchange_versions(const PeerModes& modes = {});
  const std::string& peer_version() const { return peer_version_; }
  bool peer_is_urnic() const { return peer_urnic_; }
  // An urnic-perf peer's modes (all off for perftest, or an urnic-perf that predates them).
  const PeerModes& peer_modes() const { return peer_modes_; }
  // Every wait gives up (kCanceled) once `*cancel` is set; null: never.
  void set_cancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }
  // One record each way, written before reading on both sides (so that either side may be the
  // first to finish a run and tell the other, which stops when it can read it). A perftest
  // peer's hand shake fits it: each side writes one record and reads one.
  bool sync_write_first(const Dest& mine);
  // Its two halves, for a side that writes its record in the middle of a run.
  bool write_record(const Dest& mine);
  bool read_record();
  // check_sys_data(): both sides use the larger cycle buffer and cache line.
  bool check_sys_data(uint32_t* cycle_buffer, uint32_t* cache_line);
  // check_mtu(): both sides use the smaller path MTU (bytes in, bytes out).
  bool check_mtu(uint32_t mine, uint32_t* agreed);
  // ctx_hand_shake(): one 108-byte record each way.
  bool hand_shake(const Dest& mine, Dest* theirs);
  // xchg_bw_reports() for a 6.06 peer.
  bool xchg_reports(const BwReport& mine, BwReport* theirs);
  // ctx_close_connection(): a hand shake, then "done" each way, then close.
  bool close_connection(const Dest& mine);
  // As close_connection, but both sides write their record first (urnic-perf to urnic-perf,
  // where either side may finish first and the other must learn of it to stop waiting).
  bool end_together(const Dest& mine);
  // True when the peer sent data we have not read, or closed the connection.
  bool readable();
  // True when the peer closed the connection and every byte it sent has been read.
  bool peer_closed();
  void close();

  const std::string& error() const { return err_; }
  OobFailure failure() const { return why_; }
  double timeout_s() const { return timeout_s_; }

  // The exchange runs over `link` from now on (not owned; null: back to the socket).
  void use_link(OobLink* link) { link_ = link; }
  bool has_link() const { return link_ != nullptr; }
  // Waits until `ready()` is true, as every exchange step waits (the engine stepped, the
  // timeout extended while the peer is active, the cancel flag obeyed); false with error() set:
  // "`what`: ..." (kTimeout, kCanceled).
  bool wait_until(const std::function<bool()>& ready, const std::string& what);
  // Records a failure (the first one counts); returns false.
  bool fail(const std::string& what, OobFailure why = OobFailure::kOther);
  // Forgets it, so that the next fail() names the failure instead.
  void clear_failure() {
    err_.clear();
    why_ = OobFailure::kNone;
  }

 private:
  bool xchg(const void* mine, void* theirs, size_t n);
  // "done" each way, then close.
  bool say_done();
  // perftest 4.5's struct pingpong_dest as rdma_write_keys() sends it (56 bytes).
  struct BinaryRecord {
    uint32_t lid, out_reads, qpn, psn, rkey, pad;
    uint64_t vaddr;
    uint8_t gid[16];
    uint32_t srqn, gid_index;
  };
  static_assert(sizeof(BinaryRecord) == 56);
  // A connection record as this exchange carries it: its size.
  size_t record_out(const Dest& d, std::array<char, kRecordSize>* out) const;
  bool record_in(const char* in, size_t n, Dest* d);
  bool write_all(const void* p, size_t n);
  bool read_exact(void* p, size_t n);
  // Waits until the socket is ready for `events` or `deadline` passes (then fails: kTimeout).
  bool wait_fd(short events, std::chrono::steady_clock::time_point deadline);
  // The loop of every wait: `probe` says 1 (ready), 0 (wait on) or -1 (failed, error set).
  bool wait_loop(const std::function<int()>& probe, std::chrono::steady_clock::time_point deadline,
                 const std::string& what);
  std::chrono::steady_clock::time_point deadline() const;

  Role role_;
  std::function<void()> idle_;
  std::function<uint64_t()> activity_;
  double timeout_s_;
  OobFailure why_ = OobFailure::kNone;
  int fd_ = -1;
  OobLink* link_ = nullptr;
  std::string peer_version_;
  double peer_version_num_ = 0;
  bool peer_urnic_ = false;
  PeerModes peer_modes_;
  const std::atomic<bool>* cancel_ = nullptr;
  std::string err_;
};

}  // namespace urnic::perf
