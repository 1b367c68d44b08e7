#!/usr/bin/env bash
# ctest label "perf": urnic-perf over AF_XDP (net_af_xdp with urnic's XDP program, issue 39)
# between two network namespaces, while the kernel keeps using the same interfaces.
#
#   urnicA<pid>: roce0 ==veth== roce1 :urnicB<pid>   MTU 3000 (an AF_XDP frame is one page)
#     kernel:    198.18.2.1/24        198.18.2.2/24   ping, a TCP transfer and urnic-perf's own
#                                                     TCP exchange run over these
#     urnic:     198.18.1.1           198.18.1.2      RoCEv2 and ARP for these go to urnic
#
# Then urnic on the kernel's own addresses (no --ip: it takes 198.18.2.1 / .2, as rxe would): the
# kernel answers ARP and urnic reads the neighbour from the kernel's table, so no ARP/ND frame
# reaches urnic. Last, a missing interface is refused with the reason.
#
# Every urnic-perf test type runs briefly and must PASS (completions all successful, data
# verified); meanwhile a ping flood and an 8 MiB TCP transfer cross the same veth through the
# kernel and must arrive complete (no ping lost, the transfer's SHA-256 equal at both ends).
# Each side's XDP counts must show RoCEv2 frames sent to urnic and none of urnic's frames on a
# queue without its socket, and the kernel must not have seen any of urnic's RoCEv2 frames (its
# UDP NoPorts and IP InAddrErrors counters do not move).
#
# Usage: perf_xdp_test.sh path/to/urnic-perf [path/to/urnic_xdp.o]. Exits 77 (ctest
# SKIP_RETURN_CODE) without root, namespaces, veth, AF_XDP or the XDP program.
set -u
perf=${1:?usage: perf_xdp_test.sh path/to/urnic-perf [path/to/urnic_xdp.o]}
prog=${2:-}
SKIP=77

skip() {
  echo "SKIP: $*"
  exit $SKIP
}
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces, veth pairs and XDP sockets"
command -v ip >/dev/null || skip "the ip tool (iproute2) is not installed"
command -v python3 >/dev/null || skip "python3 (the TCP transfer) is not installed"
[ -x "$perf" ] || {
  echo "FAIL: $perf is not built"
  exit 1
}
if [ -n "$prog" ] && [ -z "${URNIC_XDP_PROG:-}" ] && [ ! -e "$prog" ]; then
  skip "urnic's XDP program was not built ($prog: no clang or libbpf headers)"
fi
# AF_XDP is address family 44.
python3 -c 'import socket; socket.socket(44, socket.SOCK_RAW).close()' 2>/dev/null ||
  skip "the kernel has no AF_XDP sockets"

A=urnicA$$
B=urnicB$$
tmp=$(mktemp -d)
bg=()
cleanup() {
  for p in "${bg[@]}"; do kill "$p" 2>/dev/null; done
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$A" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
ip netns add "$B" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
ip link add roce0 netns "$A" type veth peer name roce1 netns "$B" 2>"$tmp/err" ||
  skip "cannot create a veth pair: $(cat "$tmp/err")"
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
done
ip -n "$A" link set roce0 mtu 3000 up && ip -n "$B" link set roce1 mtu 3000 up || exit 1
ip -n "$A" addr add 198.18.2.1/24 dev roce0 && ip -n "$B" addr add 198.18.2.2/24 dev roce1 || exit 1

# kernel_errs NS: the kernel's count of UDP datagrams to no socket and of IP packets to an
# address it does not have: where a RoCEv2 frame of urnic's would land in the kernel.
kernel_errs() {
  ip netns exec "$1" awk '
    /^Ip: [0-9]/ { for (i = 2; i <= NF; i++) if (h[i] == "InAddrErrors") n += $i }
    /^Ip: [A-Z]/ { for (i = 2; i <= NF; i++) h[i] = $i }
    /^Udp: [0-9]/ { for (i = 2; i <= NF; i++) if (u[i] == "NoPorts") n += $i }
    /^Udp: [A-Z]/ { for (i = 2; i <= NF; i++) u[i] = $i }
    END { print n + 0 }' /proc/net/snmp
}
errs_a0=$(kernel_errs "$A")
errs_b0=$(kernel_errs "$B")

# The kernel's own traffic over the same interfaces for the whole run.
ip netns exec "$A" ping -q -i 0.05 198.18.2.2 >"$tmp/ping" 2>&1 &
ping_pid=$!
bg+=("$ping_pid")
head -c 8388608 /dev/urandom >"$tmp/blob"
want_sha=$(sha256sum <"$tmp/blob" | cut -d' ' -f1)
ip netns exec "$B" timeout 120 python3 -c '
import hashlib, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("198.18.2.2", 7000)); s.listen(1); open(sys.argv[1], "w").close()
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(65536)
    if not b: break
    h.update(b); n += len(b)
