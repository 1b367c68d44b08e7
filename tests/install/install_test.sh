#!/usr/bin/env bash
# The installed package as a consumer sees it (ctest install_consumer):
#  1. `cmake --install BUILD` into a fresh prefix: include/urnic/ only, no internal header;
#  2. tests/install/consumer/ (find_package(urnic), urnic::urnic) builds examples/hello_rdma.cc
#     against that prefix, and the program runs;
#  3. the same file compiled and linked with `pkg-config --cflags --libs urnic`, and run.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR CXX GENERATOR
set -euo pipefail
build=$1 src=$2 work=$3 cxx=$4 generator=${5:-Ninja}
fail() {
  echo "install_test: FAILED: $*" >&2
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
echo "== install into $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log"
  fail "cmake --install"
}
[ -f "$prefix/include/urnic/urnic.h" ] || fail "include/urnic/urnic.h not installed"
[ -f "$prefix/include/urnic/runtime.h" ] || fail "include/urnic/runtime.h not installed"
extra=$(cd "$prefix/include" && find . -type f ! -path './urnic/*.h')
[ -z "$extra" ] || fail "headers outside include/urnic/ installed: $extra"
if grep -rnE '#include *[<"](control|dataplane)/' "$prefix/include"; then
  fail "a public header includes a private one"
fi

echo "== find_package(urnic): configure, build and run tests/install/consumer"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -G "$generator" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DHELLO_RDMA_SOURCE="$src/examples/hello_rdma.cc" >"$work/consumer-configure.log" || {
  cat "$work/consumer-configure.log"
  fail "configuring the consumer project"
}
cmake --build "$work/consumer" --verbose >"$work/consumer-build.log" 2>&1 || {
  cat "$work/consumer-build.log"
  fail "building the consumer project"
}
# No include directory of the source or build tree (but the prefix) on a compile line.
check_includes() {
  local dir
  { grep -oE -- '(-I|-isystem|-iquote) *[^ ]+' || true; } | sed -E 's/^(-I|-isystem|-iquote) *//' |
    while read -r dir; do
      case $dir in
      "$work"/*) ;;
      "$src"* | "$build"*) fail "$1 has the include directory $dir" ;;
      esac
    done
}
check_includes "the consumer's compile line" <"$work/consumer-build.log"
timeout 120 "$work/consumer/hello_rdma" || fail "hello_rdma (find_package build)"

echo "== pkg-config --cflags --libs urnic"
pc=$(dirname "$(find "$prefix" -name urnic.pc | head -1)")
[ -n "$pc" ] || fail "urnic.pc not installed"
flags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs urnic) || fail "pkg-config urnic"
check_includes "pkg-config --cflags urnic" <<<"$flags"
# shellcheck disable=SC2086 # the flags are words
"$cxx" -std=c++20 -o "$work/hello_rdma_pc" "$src/examples/hello_rdma.cc" $flags ||
  fail "compiling with pkg-config's flags: $flags"
timeout 120 "$work/hello_rdma_pc" || fail "hello_rdma (pkg-config build)"
echo "install_test: OK"
