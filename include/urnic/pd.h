// NDK_PD (ndkpi.md §1.5-§1.6): a protection domain. Creates memory regions, memory windows,
// shared receive queues and queue pairs; a key works only for QPs of the PD it belongs to.
//
// Creation calls may come from any thread. MR, MW and SRQ creation never pends. QP creation
// installs the QP on the engine: it returns kPending and completes on the control thread (or,
// with a null completion, returns when done; see object.h). Every create also returns
// kInvalidDeviceState when the PD, or a CQ or SRQ it is given, has been closed (or the adapter is
// closing), and kInvalidParameter for a null `out` where one is needed.
#pragma once

#include <cstdint>

#include "urnic/cq.h"
#include "urnic/mr.h"
#include "urnic/mw.h"
#include "urnic/object.h"
#include "urnic/qp.h"
#include "urnic/srq.h"
#include "urnic/status.h"

namespace urnic {

class Pd final : public detail::ObjectOf<detail::PdImpl> {
 public:
  // NdkCreateMr: an MR object, for RegisterMr (fast_register false) or for
  // InitializeFastRegisterMr + FastRegister work requests (true). kSuccess with *out set, or
  // kInsufficientResources. Never pends.
  Status create_mr(bool fast_register, CreateCompletion completion, void* request_context,
                   Handle<Mr>* out) noexcept;
  // NdkCreateMw: an unbound memory window (bound with Qp::bind). kSuccess with *out set, or
  // kInsufficientResources when the key table is full. Never pends.
  Status create_mw(CreateCompletion completion, void* request_context, Handle<Mw>* out) noexcept;
  // NdkCreateSrq: a shared receive queue of `depth` receives (1 .. max_srq_depth) of up to
  // `max_receive_request_sge` SGEs (.. max_receive_request_sge). A non-zero `notify_threshold`
  // arms the limit notification (`notification`, may be null). kInvalidParameter when a limit
  // is exceeded; kSuccess with *out set; kInsufficientResources. Never pends.
  Status create_srq(uint32_t depth, uint32_t max_receive_request_sge, uint32_t notify_threshold,
                    SrqNotificationCallback notification, void* notification_context,
                    CreateCompletion completion, void* request_context, Handle<Srq>* out) noexcept;
  // NdkCreateSrq with its affinity (Adapter::create_cq's rule): the SRQ lives on one engine, and
  // only QPs of that engine may take receives from it.
  Status create_srq(uint32_t depth, uint32_t max_receive_request_sge, uint32_t notify_threshold,
                    SrqNotificationCallback notification, void* notification_context,
                    uint64_t affinity, CreateCompletion completion, void* request_context,
                    Handle<Srq>* out) noexcept;
  // NdkCreateQp: a queue pair completing receives into `receive_cq` and initiator requests into
  // `initiator_cq` (may be the same CQ; both of this adapter). `qp_context` comes back in every
  // completion. Depths 1 .. max_*_queue_depth, SGEs .. max_*_request_sge, inline data ..
  // max_inline_data_size: any value above the adapter's limits (or a zero depth, or a CQ of
  // another adapter) is kInvalidParameter, inline; CQs (or, with an SRQ, a CQ and the SRQ) on
  // different engines of the adapter (Adapter::create_cq's affinity) are kInvalidParameterMix,
  // inline. Otherwise kPending (completion on the control
  // thread with the QP, or kInsufficientResources when no QP number or engine slot is free);
  // with a null completion the final status, *out set on kSuccess. The new QP is in INIT
  // (ibverbs terms): receives may be posted at once; it is connected by a Connector or by the
  // manual-connect extension (QpConnectExtension).
  Status create_qp(Cq& receive_cq, Cq& initiator_cq, void* qp_context, uint32_t receive_queue_depth,
                   uint32_t initiator_queue_depth, uint32_t max_receive_request_sge,
                   uint32_t max_initiator_request_sge, uint32_t inline_data_size,
                   CreateCompletion completion, void* request_context, Handle<Qp>* out) noexcept;
  // NdkCreateQpWithSrq: as create_qp, receives taken from `srq` (of this PD; every QP sharing
  // it runs on the SRQ's engine). The QP's receive queue is the SRQ: Qp::receive fails.
  Status create_qp_with_srq(Cq& receive_cq, Cq& initiator_cq, Srq& srq, void* qp_context,
                            uint32_t initiator_queue_depth, uint32_t max_initiator_request_sge,
                            uint32_t inline_data_size, CreateCompletion completion,
                            void* request_context, Handle<Qp>* out) noexcept;

  // NdkGetPrivilegedMemoryRegionToken: a local token (local read and write, never remote) that
  // lets SGEs name any address of this process (logical address == virtual address here)
  // without registering it. The same token for the life of the PD. kSuccess, or
  // kInsufficientResources when the key table is full (NDK's function is VOID; see
  // docs/api.md); kInvalidDeviceState once the PD's close was requested. Any thread.
  Status get_privileged_memory_region_token(uint32_t* token) noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

}  // namespace urnic
