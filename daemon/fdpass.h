// One packet and at most one file descriptor (SCM_RIGHTS) over a Unix socket, for both ends of
// urnicd's control socket: the daemon passes the memfds of rings and shared memory to a client,
// a client passes the memfd of memory it registers in place to the daemon.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace urnic::ipc {

// sendmsg of `size` bytes with `fd` attached (none when fd < 0). Returns sendmsg's result.
inline ssize_t send_with_fd(int sock, const void* msg, size_t size, int fd, int flags) {
  iovec iov{const_cast<void*>(msg), size};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  if (fd >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr* cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
  }
  return ::sendmsg(sock, &m, flags | MSG_NOSIGNAL);
}

// recvmsg of one packet into `buf` (MSG_TRUNC: the packet's whole length is returned even when
// it did not fit). The descriptor it carried goes to *fd (-1 if none); whatever else came (more
// descriptors than one: the control data is truncated) is closed, so that a peer cannot fill
// our descriptor table. Returns recvmsg's result.
inline ssize_t recv_with_fd(int sock, void* buf, size_t size, int* fd, int flags) {
  iovec iov{buf, size};
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  const ssize_t n = ::recvmsg(sock, &m, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
  *fd = -1;
  if (n < 0) return n;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&m); cm != nullptr; cm = CMSG_NXTHDR(&m, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int f = -1;
      std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
      if (*fd < 0) {
        *fd = f;
      } else {
        ::close(f);
      }
    }
  }
  return n;
}

}  // namespace urnic::ipc
