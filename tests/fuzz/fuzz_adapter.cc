// libFuzzer target: sequences of frames delivered to a live endpoint with QPs in every state and
// a set of memory regions (harness.h, AdapterWorld / check_adapter).
#include <cstdint>
#include <cstdio>
#include <cstdlib>

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
  return urnic::fuzz::verdict("fuzz_adapter", urnic::fuzz::check_adapter(data, size));
}
