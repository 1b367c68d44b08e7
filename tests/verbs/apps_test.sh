#!/usr/bin/env bash
# ctest apps (issue 40): RDMA programs from Debian beyond perftest, never rebuilt, on urnic's
# libibverbs.so.1 / librdmacm.so.1 through urnic-run, each side attached to its own urnicd:
#
#   appA<pid>: roce0 ==veth== roce1 :appB<pid>   the kernel's 198.18.6.1/24 and .2 (TCP, ARP, ND);
#                                                each urnicd's port is net_af_xdp on the interface
#                                                and takes its addresses (urnic's XDP program
#                                                hands it only RoCEv2)
#
# A daemon because qperf's server forks a process per test, each of which opens the device: one
# port shared by processes is what urnicd is for. Cases: qperf over rdma_cm (-cm1) for RC
# bandwidth, latency, WRITE, READ and both atomics (the port of its rdma_bind_addr to port 0 must
# be known before rdma_listen); libfabric's fi_pingpong over the verbs provider, msg endpoints,
# rdm through ofi_rxm (a server given no address binds "localhost" and listens on the wildcard)
# and dgram (UD to GID 0, the link-local address, which urnic's XDP program must hand to urnic). Each case checks both exit codes, every result row and that no error line was
# printed; fi_pingpong checks every buffer it receives (-c).
#
# Usage: apps_test.sh urnicd urnic-run [CASE-REGEX]. Exits 77 (ctest SKIP_RETURN_CODE) without
# root, network namespaces, AF_XDP or the programs (scripts/install-deps.sh installs them).
set -u
urnicd=${1:?usage: apps_test.sh urnicd urnic-run [case-regex]}
run_wrapper=${2:?}
only=${3:-.}
SKIP=77
skip() {
  echo "SKIP: $*"
  exit $SKIP
}
[ "$(id -u)" -eq 0 ] || skip "needs root for network namespaces, veth pairs and AF_XDP"
for t in ip qperf fi_pingpong; do
  command -v $t >/dev/null || skip "$t is not installed (scripts/install-deps.sh)"
done

