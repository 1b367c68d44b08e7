// IB CM MAD codec (control/cm/mad.*, cma.*): the ud_qp1_cm_req known-answer vector decoded field
// by field (the values tshark shows, rocev2.md §4.3), MADs captured from Linux rxe running rping
// decoded and re-encoded byte for byte, a round trip of every message type with every field at a
// distinctive value, bit positions checked against the IBTA tables, and malformed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "control/cm/cma.h"
#include "control/cm/mad.h"
#include "dataplane/wire/frame.h"
#include "test_util.h"

namespace urnic::ctl::cm {
namespace {

Gid v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return Gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, a, b, c, d};
}

// A captured MAD: its non-zero prefix (hex), zero-padded to 256 bytes.
std::vector<uint8_t> mad_from_hex(const std::string& hex) {
  auto v = test::from_hex(hex);
  v.resize(kMadSize, 0);
  return v;
}

TEST(CmMad, DecodesTheUdQp1CmReqVectorFieldByField) {
  auto frame = test::read_vector("ud_qp1_cm_req.hex");
  wire::ParsedFrame f;
  ASSERT_EQ(wire::parse(frame.data(), frame.size(), f), wire::ParseError::kOk);
  ASSERT_EQ(f.payload().size(), kMadSize);
  Message m;
  ASSERT_EQ(decode(f.payload(), &m), MadError::kOk);
  EXPECT_EQ(m.tid, 0x12345678u);
  EXPECT_EQ(m.attr_mod, 0u);
  ASSERT_EQ(attr_id(m), AttrId::kReq);
  const Req& r = std::get<Req>(m.body);
  EXPECT_EQ(r.local_comm_id, 0x0A0B0C0Du);
  EXPECT_EQ(r.service_id, 0x0000000001064853u);
  EXPECT_TRUE(is_ip_service(r.service_id));
  EXPECT_EQ(ip_protocol_of(r.service_id), 0x06);
  EXPECT_EQ(port_of(r.service_id), 18515);
  EXPECT_EQ(r.local_ca_guid, 0x0200000000000001u);
  EXPECT_EQ(r.local_qkey, 0u);
  EXPECT_EQ(r.local_qpn, 0x11u);
  EXPECT_EQ(r.responder_resources, 1);
  EXPECT_EQ(r.local_eecn, 0u);
  EXPECT_EQ(r.initiator_depth, 1);
  EXPECT_EQ(r.remote_eecn, 0u);
  EXPECT_EQ(r.remote_cm_response_timeout, 20);
  EXPECT_EQ(r.transport_service_type, 0);  // RC
  EXPECT_TRUE(r.e2e_flow_control);
  EXPECT_EQ(r.starting_psn, 0x123456u);
  EXPECT_EQ(r.local_cm_response_timeout, 20);
  EXPECT_EQ(r.retry_count, 7);
  EXPECT_EQ(r.pkey, 0xFFFF);
  EXPECT_EQ(r.path_mtu, 3);
  EXPECT_EQ(mtu_bytes(r.path_mtu), 1024u);
  EXPECT_FALSE(r.rdc_exists);
  EXPECT_EQ(r.rnr_retry_count, 7);
  EXPECT_EQ(r.max_cm_retries, 15);
  EXPECT_FALSE(r.srq);
  EXPECT_EQ(r.extended_transport_type, 0);
  EXPECT_EQ(r.primary.local_lid, 0xFFFF);
  EXPECT_EQ(r.primary.remote_lid, 0xFFFF);
  EXPECT_EQ(r.primary.local_gid, v4(192, 0, 2, 1));
  EXPECT_EQ(r.primary.remote_gid, v4(192, 0, 2, 2));
  EXPECT_EQ(r.primary.flow_label, 0u);
  EXPECT_EQ(r.primary.packet_rate, 0);
  EXPECT_EQ(r.primary.traffic_class, 0);
  EXPECT_EQ(r.primary.hop_limit, 64);
  EXPECT_EQ(r.primary.sl, 0);
  EXPECT_FALSE(r.primary.subnet_local);
  EXPECT_EQ(r.primary.local_ack_timeout, 18);
  EXPECT_EQ(r.alternate, (Path{0, 0}));
  // The private data starts with the IP CM header.
  CmaHdr h;
  ASSERT_TRUE(
      decode(std::span<const uint8_t, kCmaHdrSize>(r.private_data.data(), kCmaHdrSize), &h));
  EXPECT_EQ(h.ip_version, 4);
  EXPECT_EQ(h.src_port, 0xC350);
  EXPECT_EQ(h.src, v4(192, 0, 2, 1));
  EXPECT_EQ(h.dst, v4(192, 0, 2, 2));
  EXPECT_TRUE(std::all_of(r.private_data.begin() + kCmaHdrSize, r.private_data.end(),
                          [](uint8_t b) { return b == 0; }));
  // Re-encoding gives the vector's MAD back, byte for byte.
  const auto again = encode(m);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), f.payload().begin()));
}

