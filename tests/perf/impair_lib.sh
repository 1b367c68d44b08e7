# Shared by the impairment tests (tests/perf/perf_impair_test.sh): three network namespaces with
# a forwarding hop (urnic-hop) in the middle of the RoCE path.
#
#   $A: roce0 ==veth== h0 :$H (urnic-hop h0 h1): h1 ==veth== roce1 :$B   RoCEv2, MTU 4200,
#                                                                       198.18.1.1 / .2 (urnic's)
#   $A: oob0  ==veth== oob1 :$B                                         perftest's TCP exchange,
#                                                                       198.18.0.1/30 - .2
# Source it, then: need_built PATH..., impair_setup (exits 77 when namespaces or veth are not available), hop_start
# ARGS..., hop_stop, perf_pair NAME TEST ARGS... (sets PAIR_OK, PAIR_WHY, PAIR_ROW, PAIR_GBPS,
# PAIR_MPPS; the outputs are in $tmp/NAME.srv and .cli). Needs $perf and $hop set.

SKIP=77
A=urnA$$
B=urnB$$
H=urnH$$
tmp=$(mktemp -d)
hop_pid=""

skip() {
  echo "SKIP: $*"
  exit $SKIP
}

# need_built PATH...: each must be an executable (a test of unbuilt tools fails, not skips).
need_built() {
  for b in "$@"; do
    [ -x "$b" ] || {
      echo "FAIL: $b is not built"
      exit 1
    }
  done
}

# pass / fail MESSAGE: one check's outcome, counted in $passed / $failed.
passed=0
failed=0
pass() {
  passed=$((passed + 1))
  echo "ok   $*"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL $*"
}

impair_cleanup() {
  [ -n "$hop_pid" ] && kill "$hop_pid" 2>/dev/null && wait "$hop_pid" 2>/dev/null
  ip netns del "$A" 2>/dev/null
  ip netns del "$B" 2>/dev/null
  ip netns del "$H" 2>/dev/null
  rm -rf "$tmp"
}

impair_setup() {
  [ "$(id -u)" -eq 0 ] || skip "needs root to create network namespaces and veth pairs"
  command -v ip >/dev/null || skip "the ip tool (iproute2) is not installed"
  trap impair_cleanup EXIT
  for ns in "$A" "$B" "$H"; do
    ip netns add "$ns" 2>"$tmp/err" || skip "ip netns add failed: $(cat "$tmp/err")"
    ip -n "$ns" link set lo up
    # No IPv6 on the links: no router solicitations or DAD frames on the RoCE path.
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 2>/dev/null
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 2>/dev/null
  done
  ip link add roce0 netns "$A" type veth peer name h0 netns "$H" 2>"$tmp/err" ||
    skip "cannot create a veth pair: $(cat "$tmp/err")"
  ip link add roce1 netns "$B" type veth peer name h1 netns "$H" || exit 1
  ip link add oob0 netns "$A" type veth peer name oob1 netns "$B" || exit 1
  ip -n "$A" link set roce0 mtu 4200 up && ip -n "$B" link set roce1 mtu 4200 up || exit 1
  for i in h0 h1; do
    ip -n "$H" link set "$i" mtu 4200 promisc on up || exit 1
  done
  ip -n "$A" addr add 198.18.0.1/30 dev oob0 && ip -n "$B" addr add 198.18.0.2/30 dev oob1 || exit 1
  ip -n "$A" link set oob0 up && ip -n "$B" link set oob1 up || exit 1
}

# hop_start ARGS...: the hop with these impairments, waiting until it is ready.
hop_start() {
  hop_stop
  ip netns exec "$H" "$hop" h0 h1 "$@" >"$tmp/hop.out" 2>&1 &
  hop_pid=$!
  hop_wait_ready urnic-hop
}

# switch_start ARGS...: urnic-switch (needs $switch) in the hop's place, on h0 and h1 through
# net_af_packet, with these options (rate, RED/ECN, impairments); its counters end in hop.out.
switch_start() {
  hop_stop
  ip netns exec "$H" "$switch" --port=net_af_packet0,iface=h0 --port=net_af_packet1,iface=h1 \
    "$@" >"$tmp/hop.out" 2>&1 &
  hop_pid=$!
  hop_wait_ready urnic-switch
}

# hop_wait_ready NAME: waits (5 s at most) for the hop's "ready" line; exits the test otherwise.
hop_wait_ready() {
  for _ in $(seq 100); do
    grep -q ready "$tmp/hop.out" && return 0
    kill -0 "$hop_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "FAIL: $1 did not start: $(cat "$tmp/hop.out")"
  exit 1
}

