#include "bench/perf/runners.h"
#include "bench/perf/output.h"

#include <rte_cycles.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <span>

#include "urnic/types.h"

namespace urnic::perf {

// Work-request contexts: the QP index and a number (messages a signaled send covers, or the
// offset of a receive buffer in its region).
void* encode(size_t qi, uint64_t v) {
  return reinterpret_cast<void*>(static_cast<uintptr_t>(qi) << 32 | (v & 0xFFFFFFFFu));
}
size_t ctx_qp(void* c) { return static_cast<size_t>(reinterpret_cast<uintptr_t>(c) >> 32); }
uint64_t ctx_val(void* c) { return reinterpret_cast<uintptr_t>(c) & 0xFFFFFFFFu; }
uint64_t addr(const void* p) { return reinterpret_cast<uint64_t>(p); }

// The request template of one QP (remote fields from its peer record).
Request request_template(Side& side, size_t i, const RunConfig& c) {
  const QpRes& q = side.qp(i);
  Request w;
  w.verb = c.test.verb;
  w.sge.length = static_cast<uint32_t>(c.test.verb == Verb::kAtomic ? kAtomicSize : c.size);
  w.sge.token = side.key();
  w.rkey = q.remote.rkey;
  w.remote_addr = q.remote.vaddr;
  // -I: the data travels in the request itself (NDK_OP_FLAG_INLINE).
  if ((c.test.verb == Verb::kWrite || c.test.verb == Verb::kSend) && c.size <= c.inline_size)
    w.flags = op_flag::kInline;
  return w;
}

// The last message's source (WRITE/SEND: a stream only it carries) or sink (READ/ATOMIC: zeroed
// so that a stale value cannot pass the check).
void prepare_last(Side& side, const RunConfig& c) {
  for (auto& q : side.qps()) {
    if (c.test.verb == Verb::kWrite || c.test.verb == Verb::kSend)
      fill_pattern(q.last, c.size, last_seed(q.local.psn, c.size), 0);
    else
      std::memset(q.last, 0, c.test.verb == Verb::kAtomic ? kAtomicSize : c.size);
  }
}

uint64_t duration_tsc(double s) { return static_cast<uint64_t>(s * static_cast<double>(tsc_hz())); }

namespace {

constexpr uint64_t kUnbounded = std::numeric_limits<uint64_t>::max();
// BwSender rings the doorbell (a post without kDefer) at least every this many requests. Whole
// deferred batches (up to tx_depth) stall an engine on another core, which waits for the batch
// instead of working on its first requests: measured on 64 B write_bw, batches of 128 ran at
// 2.9 Mpps, every 16 at 3.8, every request at 3.7 (same run, two lcores).
constexpr uint64_t kDoorbellEvery = 16;

// Peak-rate history: points at least 50 us apart (20000 per second of run), preallocated for a
// minute; later points overwrite the last one rather than allocate in the timed loop.
constexpr double kEventSpacingUs = 50;
constexpr size_t kMaxEvents = 60 * 20000;

std::string hex(uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%#llx", static_cast<unsigned long long>(v));
  return b;
}

// ---- BwSender -------------------------------------------------------------------------------

class BwSender final : public Runner {
 public:
  BwSender(Side& side, const RunConfig& cfg) : Runner(side, cfg) {
    const Geometry& g = side.geo();
    for (size_t i = 0; i < side.qps().size(); ++i) {
      PerQp p;
      p.loc = Cycler(cfg.size, g.cycle, g.cache_line);
      p.rem = p.loc;
      p.w = request_template(side, i, cfg);
      if (cfg.open_loop.rate > 0) p.due.assign(cfg.tx_depth, 0);
      for (const MixEntry& e : cfg.open_loop.mix) {
        RunConfig c = cfg;  // the mix entry's operation and size on the same buffers
        c.test.verb = e.verb;
        c.size = e.size;
        p.mix_w.push_back(request_template(side, i, c));
      }
      if (!cfg.open_loop.mix.empty()) p.cls.assign(cfg.tx_depth, 0);
      per_.push_back(p);
    }
    if (cfg.open_loop.rate > 0) {
      ol_ = std::make_unique<OpenLoop>(cfg.open_loop, tsc_hz());
      total_ = cfg.iters * per_.size();
    }
    prepare_last(side, cfg);
    events.reserve(kMaxEvents);
  }

