// Datagram (UD) QPs of the public API (include/urnic/datagram.h): address handles and creation.
// Posting is with the other posts in ndk_qp.cc (QpExtension::send_datagram); the engine side is
// dataplane/datagram.cc.
#include "control/ndk_internal.h"
#include "control/ndk_remote.h"
#include "urnic/runtime.h"

namespace urnic {
namespace detail {

uint32_t largest_path_mtu(AdapterImpl* a) noexcept {
  if (a->cm_settings.path_mtu != 0) return a->cm_settings.path_mtu;
  uint32_t mtu = 0;
  if (port_mtu(a->ctl->port().id(), &mtu) != Status::kSuccess) return 1024;
  // IPv6 + UDP + BTH + RETH + ICRC: 40 + 8 + 12 + 16 + 4 = 80 bytes of headers, more than any
  // opcode needs (a UD SEND with immediate: 40 + 8 + 12 + 8 + 4 + 4 = 76).
  for (uint32_t m : {4096u, 2048u}) {
    if (mtu >= m + 80) return m;
  }
  return 1024;
}

Status NeighbourWait::poll(wire::MacAddr* mac) {
  if (auto m = a_->ctl->control().lookup(gid_)) {
    *mac = *m;
    return Status::kSuccess;
  }
  if (!asked_) {
    a_->ctl->control().request(gid_);
    asked_ = true;
  }
  return Clock::now() > deadline_ ? Status::kHostUnreachable : Status::kPending;
}

namespace {

// The control thread takes the answer; the engine that carries it is driven from here when
// nobody else drives it (AdapterImpl::wait's rule).
Status resolve(AdapterImpl* a, const ctl::Gid& gid, wire::MacAddr* mac) {
  NeighbourWait w(a, gid);
  for (;;) {
    if (const Status s = w.poll(mac); s != Status::kPending) return s;
    bool manual = false;
    (void)a->step_engines(&manual);
    if (!manual) std::this_thread::yield();
  }
}

}  // namespace
}  // namespace detail

Status create_address_handle(Adapter& adapter, const AddressVector& av,
                             AddressHandle* out) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  detail::AdapterImpl* a = &adapter.impl();
  if (a->remote) return detail::remote_create_address_handle(a, av, out);
  if (a->on_control_thread()) return Status::kInvalidDeviceState;  // resolution blocks
  return detail::guarded([&] {
    {
      std::lock_guard lk(a->mu);
      if (a->shutting_down) return Status::kInvalidDeviceState;
    }
    wire::NetHeaders n;
    if (!detail::make_net_headers(*a->ctl, av, &n)) return Status::kInvalidParameter;
    if (n.dst_mac == wire::MacAddr{}) {
      // Our own address resolves to our MAC at once (ControlPlane::lookup; the engine loops
      // the datagrams back).
      const ctl::Gid gid = av.ipv6 ? av.dst_ipv6 : ctl::gid_from_ipv4(av.dst_ipv4);
      if (Status s = detail::resolve(a, gid, &n.dst_mac); s != Status::kSuccess) return s;
    }
    detail::AddressHandleAccess::set(out, a, av, n);
    return Status::kSuccess;
  });
}

Status create_datagram_qp(Pd& pd, Cq& receive_cq, Cq& initiator_cq, Srq* srq, void* qp_context,
                          uint32_t receive_queue_depth, uint32_t initiator_queue_depth,
                          uint32_t max_receive_request_sge, uint32_t max_initiator_request_sge,
                          uint32_t inline_data_size, uint32_t qkey, Handle<Qp>* out) noexcept {
  if (out == nullptr) return Status::kInvalidParameter;
  if (detail::PdImpl::base_of(pd)->remote)
    return detail::remote_create_qp(
        detail::PdImpl::base_of(pd), detail::CqImpl::base_of(receive_cq),
        detail::CqImpl::base_of(initiator_cq), qp_context, srq != nullptr ? 1 : receive_queue_depth,
        initiator_queue_depth, srq != nullptr ? 1 : max_receive_request_sge,
        max_initiator_request_sge, inline_data_size, out,
        srq != nullptr ? detail::SrqImpl::base_of(*srq) : nullptr, &qkey);
  if (detail::CqImpl::base_of(receive_cq)->remote || detail::CqImpl::base_of(initiator_cq)->remote)
    return Status::kInvalidParameter;
  detail::SrqImpl* s = srq != nullptr ? detail::SrqImpl::of(*srq) : nullptr;
  return detail::create_qp(detail::PdImpl::of(pd), detail::CqImpl::of(receive_cq),
                           detail::CqImpl::of(initiator_cq), s, qp_context,
                           s != nullptr ? 0 : receive_queue_depth, initiator_queue_depth,
                           s != nullptr ? 0 : max_receive_request_sge, max_initiator_request_sge,
                           inline_data_size, nullptr, nullptr, out, &qkey);
}

}  // namespace urnic
