// libFuzzer target: wire::parse() and the ICRC on arbitrary bytes (harness.h, check_parse).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string err = urnic::fuzz::check_parse(data, size);
  if (!err.empty()) {
    std::fprintf(stderr, "fuzz_parse: %s\n", err.c_str());
    std::abort();
  }
  return 0;
}