  bool step() noexcept override {
    if (done_) return true;
    begin_step();
    const uint64_t now = rte_rdtsc();
    if (tsc_start == 0) {
      tsc_start = now;
      if (cfg_.duration > 0) end_tsc_ = now + duration_tsc(cfg_.duration);
      if (ol_) ol_->start(now);
    }
    if (end_tsc_ != 0 && now >= end_tsc_) time_up_ = true;
    // --run_infinitely: the end is the signal handler's, not the clock's.
    if (cfg_.stop != nullptr) time_up_ = cfg_.stop->load(std::memory_order_relaxed);
    if (ol_)
      post_open(now);
    else
      for (size_t i = 0; i < per_.size() && !failed(); ++i) post_some(i);
    if (!failed()) poll();
    if (ol_) ol_->tick(now, stdout);
    bool all = true;
    for (const auto& p : per_) all &= p.final_posted && p.completed == p.posted;
    if (all || failed()) {
      done_ = true;
      iterations_ = messages;
      if (ol_) ol_->finish(tsc_end != 0 ? tsc_end : now, stdout);
    }
    return done_;
  }

  const OpenLoop* open_loop() const noexcept override { return ol_.get(); }

  uint64_t progress() const noexcept override { return messages; }

  DataCheck check_data() override {
    DataCheck dc;
    if (cfg_.test.verb != Verb::kRead && cfg_.test.verb != Verb::kAtomic) return dc;
    if (!cfg_.peer_urnic) {
      dc.note = "contents not checked: the peer is perftest (random data)";
      return dc;
    }
    for (size_t i = 0; i < per_.size(); ++i) {
      const QpRes& q = side_.qp(i);
      const PerQp& p = per_[i];
      if (cfg_.test.verb == Verb::kRead) {
        const uint64_t bad =
            check_pattern(q.last, cfg_.size, region_seed(q.remote.psn), p.last_rem);
        if (bad != cfg_.size) {
          dc.fail("READ data mismatch on QP " + std::to_string(i) + " at byte " +
                  std::to_string(bad) + " of the last message");
          return dc;
        }
      } else {
        // FETCH_ADD of 1 into a zeroed slot: the last one returns how many earlier adds hit
        // the same slot.
        uint64_t got = 0;
        std::memcpy(&got, q.last, 8);
        const uint64_t want = (p.posted - 1) / p.rem.slots;
        if (got != want) {
          dc.fail("FETCH_ADD on QP " + std::to_string(i) + " returned " + std::to_string(got) +
                  ", expected " + std::to_string(want));
          return dc;
        }
      }
    }
    dc.pass(cfg_.test.verb == Verb::kRead
                ? "last READ of each QP verified (" + std::to_string(cfg_.size) + " B)"
                : "last FETCH_ADD result of each QP verified");
    return dc;
  }

 private:
  struct PerQp {
    uint64_t posted = 0, completed = 0, unsignaled = 0;
    uint64_t last_rem = 0;
    bool final_posted = false;
    Cycler loc, rem;
    Request w;
    std::vector<uint64_t> due;   // open loop: when each outstanding request fell due (TSC)
    std::vector<Request> mix_w;  // --mix: a template per entry
    std::vector<uint8_t> cls;    // --mix: each outstanding request's entry
  };

