// Bad input through the public API (docs/api.md §11 "Bad input"). Every row of every table feeds
// one call one defect (a malformed SGE list, a foreign, wrong or closing object, a token the
// adapter does not honour) and checks the exact NTSTATUS: the one NDKPI names (ndkpi.md §2.4
// posting limits, §3.3 completion statuses, §7.5 error model, §7.7 codes) or, where NDKPI is
// silent, the one docs/api.md names. Then it checks that nothing happened: a call that failed
// queued no completion (§2.2) and touched no memory, and the QP still works (§7.1: "a failing
// post has no side effects on the QP"): each group ends with good requests that complete with
// kSuccess and move the right bytes. Defects that can only be seen when a request executes
// (tokens) complete with STATUS_ACCESS_VIOLATION (§3.3), and the QP's later work is flushed
// with STATUS_CANCELLED (§7.5).
//
// Tested elsewhere and not repeated here: every adapter limit at its boundary (queue depths,
// SGE counts at the adapter's maximum, MaxTransferLength, inline size, registration and window
// size, FRMR pages, CQ depth 0 and max + 1, SRQ limits, IRD/ORD) in api_limits_test.cc;
// RegisterMr's null / empty / unmapped buffers and unknown flag 0x40000000, the wrong kind of MR,
// and FastRegister's own errors in api_mr_test.cc; flags not valid for an operation in
// api_qp_test.cc; Bind's range and rights errors in api_mw_test.cc.
//
// Not tested: calls on a fully closed object. Once close() has returned kSuccess, or its
// callback has run, the object is freed (ndkpi.md §1.3: "after a close has been issued the
// consumer never touches the object again"); a call on it is a use after free, which no status
// can report. Only objects whose close is still pending are used below. Tokens are values, not
// objects: using the token of a closed MR is legal input, and is tested.
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace urnic::test {
namespace {

class ApiBadInput : public EalTest {};

constexpr uint8_t kSentinel = 0x5A;
constexpr uint64_t kTop = std::numeric_limits<uint64_t>::max();

// NDK's pSgl == NULL with nSge > 0.
std::span<const Sge> null_sgl(size_t n) { return {static_cast<const Sge*>(nullptr), n}; }

// One row: a call (given its request context) and the status it must return.
struct Case {
  const char* name;
  Status expected;
  std::function<Status(void* request_context)> call;
};

// Runs every row; row i gets the request context ctx(base + i), so that a completion which must
// not exist names its row (expect_no_completions).
void run_table(const std::vector<Case>& cases, uintptr_t base) {
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    EXPECT_EQ(cases[i].call(ctx(base + i)), cases[i].expected);
  }
}

// A call that failed never completes (ndkpi.md §2.2: "no CQE may be generated for it").
void expect_no_completions(const std::vector<ResultEx>& got, const std::vector<Case>& cases,
                           uintptr_t base) {
  for (const ResultEx& r : got) {
    const uintptr_t i = reinterpret_cast<uintptr_t>(r.request_context) - 0x1000 - base;
    ADD_FAILURE() << "unexpected completion " << to_string(r.status) << " for "
                  << (i < cases.size() ? cases[i].name : "a request of no row");
  }
}

// Page-aligned memory (FastRegister page arrays must be page aligned).
struct Pages {
  explicit Pages(size_t n) : len(n * kPageSize) {
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(m, MAP_FAILED);
    p = static_cast<uint8_t*>(m);
  }
  ~Pages() { munmap(p, len); }
  std::vector<uint64_t> lam(const Adapter& a) const {
    std::vector<uint64_t> pages(len / kPageSize);
    uint32_t n = 0, fbo = 0;
    EXPECT_EQ(a.build_lam(p, len, pages, &n, &fbo), Status::kSuccess);
    return pages;
  }
  uint8_t* p;
  size_t len;
};

// A connected QP pair on the pair's two adapters, with CQs of its own (its completions are only
// its own) and QPs that take kSges SGEs per request, below the adapter's 16, so that "more SGEs
// than the QP takes" and "more than the adapter takes" are different cases. a has `src` (local
// write) and an FRMR `fr`; b has `dst` (remote read / write / atomic) and `rbuf` for receives.
// dst and rbuf hold kSentinel until a request writes them.
struct Link {
  static constexpr uint32_t kSges = 2;
  static constexpr uint32_t kInline = 64;
  static constexpr size_t kLen = 256;

  explicit Link(ApiPair& pair) : p(pair), src(kLen), dst(kLen, kSentinel), rbuf(kLen, kSentinel) {
    fill(src, 11);
    EXPECT_EQ(p.a.adapter->create_cq(256, nullptr, nullptr, nullptr, nullptr, &cqa),
              Status::kSuccess);
    EXPECT_EQ(p.b.adapter->create_cq(256, nullptr, nullptr, nullptr, nullptr, &cqb),
              Status::kSuccess);
    EXPECT_EQ(
        p.a.pd->create_qp(*cqa, *cqa, this, 64, 64, kSges, kSges, kInline, nullptr, nullptr, &qa),
        Status::kSuccess);
    EXPECT_EQ(
        p.b.pd->create_qp(*cqb, *cqb, this, 64, 64, kSges, kSges, kInline, nullptr, nullptr, &qb),
        Status::kSuccess);
    if (qa && qb) ApiPair::connect_qps(p.a, *qa, p.b, *qb);
    msrc = p.a.reg(src.data(), kLen, mr_flag::kAllowLocalWrite);
    mdst = p.b.reg(
        dst.data(), kLen,
        mr_flag::kAllowRemoteWrite | mr_flag::kAllowRemoteRead | mr_flag::kAllowRemoteAtomic);
    mrecv = p.b.reg(rbuf.data(), kLen, mr_flag::kAllowLocalWrite);
    EXPECT_EQ(p.a.pd->create_mr(true, nullptr, nullptr, &fr), Status::kSuccess);
    EXPECT_EQ(fr->initialize_fast_register_mr(4, true, nullptr, nullptr), Status::kSuccess);
  }

  Sge ls(size_t off, uint32_t len) const {
    return {addr(src.data() + off), len, msrc->get_local_token()};
  }
  Sge rs(size_t off, uint32_t len) const {
    return {addr(rbuf.data() + off), len, mrecv->get_local_token()};
  }
  uint64_t ra(size_t off) const { return addr(dst.data() + off); }
  uint32_t rt() const { return mdst->get_remote_token(); }

  void poll() {
    ResultEx r[16];
    for (size_t n; (n = cqa->get_results_ex(r)) != 0;) da.insert(da.end(), r, r + n);
    for (size_t n; (n = cqb->get_results_ex(r)) != 0;) db.insert(db.end(), r, r + n);
  }
  bool wait(size_t na, size_t nb) {
    return p.run_until([&] {
      poll();
      return da.size() >= na && db.size() >= nb;
    });
  }
  // Runs the engine a while (to show that nothing more comes) and collects what did.
  void quiet() {
    p.run_for(kQuiet);
    poll();
  }
  void expect_untouched() const {
    EXPECT_EQ(std::count(dst.begin(), dst.end(), kSentinel), static_cast<long>(kLen));
    EXPECT_EQ(std::count(rbuf.begin(), rbuf.end(), kSentinel), static_cast<long>(kLen));
  }

  // The QP still works: a SEND gathered from two SGEs into a two-SGE receive, and an RDMA
  // WRITE, complete with kSuccess and move exactly their bytes.
  void expect_works() {
    const size_t na = da.size(), nb = db.size();
    const Sge r[2] = {rs(0, 16), rs(16, 48)};
    ASSERT_EQ(qb->receive(ctx(900), r), Status::kSuccess);
    const Sge s[2] = {ls(0, 20), ls(20, 12)};
    ASSERT_EQ(qa->send(ctx(901), s, 0), Status::kSuccess);
    const Sge w = ls(32, 64);
    ASSERT_EQ(qa->write(ctx(902), {&w, 1}, ra(64), rt(), 0), Status::kSuccess);
    ASSERT_TRUE(wait(na + 2, nb + 1));
    EXPECT_EQ(da[na].request_context, ctx(901));
    EXPECT_EQ(da[na].status, Status::kSuccess);
    EXPECT_EQ(da[na].type, OperationType::kSend);
    EXPECT_EQ(da[na + 1].request_context, ctx(902));
    EXPECT_EQ(da[na + 1].status, Status::kSuccess);
    EXPECT_EQ(da[na + 1].type, OperationType::kWrite);
    EXPECT_EQ(db[nb].request_context, ctx(900));
    EXPECT_EQ(db[nb].status, Status::kSuccess);
    EXPECT_EQ(db[nb].bytes_transferred, 32u);
    EXPECT_EQ(std::memcmp(rbuf.data(), src.data(), 32), 0);
    EXPECT_EQ(rbuf[32], kSentinel);
    EXPECT_EQ(std::memcmp(dst.data() + 64, src.data() + 32, 64), 0);
    EXPECT_EQ(dst[63], kSentinel);
    EXPECT_EQ(dst[128], kSentinel);
  }

  ApiPair& p;
  std::vector<uint8_t> src, dst, rbuf;  // declared before the handles: they outlive them
  Handle<Mr> msrc, mdst, mrecv, fr;
  Handle<Cq> cqa, cqb;
  Handle<Qp> qa, qb;
  std::vector<ResultEx> da, db;
};

// ---- SGE lists: checked when posted (ndkpi.md §2.4; docs/api.md "Bad input") ------------------

TEST_F(ApiBadInput, SgeListsAreCheckedWhenPosted) {
  ApiPair p("bad_sge");
  Link l(p);
  auto* ext = l.qa->query_extension<QpExtension>();
  ASSERT_NE(ext, nullptr);
  Qp& qa = *l.qa;
  Qp& qb = *l.qb;
  const uint32_t tok = l.msrc->get_local_token();
  const uint64_t s0 = addr(l.src.data());
  const std::vector<Sge> three(3, l.ls(0, 8));  // the QPs take 2
  const uint32_t adapter_max = p.a.adapter->adapter_info().max_initiator_request_sge;
  const std::vector<Sge> above_adapter(adapter_max + 1, l.ls(0, 8));
  const std::vector<Sge> thousand(1000, l.ls(0, 8));
  // 2^31 + 2^31 and 0xFFFFFFFF + 1: sums that wrap 32 bits to 0 (NDK lengths are ULONG).
  const Sge halves[2] = {{s0, 1u << 31, tok}, {s0, 1u << 31, tok}};
  const Sge all_ones[2] = {{s0, 0xFFFFFFFFu, tok}, {s0, 1, tok}};
  const Sge above_max{s0, (1u << 31) + 1, tok};  // MaxTransferLength is 2^31
  const Sge rhalves[2] = {l.rs(0, 1u << 31), l.rs(0, 1u << 31)};
  // addr + length beyond 2^64, and ending exactly at 2^64 (no region reaches that far).
  const Sge wraps{kTop - 15, 32, tok};
  const Sge ends_at_2_64{kTop - 31, 32, tok};
  const Sge rwraps{kTop - 15, 32, l.mrecv->get_local_token()};
  const Sge at_zero{0, 8, 0};
  const Sge result = l.ls(8, 8);
  const uint64_t fr_token = l.fr->get_remote_token();
  const std::span<const uint64_t> null_pages(static_cast<const uint64_t*>(nullptr), 2);
  const uint32_t rt = l.rt();
  const uint64_t ra = l.ra(0);

  const std::vector<Case> cases = {
      // NDK names no status for a null list; it is a malformed argument (qp.h).
      {"send: null SGE list, count 1", Status::kInvalidParameter,
       [&](void* c) { return qa.send(c, null_sgl(1), 0); }},
      {"send inline: null SGE list, count 1", Status::kInvalidParameter,
       [&](void* c) { return qa.send(c, null_sgl(1), op_flag::kInline); }},
      {"send: null SGE list, count 1000 (also above the QP's SGEs)", Status::kInvalidParameter,
       [&](void* c) { return qa.send(c, null_sgl(1000), 0); }},
      {"send_and_invalidate: null SGE list", Status::kInvalidParameter,
       [&](void* c) { return qa.send_and_invalidate(c, null_sgl(1), 0, 1); }},
      {"write: null SGE list, count 2", Status::kInvalidParameter,
       [&](void* c) { return qa.write(c, null_sgl(2), ra, rt, 0); }},
      {"read: null SGE list", Status::kInvalidParameter,
       [&](void* c) { return qa.read(c, null_sgl(1), ra, rt, 0); }},
      {"receive: null SGE list", Status::kInvalidParameter,
       [&](void* c) { return qb.receive(c, null_sgl(1)); }},
      {"send_with_immediate: null SGE list", Status::kInvalidParameter,
       [&](void* c) { return ext->send_with_immediate(c, null_sgl(1), 0, 7); }},
      {"write_with_immediate: null SGE list", Status::kInvalidParameter,
       [&](void* c) { return ext->write_with_immediate(c, null_sgl(1), ra, rt, 0, 7); }},
      // ND2: too many SGEs is ND_DATA_OVERRUN (ndkpi.md §2.4).
      {"send: 3 SGEs, the QP takes 2", Status::kDataOverrun,
       [&](void* c) { return qa.send(c, three, 0); }},
      {"write: 3 SGEs, the QP takes 2", Status::kDataOverrun,
       [&](void* c) { return qa.write(c, three, ra, rt, 0); }},
      {"read: 3 SGEs, the QP's MaxReadRequestSge is 2", Status::kDataOverrun,
       [&](void* c) { return qa.read(c, three, ra, rt, 0); }},
      {"receive: 3 SGEs, the QP takes 2", Status::kDataOverrun,
       [&](void* c) { return qb.receive(c, three); }},
      {"send: adapter maximum + 1 SGEs", Status::kDataOverrun,
       [&](void* c) { return qa.send(c, above_adapter, 0); }},
      {"write_with_immediate: 1000 SGEs", Status::kDataOverrun,
       [&](void* c) { return ext->write_with_immediate(c, thousand, ra, rt, 0, 7); }},
      // ND2: too much data is ND_BUFFER_OVERFLOW (ndkpi.md §2.4).
      {"send: 2^31 + 2^31 bytes (32-bit sum wraps to 0)", Status::kBufferOverflow,
       [&](void* c) { return qa.send(c, halves, 0); }},
      {"write: 0xFFFFFFFF + 1 bytes (32-bit sum wraps to 0)", Status::kBufferOverflow,
       [&](void* c) { return qa.write(c, all_ones, ra, rt, 0); }},
      {"read: 2^31 + 1 bytes, above MaxTransferLength", Status::kBufferOverflow,
       [&](void* c) {
         return qa.read(c, {&above_max, 1}, ra, rt, 0);
       }},
      {"receive: 2^31 + 2^31 bytes (32-bit sum wraps to 0)", Status::kBufferOverflow,
       [&](void* c) { return qb.receive(c, rhalves); }},
      // No region reaches 2^64: an SGE passing it names no memory (docs/api.md).
      {"send: SGE address + length wraps 2^64", Status::kInvalidParameter,
       [&](void* c) {
         return qa.send(c, {&wraps, 1}, 0);
       }},
      {"send: SGE ends exactly at 2^64", Status::kInvalidParameter,
       [&](void* c) {
         return qa.send(c, {&ends_at_2_64, 1}, 0);
       }},
      {"write: SGE address + length wraps 2^64", Status::kInvalidParameter,
       [&](void* c) {
         return qa.write(c, {&wraps, 1}, ra, rt, 0);
       }},
      {"read: SGE address + length wraps 2^64", Status::kInvalidParameter,
       [&](void* c) {
         return qa.read(c, {&wraps, 1}, ra, rt, 0);
       }},
      {"receive: SGE address + length wraps 2^64", Status::kInvalidParameter,
       [&](void* c) {
         return qb.receive(c, {&rwraps, 1});
       }},
      // INLINE bytes are copied during the call: a bad address must not be read.
      {"send inline: SGE at address 0 with 8 bytes", Status::kInvalidParameter,
       [&](void* c) {
         return qa.send(c, {&at_zero, 1}, op_flag::kInline);
       }},
      {"write inline: SGE address + length wraps 2^64", Status::kInvalidParameter,
       [&](void* c) {
         return qa.write(c, {&wraps, 1}, ra, rt, op_flag::kInline);
       }},
      // Atomics (extension): the remote word is 8-byte aligned (IBTA §9.4.5), the result 8 bytes.
      {"compare_swap: remote address 4 bytes off 8-byte alignment", Status::kInvalidParameter,
       [&](void* c) { return ext->compare_swap(c, result, l.ra(4), rt, 0, 1, 0); }},
      {"fetch_add: remote address 2 bytes off 8-byte alignment", Status::kInvalidParameter,
       [&](void* c) { return ext->fetch_add(c, result, l.ra(2), rt, 1, 0); }},
      {"compare_swap: result SGE of 4 bytes", Status::kInvalidParameter,
       [&](void* c) { return ext->compare_swap(c, l.ls(8, 4), ra, rt, 0, 1, 0); }},
      {"fetch_add: result SGE of 0 bytes", Status::kInvalidParameter,
       [&](void* c) { return ext->fetch_add(c, l.ls(8, 0), ra, rt, 1, 0); }},
      {"fetch_add: result SGE address + 8 wraps 2^64", Status::kInvalidParameter,
       [&](void* c) {
         return ext->fetch_add(c, Sge{kTop - 3, 8, tok}, ra, rt, 1, 0);
       }},
      {"fast_register: null page array, count 2", Status::kInvalidParameter,
       [&](void* c) { return qa.fast_register(c, *l.fr, null_pages, 0, 100, 0x100000, 0); }},
  };
  run_table(cases, 100);

  l.quiet();
  expect_no_completions(l.da, cases, 100);
  expect_no_completions(l.db, cases, 100);
  l.expect_untouched();
  EXPECT_EQ(l.fr->get_remote_token(), fr_token);  // a failed FastRegister issues no token
  l.expect_works();
}

// ---- Zero-length requests -----------------------------------------------------------------------

// IBTA allows 0-byte messages (§9.4: a DMA length of 0); ND2 allows nSge 0 (zero-byte
// send / read / write, ndkpi.md §8.2); NDK says nothing about them. They complete with kSuccess,
// move no bytes (the receive completes with BytesTransferred 0), and check no key that names
// no byte: a zero-length SGE is skipped whatever its token (as rxe and mlx5 do), and a
// zero-length WRITE or READ checks no R_Key (IBTA §9.4.3, §9.4.4).
TEST_F(ApiBadInput, ZeroLengthRequestsCompleteAndMoveNoBytes) {
  ApiPair p("bad_zero");
  Link l(p);
  auto* ext = l.qa->query_extension<QpExtension>();
  ASSERT_NE(ext, nullptr);
  Qp& qa = *l.qa;
  const Sge z = l.ls(0, 0);
  const Sge z_no_mr{0, 0, 0};  // address 0, token 0: names no MR
  const uint32_t rt = l.rt();
  const uint64_t ra = l.ra(0);
  struct Zero {
    const char* name;
    std::function<Status(void*)> call;
    OperationType type;
    bool consumes_receive;
    uint32_t immediate;  // carried by the request (0: none)
  };
  const std::vector<Zero> cases = {
      {"send, no SGE", [&](void* c) { return qa.send(c, {}, 0); }, OperationType::kSend, true, 0},
      {"send, one zero-length SGE",
       [&](void* c) {
         return qa.send(c, {&z, 1}, 0);
       },
       OperationType::kSend, true, 0},
      {"send, zero-length SGE at address 0 with token 0",
       [&](void* c) {
         return qa.send(c, {&z_no_mr, 1}, 0);
       },
       OperationType::kSend, true, 0},
      {"send inline, zero-length SGE at address 0",
       [&](void* c) {
         return qa.send(c, {&z_no_mr, 1}, op_flag::kInline);
       },
       OperationType::kSend, true, 0},
      {"send_with_immediate, no SGE",
       [&](void* c) { return ext->send_with_immediate(c, {}, 0, 0x1234); }, OperationType::kSend,
       true, 0x1234},
      {"write_with_immediate, no SGE",
       [&](void* c) { return ext->write_with_immediate(c, {}, ra, rt, 0, 0x5678); },
       OperationType::kWrite, true, 0x5678},
      {"write, no SGE", [&](void* c) { return qa.write(c, {}, ra, rt, 0); }, OperationType::kWrite,
       false, 0},
      {"write, one zero-length SGE",
       [&](void* c) {
         return qa.write(c, {&z, 1}, ra, rt, 0);
       },
       OperationType::kWrite, false, 0},
      {"write inline, no SGE", [&](void* c) { return qa.write(c, {}, ra, rt, op_flag::kInline); },
       OperationType::kWrite, false, 0},
      {"write, no SGE, remote address 0 and token 0",
       [&](void* c) { return qa.write(c, {}, 0, 0, 0); }, OperationType::kWrite, false, 0},
      {"read, no SGE", [&](void* c) { return qa.read(c, {}, ra, rt, 0); }, OperationType::kRead,
       false, 0},
      {"read, one zero-length SGE",
       [&](void* c) {
         return qa.read(c, {&z, 1}, ra, rt, 0);
       },
       OperationType::kRead, false, 0},
      {"read, no SGE, remote address 0 and token 0",
       [&](void* c) { return qa.read(c, {}, 0, 0, 0); }, OperationType::kRead, false, 0},
  };
  // b's receives, in the order the requests consume them, of three shapes in turn: no SGE, one
  // zero-length SGE, a 64-byte buffer (which a 0-byte message must leave untouched).
  std::vector<size_t> receivers;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!cases[i].consumes_receive) continue;
    const Sge shapes[2] = {l.rs(0, 0), l.rs(0, 64)};
    const size_t k = receivers.size() % 3;
    const std::span<const Sge> sgl = k == 0 ? std::span<const Sge>{} : std::span(&shapes[k - 1], 1);
    ASSERT_EQ(l.qb->receive(ctx(200 + i), sgl), Status::kSuccess);
    receivers.push_back(i);
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    ASSERT_EQ(cases[i].call(ctx(100 + i)), Status::kSuccess);
  }
  ASSERT_TRUE(l.wait(cases.size(), receivers.size()));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    EXPECT_EQ(l.da[i].request_context, ctx(100 + i));
    EXPECT_EQ(l.da[i].status, Status::kSuccess);
    EXPECT_EQ(l.da[i].type, cases[i].type);
  }
  for (size_t k = 0; k < receivers.size(); ++k) {
    const size_t i = receivers[k];
    SCOPED_TRACE(cases[i].name);
    const ResultEx& r = l.db[k];
    EXPECT_EQ(r.request_context, ctx(200 + i));
    EXPECT_EQ(r.status, Status::kSuccess);
    EXPECT_EQ(r.type, OperationType::kReceive);
    EXPECT_EQ(r.bytes_transferred, 0u);
    const uint32_t imm = cases[i].immediate;
    EXPECT_EQ((r.flags & kResultHasImmediate) != 0, imm != 0);
    if (imm != 0) {
      EXPECT_EQ(r.type_specific_completion_output, imm);
    }
  }
  l.quiet();
  EXPECT_EQ(l.da.size(), cases.size());
  EXPECT_EQ(l.db.size(), receivers.size());
  l.expect_untouched();
  l.expect_works();
}

