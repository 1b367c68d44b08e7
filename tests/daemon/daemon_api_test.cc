// Attach mode through the unchanged public API (issue 38 item 2, docs/daemon.md "The public API
// in attach mode"): client processes open urnicd's adapters by name (Adapter::open(name)) and use
// Adapter / Pd / Cq / Mr / Qp / QpConnectExtension exactly as embedded programs do; only the
// adapter's opening differs. Buffers come from alloc_memory (shared from the start) and from
// the heap (moved in place at registration). Every byte is checked, every completion counted;
// what attach mode does not offer yet is refused with kNotSupported and a reason, never left
// silent; the close rules (an antecedent's close pends until its successors are closed) hold.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <poll.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../common/shell.h"
#include "attach_side.h"
#include "urnic/daemon.h"
#include "urnic/urnic.h"

namespace urnic {
namespace {

using namespace std::chrono_literals;
using namespace test;

class DaemonApi : public DaemonFixture {
 protected:
  DaemonApi() : DaemonFixture("api") {}
};

constexpr uint32_t kWrites = 32, kLen = 4096;
constexpr size_t kMem = 1 << 20;

// One client's objects, made with the public API only.
struct ApiSide {
  std::unique_ptr<Adapter> adapter;
  Handle<Pd> pd;
  Handle<Cq> cq;
  Handle<Mr> mr;
  Handle<Qp> qp;
  uint8_t* mem = nullptr;

  // `mem_` is the memory to register (alloc_memory's or the heap's).
  std::string open(const char* name, uint8_t* mem_) {
    mem = mem_;
    if (Adapter::open(name, &adapter) != Status::kSuccess)
      return std::string("open: ") + last_error();
    if (!adapter->attached_mode()) return "not in attach mode";
    if (adapter->create_pd(nullptr, nullptr, &pd) != Status::kSuccess) return "create_pd";
    if (adapter->create_cq(256, nullptr, nullptr, nullptr, nullptr, &cq) != Status::kSuccess)
      return std::string("create_cq: ") + last_error();
    if (pd->create_mr(false, nullptr, nullptr, &mr) != Status::kSuccess) return "create_mr";
    constexpr uint32_t kRights = mr_flag::kAllowLocalWrite | mr_flag::kAllowRemoteWrite |
                                 mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteAtomic;
    if (mr->register_mr(mem, kMem, kRights, nullptr, nullptr) != Status::kSuccess)
      return std::string("register_mr: ") + last_error();
    if (pd->create_qp(*cq, *cq, this, 64, 128, 2, 2, 64, nullptr, nullptr, &qp) != Status::kSuccess)
      return std::string("create_qp: ") + last_error();
    return "";
  }
  PeerInfo me() {
    return PeerInfo{qp->query_extension<QpConnectExtension>()->qpn(), mr->get_remote_token(),
                    reinterpret_cast<uint64_t>(mem)};
  }
  // Exchanges QPN, token and address over `sock`, then connects.
  std::string join(int sock, uint32_t peer_ip, PeerInfo* peer) {
    const PeerInfo mine = me();
    if (::write(sock, &mine, sizeof mine) != sizeof mine) return "exchange write";
    timeval tv{20, 0};
    ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::read(sock, peer, sizeof *peer) != sizeof *peer) return "exchange read";
    return connect(peer_ip, peer);
  }
  // RTR and RTS towards `peer` at `peer_ip`.
  std::string connect(uint32_t peer_ip, const PeerInfo* peer) {
    auto* c = qp->query_extension<QpConnectExtension>();
    if (c == nullptr) return "no QpConnectExtension";
    QpAttributes a;
    a.state = QpState::kRtr;
    a.path_mtu = 1024;
    a.dest_qpn = peer->qpn;
    a.av.dst_ipv4 = peer_ip;
    namespace m = qp_attr_mask;
    if (c->modify(a,
                  m::kState | m::kPathMtu | m::kDestQpn | m::kRqPsn | m::kMaxDestRdAtomic |
                      m::kMinRnrTimer | m::kAv,
                  nullptr, nullptr) != Status::kSuccess)
      return std::string("RTR: ") + last_error();
    a.state = QpState::kRts;
    if (c->modify(
            a, m::kState | m::kSqPsn | m::kTimeout | m::kRetryCnt | m::kRnrRetry | m::kMaxRdAtomic,
            nullptr, nullptr) != Status::kSuccess)
      return std::string("RTS: ") + last_error();
    QpAttributes q;
    if (c->query(&q) != Status::kSuccess || q.state != QpState::kRts || q.dest_qpn != peer->qpn ||
        c->state() != QpState::kRts)
      return "query after RTS";
    return "";
  }
  // Polls until `n` completions or 20 s; all into `out`.
  size_t wait(size_t n, std::vector<ResultEx>* out) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    ResultEx r[16];
    for (uint32_t idle = 0; out->size() < n && std::chrono::steady_clock::now() < deadline;) {
      const size_t got = cq->get_results_ex(r);
      out->insert(out->end(), r, r + got);
      if (got == 0 && ++idle % 1024 == 0 && !daemon_alive()) break;
      if (got == 0) std::this_thread::yield();
    }
    return out->size();
  }
};

