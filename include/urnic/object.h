// The common shape of every NDK-style object (ndkpi.md §1.1-§1.4): an object type, close with
// NDK's asynchronous protocol, QueryExtension, the consumer callback types, and Handle<T>, the
// RAII owner that closes an object when it goes out of scope.
//
// Objects are allocated by the provider and handed out by the create calls of their parent
// (Adapter creates CQs and PDs; a PD creates MRs, MWs, SRQs and QPs). The provider frees an
// object after its close has completed; the consumer never deletes one.
//
// Lifetime past the adapter: closing the Adapter closes (tears down) every object the consumer
// has not closed, but does not free it. Such an object stays valid until the consumer closes
// it: its calls return kInvalidDeviceState (or do nothing: get_results* return 0, arm and flush
// are ignored), and its close() frees it, returning kSuccess with no callback. So a Handle may
// outlive its Adapter (and the Engine) and be reset in any order; each object must be closed
// exactly once, by its Handle or by Object::close, or it leaks.
//
// Asynchronous protocol (ndkpi.md §1.3):
//  - A create or request call returns kSuccess (done now, no callback), kPending (exactly one
//    completion callback follows), or an error (nothing happened, no callback).
//  - close() never fails. It returns kSuccess (the object is gone now) or kPending (the close
//    callback, if one was given, follows and is the last callback ever made for the object).
//    An antecedent closed before its successors (a PD before its QPs, a CQ before the QPs that
//    complete into it, an MR before the windows bound to it) pends until the last one is
//    closed (ndkpi.md §1.4).
//  - Every callback (completions and CQ/SRQ notifications) runs on the adapter's control
//    thread, one at a time, never on an application thread or an engine. A callback may call
//    any API function, including close() of the object it is about, except the synchronous form
//    of a create or request (a null completion) and adapter close.
//  - A null completion makes a create or request synchronous (an urnic convenience, see
//    docs/api.md): the call returns only when the operation is done, with its final status. When
//    the engine is not running on an lcore, the calling thread runs engine steps while it waits,
//    so it must be the thread that drives the engine.
#pragma once

#include <cstdint>
#include <utility>

#include "urnic/status.h"
#include "urnic/types.h"

namespace urnic {

class Object;

// NDK_FN_CREATE_COMPLETION: a create that returned kPending finished. On success `object` is the
// new object (cast it to the type created); on failure it is null.
using CreateCompletion = void (*)(void* request_context, Status status, Object* object);
// NDK_FN_REQUEST_COMPLETION: any other request that returned kPending finished.
using RequestCompletion = void (*)(void* request_context, Status status);
// NDK_FN_CLOSE_COMPLETION: a close that returned kPending finished; the object is gone.
using CloseCompletion = void (*)(void* request_context);
// NDK_FN_CQ_NOTIFICATION_CALLBACK: an armed CQ's condition was met (kSuccess), a notification
// request was cancelled (kCancelled, CqExtension), or the CQ overran (kBufferOverflow: the CQ
// and every QP completing into it are dead).
using CqNotificationCallback = void (*)(void* context, Status cq_status);
// NDK_FN_SRQ_NOTIFICATION_CALLBACK: the SRQ's fill level dropped below the armed threshold.
using SrqNotificationCallback = void (*)(void* context, Status srq_status);

// A GUID-like extension interface id (NdkQueryExtension's ExtensionInterfaceID).
struct ExtensionId {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend constexpr bool operator==(const ExtensionId&, const ExtensionId&) = default;
};

namespace detail {
// The provider's side of the objects (never complete in the public headers).
struct ObjectImpl;
struct CqImpl;
struct PdImpl;
struct MrImpl;
struct MwImpl;
struct SrqImpl;
struct QpImpl;
template <class Self, class Pub>
struct ImplOf;

// The typed query_extension<E>() of Object and Adapter.
template <class E, class T>
E* query_extension_as(T& object) noexcept {
  void* p = nullptr;
  return object.query_extension(E::kId, E::kVersion, &p) == Status::kSuccess ? static_cast<E*>(p)
                                                                             : nullptr;
}
}  // namespace detail

class Object {
 public:
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  // NDK_OBJECT_HEADER::ObjectType. Any thread.
  ObjectType object_type() const noexcept;

