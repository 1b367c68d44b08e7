// Routed RoCEv2 (issue 39): the route syntax (urnic/route.h) and the adapter's route table
// (control/route.h), which picks the neighbour a destination's frames go to.
#include <gtest/gtest.h>

#include "control/route.h"
#include "urnic/route.h"

namespace urnic {
namespace {

using Addr = std::array<uint8_t, 16>;

Addr addr(const char* text) {
  Addr a{};
  uint8_t len = 0;
  bool v4 = false;
  EXPECT_EQ(parse_address(text, &a, &len, &v4), Status::kSuccess) << text;
  return a;
}

Route route(const char* text) {
  Route r;
  std::string why;
  EXPECT_EQ(parse_route(text, &r, &why), Status::kSuccess) << text << ": " << why;
  return r;
}

TEST(RouteSyntax, ParsesWhatIpRouteWrites) {
  Route r = route("198.51.100.0/24 via 192.0.2.1");
  EXPECT_EQ(r.destination, addr("198.51.100.0"));
  EXPECT_EQ(r.prefix_len, 24);
  EXPECT_EQ(r.gateway, addr("192.0.2.1"));
  EXPECT_EQ(to_string(r), "198.51.100.0/24 via 192.0.2.1");

  r = route("default via 192.0.2.1");
  EXPECT_EQ(r.prefix_len, 0);
  EXPECT_EQ(r.destination, addr("0.0.0.0"));  // IPv4-mapped, so that it matches IPv4 only
  EXPECT_EQ(to_string(r), "default via 192.0.2.1");

  r = route("default via fe80::1");
  EXPECT_EQ(r.destination, Addr{});
  EXPECT_EQ(r.gateway, addr("fe80::1"));

  r = route("2001:db8:1::/48 via 2001:db8::1");
  EXPECT_EQ(r.prefix_len, 48);
  r = route("  203.0.113.7   via  192.0.2.1 ");  // a host route, blanks as the shell leaves them
  EXPECT_EQ(r.prefix_len, 32);
  r = route("203.0.113.0/24");  // on link: no gateway
  EXPECT_EQ(r.gateway, Addr{});
}

TEST(RouteSyntax, RefusesWhatItCannotUse) {
  const char* bad[] = {
      "",                                   // nothing
      "default",                            // a default route needs a gateway
      "198.51.100.0/24 via",                // no gateway after via
      "198.51.100.0/24 through 192.0.2.1",  // not `via`
      "198.51.100.0/33 via 192.0.2.1",      // length beyond 32
      "2001:db8::/129",                     // beyond 128
      "198.51.100.0/2x via 192.0.2.1",      // not a number
      "198.51.100.0/ via 192.0.2.1",        // no number
      "198.51.100.1/24 via 192.0.2.1",      // host bits set
      "198.51.300.0/24 via 192.0.2.1",      // not an address
      "198.51.100.0/24 via 2001:db8::1",    // gateway of the other family
      "2001:db8::/32 via 192.0.2.1",        // likewise
      "default via 0.0.0.0",                // the unspecified address as gateway
      "198.51.100.0/24 via 192.0.2.1/32",   // a gateway is an address, not a prefix
      "198.51.100.0/24 via 192.0.2.1 x",    // trailing words
  };
  for (const char* t : bad) {
    Route r;
    std::string why;
    EXPECT_EQ(parse_route(t, &r, &why), Status::kInvalidParameter) << "'" << t << "'";
    EXPECT_FALSE(why.empty()) << "'" << t << "'";
  }
  EXPECT_EQ(parse_route("default via 192.0.2.1", nullptr), Status::kInvalidParameter);
}

constexpr uint32_t kIp = 0xC0000205;  // 192.0.2.5

// The one MAC parser of urnic-perf, urnicd and the examples (issue 43): six bytes of one or two
// hex digits separated by ':', nothing else (sscanf's %x in the examples took "0x1ff" and
// ignored trailing text; urnicd's took only two-digit bytes).
TEST(MacSyntax, SixBytesOfOneOrTwoHexDigits) {
  std::array<uint8_t, 6> m{};
  ASSERT_EQ(parse_mac("02:00:5e:0A:ff:01", &m), Status::kSuccess);
  EXPECT_EQ(m, (std::array<uint8_t, 6>{0x02, 0x00, 0x5e, 0x0a, 0xff, 0x01}));
  ASSERT_EQ(parse_mac("2:0:0:0:0:1", &m), Status::kSuccess);
  EXPECT_EQ(m, (std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1}));
  const std::array<uint8_t, 6> before = m;
  for (const char* bad : {"", "02:00:00:00:00", "02:00:00:00:00:01:02", "02:00:00:00:00:1ff",
                          "02:00:00:00:00:01x", "0x2:00:00:00:00:01", "02-00-00-00-00-01",
                          "02:00::00:00:01", " 02:00:00:00:00:01", "02:00:00:00:00:0g"}) {
    EXPECT_EQ(parse_mac(bad, &m), Status::kInvalidParameter) << bad;
    EXPECT_EQ(m, before) << "a refused MAC left *mac changed: " << bad;
  }
}

TEST(RouteTable, WithoutRoutingEveryDestinationIsOnLink) {
  const ctl::RouteTable t(kIp, 0, std::nullopt, 0, {});
  for (const char* d : {"192.0.2.9", "198.51.100.1", "2001:db8::5"})
    EXPECT_EQ(t.next_hop(addr(d)), addr(d)) << d;
}

TEST(RouteTable, LongestPrefixWinsAndTheSubnetIsOnLink) {
  const ctl::RouteTable t(kIp, 24, std::nullopt, 0,
                          {route("default via 192.0.2.1"), route("198.51.100.0/24 via 192.0.2.2"),
                           route("198.51.100.128/25 via 192.0.2.3")});
  EXPECT_EQ(t.next_hop(addr("192.0.2.77")), addr("192.0.2.77"));  // own subnet
  EXPECT_EQ(t.next_hop(addr("198.51.100.7")), addr("192.0.2.2"));
  EXPECT_EQ(t.next_hop(addr("198.51.100.200")), addr("192.0.2.3"));
  EXPECT_EQ(t.next_hop(addr("203.0.113.1")), addr("192.0.2.1"));  // default
  // IPv6 has no routing configured: on link, whatever IPv4 has.
  EXPECT_EQ(t.next_hop(addr("2001:db8::5")), addr("2001:db8::5"));
}

TEST(RouteTable, ARoutedFamilyWithoutAMatchIsUnreachable) {
  const ctl::RouteTable t(kIp, 24, std::nullopt, 0, {route("198.51.100.0/24 via 192.0.2.2")});
  EXPECT_EQ(t.next_hop(addr("203.0.113.1")), std::nullopt);
  EXPECT_EQ(t.next_hop(addr("198.51.100.1")), addr("192.0.2.2"));
}

TEST(RouteTable, IPv6RoutesAndLinkLocal) {
  const std::optional<ctl::Gid> v6 = addr("2001:db8:a::5");
  const ctl::RouteTable t(0, 0, v6, 64, {route("default via 2001:db8:a::1")});
  EXPECT_EQ(t.next_hop(addr("2001:db8:a::9")), addr("2001:db8:a::9"));
  EXPECT_EQ(t.next_hop(addr("2001:db8:b::9")), addr("2001:db8:a::1"));
  EXPECT_EQ(t.next_hop(addr("fe80::9")), addr("fe80::9"));  // link-local: never routed
  // The IPv6 default route does not catch IPv4 destinations.
  EXPECT_EQ(t.next_hop(addr("198.51.100.1")), addr("198.51.100.1"));
}

TEST(RouteTable, CheckRefusesAGatewayThatIsNoNeighbour) {
  std::string why;
  EXPECT_EQ(
      ctl::RouteTable::check(kIp, 24, std::nullopt, 0, {route("default via 192.0.2.1")}, &why),
      Status::kSuccess);
  EXPECT_EQ(
      ctl::RouteTable::check(kIp, 24, std::nullopt, 0, {route("default via 192.0.3.1")}, &why),
      Status::kInvalidParameter);
  EXPECT_NE(why.find("not in the adapter's subnet"), std::string::npos) << why;
  // Without a subnet the gateway cannot be checked and is taken as given.
  EXPECT_EQ(ctl::RouteTable::check(kIp, 0, std::nullopt, 0, {route("default via 192.0.3.1")}, &why),
            Status::kSuccess);
  EXPECT_EQ(ctl::RouteTable::check(kIp, 33, std::nullopt, 0, {}, &why), Status::kInvalidParameter);
  Route odd = route("default via 192.0.2.1");
  odd.gateway = addr("2001:db8::1");  // built by hand, not parsed
  EXPECT_EQ(ctl::RouteTable::check(kIp, 24, std::nullopt, 0, {odd}, &why),
            Status::kInvalidParameter);
  odd = route("default via 192.0.2.1");
  odd.prefix_len = 40;
  EXPECT_EQ(ctl::RouteTable::check(kIp, 24, std::nullopt, 0, {odd}, &why),
            Status::kInvalidParameter);
}

}  // namespace
}  // namespace urnic