// The writer: memory from alloc_memory; 32 deferred WRITEs of 4 KiB, a READ of them back, an
// inline SEND.
std::string writer(int sock) {
  void* m = nullptr;
  if (alloc_memory(kMem, &m) != Status::kSuccess) return std::string("alloc: ") + last_error();
  ApiSide s;
  if (std::string e = s.open("urnic0", static_cast<uint8_t*>(m)); !e.empty()) return e;
  PeerInfo peer{};
  if (std::string e = s.join(sock, kIpB, &peer); !e.empty()) return e;
  for (uint32_t i = 0; i < kWrites; ++i) {
    uint8_t* src = s.mem + i * kLen;
    for (uint32_t j = 0; j < kLen; ++j) src[j] = static_cast<uint8_t>(i * 13 + j);
    const Sge sge{reinterpret_cast<uint64_t>(src), kLen, s.mr->get_local_token()};
    if (s.qp->write(reinterpret_cast<void*>(uint64_t{i}), {&sge, 1}, peer.addr + i * kLen,
                    peer.rkey, i + 1 < kWrites ? op_flag::kDefer : 0) != Status::kSuccess)
      return "write " + std::to_string(i);
  }
  const Sge back{reinterpret_cast<uint64_t>(s.mem + kMem / 2), kWrites * kLen,
                 s.mr->get_local_token()};
  if (s.qp->read(reinterpret_cast<void*>(uint64_t{1000}), {&back, 1}, peer.addr, peer.rkey, 0) !=
      Status::kSuccess)
    return "read";
  char msg[48];
  for (size_t j = 0; j < sizeof msg; ++j) msg[j] = static_cast<char>('a' + j % 26);
  const Sge inl{reinterpret_cast<uint64_t>(msg), sizeof msg, 0};
  if (s.qp->send(reinterpret_cast<void*>(uint64_t{2000}), {&inl, 1}, op_flag::kInline) !=
      Status::kSuccess)
    return "send";
  std::vector<ResultEx> done;
  if (s.wait(kWrites + 2, &done) != kWrites + 2)
    return "completions: " + std::to_string(done.size());
  for (size_t i = 0; i < done.size(); ++i) {
    const uint64_t want = i < kWrites ? i : i == kWrites ? 1000 : 2000;
    if (done[i].status != Status::kSuccess || done[i].qp_context != &s ||
        reinterpret_cast<uint64_t>(done[i].request_context) != want)
      return "completion " + std::to_string(i);
  }
  if (std::memcmp(s.mem, s.mem + kMem / 2, kWrites * kLen) != 0) return "read-back bytes";
  // Memory in use by an MR stays; once the MR is closed it can go.
  if (free_memory(m) != Status::kDeviceBusy) return "free_memory of registered memory";
  s.qp.reset();
  s.mr.reset();
  if (free_memory(m) != Status::kSuccess) return std::string("free_memory: ") + last_error();
  return "";
}

// The target: heap memory (moved in place when registered), a receive for the SEND; checks
// every byte. Attaches through $URNIC_DAEMON, as the drop-in libraries do.
std::string target(const std::string& socket, int sock) {
  ::setenv("URNIC_DAEMON", socket.c_str(), 1);
  std::vector<uint8_t> heap(kMem + 4096);
  uint8_t* mem = heap.data() + 100;  // not page-aligned: whole pages around it move
  ApiSide s;
  if (std::string e = s.open("urnic1", mem); !e.empty()) return e;
  const Sge r{reinterpret_cast<uint64_t>(mem + kMem - 4096), 4096, s.mr->get_local_token()};
  if (s.qp->receive(reinterpret_cast<void*>(uint64_t{77}), {&r, 1}) != Status::kSuccess)
    return "receive";
  PeerInfo peer{};
  if (std::string e = s.join(sock, kIpA, &peer); !e.empty()) return e;
  std::vector<ResultEx> done;
  if (s.wait(1, &done) != 1) return "no receive completion";
  if (done[0].status != Status::kSuccess || done[0].bytes_transferred != 48 ||
      reinterpret_cast<uint64_t>(done[0].request_context) != 77 ||
      done[0].type != OperationType::kReceive)
    return "receive completion";
  for (uint32_t i = 0; i < kWrites; ++i)
    for (uint32_t j = 0; j < kLen; ++j)
      if (mem[i * kLen + j] != static_cast<uint8_t>(i * 13 + j))
        return "written byte " + std::to_string(i * kLen + j);
  for (int j = 0; j < 48; ++j)
    if (mem[kMem - 4096 + j] != 'a' + j % 26) return "sent byte " + std::to_string(j);
  char c;
  (void)::read(sock, &c, 1);  // the writer hangs up once it has every completion
  return "";
}

TEST_F(DaemonApi, TwoProcessesWriteReadAndSendWithThePublicApi) {
  const pid_t a = child([&] {
    if (attach(socket_, "api-writer") != Status::kSuccess) return std::string(last_error());
    return writer(sp_[0]);
  });
  const pid_t b = child([&] { return target(socket_, sp_[1]); });
  EXPECT_EQ(reap(a), 0) << daemon_->output();
  ::shutdown(sp_[0], SHUT_RDWR);
  EXPECT_EQ(reap(b), 0) << daemon_->output();
}

void on_close(void* ctx) { static_cast<std::atomic<int>*>(ctx)->fetch_add(1); }