  // Fills the QP's send queue up to tx_depth outstanding requests, with NDK's deferred doorbell
  // (ndkpi.md §7.3): requests are posted with op_flag::kDefer and every kDoorbellEvery-th (and
  // the last) without, which hands the engine the ones before it.
  void post_some(size_t i) noexcept {
    PerQp& p = per_[i];
    const uint64_t room = cfg_.tx_depth - (p.posted - p.completed);
    for (uint64_t k = 0; k < room && !p.final_posted; ++k) {
      const bool last = cfg_.duration > 0 ? time_up_ : p.posted + 1 >= cfg_.iters;
      const bool signaled = last || p.unsignaled + 1 >= cfg_.cq_mod;
      const uint64_t every = cfg_.post_list != 0 ? cfg_.post_list : kDoorbellEvery;
      const bool batch_end = last || k + 1 == room || (p.posted + 1) % every == 0;
      if (!post_one(i, last, signaled, batch_end)) return;
    }
  }

  // Open loop: posts every request that has fallen due, in turn on the QPs, each signaled. One
  // whose QP has tx_depth outstanding waits (and the ones behind it): its latency still runs
  // from when it fell due.
  void post_open(uint64_t now) noexcept {
    while (next_msg_ < total_ && !failed()) {
      const uint64_t due = ol_->due();
      if (due > now) return;
      const size_t i = next_msg_ % per_.size();
      PerQp& p = per_[i];
      if (p.posted - p.completed >= cfg_.tx_depth) return;
      const uint64_t k = p.posted;
      const bool last = k + 1 >= cfg_.iters;
      // A mix draws each request's kind once (a full queue retries the same one); the run's
      // last request is the test's own, so that the end-of-run data checks hold.
      if (!p.mix_w.empty() && !have_cls_) {
        next_cls_ = ol_->draw_class();
        have_cls_ = true;
      }
      Request* w = p.mix_w.empty() || last ? &p.w : &p.mix_w[next_cls_];
      if (!post_one(i, last, true, true, w)) return;
      p.due[k % p.due.size()] = due;
      // The last one is the test's own: in no mix class (kNoClass).
      if (!p.mix_w.empty()) p.cls[k % p.cls.size()] = last ? kNoClass : next_cls_;
      have_cls_ = false;
      ++next_msg_;
      ol_->advance();
    }
  }

  // Posts QP i's next request; false when it must wait (the queue is full until the engine
  // retires more: a failing post hands the deferred ones to the engine) or the run failed.
  bool post_one(size_t i, bool last, bool signaled, bool batch_end,
                Request* req = nullptr) noexcept {
    PerQp& p = per_[i];
    QpRes& q = side_.qp(i);
    Request& w = req != nullptr ? *req : p.w;
    const Cycler loc = p.loc, rem = p.rem;
    const uint64_t lo = p.loc.next(), ro = p.rem.next();
    w.sge.addr = addr(last ? q.last : q.src + lo);
    w.remote_addr = q.remote.vaddr + ro;
    w.flags = (w.flags & op_flag::kInline) | (signaled ? 0 : op_flag::kSilentSuccess) |
              (batch_end ? 0 : op_flag::kDefer);
    w.context = encode(i, p.unsignaled + 1);
    const Status s = q.post(w);
    if (s == Status::kNoMoreEntries) {
      p.loc = loc;  // retried next step
      p.rem = rem;
      return false;
    }
    if (s != Status::kSuccess) {
      fail("post failed: " + std::string(to_string(s)));
      return false;
    }
    ++p.posted;
    p.unsignaled = signaled ? 0 : p.unsignaled + 1;
    if (last) {
      p.final_posted = true;
      p.last_rem = ro;
    }
    return true;
  }

