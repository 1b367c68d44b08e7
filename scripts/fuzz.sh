#!/usr/bin/env bash
# Fuzzing (issue 8): builds the libFuzzer targets of tests/fuzz/ with clang into build-fuzz
# (-DURNIC_FUZZ=ON: coverage + ASan + UBSan everywhere) and runs each for $FUZZ_SECONDS seconds
# (default 60), all targets at once (they share the cores). Starts from the seed corpora in
# tests/fuzz/corpus/<target>/ (read only); new inputs go to build-fuzz/fuzz-out/<target>/corpus
# and crashing inputs to build-fuzz/fuzz-out/<target>/artifacts. Prints each target's number of
# executions and exits non-zero on any crash, leak, timeout or sanitizer report.
#
# Installs nothing: scripts/install-deps.sh provides clang and libclang-rt-14-dev. A crashing
# input, once fixed, goes to tests/fuzz/regressions/<target>/ so the normal suite replays it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
build="build-fuzz"
targets=(fuzz_parse fuzz_adapter fuzz_cm fuzz_ipc)

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DURNIC_FUZZ=ON -DURNIC_BUILD_TESTS=OFF \
  -DURNIC_BUILD_BENCH=OFF >/dev/null || exit 1
cmake --build "$build" --target "${targets[@]}" || exit 1

# Leaks are checked after every input (libFuzzer -detect_leaks, on by default); a UBSan report
# aborts like an ASan one.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:symbolize=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

declare -A pid
for t in "${targets[@]}"; do
  out="$build/fuzz-out/$t"
  rm -rf "$out"
  mkdir -p "$out/corpus" "$out/artifacts"
  # -timeout: an input running 30 s is a hang (a normal one takes about 1 ms; the margin is for
  # loaded CI machines); -rss_limit_mb: a runaway allocation.
  "$build/tests/fuzz/$t" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -timeout=30 \
    -rss_limit_mb=4096 -artifact_prefix="$out/artifacts/" "$out/corpus" "tests/fuzz/corpus/$t" \
    >"$out/log.txt" 2>&1 &
  pid[$t]=$!
done

status=0
for t in "${targets[@]}"; do
  out="$build/fuzz-out/$t"
  wait "${pid[$t]}"
  rc=$?
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$out/log.txt")
  echo "$t: ${execs:-?} executions in ${FUZZ_SECONDS} s (exit $rc)"
  findings=$(grep -cE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' \
    "$out/log.txt")
  if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ] || [ -n "$(ls -A "$out/artifacts")" ]; then
    echo "$t: FAILED; log $out/log.txt, inputs:"
    ls -l "$out/artifacts"
    grep -E -A40 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|^fuzz_' \
      "$out/log.txt" | head -80
    status=1
  fi
done
[ $status -eq 0 ] && echo "fuzz: clean"
exit $status