# hop_stop: stops the hop; its counters are in $tmp/hop.out.
hop_stop() {
  [ -n "$hop_pid" ] || return 0
  kill "$hop_pid" 2>/dev/null
  wait "$hop_pid" 2>/dev/null
  hop_pid=""
}

# perf_pair NAME TEST ARGS...: server in A (lcore 0), client in B (lcore 1), -v on both so that
# each prints every counter; the run passes when both exit 0 and print "result: PASS". SRV_ARGS /
# CLI_ARGS: options for one side only (word-split).
perf_pair() {
  local name=$1 t=$2
  shift 2
  # WAIT_OPTS: the waiting options (override to run an urnic-perf that predates them).
  local common=(--no-progress --idle-yield=64 -v ${WAIT_OPTS---timeout=60} "$@")
  timeout 120 ip netns exec "$A" "$perf" "$t" --vdev=net_af_packet0,iface=roce0${VDEV_OPTS-} --ip=198.18.1.1 \
    --lcores=0 "${common[@]}" ${SRV_ARGS-} >"$tmp/$name.srv" 2>&1 &
  local spid=$!
  timeout 120 ip netns exec "$B" "$perf" "$t" --vdev=net_af_packet0,iface=roce1${VDEV_OPTS-} --ip=198.18.1.2 \
    --lcores=1 ${RETRY_OPTS---connect-retry=30} "${common[@]}" ${CLI_ARGS-} 198.18.0.1 \
    >"$tmp/$name.cli" 2>&1
  local crc=$?
  wait "$spid"
  local src=$?
  PAIR_WHY=""
  [ $crc -eq 0 ] || PAIR_WHY="client exit $crc"
  [ $src -eq 0 ] || PAIR_WHY="$PAIR_WHY server exit $src"
  grep -q 'result: PASS' "$tmp/$name.cli" || PAIR_WHY="$PAIR_WHY client did not PASS"
  grep -q 'result: PASS' "$tmp/$name.srv" || PAIR_WHY="$PAIR_WHY server did not PASS"
  PAIR_ROW=$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli" | tail -1)
  # BW rows: bytes iterations peak avg(Gb/s with --report_gbits) msg-rate(Mpps).
  PAIR_GBPS=$(echo "$PAIR_ROW" | awk '{print $4}')
  PAIR_MPPS=$(echo "$PAIR_ROW" | awk '{print $5}')
  [ -z "$PAIR_WHY" ]
}

# kdrop_start NS DEV PERCENT: the kernel drops PERCENT % of the frames DEV sends (random), in its
# qdisc: HTB with a second class whose leaf is a zero-length pfifo, chosen by a classic-BPF
# filter on a random number (this kernel has cls_bpf but neither netem nor the gact action). The
# frame is refused at enqueue, as a full qdisc refuses it. urnic-perf must open the port with
# qdisc_bypass=0 (VDEV_OPTS) for its frames to meet the qdisc. kdrop_stop NS DEV removes it;
# kdrop_count NS DEV prints the frames dropped so far.
kdrop_start() {
  local ns=$1 dev=$2 pct=$3
  local thr
  thr=$(awk -v p="$pct" 'BEGIN { printf "%d", (1 - p / 100) * 65536 }')
  kdrop_stop "$ns" "$dev"
  local t=(ip netns exec "$ns" tc)
  "${t[@]}" qdisc add dev "$dev" root handle 1: htb default 1 r2q 100000 &&
    "${t[@]}" class add dev "$dev" parent 1: classid 1:1 htb rate 100gbit &&
    "${t[@]}" class add dev "$dev" parent 1: classid 1:2 htb rate 100gbit &&
    "${t[@]}" qdisc add dev "$dev" parent 1:2 handle 20: pfifo limit 0 &&
    # ld rand; and 0xffff; jge thr -> ret -1 (match: class 1:2), else ret 0 (no match: default).
    "${t[@]}" filter add dev "$dev" parent 1: prio 1 bpf \
      bytecode "5,32 0 0 4294963256,84 0 0 65535,53 0 1 $thr,6 0 0 4294967295,6 0 0 0," classid 1:2
}
kdrop_stop() {
  ip netns exec "$1" tc qdisc del dev "$2" root 2>/dev/null
  return 0
}
kdrop_count() {
  ip netns exec "$1" tc -s qdisc show dev "$2" | awk '/^qdisc pfifo 20:/ { f = 1 } f && /dropped/ { gsub(",", ""); for (i = 1; i <= NF; i++) if ($i == "(dropped") { print $(i + 1); exit } }'
}

# pair_dump NAME: both sides' output and the hop's counters (after a failure).
pair_dump() {
  echo "---- server"
  cat "$tmp/$1.srv"
  echo "---- client"
  cat "$tmp/$1.cli"
  echo "---- hop"
  cat "$tmp/hop.out"
}