  void poll() noexcept {
    std::span<ResultEx> r(cqe_);
    const size_t n = poll_cqs(side_.scqs(), r);
    if (n == 0) return;
    const uint64_t now = rte_rdtsc();
    for (size_t k = 0; k < n; ++k) {
      if (!check_completion(r[k])) {
        if (ol_) ol_->error();
        return;
      }
      const size_t qi = ctx_qp(r[k].request_context);
      const uint64_t covered = ctx_val(r[k].request_context);
      if (qi >= per_.size()) {
        fail("completion with an unknown context");
        return;
      }
      if (ol_) [[unlikely]] {
        PerQp& p = per_[qi];
        for (uint64_t c = 0; c < covered; ++c) {
          const uint64_t k = p.completed + c;
          ol_->complete(p.due[k % p.due.size()], now, p.cls.empty() ? 0 : p.cls[k % p.cls.size()]);
        }
      }
      per_[qi].completed += covered;
      messages += covered;
    }
    tsc_end = now;
    record_event(now);
  }

  std::vector<PerQp> per_;
  bool time_up_ = false;
  std::unique_ptr<OpenLoop> ol_;       // --rate
  uint64_t total_ = 0, next_msg_ = 0;  // open loop: requests in all, and the next one's number
  static constexpr uint8_t kNoClass = 0xFF;
  uint8_t next_cls_ = 0;  // --mix: the next request's entry, once drawn
  bool have_cls_ = false;
};

// ---- BwReceiver (send_bw server) --------------------------------------------------------------

class BwReceiver final : public Runner {
 public:
  BwReceiver(Side& side, const RunConfig& cfg) : Runner(side, cfg) {
    const Geometry& g = side.geo();
    per_qp_ = cfg.duration > 0 ? kUnbounded : cfg.iters;
    per_.resize(side.qps().size());
    for (size_t i = 0; i < per_.size(); ++i) {
      per_[i].loc = Cycler(cfg.size + cfg.recv_extra, g.cycle, g.cache_line);
      for (uint32_t k = 0; k < cfg.rx_depth && per_[i].posted < per_qp_ && !failed(); ++k)
        post_recv(i);
    }
    events.reserve(kMaxEvents);
  }

  bool step() noexcept override {
    if (done_) return true;
    begin_step();
    poll();
    bool all = per_qp_ != kUnbounded;
    for (const auto& p : per_) all &= p.received >= per_qp_;
    if (stopping_) {
      // The sender is done: every message it sent was acknowledged, so its completion is in
      // our CQ already (the responder completes a receive before it acknowledges it). A
      // datagram is not acknowledged: one still in flight gets 20 ms of quiet to arrive.
      if (stop_expected_ != 0) {
        all = messages >= stop_expected_;
      } else if (cfg_.recv_extra != 0) {
        all = rte_rdtsc() - std::max(stop_tsc_, tsc_end) > tsc_hz() / 50;
      } else if (idle_polls_ >= 1000) {
        all = true;
      }
    }
    if (all || failed()) {
      done_ = true;
      iterations_ = messages;
    }
    return done_;
  }

  void stop(uint64_t expected) noexcept override {
    if (!stopping_) stop_tsc_ = rte_rdtsc();
    stopping_ = true;
    stop_expected_ = expected;
  }

  uint64_t progress() const noexcept override { return messages; }

  DataCheck check_data() override {
    DataCheck dc;
    if (!cfg_.peer_urnic) {
      dc.note = "lengths checked, contents not: the peer is perftest (random data)";
      dc.checked = true;
      return dc;
    }
    // UD (-c UD): a datagram lost in the network is not sent again. A QP that lost some may
    // have lost its last one, so only the QPs that received everything are checked.
    const bool lossy = cfg_.recv_extra != 0 && per_qp_ != kUnbounded;
    uint64_t lost = 0, checked = 0;
    for (size_t i = 0; i < per_.size(); ++i) {
      if (lossy && per_[i].received < per_qp_) {
        lost += per_qp_ - per_[i].received;
        continue;
      }
      ++checked;
      if (per_[i].last_buf == nullptr) {
        dc.fail("QP " + std::to_string(i) + " received nothing");
        return dc;
      }
      const uint64_t bad = check_pattern(per_[i].last_buf, cfg_.size,
                                         last_seed(side_.qp(i).remote.psn, cfg_.size), 0);
      if (bad != cfg_.size) {
        dc.fail("SEND data mismatch on QP " + std::to_string(i) + " at byte " +
                std::to_string(bad) + " of the last message");
        return dc;
      }
    }
    if (lost == 0) {
      dc.pass("last SEND of each QP verified (" + std::to_string(cfg_.size) + " B)");
    } else {
      dc.note = std::to_string(lost) + " of " + std::to_string(per_qp_ * per_.size()) +
                " datagrams lost (UD: nothing is sent again); last SEND verified on " +
                std::to_string(checked) + " of " + std::to_string(per_.size()) + " QPs";
      dc.checked = checked > 0;
    }
    return dc;
  }

