// Encoding and validation of urnicd's control messages (protocol.h).
#include "daemon/protocol.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace urnic::ipc {
namespace {

bool name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

Decoded bad(Status s, const char* why, bool header_ok) noexcept { return {s, why, header_ok}; }

// The header's own checks: readable, ours, our major version, the length field equal to the
// packet's. `expect` is the size the type requires (0: unknown type).
Decoded check_header(std::span<const uint8_t> bytes, Header* h) noexcept {
  if (bytes.size() < sizeof(Header)) return bad(Status::kInvalidParameter, "short header", false);
  std::memcpy(h, bytes.data(), sizeof *h);
  if (h->magic != kMagic) return bad(Status::kInvalidParameter, "magic", false);
  if (h->version >> 8 != kVersionMajor)
    return bad(Status::kNotSupported, "protocol major version", false);
  if (h->length != bytes.size()) return bad(Status::kInvalidParameter, "length", false);
  return {Status::kSuccess, "", true};
}

bool all_zero(const void* p, size_t n) noexcept {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != 0) return false;
  return true;
}

// An address field: none, or an IPv4 one (its unused bytes zero), or an IPv6 one.
bool valid_addr(const WireAddr& a) noexcept {
  if (a.family == 0) return a.port == 0 && all_zero(a.addr, sizeof a.addr);
  if (a.family == AF_INET) return all_zero(a.addr + 4, sizeof a.addr - 4);
  return a.family == AF_INET6;
}

Decoded check_cm_call(const CmCallReq& c) noexcept {
  auto no = [](const char* why) { return bad(Status::kInvalidParameter, why, true); };
  if (c.op == 0 || c.op > static_cast<uint32_t>(CmOp::kLast)) return no("cm_call.op");
  if (c.flag > 1) return no("cm_call.flag");
  if (!valid_addr(c.src) || !valid_addr(c.dst)) return no("cm_call address");
  if (c.data_length > kCmDataMax) return no("cm_call.data_length");
  // Bytes past the data are zero: nothing of the client's memory rides along unnoticed.
  if (!all_zero(c.data + c.data_length, kCmDataMax - c.data_length)) return no("cm_call.data");
  return {Status::kSuccess, "", true};
}

