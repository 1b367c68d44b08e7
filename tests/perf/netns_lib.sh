# Shared by the two-namespace perf tests (perf_veth_test.sh, perf_rdma_cm_test.sh): two network
# namespaces joined by a veth pair for RoCEv2.
#
#   $A: roce0 ==veth== roce1 :$B   MTU 4200, no IPv6 (no router solicitations or DAD frames
#                                  reach the RoCE port), no kernel addresses: 198.18.1.1 / .2
#                                  are urnic's own, answered by its ARP
#
# Source it, then: netns_need PATH... (exits 77 without root or iproute2, 1 when a PATH is not
# built), netns_pair_setup (exits 77 when namespaces or veth are not available), netns_oob_setup
# (the TCP link), peer_pair (below). Cleanup runs on exit: the namespaces, $tmp, and the
# processes listed in $bg.

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

# netns_oob_setup: a second veth pair for perftest's TCP exchange, oob0 198.18.0.1/30 in $A and
# oob1 198.18.0.2/30 in $B.
netns_oob_setup() {
  ip link add oob0 netns "$A" type veth peer name oob1 netns "$B" || exit 1
  ip -n "$A" addr add 198.18.0.1/30 dev oob0 && ip -n "$B" addr add 198.18.0.2/30 dev oob1 || exit 1
  ip -n "$A" link set oob0 up && ip -n "$B" link set oob1 up || exit 1
}

# ---- urnic-perf against urnic-perf or stock perftest (perf_rdma_cm_test.sh, perf_ud_test.sh) ----
# Set before peer_pair: perf, urun (paths), PAIR_FLAGS (the mode's flags, e.g. (-R) or (-c UD)),
# PAIR_ADDR (the address the client names), PAIR_MARK (a line every urnic-perf side prints in that
# mode), PAIR_ALL_ROWS (result rows of -a), PAIR_REFUSED (what a perftest client prints when the
# server is not listening yet: it is started again).
passed=0
failed=0
# pass / fail MESSAGE: one check's verdict, counted in passed / failed.
pass() {
  passed=$((passed + 1))
  echo "ok   $*"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL $*"
}
have_perftest=1

# peer_pair NAME SERVER CLIENT TEST ARGS...: SERVER / CLIENT are perf (urnic-perf) or pt (stock
# perftest under urnic-run); the server in A, the client in B. Both must exit 0 with the result
# rows; an urnic-perf side must print "result: PASS" and PAIR_MARK, two urnic-perfs must verify
# data, and an urnic-perf client must not have had to disconnect the test's QPs itself.
peer_pair() {
  local name=$1 sk=$2 ck=$3 t=$4
  shift 4
  command -v "ib_$t" >/dev/null && [ -x "$urun" ] || have_perftest=0
  if [ "$sk$ck" != perfperf ] && [ $have_perftest -eq 0 ]; then
    echo "skip $name: perftest or urnic-run missing"
    return
  fi
  local common=(--no-progress --idle-yield=64 --timeout=30)
  local scmd ccmd
  if [ "$sk" = perf ]; then
    scmd=("$perf" --vdev=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 "${common[@]}"
      "$t" "${PAIR_FLAGS[@]}" "$@")
  else
    scmd=("$urun" --devargs=net_af_packet0,iface=roce0 --ip=198.18.1.1 --lcores=0 "ib_$t"
      -d urnic0 -x 1 "${PAIR_FLAGS[@]}" "$@")
  fi
  if [ "$ck" = perf ]; then
    ccmd=("$perf" --vdev=net_af_packet0,iface=roce1 --ip=198.18.1.2 --lcores=1 "${common[@]}"
      --connect-retry=20 "$t" "${PAIR_FLAGS[@]}" "$@" "$PAIR_ADDR")
  else
    ccmd=("$urun" --devargs=net_af_packet0,iface=roce1 --ip=198.18.1.2 --lcores=1 "ib_$t"
      -d urnic0 -x 1 "${PAIR_FLAGS[@]}" "$@" "$PAIR_ADDR")
  fi
  timeout 90 ip netns exec "$A" "${scmd[@]}" >"$tmp/$name.srv" 2>&1 &
  local spid=$! crc
  # A perftest client does not retry: it is started again while the server is not listening yet.
  for _ in $(seq 100); do
    timeout 90 ip netns exec "$B" "${ccmd[@]}" >"$tmp/$name.cli" 2>&1
    crc=$?
    [ $crc -ne 0 ] && [ "$ck" = pt ] && grep -qE "$PAIR_REFUSED" "$tmp/$name.cli" &&
      kill -0 "$spid" 2>/dev/null || break
    sleep 0.1 # paces the attempts; each one's outcome is what is waited for
  done
  wait "$spid"
  local src=$?
  local want_rows=1 rows why="" side kind
  case " $* " in *" -a "*) want_rows=$PAIR_ALL_ROWS ;; esac
  rows=$(grep -cE '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli")
  [ $crc -eq 0 ] || why="client exit $crc"
  [ $src -eq 0 ] || why="$why server exit $src"
  [ "$rows" -eq "$want_rows" ] || why="$why $rows result rows (want $want_rows)"
  for side in srv cli; do
    kind=$sk
    [ $side = cli ] && kind=$ck
    [ "$kind" = perf ] || continue
    grep -q 'result: PASS' "$tmp/$name.$side" || why="$why $side did not PASS"
    grep -qE "$PAIR_MARK" "$tmp/$name.$side" || why="$why $side: no '$PAIR_MARK'"
  done
  # The server disconnects the test's QPs at the end, or its process does as it exits (the
  # kernel would; urnic's librdmacm's exit hook): the client must not have to do it itself.
  if grep -q 'did not disconnect' "$tmp/$name.cli"; then
    why="$why $(grep -o 'the server did not disconnect.*' "$tmp/$name.cli")"
  fi
  if [ "$sk$ck" = perfperf ] && ! grep -q 'data: .*verified' "$tmp/$name.srv" "$tmp/$name.cli"; then
    why="$why no data verified"
  fi
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    printf 'ok   %-26s %s\n' "$name" "$(grep -E '^ [0-9]+ +[0-9]+ ' "$tmp/$name.cli" | tail -1)"
  else
    failed=$((failed + 1))
    echo "FAIL $name:$why"
    echo "---- server"
    cat "$tmp/$name.srv"
    echo "---- client"
    cat "$tmp/$name.cli"
  fi
}