TEST_F(DaemonApi, WhatAttachModeLacksIsRefusedAndTheCloseRulesHold) {
  ASSERT_EQ(attach(socket_, "api-rules"), Status::kSuccess) << last_error();
  std::unique_ptr<Adapter> ad;
  EXPECT_EQ(Adapter::open("urnic9", &ad), Status::kBadNetworkName);
  EXPECT_NE(std::string(last_error()).find("urnic9"), std::string::npos) << last_error();
  ASSERT_EQ(Adapter::open("urnic0", &ad), Status::kSuccess) << last_error();
  // The adapter's identity is the daemon's port: its GIDs (link-local, then IPv4-mapped).
  auto* ext = ad->query_extension<AdapterExtension>();
  ASSERT_NE(ext, nullptr);
  EXPECT_EQ(ext->local_address().ipv4, kIpA);
  ASSERT_EQ(ext->gid_count(), 2u);
  std::array<uint8_t, 16> gid{};
  ASSERT_EQ(ext->query_gid(1, &gid), Status::kSuccess);
  const std::array<uint8_t, 16> mapped{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  EXPECT_EQ(gid, mapped);
  EXPECT_EQ(ad->adapter_info().rdma_technology, RdmaTechnology::kRocev2);

  Handle<Pd> pd;
  Handle<Cq> cq;
  ASSERT_EQ(ad->create_pd(nullptr, nullptr, &pd), Status::kSuccess);
  ASSERT_EQ(ad->create_cq(64, nullptr, nullptr, nullptr, nullptr, &cq), Status::kSuccess);
  // Refused with a reason, not accepted and left silent.
  auto unsupported = [](Status s) {
    return s == Status::kNotSupported &&
           std::string(last_error()).find("attach mode") != std::string::npos;
  };
  uint32_t token = 0;
  EXPECT_TRUE(unsupported(pd->get_privileged_memory_region_token(&token)));
  EXPECT_TRUE(unsupported(ext->set_faults(FaultConfig{}, FaultConfig{})));
  Handle<Mr> mr;
  // Counters come from the daemon: the port's, and this process's QPs (none yet).
  AdapterCounters counters;
  ASSERT_EQ(ad->query_counters(&counters), Status::kSuccess) << last_error();
  EXPECT_EQ(counters.engines, ad->engines());
  EXPECT_EQ(counters.qps.tx_packets, 0u);
  PortCounters pc;
  EXPECT_EQ(ad->query_engine_counters(0, &pc), Status::kSuccess);
  EXPECT_EQ(ad->query_engine_counters(ad->engines(), &pc), Status::kInvalidParameter);
  // The stack is not private anonymous memory that can move: a clear error, nothing moved.
  ASSERT_EQ(pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  char stack_buf[256];
  EXPECT_EQ(mr->register_mr(stack_buf, sizeof stack_buf, 0, nullptr, nullptr),
            Status::kNotSupported);
  EXPECT_NE(std::string(last_error()).find("[stack]"), std::string::npos) << last_error();
  // A file's pages cannot move either.
  const int fd = ::open("/proc/self/exe", O_RDONLY);
  void* file = ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ASSERT_NE(file, MAP_FAILED);
  EXPECT_EQ(mr->register_mr(file, 4096, 0, nullptr, nullptr), Status::kNotSupported);
  ::munmap(file, 4096);

  // Registered heap memory, a QP; then the PD closed first: its close pends until the QP's and
  // the MR's closes, and its callback comes once, with the last of them.
  // 1 MiB: its own mapping (glibc and ASan alike). A small heap buffer of an ASan build sits in
  // ASan's fixed allocator range, which an ASan-built daemon has reserved too: kInvalidAddress.
  std::vector<uint8_t> heap(1 << 20);
  ASSERT_EQ(mr->register_mr(heap.data(), heap.size(), mr_flag::kAllowRemoteWrite, nullptr, nullptr),
            Status::kSuccess)
      << last_error();
  EXPECT_NE(mr->get_local_token(), 0u);
  Handle<Qp> qp;
  ASSERT_EQ(pd->create_qp(*cq, *cq, nullptr, 16, 16, 1, 1, 0, nullptr, nullptr, &qp),
            Status::kSuccess)
      << last_error();
  auto* qx = qp->query_extension<QpExtension>();
  ASSERT_NE(qx, nullptr);
  EXPECT_EQ(qx->max_datagram_size(), 0u);  // RC
  // The atomics' checks are made here, as embedded: a misaligned address, a result of 4 bytes.
  const Sge res4{reinterpret_cast<uint64_t>(heap.data()), 4, mr->get_local_token()};
  const Sge res8{reinterpret_cast<uint64_t>(heap.data()), 8, mr->get_local_token()};
  EXPECT_EQ(qx->fetch_add(nullptr, res4, 0x1000, 1, 1, 0), Status::kInvalidParameter);
  EXPECT_EQ(qx->fetch_add(nullptr, res8, 0x1004, 1, 1, 0), Status::kInvalidParameter);
  DaemonClient c = mine();
  EXPECT_EQ(c.pds, 1u);
  EXPECT_EQ(c.cqs, 1u);
  EXPECT_EQ(c.qps, 1u);
  EXPECT_EQ(c.mrs, 1u);
  std::atomic<int> closed{0};
  EXPECT_EQ(pd.close(on_close, &closed), Status::kPending);
  EXPECT_EQ(qp.close(nullptr, nullptr), Status::kSuccess);
  EXPECT_EQ(closed.load(), 0);
  EXPECT_EQ(mine().pds, 1u);
  EXPECT_EQ(mr.close(nullptr, nullptr), Status::kSuccess);
  // The event thread finishes the PD's close and calls back, once.
  EXPECT_TRUE(eventually([&] { return closed.load() == 1; }));
  EXPECT_EQ(closed.load(), 1);
  c = mine();
  EXPECT_EQ(c.pds + c.qps + c.mrs, 0u);
  EXPECT_EQ(c.cqs, 1u);
  // What the consumer leaves open is closed with the adapter, and its handle closes later.
  ad.reset();
  EXPECT_EQ(mine().cqs, 0u);
  cq.reset();
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace std::chrono_literals;
using namespace test;

// This process attached as `client`, `a` on urnic0 and `b` on urnic1, each on alloc_memory's
// memory; "" or what failed.
std::string open_pair(const std::string& socket, const char* client, ApiSide* a, ApiSide* b) {
  if (attach(socket, client) != Status::kSuccess) return std::string("attach: ") + last_error();
  void* ma = nullptr;
  void* mb = nullptr;
  if (alloc_memory(kMem, &ma) != Status::kSuccess || alloc_memory(kMem, &mb) != Status::kSuccess)
    return std::string("alloc_memory: ") + last_error();
  if (std::string e = a->open("urnic0", static_cast<uint8_t*>(ma)); !e.empty()) return e;
  return b->open("urnic1", static_cast<uint8_t*>(mb));
}

// B's QP replaced by one (receive depth `rq_depth`) that receives into `cq`, A and B connected,
// and `receives` receives of 64 B posted on B's memory, 64 B apart (contexts 0, 1, ...): "" or
// what failed.
std::string receive_into(ApiSide& a, ApiSide& b, Cq& cq, uint32_t rq_depth, uint64_t receives) {
  Handle<Qp> bq;
  if (b.pd->create_qp(cq, *b.cq, &b, rq_depth, 16, 1, 1, 64, nullptr, nullptr, &bq) !=
      Status::kSuccess)
    return std::string("create_qp: ") + last_error();
  b.qp = std::move(bq);
  const PeerInfo pa = a.me(), pb = b.me();
  if (std::string e = a.connect(kIpB, &pb); !e.empty()) return e;
  if (std::string e = b.connect(kIpA, &pa); !e.empty()) return e;
  for (uint64_t i = 0; i < receives; ++i) {
    const Sge r{reinterpret_cast<uint64_t>(b.mem + i * 64), 64, b.mr->get_local_token()};
    if (b.qp->receive(reinterpret_cast<void*>(i), {&r, 1}) != Status::kSuccess)
      return "receive " + std::to_string(i);
  }
  return "";
}

struct Notified {
  std::atomic<int> success{0}, cancelled{0};
};
void on_cq(void* ctx, Status s) {
  auto* n = static_cast<Notified*>(ctx);
  (s == Status::kCancelled ? n->cancelled : n->success).fetch_add(1);
}

// Whether `fd` becomes readable within 5 s; then reads it (the count of notifications).
uint64_t readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) != 1) return 0;
  uint64_t n = 0;
  return ::read(fd, &n, sizeof n) == sizeof n ? n : 0;
}

