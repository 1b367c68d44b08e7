#!/usr/bin/env bash
# ctest daemon_stock, daemon_stock_veth, daemon_stock_xdp (issue 38, "the same with Debian's stock ib_write_bw,
# ibv_rc_pingpong --chk ... in attach mode"): Debian's own perftest and ibverbs-utils binaries,
# never recompiled, on urnic's libibverbs.so.1 in attach mode (urnic-run --daemon). Each case
# runs a server process and a client process, which find each other over TCP (the tools' own
# exchange); their RC traffic goes through the daemons' engines.
#   memory: one urnicd owns the in-memory pair urnic0 / urnic1 (192.0.2.1 / .2); the server uses
#           urnic1, the client urnic0, and they meet on localhost.
#   veth:   two urnicds in two network namespaces of this test's own, each owning one end of a
#           veth pair (net_af_packet; adapters ua 198.18.2.1, ub 198.18.2.2, no kernel
#           addresses on it); the tools meet over a second veth pair (198.18.3.1/30 - .2). Needs
#           root.
#   xdp:    the same with the daemons' ports on net_af_xdp (urnic's XDP program) at MTU 3000.
#
# Every case checks both exit codes, the tool's result lines and that no error line was printed;
# ibv_rc_pingpong runs with --chk, which checks every received buffer byte for byte. Afterwards
# the daemons must hold no client and no object (every process's objects were freed). rping and
# perftest's -R (librdmacm) connect through the daemons' connection managers; ibv_ud_pingpong
# sends datagrams through them.
#
# Usage: daemon_stock_test.sh path/to/urnicd path/to/urnic-run path/to/urnicctl
# [memory|veth|xdp] [CASE-REGEX]. Exits 77 (ctest SKIP_RETURN_CODE) without the stock tools (or
# root, for veth and xdp).
set -u
urnicd=${1:?usage: daemon_stock_test.sh urnicd urnic-run urnicctl [memory|veth|xdp] [case-regex]}
run_wrapper=${2:?}
urnicctl=${3:?}
mode=${4:-memory}
# veth and xdp: two daemons on a veth pair, over net_af_packet or net_af_xdp (urnic's XDP
# program; MTU 3000, its one-page frames).
net=0
drv=net_af_packet0
mtu=4200
case "$mode" in
  veth) net=1 ;;
  xdp) net=1 drv=net_af_xdp0 mtu=3000 ;;
esac
only=${5:-.}
SKIP=77
for t in ibv_devinfo ibv_rc_pingpong ibv_srq_pingpong ibv_ud_pingpong ib_write_bw ib_read_lat ss; do
  command -v $t >/dev/null || { echo "SKIP: $t is not installed (scripts/install-deps.sh)"; exit $SKIP; }
done

