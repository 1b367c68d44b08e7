// libFuzzer target: sequences of frames delivered to a live endpoint with QPs in every state and
// a set of memory regions (harness.h, AdapterWorld / check_adapter).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/harness.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // EAL and the mbuf pool come up once, before the first input.
  if (urnic::fuzz::adapter_pool() == nullptr) {
    std::fprintf(stderr, "fuzz_adapter: EAL or the mbuf pool is unavailable\n");
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string err = urnic::fuzz::check_adapter(data, size);
  if (!err.empty()) {
    std::fprintf(stderr, "fuzz_adapter: %s\n", err.c_str());
    std::abort();
  }
  return 0;
}
