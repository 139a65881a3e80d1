#include "weft/status.h"

#include <cerrno>
#include <cstring>

namespace weft {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kUnhandledCudaError: return "UnhandledCudaError";
    case StatusCode::kSystemError: return "SystemError";
    case StatusCode::kInternalError: return "InternalError";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kInvalidUsage: return "InvalidUsage";
    case StatusCode::kRemoteError: return "RemoteError";
    case StatusCode::kInProgress: return "InProgress";
    case StatusCode::kTimeout: return "Timeout";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) rep_ = std::make_unique<Rep>(Rep{code, std::move(message)});
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  return std::string(status_code_name(rep_->code)) + ": " + rep_->message;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return Status();
  return Status(rep_->code, std::string(context) + ": " + rep_->message);
}

Status invalid_argument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
Status invalid_usage(std::string m) { return Status(StatusCode::kInvalidUsage, std::move(m)); }
Status internal_error(std::string m) { return Status(StatusCode::kInternalError, std::move(m)); }
Status remote_error(std::string m) { return Status(StatusCode::kRemoteError, std::move(m)); }
Status timeout_error(std::string m) { return Status(StatusCode::kTimeout, std::move(m)); }
Status system_error(std::string m) {
  int err = errno;
  if (err != 0) m += std::string(": ") + std::strerror(err);
  return Status(StatusCode::kSystemError, std::move(m));
}

}  // namespace weft