// CM MADs of `rping -C 3` between two Linux 6.1 rxe guests (shared/captures/rdmacm_rping_c3.pcap,
// frames 3, 4, 5, 42, 43): REQ 10.99.0.2 -> 10.99.0.3, REP, RTU, DREQ from the client, DREP.
const char* const kRpingReq =
    "010702030000000000000002accf968c00100000000000008c96cfac000000000000000001061c06505400fffe99"
    "0002000000000000000000003a0100000001000000a0a44cf6a7ffff37f0ffffffff00000000000000000000ffff"
    "0a63000200000000000000000000ffff0a6300037231c00000400098000000000000000000000000000000000000"
    "00000000000000000000000000000000000000000000000000000040be2a0000000000000000000000000a630002"
    "0000000000000000000000000a630003";
const char* const kRpingRep =
    "010702030000000000000002accf968c0013000000000000cd4763718c96cfac0000000000003a00000000000613a9"
    "00010178e0505400fffe990003";
const char* const kRpingRtu = "010702030000000000000002accf968c00140000000000008c96cfaccd476371";
const char* const kRpingDreq =
    "010702030000000000000002accf968c00150000000000008c96cfaccd47637100003a";
const char* const kRpingDrep = "010702030000000000000002accf968c0016000000000000cd4763718c96cfac";

TEST(CmMad, DecodesAndReencodesRxeRpingHandshake) {
  const std::vector<uint8_t> mads[] = {mad_from_hex(kRpingReq), mad_from_hex(kRpingRep),
                                       mad_from_hex(kRpingRtu), mad_from_hex(kRpingDreq),
                                       mad_from_hex(kRpingDrep)};
  Message m[5];
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(decode(mads[i], &m[i]), MadError::kOk) << i;
    EXPECT_EQ(m[i].tid, 0x00000002accf968cu) << i;
    const auto again = encode(m[i]);
    EXPECT_TRUE(std::equal(again.begin(), again.end(), mads[i].begin())) << i;
  }
  const Req& req = std::get<Req>(m[0].body);
  EXPECT_EQ(req.local_comm_id, 0x8c96cfacu);
  EXPECT_EQ(port_of(req.service_id), 7174);  // rping's default port 0x1c06
  EXPECT_EQ(req.local_ca_guid, 0x505400fffe990002u);
  EXPECT_EQ(req.local_qpn, 0x3au);
  EXPECT_EQ(req.starting_psn, 0xa44cf6u);
  EXPECT_EQ(req.retry_count, 7);
  EXPECT_EQ(req.rnr_retry_count, 7);
  EXPECT_EQ(req.path_mtu, 3);
  EXPECT_EQ(req.transport_service_type, 0);  // RC
  EXPECT_FALSE(req.e2e_flow_control);  // rxe peers: no end-to-end credits (cm::kE2eFlowControl)
  // Flow label: 20 bits at the top of the word at 88, packet rate the low 6 bits of byte 91
  // (Linux CM_REQ_PRIMARY_FLOW_LABEL / _PACKET_RATE). tshark 4.0 shows this word shifted
  // ("flow label 0x00723, packet rate 0x32"); the bytes are 72 31 c0 00.
  EXPECT_EQ(req.primary.flow_label, 0x7231cu);
  EXPECT_EQ(req.primary.packet_rate, 0);
  EXPECT_EQ(req.primary.local_ack_timeout, 0x13);
  EXPECT_EQ(req.primary.local_gid, v4(10, 99, 0, 2));
  CmaHdr h;
  ASSERT_TRUE(
      decode(std::span<const uint8_t, kCmaHdrSize>(req.private_data.data(), kCmaHdrSize), &h));
  EXPECT_EQ(h.src_port, 0xbe2a);
  EXPECT_EQ(h.dst, v4(10, 99, 0, 3));

  const Rep& rep = std::get<Rep>(m[1].body);
  EXPECT_EQ(rep.local_comm_id, 0xcd476371u);
  EXPECT_EQ(rep.remote_comm_id, req.local_comm_id);
  EXPECT_EQ(rep.local_qpn, 0x3au);
  EXPECT_EQ(rep.starting_psn, 0x0613a9u);
  EXPECT_EQ(rep.responder_resources, 1);
  EXPECT_EQ(rep.initiator_depth, 1);
  EXPECT_EQ(rep.target_ack_delay, 15);
  EXPECT_EQ(rep.failover_accepted, 0);
  EXPECT_FALSE(rep.e2e_flow_control);
  EXPECT_EQ(rep.rnr_retry_count, 7);
  EXPECT_EQ(rep.local_ca_guid, 0x505400fffe990003u);

  const Rtu& rtu = std::get<Rtu>(m[2].body);
  EXPECT_EQ(rtu.local_comm_id, req.local_comm_id);
  EXPECT_EQ(rtu.remote_comm_id, rep.local_comm_id);
  const Dreq& dreq = std::get<Dreq>(m[3].body);
  EXPECT_EQ(dreq.remote_qpn, 0x3au);
  EXPECT_EQ(dreq.remote_comm_id, rep.local_comm_id);
  const Drep& drep = std::get<Drep>(m[4].body);
  EXPECT_EQ(drep.local_comm_id, rep.local_comm_id);
  EXPECT_EQ(drep.remote_comm_id, req.local_comm_id);
}

