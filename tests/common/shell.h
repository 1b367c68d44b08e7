// Shell commands and the private network namespace of the tests that create interfaces
// (tests/loopback/port_vdev_test.cc, tests/twoproc, tests/interop). A command runs in the
// calling thread's network namespace (the child inherits it).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace urnic::test {

// Runs a shell command and returns its exit code (-1 if it did not exit normally).
inline int sh(const std::string& cmd) {
  const int st = std::system(cmd.c_str());
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// What a shell command printed on its standard output.
inline std::string sh_output(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

// DPDK's dpdk-telemetry.py against the process whose EAL file prefix is `file_prefix`, with
// `cmd` on its stdin (e.g. "/urnic/adapters"): what it printed (20 s at most).
inline std::string dpdk_telemetry(const std::string& file_prefix, const std::string& cmd) {
  return sh_output("echo '" + cmd + "' | timeout 20 dpdk-telemetry.py -f " + file_prefix + " 2>&1");
}

// Writes `value` to the file at `path` (a sysctl, say); whether that worked.
inline bool write_file(const std::string& path, const std::string& value) {
  std::ofstream f(path);
  f << value;
  f.flush();
  return static_cast<bool>(f);
}

// Whether the process moved into its own network namespace (a test environment does that before
// any test), and if not, why.
struct Netns {
  bool ok = false;
  std::string why;
};

inline Netns& netns() {
  static Netns n;
  return n;
}

}  // namespace urnic::test
