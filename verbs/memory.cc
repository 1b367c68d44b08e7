// Protection domains, memory regions and memory windows.
#include <condition_variable>
#include <cstring>

#include "verbs/internal.h"

using namespace urnic;
using namespace urnic::verbs;

namespace urnic::verbs {

// A close that pends completes on the adapter's control thread; the caller waits for it here
// (never on the control thread itself: verbs are not called from NDK callbacks).
void close_object_sync(Object* o) noexcept {
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  } w;
  const Status s = o->close(
      [](void* ctx) {
        auto* w = static_cast<Wait*>(ctx);
        std::lock_guard lock(w->mu);
        w->done = true;
        w->cv.notify_all();
      },
      &w);
  if (s != Status::kPending) return;
  std::unique_lock lock(w.mu);
  w.cv.wait(lock, [&] { return w.done; });
}

}  // namespace urnic::verbs

namespace {

// ibv_access_flags -> mr_flag; -1 for a combination ibverbs forbids (remote write or atomic
// without local write, IBTA §10.6.3.1) or one urnic cannot honour.
int64_t mr_flags(unsigned access) {
  constexpr unsigned kKnown = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
                              IBV_ACCESS_MW_BIND | IBV_ACCESS_HUGETLB | IBV_ACCESS_RELAXED_ORDERING;
  if (access & ~kKnown) return -1;  // ZERO_BASED, ON_DEMAND, FLUSH_*: not offered
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    return -1;
  uint32_t f = mr_flag::kAllowLocalRead;
  if (access & IBV_ACCESS_LOCAL_WRITE) f |= mr_flag::kAllowLocalWrite;
  if (access & IBV_ACCESS_REMOTE_WRITE) f |= mr_flag::kAllowRemoteWrite;
  if (access & IBV_ACCESS_REMOTE_READ) f |= mr_flag::kAllowRemoteRead;
  if (access & IBV_ACCESS_REMOTE_ATOMIC) f |= mr_flag::kAllowRemoteAtomic;
  return f;
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
  // Type 2 windows take the rkey the consumer chooses (ibv_inc_rkey); urnic's keys are the
  // adapter's, so only type 1 (the key comes back from the bind) is offered.
  if (pd == nullptr || type != IBV_MW_TYPE_1) return fail_null<ibv_mw>(pd ? EOPNOTSUPP : EINVAL);
  auto m = std::make_unique<VMw>();
  const Status s = pd_of(pd)->h->create_mw(nullptr, nullptr, &m->h);
  if (s != Status::kSuccess) return fail_null<ibv_mw>(status_errno(s));
  m->mw.context = pd->context;
  m->mw.pd = pd;
  m->mw.type = type;
  ++pd_of(pd)->users;
  return &m.release()->mw;
}

int dealloc_mw(ibv_mw* mw) {
  if (mw == nullptr) return EINVAL;
  auto* m = reinterpret_cast<VMw*>(mw);
  --pd_of(mw->pd)->users;
  close_sync(m->h);
  delete m;
  return 0;
}

}  // namespace

namespace urnic::verbs {

int bind_type1(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* b);  // post.cc

void fill_memory_ops(Context& c) noexcept {
  c.vctx.context.ops.alloc_mw = alloc_mw;
  c.vctx.context.ops.dealloc_mw = dealloc_mw;
  c.vctx.context.ops.bind_mw = bind_type1;
}

}  // namespace urnic::verbs

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
  if (ctx == nullptr) return fail_null<ibv_pd>(EINVAL);
  auto p = std::make_unique<VPd>();
  const Status s = adapter_of(ctx).create_pd(nullptr, nullptr, &p->h);
  if (s != Status::kSuccess) return fail_null<ibv_pd>(status_errno(s));
  p->pd.context = ctx;
  return &p.release()->pd;
}

int ibv_dealloc_pd(ibv_pd* pd) {
  if (pd == nullptr) return EINVAL;
  VPd* p = pd_of(pd);
  if (p->users.load() != 0) return EBUSY;  // ibverbs: a PD in use is not freed
  close_sync(p->h);
  delete p;
  return 0;
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  if (pd == nullptr) return fail_null<ibv_mr>(EINVAL);
  const int64_t flags = mr_flags(access);
  if (flags < 0) return fail_null<ibv_mr>(EINVAL);
  // The peer addresses a urnic region by its virtual address (NDK's logical address == VA), so
  // an IOVA other than the address is not offered.
  if (iova != reinterpret_cast<uintptr_t>(addr)) return fail_null<ibv_mr>(EOPNOTSUPP);
  auto m = std::make_unique<VMr>();
  Status s = pd_of(pd)->h->create_mr(false, nullptr, nullptr, &m->h);
  if (s == Status::kSuccess)
    s = m->h->register_mr(addr, length, static_cast<uint32_t>(flags), nullptr, nullptr);
  if (s != Status::kSuccess) {
    close_sync(m->h);
    return fail_null<ibv_mr>(s == Status::kInvalidBufferSize ? EFAULT : status_errno(s));
  }
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = m->h->get_local_token();
  m->mr.rkey = m->h->get_remote_token();
  m->mr.handle = m->mr.lkey;
  ++pd_of(pd)->users;
  return &m.release()->mr;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return fail_null<ibv_mr>(EOPNOTSUPP);  // no device memory behind a software RNIC
}

int ibv_dereg_mr(ibv_mr* mr) {
  if (mr == nullptr) return EINVAL;
  auto* m = reinterpret_cast<VMr*>(mr);
  const Status s = m->h->deregister_mr(nullptr, nullptr);
  if (s == Status::kDeviceBusy) return EBUSY;  // a window is still bound to it
  --pd_of(mr->pd)->users;
  close_sync(m->h);
  delete m;
  return 0;
}

int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (mr == nullptr || (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
                                  IBV_REREG_MR_CHANGE_ACCESS)))
    return IBV_REREG_MR_ERR_INPUT;
  ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
  void* new_addr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : mr->addr;
  const size_t new_len = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : mr->length;
  if (!(flags & IBV_REREG_MR_CHANGE_ACCESS))
    return IBV_REREG_MR_ERR_INPUT;  // the old rights are not kept apart from the region
  ibv_mr* fresh = ibv_reg_mr(new_pd, new_addr, new_len, access);
  if (fresh == nullptr) return IBV_REREG_MR_ERR_INPUT;
  // Swap the new registration into the caller's ibv_mr, then release the old one.
  auto* m = reinterpret_cast<VMr*>(mr);
  auto* f = reinterpret_cast<VMr*>(fresh);
  std::swap(m->h, f->h);
  std::swap(m->mr, f->mr);
  if (ibv_dereg_mr(fresh) != 0) return IBV_REREG_MR_ERR_DONT_FORK_NEW;
  return 0;
}

}  // extern "C"