// ---- Objects of another adapter, another PD, or the wrong type ---------------------------------

// The rule (docs/api.md "Bad input"): an object argument (MR, MW, CQ, SRQ) is checked by the
// call, so one of another adapter or PD, or of the wrong type, is kInvalidParameter at once.
// A token is a value and cannot be traced to the adapter that issued it; see
// TokensTheAdapterDoesNotHonourFailWhenTheRequestExecutes.
TEST_F(ApiBadInput, ObjectsOfAnotherAdapterPdOrTypeAreRefused) {
  ApiPair p("bad_foreign");
  Link l(p);
  Qp& qa = *l.qa;
  Pd& pd = *p.a.pd;
  Pages page(1);
  const std::vector<uint64_t> pages = page.lam(*p.a.adapter);
  std::vector<uint8_t> other(4096, kSentinel);
  auto frmr = [](Pd& on, Handle<Mr>* out) {
    EXPECT_EQ(on.create_mr(true, nullptr, nullptr, out), Status::kSuccess);
    EXPECT_EQ((*out)->initialize_fast_register_mr(4, true, nullptr, nullptr), Status::kSuccess);
  };
  // Adapter b's objects.
  Handle<Mr> fr_b, mr_b = p.b.reg(other.data(), other.size(), mr_flag::kAllowLocalWrite);
  Handle<Mw> mw_b;
  Handle<Srq> srq_b;
  frmr(*p.b.pd, &fr_b);
  ASSERT_EQ(p.b.pd->create_mw(nullptr, nullptr, &mw_b), Status::kSuccess);
  ASSERT_EQ(p.b.pd->create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq_b),
            Status::kSuccess);
  // Adapter a's objects in another PD.
  Handle<Pd> pd2;
  ASSERT_EQ(p.a.adapter->create_pd(nullptr, nullptr, &pd2), Status::kSuccess);
  Handle<Mr> fr2, mr2;
  Handle<Mw> mw2;
  Handle<Srq> srq2;
  frmr(*pd2, &fr2);
  ASSERT_EQ(pd2->create_mr(false, nullptr, nullptr, &mr2), Status::kSuccess);
  ASSERT_EQ(
      mr2->register_mr(other.data(), other.size(), mr_flag::kAllowLocalWrite, nullptr, nullptr),
      Status::kSuccess);
  ASSERT_EQ(pd2->create_mw(nullptr, nullptr, &mw2), Status::kSuccess);
  ASSERT_EQ(pd2->create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq2), Status::kSuccess);
  // a's own, next to the foreign one in two-object calls.
  Handle<Mr> mr_a = p.a.reg(other.data(), other.size(), mr_flag::kAllowLocalWrite);
  Handle<Mw> mw_a;
  ASSERT_EQ(pd.create_mw(nullptr, nullptr, &mw_a), Status::kSuccess);
  Handle<Srq> srq_a;
  ASSERT_EQ(pd.create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq_a), Status::kSuccess);
  const uint32_t tokens[] = {l.fr->get_remote_token(), fr_b->get_remote_token(),
                             fr2->get_remote_token(),  mw_a->get_remote_token(),
                             mw_b->get_remote_token(), mw2->get_remote_token()};
  void* const buf = other.data();
  const uint64_t base = 0x100000;
  Handle<Qp> out;

  const std::vector<Case> cases = {
      {"fast_register: FRMR of adapter b", Status::kInvalidParameter,
       [&](void* c) { return qa.fast_register(c, *fr_b, pages, 0, 100, base, 0); }},
      {"fast_register: FRMR of another PD", Status::kInvalidParameter,
       [&](void* c) { return qa.fast_register(c, *fr2, pages, 0, 100, base, 0); }},
      {"bind: MR of adapter b", Status::kInvalidParameter,
       [&](void* c) { return qa.bind(c, *mr_b, *mw_a, buf, 64, op_flag::kAllowRemoteRead); }},
      {"bind: window of adapter b", Status::kInvalidParameter,
       [&](void* c) { return qa.bind(c, *mr_a, *mw_b, buf, 64, op_flag::kAllowRemoteRead); }},
      {"bind: MR of another PD", Status::kInvalidParameter,
       [&](void* c) { return qa.bind(c, *mr2, *mw_a, buf, 64, op_flag::kAllowRemoteRead); }},
      {"bind: window of another PD", Status::kInvalidParameter,
       [&](void* c) { return qa.bind(c, *mr_a, *mw2, buf, 64, op_flag::kAllowRemoteRead); }},
      {"invalidate: window of adapter b", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, *mw_b, 0); }},
      {"invalidate: FRMR of adapter b", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, *fr_b, 0); }},
      {"invalidate: window of another PD", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, *mw2, 0); }},
      {"invalidate: FRMR of another PD", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, *fr2, 0); }},
      // NdkInvalidate takes an NDK_OBJECT_HEADER*: anything but an MR or MW is refused.
      {"invalidate: a CQ", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, *l.cqa, 0); }},
      {"invalidate: a PD", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, pd, 0); }},
      {"invalidate: the QP itself", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, qa, 0); }},
      {"invalidate: an SRQ", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, *srq_a, 0); }},
      {"create_qp: initiator CQ of adapter b", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp(*p.a.cq, *p.b.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &out);
       }},
      {"create_qp: both CQs of adapter b", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp(*p.b.cq, *p.b.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &out);
       }},
      {"create_qp_with_srq: SRQ of adapter b", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(*p.a.cq, *p.a.cq, *srq_b, nullptr, 4, 1, 0, nullptr, nullptr,
                                      &out);
       }},
      {"create_qp_with_srq: SRQ of another PD", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(*p.a.cq, *p.a.cq, *srq2, nullptr, 4, 1, 0, nullptr, nullptr,
                                      &out);
       }},
      {"create_qp_with_srq: receive CQ of adapter b", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(*p.b.cq, *p.a.cq, *srq_a, nullptr, 4, 1, 0, nullptr, nullptr,
                                      &out);
       }},
      // Unknown flag bits (the ones NDK does not define) on the object-taking posts.
      {"fast_register: flag 0x80000000", Status::kInvalidParameter,
       [&](void* c) { return qa.fast_register(c, *l.fr, pages, 0, 100, base, 0x80000000u); }},
      {"invalidate: flag INLINE", Status::kInvalidParameter,
       [&](void* c) { return qa.invalidate(c, *l.fr, op_flag::kInline); }},
  };
  run_table(cases, 100);

  l.quiet();
  expect_no_completions(l.da, cases, 100);
  expect_no_completions(l.db, cases, 100);
  EXPECT_FALSE(out);  // no QP was created
  // A refused FastRegister or Bind issues no token.
  const uint32_t after[] = {l.fr->get_remote_token(), fr_b->get_remote_token(),
                            fr2->get_remote_token(),  mw_a->get_remote_token(),
                            mw_b->get_remote_token(), mw2->get_remote_token()};
  EXPECT_TRUE(std::equal(std::begin(tokens), std::end(tokens), std::begin(after)));
  EXPECT_EQ(std::count(other.begin(), other.end(), kSentinel), 4096);
  l.expect_untouched();
  l.expect_works();
}

