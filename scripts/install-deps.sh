#!/usr/bin/env bash
# Installs every Debian package urnic needs to build, test and benchmark. Idempotent; needs root
# (or sudo). Debian 12: DPDK 22.11, oneTBB 2021.8, GoogleTest 1.12, Google Benchmark 1.7.
set -euo pipefail

packages=(
  build-essential g++ cmake ninja-build pkg-config
  dpdk-dev libdpdk-dev libnuma-dev      # DPDK 22.11 (libdpdk pkg-config, net_ring/tap/af_packet)
  libtbb-dev                            # control plane containers and task groups
  libgtest-dev libgmock-dev googletest  # tests
  libbenchmark-dev                      # micro-benchmarks
  clang-format                          # check_style
  clang libclang-rt-14-dev llvm         # fuzz targets (-fsanitize=fuzzer); llvm-symbolizer
  iproute2 python3                      # namespaces/veth for two-process tests; scripts
  iputils-ping                          # perf_xdp: the kernel's own traffic beside urnic
  valgrind                              # bench/cost (instructions per message)
  gnuplot-nox                           # PNG plots: bench/run-all, bench/latency-curve, --report
  tcpdump                               # perf_switch's optional capture (SWITCH_PCAP)
  libibverbs-dev librdmacm-dev          # verbs/: the rdma-core 44 headers the drop-in libraries match
  perftest ibverbs-utils rdmacm-utils   # the stock verbs tools the verbs suite runs unmodified
  qperf libfabric-bin ucx-utils         # more RDMA programs the apps test runs unmodified
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
