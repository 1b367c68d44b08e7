// urnic::Status: NTSTATUS values, as NDKPI and NetworkDirect use them (ndstatus.mc; ndkpi.md
// §7.7). Every public call returns one synchronously; completions carry one asynchronously
// (house style rule 19). The numeric values are the NTSTATUS codes, so a Status can be printed
// and compared with NDK documentation directly.
#pragma once

#include <cstdint>
#include <string_view>

namespace urnic {

enum class [[nodiscard]] Status : uint32_t{
    // Success and informational.
    kSuccess = 0x00000000,  // done.
    kTimeout = 0x00000102,  // a wait ran out; retrying may succeed.
    kPending = 0x00000103,  // accepted; exactly one completion callback follows.
    // Warnings.
    kBufferOverflow = 0x80000005,  // data was truncated into a smaller buffer.
    kDeviceBusy = 0x80000011,      // object still in use (e.g. MR with a bound MW); retry later.
    kNoMoreEntries = 0x8000001A,   // queue full (post), or nothing more to return.
    // Errors.
    kUnsuccessful = 0xC0000001,
    kAccessViolation = 0xC0000005,  // bad key, rights, PD or bounds. Not retryable.
    kInvalidHandle = 0xC0000008,
    kInvalidParameter = 0xC000000D,  // bad argument. Not retryable.
    kInvalidDeviceRequest = 0xC0000010,
    kNoMemory = 0xC0000017,
    kAccessDenied = 0xC0000022,  // the caller may not do this (e.g. the daemon's socket mode).
    kBufferTooSmall = 0xC0000023,
    kInvalidParameterMix = 0xC0000030,
    kDataOverrun = 0xC000003C,  // SGEs reference more data than the adapter can send.
    kInsufficientResources = 0xC000009A,
    kDeviceNotReady = 0xC00000A3,
    kIoTimeout = 0xC00000B5,  // transport retries exhausted / peer gone.
    kNotSupported = 0xC00000BB,
    kBadNetworkName = 0xC00000CC,
    kInternalError = 0xC00000E5,
    kCancelled = 0xC0000120,        // flushed: Flush, disconnect, close, or an earlier error.
    kRemoteResources = 0xC000013D,  // ND_REMOTE_ERROR: the request failed at the remote QP.
    kInvalidAddress = 0xC0000141,
    kInvalidDeviceState = 0xC0000184,  // object in the wrong state for the call (e.g. QP in ERR).
    kInvalidBufferSize = 0xC0000206,
    kTooManyAddresses = 0xC0000209,
    kAddressAlreadyExists = 0xC000020A,
    kConnectionRefused = 0xC0000236,
    kConnectionInvalid = 0xC000023A,
    kConnectionActive = 0xC000023B,
    kNetworkUnreachable = 0xC000023C,
    kHostUnreachable = 0xC000023D,
    kConnectionAborted = 0xC0000241,
    kDeviceRemoved = 0xC00002B6,
    kAddressAlreadyAssociated = 0xC0000328,
    kImplementationLimit = 0xC000042B,
};

// NT_SUCCESS(): severity bits 00 (success) or 01 (informational).
constexpr bool nt_success(Status s) noexcept { return static_cast<int32_t>(s) >= 0; }

// The single source of status names (house style rule 20), e.g. "STATUS_ACCESS_VIOLATION".
constexpr std::string_view to_string(Status s) noexcept {
  switch (s) {
#define URNIC_STATUS_NAME(e, n) \
  case Status::e:               \
    return n
    URNIC_STATUS_NAME(kSuccess, "STATUS_SUCCESS");
    URNIC_STATUS_NAME(kTimeout, "STATUS_TIMEOUT");
    URNIC_STATUS_NAME(kPending, "STATUS_PENDING");
    URNIC_STATUS_NAME(kBufferOverflow, "STATUS_BUFFER_OVERFLOW");
    URNIC_STATUS_NAME(kDeviceBusy, "STATUS_DEVICE_BUSY");
    URNIC_STATUS_NAME(kNoMoreEntries, "STATUS_NO_MORE_ENTRIES");
    URNIC_STATUS_NAME(kUnsuccessful, "STATUS_UNSUCCESSFUL");
    URNIC_STATUS_NAME(kAccessViolation, "STATUS_ACCESS_VIOLATION");
    URNIC_STATUS_NAME(kInvalidHandle, "STATUS_INVALID_HANDLE");
    URNIC_STATUS_NAME(kInvalidParameter, "STATUS_INVALID_PARAMETER");
    URNIC_STATUS_NAME(kInvalidDeviceRequest, "STATUS_INVALID_DEVICE_REQUEST");
    URNIC_STATUS_NAME(kNoMemory, "STATUS_NO_MEMORY");
    URNIC_STATUS_NAME(kAccessDenied, "STATUS_ACCESS_DENIED");
    URNIC_STATUS_NAME(kBufferTooSmall, "STATUS_BUFFER_TOO_SMALL");
    URNIC_STATUS_NAME(kInvalidParameterMix, "STATUS_INVALID_PARAMETER_MIX");
    URNIC_STATUS_NAME(kDataOverrun, "STATUS_DATA_OVERRUN");
    URNIC_STATUS_NAME(kInsufficientResources, "STATUS_INSUFFICIENT_RESOURCES");
    URNIC_STATUS_NAME(kDeviceNotReady, "STATUS_DEVICE_NOT_READY");
    URNIC_STATUS_NAME(kIoTimeout, "STATUS_IO_TIMEOUT");
    URNIC_STATUS_NAME(kNotSupported, "STATUS_NOT_SUPPORTED");
    URNIC_STATUS_NAME(kBadNetworkName, "STATUS_BAD_NETWORK_NAME");
    URNIC_STATUS_NAME(kInternalError, "STATUS_INTERNAL_ERROR");
    URNIC_STATUS_NAME(kCancelled, "STATUS_CANCELLED");
    URNIC_STATUS_NAME(kRemoteResources, "STATUS_REMOTE_RESOURCES");
    URNIC_STATUS_NAME(kInvalidAddress, "STATUS_INVALID_ADDRESS");
    URNIC_STATUS_NAME(kInvalidDeviceState, "STATUS_INVALID_DEVICE_STATE");
    URNIC_STATUS_NAME(kInvalidBufferSize, "STATUS_INVALID_BUFFER_SIZE");
    URNIC_STATUS_NAME(kTooManyAddresses, "STATUS_TOO_MANY_ADDRESSES");
    URNIC_STATUS_NAME(kAddressAlreadyExists, "STATUS_ADDRESS_ALREADY_EXISTS");
    URNIC_STATUS_NAME(kConnectionRefused, "STATUS_CONNECTION_REFUSED");
    URNIC_STATUS_NAME(kConnectionInvalid, "STATUS_CONNECTION_INVALID");
    URNIC_STATUS_NAME(kConnectionActive, "STATUS_CONNECTION_ACTIVE");
    URNIC_STATUS_NAME(kNetworkUnreachable, "STATUS_NETWORK_UNREACHABLE");
    URNIC_STATUS_NAME(kHostUnreachable, "STATUS_HOST_UNREACHABLE");
    URNIC_STATUS_NAME(kConnectionAborted, "STATUS_CONNECTION_ABORTED");
    URNIC_STATUS_NAME(kDeviceRemoved, "STATUS_DEVICE_REMOVED");
    URNIC_STATUS_NAME(kAddressAlreadyAssociated, "STATUS_ADDRESS_ALREADY_ASSOCIATED");
    URNIC_STATUS_NAME(kImplementationLimit, "STATUS_IMPLEMENTATION_LIMIT");
#undef URNIC_STATUS_NAME
    default:
      return "STATUS_UNKNOWN";
  }
}

}  // namespace urnic