// CQ notifications in attach mode: arms answered by the daemon's bridge through the CQ's
// eventfd, delivered as the callback (the adapter's event thread) and on
// CqExtension::notification_fd; an arm that a waiting completion satisfies fires at once;
// SOLICITED is not satisfied by a plain SEND; a cancelled arm calls back with kCancelled.
// QpExtension through the rings: SEND and WRITE with immediate data, FETCH_ADD, CMP_SWAP, every
// value and byte checked.
TEST_F(DaemonApi, CqNotificationsImmediatesAndAtomics) {
  ApiSide a, b;
  ASSERT_EQ(open_pair(socket_, "api-events", &a, &b), "");
  // B's CQ with a callback: its own, made beside the one open() made.
  Notified n;
  Handle<Cq> ncq;
  ASSERT_EQ(b.adapter->create_cq(64, on_cq, &n, nullptr, nullptr, &ncq), Status::kSuccess)
      << last_error();
  ASSERT_EQ(receive_into(a, b, *ncq, 16, 8), "");  // B receives into ncq
  const PeerInfo pb = b.me();                      // A's atomics and WRITE below target B's memory
  auto* ext = ncq->query_extension<CqExtension>();
  ASSERT_NE(ext, nullptr);
  const int fd = ext->notification_fd();
  ASSERT_GE(fd, 0);
  char msg[16] = "notify me";
  const Sge inl{reinterpret_cast<uint64_t>(msg), sizeof msg, 0};
  std::vector<ResultEx> sent;
  auto send = [&](uint32_t flags) {
    ASSERT_EQ(a.qp->send(nullptr, {&inl, 1}, op_flag::kInline | flags), Status::kSuccess);
    sent.clear();
    ASSERT_EQ(a.wait(1, &sent), 1u);
    ASSERT_EQ(sent[0].status, Status::kSuccess);
  };
  ResultEx r[4];

  // 1. Armed, then a SEND: the fd and the callback, once.
  ncq->arm(CqNotify::kAny);
  send(0);
  EXPECT_EQ(readable(fd), 1u);
  EXPECT_TRUE(eventually([&] { return n.success.load() == 1; }));
  EXPECT_EQ(ncq->get_results_ex(r), 1u);
  EXPECT_EQ(r[0].bytes_transferred, sizeof msg);
  // 2. A completion waits unconsumed: the arm fires at once.
  send(0);
  ncq->arm(CqNotify::kAny);
  EXPECT_EQ(readable(fd), 1u);
  EXPECT_TRUE(eventually([&] { return n.success.load() == 2; }));
  EXPECT_EQ(ncq->get_results_ex(r), 1u);
  // 3. SOLICITED: a plain SEND does not satisfy it, a solicited one does.
  ncq->arm(CqNotify::kSolicited);
  send(0);
  EXPECT_TRUE(eventually([&] { return ncq->get_results_ex(r) == 1; }));
  send(op_flag::kSendAndSolicitEvent);
  EXPECT_EQ(readable(fd), 1u);
  EXPECT_TRUE(eventually([&] { return n.success.load() == 3; }));
  EXPECT_EQ(ncq->get_results_ex(r), 1u);
  EXPECT_NE(r[0].flags & kResultSolicited, 0u);
  // Immediates and atomics (QpExtension) through the shared rings.
  auto* ax = a.qp->query_extension<QpExtension>();
  ASSERT_NE(ax, nullptr);
  ASSERT_EQ(ax->send_with_immediate(nullptr, {&inl, 1}, op_flag::kInline, 0xabcd1234),
            Status::kSuccess);
  std::memset(a.mem, 0x5a, 256);
  const Sge w{reinterpret_cast<uint64_t>(a.mem), 256, a.mr->get_local_token()};
  ASSERT_EQ(ax->write_with_immediate(nullptr, {&w, 1}, pb.addr + 4096, pb.rkey, 0, 77),
            Status::kSuccess);
  uint64_t* word = reinterpret_cast<uint64_t*>(b.mem + 8192);
  *word = 40;
  const Sge res{reinterpret_cast<uint64_t>(a.mem + 1024), 8, a.mr->get_local_token()};
  ASSERT_EQ(ax->fetch_add(nullptr, res, pb.addr + 8192, pb.rkey, 2, 0), Status::kSuccess);
  sent.clear();
  ASSERT_EQ(a.wait(3, &sent), 3u);
  for (const ResultEx& x : sent) EXPECT_EQ(x.status, Status::kSuccess);
  EXPECT_EQ(sent[2].type, OperationType::kFetchAdd);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(a.mem + 1024), 40u);  // the original value
  EXPECT_EQ(*word, 42u);
  ASSERT_EQ(ax->compare_swap(nullptr, res, pb.addr + 8192, pb.rkey, 42, 7, 0), Status::kSuccess);
  sent.clear();
  ASSERT_EQ(a.wait(1, &sent), 1u);
  EXPECT_EQ(sent[0].status, Status::kSuccess);
  EXPECT_EQ(sent[0].type, OperationType::kCompareSwap);
  EXPECT_EQ(*word, 7u);
  std::vector<ResultEx> got;
  EXPECT_TRUE(eventually([&] {
    ResultEx x[4];
    const size_t k = ncq->get_results_ex(x);
    got.insert(got.end(), x, x + k);
    return got.size() >= 2;
  }));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_NE(got[0].flags & kResultHasImmediate, 0u);
  EXPECT_EQ(got[0].type_specific_completion_output, 0xabcd1234u);
  EXPECT_EQ(got[1].type_specific_completion_output, 77u);
  EXPECT_EQ(got[1].bytes_transferred, 256u);
  for (int k = 0; k < 256; ++k) ASSERT_EQ(b.mem[4096 + k], 0x5a) << k;

  // 4. Cancelled: kCancelled once, no kSuccess.
  ncq->arm(CqNotify::kAny);
  EXPECT_TRUE(ext->cancel_notification());
  EXPECT_FALSE(ext->cancel_notification());
  EXPECT_EQ(readable(fd), 1u);
  EXPECT_TRUE(eventually([&] { return n.cancelled.load() == 1; }));
  EXPECT_EQ(n.success.load(), 3);
  // The daemon counted the arms its bridge answered (1 and 3; 2 fired in arm()).
  const std::string srv = test::dpdk_telemetry(prefix_, "/urnicd/server");
  EXPECT_NE(srv.find("\"ring_cq_events\": 2"), std::string::npos) << srv;
  b.qp.reset();
  ncq.reset();
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace test;