// The object requests' own fields (handles are looked up by the daemon, in the client's table).
Decoded check_object_fields(const Request& r) noexcept {
  auto ok = [] { return Decoded{Status::kSuccess, "", true}; };
  auto no = [](const char* why) { return bad(Status::kInvalidParameter, why, true); };
  switch (static_cast<MsgType>(r.h.type)) {
    case MsgType::kAllocShared:
      return r.alloc_shared.length == 0 || r.alloc_shared.length > kMaxSharedBytes
                 ? no("alloc_shared.length")
                 : ok();
    case MsgType::kCreatePd:
      return r.create_pd.reserved != 0 ? no("create_pd.reserved") : ok();
    case MsgType::kCreateCq:
      return r.create_cq.depth == 0 ? no("create_cq.depth") : ok();
    case MsgType::kCreateQp:
      if (r.create_qp.reserved != 0) return no("create_qp.reserved");
      return r.create_qp.sq_depth == 0 || r.create_qp.rq_depth == 0 ? no("create_qp.depth") : ok();
    case MsgType::kCreateSrq:
      return r.create_srq.depth == 0 || r.create_srq.max_sge == 0 ? no("create_srq") : ok();
    case MsgType::kModifyQp: {
      const WireQpAttr& a = r.modify_qp.attr;
      if (a.state > static_cast<uint8_t>(QpState::kErr)) return no("modify_qp.state");
      if (a.selective_repeat > 1 || a.av_ipv6 > 1) return no("modify_qp flag byte");
      if (a.reserved != 0 || a.reserved2 != 0) return no("modify_qp.reserved");
      return ok();
    }
    case MsgType::kRegisterMr:
      return r.register_mr.length == 0 || r.register_mr.address == 0 ||
                     r.register_mr.length > UINT64_MAX - r.register_mr.address
                 ? no("register_mr range")
                 : ok();
    case MsgType::kDestroy:
      return r.destroy.reserved != 0 ? no("destroy.reserved") : ok();
    case MsgType::kEngineDoorbell:
      return r.engine_doorbell.what > 1 ? no("engine_doorbell.what") : ok();
    case MsgType::kShareMemory: {
      const ShareMemoryReq& m = r.share_memory;
      return (m.address & 4095) != 0 || (m.length & 4095) != 0 || m.length == 0 ||
                     m.length > kMaxSharedBytes || m.address == 0 ||
                     m.length > UINT64_MAX - m.address
                 ? no("share_memory range")
                 : ok();
    }
    case MsgType::kCmChannel:
      return r.cm_channel.reserved != 0 ? no("cm_channel.reserved") : ok();
    case MsgType::kCreateDatagramQp: {
      const CreateDatagramQpReq& d = r.create_datagram_qp;
      if (d.qp.reserved != 0 || d.reserved != 0)  // an SRQ since 1.7
        return no("create_datagram_qp.reserved");
      return d.qp.sq_depth == 0 || d.qp.rq_depth == 0 ? no("create_datagram_qp.depth") : ok();
    }
    case MsgType::kQueryCounters:
      return r.query_counters.reserved != 0 ? no("query_counters.reserved") : ok();
    case MsgType::kModifySrq:
      return ok();  // handles and ranges are the daemon's to check
    case MsgType::kCreateMw:
      return r.create_mw.reserved != 0 ? no("create_mw.reserved") : ok();
    case MsgType::kModerateCq:
      return r.moderate_cq.reserved != 0 ? no("moderate_cq.reserved") : ok();
    case MsgType::kResizeCq:
      return r.resize_cq.depth == 0 ? no("resize_cq.depth") : ok();
    case MsgType::kInitFrmr: {
      const InitFrmrReq& f = r.init_frmr;
      if (f.remote_access > 1 || f.reserved != 0) return no("init_frmr flag word");
      return f.pages == 0 ? no("init_frmr.pages") : ok();
    }
    case MsgType::kCreateAh: {
      const CreateAhReq& a = r.create_ah;
      if (a.ipv6 > 1 || a.reserved != 0 || a.reserved2 != 0 || a.reserved3 != 0)
        return no("create_ah flag byte");
      return a.flow_label >= (1u << 20) || a.sgid_index < -1 ? no("create_ah field") : ok();
    }
    case MsgType::kCmCreate:
      return r.cm_create.kind > static_cast<uint32_t>(CmKind::kListener) ? no("cm_create.kind")
                                                                         : ok();
    case MsgType::kCmCall:
      return check_cm_call(r.cm_call);
    case MsgType::kCmEvents:
      return r.cm_events.reserved != 0 ? no("cm_events.reserved") : ok();
    default:
      return bad(Status::kInvalidDeviceRequest, "type", true);
  }
}

// Type-specific fields of a request already copied into *r.
Decoded check_request_fields(const Request& r) noexcept {
  switch (static_cast<MsgType>(r.h.type)) {
    case MsgType::kHello:
      if (r.hello.reserved != 0) return bad(Status::kInvalidParameter, "hello.reserved", true);
      if (!valid_name(r.hello.name)) return bad(Status::kInvalidParameter, "hello.name", true);
      return {Status::kSuccess, "", true};
    case MsgType::kListAdapters:
      return {Status::kSuccess, "", true};
    case MsgType::kQueryAdapter:
      if (!valid_name(r.query_adapter.name))
        return bad(Status::kInvalidParameter, "query_adapter.name", true);
      return {Status::kSuccess, "", true};
    case MsgType::kListClients:
      if (r.list_clients.reserved != 0)
        return bad(Status::kInvalidParameter, "list_clients.reserved", true);
      return {Status::kSuccess, "", true};
    default:
      return check_object_fields(r);
  }
}

