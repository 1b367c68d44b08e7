#!/bin/bash
# The Linux rxe guest for the interop tests (../shared/rxe-peer), in netns rxehost:
#
#   rxe_guest.sh up MTU STATE    build the image if there is none, boot vm0 with RXE_MTU=MTU
#                                (restarting it if it runs with another MTU), check rxe0
#   rxe_guest.sh down STATE      stop the guest and delete the netns
#
# It always exits 0: STATE gets "ready mtu=MTU" or "skip <reason>", and every interop case
# reports SKIPPED with that reason when the machine cannot run the guest (not root, no qemu and
# none to install, image build or boot failure). Only the default netns rxehost and image folder
# /var/tmp/rxe-peer are used (a second guest elsewhere, e.g. RXE_NETNS=rxeperf, is not touched);
# URNIC_INTEROP_NETNS / URNIC_INTEROP_PEER_DIR override them.
set -uo pipefail
cmd=${1:?up|down}
if [ "$cmd" = up ]; then
  MTU=${2:?mtu}
  STATE=${3:?state file}
else
  STATE=${2:?state file}
fi
HERE=$(cd "$(dirname "$0")" && pwd)
PEER=${URNIC_RXE_PEER:-$HERE/../../../shared/rxe-peer}
export RXE_NETNS=${URNIC_INTEROP_NETNS:-rxehost}
export RXE_PEER_DIR=${URNIC_INTEROP_PEER_DIR:-/var/tmp/rxe-peer}
LOG=$(dirname "$STATE")/interop-guest.log
# One user of the guest at a time, across processes (two ctest runs on one machine): the cases
# hold this lock while they run and call us with URNIC_INTEROP_LOCKED=1.
LOCK=${URNIC_INTEROP_LOCK:-/var/tmp/urnic-interop.lock}
if [ -z "${URNIC_INTEROP_LOCKED:-}" ]; then
  exec 9> "$LOCK"
  flock -w 900 9 || { echo "interop guest: could not get $LOCK"; exit 0; }
fi
# Children must not inherit the lock's descriptor: qemu daemonizes and would hold it for life.
peer() { "$PEER/$1" "${@:2}" 9>&-; }

skip() {
  echo "skip $*" > "$STATE"
  echo "interop guest: SKIP: $*"
  exit 0
}

if [ "$cmd" = down ]; then
  if [ -x "$PEER/run.sh" ] && [ "$(id -u)" = 0 ]; then
    peer run.sh down >> "$LOG" 2>&1 || true
  fi
  rm -f "$STATE"
  echo "interop guest: down"
  exit 0
fi

t0=$(date +%s.%N)
: > "$LOG"
[ "$(id -u)" = 0 ] || skip "not root: the guest needs a network namespace, tap devices and raw sockets"
[ -x "$PEER/run.sh" ] && [ -x "$PEER/build.sh" ] || skip "no rxe-peer scripts at $PEER"
command -v ip > /dev/null || skip "iproute2 (ip) is not installed"
ip netns list > /dev/null 2>&1 || skip "network namespaces are not available"

# The image: build.sh installs qemu with apt when it is missing, and fails when it cannot.
if [ ! -s "$RXE_PEER_DIR/vmlinuz" ] || [ ! -s "$RXE_PEER_DIR/initrd.img" ]; then
  if ! peer build.sh >> "$LOG" 2>&1; then
    command -v qemu-system-x86_64 > /dev/null ||
      skip "no qemu-system-x86_64 and build.sh could not install it (see $LOG)"
    skip "rxe-peer build.sh failed: $(tail -1 "$LOG")"
  fi
fi
command -v qemu-system-x86_64 > /dev/null || skip "no qemu-system-x86_64"

# A guest already running with the wrong MTU is restarted.
pidf=$RXE_PEER_DIR/run/vm0/qemu.pid
if [ -s "$pidf" ] && kill -0 "$(cat "$pidf")" 2> /dev/null; then
  if tr '\0' ' ' < "/proc/$(cat "$pidf")/cmdline" | grep -q "rxe.mtu=$MTU "; then
    if peer gx.sh -t 20 0 'rdma link' 2>> "$LOG" | grep -q 'state ACTIVE'; then
      echo "ready mtu=$MTU" > "$STATE"
      echo "interop guest: vm0 already up with MTU $MTU"
      exit 0
    fi
  fi
  peer run.sh stop 0 >> "$LOG" 2>&1 || true
fi
if ! RXE_MTU=$MTU peer run.sh start 0 >> "$LOG" 2>&1; then
  skip "the guest did not boot: $(grep -v '^ ' "$LOG" | tail -2 | tr '\n' ' ')"
fi
out=$(peer gx.sh -t 60 0 'rdma link; ip -br addr show eth0' 2>&1) ||
  skip "the guest does not run commands: $out"
echo "$out" | grep -q 'state ACTIVE' || skip "rxe0 is not ACTIVE in the guest: $out"
echo "ready mtu=$MTU" > "$STATE"
printf 'interop guest: vm0 up with MTU %s in %.1f s (%s)\n' "$MTU" \
  "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{print b-a}')" \
  "$(grep -o 'accel [a-z]*\|TCG' "$LOG" | head -1)"
exit 0
