// libFuzzer target: wire::parse() and the ICRC on arbitrary bytes (harness.h, check_parse).
#include <cstdint>

#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return urnic::fuzz::verdict("fuzz_parse", urnic::fuzz::check_parse(data, size));
}
