#!/usr/bin/env bash
# Sanitizer builds (issue 8), with gcc:
#  1. build-asan, -DURNIC_SANITIZE=address,undefined: the whole test suite but the style check
#     (the normal CI job runs it). UBSan is built with -fno-sanitize-recover (CMakeLists.txt), so
#     any report aborts the test that caused it; LeakSanitizer runs at every test process's exit.
#  2. build-tsan, -DURNIC_SANITIZE=thread: the ring and multi-threaded tests (test_ring,
#     test_mr_table, test_cq_wake, RcMore.EngineOnLcoreWithConcurrentPostAndPoll in test_rc_ops,
#     the API stress and CQ notification tests, the CM between two adapters, the CM with an
#     engine one application thread drives).
# Runs both, then exits non-zero if any build, test or sanitizer failed. Like the normal CI job, a
# failing test is run once more (timing-sensitive tests on a loaded 2-core machine), but a
# sanitizer report fails the run even when the retry passed: the logs are scanned for reports. Suppression files
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
# run_logged NAME CMD...: runs CMD with its output also in build-$NAME.log; fails if CMD fails or
# if the output holds any sanitizer report.
run_logged() {
  local name=$1 log="$root/build-$1.log"
  shift
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local reports
  reports=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' \
    "$log")
  if [ "$reports" -ne 0 ]; then
    echo "== sanitize: $name: $reports sanitizer report(s) in $log:"
    grep -E -A30 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' \
      "$log" | head -120
    return 1
  fi
  return "$rc"
}

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
    step run_logged asan ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE style \
    --repeat until-pass:2
fi

# ---- TSan: the rings and the tests with several threads -------------------------------------
tsan_tests='^(SpscRing|SpscRingDoorbell|SpscRingInit|Frmr|MrConcurrency|MrTable|CqWake)\.'
tsan_tests+='|/SpscRingStress\.|^RcMore\.EngineOnLcoreWithConcurrentPostAndPoll$'
# The public API with application threads, the engine on lcore 1 and the control thread
# delivering callbacks, and the CM with two control threads and the engine on an lcore.
tsan_tests+='|^ApiStress\.|^ApiCq\.|^CmPair\.'
# The CM's control threads applying QP transitions between the steps of an application thread
# that drives the engine with run_once() (issue 14 item 6).
tsan_tests+='|^CmNdkManual\.'
# One adapter over two engines, each stepped by its own thread, frames handed between them over
# the steering rings, the test thread posting and polling (issue 14 items 1, 2).
tsan_tests+='|^ApiEngines\.'
if step cmake -S . -B build-tsan -G Ninja -DURNIC_SANITIZE=thread -DURNIC_BUILD_BENCH=OFF &&
  step cmake --build build-tsan --target test_ring test_mr_table test_cq_wake test_rc_ops \
    test_api_stress test_api_cq test_cm_loopback test_cm_ndk test_api_engines; then
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1$tsan_supp" \
    step run_logged tsan ctest --test-dir build-tsan --output-on-failure -j"$jobs" \
    -R "$tsan_tests" --repeat until-pass:2
  # The filter must keep selecting tests: fail if a rename made it match nothing.
  n=$(ctest --test-dir build-tsan -N -R "$tsan_tests" | awk '/Total Tests:/ {print $3}')
  if [ "${n:-0}" -lt 20 ]; then
    echo "== sanitize: FAILED: the TSan filter selects ${n:-0} tests"
    status=1
  fi
fi

[ $status -eq 0 ] && echo "== sanitize: clean"
exit $status
