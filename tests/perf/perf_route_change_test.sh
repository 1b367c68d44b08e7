#!/usr/bin/env bash
# ctest label "perf": a route change during a run is followed (issue 39). urnic on AF_XDP beside
# the kernel, on the kernel's addresses, so its routes and neighbours are the kernel's; two
# routers between the two subnets on bridged segments:
#
#   urnicA<pid> roce0 --[brA]-- R1 (.254) --[brB]-- roce1 urnicB<pid>
#     198.18.10.2/24     \------ R2 (.253) ------/     198.18.20.2/24
#   oob0 ==veth== oob1: perftest's TCP exchange, not routed
#
# A 64 KiB write_bw runs for 6 s through R1; after 2 s both hosts' default routes move to R2 and
# R1's links go down. The run must PASS (every completion successful, the last WRITE's data
# verified), R2 must have forwarded frames and R1's links must be down: urnic followed the
# kernel's new next hop (each adapter re-resolves its connected QPs' next hops every 100 ms and
# hands a changed MAC to the engine). Without following, the QPs keep R1's MAC and fail with
# their retries exhausted.
#
# Usage: perf_route_change_test.sh path/to/urnic-perf [path/to/urnic_xdp.o]. Exits 77 (ctest
# SKIP_RETURN_CODE) without root, namespaces, bridges, AF_XDP or the XDP program.
set -u
perf=${1:?usage: perf_route_change_test.sh path/to/urnic-perf [path/to/urnic_xdp.o]}
prog=${2:-}
SKIP=77
skip() {
  echo "SKIP: $*"
  exit $SKIP
}
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "the ip tool (iproute2) is not installed"
[ -x "$perf" ] || {
  echo "FAIL: $perf is not built"
  exit 1
}
if [ -n "$prog" ] && [ -z "${URNIC_XDP_PROG:-}" ] && [ ! -e "$prog" ]; then
  skip "urnic's XDP program was not built ($prog)"
fi
python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
  skip "the kernel has no AF_XDP sockets"

A=urnicA$$ B=urnicB$$ S=urnicS$$ R1=urnicR1$$ R2=urnicR2$$
tmp=$(mktemp -d)
cleanup() {
  for ns in "$A" "$B" "$S" "$R1" "$R2"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for ns in "$A" "$B" "$S" "$R1" "$R2"; do
  ip netns add "$ns" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
done
ip -n "$S" link add brA type bridge 2>"$tmp/err" || skip "no bridge: $(cat "$tmp/err")"
ip -n "$S" link add brB type bridge || exit 1
set -e
ip link add roce0 netns "$A" type veth peer name a0 netns "$S"
ip link add roce1 netns "$B" type veth peer name b0 netns "$S"
ip link add r1a netns "$R1" type veth peer name a1 netns "$S"
ip link add r1b netns "$R1" type veth peer name b1 netns "$S"
ip link add r2a netns "$R2" type veth peer name a2 netns "$S"
ip link add r2b netns "$R2" type veth peer name b2 netns "$S"
ip link add oob0 netns "$A" type veth peer name oob1 netns "$B"
# MTU 3000: AF_XDP on veth takes frames of one page at most.
for p in a0 a1 a2; do ip -n "$S" link set "$p" mtu 3000 master brA up; done
for p in b0 b1 b2; do ip -n "$S" link set "$p" mtu 3000 master brB up; done
ip -n "$S" link set brA up
ip -n "$S" link set brB up
ip -n "$A" link set roce0 mtu 3000 up
ip -n "$B" link set roce1 mtu 3000 up
for r in "$R1 r1a r1b 254" "$R2 r2a r2b 253"; do
  set -- $r
  ip -n "$1" link set "$2" mtu 3000 up
  ip -n "$1" link set "$3" mtu 3000 up
  ip -n "$1" addr add "198.18.10.$4/24" dev "$2"
  ip -n "$1" addr add "198.18.20.$4/24" dev "$3"
  ip netns exec "$1" sysctl -qw net.ipv4.ip_forward=1
done
ip -n "$A" addr add 198.18.10.2/24 dev roce0
ip -n "$B" addr add 198.18.20.2/24 dev roce1
ip -n "$A" route add default via 198.18.10.254
ip -n "$B" route add default via 198.18.20.254
ip -n "$A" addr add 198.18.0.1/30 dev oob0
ip -n "$B" addr add 198.18.0.2/30 dev oob1
ip -n "$A" link set oob0 up
ip -n "$B" link set oob1 up
set +e

common=(write_bw --no-progress --idle-yield=64 -D 6)
timeout 90 ip netns exec "$A" "$perf" "${common[@]}" --vdev=net_af_xdp0,iface=roce0 --lcores=0 \
  >"$tmp/srv" 2>&1 &
spid=$!
timeout 90 ip netns exec "$B" "$perf" "${common[@]}" --vdev=net_af_xdp0,iface=roce1 --lcores=1 \
  --connect-retry=30 198.18.0.1 >"$tmp/cli" 2>&1 &
cpid=$!
# The change once traffic flows through R1 (its forwarded-frame count moves), at most 20 s on.
fwd() { ip netns exec "$1" awk '{ n += $1 } END { print n + 0 }' /sys/class/net/"$2"/statistics/tx_packets; }
for _ in $(seq 200); do
  [ "$(fwd "$R1" r1b)" -gt 1000 ] && break
  sleep 0.1  # polls the router's counter; not the synchronisation of the run itself
done
r1_before=$(fwd "$R1" r1b)
ip -n "$A" route replace default via 198.18.10.253
ip -n "$B" route replace default via 198.18.20.253
ip -n "$R1" link set r1a down
ip -n "$R1" link set r1b down
wait "$cpid"
crc=$?
wait "$spid"
src=$?
r2=$(fwd "$R2" r2b)
why=""
[ "$r1_before" -gt 1000 ] || why="traffic never crossed R1 ($r1_before frames)"
[ $crc -eq 0 ] || why="$why client exit $crc"
[ $src -eq 0 ] || why="$why server exit $src"
grep -q 'result: PASS' "$tmp/cli" || why="$why the client did not PASS"
grep -q 'result: PASS' "$tmp/srv" || why="$why the server did not PASS"
[ "$r2" -gt 1000 ] || why="$why R2 forwarded only $r2 frames: the route change was not followed"
if [ -z "$why" ]; then
  echo "ok   route change followed: R1 forwarded $r1_before frames before, R2 $r2 after; $(grep -E 'retransmitted' "$tmp/cli")"
  exit 0
fi
echo "FAIL route change:$why"
echo "---- server"
cat "$tmp/srv"
echo "---- client"
cat "$tmp/cli"
exit 1
