// Extended CQs (ibv_create_cq_ex) and their poll-by-field API: ibv_start_poll takes one
// completion and ibv_next_poll the next, and ibv_wc_read_* read the current one's fields. The
// CQ is urnic's as any other (verbs/cq.cc): ibv_poll_cq, notification, resize and destroy work
// on it through ibv_cq_ex_to_cq. Fields a RoCE RNIC without a clock cannot give (completion
// timestamps, CVLAN, flow tags, tag matching) are refused at creation, as rdma-core documents
// for a device that lacks them (EOPNOTSUPP).
#include <cerrno>
#include <cstring>

#include "verbs/internal.h"

using namespace urnic;
using namespace urnic::verbs;

namespace {

VCq* of(ibv_cq_ex* x) noexcept { return reinterpret_cast<VCq*>(x); }

constexpr uint64_t kWcFlags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                              IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                              IBV_WC_EX_WITH_DLID_PATH_BITS;

// One completion into `cur` (driving the engine once when none waits, as ibv_poll_cq does);
// ENOENT when there is none.
int take(VCq* c) noexcept {
  ResultEx r;
  size_t k = c->h->get_results_ex(std::span(&r, 1));
  if (k == 0) {
    Runtime::get().drive();
    k = c->h->get_results_ex(std::span(&r, 1));
  }
  if (k == 0) return ENOENT;
  to_wc(r, &c->cur);
  c->cqx.wr_id = c->cur.wr_id;
  c->cqx.status = c->cur.status;
  return 0;
}

// ibv_start_poll: takes the CQ's lock until ibv_end_poll (not taken when it returns ENOENT, as
// then no ibv_end_poll follows).
int start_poll(ibv_cq_ex* x, ibv_poll_cq_attr* attr) {
  if (attr == nullptr || attr->comp_mask != 0) return EINVAL;
  VCq* c = of(x);
  c->lock.lock();
  const int rc = take(c);
  if (rc != 0) c->lock.unlock();
  return rc;
}

int next_poll(ibv_cq_ex* x) { return take(of(x)); }
void end_poll(ibv_cq_ex* x) { of(x)->lock.unlock(); }

ibv_wc_opcode read_opcode(ibv_cq_ex* x) { return of(x)->cur.opcode; }
uint32_t read_vendor_err(ibv_cq_ex* x) { return of(x)->cur.vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* x) { return of(x)->cur.byte_len; }
__be32 read_imm_data(ibv_cq_ex* x) { return of(x)->cur.imm_data; }
uint32_t read_qp_num(ibv_cq_ex* x) { return of(x)->cur.qp_num; }
uint32_t read_src_qp(ibv_cq_ex* x) { return of(x)->cur.src_qp; }
unsigned int read_wc_flags(ibv_cq_ex* x) { return of(x)->cur.wc_flags; }
uint32_t read_slid(ibv_cq_ex* x) { return of(x)->cur.slid; }
uint8_t read_sl(ibv_cq_ex* x) { return of(x)->cur.sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* x) { return of(x)->cur.dlid_path_bits; }

}  // namespace

namespace urnic::verbs {

ibv_cq_ex* create_cq_ex(ibv_context* ctx, ibv_cq_init_attr_ex* a) {
  if (ctx == nullptr || a == nullptr) return fail_null<ibv_cq_ex>(EINVAL);
  if (a->comp_mask & ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))
    return fail_null<ibv_cq_ex>(EINVAL);
  // Timestamps, CVLAN, flow tags, tag matching: not offered.
  if (a->wc_flags & ~kWcFlags) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  // A single-threaded CQ needs no lock (one is taken all the same); ignoring overruns is not
  // offered (an overrun kills the CQ, as NDK's does).
  if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
      (a->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED)))
    return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
      (a->parent_domain == nullptr || a->parent_domain->context != ctx))
    return fail_null<ibv_cq_ex>(EINVAL);
  VCq* c = create_cq(ctx, static_cast<int>(a->cqe), a->cq_context, a->channel,
                     static_cast<int>(a->comp_vector));
  if (c == nullptr) return nullptr;
  ibv_cq_ex& x = c->cqx;
  x.comp_mask = 0;
  x.start_poll = start_poll;
  x.next_poll = next_poll;
  x.end_poll = end_poll;
  x.read_opcode = read_opcode;
  x.read_vendor_err = read_vendor_err;
  x.read_byte_len = read_byte_len;
  x.read_imm_data = read_imm_data;
  x.read_qp_num = read_qp_num;
  x.read_src_qp = read_src_qp;
  x.read_wc_flags = read_wc_flags;
  x.read_slid = read_slid;
  x.read_sl = read_sl;
  x.read_dlid_path_bits = read_dlid_path_bits;
  return &x;
}

}  // namespace urnic::verbs