 private:
  struct PerQp {
    uint64_t posted = 0, received = 0;
    Cycler loc;
    const uint8_t* last_buf = nullptr;
  };

  void post_recv(size_t i) noexcept {
    QpRes& q = side_.qp(i);
    const uint64_t off = per_[i].loc.next();
    const Sge sge{addr(q.target + off), static_cast<uint32_t>(cfg_.size + cfg_.recv_extra),
                  side_.key()};
    if (const Status s = q.receive(encode(i, off), sge); s != Status::kSuccess) {
      fail("post_recv failed: " + std::string(to_string(s)));
      return;
    }
    ++per_[i].posted;
  }

  void poll() noexcept {
    std::span<ResultEx> r(cqe_);
    const size_t n = poll_cqs(side_.rcqs(), r);
    if (n == 0) {
      if (stopping_) ++idle_polls_;
      return;
    }
    idle_polls_ = 0;
    const uint64_t now = rte_rdtsc();
    if (tsc_start == 0) tsc_start = now;
    for (size_t k = 0; k < n; ++k) {
      if (!check_completion(r[k])) return;
      const size_t qi = ctx_qp(r[k].request_context);
      if (qi >= per_.size()) {
        fail("receive completion with an unknown context");
        return;
      }
      if (r[k].bytes_transferred != cfg_.size + cfg_.recv_extra) {
        fail("received " + std::to_string(r[k].bytes_transferred) + " bytes, expected " +
             std::to_string(cfg_.size + cfg_.recv_extra));
        return;
      }
      PerQp& p = per_[qi];
      ++p.received;
      ++messages;
      p.last_buf = side_.qp(qi).target + ctx_val(r[k].request_context) + cfg_.recv_extra;
      if (p.posted < per_qp_ && !stopping_) post_recv(qi);
    }
    tsc_end = now;
    record_event(now);
  }

  std::vector<PerQp> per_;
  uint64_t per_qp_ = 0;
  bool stopping_ = false;
  uint64_t stop_expected_ = 0;
  uint64_t stop_tsc_ = 0;
  uint64_t idle_polls_ = 0;
};

// ---- Latency --------------------------------------------------------------------------------

class Lat final : public Runner {
 public:
  Lat(Side& side, const RunConfig& cfg) : Runner(side, cfg), q_(side.qp(0)) {
    n_ = cfg.duration > 0 ? kUnbounded : cfg.iters;
    tposted.reserve(cfg.duration > 0 ? (1u << 20) : cfg.iters);
    w_ = request_template(side, 0, cfg);
    w_.context = encode(0, 1);
    prepare_last(side, cfg);
    poll_byte_ = q_.target + cfg.size - 1;
    if (cfg.test.verb == Verb::kSend) {
      const uint64_t depth = std::min<uint64_t>(cfg.rx_depth, n_);
      for (uint64_t k = 0; k < depth && !failed(); ++k) post_recv();
    }
    initiator_ = initiator(cfg.test, cfg.role);
    phase_ = initiator_ ? Phase::kPost : Phase::kWaitRecv;
  }