// ---- Tokens the adapter does not honour: seen when the request executes ------------------------

// A token is an opaque 32-bit value (24-bit index, 8-bit tag). Whether it names a live region of
// the QP's PD that grants the access over the whole range is known only when the request
// executes (the region may be registered, invalidated or fast-registered meanwhile, in order
// with the QP's work), and a token of another adapter is indistinguishable from any other token
// this adapter did not issue. So the post succeeds, and the request completes with
// STATUS_ACCESS_VIOLATION (ndkpi.md §3.3: "invalid local/remote registration, bad token, rights
// or bounds"); the QP is then in error and its later work completes with STATUS_CANCELLED
// (§7.5). A remote error also breaks the peer's QP (its receive is flushed, ND2 NdInvalidWrite).
TEST_F(ApiBadInput, TokensTheAdapterDoesNotHonourFailWhenTheRequestExecutes) {
  ApiPair p("bad_tokens");
  std::vector<uint8_t> scratch(4096, 0);
  uint32_t closed_token = 0;
  {
    // Closed at the end of this scope (freed at once: no successors). Its token stays a value.
    Handle<Mr> m = p.a.reg(scratch.data(), 256, mr_flag::kAllowLocalWrite);
    closed_token = m->get_local_token();
  }
  Handle<Mr> dereg = p.a.reg(scratch.data(), 256, mr_flag::kAllowLocalWrite);
  const uint32_t dereg_token = dereg->get_local_token();
  ASSERT_EQ(dereg->deregister_mr(nullptr, nullptr), Status::kSuccess);
  // Adapter b's MR, over memory adapter a never registered.
  Handle<Mr> of_b = p.b.reg(scratch.data() + 1024, 256, mr_flag::kAllowLocalWrite);
  Handle<Pd> pd2;
  ASSERT_EQ(p.a.adapter->create_pd(nullptr, nullptr, &pd2), Status::kSuccess);
  Handle<Mr> in_pd2;
  ASSERT_EQ(pd2->create_mr(false, nullptr, nullptr, &in_pd2), Status::kSuccess);
  ASSERT_EQ(
      in_pd2->register_mr(scratch.data() + 2048, 256, mr_flag::kAllowLocalWrite, nullptr, nullptr),
      Status::kSuccess);
  Handle<Mr> read_only = p.a.reg(scratch.data() + 3072, 256, 0);  // no local write
  const uint32_t kNoSuchIndex = 0xFFFFFF00u;  // index 2^24 - 1: beyond the adapter's table

  struct TokenCase {
    const char* name;
    std::function<Status(Link&, void*)> post;
    OperationType type;
    Status status;  // of the bad request's completion
    Status peer;    // of the peer's posted receive; kPending: it stays posted
  };
  auto sge = [](uint8_t* at, uint32_t token) { return Sge{addr(at), 8, token}; };
  uint8_t* const s = scratch.data();
  const std::vector<TokenCase> cases = {
      {"send: local token 0",
       [&](Link& l, void* c) {
         const Sge g = sge(l.src.data(), 0);
         return l.qa->send(c, {&g, 1}, 0);
       },
       OperationType::kSend, Status::kAccessViolation, Status::kPending},
      {"send: local token naming no MR (index beyond the table)",
       [&](Link& l, void* c) {
         const Sge g = sge(l.src.data(), kNoSuchIndex);
         return l.qa->send(c, {&g, 1}, 0);
       },
       OperationType::kSend, Status::kAccessViolation, Status::kPending},
      {"send: local token of a deregistered MR",
       [&](Link& l, void* c) {
         const Sge g = sge(s, dereg_token);
         return l.qa->send(c, {&g, 1}, 0);
       },
       OperationType::kSend, Status::kAccessViolation, Status::kPending},
      {"send: local token of a closed MR",
       [&](Link& l, void* c) {
         const Sge g = sge(s, closed_token);
         return l.qa->send(c, {&g, 1}, 0);
       },
       OperationType::kSend, Status::kAccessViolation, Status::kPending},
      {"write: local token of an MR of adapter b",
       [&](Link& l, void* c) {
         const Sge g = sge(s + 1024, of_b->get_local_token());
         return l.qa->write(c, {&g, 1}, l.ra(0), l.rt(), 0);
       },
       OperationType::kWrite, Status::kAccessViolation, Status::kPending},
      {"write: local token of an MR of another PD",
       [&](Link& l, void* c) {
         const Sge g = sge(s + 2048, in_pd2->get_local_token());
         return l.qa->write(c, {&g, 1}, l.ra(0), l.rt(), 0);
       },
       OperationType::kWrite, Status::kAccessViolation, Status::kPending},
      {"write: local SGE 4 bytes past the end of its MR",
       [&](Link& l, void* c) {
         const Sge g = l.ls(Link::kLen - 4, 8);
         return l.qa->write(c, {&g, 1}, l.ra(0), l.rt(), 0);
       },
       OperationType::kWrite, Status::kAccessViolation, Status::kPending},
      {"read: local token naming no MR",
       [&](Link& l, void* c) {
         const Sge g = sge(l.src.data(), kNoSuchIndex);
         return l.qa->read(c, {&g, 1}, l.ra(0), l.rt(), 0);
       },
       OperationType::kRead, Status::kAccessViolation, Status::kPending},
      {"read: into an MR without local write",
       [&](Link& l, void* c) {
         const Sge g = sge(s + 3072, read_only->get_local_token());
         return l.qa->read(c, {&g, 1}, l.ra(0), l.rt(), 0);
       },
       OperationType::kRead, Status::kAccessViolation, Status::kPending},
      {"write: remote token naming no MR",
       [&](Link& l, void* c) {
         const Sge g = l.ls(0, 8);
         return l.qa->write(c, {&g, 1}, l.ra(0), kNoSuchIndex, 0);
       },
       OperationType::kWrite, Status::kAccessViolation, Status::kCancelled},
      {"write: remote address + length wraps 2^64",
       [&](Link& l, void* c) {
         const Sge g = l.ls(0, 16);
         return l.qa->write(c, {&g, 1}, kTop - 7, l.rt(), 0);
       },
       OperationType::kWrite, Status::kAccessViolation, Status::kCancelled},
      {"read: remote address + length wraps 2^64",
       [&](Link& l, void* c) {
         const Sge g = l.ls(0, 16);
         return l.qa->read(c, {&g, 1}, kTop - 7, l.rt(), 0);
       },
       OperationType::kRead, Status::kAccessViolation, Status::kCancelled},
      {"fetch_add: remote token naming no MR",
       [&](Link& l, void* c) {
         return l.qa->query_extension<QpExtension>()->fetch_add(c, l.ls(8, 8), l.ra(0),
                                                                kNoSuchIndex, 1, 0);
       },
       OperationType::kFetchAdd, Status::kAccessViolation, Status::kCancelled},
      // NdkSendAndInvalidate: a token the receiver cannot invalidate aborts the connection. The
      // receive it consumed completes INVALID_DEVICE_REQUEST; the sender sees ND_REMOTE_ERROR.
      // (Zero bytes, so that the consumed receive buffer is not written.)
      {"send_and_invalidate: remote token naming no region",
       [&](Link& l, void* c) { return l.qa->send_and_invalidate(c, {}, 0, kNoSuchIndex); },
       OperationType::kSend, Status::kRemoteResources, Status::kInvalidDeviceRequest},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const TokenCase& tc = cases[i];
    SCOPED_TRACE(tc.name);
    Link l(p);
    const Sge r = l.rs(0, 64);
    ASSERT_EQ(l.qb->receive(ctx(300), {&r, 1}), Status::kSuccess);
    ASSERT_EQ(tc.post(l, ctx(301)), Status::kSuccess);  // the token is checked when it executes
    // READ_FENCE: not sent before the earlier request (a READ) completed, so it cannot land.
    const Sge w = l.ls(0, 16);
    ASSERT_EQ(l.qa->write(ctx(302), {&w, 1}, l.ra(0), l.rt(), op_flag::kReadFence),
              Status::kSuccess);
    ASSERT_TRUE(l.wait(2, tc.peer == Status::kPending ? 0 : 1));
    l.quiet();
    ASSERT_EQ(l.da.size(), 2u);
    EXPECT_EQ(l.da[0].request_context, ctx(301));
    EXPECT_EQ(l.da[0].status, tc.status);
    EXPECT_EQ(l.da[0].type, tc.type);
    EXPECT_EQ(l.da[1].request_context, ctx(302));
    EXPECT_EQ(l.da[1].status, Status::kCancelled);  // ndkpi.md §7.5: later work is flushed
    if (tc.peer == Status::kPending) {
      EXPECT_TRUE(l.db.empty());
    } else {
      ASSERT_EQ(l.db.size(), 1u);
      EXPECT_EQ(l.db[0].request_context, ctx(300));
      EXPECT_EQ(l.db[0].status, tc.peer);
    }
    l.expect_untouched();
    EXPECT_EQ(std::count(scratch.begin(), scratch.end(), 0), 4096);
  }
  // The adapters are fine: a new connection works.
  Link fresh(p);
  fresh.expect_works();
}