A=appA$$
B=appB$$
tmp=$(mktemp -d)
daemons=()
cleanup() {
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  rm -rf /var/run/dpdk/urnicd-apps$$*
  [ -n "${KEEP_TMP:-}" ] && echo "logs kept in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$A" 2>/dev/null && ip netns add "$B" || skip "ip netns add failed"
ip link add roce0 netns "$A" type veth peer name roce1 netns "$B" || skip "cannot create a veth pair"
ip -n "$A" link set lo up && ip -n "$B" link set lo up || exit 1
# IPv6 on, without duplicate address detection: GID 0 is the MAC's link-local address, which UD
# peers (fi_pingpong dgram) address, and the kernel resolves it once it holds the address.
for x in "$A:roce0" "$B:roce1"; do
  ip netns exec "${x%%:*}" sysctl -qw net.ipv6.conf.all.disable_ipv6=0 "net.ipv6.conf.${x##*:}.accept_dad=0" ||
    skip "no IPv6 in the namespaces"
done
ip -n "$A" link set roce0 mtu 3000 up && ip -n "$B" link set roce1 mtu 3000 up || exit 1
ip -n "$A" addr add 198.18.6.1/24 dev roce0 && ip -n "$B" addr add 198.18.6.2/24 dev roce1 || exit 1

# start_daemon NAME NETNS IFACE: an urnicd on net_af_xdp over IFACE, ready or exit 1.
start_daemon() {
  local name=$1 ns=$2 ifc=$3
  ip netns exec "$ns" "$urnicd" --foreground --socket "$tmp/$name.sock" \
    --set "daemon.lock_dir=$tmp/locks$name" --set "daemon.file_prefix=urnicd-apps$$$name" \
    --set daemon.memory=nohuge --set daemon.memory_mb=256 --set daemon.device_nodes=/dev/infiniband \
    --set "port.u$name.devargs=net_af_xdp0,iface=$ifc" >"$tmp/$name.log" 2>&1 &
  daemons+=($!)
  for _ in $(seq 300); do
    grep -q 'urnicd: ready' "$tmp/$name.log" && return 0
    kill -0 "${daemons[-1]}" 2>/dev/null || break
    sleep 0.1  # polls the condition above; it is not the synchronisation itself
  done
  if grep -qi 'xdp' "$tmp/$name.log"; then skip "AF_XDP unavailable: $(grep -i xdp "$tmp/$name.log" | head -1)"; fi
  echo "FAIL: urnicd $name did not start"
  cat "$tmp/$name.log"
  exit 1
}
start_daemon a "$A" roce0
start_daemon b "$B" roce1
on_a() { ip netns exec "$A" timeout 120 "$run_wrapper" --daemon="$tmp/a.sock" "$@"; }
on_b() { ip netns exec "$B" timeout 120 "$run_wrapper" --daemon="$tmp/b.sock" "$@"; }

passed=0
failed=0
# judge NAME ROWS-REGEX WANT-ROWS SERVER-PID WHY: as verbs_stock_test.sh's.
judge() {
  local name=$1 rows_re=$2 want=$3 spid=$4 why=$5
  if [ -n "$spid" ]; then
    wait "$spid"
    local src=$?
    [ $src -eq 0 ] || why="$why server exit $src"
  fi
  local f
  for f in "$tmp/$name".*; do
    if grep -qiE 'error|fail|couldn|unable|not supported|timeout' "$f"; then
      why="$why error line in ${f##*.}: $(grep -iE 'error|fail|couldn|unable|not supported|timeout' "$f" | head -1)"
    fi
  done
  local rows
  rows=$(grep -cE "$rows_re" "$tmp/$name.cli")
  [ "$rows" -eq "$want" ] || why="$why $rows result rows (want $want)"
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    printf 'ok   %-24s %s\n' "$name" "$(grep -E "$rows_re" "$tmp/$name.cli" | tail -1 | tr -s ' \t' ' ')"
  else
    failed=$((failed + 1))
    echo "FAIL $name:$why"
    for f in "$tmp/$name".*; do echo "---- ${f##*.}"; cat "$f"; done
  fi
}

# ---- qperf over rdma_cm: one server (it forks per test), one client running every test --------
qtests=(rc_bw rc_lat rc_bi_bw rc_rdma_write_bw rc_rdma_write_lat rc_rdma_read_bw rc_rdma_read_lat
  rc_compare_swap_mr rc_fetch_add_mr)
if [[ qperf =~ $only ]]; then
  on_a qperf --listen_port 19765 >"$tmp/qperf.srv" 2>&1 &
  qpid=$!
  why=""
  for _ in $(seq 300); do
    ip netns exec "$A" ss -Hltn "sport = :19765" 2>/dev/null | grep -q LISTEN && break
    sleep 0.1  # polls the condition above; it is not the synchronisation itself
  done
  on_b qperf -cm1 -t 1 --listen_port 19765 198.18.6.1 "${qtests[@]}" >"$tmp/qperf.cli" 2>&1
  rc=$?
  [ $rc -eq 0 ] || why=" client exit $rc"
  # Each test prints its name and one figure (bw, latency or msg_rate) with a unit.
  for t in "${qtests[@]}"; do
    grep -qE "^$t:" "$tmp/qperf.cli" || why="$why no result for $t"
  done
  kill "$qpid" 2>/dev/null
  wait "$qpid" 2>/dev/null
  judge qperf '^ +(bw|latency|msg_rate) += +[0-9.]+ ' "${#qtests[@]}" "" "$why"
fi

# ---- libfabric fi_pingpong over verbs: msg, rdm through ofi_rxm, dgram ---------------------
# FI_VERBS_IFACE: the verbs provider looks for its source address among interfaces named so
# (its default is "ib"); every size of -S all, each received buffer checked (-c).
fabric() {
  local name=$1 prov=$2 ep=$3 least=$4
  [[ $name =~ $only ]] || return 0
  on_a env FI_VERBS_IFACE=roce fi_pingpong -p "$prov" -e "$ep" -I 20 -S all -c \
    >"$tmp/$name.srv" 2>&1 &
  local spid=$! why=""
  for _ in $(seq 300); do
    ip netns exec "$A" ss -Hltn "sport = :47592" 2>/dev/null | grep -q LISTEN && break
    kill -0 "$spid" 2>/dev/null || break
    sleep 0.1  # polls the condition above; it is not the synchronisation itself
  done
  on_b env FI_VERBS_IFACE=roce fi_pingpong -p "$prov" -e "$ep" -I 20 -S all -c \
    198.18.6.1 >"$tmp/$name.cli" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || why=" client exit $rc"
  wait "$spid"
  rc=$?
  [ $rc -eq 0 ] || why="$why server exit $rc"
  # One row per size of -S all (fi_pingpong's list up to the endpoint's largest message: 44 rows
  # to 6 MiB for msg and rdm; 64 B, 256 B and 1 KiB for dgram, under the path MTU), on both sides.
  local rows
  rows=$(grep -cE '^[0-9]+[kmg]? +20 +=20 ' "$tmp/$name.srv")
  [ "$rows" -ge "$least" ] || why="$why the server printed $rows result rows (want $least or more)"
  judge "$name" '^[0-9]+[kmg]? +20 +=20 ' "$rows" "" "$why"
}
fabric fi_msg verbs msg 40
fabric fi_rdm "verbs;ofi_rxm" rdm 40
fabric fi_dgram verbs dgram 3

# ---- UCX: finds the daemon's adapter (it looks for /dev/infiniband/<dev_name>, which the daemon
# makes with daemon.device_nodes), with its verbs transports. Its UD wire-up does not complete
# yet (docs/verbs.md), so no transfer is run.
if [[ ucx_info =~ $only ]] && command -v ucx_info >/dev/null; then
  on_b ucx_info -d >"$tmp/ucx_info.cli" 2>&1
  rc=$?
  why=""
  [ $rc -eq 0 ] || why=" exit $rc"
  grep -q '^# Memory domain: ub$' "$tmp/ucx_info.cli" || why="$why no memory domain ub"
  for t in rc_verbs ud_verbs; do
    grep -A1 "Transport: $t" "$tmp/ucx_info.cli" | grep -q 'Device: ub:1' || why="$why no $t on ub:1"
  done
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    echo "ok   ucx_info                 memory domain ub: rc_verbs and ud_verbs on ub:1"
  else
    failed=$((failed + 1))
    echo "FAIL ucx_info:$why"
    cat "$tmp/ucx_info.cli"
  fi
fi

echo "apps: $passed passed, $failed failed"
[ $failed -eq 0 ] && [ $passed -gt 0 ]