  bool step() noexcept override {
    begin_step();
    const uint64_t now = rte_rdtsc();
    if (tsc_start == 0) {
      tsc_start = now;
      if (cfg_.duration > 0) end_tsc_ = now + duration_tsc(cfg_.duration);
    }
    if (cfg_.test.verb == Verb::kSend) reap_sends();
    switch (phase_) {
      case Phase::kPost:
        post(now);
        break;
      case Phase::kWaitComp:
        wait_comp();
        break;
      case Phase::kWaitRecv:
        wait_recv();
        break;
      case Phase::kDrain:
        if (sends_done_ >= scnt_) finish();
        break;
      case Phase::kDone:
        break;
    }
    if (failed()) phase_ = Phase::kDone;
    done_ = phase_ == Phase::kDone;
    return done_;
  }

  void stop(uint64_t) noexcept override { stopping_ = true; }
  uint64_t progress() const noexcept override { return scnt_ + rcnt_; }

  DataCheck check_data() override {
    DataCheck dc;
    const Verb v = cfg_.test.verb;
    if (!cfg_.peer_urnic) {
      dc.note = v == Verb::kSend
                    ? "lengths checked, contents not: the peer is perftest (random data)"
                    : "contents not checked: the peer is perftest (random data)";
      dc.checked = v == Verb::kSend;
      return dc;
    }
    if (v == Verb::kRead || v == Verb::kAtomic) {
      if (v == Verb::kRead) {
        const uint64_t bad = check_pattern(q_.last, cfg_.size, region_seed(q_.remote.psn), 0);
        if (bad != cfg_.size)
          dc.fail("READ data mismatch at byte " + std::to_string(bad) + " of the last message");
        else
          dc.pass("last READ verified (" + std::to_string(cfg_.size) + " B)");
      } else {
        uint64_t got = 0;
        std::memcpy(&got, q_.last, 8);
        if (got != scnt_ - 1)
          dc.fail("last FETCH_ADD returned " + std::to_string(got) + ", expected " +
                  std::to_string(scnt_ - 1));
        else
          dc.pass("last FETCH_ADD result verified");
      }
      return dc;
    }
    // WRITE / SEND receivers: the peer's last message is its `last` stream (the initiator of a
    // duration run is the only side that knows which message is last).
    if (cfg_.duration > 0 && initiator_) {
      dc.note = "checked by the other side (duration mode)";
      return dc;
    }
    if (rcnt_ == 0) {
      dc.fail("nothing received");
      return dc;
    }
    const uint64_t body = v == Verb::kWrite ? cfg_.size - 1 : cfg_.size;
    const uint64_t bad =
        check_pattern(q_.target + cfg_.recv_extra, body, last_seed(q_.remote.psn, cfg_.size), 0);
    if (bad != body) {
      dc.fail(std::string(v == Verb::kWrite ? "WRITE" : "SEND") + " data mismatch at byte " +
              std::to_string(bad) + " of the last message");
    } else if (v == Verb::kWrite && *poll_byte_ != static_cast<uint8_t>(rcnt_)) {
      dc.fail("last WRITE carries counter " + hex(*poll_byte_) + ", expected " +
              hex(static_cast<uint8_t>(rcnt_)));
    } else {
      dc.pass(std::string("last ") + (v == Verb::kWrite ? "WRITE" : "SEND") + " verified (" +
              std::to_string(cfg_.size) + " B)");
    }
    return dc;
  }

 private:
  enum class Phase : uint8_t { kPost, kWaitComp, kWaitRecv, kDrain, kDone };

