// urnic's XDP program for net_af_xdp ports (issue 39): urnic shares the interface with the kernel.
// Frames that are urnic's go to its AF_XDP socket on the receiving queue; every other frame goes
// on to the kernel untouched (XDP_PASS), so SSH, storage and ping keep working on the same NIC.
//
// urnic's frames are:
//  - RoCEv2: UDP destination port 4791 (IBTA Annex A17.2.3) to one of urnic's addresses;
//  - ARP (RFC 826) and IPv6 neighbour solicitations / advertisements (RFC 4861 §4.3, §4.4)
//    whose target is an address urnic answers for itself (not the kernel's own address: for
//    those the kernel answers and urnic asks the kernel's neighbour table).
// Both lists live in `urnic_addrs`, filled by urnic when its port opens (control/xdp.cc); an
// empty map sends everything to the kernel. DPDK's net_af_xdp loads this object (devargs
// xdp_prog=) and puts its socket for queue q at index q of `xsks_map`.
//
// Built by the project with clang -target bpf (CMake: bpf/CMakeLists.txt).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#define ROCEV2_UDP_PORT 4791
#define ETH_P_8021Q_ 0x8100
#define ETH_P_8021AD_ 0x88A8
#define ARP_OP_REQUEST 1
#define ARP_OP_REPLY 2
#define ICMPV6_NS 135
#define ICMPV6_NA 136

// Flags of an address in urnic_addrs (control/xdp.h keeps the same values).
#define URNIC_ADDR_ROCE 1u   // RoCEv2 to this address is urnic's
#define URNIC_ADDR_NEIGH 2u  // ARP / ND for this address is urnic's (it answers them itself)

// IPv4 addresses as IPv4-mapped IPv6 (::ffff:a.b.c.d), as their RoCEv2 GIDs are.
struct urnic_addr {
  __u8 a[16];
};

struct {
  __uint(type, BPF_MAP_TYPE_XSKMAP);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u32);
} xsks_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 64);
  __type(key, struct urnic_addr);
  __type(value, __u32);
} urnic_addrs SEC(".maps");

// Frame counts, per CPU (control/xdp.h: XdpCounter).
enum { CNT_ROCE = 0, CNT_NEIGH, CNT_PASS, CNT_NO_SOCKET, CNT_MAX };
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, CNT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} urnic_stats SEC(".maps");

static __always_inline void count(__u32 which) {
  __u64* v = bpf_map_lookup_elem(&urnic_stats, &which);
  if (v) *v += 1;
}

static __always_inline __u32 addr_flags(const struct urnic_addr* k) {
  __u32* f = bpf_map_lookup_elem(&urnic_addrs, k);
  return f ? *f : 0;
}

static __always_inline void map_v4(struct urnic_addr* k, const void* v4) {
  __builtin_memset(k->a, 0, 10);
  k->a[10] = 0xff;
  k->a[11] = 0xff;
  __builtin_memcpy(&k->a[12], v4, 4);
}

// To urnic's socket on this queue; a queue without one (urnic opened fewer queues than the
// interface has) leaves the frame to the kernel, counted.
static __always_inline int to_urnic(struct xdp_md* ctx, __u32 which) {
  __u32 q = ctx->rx_queue_index;
  if (!bpf_map_lookup_elem(&xsks_map, &q)) {
    count(CNT_NO_SOCKET);
    return XDP_PASS;
  }
  count(which);
  return bpf_redirect_map(&xsks_map, q, XDP_PASS);
}

static __always_inline int pass(void) {
  count(CNT_PASS);
  return XDP_PASS;
}

// The ARP body for Ethernet / IPv4 (RFC 826): the target protocol address at byte 24.
struct arp_eth_ipv4 {
  __be16 htype, ptype;
  __u8 hlen, plen;
  __be16 op;
  __u8 sha[6], spa[4], tha[6], tpa[4];
} __attribute__((packed));

SEC("xdp")
int urnic_xdp(struct xdp_md* ctx) {
  void* data = (void*)(long)ctx->data;
  void* end = (void*)(long)ctx->data_end;
  struct ethhdr* eth = data;
  if ((void*)(eth + 1) > end) return pass();
  __u16 proto = eth->h_proto;
  void* l3 = eth + 1;
  if (proto == bpf_htons(ETH_P_8021Q_) || proto == bpf_htons(ETH_P_8021AD_)) {
    // One VLAN tag: its TCI, then the inner type.
    if (l3 + 4 > end) return pass();
    proto = *(__be16*)(l3 + 2);
    l3 += 4;
  }
  struct urnic_addr k;
  if (proto == bpf_htons(ETH_P_IP)) {
    struct iphdr* ip = l3;
    if ((void*)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP) return pass();
    // Fragments are not RoCEv2 (the DF bit is set on every RoCEv2 packet): the kernel's.
    if (ip->frag_off & bpf_htons(0x3fff)) return pass();
    struct udphdr* udp = (void*)(ip + 1);
    if ((void*)(udp + 1) > end || udp->dest != bpf_htons(ROCEV2_UDP_PORT)) return pass();
    map_v4(&k, &ip->daddr);
    return (addr_flags(&k) & URNIC_ADDR_ROCE) ? to_urnic(ctx, CNT_ROCE) : pass();
  }
  if (proto == bpf_htons(ETH_P_IPV6)) {
    struct ipv6hdr* ip6 = l3;
    if ((void*)(ip6 + 1) > end) return pass();
    if (ip6->nexthdr == IPPROTO_UDP) {
      struct udphdr* udp = (void*)(ip6 + 1);
      if ((void*)(udp + 1) > end || udp->dest != bpf_htons(ROCEV2_UDP_PORT)) return pass();
      __builtin_memcpy(k.a, &ip6->daddr, 16);
      return (addr_flags(&k) & URNIC_ADDR_ROCE) ? to_urnic(ctx, CNT_ROCE) : pass();
    }
    if (ip6->nexthdr == IPPROTO_ICMPV6) {
      // ICMPv6 type, code, checksum, 4 bytes (reserved / flags), then the target address.
      __u8* icmp = (void*)(ip6 + 1);
      if ((void*)(icmp + 24) > end || (icmp[0] != ICMPV6_NS && icmp[0] != ICMPV6_NA))
        return pass();
      __builtin_memcpy(k.a, icmp + 8, 16);
      return (addr_flags(&k) & URNIC_ADDR_NEIGH) ? to_urnic(ctx, CNT_NEIGH) : pass();
    }
    return pass();
  }
  if (proto == bpf_htons(ETH_P_ARP)) {
    struct arp_eth_ipv4* arp = l3;
    if ((void*)(arp + 1) > end || arp->ptype != bpf_htons(ETH_P_IP) || arp->plen != 4)
      return pass();
    if (arp->op != bpf_htons(ARP_OP_REQUEST) && arp->op != bpf_htons(ARP_OP_REPLY))
      return pass();
    map_v4(&k, arp->tpa);
    return (addr_flags(&k) & URNIC_ADDR_NEIGH) ? to_urnic(ctx, CNT_NEIGH) : pass();
  }
  return pass();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