// Every field at a distinctive value, including the maximum of each bit field, survives a round
// trip; the encoded bytes put each field where the IBTA table says.
TEST(CmMad, ReqRoundTripAndLayout) {
  Req r;
  r.local_comm_id = 0xA1B2C3D4;
  r.service_id = service_id_for(0xBEEF);
  r.local_ca_guid = 0x0123456789ABCDEF;
  r.local_qkey = 0x11223344;
  r.local_qpn = 0xFFFFFE;
  r.responder_resources = 0xF1;
  r.local_eecn = 0xABCDEF;
  r.initiator_depth = 0xF2;
  r.remote_eecn = 0x123456;
  r.remote_cm_response_timeout = 31;
  r.transport_service_type = 1;
  r.e2e_flow_control = true;
  r.starting_psn = 0xFEDCBA;
  r.local_cm_response_timeout = 17;
  r.retry_count = 5;
  r.pkey = 0x7FFF;
  r.path_mtu = 5;
  r.rdc_exists = true;
  r.rnr_retry_count = 6;
  r.max_cm_retries = 15;
  r.srq = true;
  r.extended_transport_type = 7;
  r.primary =
      Path{0x1234, 0x5678, v4(1, 2, 3, 4), v4(5, 6, 7, 8), 0xFFFFF, 63, 0xB8, 255, 15, true, 31};
  r.alternate = Path{1, 2, v4(9, 9, 9, 9), v4(8, 8, 8, 8), 0x12345, 7, 1, 2, 3, false, 4};
  for (size_t i = 0; i < r.private_data.size(); ++i) r.private_data[i] = static_cast<uint8_t>(i);
  const Message m{0x1122334455667788, 0xCAFEF00D, r};
  const auto b = encode(m);
  Message d;
  ASSERT_EQ(decode(b, &d), MadError::kOk);
  EXPECT_EQ(d, m);
  // MAD header.
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[1], 0x07);
  EXPECT_EQ(b[2], 2);
  EXPECT_EQ(b[3], 0x03);
  EXPECT_EQ(b[8], 0x11);
  EXPECT_EQ(b[15], 0x88);
  EXPECT_EQ(b[16], 0x00);
  EXPECT_EQ(b[17], 0x10);
  EXPECT_EQ(b[20], 0xCA);
  const uint8_t* p = b.data() + kMadHdrSize;
  EXPECT_EQ(p[0], 0xA1);
  EXPECT_EQ(p[8 + 5], 0x06);  // service ID protocol byte
  EXPECT_EQ(p[16], 0x01);
  // LocalQPN(24) | ResponderResources(8)
  EXPECT_EQ(p[32], 0xFF);
  EXPECT_EQ(p[34], 0xFE);
  EXPECT_EQ(p[35], 0xF1);
  EXPECT_EQ(p[39], 0xF2);
  // RemoteEECN(24) | RemoteCMResponseTimeout(5) | TST(2) | E2EFC(1): 31<<3 | 1<<1 | 1
  EXPECT_EQ(p[43], 0xFB);
  // StartingPSN(24) | LocalCMResponseTimeout(5) | RetryCount(3): 17<<3 | 5
  EXPECT_EQ(p[44], 0xFE);
  EXPECT_EQ(p[47], 0x8D);
  EXPECT_EQ(p[48], 0x7F);
  EXPECT_EQ(p[50], 0x5E);  // MTU 5 | RDC 1 | RNR 6
  EXPECT_EQ(p[51], 0xFF);  // MaxCMRetries 15 | SRQ 1 | ExtTT 7
  EXPECT_EQ(p[52], 0x12);
  EXPECT_EQ(p[56 + 15], 4);  // primary local GID
  EXPECT_EQ(p[72 + 15], 8);  // primary remote GID
  EXPECT_EQ(p[88], 0xFF);    // flow label 0xFFFFF << 12 | rate 63
  EXPECT_EQ(p[90], 0xF0);
  EXPECT_EQ(p[91], 0x3F);
  EXPECT_EQ(p[92], 0xB8);
  EXPECT_EQ(p[93], 255);
  EXPECT_EQ(p[94], 0xF8);  // SL 15 | SubnetLocal 1
  EXPECT_EQ(p[95], 0xF8);  // LocalAckTimeout 31
  EXPECT_EQ(p[96], 0x00);
  EXPECT_EQ(p[97], 0x01);  // alternate local LID
  EXPECT_EQ(p[139], 4 << 3);
  EXPECT_EQ(p[140], 0);
  EXPECT_EQ(p[231], 91);
}