open(sys.argv[2], "w").write("%s %d\n" % (h.hexdigest(), n))' "$tmp/tcp.ready" "$tmp/tcp.got" &
bg+=($!)
for _ in $(seq 100); do [ -e "$tmp/tcp.ready" ] && break; sleep 0.05; done
# Paced (64 KiB every 10 ms, about 1.3 s) so that it overlaps the first runs.
ip netns exec "$A" timeout 120 python3 -c '
import socket, sys, time
c = socket.create_connection(("198.18.2.2", 7000))
with open(sys.argv[1], "rb") as f:
    while True:
        b = f.read(65536)
        if not b: break
        c.sendall(b); time.sleep(0.01)
c.close()' "$tmp/blob" &
tcp_pid=$!
bg+=("$tcp_pid")

passed=0
failed=0
# run NAME TEST ARGS...: server in A (lcore 0), client in B (lcore 1), the client's out-of-band
# TCP exchange over the shared veth. urnic's own addresses, or with KERNEL_ADDRS=1 the kernel's.
KERNEL_ADDRS=0
run() {
  local name=$1 t=$2
  shift 2
  local common=(--no-progress --idle-yield=64 "$@")
  local ip_a=(--ip=198.18.1.1) ip_b=(--ip=198.18.1.2)
  [ "$KERNEL_ADDRS" = 1 ] && ip_a=() && ip_b=()
  timeout 90 ip netns exec "$A" "$perf" "$t" --vdev=net_af_xdp0,iface=roce0 "${ip_a[@]}" \
    --lcores=0 "${common[@]}" >"$tmp/$name.srv" 2>&1 &
  local spid=$!
  timeout 90 ip netns exec "$B" "$perf" "$t" --vdev=net_af_xdp0,iface=roce1 "${ip_b[@]}" \
    --lcores=1 --connect-retry=30 "${common[@]}" 198.18.2.1 >"$tmp/$name.cli" 2>&1
  local crc=$?
  wait "$spid"
  local src=$?
  local why=""
  [ $crc -eq 0 ] || why="client exit $crc"
  [ $src -eq 0 ] || why="$why server exit $src"
  for side in srv cli; do
    grep -q 'result: PASS' "$tmp/$name.$side" || why="$why $side did not PASS"
    # " xdp: to urnic R RoCEv2 + N ARP/ND frames, to the kernel K, ... without its socket S"
    local x
    x=$(grep ' xdp: ' "$tmp/$name.$side")
    if [ -z "$x" ]; then
      why="$why $side printed no XDP counts (urnic's program not attached?)"
      continue
    fi
    read -r roce neigh nosock < <(echo "$x" | awk '{ print $4, $7, $NF }')
    [ "$roce" -gt 0 ] || why="$why $side: no RoCEv2 frame went to urnic"
    if [ "$KERNEL_ADDRS" = 1 ]; then
      [ "$neigh" -eq 0 ] || why="$why $side: $neigh ARP/ND frames went to urnic, not the kernel"
      grep -q 'GID: .*255:255:198:18:02:0[12]' "$tmp/$name.$side" ||
        why="$why $side: urnic did not take the kernel's address"
    fi
    [ "$nosock" -eq 0 ] || why="$why $side: $nosock of urnic's frames reached no socket"
  done
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    printf 'ok   %-18s %s\n' "$name" "$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli" | tail -1)"
  else
    failed=$((failed + 1))
    echo "FAIL $name:$why"
    echo "---- server"
    cat "$tmp/$name.srv"
    echo "---- client"
    cat "$tmp/$name.cli"
  fi
}

run write_bw write_bw -n 200
run read_bw read_bw -n 200
run send_bw send_bw -n 200
run atomic_bw atomic_bw -n 200
run write_lat write_lat -n 200
run read_lat read_lat -n 200
run send_lat send_lat -n 200
run atomic_lat atomic_lat -n 200
run write_bw_q4_s100 write_bw -q 4 -s 100 -n 500
run send_bw_all_sizes send_bw -a -n 5
KERNEL_ADDRS=1
run kernel_write_bw write_bw -n 200
run kernel_read_lat read_lat -n 200
run kernel_send_bw send_bw -q 2 -n 200
KERNEL_ADDRS=0