  void post(uint64_t now) noexcept {
    // In a duration run only the initiator decides which message is the last one; the
    // responding side answers until the initiator stops.
    const bool last = cfg_.duration > 0 ? initiator_ && now >= end_tsc_ : scnt_ + 1 >= n_;
    uint8_t* buf = last ? q_.last : q_.src;
    if (cfg_.test.verb == Verb::kWrite) {
      // The peer polls the last byte of its buffer for this counter (run_iter_lat_write).
      buf[cfg_.size - 1] = static_cast<uint8_t>(scnt_ + 1);
    }
    w_.sge.addr = reinterpret_cast<uint64_t>(buf);
    tposted.push_back(now);
    if (const Status s = q_.post(w_); s != Status::kSuccess) {
      fail("post_send failed: " + std::string(to_string(s)));
      return;
    }
    ++scnt_;
    if (last) n_ = scnt_;
    switch (cfg_.test.verb) {
      case Verb::kWrite:
      case Verb::kRead:
      case Verb::kAtomic:
        phase_ = Phase::kWaitComp;
        break;
      case Verb::kSend:
        after_send();
        break;
    }
  }

  // What follows our message k: the reply to it (initiator), the next request (responder
  // side), or the end.
  void after_send() noexcept {
    if (rcnt_ < scnt_ || scnt_ < n_)
      phase_ = Phase::kWaitRecv;
    else
      phase_ = cfg_.test.verb == Verb::kSend ? Phase::kDrain : Phase::kDone;
    if (phase_ == Phase::kDone) finish();
  }

  void wait_comp() noexcept {
    std::span<ResultEx> r(cqe_.data(), 4);
    const size_t n = poll_cqs(side_.scqs(), r);
    if (n == 0) return;
    for (size_t k = 0; k < n; ++k)
      if (!check_completion(r[k])) return;
    ++comps_;
    if (cfg_.test.verb == Verb::kRead || cfg_.test.verb == Verb::kAtomic) {
      if (scnt_ < n_) {
        phase_ = Phase::kPost;
      } else {
        phase_ = Phase::kDone;
        finish();
      }
      return;
    }
    after_send();
  }

  void wait_recv() noexcept {
    bool got = false;
    if (cfg_.test.verb == Verb::kWrite) {
      const uint8_t b = std::atomic_ref<uint8_t>(*poll_byte_).load(std::memory_order_acquire);
      got = b == static_cast<uint8_t>(rcnt_ + 1);
    } else {
      std::span<ResultEx> r(cqe_.data(), 4);
      const size_t n = poll_cqs(side_.rcqs(), r);
      for (size_t k = 0; k < n; ++k) {
        if (!check_completion(r[k])) return;
        if (r[k].bytes_transferred != cfg_.size + cfg_.recv_extra) {
          fail("received " + std::to_string(r[k].bytes_transferred) + " bytes, expected " +
               std::to_string(cfg_.size + cfg_.recv_extra));
          return;
        }
      }
      if (n > 1) {
        fail("more than one message arrived in a ping-pong");
        return;
      }
      got = n == 1;
      if (got && recvs_posted_ < n_) post_recv();
    }
    if (!got) {
      if (stopping_ && rcnt_ >= scnt_) {
        n_ = scnt_;
        if (cfg_.test.verb == Verb::kSend)
          phase_ = Phase::kDrain;
        else
          finish();
      }
      return;
    }
    ++rcnt_;
    if (rcnt_ > scnt_ || scnt_ < n_)
      phase_ = Phase::kPost;
    else
      phase_ = cfg_.test.verb == Verb::kSend ? Phase::kDrain : Phase::kDone;
    if (phase_ == Phase::kDone) finish();
  }

  void reap_sends() noexcept {
    if (phase_ == Phase::kDone) return;
    std::span<ResultEx> r(cqe_.data(), 8);
    // Only the drain waits for these; elsewhere an arm would wake the thread for nothing.
    const size_t n =
        phase_ == Phase::kDrain ? poll_cqs(side_.scqs(), r) : take_cqs(side_.scqs(), r);
    for (size_t k = 0; k < n; ++k)
      if (!check_completion(r[k])) return;
    sends_done_ += n;
  }