// A shared receive queue in attach mode: receives posted to the SRQ (its own shared ring) feed
// the QP created with it; every message lands in the next receive, byte for byte. Its limit
// event (armed at creation, and again by modify) comes once per arming, through the daemon.
TEST_F(DaemonApi, ASharedReceiveQueueFeedsItsQp) {
  ApiSide a, b;
  ASSERT_EQ(open_pair(socket_, "api-srq", &a, &b), "");
  Handle<Srq> srq;
  std::atomic<int> limits{0};
  const SrqNotificationCallback on_limit = [](void* ctx, Status) {
    static_cast<std::atomic<int>*>(ctx)->fetch_add(1);
  };
  // Armed at 5: fires once the receives posted and not yet consumed fall below 5.
  ASSERT_EQ(b.pd->create_srq(16, 2, 5, on_limit, &limits, nullptr, nullptr, &srq), Status::kSuccess)
      << last_error();
  EXPECT_EQ(srq->modify(17, 0, nullptr, nullptr), Status::kInvalidParameter);  // past its ring
  EXPECT_EQ(mine().srqs, 1u);  // urnicctl's and telemetry's count
  Handle<Qp> bq;
  ASSERT_EQ(b.pd->create_qp_with_srq(*b.cq, *b.cq, *srq, &b, 16, 1, 64, nullptr, nullptr, &bq),
            Status::kSuccess)
      << last_error();
  b.qp = std::move(bq);
  // Receives on the SRQ, none on the QP (refused there, as embedded).
  const Sge none{reinterpret_cast<uint64_t>(b.mem), 64, b.mr->get_local_token()};
  EXPECT_EQ(b.qp->receive(nullptr, {&none, 1}), Status::kInvalidDeviceRequest);
  constexpr uint64_t kMsgs = 8;
  for (uint64_t i = 0; i < kMsgs; ++i) {
    const Sge r{reinterpret_cast<uint64_t>(b.mem + i * 256), 256, b.mr->get_local_token()};
    ASSERT_EQ(srq->receive(reinterpret_cast<void*>(100 + i), {&r, 1}), Status::kSuccess);
  }
  const PeerInfo pa = a.me(), pb = b.me();
  ASSERT_EQ(a.connect(kIpB, &pb), "");
  ASSERT_EQ(b.connect(kIpA, &pa), "");
  for (uint64_t i = 0; i < kMsgs; ++i) {
    std::memset(a.mem + i * 256, static_cast<int>(0x30 + i), 200);
    const Sge s{reinterpret_cast<uint64_t>(a.mem + i * 256), 200, a.mr->get_local_token()};
    ASSERT_EQ(a.qp->send(reinterpret_cast<void*>(i), {&s, 1}, 0), Status::kSuccess);
  }
  std::vector<ResultEx> sent, got;
  ASSERT_EQ(a.wait(kMsgs, &sent), kMsgs);
  ASSERT_EQ(b.wait(kMsgs, &got), kMsgs);
  for (uint64_t i = 0; i < kMsgs; ++i) {
    EXPECT_EQ(sent[i].status, Status::kSuccess);
    EXPECT_EQ(got[i].status, Status::kSuccess);
    EXPECT_EQ(got[i].type, OperationType::kReceive);
    EXPECT_EQ(got[i].bytes_transferred, 200u);
    EXPECT_EQ(reinterpret_cast<uint64_t>(got[i].request_context), 100 + i);
    EXPECT_EQ(got[i].qp_context, &b);
    for (int k = 0; k < 200; ++k) ASSERT_EQ(b.mem[i * 256 + k], 0x30 + i) << i << " " << k;
  }
  // Eight consumed of eight: the limit fired once (it stays disarmed), then modify arms it at 2
  // with none left, which fires it at once.
  EXPECT_TRUE(eventually([&] { return limits.load() == 1; }));
  ASSERT_EQ(srq->modify(0, 2, nullptr, nullptr), Status::kSuccess) << last_error();
  EXPECT_TRUE(eventually([&] { return limits.load() == 2; }));
  // The SRQ's close pends while the QP uses it; both go with the QP's.
  std::atomic<int> closed{0};
  EXPECT_EQ(srq.close(on_close, &closed), Status::kPending);
  b.qp.reset();
  EXPECT_TRUE(eventually([&] { return closed.load() == 1; }));
  EXPECT_EQ(mine().srqs, 0u);
}