  // NdkCloseXxx. Returns kSuccess (closed now; `completion` is not called) or kPending
  // (`completion`, if not null, is called once the object is gone, and is its last callback).
  // Never fails. After close() the object must not be used again (a second close is ignored);
  // while its close pends, the calls that would start new work on it, or with it, return
  // kInvalidDeviceState (docs/api.md "Bad input"), but once it is closed it is freed. After the
  // adapter's close (which tore the object down, see above) it frees the object at once:
  // kSuccess, and `completion` is not called.
  // Any thread, including from inside a callback; never concurrently with another call on the
  // same object except as NDK allows (ndkpi.md §1.3). Closing a QP flushes its outstanding work
  // (completions with kCancelled) before the QP goes away.
  Status close(CloseCompletion completion = nullptr, void* request_context = nullptr) noexcept;

  // NdkQueryExtension: the extension interface `id` at `version` (same major, minor up to the
  // one implemented). kSuccess with *iface set, or kNotSupported. The interface lives as long
  // as the object. Any thread.
  Status query_extension(const ExtensionId& id, Version version, void** iface) noexcept;
  // Typed form: E names its kId and kVersion (include/urnic/extensions.h). Null if unsupported.
  template <class E>
  E* query_extension() noexcept {
    return detail::query_extension_as<E>(*this);
  }

  // The provider frees objects (on close); the consumer never deletes one.
  static void operator delete(void*) = delete;
  static void operator delete[](void*) = delete;

 protected:
  explicit Object(detail::ObjectImpl* impl) noexcept : impl_(impl) {}
  ~Object() = default;
  detail::ObjectImpl* impl_;
};

namespace detail {

// The base of each concrete object type (Cq, Pd, Mr, Mw, Srq, Qp), `Impl` being its provider
// side: the provider's ImplOf<Impl, type> makes, owns and destroys the public object, which no
// one else can construct (each type inherits this constructor) or delete (Object). The calls
// of the type reach their Impl through impl(), in the provider, where Impl is complete.
template <class Impl>
class ObjectOf : public Object {
 protected:
  Impl* impl() const noexcept { return static_cast<Impl*>(impl_); }

 private:
  template <class, class>
  friend struct ImplOf;
  // The provider side as its base, whichever kind it is (an attached adapter's objects have
  // their own, control/ndk_remote.h).
  ObjectImpl* base_impl() const noexcept { return impl_; }
  explicit ObjectOf(ObjectImpl* impl) noexcept : Object(impl) {}
};

}  // namespace detail

// Owns one object: closes it (without a completion) when destroyed or reset. close() hands the
// object to an explicit close with a completion. Move-only. Safe to destroy, reset or close
// after the object's adapter has closed (the object is then freed, with no callback).
template <class T>
class Handle {
 public:
  Handle() noexcept = default;
  explicit Handle(T* p) noexcept : p_(p) {}
  Handle(Handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  // Gives up ownership without closing.
  T* release() noexcept { return std::exchange(p_, nullptr); }
  // Closes the object (no completion) and becomes empty.
  void reset() noexcept {
    if (T* p = std::exchange(p_, nullptr)) (void)p->close();
  }
  // Closes the object with a completion (Object::close()) and becomes empty; kSuccess if empty.
  Status close(CloseCompletion completion, void* request_context) noexcept {
    T* p = std::exchange(p_, nullptr);
    return p != nullptr ? p->close(completion, request_context) : Status::kSuccess;
  }

 private:
  T* p_ = nullptr;
};

}  // namespace urnic
