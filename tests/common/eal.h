// EAL bring-up for every test suite, benchmark harness and fuzz target that needs it, through the
// public bring-up (urnic/runtime.h): without hugepages (so it works anywhere, no root needed),
// once per process. runtime_init() is idempotent: the first caller's options win and later
// callers join the running EAL.
#pragma once

#include "urnic/runtime.h"
#include "urnic/status.h"

namespace urnic::test {

// `lcores` "0" for code that never launches an engine on a second lcore.
inline Status eal_up(const char* lcores = "0-1", unsigned memory_mb = 512,
                     const char* log_level = "*:warning") {
  RuntimeConfig c;
  c.program = "urnic-test";
  c.memory = RuntimeConfig::Memory::kNoHuge;
  c.memory_mb = memory_mb;
  c.lcores = lcores;
  c.log_level = log_level;
  return runtime_init(c);
}

}  // namespace urnic::test