# Two engines want two AF_XDP queues; veth has no combined channels (DPDK 22.11's net_af_xdp
# takes only those): refused at once, with the reason.
timeout 30 ip netns exec "$A" "$perf" write_bw --vdev=net_af_xdp0,iface=roce0 --ip=198.18.1.1 \
  --engines=2 --lcores=0 --no-progress >"$tmp/queues.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "2 AF_XDP queues, but interface 'roce0' has 1" "$tmp/queues.out"; then
  echo "ok   too many queues    $(grep -o "2 AF_XDP queues.*" "$tmp/queues.out")"
  passed=$((passed + 1))
else
  echo "FAIL too many queues: exit $rc"
  cat "$tmp/queues.out"
  failed=$((failed + 1))
fi

# A process killed (-9) on an AF_XDP port leaves urnic's XDP program attached (the kernel keeps
# it): the next one on the interface removes it and runs; while one holds the interface, a
# second is refused with the reason.
ip netns exec "$A" "$perf" write_bw --vdev=net_af_xdp0,iface=roce0 --ip=198.18.1.1 --lcores=0 \
  --no-progress --timeout=60 >"$tmp/killed.out" 2>&1 &
victim=$!
for _ in $(seq 200); do grep -q 'Waiting for client' "$tmp/killed.out" && break; sleep 0.05; done
timeout 30 ip netns exec "$A" "$perf" write_bw --vdev=net_af_xdp0,iface=roce0 --ip=198.18.1.1 \
  --lcores=1 --no-progress --timeout=2 >"$tmp/second.out" 2>&1
second_rc=$?
kill -9 "$victim"
wait "$victim" 2>/dev/null
left=$(ip -n "$A" link show roce0 | grep -c 'prog/xdp.*urnic_xdp')
KERNEL_ADDRS=0
run after_kill write_bw -n 200
if [ "$left" -eq 1 ] && grep -q "removed urnic's XDP program that an ended process left on 'roce0'" \
  "$tmp/after_kill.srv" && [ $second_rc -ne 0 ] &&
  grep -q "interface 'roce0' is in use by another urnic process" "$tmp/second.out"; then
  echo "ok   killed process     its XDP program was left; the next run removed it; a second one at once was refused"
  passed=$((passed + 1))
else
  echo "FAIL killed process: program left $left, second exit $second_rc"
  cat "$tmp/second.out" "$tmp/after_kill.srv"
  failed=$((failed + 1))
fi

# A missing interface is refused at once, with the reason.
timeout 30 ip netns exec "$A" "$perf" write_bw --vdev=net_af_xdp0,iface=nosuch0 --lcores=0 \
  --no-progress >"$tmp/nosuch.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "no interface 'nosuch0'" "$tmp/nosuch.out"; then
  echo "ok   missing interface  $(grep -o "no interface.*" "$tmp/nosuch.out")"
  passed=$((passed + 1))
else
  echo "FAIL missing interface: exit $rc"
  cat "$tmp/nosuch.out"
  failed=$((failed + 1))
fi

# The kernel's traffic: the transfer complete and intact, no ping lost.
wait "$tcp_pid"
tcp_rc=$?
for _ in $(seq 100); do [ -s "$tmp/tcp.got" ] && break; sleep 0.05; done
got=$(cat "$tmp/tcp.got" 2>/dev/null)
if [ $tcp_rc -eq 0 ] && [ "$got" = "$want_sha 8388608" ]; then
  echo "ok   kernel TCP         8 MiB over the shared veth, SHA-256 equal"
  passed=$((passed + 1))
else
  echo "FAIL kernel TCP: sender exit $tcp_rc, receiver got '$got', want '$want_sha 8388608'"
  failed=$((failed + 1))
fi
kill -INT "$ping_pid" 2>/dev/null
wait "$ping_pid"
stats=$(grep 'packets transmitted' "$tmp/ping")
read -r sent recv < <(echo "$stats" | awk '{ print $1, $4 }')
if [ -n "$sent" ] && [ "$sent" -gt 10 ] && [ "$sent" = "$recv" ]; then
  echo "ok   kernel ping        $stats"
  passed=$((passed + 1))
else
  echo "FAIL kernel ping: '$stats'"
  failed=$((failed + 1))
fi
errs_a=$(($(kernel_errs "$A") - errs_a0))
errs_b=$(($(kernel_errs "$B") - errs_b0))
if [ "$errs_a" -eq 0 ] && [ "$errs_b" -eq 0 ]; then
  echo "ok   kernel saw none of urnic's RoCEv2 frames (UDP NoPorts, IP InAddrErrors unchanged)"
  passed=$((passed + 1))
else
  echo "FAIL the kernel saw urnic's frames: UDP NoPorts + IP InAddrErrors +$errs_a in A, +$errs_b in B"
  failed=$((failed + 1))
fi

echo "perf_xdp: $passed passed, $failed failed"
[ $failed -eq 0 ]