// Interrupt moderation in attach mode (Cq::control_interrupt_moderation): the daemon's bridge
// holds a satisfied arm's notification until `count` completions were produced since, or the
// interval passed. Count only: three SENDs, received and consumed, bring no callback; the fourth
// does. Interval only: the callback comes no sooner than the interval after the SEND was posted.
TEST_F(DaemonApi, CqModerationHoldsNotifications) {
  ApiSide a, b;
  ASSERT_EQ(open_pair(socket_, "api-moderation", &a, &b), "");
  struct Seen {
    std::atomic<int> calls{0};
    std::atomic<bool> fourth_sent{false}, early{false};
    std::atomic<int64_t> at_ns{0};
  } seen;
  const CqNotificationCallback cb = [](void* ctx, Status) {
    auto* x = static_cast<Seen*>(ctx);
    if (!x->fourth_sent.load()) x->early = true;
    x->at_ns = std::chrono::steady_clock::now().time_since_epoch().count();
    x->calls.fetch_add(1);
  };
  Handle<Cq> ncq;
  ASSERT_EQ(b.adapter->create_cq(64, cb, &seen, nullptr, nullptr, &ncq), Status::kSuccess);
  ASSERT_EQ(receive_into(a, b, *ncq, 16, 8), "");  // B receives into ncq
  // NDK's contradiction: count only with interval only.
  EXPECT_EQ(ncq->control_interrupt_moderation(UINT32_MAX, UINT32_MAX),
            Status::kInvalidParameterMix);
  ASSERT_EQ(ncq->control_interrupt_moderation(UINT32_MAX, 4), Status::kSuccess) << last_error();
  char msg[16] = "moderate me";
  const Sge inl{reinterpret_cast<uint64_t>(msg), sizeof msg, 0};
  std::vector<ResultEx> sent;
  auto send = [&] {
    ASSERT_EQ(a.qp->send(nullptr, {&inl, 1}, op_flag::kInline), Status::kSuccess);
    const size_t had = sent.size();
    ASSERT_EQ(a.wait(had + 1, &sent), had + 1);
  };
  ResultEx r[8];
  size_t got = 0;
  ncq->arm(CqNotify::kAny);
  for (int i = 0; i < 3; ++i) send();
  ASSERT_TRUE(eventually([&] { return (got += ncq->get_results_ex({r + got, 8 - got})) == 3; }));
  seen.fourth_sent = true;
  send();
  EXPECT_TRUE(eventually([&] { return seen.calls.load() == 1; }));
  EXPECT_FALSE(seen.early.load()) << "notified before the fourth completion";
  ASSERT_TRUE(eventually([&] { return ncq->get_results_ex(r) == 1; }));
  // Interval only: 100 ms.
  ASSERT_EQ(ncq->control_interrupt_moderation(100000, UINT32_MAX), Status::kSuccess);
  ncq->arm(CqNotify::kAny);
  const auto posted = std::chrono::steady_clock::now();
  send();
  EXPECT_TRUE(eventually([&] { return seen.calls.load() == 2; }));
  EXPECT_GE(seen.at_ns.load() - posted.time_since_epoch().count(), 100'000'000);
  EXPECT_TRUE(eventually([&] { return ncq->get_results_ex(r) == 1; }));
}

