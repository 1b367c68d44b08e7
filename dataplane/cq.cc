// The CQ's wake-up write (dataplane/cq.h, "Wake-up"), kept out of line so that the header stays
// free of system calls and the rare path out of Cq::push's code.
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "dataplane/cq.h"

namespace urnic::dp {

// Issue 16 item 3: the one system call the engine makes, once per fired arm of a CQ whose
// consumer asked for an eventfd (a NIC's interrupt), so that a thread blocked in poll/epoll wakes
// without waiting for the control thread's nap. It never blocks: the eventfd is non-blocking, and
// EAGAIN means its counter is at its maximum, unread, hence readable already.
thread_local uint32_t Cq::wakes_written_ = 0;
std::atomic<uint32_t> Cq::overruns_{0};

bool Cq::wake(int fd) noexcept {
  ++wakes_written_;
  const uint64_t one = 1;
  return ::write(fd, &one, sizeof(one)) == static_cast<ssize_t>(sizeof(one)) || errno == EAGAIN;
}

}  // namespace urnic::dp