// ---- Objects whose close is pending ------------------------------------------------------------

struct Notes {
  std::atomic<int> n{0};
  static void cb(void* c, Status) { static_cast<Notes*>(c)->n.fetch_add(1); }
  int count() const { return n.load(); }
};

// An object whose close is pending (ndkpi.md §1.4: it waits for its successors) refuses new
// work with STATUS_INVALID_DEVICE_STATE, what NDK's creates return for a closed antecedent
// (see api_lifetime_test.cc, AntecedentsClosedFirstPendUntilTheirSuccessorsAreGone). A closing
// CQ returns no completions and ignores arms (those calls return no status). An MW, and an MR
// without windows, close at once and are never observable as closing.
TEST_F(ApiBadInput, ObjectsWhoseCloseIsPendingRefuseNewWork) {
  ApiPair p("bad_closing");
  Link l(p);
  Pd& pd = *p.a.pd;
  Pages wpage(1);
  uint8_t* const wbuf = wpage.p;
  std::vector<uint8_t> other(256, kSentinel);
  std::memset(wbuf, kSentinel, wpage.len);

  // A PD kept by an MR and an SRQ.
  Handle<Pd> pdx;
  ASSERT_EQ(p.a.adapter->create_pd(nullptr, nullptr, &pdx), Status::kSuccess);
  Handle<Mr> mrx;
  Handle<Srq> srqp;
  ASSERT_EQ(pdx->create_mr(false, nullptr, nullptr, &mrx), Status::kSuccess);
  ASSERT_EQ(pdx->create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srqp), Status::kSuccess);
  // A CQ kept by a QP, holding two flushed receives, notified once for the first: the second
  // arrived after that notification, so an arm of the live CQ would fire at once (§3.4).
  Notes notes;
  Handle<Cq> cqx;
  ASSERT_EQ(p.a.adapter->create_cq(16, &Notes::cb, &notes, nullptr, nullptr, &cqx),
            Status::kSuccess);
  Handle<Qp> qx;
  ASSERT_EQ(pd.create_qp(*cqx, *cqx, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &qx),
            Status::kSuccess);
  const Sge rx = l.ls(0, 8);
  ASSERT_EQ(qx->receive(ctx(1), {&rx, 1}), Status::kSuccess);
  ASSERT_EQ(qx->receive(ctx(2), {&rx, 1}), Status::kSuccess);
  cqx->arm(CqNotify::kAny);
  qx->flush();
  ASSERT_TRUE(p.run_until([&] { return notes.count() == 1; }));
  // Not an NDK_CQ_NOTIFY_* value: ignored (NdkArmCq is VOID), no notification.
  cqx->arm(static_cast<CqNotify>(3));
  p.run_for(kQuiet);
  EXPECT_EQ(notes.count(), 1);
  // An SRQ kept by a QP.
  Handle<Srq> srqx;
  ASSERT_EQ(pd.create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srqx), Status::kSuccess);
  Handle<Qp> qs;
  ASSERT_EQ(pd.create_qp_with_srq(*p.a.cq, *p.a.cq, *srqx, nullptr, 4, 1, 0, nullptr, nullptr, &qs),
            Status::kSuccess);
  // An MR kept by a window bound to it.
  Handle<Mr> mrc = p.a.reg(wbuf, wpage.len, mr_flag::kAllowLocalWrite);
  Handle<Mw> mwc, mw2;
  ASSERT_EQ(pd.create_mw(nullptr, nullptr, &mwc), Status::kSuccess);
  ASSERT_EQ(pd.create_mw(nullptr, nullptr, &mw2), Status::kSuccess);
  ASSERT_EQ(l.qa->bind(ctx(3), *mrc, *mwc, wbuf, 64, op_flag::kAllowRemoteRead), Status::kSuccess);
  ASSERT_TRUE(l.wait(1, 0));
  ASSERT_EQ(l.da[0].status, Status::kSuccess);
  const uint32_t mw2_token = mw2->get_remote_token();

  Completion pd_closed, cq_closed, srq_closed, mr_closed;
  Pd* const pd_raw = pdx.get();
  Cq* const cq_raw = cqx.get();
  Srq* const srq_raw = srqx.get();
  Mr* const mr_raw = mrc.get();
  ASSERT_EQ(pdx.close(&Completion::on_close, &pd_closed), Status::kPending);
  ASSERT_EQ(cqx.close(&Completion::on_close, &cq_closed), Status::kPending);
  ASSERT_EQ(srqx.close(&Completion::on_close, &srq_closed), Status::kPending);
  ASSERT_EQ(mrc.close(&Completion::on_close, &mr_closed), Status::kPending);

  Handle<Mr> out_mr;
  Handle<Mw> out_mw;
  Handle<Srq> out_srq;
  Handle<Qp> out_qp;
  uint32_t priv = 0;
  const Sge srq_sge = l.ls(0, 8);
  const std::vector<Case> cases = {
      {"create_mr on a closing PD", Status::kInvalidDeviceState,
       [&](void*) { return pd_raw->create_mr(false, nullptr, nullptr, &out_mr); }},
      {"create_mw on a closing PD", Status::kInvalidDeviceState,
       [&](void*) { return pd_raw->create_mw(nullptr, nullptr, &out_mw); }},
      {"create_srq on a closing PD", Status::kInvalidDeviceState,
       [&](void*) {
         return pd_raw->create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &out_srq);
       }},
      {"create_qp on a closing PD", Status::kInvalidDeviceState,
       [&](void*) {
         return pd_raw->create_qp(*p.a.cq, *p.a.cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr,
                                  &out_qp);
       }},
      {"create_qp_with_srq on a closing PD (its live SRQ)", Status::kInvalidDeviceState,
       [&](void*) {
         return pd_raw->create_qp_with_srq(*p.a.cq, *p.a.cq, *srqp, nullptr, 4, 1, 0, nullptr,
                                           nullptr, &out_qp);
       }},
      {"get_privileged_memory_region_token on a closing PD", Status::kInvalidDeviceState,
       [&](void*) { return pd_raw->get_privileged_memory_region_token(&priv); }},
      {"create_qp with a closing initiator CQ", Status::kInvalidDeviceState,
       [&](void*) {
         return pd.create_qp(*p.a.cq, *cq_raw, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, &out_qp);
       }},
      {"control_interrupt_moderation on a closing CQ", Status::kInvalidDeviceState,
       [&](void*) { return cq_raw->control_interrupt_moderation(10, 4); }},
      {"receive on a closing SRQ", Status::kInvalidDeviceState,
       [&](void* c) {
         return srq_raw->receive(c, {&srq_sge, 1});
       }},
      {"modify of a closing SRQ", Status::kInvalidDeviceState,
       [&](void*) { return srq_raw->modify(16, 1, nullptr, nullptr); }},
      {"create_qp_with_srq with a closing SRQ", Status::kInvalidDeviceState,
       [&](void*) {
         return pd.create_qp_with_srq(*p.a.cq, *p.a.cq, *srq_raw, nullptr, 4, 1, 0, nullptr,
                                      nullptr, &out_qp);
       }},
      {"register_mr on a closing MR", Status::kInvalidDeviceState,
       [&](void*) { return mr_raw->register_mr(other.data(), 64, 0, nullptr, nullptr); }},
      {"deregister_mr on a closing MR (not DEVICE_BUSY)", Status::kInvalidDeviceState,
       [&](void*) { return mr_raw->deregister_mr(nullptr, nullptr); }},
      {"initialize_fast_register_mr on a closing MR", Status::kInvalidDeviceState,
       [&](void*) { return mr_raw->initialize_fast_register_mr(4, false, nullptr, nullptr); }},
      {"bind to an MR whose close is pending", Status::kInvalidDeviceState,
       [&](void* c) {
         return l.qa->bind(c, *mr_raw, *mw2, wbuf + 64, 64, op_flag::kAllowRemoteRead);
       }},
  };
  run_table(cases, 100);
  // The calls without a status: a closing CQ ignores arms and returns no completions (two
  // are queued in it), and has no notification to cancel.
  cq_raw->arm(CqNotify::kAny);
  ResultEx rex[4];
  Result res[4];
  EXPECT_EQ(cq_raw->get_results_ex(rex), 0u);
  EXPECT_EQ(cq_raw->get_results(res), 0u);
  auto* cq_ext = cq_raw->query_extension<CqExtension>();
  ASSERT_NE(cq_ext, nullptr);
  EXPECT_FALSE(cq_ext->cancel_notification());
  l.quiet();
  EXPECT_EQ(notes.count(), 1);
  ASSERT_EQ(l.da.size(), 1u);  // the bind only
  expect_no_completions(l.db, cases, 100);
  EXPECT_FALSE(out_mr);
  EXPECT_FALSE(out_mw);
  EXPECT_FALSE(out_srq);
  EXPECT_FALSE(out_qp);
  EXPECT_EQ(mw2->get_remote_token(), mw2_token);
  EXPECT_EQ(std::count(other.begin(), other.end(), kSentinel), 256);
  EXPECT_EQ(std::count(wbuf, wbuf + wpage.len, kSentinel), static_cast<long>(wpage.len));

  // The successors go; each pending close completes once.
  mrx.reset();
  srqp.reset();
  qx.reset();
  qs.reset();
  ASSERT_EQ(l.qa->invalidate(ctx(4), *mwc, 0), Status::kSuccess);
  ASSERT_TRUE(l.wait(2, 0));
  EXPECT_EQ(l.da[1].status, Status::kSuccess);
  ASSERT_TRUE(p.run_until([&] {
    return pd_closed.count() == 1 && cq_closed.count() == 1 && srq_closed.count() == 1 &&
           mr_closed.count() == 1;
  }));
  l.quiet();
  EXPECT_EQ(pd_closed.count() + cq_closed.count() + srq_closed.count() + mr_closed.count(), 4);
  EXPECT_EQ(notes.count(), 1);
  l.expect_untouched();
  l.expect_works();
}