// Cq::resize in attach mode: the daemon moves the CQ to a new ring; completions waiting in the
// old one are taken first, in order, then the new ring's; a second resize while the old ring
// still holds completions is kDeviceBusy, a depth below what waits kInvalidParameter; with a
// completion callback the call pends and the callback brings the status.
TEST_F(DaemonApi, CqResizeMovesToANewRingInOrder) {
  ApiSide a, b;
  ASSERT_EQ(open_pair(socket_, "api-resize", &a, &b), "");
  Handle<Cq> rcq;
  ASSERT_EQ(b.adapter->create_cq(8, nullptr, nullptr, nullptr, nullptr, &rcq), Status::kSuccess);
  ASSERT_EQ(receive_into(a, b, *rcq, 64, 40), "");  // B receives into rcq (8 deep)
  char msg[8] = "resize";
  const Sge inl{reinterpret_cast<uint64_t>(msg), sizeof msg, 0};
  std::vector<ResultEx> sent;
  auto send = [&](uint32_t n) {
    for (uint32_t i = 0; i < n; ++i)
      ASSERT_EQ(a.qp->send(nullptr, {&inl, 1}, op_flag::kInline), Status::kSuccess);
    const size_t want = sent.size() + n;
    ASSERT_EQ(a.wait(want, &sent), want);
  };
  // Five received, not taken; a depth below them is refused; then 64.
  send(5);
  EXPECT_EQ(rcq->resize(4, nullptr, nullptr), Status::kInvalidParameter);
  ASSERT_EQ(rcq->resize(64, nullptr, nullptr), Status::kSuccess) << last_error();
  EXPECT_EQ(rcq->resize(128, nullptr, nullptr), Status::kDeviceBusy);  // five wait in the old ring
  // Twenty more (past the old depth of 8): the new ring holds them.
  send(20);
  std::vector<ResultEx> got;
  ResultEx r[16];
  ASSERT_TRUE(eventually([&] {
    const size_t n = rcq->get_results_ex(r);
    got.insert(got.end(), r, r + n);
    return got.size() >= 25;
  }));
  ASSERT_EQ(got.size(), 25u);
  for (uint64_t i = 0; i < 25; ++i) {
    EXPECT_EQ(reinterpret_cast<uint64_t>(got[i].request_context), i);
    EXPECT_EQ(got[i].status, Status::kSuccess);
  }
  // The old ring drained: resize again, with a completion.
  std::atomic<int> calls{0};
  std::atomic<Status> status{Status::kPending};
  struct Ctx {
    std::atomic<int>* calls;
    std::atomic<Status>* status;
  } ctx{&calls, &status};
  const RequestCompletion done = [](void* p, Status s) {
    auto* c = static_cast<Ctx*>(p);
    c->status->store(s);
    c->calls->fetch_add(1);
  };
  ASSERT_EQ(rcq->resize(16, done, &ctx), Status::kPending);
  EXPECT_TRUE(eventually([&] { return calls.load() == 1; }));
  EXPECT_EQ(status.load(), Status::kSuccess);
  send(3);
  got.clear();
  ASSERT_TRUE(eventually([&] {
    const size_t n = rcq->get_results_ex(r);
    got.insert(got.end(), r, r + n);
    return got.size() >= 3;
  }));
  for (uint64_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(reinterpret_cast<uint64_t>(got[i].request_context), 25 + i);
}

// Memory windows and fast-register MRs (docs/daemon.md "Memory windows and fast-register MRs"):
// B binds a window over part of its MR and fast-registers pages of its shared memory; A writes
// through each token and every byte is checked where B expects it. The tokens are readable when
// the calls return; the embedded calls' refusals come back with their statuses; a page B never
// shared with the daemon is refused, and B's QP goes on working.
TEST_F(DaemonApi, MemoryWindowsAndFastRegisterMrs) {
  ApiSide a, b;
  ASSERT_EQ(open_pair(socket_, "api-windows", &a, &b), "");
  const PeerInfo pa = a.me(), pb = b.me();
  ASSERT_EQ(a.connect(kIpB, &pb), "");
  ASSERT_EQ(b.connect(kIpA, &pa), "");
  EXPECT_EQ(b.adapter->adapter_info().frmr_page_count, 256u);
  // B's completion of request `ctx` (bind, invalidate, fast-register), successful.
  auto b_done = [&](uint64_t ctx) {
    std::vector<ResultEx> r;
    if (b.wait(1, &r) != 1) return std::string("no completion");
    if (r[0].status != Status::kSuccess || reinterpret_cast<uint64_t>(r[0].request_context) != ctx)
      return std::string("completion ") + std::to_string(ctx);
    return std::string();
  };
  // A writes `len` bytes of pattern `seed` to `dst` with `token`: the completion's status.
  auto a_write = [&](uint64_t dst, uint32_t token, uint32_t len, uint8_t seed) {
    for (uint32_t j = 0; j < len; ++j) a.mem[j] = static_cast<uint8_t>(seed + j * 7);
    const Sge sge{reinterpret_cast<uint64_t>(a.mem), len, a.mr->get_local_token()};
    if (a.qp->write(nullptr, {&sge, 1}, dst, token, 0) != Status::kSuccess)
      return Status::kInvalidDeviceState;
    std::vector<ResultEx> r;
    return a.wait(1, &r) == 1 ? r[0].status : Status::kTimeout;
  };
  auto pattern_at = [](const uint8_t* p, uint32_t len, uint8_t seed, uint32_t from = 0) {
    for (uint32_t j = 0; j < len; ++j)
      if (p[j] != static_cast<uint8_t>(seed + (from + j) * 7)) return false;
    return true;
  };

  // A window over 16 KiB of B's MR: its token changes with the bind, before the completion.
  Handle<Mw> mw;
  ASSERT_EQ(b.pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess) << last_error();
  const uint32_t t0 = mw->get_remote_token();
  EXPECT_NE(t0, 0u);
  uint8_t* win = b.mem + 64 * 1024;
  ASSERT_EQ(
      b.qp->bind(reinterpret_cast<void*>(1), *b.mr, *mw, win, 16384, op_flag::kAllowRemoteWrite),
      Status::kSuccess)
      << last_error();
  const uint32_t t1 = mw->get_remote_token();
  EXPECT_NE(t1, t0);
  ASSERT_EQ(b_done(1), "");
  ASSERT_EQ(a_write(reinterpret_cast<uint64_t>(win), t1, 16384, 3), Status::kSuccess);
  EXPECT_TRUE(pattern_at(win, 16384, 3));
  // The embedded rules, answered by the daemon's public API: a range outside the MR, and the
  // deregistration of an MR with a window bound.
  EXPECT_EQ(b.qp->bind(nullptr, *b.mr, *mw, b.mem + kMem - 4096, 8192, op_flag::kAllowRemoteWrite),
            Status::kInvalidParameter);
  EXPECT_EQ(b.mr->deregister_mr(nullptr, nullptr), Status::kDeviceBusy);
  // Invalidated, then bound again: a new token.
  ASSERT_EQ(b.qp->invalidate(reinterpret_cast<void*>(2), *mw, 0), Status::kSuccess);
  ASSERT_EQ(b_done(2), "");
  ASSERT_EQ(
      b.qp->bind(reinterpret_cast<void*>(3), *b.mr, *mw, win, 4096, op_flag::kAllowRemoteWrite),
      Status::kSuccess);
  EXPECT_NE(mw->get_remote_token(), t1);
  ASSERT_EQ(b_done(3), "");

  // A fast-register MR of 8 pages; 4 pages of B's shared memory mapped in reverse order, so
  // that where A's bytes land shows the page list was followed.
  Handle<Mr> fr;
  ASSERT_EQ(b.pd->create_mr(true, nullptr, nullptr, &fr), Status::kSuccess);
  EXPECT_EQ(fr->initialize_fast_register_mr(257, true, nullptr, nullptr),
            Status::kImplementationLimit);
  ASSERT_EQ(fr->initialize_fast_register_mr(8, true, nullptr, nullptr), Status::kSuccess)
      << last_error();
  EXPECT_EQ(fr->register_mr(b.mem, 4096, 0, nullptr, nullptr), Status::kInvalidDeviceRequest);
  const uint32_t f0 = fr->get_remote_token();
  EXPECT_NE(f0, 0u);
  uint8_t* area = b.mem + 512 * 1024;
  std::array<uint64_t, 9> pages{};
  for (uint32_t i = 0; i < pages.size(); ++i)
    pages[i] = reinterpret_cast<uint64_t>(area + (3 - i % 4) * 4096);
  constexpr uint64_t kBase = 0x40000000;
  constexpr uint32_t kRights = op_flag::kAllowLocalWrite | op_flag::kAllowRemoteWrite;
  EXPECT_EQ(b.qp->fast_register(nullptr, *fr, pages, 0, 4096, kBase, kRights),
            Status::kImplementationLimit);  // 9 pages, 8 initialised
  const std::span<const uint64_t> four(pages.data(), 4);
  ASSERT_EQ(b.qp->fast_register(reinterpret_cast<void*>(4), *fr, four, 0, 16384, kBase, kRights),
            Status::kSuccess)
      << last_error();
  const uint32_t f1 = fr->get_remote_token();
  EXPECT_NE(f1, f0);
  EXPECT_EQ(fr->get_local_token(), f1);
  ASSERT_EQ(b_done(4), "");
  ASSERT_EQ(a_write(kBase, f1, 16384, 9), Status::kSuccess);
  for (uint32_t i = 0; i < 4; ++i)
    EXPECT_TRUE(pattern_at(area + (3 - i) * 4096, 4096, 9, i * 4096)) << "page " << i;
  // A page of memory B never shared with the daemon: refused, the QP unharmed.
  ASSERT_EQ(b.qp->invalidate(reinterpret_cast<void*>(5), *fr, 0), Status::kSuccess);
  ASSERT_EQ(b_done(5), "");
  std::vector<uint8_t> priv(3 * 4096);
  const uint64_t own = (reinterpret_cast<uint64_t>(priv.data()) + 4095) & ~uint64_t{4095};
  EXPECT_EQ(b.qp->fast_register(nullptr, *fr, {&own, 1}, 0, 4096, kBase, kRights),
            Status::kInvalidParameter);
  EXPECT_NE(std::string(last_error()).find("shares"), std::string::npos) << last_error();
  ASSERT_EQ(b.qp->fast_register(reinterpret_cast<void*>(6), *fr, four, 0, 8192, kBase, kRights),
            Status::kSuccess)
      << last_error();
  ASSERT_EQ(b_done(6), "");
  ASSERT_EQ(a_write(kBase, fr->get_remote_token(), 8192, 21), Status::kSuccess);
  EXPECT_TRUE(pattern_at(area + 3 * 4096, 4096, 21));
  EXPECT_TRUE(pattern_at(area + 2 * 4096, 4096, 21, 4096));
  // MRs, the fast-register MR and the window count as MRs; each goes with its close.
  EXPECT_EQ(mine().mrs, 4u);
  mw.reset();
  fr.reset();
  EXPECT_EQ(mine().mrs, 2u);
  EXPECT_EQ(b.mr->deregister_mr(nullptr, nullptr), Status::kSuccess);
}

}  // namespace
}  // namespace urnic