TEST(CmMad, RepRoundTripAndLayout) {
  Rep r;
  r.local_comm_id = 1;
  r.remote_comm_id = 2;
  r.local_qkey = 3;
  r.local_qpn = 0xABCDEF;
  r.local_eecn = 0x123456;
  r.starting_psn = 0xFFFFFF;
  r.responder_resources = 9;
  r.initiator_depth = 10;
  r.target_ack_delay = 31;
  r.failover_accepted = 2;
  r.e2e_flow_control = true;
  r.rnr_retry_count = 7;
  r.srq = true;
  r.local_ca_guid = 0x505400fffe990003;
  r.private_data.fill(0x5A);
  const Message m{7, 0, r};
  const auto b = encode(m);
  Message d;
  ASSERT_EQ(decode(b, &d), MadError::kOk);
  EXPECT_EQ(d, m);
  const uint8_t* p = b.data() + kMadHdrSize;
  EXPECT_EQ(b[17], 0x13);
  EXPECT_EQ(p[12], 0xAB);
  EXPECT_EQ(p[14], 0xEF);
  EXPECT_EQ(p[15], 0x00);
  EXPECT_EQ(p[16], 0x12);
  EXPECT_EQ(p[22], 0xFF);
  EXPECT_EQ(p[23], 0x00);
  EXPECT_EQ(p[24], 9);
  EXPECT_EQ(p[25], 10);
  EXPECT_EQ(p[26], 0xFD);  // 31<<3 | 2<<1 | 1
  EXPECT_EQ(p[27], 0xF0);  // 7<<5 | 1<<4
  EXPECT_EQ(p[28], 0x50);
  EXPECT_EQ(p[36], 0x5A);
  EXPECT_EQ(p[231], 0x5A);
}

