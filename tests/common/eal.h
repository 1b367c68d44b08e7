// EAL bring-up for every test suite, benchmark harness and fuzz target that needs it: without
// hugepages (so it works anywhere, no root needed), once per process. eal_init() is idempotent:
// the first caller's options win and later callers join the running EAL.
#pragma once

#include "control/eal.h"
#include "urnic/status.h"

namespace urnic::test {

// `lcores` "0" for code that never launches an engine on a second lcore.
inline Status eal_up(const char* lcores = "0-1", unsigned memory_mb = 512,
                     const char* log_level = "*:warning") {
  ctl::EalOptions o;
  o.program = "urnic-test";
  o.memory = ctl::EalOptions::Memory::kNoHuge;
  o.memory_mb = memory_mb;
  o.lcores = lcores;
  o.log_level = log_level;
  return ctl::eal_init(o);
}

}  // namespace urnic::test