  void post_recv() noexcept {
    const Sge sge{addr(q_.target), static_cast<uint32_t>(cfg_.size + cfg_.recv_extra), side_.key()};
    if (const Status s = q_.receive(encode(0, 0), sge); s != Status::kSuccess) {
      fail("post_recv failed: " + std::string(to_string(s)));
      return;
    }
    ++recvs_posted_;
  }

  void finish() noexcept {
    phase_ = Phase::kDone;
    tsc_end = rte_rdtsc();
    messages = scnt_;
    iterations_ = scnt_;
  }

  QpRes& q_;
  Request w_;
  uint8_t* poll_byte_ = nullptr;
  Phase phase_ = Phase::kPost;
  uint64_t n_ = 0;
  uint64_t scnt_ = 0, rcnt_ = 0, comps_ = 0, sends_done_ = 0, recvs_posted_ = 0;
  bool stopping_ = false;
  bool initiator_ = true;
};

}  // namespace

bool initiator(Test t, Role r) noexcept {
  switch (t.verb) {
    case Verb::kWrite:
      // run_iter_lat_write(): the server skips its first wait and writes first.
      return r == Role::kServer;
    case Verb::kSend:
      // run_iter_lat_send(): "Server is polling on receive first".
      return r == Role::kClient;
    default:
      return true;  // READ / ATOMIC: the client alone
  }
}

void Runner::fail(const std::string& e) noexcept {
  if (error_.empty()) error_ = e;
}

void Runner::record_event(uint64_t now) noexcept {
  if (event_spacing_ == 0)
    event_spacing_ = static_cast<uint64_t>(kEventSpacingUs * 1e-6 * tsc_hz()) + 1;
  if (!events.empty() &&
      (now - events.back().first < event_spacing_ || events.size() == events.capacity())) {
    // Merge into the last point unless it opened the window (keep the first point of a run).
    if (events.size() > 1) {
      events.back() = {now, messages};
      return;
    }
  }
  if (events.size() < events.capacity()) events.emplace_back(now, messages);
}

size_t Runner::poll_cqs(std::span<Handle<Cq>> cqs, std::span<ResultEx> r) noexcept {
  size_t n = 0;
  for (Handle<Cq>& c : cqs) {
    if (n == r.size()) break;
    n += poll_cq(*c, r.subspan(n));
  }
  return n;
}

size_t Runner::take_cqs(std::span<Handle<Cq>> cqs, std::span<ResultEx> r) noexcept {
  size_t n = 0;
  for (Handle<Cq>& c : cqs) {
    if (n == r.size()) break;
    n += c->get_results_ex(r.subspan(n));
  }
  return n;
}

size_t Runner::poll_cq(Cq& cq, std::span<ResultEx> r) noexcept {
  const size_t n = cq.get_results_ex(r);
  if (n != 0) {
    got_ = true;
  } else if (cfg_.events) {
    cq.arm(CqNotify::kAny);  // no system call: the engine or the control thread fires it
    armed_ = true;
  }
  return n;
}

bool Runner::check_completion(const ResultEx& r) noexcept {
  if (r.status == Status::kSuccess) return true;
  fail("completion with error: " + std::string(to_string(r.status)) + " (" +
       describe(static_cast<WcStatus>(r.provider_error_code)) + ", vendor_err " +
       std::to_string(r.provider_error_code) + ") on QP " + hex(r.qpn));
  return false;
}

std::unique_ptr<Runner> make_bw_sender(Side& side, const RunConfig& cfg) {
  return std::make_unique<BwSender>(side, cfg);
}
std::unique_ptr<Runner> make_bw_receiver(Side& side, const RunConfig& cfg) {
  return std::make_unique<BwReceiver>(side, cfg);
}
std::unique_ptr<Runner> make_lat(Side& side, const RunConfig& cfg) {
  return std::make_unique<Lat>(side, cfg);
}

}  // namespace urnic::perf