TEST(CmMad, RejMraRtuDreqDrepRoundTripAndLayout) {
  Rej rej;
  rej.local_comm_id = 0x01020304;
  rej.remote_comm_id = 0x05060708;
  rej.message_rejected = MsgResponse::kOther;
  rej.ari_length = 72;
  rej.reason = RejReason::kStaleConn;
  rej.ari.fill(0xAA);
  rej.private_data.fill(0xBB);
  Mra mra;
  mra.local_comm_id = 9;
  mra.remote_comm_id = 10;
  mra.message_mraed = MsgResponse::kRep;
  mra.service_timeout = 24;
  mra.private_data.fill(0xCC);
  Rtu rtu{11, 12, {}};
  rtu.private_data.fill(0xDD);
  Dreq dreq{13, 14, 0xFEDCBA, {}};
  dreq.private_data.fill(0xEE);
  Drep drep{15, 16, {}};
  drep.private_data.fill(0x11);
  for (const Message& m : {Message{1, 0, rej}, Message{2, 0, mra}, Message{3, 0, rtu},
                           Message{4, 0, dreq}, Message{5, 0, drep}}) {
    const auto b = encode(m);
    Message d;
    ASSERT_EQ(decode(b, &d), MadError::kOk);
    EXPECT_EQ(d, m) << to_string(attr_id(m));
    const uint8_t* p = b.data() + kMadHdrSize;
    switch (attr_id(m)) {
      case AttrId::kRej:
        EXPECT_EQ(b[17], 0x12);
        EXPECT_EQ(p[8], 0x80);  // MessageRejected 2
        EXPECT_EQ(p[9], 72 << 1);
        EXPECT_EQ(p[11], 10);
        EXPECT_EQ(p[12], 0xAA);
        EXPECT_EQ(p[83], 0xAA);
        EXPECT_EQ(p[84], 0xBB);
        break;
      case AttrId::kMra:
        EXPECT_EQ(b[17], 0x11);
        EXPECT_EQ(p[8], 0x40);  // MessageMRAed 1 (REP)
        EXPECT_EQ(p[9], 24 << 3);
        EXPECT_EQ(p[10], 0xCC);
        break;
      case AttrId::kRtu:
        EXPECT_EQ(b[17], 0x14);
        EXPECT_EQ(p[3], 11);
        EXPECT_EQ(p[7], 12);
        EXPECT_EQ(p[8], 0xDD);
        break;
      case AttrId::kDreq:
        EXPECT_EQ(b[17], 0x15);
        EXPECT_EQ(p[8], 0xFE);
        EXPECT_EQ(p[10], 0xBA);
        EXPECT_EQ(p[11], 0x00);
        EXPECT_EQ(p[12], 0xEE);
        break;
      case AttrId::kDrep:
        EXPECT_EQ(b[17], 0x16);
        EXPECT_EQ(p[8], 0x11);
        break;
      default:
        ADD_FAILURE();
    }
  }
}

// Writes `bytes` at `off` of `b` (big-endian values spelled out byte by byte).
void put_at(std::vector<uint8_t>& b, size_t off, std::initializer_list<uint8_t> bytes) {
  std::copy(bytes.begin(), bytes.end(), b.begin() + static_cast<std::ptrdiff_t>(off));
}

