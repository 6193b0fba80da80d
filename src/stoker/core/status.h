// Status and Result<T>: errors as values.
//
// The engine never throws across threads or stages: a kernel returns a Status (or a
// Result<T> when it also produces a value), a stage stores it next to the sample it
// belongs to, and the Python binding translates it into an exception in one place.
// An OK Status holds no allocation, so returning one on the hot path is free.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace stoker {

// What went wrong, coarse enough for policy decisions (retry? skip? which Python
// exception?). The message carries the detail.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument,   // a caller passed a bad option
  kNotFound,          // a file or object does not exist
  kIOError,           // reading failed (permissions, device, network)
  kManifestError,     // a manifest line is not valid JSON or not a valid sample
  kCorruptImage,      // an image's bytes are damaged or truncated
  kUnsupportedImage,  // a format or an image feature the decoders do not handle
  kLimitExceeded,     // a configured limit (pixels, consecutive failures) was hit
  kCancelled,         // the work was stopped before it finished
  kInternal,          // a bug in Stoker
  kPermissionDenied,  // the store refused access (HTTP 403): missing-or-forbidden
  kUnavailable,       // throttled or unavailable after every retry; never "not found"
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status OK() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // Empty for OK.
  const std::string& message() const;
  // "CorruptImage: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>"; OK stays OK. Used to name
  // the sample, file or byte offset an error belongs to as it travels outwards.
  Status WithContext(std::string_view context) const;

  // Marks a Status as deliberately ignored.
  void IgnoreError() const {}

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  // Shared so that copying an error is cheap; an error is never mutated in place.
  std::shared_ptr<const State> state_;
};

namespace status {
// Short constructors: status::NotFound("no such file: ", path).
template <typename... Args>
std::string Concat(Args&&... args) {
  std::string out;
  (out.append(std::string_view(args)), ...);
  return out;
}
#define STOKER_STATUS_FACTORY(Name)                            \
  template <typename... Args>                                  \
  Status Name(Args&&... args) {                                \
    return Status(StatusCode::k##Name, Concat(std::forward<Args>(args)...)); \
  }
STOKER_STATUS_FACTORY(InvalidArgument)
STOKER_STATUS_FACTORY(NotFound)
STOKER_STATUS_FACTORY(IOError)
STOKER_STATUS_FACTORY(ManifestError)
STOKER_STATUS_FACTORY(CorruptImage)
STOKER_STATUS_FACTORY(UnsupportedImage)
STOKER_STATUS_FACTORY(LimitExceeded)
STOKER_STATUS_FACTORY(Cancelled)
STOKER_STATUS_FACTORY(Internal)
STOKER_STATUS_FACTORY(PermissionDenied)
STOKER_STATUS_FACTORY(Unavailable)
#undef STOKER_STATUS_FACTORY
}  // namespace status

// A value or the Status explaining why there is none. Never holds an OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : storage_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : storage_(std::move(status)) {  // NOLINT
    if (std::get<Status>(storage_).ok()) {
      storage_ = Status(StatusCode::kInternal, "Result constructed from an OK Status");
    }
  }

  bool ok() const { return std::holds_alternative<T>(storage_); }
  Status status() const { return ok() ? Status::OK() : std::get<Status>(storage_); }

  // Precondition: ok().
  T& operator*() & { return std::get<T>(storage_); }
  const T& operator*() const& { return std::get<T>(storage_); }
  T&& operator*() && { return std::get<T>(std::move(storage_)); }
  T* operator->() { return &std::get<T>(storage_); }
  const T* operator->() const { return &std::get<T>(storage_); }
  T ValueOrDie() && { return std::get<T>(std::move(storage_)); }

 private:
  std::variant<T, Status> storage_;
};

}  // namespace stoker

#define STOKER_CONCAT_IMPL(a, b) a##b
#define STOKER_CONCAT(a, b) STOKER_CONCAT_IMPL(a, b)

// Returns the Status from the enclosing function if `expr` is not OK.
#define STOKER_RETURN_NOT_OK(expr)                 \
  do {                                             \
    ::stoker::Status _stoker_st = (expr);          \
    if (!_stoker_st.ok()) return _stoker_st;       \
  } while (false)

#define STOKER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                 \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(*tmp)

// `STOKER_ASSIGN_OR_RETURN(auto x, MakeX());` binds the value or returns the error.
#define STOKER_ASSIGN_OR_RETURN(lhs, rexpr) \
  STOKER_ASSIGN_OR_RETURN_IMPL(STOKER_CONCAT(_stoker_result_, __LINE__), lhs, rexpr)
