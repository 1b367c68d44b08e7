// urnicd's control protocol decoder (daemon/protocol.h) and its configuration (daemon/config.h),
// without a daemon: every field a hostile client can get wrong is refused with the status and
// the field name, and every configuration error names its key.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "daemon/config.h"
#include "daemon/protocol.h"

namespace urnic::ipc {
namespace {

std::vector<uint8_t> bytes_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  return {b, b + n};
}

HelloReq hello(std::string_view name = "app") {
  HelloReq r{};
  r.h = make_header(MsgType::kHello, sizeof r, 7);
  r.major = kVersionMajor;
  r.minor = kVersionMinor;
  EXPECT_TRUE(set_name(r.name, name));
  return r;
}

Decoded decode(const std::vector<uint8_t>& b) {
  Request r;
  return decode_request(b, &r);
}

TEST(DaemonProtocol, EveryRequestTypeDecodes) {
  const HelloReq h = hello();
  Request r;
  ASSERT_EQ(decode_request(bytes_of(&h, sizeof h), &r).status, Status::kSuccess);
  EXPECT_EQ(name_of(r.hello.name), "app");
  EXPECT_EQ(r.h.seq, 7u);
  ListAdaptersReq la{make_header(MsgType::kListAdapters, sizeof la, 1)};
  EXPECT_EQ(decode(bytes_of(&la, sizeof la)).status, Status::kSuccess);
  QueryAdapterReq q{};
  q.h = make_header(MsgType::kQueryAdapter, sizeof q, 2);
  ASSERT_TRUE(set_name(q.name, "urnic0"));
  EXPECT_EQ(decode(bytes_of(&q, sizeof q)).status, Status::kSuccess);
  ListClientsReq lc{};
  lc.h = make_header(MsgType::kListClients, sizeof lc, 3);
  lc.first = 40;
  EXPECT_EQ(decode(bytes_of(&lc, sizeof lc)).status, Status::kSuccess);
}

TEST(DaemonProtocol, BadHeadersAreRefusedWithTheFieldNamed) {
  const HelloReq h = hello();
  auto b = bytes_of(&h, sizeof h);
  // Shorter than a header: nothing can be addressed.
  Decoded d = decode({b.begin(), b.begin() + 15});
  EXPECT_EQ(d.status, Status::kInvalidParameter);
  EXPECT_FALSE(d.header_ok);
  EXPECT_STREQ(d.why, "short header");
  auto m = b;
  m[0] ^= 1;
  EXPECT_STREQ(decode(m).why, "magic");
  m = b;
  reinterpret_cast<Header*>(m.data())->version = (kVersionMajor + 1) << 8;
  EXPECT_EQ(decode(m).status, Status::kNotSupported);
  // The length field must equal the packet's length: a lying length is refused.
  m = b;
  reinterpret_cast<Header*>(m.data())->length += 4;
  EXPECT_STREQ(decode(m).why, "length");
  m = b;
  m.push_back(0);
  EXPECT_STREQ(decode(m).why, "length");
  // A newer minor version is accepted (types it adds are refused one by one).
  m = b;
  reinterpret_cast<Header*>(m.data())->version = kVersionMajor << 8 | 0xff;
  EXPECT_EQ(decode(m).status, Status::kSuccess);
}

TEST(DaemonProtocol, TypesAndSizesMustMatch) {
  HelloReq h = hello();
  h.h.type = 99;
  Decoded d = decode(bytes_of(&h, sizeof h));
  EXPECT_EQ(d.status, Status::kInvalidDeviceRequest);
  EXPECT_TRUE(d.header_ok);
  // A reply type sent as a request.
  h = hello();
  h.h.type |= static_cast<uint16_t>(MsgType::kReplyFlag);
  EXPECT_EQ(decode(bytes_of(&h, sizeof h)).status, Status::kInvalidDeviceRequest);
  // A ListAdapters header on a Hello-sized packet.
  h = hello();
  h.h.type = static_cast<uint16_t>(MsgType::kListAdapters);
  EXPECT_STREQ(decode(bytes_of(&h, sizeof h)).why, "size for its type");
}

TEST(DaemonProtocol, NamesAndReservedFieldsAreChecked) {
  auto with_name = [](const char* raw, size_t n) {
    HelloReq h = hello();
    std::memset(h.name, 0, sizeof h.name);
    std::memcpy(h.name, raw, n);
    return decode(bytes_of(&h, sizeof h));
  };
  EXPECT_STREQ(with_name("", 0).why, "hello.name");       // empty
  EXPECT_STREQ(with_name("a b", 3).why, "hello.name");    // space
  EXPECT_STREQ(with_name("a\0b", 3).why, "hello.name");   // bytes after the NUL
  EXPECT_STREQ(with_name("x\xff", 2).why, "hello.name");  // not [A-Za-z0-9_.-]
  const std::string full(kNameSize, 'a');                 // no NUL inside the field
  EXPECT_STREQ(with_name(full.data(), kNameSize).why, "hello.name");
  EXPECT_EQ(with_name("ib_write_bw.1-x", 15).status, Status::kSuccess);
  HelloReq h = hello();
  h.reserved = 1;
  EXPECT_STREQ(decode(bytes_of(&h, sizeof h)).why, "hello.reserved");
  ListClientsReq lc{};
  lc.h = make_header(MsgType::kListClients, sizeof lc, 3);
  lc.reserved = 5;
  EXPECT_STREQ(decode(bytes_of(&lc, sizeof lc)).why, "list_clients.reserved");
  char n[kNameSize];
  EXPECT_FALSE(set_name(n, std::string(kNameSize, 'a')));
  EXPECT_TRUE(set_name(n, std::string(kNameSize - 1, 'a')));
}

TEST(DaemonProtocol, ObjectRequestsAreCheckedFieldByField) {
  AllocSharedReq a{make_header(MsgType::kAllocShared, sizeof a, 1), 0};
  EXPECT_STREQ(decode(bytes_of(&a, sizeof a)).why, "alloc_shared.length");
  a.length = kMaxSharedBytes + 1;
  EXPECT_STREQ(decode(bytes_of(&a, sizeof a)).why, "alloc_shared.length");
  a.length = 4096;
  EXPECT_EQ(decode(bytes_of(&a, sizeof a)).status, Status::kSuccess);
  ModifyQpReq m{};
  m.h = make_header(MsgType::kModifyQp, sizeof m, 2);
  m.attr.state = static_cast<uint8_t>(QpState::kRts);
  EXPECT_EQ(decode(bytes_of(&m, sizeof m)).status, Status::kSuccess);
  m.attr.selective_repeat = 2;  // a bool that is neither
  EXPECT_STREQ(decode(bytes_of(&m, sizeof m)).why, "modify_qp flag byte");
  m.attr.selective_repeat = 0;
  m.attr.state = static_cast<uint8_t>(QpState::kErr) + 1;
  EXPECT_STREQ(decode(bytes_of(&m, sizeof m)).why, "modify_qp.state");
  RegisterMrReq r{};
  r.h = make_header(MsgType::kRegisterMr, sizeof r, 3);
  r.address = UINT64_MAX - 10;
  r.length = 100;  // wraps past 2^64
  EXPECT_STREQ(decode(bytes_of(&r, sizeof r)).why, "register_mr range");
  ShareMemoryReq sm{make_header(MsgType::kShareMemory, sizeof sm, 5), 0x7e0000000100, 8192};
  EXPECT_STREQ(decode(bytes_of(&sm, sizeof sm)).why, "share_memory range");  // not page-aligned
  sm.address = 0x7e0000000000;
  sm.length = 100;
  EXPECT_STREQ(decode(bytes_of(&sm, sizeof sm)).why, "share_memory range");  // not whole pages
  sm.length = 8192;
  EXPECT_EQ(decode(bytes_of(&sm, sizeof sm)).status, Status::kSuccess);
  DestroyReq d{make_header(MsgType::kDestroy, sizeof d, 4), 7, 1};
  EXPECT_STREQ(decode(bytes_of(&d, sizeof d)).why, "destroy.reserved");
  // Windows and fast-register MRs (since 1.7).
  CreateMwReq mw{make_header(MsgType::kCreateMw, sizeof mw, 6), 1, 0};
  EXPECT_EQ(decode(bytes_of(&mw, sizeof mw)).status, Status::kSuccess);
  mw.reserved = 1;
  EXPECT_STREQ(decode(bytes_of(&mw, sizeof mw)).why, "create_mw.reserved");
  InitFrmrReq fr{make_header(MsgType::kInitFrmr, sizeof fr, 7), 1, 8, 1, 0};
  EXPECT_EQ(decode(bytes_of(&fr, sizeof fr)).status, Status::kSuccess);
  fr.remote_access = 2;  // a bool that is neither
  EXPECT_STREQ(decode(bytes_of(&fr, sizeof fr)).why, "init_frmr flag word");
  fr.remote_access = 0;
  fr.pages = 0;
  EXPECT_STREQ(decode(bytes_of(&fr, sizeof fr)).why, "init_frmr.pages");
  ModerateCqReq mc{make_header(MsgType::kModerateCq, sizeof mc, 8), 1, 100, 4, 0};
  EXPECT_EQ(decode(bytes_of(&mc, sizeof mc)).status, Status::kSuccess);
  mc.reserved = 3;
  EXPECT_STREQ(decode(bytes_of(&mc, sizeof mc)).why, "moderate_cq.reserved");
  ResizeCqReq rc{make_header(MsgType::kResizeCq, sizeof rc, 9), 1, 0};
  EXPECT_STREQ(decode(bytes_of(&rc, sizeof rc)).why, "resize_cq.depth");
  rc.depth = 64;
  EXPECT_EQ(decode(bytes_of(&rc, sizeof rc)).status, Status::kSuccess);
  // A success may come as the bare head where the type's reply is only that.
  ReplyHead ok = make_reply(d.h, sizeof ok, Status::kSuccess);
  ReplyHead out{};
  EXPECT_EQ(decode_reply(bytes_of(&ok, sizeof ok), MsgType::kDestroy, 4, &out, sizeof out).status,
            Status::kSuccess);
}

// CM calls (since 1.6): the op, the flag, both addresses and the bytes past the private data.
TEST(DaemonProtocol, CmCallsAreCheckedFieldByField) {
  CmCallReq c{};
  c.h = make_header(MsgType::kCmCall, sizeof c, 6);
  c.op = static_cast<uint32_t>(CmOp::kConnect);
  c.dst.family = AF_INET;
  c.dst.port = 7471;
  c.data_length = 3;
  std::memcpy(c.data, "abc", 3);
  EXPECT_EQ(decode(bytes_of(&c, sizeof c)).status, Status::kSuccess);
  CmCallReq bad = c;
  bad.op = 0;
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call.op");
  bad.op = static_cast<uint32_t>(CmOp::kLast) + 1;
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call.op");
  bad = c;
  bad.flag = 2;
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call.flag");
  bad = c;
  bad.dst.addr[4] = 1;  // IPv4 uses 4 of the 16 bytes
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call address");
  bad = c;
  bad.src.port = 1;  // no address, but a port
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call address");
  bad = c;
  bad.src.family = AF_UNIX;
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call address");
  bad = c;
  bad.data_length = kCmDataMax + 1;
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call.data_length");
  bad = c;
  bad.data[3] = 'd';  // past the length
  EXPECT_STREQ(decode(bytes_of(&bad, sizeof bad)).why, "cm_call.data");
  CmCreateReq cr{make_header(MsgType::kCmCreate, sizeof cr, 7), 1, 2};
  EXPECT_STREQ(decode(bytes_of(&cr, sizeof cr)).why, "cm_create.kind");
  CmEventsReq ev{make_header(MsgType::kCmEvents, sizeof ev, 8), 1, 1};
  EXPECT_STREQ(decode(bytes_of(&ev, sizeof ev)).why, "cm_events.reserved");
  // The client checks the events it is given: a count beyond the array, an unknown kind.
  auto rep = std::make_unique<CmEventsRep>();
  rep->r = make_reply(ev.h, sizeof *rep, Status::kSuccess);
  rep->count = kCmEventsPerReply + 1;
  auto out = std::make_unique<CmEventsRep>();
  EXPECT_STREQ(
      decode_reply(bytes_of(rep.get(), sizeof *rep), MsgType::kCmEvents, 8, out.get(), sizeof *out)
          .why,
      "reply field");
  rep->count = 1;
  rep->events[0].kind = static_cast<uint32_t>(CmEventKind::kLast) + 1;
  EXPECT_STREQ(
      decode_reply(bytes_of(rep.get(), sizeof *rep), MsgType::kCmEvents, 8, out.get(), sizeof *out)
          .why,
      "reply field");
  rep->events[0].kind = static_cast<uint32_t>(CmEventKind::kDisconnected);
  EXPECT_EQ(
      decode_reply(bytes_of(rep.get(), sizeof *rep), MsgType::kCmEvents, 8, out.get(), sizeof *out)
          .status,
      Status::kSuccess);
}

TEST(DaemonProtocol, RepliesAreCheckedByTheClient) {
  HelloReq req = hello();
  HelloRep rep{};
  rep.r = make_reply(req.h, sizeof rep, Status::kSuccess);
  rep.adapters = 2;
  HelloRep out{};
  EXPECT_EQ(decode_reply(bytes_of(&rep, sizeof rep), MsgType::kHello, 7, &out, sizeof out).status,
            Status::kSuccess);
  EXPECT_EQ(out.adapters, 2u);
  // Another request's reply (seq), or another type's.
  EXPECT_STREQ(decode_reply(bytes_of(&rep, sizeof rep), MsgType::kHello, 8, &out, sizeof out).why,
               "reply seq");
  EXPECT_STREQ(
      decode_reply(bytes_of(&rep, sizeof rep), MsgType::kListAdapters, 7, &out, sizeof out).why,
      "reply type");
  // A failure may come as the bare reply head; a success may not.
  ReplyHead bare = make_reply(req.h, sizeof bare, Status::kAccessDenied);
  ASSERT_EQ(decode_reply(bytes_of(&bare, sizeof bare), MsgType::kHello, 7, &out, sizeof out).status,
            Status::kSuccess);
  EXPECT_EQ(static_cast<Status>(out.r.status), Status::kAccessDenied);
  bare = make_reply(req.h, sizeof bare, Status::kSuccess);
  EXPECT_STREQ(decode_reply(bytes_of(&bare, sizeof bare), MsgType::kHello, 7, &out, sizeof out).why,
               "short success reply");
  // A count beyond the array is refused before the client walks it.
  auto la = std::make_unique<ListAdaptersRep>();
  ListAdaptersReq lreq{make_header(MsgType::kListAdapters, sizeof lreq, 9)};
  la->r = make_reply(lreq.h, sizeof *la, Status::kSuccess);
  la->count = kMaxAdapters + 1;
  auto lout = std::make_unique<ListAdaptersRep>();
  EXPECT_STREQ(decode_reply(bytes_of(la.get(), sizeof *la), MsgType::kListAdapters, 9, lout.get(),
                            sizeof *lout)
                   .why,
               "reply field");
}

}  // namespace
}  // namespace urnic::ipc

