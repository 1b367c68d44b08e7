#!/usr/bin/env bash
# ctest label "perf": routed RoCEv2 (issue 39). urnic-perf server and client in two subnets with
# a Linux router (a namespace with IP forwarding) between them, each side reaching the other
# through a static route to its gateway.
#
#   urnicA<pid>: roce0 ==veth== ra [urnicR<pid>: forwarding] rb ==veth== roce1 :urnicB<pid>
#     urnic 198.18.10.1/24         198.18.10.254   198.18.20.254          urnic 198.18.20.1/24
#     route default via 198.18.10.254               route default via 198.18.20.254
#   oob0 ==veth== oob1 (198.18.0.1/30 - .2): perftest's TCP exchange, not routed
#     kernel 198.18.10.2/24 on roce0, 198.18.20.2/24 on roce1, default routes via the router
#
# Every test type runs briefly and must PASS (completions all successful, data verified), and
# the router must have forwarded the frames both ways (its interfaces' packet counts): first
# over net_af_packet with urnic's own addresses and static routes (--route), then over AF_XDP
# on the kernel's addresses with the kernel's routes and neighbours (no --ip, no --route; skipped
# without AF_XDP or urnic's XDP program). Then the failures a user meets: a side without a route to the peer's subnet fails with the reason, in
# bounded time; a gateway outside the adapter's subnet and a malformed route are refused at
# start with the reason.
#
# Usage: perf_route_test.sh path/to/urnic-perf [path/to/urnic_xdp.o]. Exits 77 (ctest
# SKIP_RETURN_CODE) without root or without network namespaces / veth.
set -u
perf=${1:?usage: perf_route_test.sh path/to/urnic-perf [path/to/urnic_xdp.o]}
prog=${2:-}
SKIP=77

skip() {
  echo "SKIP: $*"
  exit $SKIP
}
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces and veth pairs"
command -v ip >/dev/null || skip "the ip tool (iproute2) is not installed"
[ -x "$perf" ] || {
  echo "FAIL: $perf is not built"
  exit 1
}

A=urnicA$$
B=urnicB$$
R=urnicR$$
tmp=$(mktemp -d)
cleanup() {
  for ns in "$A" "$B" "$R"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

for ns in "$A" "$B" "$R"; do
  ip netns add "$ns" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
done
ip link add roce0 netns "$A" type veth peer name ra netns "$R" 2>"$tmp/err" ||
  skip "cannot create a veth pair: $(cat "$tmp/err")"
ip link add roce1 netns "$B" type veth peer name rb netns "$R" || exit 1
ip link add oob0 netns "$A" type veth peer name oob1 netns "$B" || exit 1
# MTU 3000: AF_XDP on veth takes frames of one page at most.
ip -n "$A" link set roce0 mtu 3000 up && ip -n "$B" link set roce1 mtu 3000 up || exit 1
ip -n "$R" link set ra mtu 3000 up && ip -n "$R" link set rb mtu 3000 up || exit 1
ip -n "$A" addr add 198.18.10.2/24 dev roce0 && ip -n "$B" addr add 198.18.20.2/24 dev roce1 || exit 1
ip -n "$A" route add default via 198.18.10.254 && ip -n "$B" route add default via 198.18.20.254 ||
  exit 1
ip -n "$R" addr add 198.18.10.254/24 dev ra && ip -n "$R" addr add 198.18.20.254/24 dev rb || exit 1
ip netns exec "$R" sysctl -qw net.ipv4.ip_forward=1 || exit 1
ip -n "$A" addr add 198.18.0.1/30 dev oob0 && ip -n "$B" addr add 198.18.0.2/30 dev oob1 || exit 1
ip -n "$A" link set oob0 up && ip -n "$B" link set oob1 up || exit 1

# forwarded: packets the router sent out of either interface (counted by the kernel).
forwarded() {
  ip netns exec "$R" awk '{ n += $1 } END { print n }' \
    /sys/class/net/ra/statistics/tx_packets /sys/class/net/rb/statistics/tx_packets
}

passed=0
failed=0
ROUTE_A="default via 198.18.10.254"
ROUTE_B="default via 198.18.20.254"
XDP=0
# pair NAME TEST SERVER_ROUTE_ARGS... -- CLIENT_ROUTE_ARGS... -- COMMON ARGS: runs both sides;
# leaves exit codes in $src / $crc and the outputs in $tmp/NAME.{srv,cli}.
pair() {
  local name=$1 t=$2
  shift 2
  local sargs=() cargs=()
  while [ "$1" != "--" ]; do sargs+=("$1"); shift; done
  shift
  while [ "$1" != "--" ]; do cargs+=("$1"); shift; done
  shift
  local common=(--no-progress --idle-yield=64 "$@")
  local dev_a=(--vdev=net_af_packet0,iface=roce0 --ip=198.18.10.1/24)
  local dev_b=(--vdev=net_af_packet0,iface=roce1 --ip=198.18.20.1/24)
  if [ "$XDP" = 1 ]; then
    dev_a=(--vdev=net_af_xdp0,iface=roce0)
    dev_b=(--vdev=net_af_xdp0,iface=roce1)
  fi
  timeout 90 ip netns exec "$A" "$perf" "$t" "${dev_a[@]}" "${sargs[@]}" --lcores=0 \
    "${common[@]}" >"$tmp/$name.srv" 2>&1 &
  local spid=$!
  timeout 90 ip netns exec "$B" "$perf" "$t" "${dev_b[@]}" "${cargs[@]}" --lcores=1 \
    --connect-retry=30 "${common[@]}" 198.18.0.1 >"$tmp/$name.cli" 2>&1
  crc=$?
  wait "$spid"
  src=$?
}
report() {
  local name=$1 why=$2
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    printf 'ok   %-22s %s\n' "$name" "$3"
  else
    failed=$((failed + 1))
    echo "FAIL $name:$why"
    echo "---- server"
    cat "$tmp/$name.srv"
    echo "---- client"
    cat "$tmp/$name.cli"
  fi
}
run() {
  local name=$1 t=$2
  shift 2
  local before
  before=$(forwarded)
  if [ "$XDP" = 1 ]; then
    pair "$name" "$t" -- -- "$@"
  else
    pair "$name" "$t" --route="$ROUTE_A" -- --route="$ROUTE_B" -- "$@"
  fi
  local why=""
  [ $crc -eq 0 ] || why="client exit $crc"
  [ $src -eq 0 ] || why="$why server exit $src"
  grep -q 'result: PASS' "$tmp/$name.cli" || why="$why client did not PASS"
  grep -q 'result: PASS' "$tmp/$name.srv" || why="$why server did not PASS"
  local fwd=$(($(forwarded) - before))
  # At least one frame per message crossed the router (with ACKs, both ways).
  [ "$fwd" -ge 200 ] || why="$why the router forwarded only $fwd frames"
  report "$name" "$why" "$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli" | tail -1) (router: $fwd frames)"
}

