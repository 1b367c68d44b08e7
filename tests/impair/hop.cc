// urnic-hop: a forwarding hop that impairs frames between two Ethernet interfaces, for testing
// urnic (and any RoCEv2 peer) with faults applied outside the endpoint (issue 18): run it in a
// network namespace between two veth pairs, and the two ends talk through it.
//
//   ns A: roce0 ==veth== h0 :ns H (urnic-hop h0 h1): h1 ==veth== roce1 :ns B
//
// Every frame read on one interface is written to the other, unless the impairments say
// otherwise. By default only RoCEv2 frames (UDP destination port 4791) are impaired; ARP, ND
// and the rest pass untouched (--all impairs everything; --opcode=N only RoCEv2 frames whose
// BTH opcode is N, e.g. 17 for ACKs). Impairments, per direction, decided
// by a seeded generator (--seed) so that a run can be repeated:
//   --loss=P        drop P % of frames
//   --drop-every=K  drop every K-th frame (deterministic; with --opcode, every K-th of those)
//   --dup=P         send P % of frames twice
//   --corrupt=P     flip one byte of P % of frames past the UDP header (the ICRC catches it)
//   --reorder=P     hold P % of frames back and send them after the next frame
//   --delay=US      hold every frame US microseconds (a FIFO: the order is kept)
//   --rate=MBPS     forward at most MBPS megabits per second (0: no limit); with
//   --queue=N       frames waiting at most (delay and rate queue; tail drop beyond), default 4096
//   --rcvbuf=BYTES  the kernel receive buffer of each socket (finite buffers drop bursts)
// Counters go to stdout when the hop stops (SIGINT / SIGTERM) and, with --stats=SEC, every SEC
// seconds; one line per direction.
//
// It is a test tool: one thread, raw AF_PACKET sockets, poll(); tens of thousands of frames per
// second, which is what the impairment tests need.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Config {
  std::string ifname[2];
  double loss = 0, dup = 0, corrupt = 0, reorder = 0;  // percent
  uint64_t drop_every = 0;
  uint64_t delay_us = 0;
  double rate_mbps = 0;
  size_t queue = 4096;
  int rcvbuf = 0;
  bool all = false;
  int opcode = -1;  // impair only this BTH opcode (-1: every RoCEv2 frame)
  uint64_t seed = 1;
  double stats_s = 0;
};

struct Counters {
  uint64_t rx = 0, tx = 0, lost = 0, duplicated = 0, corrupted = 0, reordered = 0, queue_drops = 0,
           send_errors = 0, passed = 0;
};

struct Frame {
  Clock::time_point due;
  std::vector<uint8_t> bytes;
};

// One direction: frames read on `in` leave on `out`.
struct Path {
  int in = -1, out = -1;
  const char* name = "";
  Counters c;
  uint64_t matched = 0;       // frames the impairments applied to (for --drop-every)
  std::deque<Frame> q;        // waiting for their time (delay, rate)
  std::vector<uint8_t> held;  // a frame held back for reordering
  bool holding = false;
  Clock::time_point next_free{};  // rate limit: when the line is free again
};

std::atomic<bool> g_stop{false};
void on_signal(int) { g_stop = true; }

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "urnic-hop: %s\n", why.c_str());
  std::exit(2);
}

int open_raw(const std::string& ifname, int rcvbuf) {
  const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
  if (fd < 0) die(std::string("socket(AF_PACKET): ") + std::strerror(errno));
  const unsigned idx = ::if_nametoindex(ifname.c_str());
  if (idx == 0) die("no interface '" + ifname + "'");
  sockaddr_ll a{};
  a.sll_family = AF_PACKET;
  a.sll_protocol = htons(ETH_P_ALL);
  a.sll_ifindex = static_cast<int>(idx);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    die("bind(" + ifname + "): " + std::strerror(errno));
  if (rcvbuf > 0 && ::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) != 0)
    die(std::string("SO_RCVBUF: ") + std::strerror(errno));
  return fd;
}

// The UDP destination port of an IPv4 / IPv6 frame (no VLAN), or 0; *l4 is where the UDP
// payload starts.
uint16_t udp_dport(const std::vector<uint8_t>& f, size_t* payload) {
  if (f.size() < 14) return 0;
  const uint16_t et = static_cast<uint16_t>(f[12] << 8 | f[13]);
  size_t udp = 0;
  if (et == 0x0800 && f.size() >= 34 && f[23] == 17) {
    udp = 14 + static_cast<size_t>(f[14] & 0x0f) * 4;
  } else if (et == 0x86DD && f.size() >= 54 && f[20] == 17) {
    udp = 54;
  } else {
    return 0;
  }
  if (f.size() < udp + 8) return 0;
  *payload = udp + 8;
  return static_cast<uint16_t>(f[udp + 2] << 8 | f[udp + 3]);
}

