// rdma_getaddrinfo / rdma_freeaddrinfo: names and services resolved through the system resolver
// (getaddrinfo), as librdmacm does for IP addresses, into RC / RDMA_PS_TCP endpoints.
#include <netdb.h>

#include <cstdlib>
#include <cstring>

#include "rdmacm/internal.h"

namespace {

sockaddr* copy_addr(const sockaddr* a, socklen_t len) {
  auto* out = static_cast<sockaddr*>(std::calloc(1, sizeof(sockaddr_storage)));
  if (out) std::memcpy(out, a, len);
  return out;
}

}  // namespace

extern "C" {

void rdma_freeaddrinfo(rdma_addrinfo* res) {
  while (res != nullptr) {
    rdma_addrinfo* next = res->ai_next;
    std::free(res->ai_src_addr);
    std::free(res->ai_dst_addr);
    std::free(res->ai_src_canonname);
    std::free(res->ai_dst_canonname);
    std::free(res);
    res = next;
  }
}

int rdma_getaddrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                     rdma_addrinfo** res) {
  const bool given = hints && ((hints->ai_dst_addr && hints->ai_dst_len != 0) ||
                               (hints->ai_src_addr && hints->ai_src_len != 0));
  if (res == nullptr || (node == nullptr && service == nullptr && !given)) {
    errno = EINVAL;
    return -1;
  }
  // RC endpoints in RDMA_PS_TCP (the default), UD endpoints in RDMA_PS_UDP (udaddy's hints), as
  // librdmacm pairs them; other QP types and port spaces are not offered.
  const bool ud = hints && (hints->ai_qp_type == IBV_QPT_UD || hints->ai_port_space == RDMA_PS_UDP);
  if (hints && ((hints->ai_qp_type != 0 && hints->ai_qp_type != IBV_QPT_RC &&
                 hints->ai_qp_type != IBV_QPT_UD) ||
                (hints->ai_port_space != 0 && hints->ai_port_space != RDMA_PS_TCP &&
                 hints->ai_port_space != RDMA_PS_UDP) ||
                (ud && (hints->ai_qp_type == IBV_QPT_RC || hints->ai_port_space == RDMA_PS_TCP)))) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (node == nullptr && service == nullptr) {
    // No name to resolve: the addresses the hints carry, as librdmacm answers (libfabric's verbs
    // provider asks so with the peer's sockaddr).
    auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    if (r == nullptr) {
      errno = ENOMEM;
      return -1;
    }
    r->ai_flags = hints->ai_flags;
    r->ai_qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC;
    r->ai_port_space = ud ? RDMA_PS_UDP : RDMA_PS_TCP;
    if (hints->ai_src_addr && hints->ai_src_len != 0) {
      r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
      r->ai_src_len = hints->ai_src_len;
      r->ai_family = hints->ai_src_addr->sa_family;
    }
    if (hints->ai_dst_addr && hints->ai_dst_len != 0) {
      r->ai_dst_addr = copy_addr(hints->ai_dst_addr, hints->ai_dst_len);
      r->ai_dst_len = hints->ai_dst_len;
      r->ai_family = hints->ai_dst_addr->sa_family;
    }
    *res = r;
    return 0;
  }
  const bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
  addrinfo h{};
  h.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
  h.ai_socktype = SOCK_STREAM;
  if (passive) h.ai_flags |= AI_PASSIVE;
  if (hints && (hints->ai_flags & RAI_NUMERICHOST)) h.ai_flags |= AI_NUMERICHOST;
  addrinfo* ai = nullptr;
  if (const int r = ::getaddrinfo(node, service, &h, &ai); r != 0) {
    errno = r == EAI_SYSTEM ? errno : r == EAI_MEMORY ? ENOMEM : EADDRNOTAVAIL;
    return r;
  }
  rdma_addrinfo* head = nullptr;
  rdma_addrinfo** tail = &head;
  for (addrinfo* p = ai; p != nullptr; p = p->ai_next) {
    if (p->ai_family != AF_INET && p->ai_family != AF_INET6) continue;
    auto* r = static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)));
    if (r == nullptr) break;
    r->ai_flags = hints ? hints->ai_flags : 0;
    r->ai_family = p->ai_family;
    r->ai_qp_type = ud ? IBV_QPT_UD : IBV_QPT_RC;
    r->ai_port_space = ud ? RDMA_PS_UDP : RDMA_PS_TCP;
    if (passive) {
      r->ai_src_addr = copy_addr(p->ai_addr, p->ai_addrlen);
      r->ai_src_len = p->ai_addrlen;
    } else {
      r->ai_dst_addr = copy_addr(p->ai_addr, p->ai_addrlen);
      r->ai_dst_len = p->ai_addrlen;
      if (hints && hints->ai_src_addr) {
        r->ai_src_addr = copy_addr(hints->ai_src_addr, hints->ai_src_len);
        r->ai_src_len = hints->ai_src_len;
      }
    }
    if (p->ai_canonname) r->ai_dst_canonname = strdup(p->ai_canonname);
    *tail = r;
    tail = &r->ai_next;
  }
  ::freeaddrinfo(ai);
  if (head == nullptr) {
    errno = EADDRNOTAVAIL;
    return -1;
  }
  *res = head;
  return 0;
}

}  // extern "C"
