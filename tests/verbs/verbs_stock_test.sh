#!/usr/bin/env bash
# ctest label "verbs" (issue 16 item 6): Debian's own binaries of perftest and ibverbs-utils,
# never recompiled, on urnic's libibverbs.so.1 through urnic-run, one process in each of two
# network namespaces:
#
#   vrbA<pid>: roce0 ==veth== roce1 :vrbB<pid>   RoCEv2 (net_af_packet), MTU 4200, no kernel
#                                                addresses (198.18.1.1 / .2 are urnic's own)
#              oob0  ==veth== oob1               the tools' TCP exchange, 198.18.0.1/30 - .2
#
# Every case checks both exit codes, the tool's own result lines (one per message size) and that
# no error line was printed; ibv_rc_pingpong and ibv_srq_pingpong run with --chk and rping with
# -V, which validate every received buffer byte for byte. The rdma_cm cases (perftest -R, rping,
# ucmatose) use urnic's librdmacm.so.1 and address the server by its RoCE address.
#
# Usage: verbs_stock_test.sh path/to/urnic-run [CASE-REGEX]. Exits 77 (ctest SKIP_RETURN_CODE)
# without root, network namespaces or the stock tools.
set -u
run_wrapper=${1:?usage: verbs_stock_test.sh path/to/urnic-run [case-regex]}
only=${2:-.}
SKIP=77

