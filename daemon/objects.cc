// One client's objects in urnicd (objects.h).
#include "daemon/objects.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>

#include "daemon/server.h"
#include "urnic/extensions.h"

namespace urnic::daemon {
namespace {

constexpr uint32_t kMaxObjects = 1u << 16;  // handle = generation << 16 | (index + 1)
constexpr uint32_t kMaxSge = 16;
constexpr uint32_t kMaxInline = 256;

// A memfd of `len` bytes mapped here; -1 / nullptr on failure. Sealed at that size before the
// client gets it: a client that could shrink it would make the engine's next access of the
// memory a SIGBUS in the daemon.
int make_memfd(const char* name, size_t len, void** map) {
  const int fd = ::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (::ftruncate(fd, static_cast<off_t>(len)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    ::close(fd);
    return -1;
  }
  *map = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (*map == MAP_FAILED) {
    *map = nullptr;
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

uint32_t ClientObjects::add(Kind k) {
  for (uint32_t i = 0; i < table_.size(); ++i) {
    if (table_[i].kind != Kind::kFree) continue;
    table_[i].kind = k;
    ++live_[static_cast<size_t>(k)];
    return handle_of(table_[i].gen, i);
  }
  if (table_.size() >= kMaxObjects - 1) return 0;
  table_.emplace_back();
  table_.back().kind = k;
  ++live_[static_cast<size_t>(k)];
  return handle_of(table_.back().gen, static_cast<uint32_t>(table_.size() - 1));
}

ClientObjects::Obj* ClientObjects::find(uint32_t handle, Kind k) {
  const uint32_t i = index_of(handle);
  if (handle == 0 || i >= table_.size()) return nullptr;
  Obj& o = table_[i];
  return o.kind == k && o.gen == handle >> 16 ? &o : nullptr;
}

void ClientObjects::release(uint32_t handle) {
  Obj& o = table_[index_of(handle)];
  for (uint32_t u : o.uses)
    if (u != 0) --table_[index_of(u)].users;
  --live_[static_cast<size_t>(o.kind)];
  const uint16_t gen = static_cast<uint16_t>(o.gen + 1);
  o = Obj{};
  o.gen = gen;
}

uint32_t ClientObjects::count(Kind k) const noexcept { return live_[static_cast<size_t>(k)]; }

ObjectCounts ClientObjects::counts() const noexcept {
  ObjectCounts n{count(Kind::kShared),
                 count(Kind::kPd),
                 count(Kind::kCq),
                 count(Kind::kQp),
                 count(Kind::kMr),
                 count(Kind::kSrq),
                 0,
                 0,
                 shared_bytes_};
  n.connectors = count(Kind::kConnector);
  n.listeners = count(Kind::kListener);
  n.mws = count(Kind::kMw);
  return n;
}

int ClientObjects::shared_at(uint64_t address) const noexcept {
  for (uint32_t i = 0; i < table_.size(); ++i) {
    const Obj& o = table_[i];
    const auto base = reinterpret_cast<uint64_t>(o.map);
    if (o.kind == Kind::kShared && address >= base && address - base < o.map_len)
      return static_cast<int>(i);
  }
  return -1;
}

bool ClientObjects::inside_shared(uint64_t address, uint64_t length, uint32_t shm[2]) {
  // One region, or two that touch: a buffer the client shared in place in two steps (its first
  // page came with a neighbouring buffer's registration, client side control/shared_memory.cc).
  // Both mappings are at the client's addresses here too, so the range is contiguous for the
  // engine as well; the MR counts as a user of each, so neither can go while it is registered.
  if (length == 0 || length > UINT64_MAX - address) return false;
  const uint64_t end = address + length;
  uint64_t at = address;
  for (int k = 0; k < 2; ++k) {
    const int i = shared_at(at);
    if (i < 0) return false;
    const Obj& o = table_[static_cast<uint32_t>(i)];
    shm[k] = handle_of(o.gen, static_cast<uint32_t>(i));
    at = reinterpret_cast<uint64_t>(o.map) + o.map_len;
    if (at >= end) return true;
  }
  return false;
}

Status ClientObjects::alloc_shared(const ipc::AllocSharedReq& q, ipc::AllocSharedRep* rep,
                                   int* fd) {
  const uint64_t len = (q.length + 4095) & ~uint64_t{4095};
  if (shared_bytes_ + len > quotas_.shared_bytes) return Status::kInsufficientResources;
  const uint32_t h = add(Kind::kShared);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];
  *fd = make_memfd("urnic-shared", len, &o.map);
  if (*fd < 0) {
    release(h);
    return Status::kInsufficientResources;
  }
  o.map_len = len;
  shared_bytes_ += len;
  // Full: FastRegisters into it fail (kInvalidParameter); everything else works.
  (void)regions_->add(reinterpret_cast<uint64_t>(o.map), reinterpret_cast<uint64_t>(o.map) + len);
  rep->handle = h;
  rep->address = reinterpret_cast<uint64_t>(o.map);
  rep->length = len;
  return Status::kSuccess;
}

Status ClientObjects::share_memory(const ipc::ShareMemoryReq& q, int fd, ipc::HandleRep* rep) {
  // A memfd (only memfds have seals), sealed against shrinking, at least as long as asked.
  struct stat st {};
  const int seals = fd >= 0 ? ::fcntl(fd, F_GET_SEALS) : -1;
  const bool ok = seals >= 0 && (seals & F_SEAL_SHRINK) != 0 && ::fstat(fd, &st) == 0 &&
                  static_cast<uint64_t>(st.st_size) >= q.length;
  if (!ok) {
    if (fd >= 0) ::close(fd);
    return Status::kInvalidParameter;
  }
  if (shared_bytes_ + q.length > quotas_.shared_bytes) {
    ::close(fd);
    return Status::kInsufficientResources;
  }
  void* at = reinterpret_cast<void*>(q.address);
  // Over addresses this client's own reserve holds (unmap_shared), the new memory replaces it.
  const int how = take_reserved(q.address, q.length) ? MAP_FIXED : MAP_FIXED_NOREPLACE;
  void* p = ::mmap(at, q.length, PROT_READ | PROT_WRITE, MAP_SHARED | how, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED || p != at) {
    if (p != MAP_FAILED) ::munmap(p, q.length);
    return Status::kInvalidAddress;  // the daemon has something of its own there
  }
  const uint32_t h = add(Kind::kShared);
  if (h == 0) {
    ::munmap(p, q.length);
    return Status::kInsufficientResources;
  }
  Obj& o = table_[index_of(h)];
  o.map = p;
  o.map_len = q.length;
  shared_bytes_ += q.length;
  (void)regions_->add(q.address, q.address + q.length);  // as alloc_shared
  rep->handle = h;
  return Status::kSuccess;
}

Status ClientObjects::create_pd(const ipc::CreatePdReq& q, ipc::HandleRep* rep) {
  if (q.adapter >= adapters_.size()) return Status::kInvalidParameter;
  if (count(Kind::kPd) >= quotas_.pds) return Status::kInsufficientResources;
  const uint32_t h = add(Kind::kPd);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];
  o.adapter = q.adapter;
  const Status s = adapters_[q.adapter].adapter->create_pd(nullptr, nullptr, &o.pd);
  if (s != Status::kSuccess) {
    release(h);
    return s;
  }
  rep->handle = h;
  return s;
}

// The lcore and the control thread must never block on it.
bool usable_eventfd(int fd) {
  char link[64] = {};
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(self.c_str(), link, sizeof link - 1);
  if (n <= 0 || std::strcmp(link, "anon_inode:[eventfd]") != 0) return false;
  const int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

Status ClientObjects::undo_create(uint32_t h, int* fd, Status s) {
  Obj& o = table_[index_of(h)];
  if (o.map != nullptr) ::munmap(o.map, o.map_len);
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
  release(h);  // its Handle (if the create got that far) closes the object
  return s;
}

Status ClientObjects::create_cq(const ipc::CreateCqReq& q, int event_fd, ipc::CreateCqRep* rep,
                                int* fd) {
  // The eventfd is ours from here: closed on every refusal, kept by the CQ otherwise.
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } ev{event_fd};
  if (q.adapter >= adapters_.size()) return Status::kInvalidParameter;
  if (event_fd >= 0 && !usable_eventfd(event_fd)) return Status::kInvalidParameter;
  if (count(Kind::kCq) >= quotas_.cqs) return Status::kInsufficientResources;
  Adapter& a = *adapters_[q.adapter].adapter;
  if (q.depth > a.adapter_info().max_cq_depth) return Status::kInvalidParameter;
  const uint32_t h = add(Kind::kCq);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];
  o.adapter = q.adapter;
  Status s = a.create_cq(q.depth, nullptr, nullptr, nullptr, nullptr, &o.cq);
  const uint32_t cap = shm::ring_capacity(q.depth);
  o.map_len = shm::ring_bytes(cap, sizeof(shm::CqSlot));
  if (s == Status::kSuccess && (*fd = make_memfd("urnic-cq", o.map_len, &o.map)) < 0)
    s = Status::kInsufficientResources;
  if (s == Status::kSuccess) {
    o.engine = o.cq->query_extension<CqExtension>()->engine();
    const Bridge::CqRing ring{o.cq.get(), shm::ring_at(o.map, 0, cap, sizeof(shm::CqSlot)),
                              event_fd};
    if (o.engine >= bridges_.size() || !bridges_[o.engine]->add_cq(ring))
      s = Status::kDeviceNotReady;
  }
  if (s != Status::kSuccess) return undo_create(h, fd, s);
  o.event_fd = std::exchange(ev.fd, -1);
  rep->handle = h;
  rep->capacity = cap;
  rep->map_bytes = o.map_len;
  return s;
}

Status ClientObjects::create_qp(const ipc::CreateQpReq& q, ipc::CreateQpRep* rep, int* fd,
                                const uint32_t* qkey) {
  Obj* pd = find(q.pd, Kind::kPd);
  Obj* scq = find(q.send_cq, Kind::kCq);
  Obj* rcq = find(q.recv_cq, Kind::kCq);
  Obj* srq = q.srq != 0 ? find(q.srq, Kind::kSrq) : nullptr;
  if (pd == nullptr || scq == nullptr || rcq == nullptr || (q.srq != 0 && srq == nullptr))
    return Status::kInvalidHandle;
  if (scq->adapter != pd->adapter || rcq->adapter != pd->adapter || scq->engine != rcq->engine ||
      (srq != nullptr && (srq->adapter != pd->adapter || srq->engine != scq->engine)))
    return Status::kInvalidParameterMix;
  if (q.max_send_sge > kMaxSge || q.max_recv_sge > kMaxSge || q.max_inline > kMaxInline)
    return Status::kInvalidParameter;
  if (count(Kind::kQp) + count(Kind::kSrq) >= quotas_.qps) return Status::kInsufficientResources;
  const uint32_t h = add(Kind::kQp);
  if (h == 0) return Status::kInsufficientResources;
  // `pd`, `scq`, `rcq` may have moved with the table: look them up again from here on.
  Obj& o = table_[index_of(h)];
  o.adapter = find(q.pd, Kind::kPd)->adapter;
  o.engine = find(q.send_cq, Kind::kCq)->engine;
  Pd& p = *find(q.pd, Kind::kPd)->pd;
  Cq& r = *find(q.recv_cq, Kind::kCq)->cq;
  Cq& sc = *find(q.send_cq, Kind::kCq)->cq;
  void* ctx = reinterpret_cast<void*>(q.qp_context);
  // With an SRQ the receive ring stays unused: a receive the client posts there fails its QP.
  Status s =
      qkey != nullptr
          ? create_datagram_qp(p, r, sc, q.srq != 0 ? find(q.srq, Kind::kSrq)->srq.get() : nullptr,
                               ctx, q.rq_depth, q.sq_depth, q.max_recv_sge, q.max_send_sge,
                               q.max_inline, *qkey, &o.qp)
      : q.srq != 0 ? p.create_qp_with_srq(r, sc, *find(q.srq, Kind::kSrq)->srq, ctx, q.sq_depth,
                                          q.max_send_sge, q.max_inline, nullptr, nullptr, &o.qp)
                   : p.create_qp(r, sc, ctx, q.rq_depth, q.sq_depth, q.max_recv_sge, q.max_send_sge,
                                 q.max_inline, nullptr, nullptr, &o.qp);
  const uint32_t sq_cap = shm::ring_capacity(q.sq_depth), rq_cap = shm::ring_capacity(q.rq_depth);
  const auto sq_stride = static_cast<uint32_t>(shm::send_stride(q.max_send_sge, q.max_inline));
  const auto rq_stride = static_cast<uint32_t>(shm::recv_stride(q.max_recv_sge));
  const size_t sq_bytes = shm::ring_bytes(sq_cap, sq_stride);
  // An RC QP's mapping ends with its FastRegister page list area (shm::page_list_offset).
  const size_t pages_at = shm::page_list_offset(sq_bytes, shm::ring_bytes(rq_cap, rq_stride));
  o.map_len = pages_at + (qkey == nullptr ? (shm::kPageListBytes + 4095) & ~size_t{4095} : 0);
  if (s == Status::kSuccess && (*fd = make_memfd("urnic-qp", o.map_len, &o.map)) < 0)
    s = Status::kInsufficientResources;
  if (s == Status::kSuccess) {
    Bridge::QpRings rings{o.qp.get(),
                          o.qp->query_extension<QpExtension>(),
                          shm::ring_at(o.map, 0, sq_cap, sq_stride),
                          shm::ring_at(o.map, sq_bytes, rq_cap, rq_stride),
                          q.max_send_sge,
                          q.max_recv_sge,
                          q.max_inline,
                          qkey != nullptr ? &ah_table() : nullptr};
    if (qkey == nullptr) {
      o.arena = std::make_unique<FrArena>(q.sq_depth);
      rings.mems = mems_.get();
      rings.regions = regions_.get();
      rings.page_area =
          reinterpret_cast<const uint64_t*>(static_cast<const uint8_t*>(o.map) + pages_at);
      rings.arena = o.arena.get();
    }
    if (!bridges_[o.engine]->add_qp(rings)) s = Status::kDeviceNotReady;
  }
  if (s != Status::kSuccess) return undo_create(h, fd, s);
  o.uses[0] = q.pd;
  o.uses[1] = q.send_cq;
  o.uses[2] = q.recv_cq;
  o.uses[3] = q.srq;
  for (uint32_t u : o.uses)
    if (u != 0) ++table_[index_of(u)].users;
  rep->handle = h;
  rep->qpn = o.qp->query_extension<QpConnectExtension>()->qpn();
  rep->sq_capacity = sq_cap;
  rep->sq_stride = sq_stride;
  rep->rq_capacity = rq_cap;
  rep->rq_stride = rq_stride;
  rep->rq_offset = sq_bytes;
  rep->engine = o.engine;
  rep->map_bytes = o.map_len;
  rep->max_datagram = o.qp->query_extension<QpExtension>()->max_datagram_size();
  return s;
}

Status ClientObjects::prepare_ah(const ipc::CreateAhReq& q, AddressVector* av, Adapter** adapter) {
  if (q.adapter >= adapters_.size()) return Status::kInvalidParameter;
  if (ah_table().count.load(std::memory_order_relaxed) >= AhTable::kMax)
    return Status::kInsufficientResources;
  av->ipv6 = q.ipv6 != 0;
  av->dst_ipv4 = q.dst_ipv4;
  std::memcpy(av->dst_ipv6.data(), q.dst_ipv6, 16);
  std::memcpy(av->dst_mac.data(), q.dst_mac, 6);
  av->traffic_class = q.traffic_class;
  av->hop_limit = q.hop_limit;
  av->flow_label = q.flow_label;
  av->sgid_index = q.sgid_index;
  *adapter = adapters_[q.adapter].adapter;
  return Status::kSuccess;
}

Status ClientObjects::add_ah(const AddressHandle& ah, ipc::HandleRep* rep) {
  AhTable& t = ah_table();
  const uint32_t n = t.count.load(std::memory_order_relaxed);
  if (n >= AhTable::kMax) return Status::kInsufficientResources;
  // Written before it is counted: a bridge reads only entries below the count (AhTable).
  t.ah[n] = ah;
  t.count.store(n + 1, std::memory_order_release);
  rep->handle = n + 1;
  return Status::kSuccess;
}

Status ClientObjects::create_ah(const ipc::CreateAhReq& q, ipc::HandleRep* rep) {
  AddressVector av;
  Adapter* adapter = nullptr;
  if (Status s = prepare_ah(q, &av, &adapter); s != Status::kSuccess) return s;
  AddressHandle ah;
  if (Status s = create_address_handle(*adapter, av, &ah); s != Status::kSuccess) return s;
  return add_ah(ah, rep);
}

Status ClientObjects::resize_cq(const ipc::ResizeCqReq& q, ipc::CreateCqRep* rep, int* fd) {
  Obj* o = find(q.cq, Kind::kCq);
  if (o == nullptr) return Status::kInvalidHandle;
  if (q.depth > adapters_[o->adapter].adapter->adapter_info().max_cq_depth)
    return Status::kInvalidParameter;
  const uint32_t cap = shm::ring_capacity(q.depth);
  const size_t len = shm::ring_bytes(cap, sizeof(shm::CqSlot));
  void* map = nullptr;
  if ((*fd = make_memfd("urnic-cq", len, &map)) < 0) return Status::kInsufficientResources;
  // The daemon's CQ first (its own checks: a depth below what waits in it, a resize whose old
  // ring the bridge has not emptied yet); synchronous on this thread.
  Status s = o->cq->resize(q.depth, nullptr, nullptr);
  if (s == Status::kSuccess &&
      !bridges_[o->engine]->move_cq(o->cq.get(), shm::ring_at(map, 0, cap, sizeof(shm::CqSlot))))
    s = Status::kDeviceNotReady;
  if (s != Status::kSuccess) {
    ::munmap(map, len);
    ::close(*fd);
    *fd = -1;
    return s;
  }
  ::munmap(o->map, o->map_len);  // the bridge writes the new ring from now on
  o->map = map;
  o->map_len = len;
  rep->handle = q.cq;
  rep->capacity = cap;
  rep->map_bytes = len;
  return s;
}

Status ClientObjects::moderate_cq(const ipc::ModerateCqReq& q) {
  Obj* o = find(q.cq, Kind::kCq);
  if (o == nullptr) return Status::kInvalidHandle;
  return bridges_[o->engine]->moderate_cq(o->cq.get(), q.interval_us, q.count)
             ? Status::kSuccess
             : Status::kDeviceNotReady;
}

Status ClientObjects::modify_srq(const ipc::ModifySrqReq& q) {
  Obj* o = find(q.srq, Kind::kSrq);
  Obj* ch = find(q.channel, Kind::kCmChannel);
  if (o == nullptr || ch == nullptr) return Status::kInvalidHandle;
  if (ch->adapter != o->adapter) return Status::kInvalidParameter;
  // The ring's capacity bounds what the client can have outstanding: a larger depth would never
  // be filled.
  if (q.depth > o->capacity) return Status::kInvalidParameter;
  {
    std::lock_guard lock(o->srq_ctx->mu);
    o->srq_ctx->queue = ch->queue;
  }
  if (o->uses[1] != q.channel) {
    if (o->uses[1] != 0) --table_[index_of(o->uses[1])].users;
    o->uses[1] = q.channel;
    ++ch->users;
  }
  return o->srq->modify(q.depth, q.threshold, nullptr, nullptr);
}

Status ClientObjects::query_counters(const ipc::QueryCountersReq& q, ipc::QueryCountersRep* rep) {
  if (q.adapter >= adapters_.size()) return Status::kInvalidParameter;
  AdapterCounters& c = rep->counters;
  if (q.qp != 0) {
    Obj* o = find(q.qp, Kind::kQp);
    if (o == nullptr) return Status::kInvalidHandle;
    c.qps = o->qp->query_extension<QpExtension>()->counters();
    return Status::kSuccess;
  }
  Adapter& a = *adapters_[q.adapter].adapter;
  c.engines = a.engines();
  if (q.engine != ipc::kAllEngines) {
    if (Status s = a.query_engine_counters(q.engine, &c.port); s != Status::kSuccess) return s;
  } else {
    AdapterCounters all;
    if (Status s = a.query_counters(&all); s != Status::kSuccess) return s;
    c.port = all.port;
  }
  for (const Obj& o : table_)
    if (o.kind == Kind::kQp && o.adapter == q.adapter)
      c.qps.add(o.qp->query_extension<QpExtension>()->counters());
  return Status::kSuccess;
}

Status ClientObjects::create_srq(const ipc::CreateSrqReq& q, ipc::CreateSrqRep* rep, int* fd) {
  Obj* pd = find(q.pd, Kind::kPd);
  if (pd == nullptr) return Status::kInvalidHandle;
  Adapter& a = *adapters_[pd->adapter].adapter;
  const AdapterInfo info = a.adapter_info();
  if (q.depth > info.max_srq_depth || q.max_sge > info.max_receive_request_sge ||
      q.engine >= a.engines())
    return Status::kInvalidParameter;
  if (count(Kind::kQp) + count(Kind::kSrq) >= quotas_.qps) return Status::kInsufficientResources;
  const uint32_t adapter = pd->adapter;
  const uint32_t h = add(Kind::kSrq);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];  // `pd` may have moved with the table
  o.adapter = adapter;
  o.engine = q.engine;
  // On the engine the client names (that of the CQs of its QPs); no limit notification.
  // Its limit event goes where a ModifySrq says (none until then).
  o.srq_ctx = std::make_unique<SrqCtx>();
  o.srq_ctx->handle = h;
  const SrqNotificationCallback on_limit = [](void* ctx, Status) {
    auto* c = static_cast<SrqCtx*>(ctx);
    std::lock_guard lock(c->mu);
    if (c->queue)
      c->queue->push({static_cast<uint32_t>(ipc::CmEventKind::kSrqLimit), c->handle, 0, 0, 0, 0});
  };
  Status s = find(q.pd, Kind::kPd)
                 ->pd->create_srq(q.depth, q.max_sge, 0, on_limit, o.srq_ctx.get(),
                                  uint64_t{1} << q.engine, nullptr, nullptr, &o.srq);
  const uint32_t cap = shm::ring_capacity(q.depth);
  const auto stride = static_cast<uint32_t>(shm::recv_stride(q.max_sge));
  o.map_len = shm::ring_bytes(cap, stride);
  if (s == Status::kSuccess && (*fd = make_memfd("urnic-srq", o.map_len, &o.map)) < 0)
    s = Status::kInsufficientResources;
  if (s == Status::kSuccess &&
      (o.engine >= bridges_.size() ||
       !bridges_[o.engine]->add_srq({o.srq.get(), shm::ring_at(o.map, 0, cap, stride), q.max_sge})))
    s = Status::kDeviceNotReady;
  if (s != Status::kSuccess) return undo_create(h, fd, s);
  o.uses[0] = q.pd;
  ++table_[index_of(q.pd)].users;
  o.capacity = cap;
  rep->handle = h;
  rep->capacity = cap;
  rep->stride = stride;
  rep->engine = o.engine;
  rep->map_bytes = o.map_len;
  return s;
}

Status ClientObjects::modify_qp(const ipc::ModifyQpReq& q) {
  Obj* o = find(q.qp, Kind::kQp);
  if (o == nullptr) return Status::kInvalidHandle;
  const ipc::WireQpAttr& w = q.attr;
  QpAttributes a;
  a.state = static_cast<QpState>(w.state);
  a.access = w.access;
  a.path_mtu = w.path_mtu;
  a.dest_qpn = w.dest_qpn;
  a.rq_psn = w.rq_psn;
  a.sq_psn = w.sq_psn;
  a.max_dest_rd_atomic = w.max_dest_rd_atomic;
  a.max_rd_atomic = w.max_rd_atomic;
  a.timeout = w.timeout;
  a.retry_cnt = w.retry_cnt;
  a.rnr_retry = w.rnr_retry;
  a.min_rnr_timer = w.min_rnr_timer;
  a.selective_repeat = w.selective_repeat != 0;
  a.av.ipv6 = w.av_ipv6 != 0;
  a.av.dst_ipv4 = w.dst_ipv4;
  std::memcpy(a.av.dst_ipv6.data(), w.dst_ipv6, 16);
  std::memcpy(a.av.dst_mac.data(), w.dst_mac, 6);
  a.av.traffic_class = w.traffic_class;
  a.av.hop_limit = w.hop_limit;
  a.av.flow_label = w.flow_label;
  a.av.sgid_index = w.sgid_index;
  a.qkey = q.qkey;
  // The client's congestion settings are the adapter's (kCongestion is not offered).
  if ((q.mask & qp_attr_mask::kCongestion) != 0) return Status::kNotSupported;
  // Synchronous: the engine applies it (the lcore loop runs it meanwhile); the public API checks
  // every range and the transition.
  return o->qp->query_extension<QpConnectExtension>()->modify(a, q.mask, nullptr, nullptr);
}

Status ClientObjects::register_mr(const ipc::RegisterMrReq& q, ipc::RegisterMrRep* rep) {
  if (find(q.pd, Kind::kPd) == nullptr) return Status::kInvalidHandle;
  uint32_t shm[2] = {0, 0};
  // A client exposes only memory it shares with the daemon: never the daemon's own.
  if (!inside_shared(q.address, q.length, shm)) return Status::kInvalidBufferSize;
  const uint32_t h = add_memory(Kind::kMr, q.pd);
  if (h == 0) return Status::kInsufficientResources;
  Obj& o = table_[index_of(h)];
  Status s = find(q.pd, Kind::kPd)->pd->create_mr(false, nullptr, nullptr, &o.mr);
  if (s == Status::kSuccess)
    s = o.mr->register_mr(reinterpret_cast<const void*>(q.address), q.length, q.flags, nullptr,
                          nullptr);
  if (s != Status::kSuccess) {
    release(h);
    return s;
  }
  o.uses[0] = q.pd;
  o.uses[1] = shm[0];
  o.uses[2] = shm[1];
  for (uint32_t u : o.uses)
    if (u != 0) ++table_[index_of(u)].users;
  rep->handle = h;
  rep->lkey = o.mr->get_local_token();
  rep->rkey = o.mr->get_remote_token();
  if (windows_) mems_->publish(h, o.mr.get());  // windows are bound to it by handle
  return s;
}

Status ClientObjects::destroy(uint32_t handle) {
  const uint32_t i = index_of(handle);
  if (handle == 0 || i >= table_.size() || table_[i].kind == Kind::kFree ||
      table_[i].gen != handle >> 16)
    return Status::kInvalidHandle;
  Obj& o = table_[i];
  if (o.users != 0) return Status::kDeviceBusy;
  if (o.kind == Kind::kMr || o.kind == Kind::kMw)
    if (Status s = retire_memory(o, handle); s != Status::kSuccess) return s;
  // Out of the bridge before the QP or CQ is closed (flushed, destroyed on the engine). Should
  // the lcore not confirm it (it stopped), the object and its rings are left as they are rather
  // than freed under it.
  bool released = true;
  switch (o.kind) {
    case Kind::kQp:
      released = bridges_[o.engine]->remove_qp(o.qp.get());
      if (!released) {
        (void)o.qp.release();
        (void)o.arena.release();  // the engine may still read it
      } else if (o.arena) {
        close_freeing(o.qp, o.arena);  // its FastRegisters may execute until the close is done
      }
      break;
    case Kind::kCq:
      released = bridges_[o.engine]->remove_cq(o.cq.get());
      if (!released) (void)o.cq.release();
      break;
    case Kind::kSrq:
      released = bridges_[o.engine]->remove_srq(o.srq.get());
      if (!released) {
        (void)o.srq.release();
        (void)o.srq_ctx.release();  // its notification may still run: kept with it
      } else {
        // Its limit notification may be running on the control thread.
        close_freeing(o.srq, o.srq_ctx);
      }
      break;
    case Kind::kShared:
      shared_bytes_ -= o.map_len;
      unmap_shared(o);  // o.map is null from here
      break;
    default:
      break;
  }
  // A connector's or listener's close finishes on the adapter's control thread, after its last
  // callback: its context goes with the close's completion.
  if (o.conn) close_freeing(o.conn, o.cm_ctx);
  if (o.lis) close_freeing(o.lis, o.cm_ctx);
  // Handles close their objects (QPs are flushed first) as the slot is reset.
  o.queue.reset();
  o.qp.reset();
  o.mr.reset();
  o.mw.reset();
  o.srq.reset();
  o.cq.reset();
  o.pd.reset();
  if (o.map != nullptr && released) ::munmap(o.map, o.map_len);
  if (o.event_fd >= 0 && released) ::close(o.event_fd);  // the bridge writes it no more
  release(handle);
  return Status::kSuccess;
}

void ClientObjects::destroy_all() {
  // Users before what they use: connectors and listeners, QPs, MRs, then SRQs, CQs, PDs,
  // channels and shared memory.
  // Windows before the MRs they are bound to (a bound MR refuses its destroy).
  for (Kind k : {Kind::kConnector, Kind::kListener, Kind::kQp, Kind::kMw, Kind::kMr, Kind::kSrq,
                 Kind::kCq, Kind::kPd, Kind::kCmChannel, Kind::kShared})
    for (uint32_t i = 0; i < table_.size(); ++i)
      if (table_[i].kind == k) (void)destroy(handle_of(table_[i].gen, i));
  for (auto [at, len] : reserved_) ::munmap(at, len);
  reserved_.clear();
}

}  // namespace urnic::daemon
