// libFuzzer target: the IB connection manager fed MADs through the real QP1 receive path, mixed
// with consumer actions (cm_harness.h, check_cm).
#include <cstdint>

#include "tests/fuzz/cm_harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return urnic::fuzz::verdict("fuzz_cm", urnic::fuzz::check_cm(data, size));
}
