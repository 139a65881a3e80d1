#include "src/launch_env.h"

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/decimal.h"
#include "src/fnv1a.h"
#include "src/split.h"

namespace weft {
namespace {

constexpr int kMaxRanks = 1 << 20;
// Ports derived from a job id fall in [kDerivedPortBase, kDerivedPortBase + kDerivedPortSpan):
// below Linux's ephemeral range (32768+), so an outgoing connection cannot be holding one.
constexpr uint32_t kDerivedPortBase = 10000;
constexpr uint32_t kDerivedPortSpan = 20000;

// The variable's value, or nullopt when unset or empty.
std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Result<long long> parse_integer(const char* name, const std::string& text, long long min,
                                long long max) {
  const std::optional<long long> parsed = parse_decimal(text);
  if (!parsed) return invalid_argument(std::string(name) + "='" + text + "' is not an integer");
  const long long v = *parsed;
  if (v < min || v > max) {
    return invalid_argument(std::string(name) + "='" + text + "' is outside [" +
                            std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

Result<int> require_int(const char* name, int min, int max, const char* launcher) {
  auto text = get(name);
  if (!text) {
    return invalid_argument(std::string(name) + " is not set (the " + launcher +
                            " environment needs it)");
  }
  auto v = parse_integer(name, *text, min, max);
  WEFT_TRY(v);
  return static_cast<int>(*v);
}

// -1 when unset.
Result<int> optional_int(const char* name, int min, int max) {
  auto text = get(name);
  if (!text) return -1;
  auto v = parse_integer(name, *text, min, max);
  WEFT_TRY(v);
  return static_cast<int>(*v);
}

Result<uint16_t> parse_port(const char* name, const std::string& text) {
  auto v = parse_integer(name, text, 1, 65535);
  WEFT_TRY(v);
  return static_cast<uint16_t>(*v);
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 32 bytes that every rank computes alike from `text`. Not a cryptographic secret: anyone who
// can read the job's environment can compute it too (docs/LAUNCH.md says so).
std::vector<uint8_t> derive_secret(std::string_view text) {
  std::vector<uint8_t> out(UniqueId::kSecretBytes);
  uint64_t h = fnv1a(text);
  for (size_t i = 0; i < out.size(); i += 8) {
    h = mix(h + 0x9e3779b97f4a7c15ULL * (i + 1) + fnv1a(text, h));
    for (size_t b = 0; b < 8; ++b) out[i + b] = static_cast<uint8_t>(h >> (8 * b));
  }
  return out;
}

// WEFT_SECRET (64 hex digits) if set, else derived from `seed`.
Result<std::vector<uint8_t>> job_secret(const std::string& seed) {
  auto text = get("WEFT_SECRET");
  if (!text) return derive_secret("weft-secret|" + seed);
  if (text->size() != 2 * UniqueId::kSecretBytes) {
    return invalid_argument("WEFT_SECRET must be " + std::to_string(2 * UniqueId::kSecretBytes) +
                            " hex digits (" + std::to_string(UniqueId::kSecretBytes) +
                            " bytes), got " + std::to_string(text->size()) + " characters");
  }
  std::vector<uint8_t> out(UniqueId::kSecretBytes);
  for (size_t i = 0; i < text->size(); ++i) {
    char c = (*text)[i];
    int d = (c >= '0' && c <= '9') ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (d < 0) {
      return invalid_argument("WEFT_SECRET: character '" + std::string(1, c) + "' at position " +
                              std::to_string(i) + " is not a hex digit");
    }
    out[i / 2] = static_cast<uint8_t>(out[i / 2] << 4 | d);
  }
  return out;
}

struct RootAddress {
  std::string host;
  uint16_t port = 0;
  std::string from;  // which variables chose it, for error messages
  // MASTER_ADDR's host may be a name that resolves to loopback on rank 0's machine: its root
  // listens on every address (LaunchEnv::root_listen).
  UniqueId::Listen listen = UniqueId::Listen::kIdAddress;
};

// "host:port" or "[v6-host]:port".
Result<RootAddress> parse_host_port(const char* name, const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return invalid_argument(std::string(name) + "='" + text + "' is not host:port");
  }
  RootAddress r;
  r.host = text.substr(0, colon);
  if (r.host.size() >= 2 && r.host.front() == '[' && r.host.back() == ']') {
    r.host = r.host.substr(1, r.host.size() - 2);
  }
  auto port = parse_port(name, text.substr(colon + 1));
  WEFT_TRY(port);
  r.port = *port;
  r.from = name;
  return r;
}

// MASTER_ADDR + MASTER_PORT, both or neither; nullopt for neither.
Result<std::optional<RootAddress>> master_address() {
  auto addr = get("MASTER_ADDR");
  auto port = get("MASTER_PORT");
  if (!addr && !port) return std::optional<RootAddress>();
  if (!addr) return invalid_argument("MASTER_PORT is set but MASTER_ADDR is not");
  if (!port) return invalid_argument("MASTER_ADDR is set but MASTER_PORT is not");
  auto p = parse_port("MASTER_PORT", *port);
  WEFT_TRY(p);
  return std::optional<RootAddress>(
      RootAddress{*addr, *p, "MASTER_ADDR/MASTER_PORT", UniqueId::Listen::kEveryAddress});
}

Status check_rank(const char* rank_name, int rank, const char* size_name, int nranks) {
  if (rank >= nranks) {
    return invalid_argument(std::string(rank_name) + "=" + std::to_string(rank) +
                            " is not below " + size_name + "=" + std::to_string(nranks));
  }
  return Status();
}

// A local rank (-1: unset) is below the local size where one is given, and below the job's size
// in any case; a local size is at most the job's.
Status check_local(const char* rank_name, int local_rank, const char* size_name, int local_size,
                   const char* nranks_name, int nranks) {
  if (local_size > nranks) {
    return invalid_argument(std::string(size_name) + "=" + std::to_string(local_size) +
                            " is more than the " + std::to_string(nranks) + " ranks of the job");
  }
  if (local_rank >= 0 && local_size > 0) return check_rank(rank_name, local_rank, size_name, local_size);
  return check_rank(rank_name, local_rank, nranks_name, nranks);
}

// Every launcher's rank and size, both required, into env.rank and env.nranks.
Status read_rank_and_size(LaunchEnv& env, const char* rank_name, const char* size_name,
                          const char* launcher) {
  auto rank = require_int(rank_name, 0, kMaxRanks - 1, launcher);
  WEFT_TRY(rank);
  auto nranks = require_int(size_name, 1, kMaxRanks, launcher);
  WEFT_TRY(nranks);
  WEFT_TRY(check_rank(rank_name, *rank, size_name, *nranks));
  env.rank = *rank;
  env.nranks = *nranks;
  return Status();
}

// The optional local rank and size (-1 where unset) into env.local_rank and env.local_size.
// REQUIRES: env.nranks is read, from the variable nranks_name.
Status read_local_rank_and_size(LaunchEnv& env, const char* rank_name, const char* size_name,
                                const char* nranks_name) {
  auto local_rank = optional_int(rank_name, 0, kMaxRanks - 1);
  WEFT_TRY(local_rank);
  auto local_size = optional_int(size_name, 1, kMaxRanks);
  WEFT_TRY(local_size);
  WEFT_TRY(check_local(rank_name, *local_rank, size_name, *local_size, nranks_name, env.nranks));
  env.local_rank = *local_rank;
  env.local_size = *local_size;
  return Status();
}

Result<LaunchEnv> from_weft_run() {
  LaunchEnv env;
  env.launcher = "weft-run";
  auto id = UniqueId::from_hex(*get("WEFT_UNIQUE_ID"));
  if (!id.ok()) return id.status().with_context("WEFT_UNIQUE_ID");
  env.id = *id;
  WEFT_TRY(read_rank_and_size(env, "WEFT_RANK", "WEFT_NRANKS", "weft-run"));
  WEFT_TRY(read_local_rank_and_size(env, "WEFT_LOCAL_RANK", "WEFT_LOCAL_SIZE", "WEFT_NRANKS"));
  env.serve_root = false;  // weft-run runs the root
  return env;
}

Result<LaunchEnv> from_torchrun() {
  LaunchEnv env;
  env.launcher = "torchrun";
  WEFT_TRY(read_rank_and_size(env, "RANK", "WORLD_SIZE", "torchrun"));
  WEFT_TRY(read_local_rank_and_size(env, "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE"));

  auto addr = get("MASTER_ADDR");
  if (!addr) return invalid_argument("MASTER_ADDR is not set (the torchrun environment needs it)");
  uint16_t port = 0;
  if (auto root_port = get("WEFT_ROOT_PORT")) {
    auto p = parse_port("WEFT_ROOT_PORT", *root_port);
    WEFT_TRY(p);
    port = *p;
  } else {
    auto text = get("MASTER_PORT");
    if (!text) {
      return invalid_argument("MASTER_PORT is not set (the torchrun environment needs it, or set "
                              "WEFT_ROOT_PORT)");
    }
    auto p = parse_port("MASTER_PORT", *text);
    WEFT_TRY(p);
    port = *p;
    // torchrun's agent already listens on MASTER_PORT (its TCPStore) when it tells the workers
    // to use that store; the root then takes the next port.
    auto agent_store = get("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && (*agent_store == "True" || *agent_store == "true" || *agent_store == "1")) {
      if (port == 65535) {
        return invalid_argument("MASTER_PORT=65535 is held by torchrun's store and leaves no port "
                                "for weft's root; set WEFT_ROOT_PORT");
      }
      ++port;
    }
  }
  std::string seed = *addr + ":" + std::to_string(port);
  if (auto run_id = get("TORCHELASTIC_RUN_ID")) seed += "|" + *run_id;
  auto secret = job_secret(seed);
  WEFT_TRY(secret);
  auto id = UniqueId::for_address(*addr, port, *secret);
  if (!id.ok()) return id.status().with_context("MASTER_ADDR='" + *addr + "'");
  env.id = *id;
  env.serve_root = env.rank == 0;
  env.root_listen = UniqueId::Listen::kEveryAddress;  // MASTER_ADDR may resolve to loopback here
  return env;
}

// The root for mpirun and srun: WEFT_ROOT, else MASTER_ADDR/MASTER_PORT, else (all ranks on one
// node) 127.0.0.1 and a port derived from the job id.
Result<RootAddress> choose_root(const std::string& launcher, bool one_node,
                                const std::string& job_id, const char* job_id_vars) {
  if (auto text = get("WEFT_ROOT")) return parse_host_port("WEFT_ROOT", *text);
  auto master = master_address();
  WEFT_TRY(master);
  if (*master) return **master;
  if (!one_node) {
    return invalid_argument(launcher + " started ranks on several nodes: set WEFT_ROOT=host:port "
                            "to a free port on the node of rank 0 (or set MASTER_ADDR and "
                            "MASTER_PORT); see docs/LAUNCH.md");
  }
  if (job_id.empty()) {
    return invalid_argument(launcher + ": none of " + job_id_vars +
                            " is set to derive a root port from: set WEFT_ROOT=127.0.0.1:port");
  }
  RootAddress r;
  r.host = "127.0.0.1";
  r.port = static_cast<uint16_t>(kDerivedPortBase + mix(fnv1a(job_id)) % kDerivedPortSpan);
  r.from = job_id_vars;
  return r;
}

Result<LaunchEnv> finish_with_root(LaunchEnv env, const std::string& job_id,
                                   const char* job_id_vars) {
  const bool one_node = env.local_size > 0 && env.local_size == env.nranks;
  auto root = choose_root(env.launcher, one_node, job_id, job_id_vars);
  WEFT_TRY(root);
  auto secret = job_secret(root->host + ":" + std::to_string(root->port) + "|" + job_id);
  WEFT_TRY(secret);
  auto id = UniqueId::for_address(root->host, root->port, *secret);
  if (!id.ok()) return id.status().with_context("root address from " + root->from);
  env.id = *id;
  env.serve_root = env.rank == 0;
  env.root_listen = root->listen;
  return env;
}

Result<LaunchEnv> from_open_mpi() {
  LaunchEnv env;
  env.launcher = "mpirun";
  WEFT_TRY(read_rank_and_size(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"));
  WEFT_TRY(read_local_rank_and_size(env, "OMPI_COMM_WORLD_LOCAL_RANK",
                                    "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"));
  std::string job_id;
  if (auto v = get("OMPI_MCA_ess_base_jobid")) {
    job_id = "ompi:" + *v;
  } else if (auto ns = get("PMIX_NAMESPACE")) {
    job_id = "pmix:" + *ns;
  }
  return finish_with_root(std::move(env), job_id, "OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE");
}

// Slurm's compressed per-node task counts: "4", "2(x3),1" -> {2, 2, 2, 1}.
Result<std::vector<int>> parse_tasks_per_node(const char* name, const std::string& text) {
  std::vector<int> out;
  for (std::string_view piece : split(text, ',')) {
    const std::string item(piece);
    std::string count = item, reps = "1";
    size_t paren = item.find("(x");
    if (paren != std::string::npos) {
      if (item.back() != ')') {
        return invalid_argument(std::string(name) + "='" + text + "' is not in Slurm's format");
      }
      count = item.substr(0, paren);
      reps = item.substr(paren + 2, item.size() - paren - 3);
    }
    auto c = parse_integer(name, count, 1, kMaxRanks);
    auto r = parse_integer(name, reps, 1, kMaxRanks);
    if (!c.ok() || !r.ok() || out.size() + static_cast<size_t>(*r) > static_cast<size_t>(kMaxRanks)) {
      return invalid_argument(std::string(name) + "='" + text + "' is not in Slurm's format");
    }
    out.insert(out.end(), static_cast<size_t>(*r), static_cast<int>(*c));
  }
  return out;
}

Result<LaunchEnv> from_slurm() {
  LaunchEnv env;
  env.launcher = "srun";
  WEFT_TRY(read_rank_and_size(env, "SLURM_PROCID", "SLURM_NTASKS", "Slurm"));
  auto local_rank = optional_int("SLURM_LOCALID", 0, kMaxRanks - 1);
  WEFT_TRY(local_rank);
  int local_size = -1;
  // The step's layout first: srun inherits the job's SLURM_NTASKS_PER_NODE from sbatch, and a
  // step may place its tasks otherwise.
  const char* size_name = "SLURM_STEP_TASKS_PER_NODE";
  auto per_node = get(size_name);
  if (!per_node) {
    size_name = "SLURM_NTASKS_PER_NODE";
    per_node = get(size_name);
  }
  if (per_node) {
    auto counts = parse_tasks_per_node(size_name, *per_node);
    WEFT_TRY(counts);
    if (counts->size() == 1) {
      local_size = counts->front();
    } else {
      auto node = require_int("SLURM_NODEID", 0, kMaxRanks - 1, "Slurm");
      if (!node.ok()) {
        return node.status().with_context(std::string(size_name) + " lists several nodes");
      }
      if (static_cast<size_t>(*node) >= counts->size()) {
        return invalid_argument("SLURM_NODEID=" + std::to_string(*node) + " but " + size_name +
                                "='" + *per_node + "' lists " + std::to_string(counts->size()) +
                                " nodes");
      }
      local_size = (*counts)[static_cast<size_t>(*node)];
    }
  }
  WEFT_TRY(check_local("SLURM_LOCALID", *local_rank, size_name, local_size, "SLURM_NTASKS", env.nranks));
  env.local_rank = *local_rank;
  env.local_size = local_size;
  std::string job_id;
  if (auto job = get("SLURM_JOB_ID")) {
    job_id = "slurm:" + *job;
    if (auto step = get("SLURM_STEP_ID")) job_id += "." + *step;
  }
  return finish_with_root(std::move(env), job_id, "SLURM_JOB_ID, SLURM_STEP_ID");
}

}  // namespace

Result<LaunchEnv> read_launch_env(const Config& config) {
  (void)config;
  if (get("WEFT_UNIQUE_ID")) return from_weft_run();
  const bool rank = get("RANK").has_value(), size = get("WORLD_SIZE").has_value();
  if (rank && size) return from_torchrun();
  if (get("OMPI_COMM_WORLD_RANK") || get("OMPI_COMM_WORLD_SIZE")) return from_open_mpi();
  if (get("SLURM_PROCID")) return from_slurm();
  if (rank != size) {
    return invalid_argument(std::string(rank ? "RANK is set but WORLD_SIZE is not"
                                             : "WORLD_SIZE is set but RANK is not") +
                            " (a torchrun-style launch needs RANK, WORLD_SIZE, MASTER_ADDR and "
                            "MASTER_PORT)");
  }
  return invalid_usage(
      "no launcher found in the environment: start the program with weft-run, mpirun (Open MPI), "
      "srun (Slurm) or torchrun, or set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT "
      "(see docs/LAUNCH.md)");
}

Result<std::optional<UniqueId>> comm_id_from_env() {
  const char* name = "WEFT_COMM_ID";
  auto text = get(name);
  if (!text) text = get(name = "NCCL_COMM_ID");
  if (!text) return std::optional<UniqueId>();
  auto root = parse_host_port(name, *text);
  WEFT_TRY(root);
  auto secret = job_secret(std::string("comm-id|") + *text);
  WEFT_TRY(secret);
  auto id = UniqueId::for_address(root->host, root->port, *secret);
  if (!id.ok()) return id.status().with_context(std::string(name) + "='" + *text + "'");
  return std::optional<UniqueId>(*id);
}

bool comm_id_serves(const UniqueId& id, int rank) {
  if (rank != 0) return false;
  auto env_id = comm_id_from_env();
  return env_id.ok() && env_id->has_value() && (*env_id)->bytes == id.bytes;
}

}  // namespace weft
