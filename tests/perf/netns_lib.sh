# Shared by the two-namespace perf tests (perf_veth_test.sh, perf_rdma_cm_test.sh): two network
# namespaces joined by a veth pair for RoCEv2.
#
#   $A: roce0 ==veth== roce1 :$B   MTU 4200, no IPv6 (no router solicitations or DAD frames
#                                  reach the RoCE port), no kernel addresses: 198.18.1.1 / .2
#                                  are urnic's own, answered by its ARP
#
# Source it, then: netns_need PATH... (exits 77 without root or iproute2, 1 when a PATH is not
# built), netns_pair_setup (exits 77 when namespaces or veth are not available). Cleanup runs on
# exit: the namespaces, $tmp, and the processes listed in $bg.

SKIP=77
A=urnicA$$
B=urnicB$$
tmp=$(mktemp -d)
bg=()

skip() {
  echo "SKIP: $*"
  exit $SKIP
}

netns_cleanup() {
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null; done
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$tmp"
}
trap netns_cleanup EXIT

# netns_need PATH...: root, iproute2, and each PATH an executable (a test of unbuilt tools fails).
netns_need() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces and veth pairs"
  command -v ip >/dev/null || skip "the ip tool (iproute2) is not installed"
  for b in "$@"; do
    [ -x "$b" ] || {
      echo "FAIL: $b is not built"
      exit 1
    }
  done
}

netns_pair_setup() {
  ip netns add "$A" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
  ip netns add "$B" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
  ip link add roce0 netns "$A" type veth peer name roce1 netns "$B" 2>"$tmp/err" ||
    skip "cannot create a veth pair: $(cat "$tmp/err")"
  local ns
  for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
  done
  ip -n "$A" link set roce0 mtu 4200 up && ip -n "$B" link set roce1 mtu 4200 up || exit 1
}