// A QP whose close is pending (the close flushes it and then detaches it from the engine)
// refuses every post with STATUS_INVALID_DEVICE_STATE; only what was posted before the close
// completes (STATUS_CANCELLED, ndkpi.md §7.5: "close of a QP must start cancellation").
TEST_F(ApiBadInput, QpWhoseCloseIsPendingRefusesEveryPost) {
  ApiPair p("bad_qpclose");
  Link l(p);
  Pages page(1);
  const std::vector<uint64_t> pages = page.lam(*p.a.adapter);
  std::memset(page.p, kSentinel, page.len);
  Handle<Mr> mr = p.a.reg(page.p, page.len, mr_flag::kAllowLocalWrite);
  Handle<Mw> mw;
  ASSERT_EQ(p.a.pd->create_mw(nullptr, nullptr, &mw), Status::kSuccess);
  const uint32_t mw_token = mw->get_remote_token();
  const uint64_t fr_token = l.fr->get_remote_token();
  const Sge before = l.ls(0, 8);
  ASSERT_EQ(l.qa->receive(ctx(400), {&before, 1}), Status::kSuccess);
  Qp& q = *l.qa;
  auto* ext = q.query_extension<QpExtension>();
  auto* conn = q.query_extension<QpConnectExtension>();
  ASSERT_NE(ext, nullptr);
  ASSERT_NE(conn, nullptr);
  Completion closed, modified;
  // Only the engine can finish this close (flush, then detach), and the engine runs only in
  // this thread's run_until below: until then the QP is allocated and closing.
  ASSERT_EQ(l.qa.close(&Completion::on_close, &closed), Status::kPending);

  const Sge g = l.ls(0, 8);
  const std::span<const Sge> one(&g, 1);
  const uint64_t ra = l.ra(0);
  const uint32_t rt = l.rt();
  QpAttributes to_err;
  to_err.state = QpState::kErr;
  const std::vector<Case> cases = {
      {"send", Status::kInvalidDeviceState, [&](void* c) { return q.send(c, one, 0); }},
      {"send inline", Status::kInvalidDeviceState,
       [&](void* c) { return q.send(c, one, op_flag::kInline); }},
      {"send_and_invalidate", Status::kInvalidDeviceState,
       [&](void* c) { return q.send_and_invalidate(c, one, 0, 1); }},
      {"write", Status::kInvalidDeviceState, [&](void* c) { return q.write(c, one, ra, rt, 0); }},
      {"read", Status::kInvalidDeviceState, [&](void* c) { return q.read(c, one, ra, rt, 0); }},
      {"receive", Status::kInvalidDeviceState, [&](void* c) { return q.receive(c, one); }},
      {"send_with_immediate", Status::kInvalidDeviceState,
       [&](void* c) { return ext->send_with_immediate(c, one, 0, 1); }},
      {"write_with_immediate", Status::kInvalidDeviceState,
       [&](void* c) { return ext->write_with_immediate(c, one, ra, rt, 0, 1); }},
      {"compare_swap", Status::kInvalidDeviceState,
       [&](void* c) { return ext->compare_swap(c, g, ra, rt, 0, 1, 0); }},
      {"fetch_add", Status::kInvalidDeviceState,
       [&](void* c) { return ext->fetch_add(c, g, ra, rt, 1, 0); }},
      {"fast_register", Status::kInvalidDeviceState,
       [&](void* c) { return q.fast_register(c, *l.fr, pages, 0, 100, 0x100000, 0); }},
      {"invalidate", Status::kInvalidDeviceState,
       [&](void* c) { return q.invalidate(c, *l.fr, 0); }},
      {"bind", Status::kInvalidDeviceState,
       [&](void* c) { return q.bind(c, *mr, *mw, page.p, 64, op_flag::kAllowRemoteRead); }},
      {"QpConnectExtension::modify to ERR", Status::kInvalidDeviceState,
       [&](void*) {
         return conn->modify(to_err, qp_attr_mask::kState, &Completion::on_request, &modified);
       }},
  };
  run_table(cases, 100);
  q.flush();  // ignored: the close flushes
  ASSERT_TRUE(p.run_until([&] { return closed.count() == 1; }));
  l.quiet();
  ASSERT_EQ(l.da.size(), 1u);
  EXPECT_EQ(l.da[0].request_context, ctx(400));
  EXPECT_EQ(l.da[0].status, Status::kCancelled);
  EXPECT_EQ(l.da[0].type, OperationType::kReceive);
  EXPECT_TRUE(l.db.empty());
  EXPECT_EQ(modified.count(), 0);
  EXPECT_EQ(closed.count(), 1);
  EXPECT_EQ(mw->get_remote_token(), mw_token);
  EXPECT_EQ(l.fr->get_remote_token(), fr_token);
  EXPECT_EQ(std::count(page.p, page.p + page.len, kSentinel), static_cast<long>(page.len));
  l.expect_untouched();
  Link fresh(p);
  fresh.expect_works();
}

