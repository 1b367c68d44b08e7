// libFuzzer target: urnicd's control protocol decoder (daemon/protocol.h) on arbitrary bytes, as
// a hostile client process sends them. Checks, beyond "no crash, no read outside the input":
// - what decode_request accepts is exactly the size of its type, and its copy decodes again to
//   the same bytes (the daemon acts on what it validated, nothing else);
// - every name it accepts is a valid name; a refusal always names the field;
// - decode_reply (the client's side) accepts only replies of the asked type and seq, of the
//   reply size or the bare head of a failure.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "daemon/protocol.h"

namespace {

using namespace urnic;
using namespace urnic::ipc;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "fuzz_ipc: %s\n", what);
  std::abort();
}

void check_request(const uint8_t* data, size_t size) {
  Request r;
  const Decoded d = decode_request({data, size}, &r);
  if (d.status != Status::kSuccess) {
    if (d.why == nullptr || *d.why == '\0') broken("a refusal without a field");
    return;
  }
  const auto type = static_cast<MsgType>(r.h.type);
  if (request_size(type) != size || r.h.length != size) broken("accepted a size not its type's");
  if (std::memcmp(&r, data, size) != 0) broken("the decoded copy differs from the input");
  Request again;
  if (decode_request({reinterpret_cast<const uint8_t*>(&r), size}, &again).status !=
      Status::kSuccess)
    broken("an accepted request does not decode again");
  if (type == MsgType::kHello && !valid_name(r.hello.name)) broken("accepted a bad hello name");
  if (type == MsgType::kQueryAdapter && !valid_name(r.query_adapter.name))
    broken("accepted a bad adapter name");
}

void check_reply(const uint8_t* data, size_t size) {
  if (size < sizeof(Header)) return;
  Header h;
  std::memcpy(&h, data, sizeof h);
  for (MsgType t :
       {MsgType::kHello, MsgType::kListAdapters, MsgType::kQueryAdapter, MsgType::kListClients,
        MsgType::kAllocShared, MsgType::kCreatePd, MsgType::kCreateCq, MsgType::kCreateQp,
        MsgType::kModifyQp, MsgType::kRegisterMr, MsgType::kDestroy, MsgType::kShareMemory}) {
    std::vector<uint8_t> out(reply_size(t));
    const Decoded d = decode_reply({data, size}, t, h.seq, out.data(), out.size());
    if (d.status != Status::kSuccess) continue;
    if (h.type != (static_cast<uint16_t>(t) | static_cast<uint16_t>(MsgType::kReplyFlag)))
      broken("accepted a reply of another type");
    if (size != out.size() && size != sizeof(ReplyHead)) broken("accepted a reply of a bad size");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_request(data, size);
  check_reply(data, size);
  return 0;
}
