// Unreliable Datagram (UD) queue pairs, a urnic extension: NDK has reliable connections only,
// while verbs applications (ibv_ud_pingpong, perftest -c UD, rdma_cm's UDP port space) need UD.
// A datagram QP is a Qp (qp.h) whose send queue takes QpExtension::send_datagram and whose
// receives complete with kResultDatagram (types.h); it belongs to no connection.
//
// The wire (IBTA §9.8, Annex A17): each message is one UD SEND ONLY packet (with immediate data
// if asked) carrying a DETH with the Q_Key and the source QPN; nothing is acknowledged or
// retransmitted; a datagram is at most one path MTU. The receiver drops a datagram whose Q_Key is
// not its QP's (C10-15), or that finds no receive posted (both counted in QpCounters), and writes
// a 40-byte GRH before the payload (kGrhLength): for RoCEv2 over IPv4, 20 zero bytes and the
// IPv4 header; over IPv6, the IPv6 header (as RoCE RNICs and Linux rxe lay it out).
//
// States (IBTA §10.3.1, the UD column): a new datagram QP is in INIT with its Q_Key; INIT -> RTR
// (optional Q_Key) -> RTS (sq_psn required) through QpConnectExtension::modify, as for RC.
#pragma once

#include <cstddef>
#include <cstdint>

#include "urnic/adapter.h"
#include "urnic/cq.h"
#include "urnic/extensions.h"
#include "urnic/pd.h"
#include "urnic/qp.h"
#include "urnic/srq.h"
#include "urnic/status.h"

namespace urnic {

// Bytes a datagram receive writes before the payload (IBTA §11.4.1.2: the GRH, or for RoCEv2 the
// IP header in its place).
inline constexpr uint32_t kGrhLength = 40;

namespace detail {
struct AddressHandleAccess;
}  // namespace detail

// An address handle (ibv_ah): where datagrams go, with the peer's MAC resolved and the local
// addresses filled in. A value; send_datagram reads it until the send completes.
class AddressHandle {
 public:
  AddressHandle() noexcept = default;
  // The address vector it was made from.
  const AddressVector& address() const noexcept { return av_; }
  // False until create_address_handle succeeded.
  bool valid() const noexcept { return adapter_ != nullptr; }

 private:
  friend struct detail::AddressHandleAccess;
  AddressVector av_{};
  const void* adapter_ = nullptr;
  // The frame's network headers, built once here so that a send copies them (the engine's
  // header type; its size is checked where it is built).
  alignas(8) unsigned char net_[96] = {};
};

// Resolves `av` into a handle for datagrams from `adapter`: the destination's MAC by ARP or
// neighbour discovery (blocking up to 2 s, so not from a callback) unless av.dst_mac is set.
// kSuccess; kInvalidParameter (null out, no source address of the destination's IP version,
// sgid_index out of range); kHostUnreachable (no answer); kInvalidDeviceState (from the control
// thread, or the adapter is closing).
Status create_address_handle(Adapter& adapter, const AddressVector& av,
                             AddressHandle* out) noexcept;

// Creates a datagram QP in INIT with Q_Key `qkey` (synchronous). Receives come from `srq` when
// it is not null (then receive_queue_depth and max_receive_request_sge are ignored). Limits and
// statuses as Pd::create_qp; kInvalidDeviceState from the control thread.
Status create_datagram_qp(Pd& pd, Cq& receive_cq, Cq& initiator_cq, Srq* srq, void* qp_context,
                          uint32_t receive_queue_depth, uint32_t initiator_queue_depth,
                          uint32_t max_receive_request_sge, uint32_t max_initiator_request_sge,
                          uint32_t inline_data_size, uint32_t qkey, Handle<Qp>* out) noexcept;

}  // namespace urnic