// ---- Malformed arguments to creates and control calls -------------------------------------------

TEST_F(ApiBadInput, CreateAndControlCallsRefuseMalformedArguments) {
  ApiPair p("bad_args");
  Link l(p);
  Adapter& adapter = *p.a.adapter;
  Pd& pd = *p.a.pd;
  const AdapterInfo info = adapter.adapter_info();
  Handle<Mr> mr;
  ASSERT_EQ(pd.create_mr(false, nullptr, nullptr, &mr), Status::kSuccess);
  Handle<Srq> srq;
  ASSERT_EQ(pd.create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, &srq), Status::kSuccess);
  Cq& cq = *p.a.cq;
  std::vector<uint8_t> buf(8192);
  const std::span<uint64_t> null_pages(static_cast<uint64_t*>(nullptr), 4);
  uint64_t pages[4];
  uint32_t count = 0, fbo = 0;
  Handle<Qp> out_qp;
  auto* conn = l.qa->query_extension<QpConnectExtension>();
  ASSERT_NE(conn, nullptr);
  QpAttributes bad_state;
  bad_state.state = static_cast<QpState>(9);
  AdapterConfig unprobed;
  unprobed.port_id = 1000;  // never probed (above RTE_MAX_ETHPORTS)
  AdapterConfig too_few_qps;
  too_few_qps.port_id = 1000;
  too_few_qps.max_qps = 2;  // QPNs 2 .. max_qps - 1: none
  std::unique_ptr<Adapter> out_adapter;
  Engine unused_engine;

  const std::vector<Case> cases = {
      {"create_cq: null out", Status::kInvalidParameter,
       [&](void*) { return adapter.create_cq(16, nullptr, nullptr, nullptr, nullptr, nullptr); }},
      {"create_pd: null out", Status::kInvalidParameter,
       [&](void*) { return adapter.create_pd(nullptr, nullptr, nullptr); }},
      {"create_mr: null out", Status::kInvalidParameter,
       [&](void*) { return pd.create_mr(false, nullptr, nullptr, nullptr); }},
      {"create_mw: null out", Status::kInvalidParameter,
       [&](void*) { return pd.create_mw(nullptr, nullptr, nullptr); }},
      {"create_srq: null out", Status::kInvalidParameter,
       [&](void*) { return pd.create_srq(8, 1, 0, nullptr, nullptr, nullptr, nullptr, nullptr); }},
      {"create_srq: depth 0", Status::kInvalidParameter,
       [&](void*) {
         Handle<Srq> s;
         return pd.create_srq(0, 1, 0, nullptr, nullptr, nullptr, nullptr, &s);
       }},
      {"create_qp: null out and no completion", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp(cq, cq, nullptr, 4, 4, 1, 1, 0, nullptr, nullptr, nullptr);
       }},
      {"create_qp_with_srq: null out and no completion", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(cq, cq, *srq, nullptr, 4, 1, 0, nullptr, nullptr, nullptr);
       }},
      {"create_qp_with_srq: initiator depth 0", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(cq, cq, *srq, nullptr, 0, 1, 0, nullptr, nullptr, &out_qp);
       }},
      {"create_qp_with_srq: initiator depth above the maximum", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(cq, cq, *srq, nullptr, info.max_initiator_queue_depth + 1, 1,
                                      0, nullptr, nullptr, &out_qp);
       }},
      {"create_qp_with_srq: initiator SGEs above the maximum", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(cq, cq, *srq, nullptr, 4, info.max_initiator_request_sge + 1,
                                      0, nullptr, nullptr, &out_qp);
       }},
      {"create_qp_with_srq: inline size above the maximum", Status::kInvalidParameter,
       [&](void*) {
         return pd.create_qp_with_srq(cq, cq, *srq, nullptr, 4, 1, info.max_inline_data_size + 1,
                                      nullptr, nullptr, &out_qp);
       }},
      {"register_mr: address + length wraps 2^64", Status::kInvalidParameter,
       [&](void*) {
         return mr->register_mr(reinterpret_cast<const void*>(kTop - 4095), 8192, 0, nullptr,
                                nullptr);
       }},
      {"register_mr: flag 0x10 (an op flag, not an MR flag)", Status::kInvalidParameter,
       [&](void*) { return mr->register_mr(buf.data(), buf.size(), 0x10, nullptr, nullptr); }},
      {"build_lam: null page array with room for 4", Status::kInvalidParameter,
       [&](void*) { return adapter.build_lam(buf.data(), 100, null_pages, &count, &fbo); }},
      {"build_lam: null page count", Status::kInvalidParameter,
       [&](void*) { return adapter.build_lam(buf.data(), 100, pages, nullptr, &fbo); }},
      {"build_lam: null first byte offset", Status::kInvalidParameter,
       [&](void*) { return adapter.build_lam(buf.data(), 100, pages, &count, nullptr); }},
      {"build_lam: zero length", Status::kInvalidParameter,
       [&](void*) { return adapter.build_lam(buf.data(), 0, pages, &count, &fbo); }},
      {"build_lam: address + length wraps 2^64", Status::kInvalidParameter,
       [&](void*) {
         return adapter.build_lam(reinterpret_cast<const void*>(kTop - 4095), 8192, pages, &count,
                                  &fbo);
       }},
      {"get_privileged_memory_region_token: null out", Status::kInvalidParameter,
       [&](void*) { return pd.get_privileged_memory_region_token(nullptr); }},
      {"query_extension on an object: null out", Status::kInvalidParameter,
       [&](void*) {
         return l.qa->query_extension(QpExtension::kId, QpExtension::kVersion, nullptr);
       }},
      {"query_extension on the adapter: null out", Status::kInvalidParameter,
       [&](void*) {
         return adapter.query_extension(AdapterExtension::kId, AdapterExtension::kVersion, nullptr);
       }},
      {"QpConnectExtension::modify: a state beyond ERR", Status::kInvalidParameter,
       [&](void*) { return conn->modify(bad_state, qp_attr_mask::kState, nullptr, nullptr); }},
      {"Adapter::open: null out", Status::kInvalidParameter,
       [&](void*) { return Adapter::open(unprobed, unused_engine, nullptr); }},
      {"Adapter::open: a port that was never probed", Status::kInvalidParameter,
       [&](void*) { return Adapter::open(unprobed, unused_engine, &out_adapter); }},
      {"Adapter::open: max_qps 2 (no QP number left)", Status::kInvalidParameter,
       [&](void*) { return Adapter::open(too_few_qps, unused_engine, &out_adapter); }},
  };
  run_table(cases, 100);
  EXPECT_FALSE(out_qp);
  EXPECT_EQ(out_adapter, nullptr);
  EXPECT_EQ(mr->get_local_token(), 0u);  // never registered
  EXPECT_EQ(count, 0u);                  // build_lam wrote nothing
  EXPECT_EQ(conn->state(), QpState::kRts);

  // NdkGetCqResults into a null array with room for 4: returns 0 and takes nothing. Checked
  // in the same step as a real poll that finds the completion, so one was there to take.
  const Sge w = l.ls(0, 8);
  ASSERT_EQ(l.qa->write(ctx(1), {&w, 1}, l.ra(0), l.rt(), 0), Status::kSuccess);
  const std::span<ResultEx> null_results(static_cast<ResultEx*>(nullptr), 4);
  size_t null_polls = 0;
  ResultEx got[4];
  size_t n = 0;
  ASSERT_TRUE(p.run_until([&] {
    EXPECT_EQ(l.cqa->get_results_ex(null_results), 0u);
    ++null_polls;
    n = l.cqa->get_results_ex(got);
    return n != 0;
  }));
  EXPECT_GE(null_polls, 1u);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(got[0].request_context, ctx(1));
  EXPECT_EQ(got[0].status, Status::kSuccess);
  EXPECT_EQ(std::memcmp(l.dst.data(), l.src.data(), 8), 0);
  std::fill(l.dst.begin(), l.dst.begin() + 8, kSentinel);

  l.quiet();
  expect_no_completions(l.da, cases, 100);
  expect_no_completions(l.db, cases, 100);
  l.expect_untouched();
  l.expect_works();
}

