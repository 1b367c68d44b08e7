// Devices and contexts: ibv_get_device_list, open/close, the device, port, GID and P_Key
// queries, and asynchronous events.
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "verbs/internal.h"

using namespace urnic;
using namespace urnic::verbs;

namespace urnic::verbs {

int status_errno(Status s) noexcept {
  switch (s) {
    case Status::kSuccess:
      return 0;
    case Status::kNoMoreEntries:
    case Status::kInsufficientResources:
    case Status::kNoMemory:
      return ENOMEM;
    case Status::kNotSupported:
      return EOPNOTSUPP;
    case Status::kDeviceBusy:
      return EBUSY;
    case Status::kAccessViolation:
      return EACCES;
    case Status::kHostUnreachable:
    case Status::kNetworkUnreachable:
      return EHOSTUNREACH;
    case Status::kTimeout:
    case Status::kIoTimeout:
      return ETIMEDOUT;
    case Status::kDeviceNotReady:
    case Status::kDeviceRemoved:
      return ENODEV;
    default:
      return EINVAL;
  }
}

void Context::push_event(const ibv_async_event& e) noexcept {
  {
    std::lock_guard lock(ev_mu);
    events.push_back(e);
  }
  const uint64_t one = 1;
  (void)!::write(vctx.context.async_fd, &one, sizeof one);
}

}  // namespace urnic::verbs

namespace {

// ibv_mtu for an Ethernet MTU: the largest RoCE path MTU whose frames fit (rxe's rule:
// 1500 -> 1024, 9000 -> 4096).
ibv_mtu active_mtu(uint32_t eth_mtu) {
  // IP + UDP + BTH + the largest extended header + ICRC: 20 + 8 + 12 + 28 + 4.
  constexpr uint32_t kOverhead = 72;
  ibv_mtu m = IBV_MTU_256;
  for (int v = IBV_MTU_512; v <= IBV_MTU_4096; ++v)
    if ((128u << v) + kOverhead <= eth_mtu) m = static_cast<ibv_mtu>(v);
  return m;
}

// The node GUID: EUI-64 from the MAC, as rxe derives it from its netdev.
uint64_t guid_of(const Device& d) {
  if (!d.ext) return 0;
  const auto mac = d.ext->local_address().mac;
  const uint8_t g[8] = {
      static_cast<uint8_t>(mac[0] ^ 2), mac[1], mac[2], 0xFF, 0xFE, mac[3], mac[4], mac[5]};
  uint64_t be = 0;
  std::memcpy(&be, g, 8);
  return be;  // already in network order
}

int query_port(ibv_context* c, uint8_t port, ibv_port_attr* a, size_t len) {
  if (port != 1 || a == nullptr) return EINVAL;
  const Device& d = *ctx_of(c)->dev;
  ibv_port_attr p{};
  p.state = IBV_PORT_ACTIVE;
  p.max_mtu = IBV_MTU_4096;
  p.active_mtu = active_mtu(d.port_mtu);
  p.gid_tbl_len = static_cast<int>(d.ext->gid_count());
  p.port_cap_flags = IBV_PORT_CM_SUP;  // connection management over QP1 (control/cm)
  p.max_msg_sz = d.info.max_transfer_length;
  p.pkey_tbl_len = 1;
  p.max_vl_num = 1;
  p.active_width = 1;   // 1X
  p.active_speed = 32;  // EDR (25 Gb/s per lane): a software RNIC's nominal rate
  p.phys_state = 5;     // LinkUp
  p.link_layer = IBV_LINK_LAYER_ETHERNET;
  std::memcpy(a, &p, std::min(len, sizeof p));
  return 0;
}

int query_device(ibv_context* c, ibv_device_attr* a) {
  if (a == nullptr) return EINVAL;
  const Device& d = *ctx_of(c)->dev;
  const AdapterInfo& i = d.info;
  std::memset(a, 0, sizeof *a);
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "urnic %s", URNIC_VERSION);
  a->node_guid = guid_of(d);
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = i.max_registration_size;
  a->page_size_cap = kPageSize;
  a->vendor_id = i.vendor_id;
  a->vendor_part_id = i.device_id;
  a->max_qp = static_cast<int>(Runtime::get().config().max_qps - 2);
  a->max_qp_wr = static_cast<int>(std::min(i.max_initiator_queue_depth, i.max_receive_queue_depth));
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
                        IBV_DEVICE_MEM_WINDOW;  // type 1 windows (verbs/memory.cc)
  a->max_sge = static_cast<int>(std::min(i.max_initiator_request_sge, i.max_receive_request_sge));
  a->max_sge_rd = static_cast<int>(i.max_read_request_sge);
  a->max_cq = 1 << 16;
  a->max_cqe = static_cast<int>(i.max_cq_depth);
  a->max_mr = 1 << 16;
  a->max_pd = 1 << 16;
  a->max_qp_rd_atom = static_cast<int>(i.max_inbound_read_limit);
  a->max_res_rd_atom = a->max_qp_rd_atom * a->max_qp;
  a->max_qp_init_rd_atom = static_cast<int>(i.max_outbound_read_limit);
  a->atomic_cap = IBV_ATOMIC_HCA;
  a->max_mw = 1 << 16;
  a->max_srq = 1 << 16;
  a->max_srq_wr = static_cast<int>(i.max_srq_depth);
  a->max_srq_sge = static_cast<int>(i.max_receive_request_sge);
  a->max_pkeys = 1;
  a->max_ah = 1 << 20;  // address handles are plain memory (verbs/qp.cc)
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
  return 0;
}