tmp=$(mktemp -d)
A=stkA$$
B=stkB$$
daemons=()
cleanup() {
  for p in "${daemons[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  if [ "$net" = 1 ]; then
    ip netns pids "$A" 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns pids "$B" 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns del "$A" 2>/dev/null
    ip netns del "$B" 2>/dev/null
  fi
  rm -rf /var/run/dpdk/urnicd-stock$$*
  [ -n "${KEEP_TMP:-}" ] && echo "logs kept in $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT

# start_daemon NAME NETNS-PREFIX-CMD... : an urnicd with socket $tmp/NAME.sock, ready or exit 1.
start_daemon() {
  local name=$1
  shift
  "$@" "$urnicd" --foreground --socket "$tmp/$name.sock" --set "daemon.lock_dir=$tmp/locks" \
    --set "daemon.file_prefix=urnicd-stock$$$name" --set daemon.memory=nohuge \
    --set daemon.memory_mb=256 "${extra[@]}" >"$tmp/$name.log" 2>&1 &
  daemons+=($!)
  for _ in $(seq 300); do
    grep -q 'urnicd: ready' "$tmp/$name.log" && return 0
    kill -0 "${daemons[-1]}" 2>/dev/null || break
    sleep 0.1  # polls the condition above; it is not the synchronisation itself
  done
  echo "FAIL: urnicd $name did not start"
  cat "$tmp/$name.log"
  exit 1
}

if [ "$net" = 1 ]; then
  [ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for network namespaces and veth pairs"; exit $SKIP; }
  command -v ip >/dev/null || { echo "SKIP: no ip tool (iproute2)"; exit $SKIP; }
  ip netns add "$A" 2>/dev/null && ip netns add "$B" || { echo "SKIP: ip netns add failed"; exit $SKIP; }
  ip link add roce0 netns "$A" type veth peer name roce1 netns "$B" || { echo "SKIP: no veth"; exit $SKIP; }
  ip link add oob0 netns "$A" type veth peer name oob1 netns "$B" || exit 1
  for ns in "$A" "$B"; do
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
  done
  ip -n "$A" link set roce0 mtu $mtu up && ip -n "$B" link set roce1 mtu $mtu up || exit 1
  ip -n "$A" addr add 198.18.3.1/30 dev oob0 && ip -n "$B" addr add 198.18.3.2/30 dev oob1 || exit 1
  ip -n "$A" link set oob0 up && ip -n "$B" link set oob1 up || exit 1
  extra=(--set port.ua.devargs=$drv,iface=roce0 --set port.ua.ipv4=198.18.2.1)
  start_daemon a ip netns exec "$A"
  extra=(--set port.ub.devargs=$drv,iface=roce1 --set port.ub.ipv4=198.18.2.2)
  start_daemon b ip netns exec "$B"
  srv=(ip netns exec "$A" timeout 120 "$run_wrapper" --daemon="$tmp/a.sock")
  cli=(ip netns exec "$B" timeout 120 "$run_wrapper" --daemon="$tmp/b.sock")
  srv_dev=ua cli_dev=ub host=198.18.3.1
  in_srv_ns=(ip netns exec "$A")
  sockets=("$tmp/a.sock" "$tmp/b.sock")
else
  extra=()
  start_daemon m
  srv=(timeout 120 "$run_wrapper" --daemon="$tmp/m.sock")
  cli=("${srv[@]}")
  srv_dev=urnic1 cli_dev=urnic0 host=localhost
  in_srv_ns=()
  sockets=("$tmp/m.sock")
fi

# Waits (up to 30 s) until the server listens on its TCP port, or has exited.
wait_listen() {
  local port=$1 pid=$2
  for _ in $(seq 300); do
    "${in_srv_ns[@]}" ss -Hltn "sport = :$port" 2>/dev/null | grep -q LISTEN && return 0
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
    printf 'ok   %-22s %s\n' "$1" "$3"
  else
    failed=$((failed + 1))
    echo "FAIL $1:$2"
    echo "---- server"
    cat "$tmp/$1.srv" 2>/dev/null
    echo "---- client"
    cat "$tmp/$1.cli"
    local d
    for d in "${sockets[@]}"; do
      echo "---- daemon ${d##*/} (last lines)"
      tail -15 "${d%.sock}.log"
    done
  fi
}

# Waits (up to 30 s) until a client of the server's daemon listens on rdma_cm port $1 (the
# daemon's log says so), or the server $2 has exited.
srv_log=$([ "$net" = 1 ] && echo "$tmp/a.log" || echo "$tmp/m.log")
wait_cm_listen() {
  local port=$1 pid=$2
  for _ in $(seq 300); do
    grep -qE "listens on port $port( |\$)" "$srv_log" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1  # polls the condition above; it is not the synchronisation itself
  done
  return 1
}
# The server's adapter address and the client's (rdma_cm's ends).
sip=$([ "$net" = 1 ] && echo 198.18.2.1 || echo 192.0.2.2)
cip=$([ "$net" = 1 ] && echo 198.18.2.2 || echo 192.0.2.1)

# run_case NAME ROWS-REGEX WANT READY PORT: runs "${srv[@]}" "${scmd[@]}", waits with READY
# (wait_listen or wait_cm_listen) until it serves PORT, runs "${cli[@]}" "${ccmd[@]}"; both must
# exit 0, the client print WANT lines matching ROWS-REGEX, neither an error line.
run_case() {
  local name=$1 rows_re=$2 want=$3 ready=$4 cport=$5
  "${srv[@]}" "${scmd[@]}" >"$tmp/$name.srv" 2>&1 &
  local spid=$! why=""
  if $ready "$cport" "$spid"; then
    "${cli[@]}" "${ccmd[@]}" >"$tmp/$name.cli" 2>&1 || why="$why client exit $?"
  else
    why=" the server never listened on port $cport"
    : >"$tmp/$name.cli"
  fi
  wait "$spid" || why="$why server exit $?"
  local f
  for f in "$tmp/$name.srv" "$tmp/$name.cli"; do
    if grep -qiE 'error|fail|couldn|unable|not supported|timeout' "$f"; then
      why="$why error line in ${f##*.}: $(grep -iE 'error|fail|couldn|unable|not supported|timeout' "$f" | head -1)"
    fi
  done
  local rows
  rows=$(grep -cE "$rows_re" "$tmp/$name.cli")
  [ "$rows" -eq "$want" ] || why="$why $rows result rows (want $want)"
  record "$name" "$why" "$(grep -E "$rows_re" "$tmp/$name.cli" | tail -1 | tr -s ' \t' ' ' | cut -c1-60)"
}

# pair NAME ROWS-REGEX WANT-ROWS CMD ARGS...: the server on $srv_dev, the client on $cli_dev,
# meeting over TCP (the tools' own exchange). With -R among ARGS (perftest over rdma_cm) they
# meet on the server's adapter address through the daemons' connection managers instead.
port=18600
pair() {
  local name=$1 rows_re=$2 want=$3
  shift 3
  [[ $name =~ $only ]] || return 0
  port=$((port + 1))
  local cmd=$1
  shift
  local ready=wait_listen dest=$host
  [[ " $* " == *" -R "* ]] && ready=wait_cm_listen dest=$sip
  scmd=("$cmd" -d "$srv_dev" -p "$port" "$@")
  ccmd=("$cmd" -d "$cli_dev" -p "$port" "$@" "$dest")
  run_case "$name" "$rows_re" "$want" $ready "$port"
}

# ---- the devices are the daemon's adapters ------------------------------------------------------
if [[ devinfo =~ $only ]]; then
  "${cli[@]}" ibv_devinfo >"$tmp/devinfo.cli" 2>&1
  why=""
  grep -q "hca_id:.*$cli_dev" "$tmp/devinfo.cli" || why="$why no $cli_dev"
  grep -q 'PORT_ACTIVE' "$tmp/devinfo.cli" || why="$why port not active"
  record devinfo "$why" "$(grep -c hca_id "$tmp/devinfo.cli") device(s)"
fi

# ---- ibverbs-utils: every buffer checked (--chk), polling and event-driven ---------------------
# (Polling on this 2-core machine, the two spinning clients and the daemon's lcore take turns on
# the scheduler's time slices: a few ms a round trip, so few iterations.)
ping_re='^[0-9]+ iters in'
pair rc_pingpong "$ping_re" 1 ibv_rc_pingpong -g 1 -n 100 -c
pair rc_pingpong_events "$ping_re" 1 ibv_rc_pingpong -g 1 -n 300 -c -e
pair rc_pingpong_64k "$ping_re" 1 ibv_rc_pingpong -g 1 -n 50 -s 65536 -c -e
pair srq_pingpong "$ping_re" 1 ibv_srq_pingpong -g 1 -n 100 -q 4 -c -e
# Both processes on the server's one adapter: a QP connected to a QP of the same device, whose
# frames the daemon's engine loops back (issue 40; the appliance's intra-host case). One daemon
# serves both ends in memory mode only.
if [ "$net" = 0 ] && [[ rc_pingpong_same_device =~ $only ]]; then
  saved=$cli_dev
  cli_dev=$srv_dev
  pair rc_pingpong_same_device "$ping_re" 1 ibv_rc_pingpong -g 1 -n 100 -c -e
  cli_dev=$saved
fi

# ---- perftest --------------------------------------------------------------------------------------
row_re='^ [0-9]+ +[0-9]+ +[0-9.]+'
pair write_bw "$row_re" 1 ib_write_bw -x 1 -F -n 2000
pair read_bw "$row_re" 1 ib_read_bw -x 1 -F -n 1000
pair send_bw "$row_re" 1 ib_send_bw -x 1 -F -n 1000
pair send_bw_events "$row_re" 1 ib_send_bw -x 1 -F -e -n 1000
pair write_bw_q4_inline "$row_re" 1 ib_write_bw -x 1 -F -q 4 -s 32 -I 64 -n 1000
pair read_lat "$row_re" 1 ib_read_lat -x 1 -F -n 100

pair atomic_bw "$row_re" 1 ib_atomic_bw -x 1 -F -n 1000
pair atomic_lat "$row_re" 1 ib_atomic_lat -x 1 -F -n 100
# Connected through rdma_cm (librdmacm on the daemons' connection managers).
pair write_bw_cm "$row_re" 1 ib_write_bw -R -x 1 -F -n 2000
pair send_lat_cm "$row_re" 1 ib_send_lat -R -x 1 -F -n 200
pair send_lat "$row_re" 1 ib_send_lat -x 1 -F -n 200

# ---- datagrams: UD QPs and address handles through the daemons (--chk checks every buffer) -----
pair ud_pingpong "$ping_re" 1 ibv_ud_pingpong -g 1 -n 100 -s 512 -c
pair ud_pingpong_events "$ping_re" 1 ibv_ud_pingpong -g 1 -n 100 -s 1000 -c -e

# ---- librdmacm through the daemons' connection managers (IB CM on QP1) -------------------------
# cm_pair NAME ROWS-REGEX WANT PORT "SERVER ARGS" "CLIENT ARGS": the server (on $sip) and the
# client (from $cip) of one rdma_cm tool, as run_case judges them. rdma_cm servers listen on no
# TCP port: the daemon's log says when they listen (its "listens on port" line).
cm_pair() {
  local name=$1
  [[ $name =~ $only ]] || return 0
  command -v "${5%% *}" >/dev/null || return 0
  read -r -a scmd <<<"$5"
  read -r -a ccmd <<<"$6"
  run_case "$name" "$2" "$3" wait_cm_listen "$4"
}
# rping: -V checks every ping's data, -v prints each (counted).
port=$((port + 1))
cm_pair rping '^ping data: rdma-ping-' 20 $port "rping -s -a $sip -p $port -C 20 -V" \
  "rping -c -a $sip -I $cip -p $port -C 20 -v -V"
# udaddy: rdma_cm's UDP port space (SIDR on QP1), then datagrams both ways on UD QPs; its port
# is rdma_cm's default for it (7174), in the datagram port space.
cm_pair udaddy '^return status 0' 1 7174 "udaddy -b $sip -C 10" "udaddy -s $sip -b $cip -C 10"

# ---- every client gone, every object freed ---------------------------------------------------------
# (urnicctl lists itself.)
others() { grep -E '^ *[0-9]+ ' "$tmp/clients" | grep -v ' urnicctl '; }
for sock in "${sockets[@]}"; do
  for _ in $(seq 100); do
    URNIC_DAEMON=$sock "$urnicctl" clients >"$tmp/clients" 2>&1
    others >/dev/null || break
    sleep 0.1  # polls until the daemon has seen every connection close
  done
  if others >/dev/null; then
    record "clients_gone_${sock##*/}" " clients left: $(cat "$tmp/clients")" ""
  else
    record "clients_gone_${sock##*/}" "" "no client left"
  fi
done

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
