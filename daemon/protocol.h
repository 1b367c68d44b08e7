// The control protocol between urnicd and its client processes (docs/daemon.md, issue 38 item 3):
// one SOCK_SEQPACKET Unix socket per client, one message per packet, each a fixed-layout struct
// of its type. Both ends are on one host, so fields are in host byte order; every struct is
// trivially copyable with a fixed size (static_asserts), and a message is valid only when its
// packet length is exactly that size.
//
// Trust: the daemon treats every byte a client sends as hostile. decode_request() checks every
// field of every request (magic, version, type, length, reserved bytes, strings, ranges) before
// the daemon looks at it, and names the first field that is wrong; the daemon answers a message
// it cannot decode with kInvalidParameter (when the header is readable) and counts it. The client
// checks the daemon's replies the same way (decode_reply), so that a wrong or old daemon gives a
// clear error rather than garbage. No DPDK here: the client side of the public API and the fuzz
// target link this alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

#include "urnic/counters.h"
#include "urnic/status.h"
#include "urnic/types.h"

struct sockaddr;
struct sockaddr_storage;

namespace urnic::ipc {

inline constexpr uint32_t kMagic = 0x444e5255;  // "URND" in memory on little-endian hosts
// The major version changes when a layout changes; a client and a daemon of different majors
// refuse each other at kHello. The minor grows when message types are added.
inline constexpr uint16_t kVersionMajor = 1;
// 1: objects and rings (5 .. 11); 2: 12; 3: 13; 4: CreateCq carries the client's eventfd;
// 5: send slots carry immediate data and atomic operands (shm::SendSlot), CreateQp names an SRQ,
// CreateSrq (14); a client had to be of minor 5 at least: its slots and
// CreateQp are laid out so. 6: connectors and listeners (CmChannel, CmCreate, CmCall, CmEvents);
// datagram QPs and address handles (CreateAh, CreateDatagramQp, ModifyQpReq::qkey,
// CreateQpRep::max_datagram, shm::SendOp::kDatagram). 7: memory windows and fast-register MRs
// (CreateMw, InitFrmr, shm::SendOp::kBind .. kFastRegister, a QP's page list area,
// shm::RingHeader::failed); datagram QPs on an SRQ; CQ interrupt moderation (ModerateCq) and
// resize (ResizeCq, shm::RingHeader::moved). 8: CmCallRep::reject_reason (in what was the high
// half of `datagram`, which only ever held 0 or 1: a minor-7 daemon's reply reads as no reason).
// 9: QpCounters::datagrams_too_long, so AdapterCounters (QueryCountersRep) grew: a client must
// be of minor 9 (its counters laid out so; an older daemon's reply has the wrong length).
inline constexpr uint16_t kVersionMinor = 9;
inline constexpr uint16_t kMinClientMinor = 9;
// Names (adapters, clients): 1 .. 31 characters of [A-Za-z0-9_.-], NUL-padded to 32 bytes.
inline constexpr size_t kNameSize = 32;
// Adapters one daemon serves (ListAdapters answers with all of them in one message).
inline constexpr uint32_t kMaxAdapters = 16;
// Clients listed per ListClients reply (the request names the first one wanted: pagination).
inline constexpr uint32_t kClientsPerReply = 32;
// No message is larger (the receive buffers' size; a longer packet is truncated and refused).
inline constexpr size_t kMaxMessage = 4096;

enum class MsgType : uint16_t {
  kHello = 1,         // first message of a connection: versions and the client's name
  kListAdapters = 2,  // the daemon's adapters
  kQueryAdapter = 3,  // one adapter's NDK_ADAPTER_INFO and port counters, by name
  kListClients = 4,   // the attached clients (operators only: uid 0 or the daemon's uid)
  // Objects (docs/daemon.md "Objects and shared rings"); each is the client's until it destroys
  // it or its connection closes. Replies marked + carry a memfd (SCM_RIGHTS).
  kAllocShared = 5,  // + shared memory for buffers, mapped at the same address in both
  kCreatePd = 6,
  kCreateCq = 7,  // + its completion ring
  kCreateQp = 8,  // + its send and receive rings (RC)
  kModifyQp = 9,
  kRegisterMr = 10,      // inside the client's shared memory
  kDestroy = 11,         // any object by its handle
  kShareMemory = 12,     // the client's memfd (SCM_RIGHTS) holding pages it moved there in place
  kEngineDoorbell = 13,  // + an engine's doorbell: its sleeping flag's page, or its wake eventfd
  kCreateSrq = 14,       // + its receive ring (since 1.5)
  // Connectors and listeners (since 1.6; docs/daemon.md "Connections"): the daemon's connection
  // manager acts for the client; what happens later arrives as events on a channel.
  kCmChannel = 15,         // a channel: the client's eventfd (SCM_RIGHTS), written when events wait
  kCmCreate = 16,          // a connector or a listener, reporting on a channel
  kCmCall = 17,            // one call of a connector or a listener (CmOp)
  kCmEvents = 18,          // takes the events waiting on a channel
  kCreateAh = 19,          // an address handle (since 1.6): the destination resolved by the daemon
  kCreateDatagramQp = 20,  // + a UD QP's rings (since 1.6)
  kQueryCounters = 21,     // counters of the client's own QPs, and the port's (since 1.6)
  kModifySrq = 22,         // an SRQ's depth and limit; the limit event on a CM channel (1.6)
  kCreateMw = 23,          // an unbound memory window (since 1.7)
  kInitFrmr = 24,          // a fast-register MR, initialised (since 1.7)
  kModerateCq = 25,        // a CQ's interrupt moderation (since 1.7)
  kResizeCq = 26,          // + a CQ's new completion ring (since 1.7)
  kReplyFlag = 0x8000      // a reply carries its request's type with this bit set
};

struct Header {
  uint32_t magic;
  uint16_t version;  // kVersionMajor << 8 | kVersionMinor
  uint16_t type;     // MsgType
  uint32_t length;   // of the whole message, header included
  uint32_t seq;      // chosen by the client, echoed in the reply
};
static_assert(sizeof(Header) == 16);

// Every reply starts with its header and an NTSTATUS; the rest is meaningful only on kSuccess.
struct ReplyHead {
  Header h;
  uint32_t status;  // urnic::Status
  uint32_t reserved;
};
static_assert(sizeof(ReplyHead) == 24);

struct HelloReq {
  Header h;
  uint16_t major, minor;  // the client's protocol version
  uint32_t reserved;
  char name[kNameSize];  // the client's name for logs and urnicctl (e.g. its program name)
};
static_assert(sizeof(HelloReq) == 56);

struct HelloRep {
  ReplyHead r;
  uint16_t major, minor;  // the daemon's protocol version
  uint32_t client_id;     // this client's id in the daemon's logs, telemetry and urnicctl
  uint32_t daemon_pid;
  uint32_t adapters;  // how many adapters the daemon serves
};
static_assert(sizeof(HelloRep) == 40);

struct ListAdaptersReq {
  Header h;
};

// What a client sees of one of the daemon's adapters.
struct AdapterEntry {
  char name[kNameSize];
  uint32_t ipv4;  // host order; 0: none
  uint8_t ipv6[16];
  uint8_t has_ipv6;  // 0 or 1
  uint8_t mac[6];
  uint8_t reserved;
  uint32_t engines;  // 1 .. 8
  uint32_t mtu;      // the port's Ethernet MTU
};
static_assert(sizeof(AdapterEntry) == 68);

struct ListAdaptersRep {
  ReplyHead r;
  uint32_t count;  // entries used, 0 .. kMaxAdapters
  uint32_t reserved;
  AdapterEntry entries[kMaxAdapters];
};
static_assert(sizeof(ListAdaptersRep) == 32 + 68 * kMaxAdapters);

struct QueryAdapterReq {
  Header h;
  char name[kNameSize];
};
static_assert(sizeof(QueryAdapterReq) == 48);

struct QueryAdapterRep {
  ReplyHead r;
  AdapterEntry entry;
  uint32_t reserved;
  AdapterInfo info;   // NDK_ADAPTER_INFO, as Adapter::query_adapter_info gives it
  PortCounters port;  // the port's packets and drops, over all its engines
  uint64_t clients;   // clients attached to the daemon
};
static_assert(std::is_trivially_copyable_v<AdapterInfo> &&
              std::is_trivially_copyable_v<PortCounters>);
static_assert(sizeof(QueryAdapterRep) % 8 == 0);

struct ListClientsReq {
  Header h;
  uint32_t first;  // index of the first client wanted, in the daemon's order (0: from the start)
  uint32_t reserved;
};
static_assert(sizeof(ListClientsReq) == 24);

struct ClientEntry {
  uint32_t id;
  uint32_t pid;  // from SO_PEERCRED at connect time
  uint32_t uid, gid;
  char name[kNameSize];                 // from its kHello ("" before it)
  uint64_t requests;                    // messages it sent
  uint64_t errors;                      // of them refused (malformed or not allowed)
  uint32_t shared, pds, cqs, qps, mrs;  // the objects it holds now
  uint32_t srqs;                        // (since 1.5; 0 before)
  uint64_t shared_bytes;
};
static_assert(sizeof(ClientEntry) == 96);

struct ListClientsRep {
  ReplyHead r;
  uint32_t total;  // clients attached now
  uint32_t count;  // entries used, 0 .. kClientsPerReply
  ClientEntry entries[kClientsPerReply];
};
static_assert(sizeof(ListClientsRep) == 32 + 96 * kClientsPerReply);
static_assert(sizeof(ListClientsRep) <= kMaxMessage && sizeof(ListAdaptersRep) <= kMaxMessage &&
              sizeof(QueryAdapterRep) <= kMaxMessage);

// ---- Objects ------------------------------------------------------------------------------

// Handles name a client's objects in its own table: they index nothing of another client's.
inline constexpr uint64_t kMaxSharedBytes = uint64_t{1} << 40;

struct AllocSharedReq {
  Header h;
  uint64_t length;  // 1 .. kMaxSharedBytes, rounded up to pages
};
struct AllocSharedRep {
  ReplyHead r;
  uint32_t handle;
  uint32_t reserved;
  uint64_t
      address;  // where the daemon mapped it: the client maps it there too (MAP_FIXED_NOREPLACE)
  uint64_t length;
};
static_assert(sizeof(AllocSharedReq) == 24 && sizeof(AllocSharedRep) == 48);

struct CreatePdReq {
  Header h;
  uint32_t adapter;  // index in ListAdapters' order
  uint32_t reserved;
};
struct HandleRep {
  ReplyHead r;
  uint32_t handle;
  uint32_t reserved;
};
static_assert(sizeof(CreatePdReq) == 24 && sizeof(HandleRep) == 32);

// With an eventfd of the client's (since minor 4; optional): the bridge writes it when an arm
// in the ring header is satisfied (shm::RingHeader::arm). Without one, arms are never answered.
struct CreateCqReq {
  Header h;
  uint32_t adapter;
  uint32_t depth;  // 1 .. max_cq_depth
};
struct CreateCqRep {
  ReplyHead r;
  uint32_t handle;
  uint32_t capacity;  // the ring's slots (a power of two >= depth)
  uint64_t map_bytes;
};
static_assert(sizeof(CreateCqReq) == 24 && sizeof(CreateCqRep) == 40);

struct CreateQpReq {
  Header h;
  uint32_t pd, send_cq, recv_cq;  // handles; the CQs of the PD's adapter
  uint32_t sq_depth, rq_depth;    // 1 .. max queue depth
  uint32_t max_send_sge, max_recv_sge, max_inline;
  uint64_t qp_context;  // returned in the QP's completions
  uint32_t srq;         // 0, or the SRQ (same PD, same engine) its receives come from
  uint32_t reserved;
};
struct CreateQpRep {
  ReplyHead r;
  uint32_t handle;
  uint32_t qpn;
  uint32_t sq_capacity, sq_stride, rq_capacity, rq_stride;
  uint64_t rq_offset;  // the receive ring's offset in the mapping (the send ring's is 0)
  uint64_t map_bytes;
  uint32_t engine;        // the daemon's engine it runs on (whose doorbell wakes it)
  uint32_t max_datagram;  // a datagram QP's largest payload (since 1.6); 0 for RC
};
static_assert(sizeof(CreateQpReq) == 64 && sizeof(CreateQpRep) == 72);

// A datagram (UD) QP in INIT with Q_Key `qkey` (urnic/datagram.h); the reply is CreateQpRep.
struct CreateDatagramQpReq {
  CreateQpReq qp;  // its header is this message's
  uint32_t qkey;
  uint32_t reserved;
};
static_assert(sizeof(CreateDatagramQpReq) == 72);

// An address handle for datagrams (urnic::create_address_handle on the daemon's adapter): the
// destination's MAC resolved by the daemon (ARP or neighbour discovery, up to 2 s) unless given.
// The daemon keeps it for the client's life (as the public API's handles are values with no
// destroy); a send slot names it by `handle`.
struct CreateAhReq {
  Header h;
  uint32_t adapter;
  uint8_t ipv6;  // 0 or 1
  uint8_t traffic_class, hop_limit;
  uint8_t reserved;
  uint32_t dst_ipv4;  // host order
  uint8_t dst_ipv6[16];
  uint8_t dst_mac[6];  // all zero: resolve it
  uint16_t reserved2;
  uint32_t flow_label;
  int32_t sgid_index;
  uint32_t reserved3;
};
static_assert(sizeof(CreateAhReq) == 64);  // the reply is a HandleRep

// A shared receive queue on the PD's adapter, on its engine `engine` (the engine of the CQs of
// the QPs that will use it).
struct CreateSrqReq {
  Header h;
  uint32_t pd;
  uint32_t depth;    // 1 .. max_srq_depth
  uint32_t max_sge;  // 1 .. max_receive_request_sge
  uint32_t engine;   // 0 .. the adapter's engines - 1
};
struct CreateSrqRep {
  ReplyHead r;
  uint32_t handle;
  uint32_t capacity, stride;  // its receive ring (shm::RecvSlot)
  uint32_t engine;            // whose doorbell wakes it
  uint64_t map_bytes;
};
static_assert(sizeof(CreateSrqReq) == 32 && sizeof(CreateSrqRep) == 48);

// An engine's doorbell (docs/daemon.md "Doorbells"): `what` 0 asks for the memfd of the page
// holding its sleeping flag (shm::EngineDoorbell), 1 for its wake eventfd.
struct EngineDoorbellReq {
  Header h;
  uint32_t engine;
  uint32_t what;
};
static_assert(sizeof(EngineDoorbellReq) == 24);

// QpAttributes (urnic/extensions.h) in fixed layout, its flags as bytes of 0 or 1.
struct WireQpAttr {
  uint8_t state;  // QpState
  uint8_t max_dest_rd_atomic, max_rd_atomic, timeout, retry_cnt, rnr_retry, min_rnr_timer;
  uint8_t selective_repeat;
  uint32_t access, path_mtu, dest_qpn, rq_psn, sq_psn;
  uint8_t av_ipv6, traffic_class, hop_limit, reserved;
  uint32_t dst_ipv4;
  uint8_t dst_ipv6[16];
  uint8_t dst_mac[6];
  uint16_t reserved2;
  uint32_t flow_label;
  int32_t sgid_index;
};
static_assert(sizeof(WireQpAttr) == 68);
struct ModifyQpReq {
  Header h;
  uint32_t qp;
  uint32_t mask;  // qp_attr_mask::*
  WireQpAttr attr;
  uint32_t qkey;  // with qp_attr_mask::kQkey (since 1.6; before, a reserved 0)
};
static_assert(sizeof(ModifyQpReq) == 96);

struct RegisterMrReq {
  Header h;
  uint32_t pd;
  uint32_t flags;  // mr_flag::*
  uint64_t address;
  uint64_t length;
};
struct RegisterMrRep {
  ReplyHead r;
  uint32_t handle;
  uint32_t lkey, rkey;
  uint32_t reserved;
};
static_assert(sizeof(RegisterMrReq) == 40 && sizeof(RegisterMrRep) == 40);

// Memory the client moved onto a memfd in place (same addresses, same contents) and passes with
// this request: the daemon maps it at the same address. The memfd must be sealed against
// shrinking (F_SEAL_SHRINK): the engine reads and writes it.
struct ShareMemoryReq {
  Header h;
  uint64_t address;  // page-aligned
  uint64_t length;   // whole pages, 1 .. kMaxSharedBytes
};
static_assert(sizeof(ShareMemoryReq) == 32);

struct DestroyReq {
  Header h;
  uint32_t handle;
  uint32_t reserved;
};
static_assert(sizeof(DestroyReq) == 24);

// ---- Connectors and listeners (since 1.6) --------------------------------------------------

// An IP address and port as rdma_cm names a connection's ends.
struct WireAddr {
  uint16_t family;   // 0: none; AF_INET or AF_INET6
  uint16_t port;     // host order
  uint8_t addr[16];  // network order; IPv4 in the first 4 bytes, the rest zero
};
static_assert(sizeof(WireAddr) == 20);
// sockaddr -> WireAddr: null gives none (true); an AF_INET / AF_INET6 address at least as long
// as its struct is converted (true); anything else is false.
bool to_wire(const sockaddr* sa, uint32_t len, WireAddr* w) noexcept;
// WireAddr -> sockaddr in *ss; its length, 0 for none.
uint32_t from_wire(const WireAddr& w, sockaddr_storage* ss) noexcept;

// The largest private data a CM call carries either way: a REP's 196 bytes (IBTA table 106).
inline constexpr uint32_t kCmDataMax = 196;

struct CmChannelReq {
  Header h;
  uint32_t adapter;
  uint32_t reserved;
};
static_assert(sizeof(CmChannelReq) == 24);

enum class CmKind : uint32_t { kConnector = 0, kListener = 1 };
struct CmCreateReq {
  Header h;
  uint32_t channel;  // where its events go
  uint32_t kind;     // CmKind
};
static_assert(sizeof(CmCreateReq) == 24);

// The calls of urnic/connector.h and urnic/listener.h, each with the fields it names.
enum class CmOp : uint32_t {
  kListen = 1,           // listener: src, flag (0: rdma_cm's TCP port space, 1: UDP)
  kPause = 2,            // listener: flag (1: pause, 0: resume)
  kConnect = 3,          // connector: qp, src (family 0: none), dst, inbound, outbound, data
  kCompleteConnect = 4,  // connector
  kAccept = 5,           // connector: qp, inbound, outbound, data
  kReject = 6,           // connector: data
  kResolveDatagram = 7,  // connector: src, dst, data
  kAcceptDatagram = 8,   // connector: qpn, qkey, data
  kDisconnect = 9,       // connector
  kInfo = 10,            // connector or listener: CmCallRep's fields
  kLast = kInfo,
};
struct CmCallReq {
  Header h;
  uint32_t object;             // the connector's or listener's handle
  uint32_t op;                 // CmOp
  uint32_t qp;                 // kConnect, kAccept: the QP's handle
  uint32_t inbound, outbound;  // read limits
  uint32_t qpn, qkey;          // kAcceptDatagram
  uint32_t flag;               // kListen, kPause: 0 or 1
  WireAddr src, dst;
  uint32_t data_length;  // 0 .. kCmDataMax (each call has its own smaller limit)
  uint8_t data[kCmDataMax];
};
static_assert(sizeof(CmCallReq) == 288);

// The reply of every CmCall of kSuccess. kListen and kInfo of a listener: `local` is what it
// listens on. kInfo of a connector: what the get_* calls of urnic/connector.h read.
struct CmCallRep {
  ReplyHead r;
  uint32_t data_status;  // get_connection_data's status (kSuccess or kConnectionInvalid)
  uint32_t data_length;  // the peer's private data, 0 .. kCmDataMax
  uint32_t inbound, outbound;
  uint32_t peer_status;  // get_datagram_peer's status
  uint32_t qpn, qkey;
  uint16_t datagram;       // 0 or 1: is_datagram()
  uint16_t reject_reason;  // get_reject_reason's reason (0: none; minor 8)
  WireAddr local, peer;    // family 0: none yet
  uint8_t data[kCmDataMax];
};
static_assert(sizeof(CmCallRep) == 292);

enum class CmEventKind : uint32_t {
  kCompleted = 1,     // the object's outstanding request completed with `status`
  kRequest = 2,       // a request reached listener `object`: the new connector `connector`
  kDisconnected = 3,  // the peer disconnected connector `object`
  kSrqLimit = 4,      // SRQ `object` fell below its armed limit (ModifySrq)
  kLast = kSrqLimit,
};
struct CmEvent {
  uint32_t kind;  // CmEventKind
  uint32_t object;
  uint32_t status;     // kCompleted
  uint32_t connector;  // kRequest: the new connector's handle, the client's from now
  uint32_t datagram;   // kRequest: 0 or 1
  uint32_t reserved;
};
static_assert(sizeof(CmEvent) == 24);

inline constexpr uint32_t kCmEventsPerReply = 64;
struct CmEventsReq {
  Header h;
  uint32_t channel;
  uint32_t reserved;
};
struct CmEventsRep {
  ReplyHead r;
  uint32_t count;  // 0 .. kCmEventsPerReply, oldest first
  uint32_t more;   // 1 when more wait (ask again)
  CmEvent events[kCmEventsPerReply];
};
static_assert(sizeof(CmEventsReq) == 24 && sizeof(CmEventsRep) == 32 + 24 * kCmEventsPerReply);
static_assert(sizeof(CmEventsRep) <= kMaxMessage);

// Adapter::query_counters / query_engine_counters / QpExtension::counters in attach mode: the
// port's counters (all of an engine's, or of all engines: every client sees the port, as
// QueryAdapter shows it) and the sum over the client's own QPs on the adapter (another client's
// traffic is not counted in them), or one QP's. CM and fault counters stay zero (the daemon's).
inline constexpr uint32_t kAllEngines = 0xFFFFFFFF;
struct QueryCountersReq {
  Header h;
  uint32_t adapter;
  uint32_t engine;  // kAllEngines, or the one engine whose port queue is asked for
  uint32_t qp;      // 0: the adapter; else one of the client's QPs (then `qps` is its counters)
  uint32_t reserved;
};
struct QueryCountersRep {
  ReplyHead r;
  AdapterCounters counters;
};
static_assert(sizeof(QueryCountersReq) == 32 && std::is_trivially_copyable_v<AdapterCounters> &&
              sizeof(QueryCountersRep) <= kMaxMessage);

// Srq::modify in attach mode: `depth` 0 keeps it (any other must fit the SRQ's ring, its
// capacity); `threshold` 0 keeps the limit, else arms it. Its event (kSrqLimit) goes to CM
// channel `channel`, which the SRQ uses from then on.
struct ModifySrqReq {
  Header h;
  uint32_t srq;
  uint32_t channel;
  uint32_t depth;
  uint32_t threshold;
};
static_assert(sizeof(ModifySrqReq) == 32);

// Memory windows and fast-register MRs (since 1.7; docs/daemon.md "Memory windows and
// fast-register MRs"). Both answer with RegisterMrRep: the handle that send slots name, and the
// object's first token (a window's in rkey; a fast-register MR's in both).
struct CreateMwReq {
  Header h;
  uint32_t pd;
  uint32_t reserved;
};
struct InitFrmrReq {
  Header h;
  uint32_t pd;
  uint32_t pages;          // 1 .. the adapter's frmr_page_count (shm::kAttachFrmrPages)
  uint32_t remote_access;  // 0 or 1
  uint32_t reserved;
};
static_assert(sizeof(CreateMwReq) == 24 && sizeof(InitFrmrReq) == 32);

// Cq::control_interrupt_moderation in attach mode (since 1.7): the client resolves NDK's special
// values (count 0xFFFFFFFF: interval only; interval 0xFFFFFFFF: count only; interval 0 or count
// 0 or 1: off) and the daemon's bridge holds the CQ's notifications accordingly.
struct ModerateCqReq {
  Header h;
  uint32_t cq;
  uint32_t interval_us;
  uint32_t count;
  uint32_t reserved;
};
static_assert(sizeof(ModerateCqReq) == 32);

// Cq::resize in attach mode (since 1.7): the daemon resizes its CQ, makes a new completion ring
// of at least `depth` slots and moves the bridge to it, marking the old one moved (its producer
// index final). The reply is CreateCqRep with the new ring's memfd; the client takes the old
// ring's completions first.
struct ResizeCqReq {
  Header h;
  uint32_t cq;
  uint32_t depth;
};
static_assert(sizeof(ResizeCqReq) == 24);

// A request as the daemon sees it once decode_request accepted it.
union Request {
  Header h;
  HelloReq hello;
  ListAdaptersReq list_adapters;
  QueryAdapterReq query_adapter;
  ListClientsReq list_clients;
  AllocSharedReq alloc_shared;
  CreatePdReq create_pd;
  CreateCqReq create_cq;
  CreateQpReq create_qp;
  ModifyQpReq modify_qp;
  RegisterMrReq register_mr;
  DestroyReq destroy;
  ShareMemoryReq share_memory;
  EngineDoorbellReq engine_doorbell;
  CreateSrqReq create_srq;
  CmChannelReq cm_channel;
  CmCreateReq cm_create;
  CmCallReq cm_call;
  CmEventsReq cm_events;
  CreateAhReq create_ah;
  CreateDatagramQpReq create_datagram_qp;
  QueryCountersReq query_counters;
  ModifySrqReq modify_srq;
  CreateMwReq create_mw;
  InitFrmrReq init_frmr;
  ModerateCqReq moderate_cq;
  ResizeCqReq resize_cq;
};

// What decode_* found: kSuccess, or the status to answer with and the first bad field.
struct Decoded {
  Status status = Status::kSuccess;
  const char* why = "";    // static text naming the field (for logs and errors)
  bool header_ok = false;  // magic, version and length readable: a reply can be addressed
};

inline constexpr uint16_t wire_version() noexcept {
  return static_cast<uint16_t>(kVersionMajor << 8 | kVersionMinor);
}
// A header for a message of `type` and `size` bytes.
Header make_header(MsgType type, uint32_t size, uint32_t seq) noexcept;
// The header of the reply to `req`: its type with kReplyFlag, its seq.
ReplyHead make_reply(const Header& req, uint32_t size, Status status) noexcept;

// Checks a message received by the daemon (`bytes`: the whole packet) and copies it into *out.
// Never reads outside `bytes`.
Decoded decode_request(std::span<const uint8_t> bytes, Request* out) noexcept;
// Checks a reply of `type` to the request numbered `seq` (`bytes`: the whole packet) and copies
// it into `out`, `out_size` bytes (the reply struct of that type).
Decoded decode_reply(std::span<const uint8_t> bytes, MsgType type, uint32_t seq, void* out,
                     size_t out_size) noexcept;

// The size of the request / reply struct of `type`; 0 for an unknown type.
size_t request_size(MsgType type) noexcept;
size_t reply_size(MsgType type) noexcept;

// A name field: 1 .. 31 characters of [A-Za-z0-9_.-] then NUL bytes to the end.
bool valid_name(const char (&name)[kNameSize]) noexcept;
// Writes `s` into a name field (NUL-padded); false (field zeroed) when `s` is not a valid name.
bool set_name(char (&name)[kNameSize], std::string_view s) noexcept;
inline std::string_view name_of(const char (&name)[kNameSize]) noexcept {
  size_t n = 0;
  while (n < kNameSize && name[n] != '\0') ++n;
  return {name, n};
}

}  // namespace urnic::ipc