int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in, ibv_device_attr_ex* a,
                    size_t len) {
  if (in != nullptr && in->comp_mask != 0) return EINVAL;
  if (a == nullptr || len < sizeof(ibv_device_attr)) return EINVAL;
  ibv_device_attr_ex x{};
  if (const int e = query_device(c, &x.orig_attr); e != 0) return e;
  x.phys_port_cnt_ex = 1;
  std::memcpy(a, &x, std::min(len, sizeof x));
  return 0;
}

}  // namespace

namespace urnic::verbs {

void fill_device_ops(Context& c) noexcept {
  c.vctx.query_port = query_port;
  c.vctx.query_device_ex = query_device_ex;
}

}  // namespace urnic::verbs

extern "C" {

ibv_device** ibv_get_device_list(int* num) {
  const std::vector<Device*> devs = Runtime::get().devices();
  if (devs.empty() && errno == EINVAL) {
    if (num) *num = 0;
    return nullptr;
  }
  auto** list = static_cast<ibv_device**>(std::calloc(devs.size() + 1, sizeof(ibv_device*)));
  if (list == nullptr) return fail_null<ibv_device*>(ENOMEM);
  for (size_t i = 0; i < devs.size(); ++i) list[i] = &devs[i]->dev;
  if (num) *num = static_cast<int>(devs.size());
  return list;
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* d) { return d ? d->name : nullptr; }

int ibv_get_device_index(ibv_device* d) {
  return d ? static_cast<int>(reinterpret_cast<Device*>(d)->index) : -1;
}

__be64 ibv_get_device_guid(ibv_device* d) {
  if (d == nullptr) return 0;
  Device* dev = reinterpret_cast<Device*>(d);
  // The GUID comes from the port's MAC: bring the device up if no context did yet.
  if (dev->ext == nullptr && Runtime::get().acquire(dev) == 0) Runtime::get().release(dev);
  return guid_of(*dev);
}

ibv_context* ibv_open_device(ibv_device* d) {
  if (d == nullptr) return fail_null<ibv_context>(EINVAL);
  Device* dev = reinterpret_cast<Device*>(d);
  auto c = std::make_unique<Context>();
  c->dev = dev;
  ibv_context& ctx = c->vctx.context;
  ctx.device = d;
  ctx.cmd_fd = -1;  // no kernel: nothing to issue commands to
  ctx.async_fd = ::eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
  if (ctx.async_fd < 0) return nullptr;
  ctx.num_comp_vectors = 1;
  pthread_mutex_init(&ctx.mutex, nullptr);
  ctx.abi_compat = __VERBS_ABI_IS_EXTENDED;
  c->vctx.sz = sizeof(verbs_context);
  if (const int err = Runtime::get().acquire(dev); err != 0) {
    ::close(ctx.async_fd);
    return fail_null<ibv_context>(err);
  }
  fill_device_ops(*c);
  fill_memory_ops(*c);
  fill_cq_ops(*c);
  fill_qp_ops(*c);
  fill_post_ops(*c);
  return &c.release()->vctx.context;
}

int ibv_close_device(ibv_context* ctx) {
  if (ctx == nullptr) return EINVAL;
  Context* c = ctx_of(ctx);
  Runtime::get().release(c->dev);
  ::close(ctx->async_fd);
  pthread_mutex_destroy(&ctx->mutex);
  delete c;
  return 0;
}

int ibv_query_device(ibv_context* c, ibv_device_attr* a) { return c ? query_device(c, a) : EINVAL; }

// The compat entry the inline ibv_query_port falls back to; ours has the extended op, so this is
// reached only by binaries that call the symbol directly (the _compat layout is a prefix).
int ibv_query_port(ibv_context* c, uint8_t port, _compat_ibv_port_attr* a) {
  return c ? query_port(c, port, reinterpret_cast<ibv_port_attr*>(a),
                        offsetof(ibv_port_attr, link_layer) + 1)
           : EINVAL;
}

int ibv_query_gid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  if (c == nullptr || gid == nullptr || port != 1 || index < 0) return -1;
  std::array<uint8_t, 16> g{};
  if (ctx_of(c)->dev->ext->query_gid(static_cast<uint32_t>(index), &g) != Status::kSuccess)
    return -1;
  std::memcpy(gid->raw, g.data(), 16);
  return 0;
}

