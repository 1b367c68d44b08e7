// libFuzzer target: the IB connection manager fed MADs through the real QP1 receive path, mixed
// with consumer actions (cm_harness.h, check_cm).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/cm_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string err = urnic::fuzz::check_cm(data, size);
  if (!err.empty()) {
    std::fprintf(stderr, "fuzz_cm: %s\n", err.c_str());
    std::abort();
  }
  return 0;
}
