// A client's memory windows and fast-register MRs in urnicd (docs/daemon.md "Memory windows and
// fast-register MRs"), and what their life means for its other memory: the bridges reach MRs
// and windows by handle through the client's MemTable, and check FastRegister pages against its
// RegionTable (bridge.h).
#include <sys/mman.h>

#include "daemon/objects.h"

namespace urnic::daemon {

uint32_t ClientObjects::add_memory(Kind k, uint32_t pd) {
  if (count(Kind::kMr) + count(Kind::kMw) >= quotas_.mrs) return 0;
  const uint32_t h = add(k);
  if (h != 0) table_[index_of(h)].adapter = find(pd, Kind::kPd)->adapter;
  return h;
}

Status ClientObjects::create_mw(const ipc::CreateMwReq& q, ipc::RegisterMrRep* rep) {
  if (find(q.pd, Kind::kPd) == nullptr) return Status::kInvalidHandle;
  const uint32_t h = add_memory(Kind::kMw, q.pd);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];
  Obj& pd = *find(q.pd, Kind::kPd);
  if (Status s = pd.pd->create_mw(nullptr, nullptr, &o.mw); s != Status::kSuccess) {
    release(h);
    return s;
  }
  o.uses[0] = q.pd;
  ++pd.users;
  rep->handle = h;
  rep->rkey = o.mw->get_remote_token();
  mems_->publish(h, o.mw.get());
  if (!windows_) {
    // The first window: binds name registered MRs from now on, so the bridges must find them.
    // Until then none is published, and deregistering one costs no quiesce of the bridges.
    windows_ = true;
    for (uint32_t i = 0; i < table_.size(); ++i)
      if (table_[i].kind == Kind::kMr && !table_[i].frmr)
        mems_->publish(handle_of(table_[i].gen, i), table_[i].mr.get());
  }
  return Status::kSuccess;
}

Status ClientObjects::init_frmr(const ipc::InitFrmrReq& q, ipc::RegisterMrRep* rep) {
  if (find(q.pd, Kind::kPd) == nullptr) return Status::kInvalidHandle;
  // The bridge copies at most this many pages per FastRegister (shm::kPageListBytes).
  if (q.pages > shm::kAttachFrmrPages) return Status::kImplementationLimit;
  const uint32_t h = add_memory(Kind::kMr, q.pd);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];
  Obj& pd = *find(q.pd, Kind::kPd);
  o.frmr = true;
  Status s = pd.pd->create_mr(true, nullptr, nullptr, &o.mr);
  if (s == Status::kSuccess)
    s = o.mr->initialize_fast_register_mr(q.pages, q.remote_access != 0, nullptr, nullptr);
  if (s != Status::kSuccess) {
    release(h);
    return s;
  }
  had_frmrs_ = true;
  o.uses[0] = q.pd;
  ++pd.users;
  rep->handle = h;
  rep->lkey = o.mr->get_local_token();
  rep->rkey = o.mr->get_remote_token();
  mems_->publish(h, o.mr.get());
  return Status::kSuccess;
}

Status ClientObjects::retire_memory(Obj& o, uint32_t handle) {
  // NdkDeregisterMr: kDeviceBusy while a window is bound to the region; deregistered here, the
  // region's keys fail from now on (a bind racing this fails on the engine's own check).
  if (o.kind == Kind::kMr && !o.frmr)
    if (Status s = o.mr->deregister_mr(nullptr, nullptr); s == Status::kDeviceBusy) return s;
  if (mems_->retire(handle)) quiesce_bridges();  // no lcore holds the object once this returns
  return Status::kSuccess;
}

void ClientObjects::quiesce_bridges() {
  std::vector<bool> serving(bridges_.size(), false);
  for (const Obj& o : table_)
    if (o.kind == Kind::kQp && o.engine < serving.size()) serving[o.engine] = true;
  for (size_t e = 0; e < serving.size(); ++e)
    if (serving[e]) (void)bridges_[e]->quiesce();  // false: that lcore runs no more
}

void ClientObjects::unmap_shared(Obj& o) {
  const auto at = reinterpret_cast<uint64_t>(o.map);
  regions_->remove(at);
  if (had_frmrs_) {
    // A fast-register MR may still map these pages (the engine checks only its own table):
    // they become zero pages of the daemon's, which nobody else can be given, until the client
    // goes. (The lcore that checked them against the region table is past that check already.)
    void* p = ::mmap(o.map, o.map_len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      reserved_.emplace_back(o.map, o.map_len);
      o.map = nullptr;
      return;
    }
  }
  ::munmap(o.map, o.map_len);
  o.map = nullptr;
}

bool ClientObjects::take_reserved(uint64_t address, uint64_t length) {
  for (size_t i = 0; i < reserved_.size(); ++i) {
    const auto lo = reinterpret_cast<uint64_t>(reserved_[i].first);
    const uint64_t hi = lo + reserved_[i].second;
    if (address < lo || address > hi || length > hi - address) continue;
    reserved_.erase(reserved_.begin() + static_cast<std::ptrdiff_t>(i));
    if (address > lo) reserved_.emplace_back(reinterpret_cast<void*>(lo), address - lo);
    if (address + length < hi)
      reserved_.emplace_back(reinterpret_cast<void*>(address + length), hi - address - length);
    return true;
  }
  return false;
}

}  // namespace urnic::daemon