skip() {
  echo "SKIP: $*"
  exit $SKIP
}
[ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces and veth pairs"
command -v ip >/dev/null || skip "the ip tool (iproute2) is not installed"
for t in ibv_devinfo ibv_rc_pingpong ib_write_bw; do
  command -v $t >/dev/null || skip "$t is not installed (scripts/install-deps.sh installs perftest and ibverbs-utils)"
done

A=vrbA$$
B=vrbB$$
tmp=$(mktemp -d)
cleanup() {
  ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  [ -n "${KEEP_TMP:-}" ] && echo "logs kept in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$A" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
ip netns add "$B" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
ip link add roce0 netns "$A" type veth peer name roce1 netns "$B" 2>"$tmp/err" ||
  skip "cannot create a veth pair: $(cat "$tmp/err")"
ip link add oob0 netns "$A" type veth peer name oob1 netns "$B" || exit 1
for ns in "$A" "$B"; do
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
done
ip -n "$A" link set roce0 mtu 4200 up && ip -n "$B" link set roce1 mtu 4200 up || exit 1
ip -n "$A" addr add 198.18.0.1/30 dev oob0 && ip -n "$B" addr add 198.18.0.2/30 dev oob1 || exit 1
ip -n "$A" link set oob0 up && ip -n "$B" link set oob1 up || exit 1

on_a() { timeout 120 ip netns exec "$A" "$run_wrapper" --devargs=net_af_packet0,iface=roce0 --ip=198.18.1.1 "$@"; }
on_b() { timeout 120 ip netns exec "$B" "$run_wrapper" --devargs=net_af_packet0,iface=roce1 --ip=198.18.1.2 "$@"; }

# Waits (up to 30 s) until the server in A listens on its TCP port, or has exited.
wait_listen() {
  local port=$1 pid=$2
  for _ in $(seq 300); do
    ip netns exec "$A" ss -Hltn "sport = :$port" 2>/dev/null | grep -q LISTEN && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1  # polls the condition above; it is not the synchronisation itself
  done
  return 1
}

passed=0
failed=0
record() {  # NAME WHY(empty = pass) SUMMARY
  if [ -z "$2" ]; then
    passed=$((passed + 1))
    printf 'ok   %-28s %s\n' "$1" "$3"
  else
    failed=$((failed + 1))
    echo "FAIL $1:$2"
    echo "---- server"
    cat "$tmp/$1.srv" 2>/dev/null
    echo "---- client"
    cat "$tmp/$1.cli"
  fi
}

# judge NAME ROWS-REGEX WANT-ROWS SERVER-PID WHY: waits for the server, then records NAME as
# passed when WHY is empty, the server exited 0, neither side printed an error line and the
# client printed WANT-ROWS lines matching ROWS-REGEX.
judge() {
  local name=$1 rows_re=$2 want=$3 spid=$4 why=$5
  wait "$spid"
  local src=$?
  [ $src -eq 0 ] || why="$why server exit $src"
  local f rows
  for f in "$tmp/$name.srv" "$tmp/$name.cli"; do
    if grep -qiE 'error|fail|couldn|unable|not supported|timeout' "$f"; then
      why="$why error line in ${f##*.}: $(grep -iE 'error|fail|couldn|unable|not supported|timeout' "$f" | head -1)"
    fi
  done
  rows=$(grep -cE "$rows_re" "$tmp/$name.cli")
  [ "$rows" -eq "$want" ] || why="$why $rows result rows (want $want)"
  record "$name" "$why" "$(grep -E "$rows_re" "$tmp/$name.cli" | tail -1 | tr -s ' \t' ' ')"
}

# pair NAME ROWS-REGEX WANT-ROWS PORT CMD ARGS...: server in A, client in B (connecting to A's
# out-of-band address); both must exit 0, print WANT-ROWS lines matching ROWS-REGEX, and no
# error line.
pair() {
  local name=$1 rows_re=$2 want=$3 port=$4
  shift 4
  [[ $name =~ $only ]] || return 0
  on_a "$@" >"$tmp/$name.srv" 2>&1 &
  local spid=$!
  local why=""
  if wait_listen "$port" "$spid"; then
    on_b "$@" 198.18.0.1 >"$tmp/$name.cli" 2>&1
    local crc=$?
    [ $crc -eq 0 ] || why="$why client exit $crc"
  else
    why=" the server never listened on port $port"
    : >"$tmp/$name.cli"
  fi
  judge "$name" "$rows_re" "$want" "$spid" "$why"
}

# ---- ibv_devinfo / ibv_devices ------------------------------------------------------------------
if [[ devinfo =~ $only ]]; then
  on_a ibv_devinfo -v >"$tmp/devinfo.cli" 2>&1
  rc=$?
  why=""
  [ $rc -eq 0 ] || why=" exit $rc"
  for want in 'hca_id:.urnic0' 'state:.*PORT_ACTIVE' 'link_layer:.*Ethernet' 'active_mtu:.*4096' \
    'GID\[  1\]:.*::ffff:198.18.1.1, RoCE v2' 'fw_ver:.*urnic'; do
    grep -qE "$want" "$tmp/devinfo.cli" || why="$why no '$want'"
  done
  record devinfo "$why" "$(grep -E 'GID\[  1\]' "$tmp/devinfo.cli" | tr -s ' \t' ' ')"
  on_a ibv_devices >"$tmp/devices.cli" 2>&1
  rc=$?
  why=""
  [ $rc -eq 0 ] || why=" exit $rc"
  grep -qE '^[[:space:]]+urnic0[[:space:]]+[0-9a-f]{16}$' "$tmp/devices.cli" || why="$why urnic0 not listed with a GUID"
  record devices "$why" "$(grep urnic0 "$tmp/devices.cli" | tr -s ' \t' ' ')"
fi

# ---- ibverbs-utils --------------------------------------------------------------------------------
ping_re='^[0-9]+ iters in'
pair rc_pingpong "$ping_re" 1 18515 ibv_rc_pingpong -g 1 -n 1000 -c
pair rc_pingpong_events "$ping_re" 1 18515 ibv_rc_pingpong -g 1 -n 500 -c -e
pair rc_pingpong_4k_mtu "$ping_re" 1 18515 ibv_rc_pingpong -g 1 -n 200 -s 65536 -m 4096 -c
pair srq_pingpong "$ping_re" 1 18515 ibv_srq_pingpong -g 1 -n 500 -q 4 -c
# UD: datagrams with address handles made from the peer's GID, replies checked (--chk).
pair ud_pingpong "$ping_re" 1 18515 ibv_ud_pingpong -g 1 -n 1000 -c
pair ud_pingpong_events "$ping_re" 1 18515 ibv_ud_pingpong -g 1 -n 500 -s 64 -c -e

# ---- perftest: the eight tools, plain, over all sizes (-a), and with four QPs (-q 4) --------------
row_re='^ [0-9]+ +[0-9]+ +[0-9.]+'
for t in write read send atomic; do
  pair "${t}_bw" "$row_re" 1 18515 "ib_${t}_bw" -d urnic0 -n 1000
  pair "${t}_lat" "$row_re" 1 18515 "ib_${t}_lat" -d urnic0 -n 1000
  pair "${t}_bw_q4" "$row_re" 1 18515 "ib_${t}_bw" -d urnic0 -n 500 -q 4
done
for t in write read send; do
  pair "${t}_bw_all" "$row_re" 23 18515 "ib_${t}_bw" -d urnic0 -a -n 20
  pair "${t}_lat_all" "$row_re" 23 18515 "ib_${t}_lat" -d urnic0 -a -n 20
done
# (ib_atomic_bw / ib_atomic_lat refuse -a themselves: "Message size cannot be changed for Atomic
# tests"; their one size is 8 bytes, run above.)
pair write_bw_inline_post_list "$row_re" 1 18515 ib_write_bw -d urnic0 -s 32 -I 64 -l 8 -n 4000
pair send_bw_events "$row_re" 1 18515 ib_send_bw -d urnic0 -e -n 1000
pair write_bw_old_post_send "$row_re" 1 18515 ib_write_bw -d urnic0 --use_old_post_send -n 1000
# UD (perftest's SEND tools are the ones with -c UD): one size, all sizes up to the MTU (2 .. 4096:
# 12 rows), four QPs, and the old ibv_post_send path. Nothing paces a UD sender and a lost
# datagram hangs perftest's receiver (it waits for every one), so a bandwidth run sends at most
# 400 datagrams: fewer than the receiver's af_packet ring holds (512 slots) while its process
# waits for a core, and than the receives perftest posts.
pair send_bw_ud "$row_re" 1 18515 ib_send_bw -d urnic0 -c UD -n 400
pair send_lat_ud "$row_re" 1 18515 ib_send_lat -d urnic0 -c UD -n 1000
pair send_bw_ud_all "$row_re" 12 18515 ib_send_bw -d urnic0 -c UD -a -n 20
pair send_lat_ud_all "$row_re" 12 18515 ib_send_lat -d urnic0 -c UD -a -n 20
pair send_bw_ud_q4 "$row_re" 1 18515 ib_send_bw -d urnic0 -c UD -q 4 -n 100
pair send_bw_ud_old_post_send "$row_re" 1 18515 ib_send_bw -d urnic0 -c UD --use_old_post_send -n 400

# ---- rdma_cm (urnic's librdmacm.so.1): perftest -R, rping -V, ucmatose ----------------------------
# With -R there is no TCP listener to wait for: the client is started again (up to 50 times, 0.2 s
# apart) while its connection request is refused (REJ, event 8: nobody listens yet) or unanswered
# (event 7: the server's adapter is not up yet), and only then.
refused_re='CM event bl blka [78]$|RDMA_CM_EVENT_(REJECTED|UNREACHABLE)|event: (REJECTED|UNREACHABLE)'
# retry_client NAME SERVER-PID RETRY-REGEX CMD ARGS...: runs the client in B (output in
# $tmp/NAME.cli) until it exits 0, at most 50 times, 0.2 s apart, while the server runs and the
# failed attempt's output matches RETRY-REGEX (empty: any failure). Sets crc to its last status.
retry_client() {
  local name=$1 spid=$2 retry_re=$3
  shift 3
  for _ in $(seq 50); do
    on_b "$@" >"$tmp/$name.cli" 2>&1
    crc=$?
    [ $crc -eq 0 ] && return
    [ -z "$retry_re" ] || grep -qE "$retry_re" "$tmp/$name.cli" || return
    kill -0 "$spid" 2>/dev/null || return
    sleep 0.2  # polls the server's readiness (above); not the synchronisation itself
  done
}

cm_pair() {
  local name=$1 rows_re=$2 want=$3 srv_args=$4
  shift 4
  [[ $name =~ $only ]] || return 0
  # shellcheck disable=SC2086  # srv_args is a word list
  on_a "$@" $srv_args >"$tmp/$name.srv" 2>&1 &
  local spid=$!
  local why=""
  retry_client "$name" "$spid" "$refused_re" "$@" 198.18.1.1
  [ $crc -eq 0 ] || why="$why client exit $crc"
  judge "$name" "$rows_re" "$want" "$spid" "$why"
}

for t in write read send atomic; do
  cm_pair "${t}_bw_rdma_cm" "$row_re" 1 "" "ib_${t}_bw" -d urnic0 -R -n 1000
  cm_pair "${t}_lat_rdma_cm" "$row_re" 1 "" "ib_${t}_lat" -d urnic0 -R -n 1000
done
cm_pair write_bw_rdma_cm_all "$row_re" 23 "" ib_write_bw -d urnic0 -R -a -n 20
cm_pair send_bw_rdma_cm_q4 "$row_re" 1 "" ib_send_bw -d urnic0 -R -q 4 -n 500
# UD over rdma_cm's UDP port space: the SIDR exchange gives the client the server's QPN and Q_Key.
cm_pair send_bw_ud_rdma_cm "$row_re" 1 "" ib_send_bw -d urnic0 -c UD -R -n 400
cm_pair send_lat_ud_rdma_cm "$row_re" 1 "" ib_send_lat -d urnic0 -c UD -R -n 1000
# rping -V verifies every ping's data on both sides; -v prints each, so 50 rows on the client.
if [[ rping =~ $only ]]; then
  on_a rping -s -a 198.18.1.1 -V -C 50 >"$tmp/rping.srv" 2>&1 &
  spid=$!
  retry_client rping "$spid" "" rping -c -a 198.18.1.1 -v -V -C 50
  wait "$spid"
  src=$?
  why=""
  [ $crc -eq 0 ] || why=" client exit $crc"
  [ $src -eq 0 ] || why="$why server exit $src"
  n=$(grep -c '^ping data: rdma-ping-' "$tmp/rping.cli")
  [ "$n" -eq 50 ] || why="$why $n pings (want 50)"
  grep -qiE 'error|fail|invalid|mismatch' "$tmp/rping.cli" "$tmp/rping.srv" &&
    why="$why error line: $(grep -hiE 'error|fail|invalid|mismatch' "$tmp/rping.cli" "$tmp/rping.srv" | head -1)"
  record rping "$why" "$(tail -1 "$tmp/rping.cli")"
fi
# cmatose_pair NAME RETRY-REGEX TOOL ARGS...: one of librdmacm's example tools (ucmatose, udaddy)
# with the server in A and the client in B (-s A's address, started again while RETRY-REGEX
# matches its failure: retry_client); both must exit 0 and print "data transfers complete" and
# "return status 0".
cmatose_pair() {
  local name=$1 retry_re=$2 tool=$3
  shift 3
  [[ $name =~ $only ]] || return 0
  on_a "$tool" "$@" >"$tmp/$name.srv" 2>&1 &
  local spid=$!
  retry_client "$name" "$spid" "$retry_re" "$tool" -s 198.18.1.1 "$@"
  wait "$spid"
  local src=$? why="" f
  [ $crc -eq 0 ] || why=" client exit $crc"
  [ $src -eq 0 ] || why="$why server exit $src"
  for f in "$tmp/$name.cli" "$tmp/$name.srv"; do
    grep -q '^return status 0$' "$f" || why="$why no 'return status 0' in ${f##*.}"
    grep -q '^data transfers complete$' "$f" || why="$why no 'data transfers complete' in ${f##*.}"
  done
  record "$name" "$why" "$(tail -1 "$tmp/$name.cli")"
}
cmatose_pair ucmatose "" ucmatose -c 4 -C 20 -S 4096
# udaddy: UD ids (SIDR), 4 of them, 20 datagrams of 1000 bytes each way; the server answers to
# the address handle it makes from each first datagram's GRH (ibv_create_ah_from_wc).
cmatose_pair udaddy "$refused_re" udaddy -c 4 -C 20 -S 1000

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