// A SIDR_REQ as udaddy's rdma_cm sends it, built by hand from the IBTA §12.11.1 field offsets
// (the MAD header at 0, the message at 24): decoded field by field, and re-encoded to the same
// 256 bytes.
TEST(CmMad, SidrReqKnownAnswer) {
  std::vector<uint8_t> b(kMadSize, 0);
  put_at(b, 0, {0x01, 0x07, 0x02, 0x03});                               // base, CM class, v2, Send
  put_at(b, 8, {0x00, 0x00, 0x00, 0x07, 0x12, 0x34, 0x56, 0x78});       // TID
  put_at(b, 16, {0x00, 0x17});                                          // attribute ID SIDR_REQ
  put_at(b, 24 + 0, {0xDE, 0xAD, 0xBE, 0xEF});                          // RequestID
  put_at(b, 24 + 4, {0xFF, 0xFF});                                      // PartitionKey
  put_at(b, 24 + 8, {0x00, 0x00, 0x00, 0x00, 0x01, 0x11, 0x1D, 0x2F});  // ServiceID: UDP, 7471
  // PrivateData at 16: rdma_cm's IP CM header (v0.0, IPv4, source port 0xC350, 12 zero bytes
  // before each address), then the consumer's bytes.
  put_at(b, 24 + 16, {0x00, 0x40, 0xC3, 0x50});
  put_at(b, 24 + 16 + 16, {192, 0, 2, 1});
  put_at(b, 24 + 16 + 32, {192, 0, 2, 2});
  put_at(b, 24 + 16 + 36, {'u', 'd', 'a', 'd', 'd', 'y'});
  b[255] = 0xA5;  // the last private data byte

  Message m;
  ASSERT_EQ(decode(b, &m), MadError::kOk);
  EXPECT_EQ(m.tid, 0x0000000712345678u);
  ASSERT_EQ(attr_id(m), AttrId::kSidrReq);
  const SidrReq& r = std::get<SidrReq>(m.body);
  EXPECT_EQ(r.request_id, 0xDEADBEEFu);
  EXPECT_EQ(r.pkey, 0xFFFF);
  EXPECT_EQ(r.service_id, service_id_for(7471, kPsUdp));
  EXPECT_EQ(ip_protocol_of(r.service_id), kIpProtoUdp);
  EXPECT_EQ(port_of(r.service_id), 7471);
  CmaHdr h;
  ASSERT_TRUE(
      decode(std::span<const uint8_t, kCmaHdrSize>(r.private_data.data(), kCmaHdrSize), &h));
  EXPECT_EQ(h.ip_version, 4);
  EXPECT_EQ(h.src_port, 0xC350);
  EXPECT_EQ(h.src, v4(192, 0, 2, 1));
  EXPECT_EQ(h.dst, v4(192, 0, 2, 2));
  EXPECT_EQ(
      std::string(r.private_data.begin() + kCmaHdrSize, r.private_data.begin() + kCmaHdrSize + 6),
      "udaddy");
  EXPECT_EQ(r.private_data[kSidrReqPrivateData - 1], 0xA5);
  EXPECT_EQ(kMaxSidrReqUserData, 180u);

  // The builder, from host fields: the same bytes.
  SidrReq w;
  w.request_id = 0xDEADBEEF;
  w.service_id = service_id_for(7471, kPsUdp);
  encode(CmaHdr{kCmaVersion, 4, 0xC350, v4(192, 0, 2, 1), v4(192, 0, 2, 2)},
         std::span<uint8_t, kCmaHdrSize>(w.private_data.data(), kCmaHdrSize));
  const char user[] = "udaddy";
  std::copy(user, user + 6, w.private_data.begin() + kCmaHdrSize);
  w.private_data[kSidrReqPrivateData - 1] = 0xA5;
  const auto again = encode(Message{0x0000000712345678u, 0, w});
  EXPECT_TRUE(std::equal(again.begin(), again.end(), b.begin()));
}

// SIDR_REP (IBTA §12.11.2): every field at a distinctive value survives a round trip and sits at
// its offset (QPN in the top 24 bits of the word at 8, as Linux's CM_SIDR_REP_QPN).
TEST(CmMad, SidrRepRoundTripAndLayout) {
  SidrRep r;
  r.request_id = 0x01020304;
  r.status = SidrStatus::kRejected;
  r.info_length = 72;
  r.qpn = 0xABCDEF;
  r.service_id = service_id_for(0x1D2F, kPsUdp);
  r.qkey = kRdmaUdpQkey;
  r.info.fill(0x77);
  for (size_t i = 0; i < r.private_data.size(); ++i) r.private_data[i] = static_cast<uint8_t>(i);
  const Message m{9, 0, r};
  const auto b = encode(m);
  Message d;
  ASSERT_EQ(decode(b, &d), MadError::kOk);
  EXPECT_EQ(d, m);
  EXPECT_EQ(b[16], 0x00);
  EXPECT_EQ(b[17], 0x18);
  const uint8_t* p = b.data() + kMadHdrSize;
  EXPECT_EQ(p[0], 0x01);
  EXPECT_EQ(p[3], 0x04);
  EXPECT_EQ(p[4], 2);   // status
  EXPECT_EQ(p[5], 72);  // additional information length
  EXPECT_EQ(p[6], 0);
  EXPECT_EQ(p[7], 0);
  EXPECT_EQ(p[8], 0xAB);
  EXPECT_EQ(p[9], 0xCD);
  EXPECT_EQ(p[10], 0xEF);
  EXPECT_EQ(p[11], 0x00);
  EXPECT_EQ(p[16], 0x01);  // service ID: 00 00 00 00 01 11 1D 2F
  EXPECT_EQ(p[17], 0x11);
  EXPECT_EQ(p[19], 0x2F);
  EXPECT_EQ(p[20], 0x01);  // Q_Key 0x01234567
  EXPECT_EQ(p[23], 0x67);
  EXPECT_EQ(p[24], 0x77);
  EXPECT_EQ(p[95], 0x77);
  EXPECT_EQ(p[96], 0);
  EXPECT_EQ(p[231], 135);
  // An unknown status value decodes as it is (the receiver treats it as a refusal).
  auto odd = b;
  odd[kMadHdrSize + 4] = 9;
  ASSERT_EQ(decode(odd, &d), MadError::kOk);
  EXPECT_EQ(static_cast<uint8_t>(std::get<SidrRep>(d.body).status), 9);
}