class Hop {
 public:
  explicit Hop(const Config& cfg) : cfg_(cfg), rng_(cfg.seed) {
    const int a = open_raw(cfg.ifname[0], cfg.rcvbuf), b = open_raw(cfg.ifname[1], cfg.rcvbuf);
    paths_[0].in = a;
    paths_[0].out = b;
    paths_[0].name = "0->1";
    paths_[1].in = b;
    paths_[1].out = a;
    paths_[1].name = "1->0";
  }

  void run() {
    auto next_stats = Clock::now() + stats_period();
    while (!g_stop) {
      pollfd p[2] = {{paths_[0].in, POLLIN, 0}, {paths_[1].in, POLLIN, 0}};
      (void)::poll(p, 2, wait_ms());
      for (int i = 0; i < 2; ++i) {
        if (p[i].revents & POLLIN) receive(paths_[i]);
      }
      const auto now = Clock::now();
      for (Path& path : paths_) drain(path, now);
      if (cfg_.stats_s > 0 && now >= next_stats) {
        print();
        next_stats = now + stats_period();
      }
    }
    print();
  }

 private:
  Clock::duration stats_period() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(cfg_.stats_s));
  }
  // poll() timeout: short while frames wait for their time.
  int wait_ms() const {
    for (const Path& p : paths_) {
      if (!p.q.empty()) return 0;
    }
    return 100;
  }
  bool chance(double percent) { return percent > 0 && dist_(rng_) * 100 < percent; }

  // Reads what the socket has (a burst at most), applying the impairments.
  void receive(Path& p) {
    for (int n = 0; n < 64; ++n) {
      std::vector<uint8_t> f(16384);
      sockaddr_ll from{};
      socklen_t fl = sizeof(from);
      const ssize_t k =
          ::recvfrom(p.in, f.data(), f.size(), 0, reinterpret_cast<sockaddr*>(&from), &fl);
      if (k < 0) return;
      // Our own transmissions on this interface come back as PACKET_OUTGOING.
      if (from.sll_pkttype == PACKET_OUTGOING) continue;
      f.resize(static_cast<size_t>(k));
      ++p.c.rx;
      impair(p, std::move(f));
    }
  }

  void impair(Path& p, std::vector<uint8_t> f) {
    size_t payload = 0;
    const bool roce = udp_dport(f, &payload) == 4791;
    if ((!cfg_.all && !roce) ||
        (cfg_.opcode >= 0 && (!roce || payload >= f.size() || f[payload] != cfg_.opcode))) {
      ++p.c.passed;
      enqueue(p, std::move(f));
      return;
    }
    ++p.matched;
    if (chance(cfg_.loss) || (cfg_.drop_every != 0 && p.matched % cfg_.drop_every == 0)) {
      ++p.c.lost;
      return;
    }
    if (chance(cfg_.corrupt)) {
      if (payload == 0) (void)udp_dport(f, &payload);
      const size_t at = payload + (payload < f.size() ? rng_() % (f.size() - payload) : 0);
      if (at < f.size()) {
        f[at] ^= static_cast<uint8_t>(1u << (rng_() % 8));
        ++p.c.corrupted;
      }
    }
    const bool twice = chance(cfg_.dup);
    if (!p.holding && chance(cfg_.reorder)) {
      ++p.c.reordered;
      p.held = std::move(f);
      p.holding = true;
      return;
    }
    if (twice) {
      ++p.c.duplicated;
      enqueue(p, f);
    }
    enqueue(p, std::move(f));
    if (p.holding) {  // the held frame goes after the one that overtook it
      p.holding = false;
      enqueue(p, std::move(p.held));
    }
  }

  void enqueue(Path& p, std::vector<uint8_t> f) {
    if (p.q.size() >= cfg_.queue) {
      ++p.c.queue_drops;
      return;
    }
    auto due = Clock::now() + std::chrono::microseconds(cfg_.delay_us);
    if (cfg_.rate_mbps > 0) {
      // Serialisation at the line rate: the frame leaves when the line is free.
      const auto wire = std::chrono::nanoseconds(
          static_cast<int64_t>(static_cast<double>(f.size() + 24) * 8e3 / cfg_.rate_mbps));
      p.next_free = std::max(p.next_free, due) + wire;
      due = p.next_free;
    }
    p.q.push_back(Frame{due, std::move(f)});
  }

  void drain(Path& p, Clock::time_point now) {
    while (!p.q.empty() && p.q.front().due <= now) {
      const auto& b = p.q.front().bytes;
      if (::send(p.out, b.data(), b.size(), 0) == static_cast<ssize_t>(b.size()))
        ++p.c.tx;
      else
        ++p.c.send_errors;
      p.q.pop_front();
    }
  }

  void print() {
    for (const Path& p : paths_) {
      const Counters& c = p.c;
      std::printf(
          "hop %s: rx %llu tx %llu lost %llu duplicated %llu corrupted %llu reordered %llu "
          "queue_drops %llu send_errors %llu passed %llu\n",
          p.name, static_cast<unsigned long long>(c.rx), static_cast<unsigned long long>(c.tx),
          static_cast<unsigned long long>(c.lost), static_cast<unsigned long long>(c.duplicated),
          static_cast<unsigned long long>(c.corrupted),
          static_cast<unsigned long long>(c.reordered),
          static_cast<unsigned long long>(c.queue_drops),
          static_cast<unsigned long long>(c.send_errors),
          static_cast<unsigned long long>(c.passed));
    }
    std::fflush(stdout);
  }

  Config cfg_;
  Path paths_[2];
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> dist_{0.0, 1.0};
};