int _ibv_query_gid_ex(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e,
                      uint32_t flags, size_t size) {
  if (c == nullptr || e == nullptr || flags != 0 || port != 1 || size < sizeof(ibv_gid_entry))
    return EINVAL;
  std::array<uint8_t, 16> g{};
  if (ctx_of(c)->dev->ext->query_gid(index, &g) != Status::kSuccess) return ENODATA;
  std::memset(e, 0, sizeof *e);
  std::memcpy(e->gid.raw, g.data(), 16);
  e->gid_index = index;
  e->port_num = 1;
  e->gid_type = IBV_GID_TYPE_ROCE_V2;  // every GID of urnic's is a RoCEv2 one
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* c, ibv_gid_entry* entries, size_t max, uint32_t flags,
                             size_t size) {
  if (c == nullptr || (entries == nullptr && max != 0) || flags != 0 ||
      size < sizeof(ibv_gid_entry))
    return -EINVAL;
  const uint32_t n = ctx_of(c)->dev->ext->gid_count();
  if (max < n) return -EINVAL;
  for (uint32_t i = 0; i < n; ++i) {
    auto* e = reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<uint8_t*>(entries) + i * size);
    if (const int r = _ibv_query_gid_ex(c, 1, i, e, 0, size); r != 0) return -r;
  }
  return n;
}

// IBVERBS_PRIVATE_34 (ibv_devinfo -v): 1 is IBV_GID_TYPE_SYSFS_ROCE_V2.
int ibv_query_gid_type(ibv_context* c, uint8_t port, unsigned index, int* type) {
  if (c == nullptr || type == nullptr || port != 1 || index >= ctx_of(c)->dev->ext->gid_count())
    return -1;
  *type = 1;
  return 0;
}

int ibv_query_pkey(ibv_context* c, uint8_t port, int index, __be16* pkey) {
  if (c == nullptr || pkey == nullptr || port != 1 || index != 0) return -1;
  *pkey = htobe16(0xFFFF);  // the default P_Key, full membership (IBTA §10.9.1.1)
  return 0;
}

int ibv_get_pkey_index(ibv_context* c, uint8_t port, __be16 pkey) {
  if (c == nullptr || port != 1) return -1;
  return (be16toh(pkey) & 0x7FFF) == 0x7FFF ? 0 : -1;
}

int ibv_get_async_event(ibv_context* ctx, ibv_async_event* ev) {
  if (ctx == nullptr || ev == nullptr) {
    errno = EINVAL;
    return -1;
  }
  uint64_t one = 0;
  if (::read(ctx->async_fd, &one, sizeof one) != sizeof one) return -1;
  Context* c = ctx_of(ctx);
  std::lock_guard lock(c->ev_mu);
  if (c->events.empty()) {  // cannot happen: the eventfd counts the queue
    errno = EAGAIN;
    return -1;
  }
  *ev = c->events.front();
  c->events.pop_front();
  return 0;
}

void ibv_ack_async_event(ibv_async_event* ev) {
  if (ev == nullptr) return;
  auto bump = [](pthread_mutex_t* m, pthread_cond_t* cv, uint32_t* n) {
    pthread_mutex_lock(m);
    ++*n;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(m);
  };
  switch (ev->event_type) {
    case IBV_EVENT_CQ_ERR:
      bump(&ev->element.cq->mutex, &ev->element.cq->cond, &ev->element.cq->async_events_completed);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      bump(&ev->element.srq->mutex, &ev->element.srq->cond, &ev->element.srq->events_completed);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      bump(&ev->element.qp->mutex, &ev->element.qp->cond, &ev->element.qp->events_completed);
      break;
    default:
      break;
  }
}

}  // extern "C"
