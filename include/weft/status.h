// weft::Status and weft::Result<T>: how every fallible call in weft reports failure.
//
// A Status is either OK (no allocation, one null pointer) or carries a code and a message written
// for the user ("rank 3 called allreduce(count=10, fp32, sum) but rank 0 called ..."). Result<T>
// holds either a value or a non-OK Status. Both are [[nodiscard]]. Propagate with WEFT_TRY.
// Thread-safety: values; copy or move freely, no shared state.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace weft {

// The codes mirror ncclResult_t where one exists, so the NCCL ABI maps them one to one.
enum class StatusCode : int {
  kOk = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,      // an OS call failed (socket, shm, mmap, fork)
  kInternalError = 3,    // a bug in weft
  kInvalidArgument = 4,  // bad pointer, count, rank, dtype, op
  kInvalidUsage = 5,     // calls that disagree across ranks, wrong order, use after abort
  kRemoteError = 6,      // a peer failed, died or aborted
  kInProgress = 7,
  kTimeout = 8,
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  // Copies: an OK status (every call that succeeds returns one) copies a null pointer.
  Status(const Status& other) : rep_(other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) rep_ = other.rep_ ? std::make_unique<Rep>(*other.rep_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status ok_status() { return Status(); }

  bool ok() const { return rep_ == nullptr; }
  StatusCode code() const { return rep_ ? rep_->code : StatusCode::kOk; }
  const std::string& message() const;
  // "InvalidArgument: <message>", or "OK".
  std::string to_string() const;
  // Prepends context: "allreduce: " + message. OK stays OK.
  Status with_context(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

// Shorthands for the common codes.
Status invalid_argument(std::string message);
Status invalid_usage(std::string message);
Status system_error(std::string message);  // appends strerror(errno) when errno is set
Status internal_error(std::string message);
Status remote_error(std::string message);
Status timeout_error(std::string message);

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok()) status_ = Status(StatusCode::kInternalError, "Result built from OK status");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

namespace detail {
inline const Status& status_of(const Status& s) { return s; }
template <typename T>
const Status& status_of(const Result<T>& r) { return r.status(); }
}  // namespace detail

}  // namespace weft

// Returns from the enclosing function if `expr` (a Status or a Result) is not OK.
#define WEFT_TRY(expr)                                                   \
  do {                                                                   \
    const auto& weft_try_value_ = (expr);                                \
    if (!::weft::detail::status_of(weft_try_value_).ok())                \
      return ::weft::detail::status_of(weft_try_value_);                 \
  } while (0)