// "--key=value" numbers: the whole value must parse and lie in [lo, hi].
double number(const std::string& arg, size_t eq, double lo, double hi) {
  const std::string v = arg.substr(eq + 1);
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || *end != '\0' || !(d >= lo && d <= hi))
    die("bad value in '" + arg + "' (" + std::to_string(lo) + " .. " + std::to_string(hi) + ")");
  return d;
}

Config parse(int argc, char** argv) {
  Config c;
  int names = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    const std::string key = a.substr(0, eq);
    if (a == "--all") {
      c.all = true;
    } else if (eq != std::string::npos && key == "--loss") {
      c.loss = number(a, eq, 0, 100);
    } else if (eq != std::string::npos && key == "--dup") {
      c.dup = number(a, eq, 0, 100);
    } else if (eq != std::string::npos && key == "--corrupt") {
      c.corrupt = number(a, eq, 0, 100);
    } else if (eq != std::string::npos && key == "--reorder") {
      c.reorder = number(a, eq, 0, 100);
    } else if (eq != std::string::npos && key == "--delay") {
      c.delay_us = static_cast<uint64_t>(number(a, eq, 0, 10e6));
    } else if (eq != std::string::npos && key == "--rate") {
      c.rate_mbps = number(a, eq, 0, 1e6);
    } else if (eq != std::string::npos && key == "--queue") {
      c.queue = static_cast<size_t>(number(a, eq, 1, 1e6));
    } else if (eq != std::string::npos && key == "--rcvbuf") {
      c.rcvbuf = static_cast<int>(number(a, eq, 0, 1 << 30));
    } else if (eq != std::string::npos && key == "--drop-every") {
      c.drop_every = static_cast<uint64_t>(number(a, eq, 0, 1e9));
    } else if (eq != std::string::npos && key == "--opcode") {
      c.opcode = static_cast<int>(number(a, eq, 0, 255));
    } else if (eq != std::string::npos && key == "--seed") {
      c.seed = static_cast<uint64_t>(number(a, eq, 0, 1e15));
    } else if (eq != std::string::npos && key == "--stats") {
      c.stats_s = number(a, eq, 0, 86400);
    } else if (!a.empty() && a[0] != '-' && names < 2) {
      c.ifname[names++] = a;
    } else {
      die("unknown argument '" + a + "'; usage: urnic-hop IF0 IF1 [--loss=P] [--dup=P] " +
          "[--corrupt=P] [--reorder=P] [--delay=US] [--rate=MBPS] [--queue=N] [--rcvbuf=BYTES] " +
          "[--seed=N] [--stats=SEC] [--all] [--opcode=N] [--drop-every=K]");
    }
  }
  if (names != 2) die("usage: urnic-hop IF0 IF1 [impairments] (see the source's header)");
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const Config cfg = parse(argc, argv);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  Hop hop(cfg);
  std::printf("urnic-hop: %s <-> %s ready\n", cfg.ifname[0].c_str(), cfg.ifname[1].c_str());
  std::fflush(stdout);
  hop.run();
  return 0;
}
