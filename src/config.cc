#include "weft/config.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace weft {
namespace {

const char* env(const char* weft_name, const char* nccl_name = nullptr) {
  const char* v = std::getenv(weft_name);
  if ((v == nullptr || *v == '\0') && nccl_name != nullptr) v = std::getenv(nccl_name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

Status parse_size(const char* name, const char* text, size_t min, size_t* out) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  const std::string suffix = end != nullptr ? end : "";
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty())
    return invalid_argument(std::string(name) + "='" + text + "': unknown suffix '" + suffix + "' (use K, M or G)");
  if (errno != 0 || end == text || text[0] == '-' || (v << shift) >> shift != v || (v << shift) < min)
    return invalid_argument(std::string(name) + "='" + text + "' is not a size >= " + std::to_string(min));
  *out = static_cast<size_t>(v << shift);
  return Status();
}

}  // namespace

Result<Config> Config::from_env() {
  Config c;
  if (const char* v = env("WEFT_TIMEOUT")) {
    char* end = nullptr;
    double seconds = std::strtod(v, &end);
    if (end == v || *end != '\0' || !(seconds > 0))
      return invalid_argument(std::string("WEFT_TIMEOUT='") + v + "' is not a positive number of seconds");
    c.timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0 + 0.5));
    if (c.timeout.count() == 0) c.timeout = std::chrono::milliseconds(1);
  }
  if (const char* v = env("WEFT_TRANSPORT")) {
    c.transport = v;
    if (c.transport != "auto" && c.transport != "shm" && c.transport != "tcp")
      return invalid_argument(std::string("WEFT_TRANSPORT='") + v + "' is not one of auto, shm, tcp");
  }
  if (const char* v = env("WEFT_NODE")) c.node = v;
  if (const char* v = env("WEFT_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")) c.socket_ifname = v;
  size_t n = 0;
  if (const char* v = env("WEFT_TCP_SOCKETS")) {
    WEFT_TRY(parse_size("WEFT_TCP_SOCKETS", v, 1, &n));
    if (n > 16) return invalid_argument(std::string("WEFT_TCP_SOCKETS='") + v + "' is above 16");
    c.tcp_sockets = static_cast<int>(n);
  }
  if (const char* v = env("WEFT_SHM_FIFO_BYTES")) {
    WEFT_TRY(parse_size("WEFT_SHM_FIFO_BYTES", v, 4096, &c.shm_fifo_bytes));
  }
  if (const char* v = env("WEFT_CMA")) {
    std::string s = v;
    if (s != "0" && s != "1") return invalid_argument("WEFT_CMA='" + s + "' is not 0 or 1");
    c.cma = s == "1";
  }
  if (const char* v = env("WEFT_CMA_THRESHOLD")) WEFT_TRY(parse_size("WEFT_CMA_THRESHOLD", v, 0, &c.cma_threshold));
  if (const char* v = env("WEFT_SLICE_BYTES")) WEFT_TRY(parse_size("WEFT_SLICE_BYTES", v, 64, &c.slice_bytes));
  if (const char* v = env("WEFT_ALGO", "NCCL_ALGO")) c.algo = v;
  if (const char* v = env("WEFT_TORUS")) c.torus = v;
  if (const char* v = env("WEFT_DEBUG", "NCCL_DEBUG")) {
    c.debug = v;
    if (c.debug != "WARN" && c.debug != "INFO" && c.debug != "TRACE" && c.debug != "VERSION" &&
        c.debug != "NONE")
      return invalid_argument("WEFT_DEBUG='" + c.debug + "' is not one of NONE, VERSION, WARN, INFO, TRACE");
  }
  return c;
}

}  // namespace weft
