#include "control/cm/mad.h"

#include <array>
#include <cstring>
#include <iterator>
#include <tuple>
#include <variant>

namespace urnic::ctl::cm {
namespace {

template <typename W>
W& body_at(std::span<uint8_t, kMadSize> out) noexcept {
  return *reinterpret_cast<W*>(out.data() + kMadHdrSize);
}
template <typename W>
const W& body_at(std::span<const uint8_t> in) noexcept {
  return *reinterpret_cast<const W*>(in.data() + kMadHdrSize);
}

void put_path(const Path& p, PathWire& w) noexcept {
  w.local_lid = Be16::of(p.local_lid);
  w.remote_lid = Be16::of(p.remote_lid);
  w.local_gid = p.local_gid;
  w.remote_gid = p.remote_gid;
  PathWire::FlowLabel::set(w, p.flow_label);
  PathWire::PacketRate::set(w, p.packet_rate);
  w.traffic_class = p.traffic_class;
  w.hop_limit = p.hop_limit;
  PathWire::Sl::set(w, p.sl);
  PathWire::SubnetLocal::set(w, p.subnet_local ? 1u : 0u);
  PathWire::LocalAckTimeout::set(w, p.local_ack_timeout);
}

Path get_path(const PathWire& w) noexcept {
  Path p;
  p.local_lid = w.local_lid.get();
  p.remote_lid = w.remote_lid.get();
  p.local_gid = w.local_gid;
  p.remote_gid = w.remote_gid;
  p.flow_label = PathWire::FlowLabel::get(w);
  p.packet_rate = static_cast<uint8_t>(PathWire::PacketRate::get(w));
  p.traffic_class = w.traffic_class;
  p.hop_limit = w.hop_limit;
  p.sl = PathWire::Sl::get(w);
  p.subnet_local = PathWire::SubnetLocal::get(w) != 0;
  p.local_ack_timeout = PathWire::LocalAckTimeout::get(w);
  return p;
}

void put(const Req& m, ReqWire& w) noexcept {
  w.local_comm_id = Be32::of(m.local_comm_id);
  w.service_id = Be64::of(m.service_id);
  w.local_ca_guid = Be64::of(m.local_ca_guid);
  w.local_qkey = Be32::of(m.local_qkey);
  ReqWire::LocalQpn::set(w, m.local_qpn);
  ReqWire::ResponderResources::set(w, m.responder_resources);
  ReqWire::LocalEecn::set(w, m.local_eecn);
  ReqWire::InitiatorDepth::set(w, m.initiator_depth);
  ReqWire::RemoteEecn::set(w, m.remote_eecn);
  ReqWire::RemoteCmResponseTimeout::set(w, m.remote_cm_response_timeout);
  ReqWire::TransportServiceType::set(w, m.transport_service_type);
  ReqWire::E2eFlowControl::set(w, m.e2e_flow_control ? 1u : 0u);
  ReqWire::StartingPsn::set(w, m.starting_psn);
  ReqWire::LocalCmResponseTimeout::set(w, m.local_cm_response_timeout);
  ReqWire::RetryCount::set(w, m.retry_count);
  w.pkey = Be16::of(m.pkey);
  ReqWire::PathMtu::set(w, m.path_mtu);
  ReqWire::RdcExists::set(w, m.rdc_exists ? 1u : 0u);
  ReqWire::RnrRetryCount::set(w, m.rnr_retry_count);
  ReqWire::MaxCmRetries::set(w, m.max_cm_retries);
  ReqWire::Srq::set(w, m.srq ? 1u : 0u);
  ReqWire::ExtendedTransportType::set(w, m.extended_transport_type);
  put_path(m.primary, w.primary);
  put_path(m.alternate, w.alternate);
  w.private_data = m.private_data;
}

Req get(const ReqWire& w) noexcept {
  Req m;
  m.local_comm_id = w.local_comm_id.get();
  m.service_id = w.service_id.get();
  m.local_ca_guid = w.local_ca_guid.get();
  m.local_qkey = w.local_qkey.get();
  m.local_qpn = ReqWire::LocalQpn::get(w);
  m.responder_resources = static_cast<uint8_t>(ReqWire::ResponderResources::get(w));
  m.local_eecn = ReqWire::LocalEecn::get(w);
  m.initiator_depth = static_cast<uint8_t>(ReqWire::InitiatorDepth::get(w));
  m.remote_eecn = ReqWire::RemoteEecn::get(w);
  m.remote_cm_response_timeout = static_cast<uint8_t>(ReqWire::RemoteCmResponseTimeout::get(w));
  m.transport_service_type = static_cast<uint8_t>(ReqWire::TransportServiceType::get(w));
  m.e2e_flow_control = ReqWire::E2eFlowControl::get(w) != 0;
  m.starting_psn = ReqWire::StartingPsn::get(w);
  m.local_cm_response_timeout = static_cast<uint8_t>(ReqWire::LocalCmResponseTimeout::get(w));
  m.retry_count = static_cast<uint8_t>(ReqWire::RetryCount::get(w));
  m.pkey = w.pkey.get();
  m.path_mtu = ReqWire::PathMtu::get(w);
  m.rdc_exists = ReqWire::RdcExists::get(w) != 0;
  m.rnr_retry_count = ReqWire::RnrRetryCount::get(w);
  m.max_cm_retries = ReqWire::MaxCmRetries::get(w);
  m.srq = ReqWire::Srq::get(w) != 0;
  m.extended_transport_type = ReqWire::ExtendedTransportType::get(w);
  m.primary = get_path(w.primary);
  m.alternate = get_path(w.alternate);
  m.private_data = w.private_data;
  return m;
}

void put(const Mra& m, MraWire& w) noexcept {
  w.local_comm_id = Be32::of(m.local_comm_id);
  w.remote_comm_id = Be32::of(m.remote_comm_id);
  MraWire::MessageMraed::set(w, static_cast<uint8_t>(m.message_mraed));
  MraWire::ServiceTimeout::set(w, m.service_timeout);
  w.private_data = m.private_data;
}

Mra get(const MraWire& w) noexcept {
  Mra m;
  m.local_comm_id = w.local_comm_id.get();
  m.remote_comm_id = w.remote_comm_id.get();
  m.message_mraed = static_cast<MsgResponse>(MraWire::MessageMraed::get(w));
  m.service_timeout = MraWire::ServiceTimeout::get(w);
  m.private_data = w.private_data;
  return m;
}

void put(const Rej& m, RejWire& w) noexcept {
  w.local_comm_id = Be32::of(m.local_comm_id);
  w.remote_comm_id = Be32::of(m.remote_comm_id);
  RejWire::MessageRejected::set(w, static_cast<uint8_t>(m.message_rejected));
  RejWire::RejectInfoLength::set(w, m.ari_length);
  w.reason = Be16::of(static_cast<uint16_t>(m.reason));
  w.ari = m.ari;
  w.private_data = m.private_data;
}

Rej get(const RejWire& w) noexcept {
  Rej m;
  m.local_comm_id = w.local_comm_id.get();
  m.remote_comm_id = w.remote_comm_id.get();
  m.message_rejected = static_cast<MsgResponse>(RejWire::MessageRejected::get(w));
  m.ari_length = RejWire::RejectInfoLength::get(w);
  m.reason = static_cast<RejReason>(w.reason.get());
  m.ari = w.ari;
  m.private_data = w.private_data;
  return m;
}

void put(const Rep& m, RepWire& w) noexcept {
  w.local_comm_id = Be32::of(m.local_comm_id);
  w.remote_comm_id = Be32::of(m.remote_comm_id);
  w.local_qkey = Be32::of(m.local_qkey);
  RepWire::LocalQpn::set(w, m.local_qpn);
  RepWire::LocalEecn::set(w, m.local_eecn);
  RepWire::StartingPsn::set(w, m.starting_psn);
  w.responder_resources = m.responder_resources;
  w.initiator_depth = m.initiator_depth;
  RepWire::TargetAckDelay::set(w, m.target_ack_delay);
  RepWire::FailoverAccepted::set(w, m.failover_accepted);
  RepWire::E2eFlowControl::set(w, m.e2e_flow_control ? 1u : 0u);
  RepWire::RnrRetryCount::set(w, m.rnr_retry_count);
  RepWire::Srq::set(w, m.srq ? 1u : 0u);
  w.local_ca_guid = Be64::of(m.local_ca_guid);
  w.private_data = m.private_data;
}

Rep get(const RepWire& w) noexcept {
  Rep m;
  m.local_comm_id = w.local_comm_id.get();
  m.remote_comm_id = w.remote_comm_id.get();
  m.local_qkey = w.local_qkey.get();
  m.local_qpn = RepWire::LocalQpn::get(w);
  m.local_eecn = RepWire::LocalEecn::get(w);
  m.starting_psn = RepWire::StartingPsn::get(w);
  m.responder_resources = w.responder_resources;
  m.initiator_depth = w.initiator_depth;
  m.target_ack_delay = RepWire::TargetAckDelay::get(w);
  m.failover_accepted = RepWire::FailoverAccepted::get(w);
  m.e2e_flow_control = RepWire::E2eFlowControl::get(w) != 0;
  m.rnr_retry_count = RepWire::RnrRetryCount::get(w);
  m.srq = RepWire::Srq::get(w) != 0;
  m.local_ca_guid = w.local_ca_guid.get();
  m.private_data = w.private_data;
  return m;
}

void put(const Rtu& m, RtuWire& w) noexcept {
  w.local_comm_id = Be32::of(m.local_comm_id);
  w.remote_comm_id = Be32::of(m.remote_comm_id);
  w.private_data = m.private_data;
}

Rtu get(const RtuWire& w) noexcept {
  return Rtu{w.local_comm_id.get(), w.remote_comm_id.get(), w.private_data};
}

void put(const Dreq& m, DreqWire& w) noexcept {
  w.local_comm_id = Be32::of(m.local_comm_id);
  w.remote_comm_id = Be32::of(m.remote_comm_id);
  DreqWire::RemoteQpn::set(w, m.remote_qpn);
  w.private_data = m.private_data;
}

Dreq get(const DreqWire& w) noexcept {
  return Dreq{w.local_comm_id.get(), w.remote_comm_id.get(), DreqWire::RemoteQpn::get(w),
              w.private_data};
}

void put(const Drep& m, DrepWire& w) noexcept {
  w.local_comm_id = Be32::of(m.local_comm_id);
  w.remote_comm_id = Be32::of(m.remote_comm_id);
  w.private_data = m.private_data;
}

Drep get(const DrepWire& w) noexcept {
  return Drep{w.local_comm_id.get(), w.remote_comm_id.get(), w.private_data};
}

void put(const SidrReq& m, SidrReqWire& w) noexcept {
  w.request_id = Be32::of(m.request_id);
  w.pkey = Be16::of(m.pkey);
  w.service_id = Be64::of(m.service_id);
  w.private_data = m.private_data;
}

SidrReq get(const SidrReqWire& w) noexcept {
  return SidrReq{w.request_id.get(), w.pkey.get(), w.service_id.get(), w.private_data};
}

void put(const SidrRep& m, SidrRepWire& w) noexcept {
  w.request_id = Be32::of(m.request_id);
  w.status = static_cast<uint8_t>(m.status);
  w.info_length = m.info_length;
  SidrRepWire::Qpn::set(w, m.qpn);
  w.service_id = Be64::of(m.service_id);
  w.qkey = Be32::of(m.qkey);
  w.info = m.info;
  w.private_data = m.private_data;
}

SidrRep get(const SidrRepWire& w) noexcept {
  SidrRep m;
  m.request_id = w.request_id.get();
  m.status = static_cast<SidrStatus>(w.status);  // any value: the receiver judges it
  m.info_length = w.info_length;
  m.qpn = SidrRepWire::Qpn::get(w);
  m.service_id = w.service_id.get();
  m.qkey = w.qkey.get();
  m.info = w.info;
  m.private_data = w.private_data;
  return m;
}

// The messages Message::body holds, in its order: their wire structs and attribute IDs.
using BodyWires = std::tuple<ReqWire, MraWire, RejWire, RepWire, RtuWire, DreqWire, DrepWire,
                             SidrReqWire, SidrRepWire>;
constexpr std::array<AttrId, 9> kBodyIds = {AttrId::kReq,  AttrId::kMra,     AttrId::kRej,
                                            AttrId::kRep,  AttrId::kRtu,     AttrId::kDreq,
                                            AttrId::kDrep, AttrId::kSidrReq, AttrId::kSidrRep};
static_assert(std::variant_size_v<decltype(Message::body)> == kBodyIds.size() &&
              std::tuple_size_v<BodyWires> == kBodyIds.size());

// Writes body I (m.body's alternative) at the MAD's body.
template <size_t I = 0>
void put_body(const Message& m, std::span<uint8_t, kMadSize> out) noexcept {
  if constexpr (I < kBodyIds.size()) {
    if (m.body.index() != I) return put_body<I + 1>(m, out);
    put(std::get<I>(m.body), body_at<std::tuple_element_t<I, BodyWires>>(out));
  }
}

// Reads the body of attribute `id` into out->body; false for an attribute without one.
template <size_t I = 0>
bool get_body(AttrId id, std::span<const uint8_t> mad, Message* out) noexcept {
  if constexpr (I < kBodyIds.size()) {
    if (id != kBodyIds[I]) return get_body<I + 1>(id, mad, out);
    out->body.emplace<I>(get(body_at<std::tuple_element_t<I, BodyWires>>(mad)));
    return true;
  } else {
    return false;
  }
}

// Enum names: the text of `v` in `names`, else `other`.
template <class E>
struct Name {
  E value;
  const char* text;
};
template <class E, size_t N>
const char* name_of(const Name<E> (&names)[N], E v, const char* other) noexcept {
  for (const Name<E>& n : names) {
    if (n.value == v) return n.text;
  }
  return other;
}

}  // namespace

const char* to_string(AttrId a) noexcept {
  static constexpr Name<AttrId> kNames[] = {{AttrId::kClassPortInfo, "ClassPortInfo"},
                                            {AttrId::kReq, "REQ"},
                                            {AttrId::kMra, "MRA"},
                                            {AttrId::kRej, "REJ"},
                                            {AttrId::kRep, "REP"},
                                            {AttrId::kRtu, "RTU"},
                                            {AttrId::kDreq, "DREQ"},
                                            {AttrId::kDrep, "DREP"},
                                            {AttrId::kSidrReq, "SIDR_REQ"},
                                            {AttrId::kSidrRep, "SIDR_REP"},
                                            {AttrId::kLap, "LAP"},
                                            {AttrId::kApr, "APR"}};
  return name_of(kNames, a, "?");
}

const char* to_string(RejReason r) noexcept {
  using R = RejReason;
  static constexpr Name<RejReason> kNames[] = {
      {R::kNoQp, "no QP"},
      {R::kNoResources, "no resources"},
      {R::kTimeout, "timeout"},
      {R::kUnsupported, "unsupported request"},
      {R::kInvalidCommId, "invalid comm ID"},
      {R::kInvalidServiceId, "invalid service ID"},
      {R::kInvalidTransportType, "invalid transport type"},
      {R::kStaleConn, "stale connection"},
      {R::kInvalidGid, "invalid GID"},
      {R::kInvalidMtu, "invalid MTU"},
      {R::kInsufficientRespResources, "insufficient responder resources"},
      {R::kConsumerDefined, "consumer defined"},
      {R::kInvalidRnrRetry, "invalid RNR retry"},
      {R::kDuplicateLocalCommId, "duplicate local comm ID"},
      {R::kInvalidClassVersion, "invalid class version"}};
  return name_of(kNames, r, "other");
}

const char* to_string(MadError e) noexcept {
  static constexpr const char* kNames[] = {"ok",
                                           "too short",
                                           "base version",
                                           "not CM class",
                                           "CM class version",
                                           "method",
                                           "unsupported attribute"};
  static_assert(std::size(kNames) == static_cast<size_t>(MadError::kCount));
  const auto i = static_cast<size_t>(e);
  return i < std::size(kNames) ? kNames[i] : "?";
}

AttrId attr_id(const Message& m) noexcept { return kBodyIds[m.body.index()]; }

void encode(const Message& m, std::span<uint8_t, kMadSize> out) noexcept {
  std::memset(out.data(), 0, out.size());
  auto& h = *reinterpret_cast<MadHdr*>(out.data());
  h.base_version = kBaseVersion;
  h.mgmt_class = kMgmtClassCm;
  h.class_version = kCmClassVersion;
  MadHdr::Method::set(h, kMethodSend);
  h.tid = Be64::of(m.tid);
  h.attr_id = Be16::of(static_cast<uint16_t>(attr_id(m)));
  h.attr_mod = Be32::of(m.attr_mod);
  put_body(m, out);
}

std::array<uint8_t, kMadSize> encode(const Message& m) noexcept {
  std::array<uint8_t, kMadSize> out;
  encode(m, std::span<uint8_t, kMadSize>(out));
  return out;
}

MadError decode(std::span<const uint8_t> mad, Message* out) noexcept {
  if (mad.size() < kMadSize) return MadError::kTooShort;
  const auto& h = *reinterpret_cast<const MadHdr*>(mad.data());
  if (h.base_version != kBaseVersion) return MadError::kBaseVersion;
  if (h.mgmt_class != kMgmtClassCm) return MadError::kNotCm;
  if (h.class_version != kCmClassVersion) return MadError::kClassVersion;
  if (MadHdr::Method::get(h) != kMethodSend || MadHdr::Response::get(h) != 0)
    return MadError::kMethod;
  out->tid = h.tid.get();
  out->attr_mod = h.attr_mod.get();
  if (!get_body(static_cast<AttrId>(h.attr_id.get()), mad, out)) return MadError::kUnsupportedAttr;
  return MadError::kOk;
}

}  // namespace urnic::ctl::cm
