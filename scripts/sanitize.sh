#!/usr/bin/env bash
# Sanitizer builds (issue 8), with gcc:
#  1. build-asan, -DURNIC_SANITIZE=address,undefined: the whole test suite but the style check
#     (the normal CI job runs it). UBSan is built with -fno-sanitize-recover (CMakeLists.txt), so
#     any report aborts the test that caused it; LeakSanitizer runs at every test process's exit.
#  2. build-tsan, -DURNIC_SANITIZE=thread: the ring and multi-threaded tests (test_ring,
#     test_mr_table, RcMore.EngineOnLcoreWithConcurrentPostAndPoll in test_rc_ops).
# Runs both, then exits non-zero if any build, test or sanitizer failed. Suppression files
# tests/sanitizers/lsan.supp and tests/sanitizers/tsan.supp are used when present; they may name
# DPDK internals (rte_*, eal_*) only, never urnic code. None is needed today.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
supp=$root/tests/sanitizers
jobs=${SANITIZE_JOBS:-2}

lsan_supp="" tsan_supp=""
[ -f "$supp/lsan.supp" ] && lsan_supp=":suppressions=$supp/lsan.supp"
[ -f "$supp/tsan.supp" ] && tsan_supp=":suppressions=$supp/tsan.supp"

status=0
step() {
  echo "== sanitize: $*"
  "$@" || {
    echo "== sanitize: FAILED: $*"
    status=1
    return 1
  }
}

# ---- ASan + UBSan: everything --------------------------------------------------------------
if step cmake -S . -B build-asan -G Ninja -DURNIC_SANITIZE=address,undefined \
  -DURNIC_BUILD_BENCH=OFF && step cmake --build build-asan; then
  ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1" \
    LSAN_OPTIONS="print_suppressions=0$lsan_supp" \
    UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
    step ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE style
fi

# ---- TSan: the rings and the tests with several threads -------------------------------------
tsan_tests='^(SpscRing|SpscRingDoorbell|SpscRingInit|Frmr|MrConcurrency|MrTable)\.'
tsan_tests+='|/SpscRingStress\.|^RcMore\.EngineOnLcoreWithConcurrentPostAndPoll$'
if step cmake -S . -B build-tsan -G Ninja -DURNIC_SANITIZE=thread -DURNIC_BUILD_BENCH=OFF &&
  step cmake --build build-tsan --target test_ring test_mr_table test_rc_ops; then
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1$tsan_supp" \
    step ctest --test-dir build-tsan --output-on-failure -j"$jobs" -R "$tsan_tests"
  # The filter must keep selecting tests: fail if a rename made it match nothing.
  n=$(ctest --test-dir build-tsan -N -R "$tsan_tests" | awk '/Total Tests:/ {print $3}')
  if [ "${n:-0}" -lt 10 ]; then
    echo "== sanitize: FAILED: the TSan filter selects ${n:-0} tests"
    status=1
  fi
fi

[ $status -eq 0 ] && echo "== sanitize: clean"
exit $status