// ---- AdapterConfig::congestion out of its ranges ------------------------------------------------

// Each value that does not fit is refused with STATUS_INVALID_PARAMETER before the port is
// touched. The port is adapter A's, open already: the same configuration with the field in range
// fails with STATUS_DEVICE_BUSY instead, which shows that it was the field that was refused.
TEST_F(ApiBadInput, CongestionSettingsOutOfRangeAreRefused) {
  ApiPair p("bad_cc");
  Engine engine;
  std::unique_ptr<Adapter> out;
  AdapterConfig base;
  base.port_id = p.port_a;
  ASSERT_EQ(Adapter::open(base, engine, &out), Status::kDeviceBusy);
  struct Bad {
    const char* what;
    void (*set)(CongestionConfig&);
  };
  const Bad bad[] = {
      {"dscp 64", [](CongestionConfig& c) { c.dscp = 64; }},
      {"dscp -2", [](CongestionConfig& c) { c.dscp = -2; }},
      {"cnp_dscp 64", [](CongestionConfig& c) { c.cnp_dscp = 64; }},
      {"cnp_interval_us 10 s + 1", [](CongestionConfig& c) { c.cnp_interval_us = 10'000'001; }},
      {"min_rate 0", [](CongestionConfig& c) { c.dcqcn.min_rate_mbps = 0; }},
      {"min_rate above max_rate",
       [](CongestionConfig& c) {
         c.dcqcn.max_rate_mbps = 100;
         c.dcqcn.min_rate_mbps = 101;
       }},
      {"max_rate above 10 Tb/s", [](CongestionConfig& c) { c.dcqcn.max_rate_mbps = 10'000'001; }},
      {"time_reset_us 0", [](CongestionConfig& c) { c.dcqcn.time_reset_us = 0; }},
      {"alpha_period_us 0", [](CongestionConfig& c) { c.dcqcn.alpha_period_us = 0; }},
      {"gd 0", [](CongestionConfig& c) { c.dcqcn.gd = 0; }},
      {"gd 31", [](CongestionConfig& c) { c.dcqcn.gd = 31; }},
      {"min_dec_fac 0", [](CongestionConfig& c) { c.dcqcn.min_dec_fac = 0; }},
      {"min_dec_fac 101", [](CongestionConfig& c) { c.dcqcn.min_dec_fac = 101; }},
      {"g 1025", [](CongestionConfig& c) { c.dcqcn.g = 1025; }},
      {"initial_alpha 1025", [](CongestionConfig& c) { c.dcqcn.initial_alpha = 1025; }},
      {"threshold 65536", [](CongestionConfig& c) { c.dcqcn.threshold = 65536; }},
      {"first_cnp_rate above max_rate",
       [](CongestionConfig& c) {
         c.dcqcn.max_rate_mbps = 100;
         c.dcqcn.first_cnp_rate_mbps = 200;
       }},
  };
  for (const Bad& b : bad) {
    AdapterConfig c = base;
    b.set(c.congestion);
    EXPECT_EQ(Adapter::open(c, engine, &out), Status::kInvalidParameter) << b.what;
    EXPECT_EQ(out, nullptr) << b.what;
  }
  // The edges of each range are accepted (and so reach the port, which is busy).
  AdapterConfig edge = base;
  edge.congestion.dscp = 63;
  edge.congestion.cnp_dscp = 63;
  edge.congestion.dcqcn.gd = 30;
  edge.congestion.dcqcn.min_dec_fac = 100;
  edge.congestion.dcqcn.g = 1024;
  edge.congestion.dcqcn.max_rate_mbps = 100;
  edge.congestion.dcqcn.min_rate_mbps = 100;
  EXPECT_EQ(Adapter::open(edge, engine, &out), Status::kDeviceBusy);
}

}  // namespace
}  // namespace urnic::test