run write_bw write_bw -n 200
run read_bw read_bw -n 200
run send_bw send_bw -n 200
run atomic_bw atomic_bw -n 200
run write_lat write_lat -n 200
run send_bw_all_sizes send_bw -a -n 5

# AF_XDP on the kernel's addresses: the kernel's routes and neighbours (urnic asks the kernel to
# resolve the gateway, which it has never talked to).
if [ -n "$prog" ] && [ ! -e "$prog" ] && [ -z "${URNIC_XDP_PROG:-}" ]; then
  echo "skip AF_XDP cases: urnic's XDP program was not built ($prog)"
elif ! python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null; then
  echo "skip AF_XDP cases: the kernel has no AF_XDP sockets"
else
  XDP=1
  ip -n "$A" neigh flush dev roce0
  ip -n "$B" neigh flush dev roce1
  run xdp_kernel_write_bw write_bw -n 200
  run xdp_kernel_read_bw read_bw -n 200
  run xdp_kernel_send_lat send_lat -n 200
  for side in srv cli; do
    grep -q 'GID: .*255:255:198:18:[12]0:02' "$tmp/xdp_kernel_write_bw.$side" || {
      echo "FAIL xdp_kernel_write_bw: $side did not take the kernel's address"
      failed=$((failed + 1))
    }
  done
  # The kernel has no route to the client's subnet now: the server says so.
  ip -n "$A" route del default
  t0=$SECONDS
  pair xdp_no_route write_bw -- -- -n 200 --timeout=10
  why=""
  [ $src -ne 0 ] && [ $crc -ne 0 ] || why="exits $src / $crc, want both non-zero"
  grep -q 'no route to it' "$tmp/xdp_no_route.srv" || why="$why the server did not say why"
  report xdp_no_route "$why" "refused in $((SECONDS - t0)) s"
  ip -n "$A" route add default via 198.18.10.254
  XDP=0
fi

# The server has no route to the client's subnet: it cannot resolve the client and says so;
# both sides end, in bounded time (the client when the server leaves the exchange).
t0=$SECONDS
pair no_route write_bw -- --route="$ROUTE_B" -- -n 200 --timeout=10
why=""
[ $src -ne 0 ] && [ $crc -ne 0 ] || why="exits $src / $crc, want both non-zero"
grep -q 'no route to it' "$tmp/no_route.srv" || why="$why the server did not say why"
[ $((SECONDS - t0)) -le 30 ] || why="$why took $((SECONDS - t0)) s"
report no_route "$why" "refused in $((SECONDS - t0)) s: $(grep -o 'no ARP.*' "$tmp/no_route.srv" | head -1)"

# Configuration refused at start, with the reason.
bad() {
  local name=$1 want=$2
  shift 2
  timeout 30 ip netns exec "$A" "$perf" write_bw --vdev=net_af_packet0,iface=roce0 \
    --ip=198.18.10.1/24 --lcores=0 --no-progress "$@" >"$tmp/$name.srv" 2>&1
  local rc=$?
  : >"$tmp/$name.cli"
  local why=""
  [ $rc -ne 0 ] || why="exit 0"
  grep -q "$want" "$tmp/$name.srv" || why="$why no '$want' in its output"
  report "$name" "$why" "refused: $(grep -o "$want.*" "$tmp/$name.srv" | head -1)"
}
bad gateway_off_subnet "the gateway is not in the adapter's subnet" --route="default via 198.18.30.254"
bad malformed_route "bad destination" --route="198.18.300.0/24 via 198.18.10.254"
bad host_bits "bits set beyond its prefix" --route="198.18.30.1/24 via 198.18.10.254"

echo "perf_route: $passed passed, $failed failed"
[ $failed -eq 0 ]
