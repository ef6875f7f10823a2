// Status and Result<T>: the error type that crosses component boundaries.
// Shaped like std::expected (C++23): a Result holds a value or a non-OK Status.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace vramd {

enum class Code {
  kOk = 0,
  kInvalidArgument,     // bad input from a caller: 400
  kNotFound,            // 404
  kConflict,            // lost a race / wrong owner: 409
  kInsufficient,        // does not fit (capacity): 409 for reservations
  kUnauthenticated,     // 401
  kPayloadTooLarge,     // 413
  kUnavailable,         // a dependency (Valkey, Kubernetes API) is unreachable: 503
  kInternal,            // a bug or an unexpected answer: 500
};

const char* CodeName(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status Conflict(std::string m) { return {Code::kConflict, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {Code::kUnauthenticated, std::move(m)}; }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {             // NOLINT: implicit by design
    assert(!std::get<Status>(v_).ok() && "Result needs a non-OK status or a value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace vramd