namespace urnic::daemon {
namespace {

TEST(DaemonConfig, TheDefaultIsTheInMemoryPair) {
  Config c;
  std::string err;
  ASSERT_TRUE(finish(&c, &err)) << err;
  ASSERT_EQ(c.ports.size(), 2u);
  EXPECT_EQ(c.ports[0].name, "urnic0");
  EXPECT_EQ(c.ports[0].ring, "urnic:a");
  EXPECT_EQ(c.ports[1].ring, "urnic:b");
  EXPECT_EQ(c.socket, "/run/urnic/urnicd.sock");
}

TEST(DaemonConfig, AFileAndItsOverrides) {
  const std::string path = ::testing::TempDir() + "urnicd_test.conf";
  {
    std::ofstream f(path);
    f << "# a comment\n[daemon]\nsocket = /tmp/x.sock   # trailing comment\nsocket_mode = 0600\n"
         "engines = 2\nlcores = 0-2\n\n[port eth0]\ndevargs = net_af_packet0,iface=veth0\n"
         "ipv4 = 10.1.2.3\nipv6 = fd00::1\nmac = 02:aa:bb:cc:dd:ee\nengines = 2\n";
  }
  Config c;
  std::string err;
  ASSERT_TRUE(load_file(path, &c, &err)) << err;
  ASSERT_TRUE(apply_override(&c, "port.eth0.ipv4=10.9.9.9", &err)) << err;
  ASSERT_TRUE(apply_override(&c, "daemon.max_clients=3", &err)) << err;
  ASSERT_TRUE(finish(&c, &err)) << err;
  EXPECT_EQ(c.socket, "/tmp/x.sock");
  EXPECT_EQ(c.socket_mode, 0600u);
  EXPECT_EQ(c.max_clients, 3u);
  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_EQ(c.ports[0].ipv4, 0x0A090909u);
  ASSERT_TRUE(c.ports[0].ipv6.has_value());
  EXPECT_EQ((*c.ports[0].ipv6)[0], 0xfd);
  ASSERT_TRUE(c.ports[0].mac.has_value());
  EXPECT_EQ((*c.ports[0].mac)[5], 0xee);
  EXPECT_EQ(port_identity(c.ports[0], 4026531840u), "net4026531840-iface-veth0");
}

TEST(DaemonConfig, SubnetsAndRoutes) {
  Config c;
  std::string err;
  ASSERT_TRUE(apply_override(&c, "port.eth0.devargs=net_af_packet0,iface=veth0", &err)) << err;
  ASSERT_TRUE(apply_override(&c, "port.eth0.ipv4=10.1.2.3/24", &err)) << err;
  ASSERT_TRUE(apply_override(&c, "port.eth0.ipv6=fd00::1/64", &err)) << err;
  // Each route line adds one.
  ASSERT_TRUE(apply_override(&c, "port.eth0.route=10.9.0.0/16 via 10.1.2.1", &err)) << err;
  ASSERT_TRUE(apply_override(&c, "port.eth0.route=default via 10.1.2.254", &err)) << err;
  ASSERT_TRUE(finish(&c, &err)) << err;
  ASSERT_EQ(c.ports.size(), 1u);
  const PortConfig& p = c.ports[0];
  EXPECT_EQ(p.ipv4, 0x0A010203u);
  EXPECT_EQ(p.ipv4_len, 24);
  EXPECT_EQ(p.ipv6_len, 64);
  ASSERT_EQ(p.routes.size(), 2u);
  EXPECT_EQ(to_string(p.routes[0]), "10.9.0.0/16 via 10.1.2.1");
  EXPECT_EQ(to_string(p.routes[1]), "default via 10.1.2.254");
  Config bad;
  EXPECT_FALSE(apply_override(&bad, "port.eth0.route=10.9.0.1/16 via 10.1.2.1", &err));
  EXPECT_NE(err.find("bits set beyond its prefix"), std::string::npos) << err;
  EXPECT_FALSE(apply_override(&bad, "port.eth0.ipv4=10.1.2.3/33", &err));
  EXPECT_NE(err.find("ipv4"), std::string::npos) << err;
}

TEST(DaemonConfig, BadValuesNameTheirKey) {
  struct Case {
    const char* set;
    const char* says;
  } cases[] = {
      {"daemon.engines=9", "engines = '9'"},
      {"daemon.engines=-1", "engines = '-1'"},
      {"daemon.socket_mode=0999", "socket_mode"},
      {"daemon.memory=lots", "memory"},
      {"daemon.idle_sleep_us=100001", "idle_sleep_us"},
      {"daemon.colour=blue", "unknown key 'colour'"},
      {"port.p0.ipv4=10.0.0.256", "ipv4"},
      {"port.p0.ipv4=0.0.0.0", "ipv4"},
      {"port.p0.mac=02:00:00:00:00", "mac"},
      {"port.p0.ring=x:c", "ring"},
      {"port.bad name.ipv4=1.2.3.4", "a name is"},
      {"nosection=1", "want SECTION.KEY=VALUE"},
      {"other.key=1", "unknown section"},
      {"daemon.max_clients=99999999999999999999", "max_clients"},
  };
  for (const Case& k : cases) {
    Config c;
    std::string err;
    EXPECT_FALSE(apply_override(&c, k.set, &err)) << k.set;
    EXPECT_NE(err.find(k.says), std::string::npos) << k.set << ": " << err;
  }
}

TEST(DaemonConfig, PortsAreCheckedAcrossKeys) {
  auto finish_with = [](std::vector<std::string> sets) {
    Config c;
    std::string err;
    for (const auto& s : sets) EXPECT_TRUE(apply_override(&c, s, &err)) << s << ": " << err;
    return finish(&c, &err) ? std::string() : err;
  };
  EXPECT_NE(finish_with({"port.p.ipv4=1.2.3.4"}).find("exactly one of"), std::string::npos);
  EXPECT_NE(finish_with({"port.p.ipv4=1.2.3.4", "port.p.ring=r:a", "port.p.pci=0000:01:00.0"})
                .find("exactly one of"),
            std::string::npos);
  EXPECT_NE(finish_with({"port.p.ipv4=1.2.3.4", "port.p.ring=r:a"}).find("no other side"),
            std::string::npos);
  EXPECT_NE(finish_with({"port.p.ring=r:a", "port.q.ring=r:b", "port.q.ipv4=1.2.3.4"})
                .find("give ipv4 or ipv6"),
            std::string::npos);
  // device_nodes: empty or an absolute directory.
  EXPECT_EQ(finish_with({"port.p.ring=r:a", "port.p.ipv4=1.2.3.4", "port.q.ring=r:b",
                         "port.q.ipv4=1.2.3.5", "daemon.device_nodes=/dev/infiniband"}),
            "");
  {
    Config c;
    std::string err;
    EXPECT_FALSE(apply_override(&c, "daemon.device_nodes=dev/infiniband", &err));
    EXPECT_FALSE(apply_override(&c, "daemon.device_nodes=/dev/../etc", &err));
    EXPECT_TRUE(apply_override(&c, "daemon.device_nodes=", &err)) << err;
  }
  // Only an AF_XDP port may go without an address (it takes its interface's).
  EXPECT_NE(finish_with({"port.p.devargs=net_af_packet0,iface=v0"}).find("give ipv4 or ipv6"),
            std::string::npos);
  EXPECT_EQ(finish_with({"port.p.devargs=net_af_xdp0,iface=v0"}), "");
  EXPECT_NE(finish_with({"port.p.devargs=net_tap0", "port.p.ipv4=1.2.3.4", "port.p.engines=2"})
                .find("the daemon runs 1"),
            std::string::npos);
  EXPECT_EQ(finish_with({"port.p.ring=r:a", "port.p.ipv4=1.2.3.4", "port.q.ring=r:b",
                         "port.q.ipv4=1.2.3.5"}),
            "");
  PortConfig pci;
  pci.pci = "03:00.0";
  EXPECT_EQ(port_identity(pci, 1), "pci-0000:03:00.0");
  PortConfig ring;
  ring.ring = "r:a";
  EXPECT_EQ(port_identity(ring, 1), "");
}

}  // namespace
}  // namespace urnic::daemon
