// rsockets (librdmacm's socket API over RDMA) are not offered: rsocket() fails with
// EAFNOSUPPORT, so no rsocket descriptor ever exists. Every other r* call therefore gets an
// ordinary descriptor, and does what rdma-core's does for one: the ordinary call (rping, for one,
// waits on its channel's fd with rpoll).
#include <fcntl.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>

extern "C" {

int rsocket(int, int, int) {
  errno = EAFNOSUPPORT;
  return -1;
}
int rbind(int s, const sockaddr* a, socklen_t l) { return ::bind(s, a, l); }
int rlisten(int s, int backlog) { return ::listen(s, backlog); }
int raccept(int s, sockaddr* a, socklen_t* l) { return ::accept(s, a, l); }
int rconnect(int s, const sockaddr* a, socklen_t l) { return ::connect(s, a, l); }
int rshutdown(int s, int how) { return ::shutdown(s, how); }
int rclose(int s) { return ::close(s); }
ssize_t rrecv(int s, void* b, size_t n, int f) { return ::recv(s, b, n, f); }
ssize_t rrecvfrom(int s, void* b, size_t n, int f, sockaddr* a, socklen_t* l) {
  return ::recvfrom(s, b, n, f, a, l);
}
ssize_t rrecvmsg(int s, msghdr* m, int f) { return ::recvmsg(s, m, f); }
ssize_t rsend(int s, const void* b, size_t n, int f) { return ::send(s, b, n, f); }
ssize_t rsendto(int s, const void* b, size_t n, int f, const sockaddr* a, socklen_t l) {
  return ::sendto(s, b, n, f, a, l);
}
ssize_t rsendmsg(int s, const msghdr* m, int f) { return ::sendmsg(s, m, f); }
ssize_t rread(int s, void* b, size_t n) { return ::read(s, b, n); }
ssize_t rreadv(int s, const iovec* v, int n) { return ::readv(s, v, n); }
ssize_t rwrite(int s, const void* b, size_t n) { return ::write(s, b, n); }
ssize_t rwritev(int s, const iovec* v, int n) { return ::writev(s, v, n); }
int rpoll(pollfd* fds, nfds_t n, int timeout) { return ::poll(fds, n, timeout); }
int rselect(int n, fd_set* r, fd_set* w, fd_set* e, timeval* t) { return ::select(n, r, w, e, t); }
int rgetpeername(int s, sockaddr* a, socklen_t* l) { return ::getpeername(s, a, l); }
int rgetsockname(int s, sockaddr* a, socklen_t* l) { return ::getsockname(s, a, l); }
int rsetsockopt(int s, int level, int name, const void* v, socklen_t l) {
  return ::setsockopt(s, level, name, v, l);
}
int rgetsockopt(int s, int level, int name, void* v, socklen_t* l) {
  return ::getsockopt(s, level, name, v, l);
}
int rfcntl(int s, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void* arg = va_arg(ap, void*);  // int and pointer arguments share the register on x86-64
  va_end(ap);
  return ::fcntl(s, cmd, arg);
}
// RDMA-mapped I/O exists only on rsockets.
off_t riomap(int, void*, size_t, int, int, off_t) {
  errno = ENOTSOCK;
  return -1;
}
int riounmap(int, void*, size_t) {
  errno = ENOTSOCK;
  return -1;
}
size_t riowrite(int, const void*, size_t, off_t, int) {
  errno = ENOTSOCK;
  return 0;
}

}  // extern "C"