TEST(CmMad, MalformedMadsAreRejectedWithAReason) {
  auto good = encode(Message{1, 0, Rtu{}});
  Message m;
  ASSERT_EQ(decode(good, &m), MadError::kOk);
  EXPECT_EQ(decode(std::span<const uint8_t>(good.data(), 255), &m), MadError::kTooShort);
  auto bad = good;
  bad[0] = 2;
  EXPECT_EQ(decode(bad, &m), MadError::kBaseVersion);
  bad = good;
  bad[1] = 0x04;  // performance management
  EXPECT_EQ(decode(bad, &m), MadError::kNotCm);
  bad = good;
  bad[2] = 1;
  EXPECT_EQ(decode(bad, &m), MadError::kClassVersion);
  bad = good;
  bad[3] = 0x01;  // Get
  EXPECT_EQ(decode(bad, &m), MadError::kMethod);
  bad = good;
  bad[3] = 0x83;  // response bit
  EXPECT_EQ(decode(bad, &m), MadError::kMethod);
  for (uint16_t a : {0x0001, 0x0019, 0x001A, 0x0000, 0x001B, 0xFFFF}) {
    bad = good;
    bad[16] = static_cast<uint8_t>(a >> 8);
    bad[17] = static_cast<uint8_t>(a);
    EXPECT_EQ(decode(bad, &m), MadError::kUnsupportedAttr) << a;
  }
}

TEST(CmMad, IpCmHeaderIpv4AndIpv6) {
  CmaHdr h4{kCmaVersion, 4, 0xC350, v4(192, 0, 2, 1), v4(192, 0, 2, 2)};
  std::array<uint8_t, kCmaHdrSize> b{};
  encode(h4, b);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x40);
  EXPECT_EQ(b[2], 0xC3);
  EXPECT_EQ(b[3], 0x50);
  // IPv4: 12 zero bytes, not ::ffff:, then the address.
  for (int i = 4; i < 16; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(b[16], 192);
  EXPECT_EQ(b[19], 1);
  EXPECT_EQ(b[32], 192);
  EXPECT_EQ(b[35], 2);
  CmaHdr d;
  ASSERT_TRUE(decode(b, &d));
  EXPECT_EQ(d, h4);

  const Gid a6{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const Gid b6{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 0, 2};
  CmaHdr h6{kCmaVersion, 6, 1, a6, b6};
  encode(h6, b);
  EXPECT_EQ(b[1], 0x60);
  ASSERT_TRUE(decode(b, &d));
  EXPECT_EQ(d, h6);

  b[0] = 0x10;  // version 1.0: rdma_cm refuses it
  EXPECT_FALSE(decode(b, &d));
  b[0] = 0;
  b[1] = 0x50;
  EXPECT_FALSE(decode(b, &d));
}

TEST(CmMad, ServiceIdsAndUnits) {
  EXPECT_EQ(service_id_for(7174), 0x0000000001061c06u);
  EXPECT_EQ(service_id_for(7471, kPsUdp), 0x0000000001111d2fu);
  EXPECT_TRUE(is_ip_service(0x0000000001064853u));
  EXPECT_FALSE(is_ip_service(0x0000000002064853u));
  EXPECT_FALSE(is_ip_service(0x1000000001064853u));
  EXPECT_EQ(port_of(0x0000000001064853u), 18515);
  EXPECT_EQ(mtu_code(1024), 3);
  EXPECT_EQ(mtu_code(4096), 5);
  EXPECT_EQ(mtu_code(1500), 0);
  EXPECT_EQ(mtu_bytes(1), 256u);
  EXPECT_EQ(mtu_bytes(0), 0u);
  EXPECT_EQ(mtu_bytes(6), 0u);
  // rdma_cm's CM response timeout 20: 4.096 us * 2^20 = 4.29 s.
  EXPECT_EQ(cm_timeout_ns(20), 4294967296ull);
  EXPECT_EQ(cm_timeout_ns(0), 4096ull);
}

}  // namespace
}  // namespace urnic::ctl::cm
