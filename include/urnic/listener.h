// NDK_LISTENER (ndkpi.md §5.1, §5.4): listens on an IP CM port (rdma_cm's RDMA_PS_TCP service
// ID 0x0000000001060000 + port) of the adapter's addresses and hands each connection request to
// its connect event callback as a new Connector (connector.h); or, after listen_datagram, on a
// port of rdma_cm's UDP port space (SIDR_REQs for service ID 0x0000000001110000 + port) whose
// requests arrive as datagram Connectors (Connector::is_datagram). The two port spaces are
// separate: a TCP and a UDP listener may have the same port.
//
// Threading and callbacks follow object.h. While connect events are paused, and from the moment
// the listener's close is requested, requests are refused (REJ or SIDR_REP status 1, as if nobody
// listened).
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "urnic/adapter.h"
#include "urnic/connector.h"
#include "urnic/object.h"
#include "urnic/status.h"

namespace urnic {

namespace detail {
struct ListenerImpl;
}  // namespace detail

class Listener final : public detail::ObjectOf<detail::ListenerImpl> {
 public:
  // NdkListen on `address`: AF_INET / AF_INET6, the adapter's address or the wildcard; port 0
  // picks one from 49152-65535 (get_local_address tells which). Done at once: kSuccess (no
  // completion call); kInvalidAddress (not an address of the adapter);
  // kAddressAlreadyAssociated (another listener has the port); kInvalidParameter (bad address,
  // or already listening); kTooManyAddresses (no free ephemeral port).
  Status listen(const sockaddr* address, uint32_t address_length, RequestCompletion completion,
                void* request_context) noexcept;
  // The same in rdma_cm's UDP port space, for datagram (SIDR) requests; same results. A listener
  // listens in one port space, once.
  Status listen_datagram(const sockaddr* address, uint32_t address_length,
                         RequestCompletion completion, void* request_context) noexcept;
  // NdkGetLocalAddress: the address and port listened on. kSuccess; kBufferTooSmall with
  // *length set; kInvalidDeviceState before listen().
  Status get_local_address(sockaddr* address, uint32_t* length) noexcept;
  // NdkControlConnectEvents: pause (true) refuses new requests (a datagram request gets SIDR
  // status 1, "service ID not supported"); false resumes.
  void control_connect_events(bool pause) noexcept;

 private:
  using ObjectOf::ObjectOf;  // made by the provider only (object.h)
};

// NdkCreateListener: `connect_event` (not null) is called with `connect_event_context` for every
// connection request once listen() succeeded. kSuccess with *out set (never pends);
// kInvalidParameter; kInvalidDeviceState when the adapter is closing.
Status create_listener(Adapter& adapter, ConnectEventCallback connect_event,
                       void* connect_event_context, CreateCompletion completion,
                       void* request_context, Handle<Listener>* out) noexcept;

}  // namespace urnic