namespace urnic {
namespace {

using namespace test;

// Memory moved in place, given back and mapped anew at the same address: the next registration
// finds the process's table stale (the pages are no longer that memfd's, /proc/self/maps says),
// shares the new pages, and the peer READs what they hold now, not the old memfd's contents.
TEST_F(DaemonApi, MemoryFreedAndMappedAgainIsSharedAnew) {
  ApiSide a, b;
  ASSERT_EQ(open_pair(socket_, "api-stale", &a, &b), "");
  const PeerInfo pa = a.me(), pb = b.me();
  ASSERT_EQ(a.connect(kIpB, &pb), "");
  ASSERT_EQ(b.connect(kIpA, &pa), "");
  constexpr size_t kLen = 1 << 20;
  void* p = ::mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 0x11, kLen);
  Handle<Mr> mr;
  ASSERT_EQ(a.pd->create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  ASSERT_EQ(mr->register_mr(p, kLen, mr_flag::kAllowRemoteRead, nullptr, nullptr), Status::kSuccess)
      << last_error();
  ASSERT_EQ(mr->deregister_mr(nullptr, nullptr), Status::kSuccess);
  ASSERT_EQ(::munmap(p, kLen), 0);
  void* q = ::mmap(p, kLen, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(q, p);
  std::memset(q, 0x22, kLen);
  ASSERT_EQ(mr->register_mr(q, kLen, mr_flag::kAllowRemoteRead, nullptr, nullptr), Status::kSuccess)
      << last_error();
  const Sge into{reinterpret_cast<uint64_t>(b.mem), 4096, b.mr->get_local_token()};
  ASSERT_EQ(b.qp->read(nullptr, {&into, 1}, reinterpret_cast<uint64_t>(q) + 8192,
                       mr->get_remote_token(), 0),
            Status::kSuccess);
  std::vector<ResultEx> done;
  ASSERT_EQ(b.wait(1, &done), 1u);
  EXPECT_EQ(done[0].status, Status::kSuccess);
  for (int k = 0; k < 4096; ++k) ASSERT_EQ(b.mem[k], 0x22) << k;
  mr.reset();
  ::munmap(q, kLen);
}

}  // namespace
}  // namespace urnic
