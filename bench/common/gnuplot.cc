#include "bench/common/gnuplot.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

extern char** environ;

namespace urnic::bench {
namespace {

// The last non-empty line gnuplot wrote to `fd` (its stderr, a temporary file).
std::string last_line(int fd) {
  std::string all;
  char buf[4096];
  if (lseek(fd, 0, SEEK_SET) != 0) return "";
  ssize_t n = 0;
  while ((n = read(fd, buf, sizeof buf)) > 0) all.append(buf, static_cast<size_t>(n));
  while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
  const size_t nl = all.rfind('\n');
  std::string last = nl == std::string::npos ? all : all.substr(nl + 1);
  // gnuplot indents its messages to point at the column of the error.
  last.erase(0, last.find_first_not_of(' '));
  return last;
}

bool write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // EPIPE: gnuplot stopped reading (it reports why itself)
    off += static_cast<size_t>(n);
  }
  return true;
}

// Starts gnuplot with `in` as stdin, `err` as stderr and stdout discarded. The pipe's write end
// is close-on-exec, so that gnuplot sees end-of-file when we close it.
int spawn(int in, int err, pid_t* pid) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, err, 2);
  char arg0[] = "gnuplot";
  char* argv[] = {arg0, nullptr};
  const int rc = posix_spawnp(pid, "gnuplot", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc;
}

constexpr int kGnuplotTimeoutS = 60;

}  // namespace

std::string gp_quote(const std::string& s) {
  std::string o = "'";
  for (char ch : s) {
    if (ch == '\'') o += '\'';
    if (ch != '\n') o += ch;
  }
  return o + "'";
}

bool run_gnuplot(const std::string& script, const std::vector<std::string>& outputs,
                 std::string* why) {
  char tmpl[] = "/tmp/urnic-gnuplot-XXXXXX";
  const int err = mkstemp(tmpl);
  if (err < 0) {
    *why = std::string("gnuplot not run: no temporary file: ") + std::strerror(errno);
    return false;
  }
  unlink(tmpl);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    *why = std::string("gnuplot not run: pipe: ") + std::strerror(errno);
    close(err);
    return false;
  }
  for (const std::string& o : outputs) unlink(o.c_str());  // an old plot must not pass for new
  pid_t pid = 0;
  const int rc = spawn(p[0], err, &pid);
  close(p[0]);
  if (rc != 0) {
    close(p[1]);
    close(err);
    *why = rc == ENOENT ? "gnuplot not found"
                        : std::string("gnuplot could not be started: ") + std::strerror(rc);
    return false;
  }
  // A gnuplot that exits early closes the pipe: the write fails with EPIPE, not a signal.
  struct sigaction ign {
  }, old{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ign, &old);
  (void)write_all(p[1], script + "\nexit\n");
  close(p[1]);
  sigaction(SIGPIPE, &old, nullptr);
  // Bounded: a gnuplot that hangs (a broken terminal, a huge data block) is killed after
  // kGnuplotTimeoutS and the report keeps its tables.
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kGnuplotTimeoutS);
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 || (done < 0 && errno == EINTR)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      close(err);
      *why = "gnuplot did not finish within " + std::to_string(kGnuplotTimeoutS) + " s";
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::string said = last_line(err);
  close(err);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why =
        "gnuplot failed: " +
        (said.empty() ? std::string("exit status ") + std::to_string(WEXITSTATUS(status)) : said);
    return false;
  }
  for (const std::string& o : outputs) {
    struct stat st {};
    if (stat(o.c_str(), &st) != 0 || st.st_size == 0) {
      *why = "gnuplot did not write " + o + (said.empty() ? "" : ": " + said);
      return false;
    }
  }
  return true;
}

}  // namespace urnic::bench
