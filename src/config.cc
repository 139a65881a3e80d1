#include "weft/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "src/byte_size.h"
#include "src/log.h"

namespace weft {
namespace {

// The value of weft_name, else of its NCCL twin nccl_name; nullptr when neither is set (or both
// are empty). *used, when given, names the variable the value came from.
const char* env(const char* weft_name, const char* nccl_name = nullptr, const char** used = nullptr) {
  const char* name = nccl_name != nullptr ? Config::variable(weft_name, nccl_name) : weft_name;
  if (used != nullptr) *used = name;
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

// "0" or "1" in the variable `name`.
Status parse_flag(const char* name, const char* text, bool* out) {
  const std::string s = text;
  if (s != "0" && s != "1") return invalid_argument(std::string(name) + "='" + s + "' is not 0 or 1");
  *out = s == "1";
  return Status();
}

// NCCL_P2P_LEVEL: a class of path (any case) or one of NCCL's older numbers; *out is the class's
// name. NCCL's classes weft has no paths of are the nearest class below them: NVB (NVLink
// through a GPU) and C2C (a GPU's chip-to-chip link to its CPU) are NVL, P2C and PXN (through a
// PCIe switch and a CPU's C2C link, or a peer GPU's NVLink) are PXB. Numbers above 5 are SYS, as
// in NCCL.
Status parse_p2p_level(const char* name, const char* text, std::string* out) {
  std::string s = text;
  for (char& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  if (s == "NVB" || s == "C2C") s = "NVL";
  if (s == "P2C" || s == "PXN") s = "PXB";
  for (const char* level : {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS"})
    if (s == level) {
      *out = s;
      return Status();
    }
  static const char* const kOldNumbers[] = {"LOC", "PIX", "PXB", "PHB", "SYS", "SYS"};
  if (!s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    *out = kOldNumbers[std::min(std::stoi(s), 5)];
    return Status();
  }
  return invalid_argument(std::string(name) + "='" + text +
                          "' is not LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a number (0-5; above 5 is SYS)");
}

Status parse_size(const char* name, const char* text, size_t min, size_t* out) {
  const std::optional<size_t> v = parse_byte_size(text);
  if (!v || *v < min)
    return invalid_argument(std::string(name) + "='" + text + "' is not a size >= " + std::to_string(min) +
                            " (digits, then optionally K, M or G)");
  *out = *v;
  return Status();
}

// NCCL's own NCCL_BUFFSIZE when unset: a program that sets NCCL_BUFFSIZE to it gets weft's defaults.
constexpr size_t kNcclDefaultBuffsize = size_t{4} << 20;

// A FIFO's size: from its WEFT_ variable when set (a multiple of `step` from `lo` to `hi`, else an
// error naming the variable), else from NCCL_BUFFSIZE's `buffsize`, as a share of NCCL's default
// (kNcclDefaultBuffsize) applied to this FIFO's default *out, rounded down to a multiple of `step`
// and brought within [lo, hi]; *out unchanged when neither is set. `bounds` says the same in
// words for the error.
Status fifo_size(const char* weft_name, std::optional<size_t> buffsize, size_t step, size_t lo, size_t hi,
                 const char* bounds, size_t* out) {
  if (const char* v = env(weft_name)) {
    size_t n = 0;
    WEFT_TRY(parse_size(weft_name, v, lo, &n));
    if (n > hi || n % step != 0)
      return invalid_argument(std::string(weft_name) + "='" + v + "' is not a multiple of " + bounds);
    *out = n;
  } else if (buffsize) {
    // *out / kNcclDefaultBuffsize is a whole factor for every default (shm 1, cuda 8, stage 4,
    // walker slots 1); past hi the product only needs to stay past it.
    const size_t times = std::max<size_t>(*out / kNcclDefaultBuffsize, 1);
    const size_t scaled = *buffsize > hi / times ? hi : *buffsize * times;
    *out = std::clamp(scaled / step * step, lo, hi);
  }
  return Status();
}

}  // namespace

const char* Config::variable(const char* weft_name, const char* nccl_name) {
  const auto set = [](const char* name) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0';
  };
  return !set(weft_name) && set(nccl_name) ? nccl_name : weft_name;
}

Status Config::check_bounds() const {
  if (timeout.count() <= 0 || timeout > kMaxTimeout)
    return invalid_argument("Config::timeout is " + std::to_string(timeout.count()) +
                            " ms; it must be above 0 and at most 1e7 s");
  for (const auto& [name, bytes] : {std::pair{"cuda_fifo_bytes", cuda_fifo_bytes},
                                    std::pair{"stage_fifo_bytes", stage_fifo_bytes}}) {
    if (bytes < kMinDeviceFifoBytes || bytes > kMaxDeviceFifoBytes || bytes % kDeviceFifoStep != 0)
      return invalid_argument(std::string("Config::") + name + " is " + std::to_string(bytes) +
                              "; it must be a multiple of " + kDeviceFifoBounds);
  }
  if (shm_fifo_bytes < kMinShmFifoBytes || shm_fifo_bytes > kMaxShmFifoBytes)
    return invalid_argument("Config::shm_fifo_bytes is " + std::to_string(shm_fifo_bytes) +
                            "; it must be from 4 KiB to 1 TiB");
  return Status();
}

Result<Config> Config::from_env() {
  Config c;
  if (const char* v = env("WEFT_TIMEOUT")) {
    char* end = nullptr;
    double seconds = std::strtod(v, &end);
    // Bounded as weft-run's --timeout (Config::kMaxTimeout).
    if (end == v || *end != '\0' || !(seconds > 0) || !(seconds <= 1e7))
      return invalid_argument(std::string("WEFT_TIMEOUT='") + v + "' is not a number of seconds above 0 and up to 1e7");
    c.timeout = std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0 + 0.5));
    if (c.timeout.count() == 0) c.timeout = std::chrono::milliseconds(1);
  }
  if (const char* v = env("WEFT_TRANSPORT")) {
    c.transport = v;
    if (c.transport != "auto" && c.transport != "shm" && c.transport != "tcp")
      return invalid_argument(std::string("WEFT_TRANSPORT='") + v + "' is not one of auto, shm, tcp");
  } else if (const char* v = env("NCCL_SHM_DISABLE")) {
    bool disable = false;
    WEFT_TRY(parse_flag("NCCL_SHM_DISABLE", v, &disable));
    if (disable) c.transport = "tcp";
  }
  if (const char* v = env("WEFT_NODE")) c.node = v;
  if (const char* v = env("WEFT_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")) c.socket_ifname = v;
  size_t n = 0;
  if (const char* v = env("WEFT_TCP_SOCKETS")) {
    WEFT_TRY(parse_size("WEFT_TCP_SOCKETS", v, 1, &n));
    if (n > 16) return invalid_argument(std::string("WEFT_TCP_SOCKETS='") + v + "' is above 16");
    c.tcp_sockets = static_cast<int>(n);
  }
  const char* name = nullptr;
  std::optional<size_t> buffsize;
  if (const char* v = env("NCCL_BUFFSIZE")) {
    // Hexadecimal too, as NCCL reads it (strtoll, base 0).
    if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X')) {
      const std::string_view hex = std::string_view(v).substr(2);
      const auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), n, 16);
      if (hex.empty() || ec != std::errc() || end != hex.data() + hex.size() || n < 4096)
        return invalid_argument(std::string("NCCL_BUFFSIZE='") + v +
                                "' is not a size >= 4096 (digits, then optionally K, M or G; or 0x and hex digits)");
    } else {
      WEFT_TRY(parse_size("NCCL_BUFFSIZE", v, 4096, &n));
    }
    buffsize = n;
  }
  if (const char* v = env("WEFT_SHM_FIFO_BYTES")) {
    WEFT_TRY(parse_size("WEFT_SHM_FIFO_BYTES", v, Config::kMinShmFifoBytes, &c.shm_fifo_bytes));
    if (c.shm_fifo_bytes > Config::kMaxShmFifoBytes)
      return invalid_argument(std::string("WEFT_SHM_FIFO_BYTES='") + v + "' is above 1024G (1 TiB)");
  } else if (buffsize) {
    c.shm_fifo_bytes = std::min(*buffsize, Config::kMaxShmFifoBytes);  // within bounds, as the other FIFOs
  }
  for (const auto& [name, out] : {std::pair{"WEFT_CUDA_FIFO_BYTES", &c.cuda_fifo_bytes},
                                  std::pair{"WEFT_STAGE_FIFO_BYTES", &c.stage_fifo_bytes}})
    WEFT_TRY(fifo_size(name, buffsize, Config::kDeviceFifoStep, Config::kMinDeviceFifoBytes,
                       Config::kMaxDeviceFifoBytes, Config::kDeviceFifoBounds, out));
  WEFT_TRY(fifo_size("WEFT_DEVICE_WALKER_SLOT_BYTES", buffsize, 4096, size_t{64} << 10, size_t{64} << 20,
                     "4 KiB from 64 KiB to 64 MiB", &c.device_walker_slot_bytes));
  if (const char* v = env("WEFT_CMA")) {
    const std::string s = v;
    if (s != "0" && s != "1" && s != "auto") return invalid_argument("WEFT_CMA='" + s + "' is not 0, 1 or auto");
    c.cma = s == "0" ? Config::CmaUse::kNever : s == "1" ? Config::CmaUse::kAlways : Config::CmaUse::kExchanges;
  }
  if (const char* v = env("WEFT_CUDA_STREAM_ORDER"))
    WEFT_TRY(parse_flag("WEFT_CUDA_STREAM_ORDER", v, &c.cuda_stream_order));
  if (const char* v = env("WEFT_DEVICE_EXECUTOR")) {
    const std::string e = v;
    if (e != "kernel" && e != "host")
      return invalid_argument(std::string("WEFT_DEVICE_EXECUTOR='") + v + "' is not one of host, kernel");
    c.device_kernel = e == "kernel";
  }
  if (const char* v = env("WEFT_DEVICE_PROXY")) WEFT_TRY(parse_flag("WEFT_DEVICE_PROXY", v, &c.device_proxy));
  if (const char* v = env("WEFT_DEVICE_WALKER_THREADS")) {
    WEFT_TRY(parse_size("WEFT_DEVICE_WALKER_THREADS", v, 32, &n));
    if (n > Config::kMaxDeviceWalkerThreads || n % 32 != 0)
      return invalid_argument(std::string("WEFT_DEVICE_WALKER_THREADS='") + v +
                              "' is not a multiple of 32 from 32 to " +
                              std::to_string(Config::kMaxDeviceWalkerThreads));
    c.device_walker_threads = static_cast<int>(n);
  }
  if (const char* v = env("WEFT_DEVICE_WALKER_LANES")) {
    WEFT_TRY(parse_size("WEFT_DEVICE_WALKER_LANES", v, 1, &n));
    if (n > Config::kMaxDeviceWalkerLanes)
      return invalid_argument(std::string("WEFT_DEVICE_WALKER_LANES='") + v + "' is not from 1 to " +
                              std::to_string(Config::kMaxDeviceWalkerLanes));
    c.device_walker_lanes = static_cast<int>(n);
  }
  if (const char* v = env("WEFT_P2P_DISABLE", "NCCL_P2P_DISABLE", &name)) WEFT_TRY(parse_flag(name, v, &c.p2p_disable));
  if (const char* v = env("WEFT_P2P_LEVEL", "NCCL_P2P_LEVEL", &name)) WEFT_TRY(parse_p2p_level(name, v, &c.p2p_level));
  if (const char* v = env("WEFT_CMA_THRESHOLD")) WEFT_TRY(parse_size("WEFT_CMA_THRESHOLD", v, 0, &c.cma_threshold));
  if (const char* v = env("WEFT_SLICE_BYTES")) WEFT_TRY(parse_size("WEFT_SLICE_BYTES", v, 64, &c.slice_bytes));
  if (const char* v = env("WEFT_ALGO", "NCCL_ALGO")) c.algo = v;
  if (const char* v = env("WEFT_TORUS")) c.torus = v;
  if (const char* v = env("WEFT_TUNE_FILE")) c.tune_file = v;
  if (const char* v = env("WEFT_TOPO_FILE", "NCCL_TOPO_FILE")) c.topo_file = v;
  if (const char* v = env("WEFT_TOPO_DUMP_FILE", "NCCL_TOPO_DUMP_FILE")) c.topo_dump_file = v;
  if (const char* v = env("WEFT_DEBUG", "NCCL_DEBUG", &name)) {
    c.debug = v;
    for (char& ch : c.debug) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    // NCCL's ABORT level lies between INFO and TRACE, and weft logs nothing at it: INFO.
    if (c.debug == "ABORT") c.debug = "INFO";
    if (c.debug != "WARN" && c.debug != "INFO" && c.debug != "TRACE" && c.debug != "VERSION" &&
        c.debug != "NONE")
      return invalid_argument(std::string(name) + "='" + v + "' is not one of NONE, VERSION, WARN, INFO, ABORT, TRACE");
  }
  if (const char* v = env("WEFT_DEBUG_FILE", "NCCL_DEBUG_FILE")) c.debug_file = v;
  // Set but empty means no time stamp, so this one is read without env()'s empty-is-unset.
  for (const char* n : {"WEFT_DEBUG_TIMESTAMP_FORMAT", "NCCL_DEBUG_TIMESTAMP_FORMAT"})
    if (const char* v = std::getenv(n)) {
      c.debug_timestamp_format = v;
      break;
    }
  if (const char* v = env("WEFT_DEBUG_TIMESTAMP_LEVELS", "NCCL_DEBUG_TIMESTAMP_LEVELS", &name)) {
    if (!parse_log_levels(v).has_value())
      return invalid_argument(std::string(name) + "='" + v +
                              "' is not a comma-separated list of VERSION, WARN, INFO, TRACE, ABORT, ALL "
                              "(\"^\" first: all but those)");
    c.debug_timestamp_levels = v;
  }
  if (const char* v = env("WEFT_COMM_BLOCKING", "NCCL_COMM_BLOCKING", &name)) {
    bool blocking = true;
    WEFT_TRY(parse_flag(name, v, &blocking));
    c.comm_blocking = blocking;
  }
  return c;
}

}  // namespace weft