// An adapter entry from the daemon: its name valid, its flags and reserved bytes in range.
bool valid_entry(const AdapterEntry& e) noexcept {
  return valid_name(e.name) && e.has_ipv6 <= 1 && e.reserved == 0 && e.engines >= 1 &&
         e.engines <= 8;
}

// Type-specific fields of a reply of kSuccess, copied to `out`.
bool check_reply_fields(MsgType type, const void* out) noexcept {
  switch (type) {
    case MsgType::kHello:
      return static_cast<const HelloRep*>(out)->adapters <= kMaxAdapters;
    case MsgType::kListAdapters: {
      const auto* r = static_cast<const ListAdaptersRep*>(out);
      if (r->count > kMaxAdapters || r->reserved != 0) return false;
      for (uint32_t i = 0; i < r->count; ++i)
        if (!valid_entry(r->entries[i])) return false;
      return true;
    }
    case MsgType::kQueryAdapter:
      return valid_entry(static_cast<const QueryAdapterRep*>(out)->entry);
    case MsgType::kListClients: {
      const auto* r = static_cast<const ListClientsRep*>(out);
      return r->count <= kClientsPerReply && r->count <= r->total;
    }
    case MsgType::kCreateCq:
    case MsgType::kResizeCq: {
      const auto* r = static_cast<const CreateCqRep*>(out);
      return r->capacity != 0 && (r->capacity & (r->capacity - 1)) == 0;
    }
    case MsgType::kCreateQp:
    case MsgType::kCreateDatagramQp: {
      const auto* r = static_cast<const CreateQpRep*>(out);
      auto pow2 = [](uint32_t c) { return c != 0 && (c & (c - 1)) == 0; };
      return pow2(r->sq_capacity) && pow2(r->rq_capacity) && r->rq_offset < r->map_bytes;
    }
    case MsgType::kCreateSrq: {
      const auto* r = static_cast<const CreateSrqRep*>(out);
      return r->capacity != 0 && (r->capacity & (r->capacity - 1)) == 0 && r->stride != 0 &&
             r->stride % 16 == 0 && r->engine < 8;
    }
    case MsgType::kCmCall: {
      const auto* r = static_cast<const CmCallRep*>(out);
      return r->data_length <= kCmDataMax && r->datagram <= 1 && valid_addr(r->local) &&
             valid_addr(r->peer);
    }
    case MsgType::kCmEvents: {
      const auto* r = static_cast<const CmEventsRep*>(out);
      if (r->count > kCmEventsPerReply || r->more > 1) return false;
      for (uint32_t i = 0; i < r->count; ++i) {
        const CmEvent& e = r->events[i];
        if (e.kind < 1 || e.kind > static_cast<uint32_t>(CmEventKind::kLast) || e.datagram > 1 ||
            e.reserved != 0)
          return false;
      }
      return true;
    }
    case MsgType::kAllocShared:
    case MsgType::kShareMemory:
    case MsgType::kEngineDoorbell:
    case MsgType::kCreatePd:
    case MsgType::kModifyQp:
    case MsgType::kRegisterMr:
    case MsgType::kDestroy:
    case MsgType::kCmChannel:
    case MsgType::kCmCreate:
    case MsgType::kCreateAh:
    case MsgType::kQueryCounters:
    case MsgType::kModifySrq:
    case MsgType::kCreateMw:
    case MsgType::kInitFrmr:
    case MsgType::kModerateCq:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool to_wire(const sockaddr* sa, uint32_t len, WireAddr* w) noexcept {
  *w = WireAddr{};
  if (sa == nullptr) return true;
  if (sa->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(sa);
    w->family = AF_INET;
    w->port = ntohs(s->sin_port);
    std::memcpy(w->addr, &s->sin_addr, 4);
    return true;
  }
  if (sa->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(sa);
    w->family = AF_INET6;
    w->port = ntohs(s->sin6_port);
    std::memcpy(w->addr, &s->sin6_addr, 16);
    return true;
  }
  return false;
}

uint32_t from_wire(const WireAddr& w, sockaddr_storage* ss) noexcept {
  std::memset(ss, 0, sizeof *ss);
  if (w.family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(ss);
    s->sin_family = AF_INET;
    s->sin_port = htons(w.port);
    std::memcpy(&s->sin_addr, w.addr, 4);
    return sizeof *s;
  }
  if (w.family == AF_INET6) {
    auto* s = reinterpret_cast<sockaddr_in6*>(ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(w.port);
    std::memcpy(&s->sin6_addr, w.addr, 16);
    return sizeof *s;
  }
  return 0;
}

bool valid_name(const char (&name)[kNameSize]) noexcept {
  size_t n = 0;
  while (n < kNameSize && name[n] != '\0') {
    if (!name_char(name[n])) return false;
    ++n;
  }
  // At least one character, and a NUL inside the field; everything after it NUL too.
  if (n == 0 || n == kNameSize) return false;
  return all_zero(name + n, kNameSize - n);
}

bool set_name(char (&name)[kNameSize], std::string_view s) noexcept {
  std::memset(name, 0, kNameSize);
  if (s.empty() || s.size() >= kNameSize) return false;
  for (char c : s)
    if (!name_char(c)) return false;
  std::memcpy(name, s.data(), s.size());
  return true;
}

size_t request_size(MsgType type) noexcept {
  switch (type) {
    case MsgType::kHello:
      return sizeof(HelloReq);
    case MsgType::kListAdapters:
      return sizeof(ListAdaptersReq);
    case MsgType::kQueryAdapter:
      return sizeof(QueryAdapterReq);
    case MsgType::kListClients:
      return sizeof(ListClientsReq);
    case MsgType::kAllocShared:
      return sizeof(AllocSharedReq);
    case MsgType::kCreatePd:
      return sizeof(CreatePdReq);
    case MsgType::kCreateCq:
      return sizeof(CreateCqReq);
    case MsgType::kCreateQp:
      return sizeof(CreateQpReq);
    case MsgType::kModifyQp:
      return sizeof(ModifyQpReq);
    case MsgType::kRegisterMr:
      return sizeof(RegisterMrReq);
    case MsgType::kDestroy:
      return sizeof(DestroyReq);
    case MsgType::kShareMemory:
      return sizeof(ShareMemoryReq);
    case MsgType::kEngineDoorbell:
      return sizeof(EngineDoorbellReq);
    case MsgType::kCreateSrq:
      return sizeof(CreateSrqReq);
    case MsgType::kCmChannel:
      return sizeof(CmChannelReq);
    case MsgType::kCmCreate:
      return sizeof(CmCreateReq);
    case MsgType::kCmCall:
      return sizeof(CmCallReq);
    case MsgType::kCmEvents:
      return sizeof(CmEventsReq);
    case MsgType::kCreateAh:
      return sizeof(CreateAhReq);
    case MsgType::kCreateDatagramQp:
      return sizeof(CreateDatagramQpReq);
    case MsgType::kQueryCounters:
      return sizeof(QueryCountersReq);
    case MsgType::kModifySrq:
      return sizeof(ModifySrqReq);
    case MsgType::kCreateMw:
      return sizeof(CreateMwReq);
    case MsgType::kInitFrmr:
      return sizeof(InitFrmrReq);
    case MsgType::kResizeCq:
      return sizeof(ResizeCqReq);
    case MsgType::kModerateCq:
      return sizeof(ModerateCqReq);
    default:
      return 0;
  }
}

size_t reply_size(MsgType type) noexcept {
  switch (type) {
    case MsgType::kHello:
      return sizeof(HelloRep);
    case MsgType::kListAdapters:
      return sizeof(ListAdaptersRep);
    case MsgType::kQueryAdapter:
      return sizeof(QueryAdapterRep);
    case MsgType::kListClients:
      return sizeof(ListClientsRep);
    case MsgType::kAllocShared:
      return sizeof(AllocSharedRep);
    case MsgType::kCreatePd:
      return sizeof(HandleRep);
    case MsgType::kCreateCq:
    case MsgType::kResizeCq:
      return sizeof(CreateCqRep);
    case MsgType::kCreateQp:
    case MsgType::kCreateDatagramQp:
      return sizeof(CreateQpRep);
    case MsgType::kModifyQp:
    case MsgType::kDestroy:
    case MsgType::kModifySrq:
    case MsgType::kModerateCq:
      return sizeof(ReplyHead);
    case MsgType::kRegisterMr:
    case MsgType::kCreateMw:
    case MsgType::kInitFrmr:
      return sizeof(RegisterMrRep);
    case MsgType::kCreateSrq:
      return sizeof(CreateSrqRep);
    case MsgType::kShareMemory:
    case MsgType::kEngineDoorbell:
    case MsgType::kCmChannel:
    case MsgType::kCmCreate:
    case MsgType::kCreateAh:
      return sizeof(HandleRep);
    case MsgType::kCmCall:
      return sizeof(CmCallRep);
    case MsgType::kCmEvents:
      return sizeof(CmEventsRep);
    case MsgType::kQueryCounters:
      return sizeof(QueryCountersRep);
    default:
      return 0;
  }
}

Header make_header(MsgType type, uint32_t size, uint32_t seq) noexcept {
  return Header{kMagic, wire_version(), static_cast<uint16_t>(type), size, seq};
}

ReplyHead make_reply(const Header& req, uint32_t size, Status status) noexcept {
  ReplyHead r{};
  r.h = Header{kMagic, wire_version(),
               static_cast<uint16_t>(req.type | static_cast<uint16_t>(MsgType::kReplyFlag)), size,
               req.seq};
  r.status = static_cast<uint32_t>(status);
  return r;
}

Decoded decode_request(std::span<const uint8_t> bytes, Request* out) noexcept {
  Header h{};
  if (Decoded d = check_header(bytes, &h); d.status != Status::kSuccess) return d;
  const size_t want = request_size(static_cast<MsgType>(h.type));
  if (want == 0) return bad(Status::kInvalidDeviceRequest, "type", true);
  if (bytes.size() != want) return bad(Status::kInvalidParameter, "size for its type", true);
  std::memset(out, 0, sizeof *out);
  std::memcpy(out, bytes.data(), want);
  return check_request_fields(*out);
}

Decoded decode_reply(std::span<const uint8_t> bytes, MsgType type, uint32_t seq, void* out,
                     size_t out_size) noexcept {
  Header h{};
  if (Decoded d = check_header(bytes, &h); d.status != Status::kSuccess) return d;
  if (h.type != (static_cast<uint16_t>(type) | static_cast<uint16_t>(MsgType::kReplyFlag)))
    return bad(Status::kInvalidParameter, "reply type", true);
  if (h.seq != seq) return bad(Status::kInvalidParameter, "reply seq", true);
  // A failed request may be answered with the bare ReplyHead (some succeed with it alone).
  if (bytes.size() == sizeof(ReplyHead) && out_size != sizeof(ReplyHead)) {
    ReplyHead r{};
    std::memcpy(&r, bytes.data(), sizeof r);
    if (static_cast<Status>(r.status) == Status::kSuccess)
      return bad(Status::kInvalidParameter, "short success reply", true);
    std::memset(out, 0, out_size);
    std::memcpy(out, &r, sizeof r);
    return {Status::kSuccess, "", true};
  }
  if (out_size != reply_size(type) || bytes.size() != out_size)
    return bad(Status::kInvalidParameter, "reply size", true);
  std::memcpy(out, bytes.data(), out_size);
  const auto* r = static_cast<const ReplyHead*>(out);
  if (static_cast<Status>(r->status) == Status::kSuccess && !check_reply_fields(type, out))
    return bad(Status::kInvalidParameter, "reply field", true);
  return {Status::kSuccess, "", true};
}

}  // namespace urnic::ipc
