// Child processes for the multi-process tests (tests/twoproc, tests/interop): start a command
// with its output in a file, wait for it with a deadline (killed when it passes), read what it
// printed. The child inherits the caller's network namespace.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/shell.h"

extern char** environ;

namespace urnic::test {

class Proc {
 public:
  // Runs `argv` (argv[0] is a path, or a name looked up in PATH) with stdout and stderr going to
  // a temporary file.
  explicit Proc(std::vector<std::string> argv) : argv_(std::move(argv)) {
    char tmpl[] = "/tmp/urnic-proc-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    out_path_ = tmpl;
    std::vector<char*> args;
    for (auto& a : argv_) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // The child dies with the test (SIGKILL when the thread that started it exits): a test
      // process that aborts (a failed ASSERT in a helper, a sanitizer report, ctest's timeout)
      // leaves no daemon or peer running behind it, holding ports and cores. Only
      // async-signal-safe calls between fork and exec.
      (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the test died before prctl took effect
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    if (pid_ < 0) pid_ = -1;
    ::close(fd);
    start_ = std::chrono::steady_clock::now();
  }
  ~Proc() {
    if (pid_ > 0 && !done_) {
      ::kill(pid_, SIGKILL);
      int st = 0;
      ::waitpid(pid_, &st, 0);
    }
    ::unlink(out_path_.c_str());
  }
  Proc(const Proc&) = delete;
  Proc& operator=(const Proc&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  // Sends `sig` to the process (while it has not been waited for).
  void signal(int sig) const {
    if (pid_ > 0 && !done_) ::kill(pid_, sig);
  }
  // Waits until some line of the output matches `re` (true), or the process exits or `timeout`
  // passes first (false).
  bool wait_for_line(const std::string& re, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (has(re)) return true;
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        done_ = true;
        code_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
        return has(re);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Waits until the process exits or `timeout` passes (then SIGTERM, SIGKILL). Returns the exit
  // code, 128 + signal when killed by one, or -1 when it could not be started.
  int wait(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return -1;
    if (done_) return code_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int st = 0;
    for (;;) {
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() > deadline) {
        timed_out_ = true;
        ::kill(pid_, SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (::waitpid(pid_, &st, WNOHANG) != pid_) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &st, 0);
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    done_ = true;
    elapsed_ = std::chrono::steady_clock::now() - start_;
    code_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    return code_;
  }
  bool timed_out() const { return timed_out_; }
  double seconds() const { return std::chrono::duration<double>(elapsed_).count(); }

  std::string output() const {
    std::ifstream in(out_path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  // Whether some line of the output matches `re` (std::regex_search); the match in *m.
  bool has(const std::string& re, std::smatch* m = nullptr) const {
    const std::string out = output();
    std::istringstream lines(out);
    const std::regex r(re);
    for (std::string line; std::getline(lines, line);) {
      std::smatch mm;
      if (std::regex_search(line, mm, r)) {
        if (m != nullptr) {
          // Keep the matched line alive in the caller's smatch: copy into a static buffer.
          last_line_ = line;
          std::regex_search(last_line_, *m, r);
        }
        return true;
      }
    }
    return false;
  }
  std::string command() const {
    std::string s;
    for (const auto& a : argv_) s += (s.empty() ? "" : " ") + a;
    return s;
  }

 private:
  std::vector<std::string> argv_;
  std::string out_path_;
  pid_t pid_ = -1;
  bool done_ = false;
  bool timed_out_ = false;
  int code_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::duration elapsed_{};
  mutable std::string last_line_;
};

}  // namespace urnic::test
