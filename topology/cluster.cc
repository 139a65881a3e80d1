#include "topology/cluster.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "src/split.h"

// GCC 12 at -O3 reports false -Wrestrict overlaps in std::string's operator+ (GCC bug 105329),
// which -Werror would turn into a failed Release build.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace weft::topology {
namespace {

// This machine's calibrated shm/tcp models, embedded from calibration/this-vm.txt at configure
// time (bench/calibrate-sim rewrites that file). kCalibrationText is a raw string literal.
#include "topology/calibration.inc"

constexpr int kMaxDevices = 1 << 22;

bool parse_double(std::string_view text, double* out) {
  if (text.empty()) return false;
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool parse_int(std::string_view text, int* out) {
  if (text.empty() || text.size() > 9) return false;
  int v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// Splits a number from its unit suffix: "400Gb/s" -> ("400", "Gb/s").
std::pair<std::string_view, std::string_view> split_unit(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
                             ((text[i] == 'e' || text[i] == 'E') && i + 1 < text.size() &&
                              (std::isdigit(static_cast<unsigned char>(text[i + 1])) || text[i + 1] == '-' ||
                               text[i + 1] == '+')) ||
                             ((text[i] == '-' || text[i] == '+') && i > 0 && (text[i - 1] == 'e' || text[i - 1] == 'E'))))
    ++i;
  return {text.substr(0, i), text.substr(i)};
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::vector<std::string_view> tokens_of(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    const size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

Status token_error(std::string_view token, const std::string& what) {
  return invalid_argument("cluster: '" + std::string(token) + "': " + what);
}

// "450GB/s,1us" or "450GB/s".
Status parse_link_class(std::string_view token, std::string_view value, LinkClass* out) {
  const auto parts = split(value, ',');
  if (parts.size() > 2) return token_error(token, "expected BANDWIDTH[,LATENCY], e.g. 400Gb/s,3us");
  auto bw = parse_bandwidth(parts[0]);
  if (!bw.ok()) return token_error(token, bw.status().message());
  out->bandwidth = *bw;
  if (parts.size() == 2) {
    auto lat = parse_latency(parts[1]);
    if (!lat.ok()) return token_error(token, lat.status().message());
    out->latency = *lat;
  }
  return Status();
}

Status parse_dims(std::string_view token, std::string_view value, std::vector<int>* dims) {
  dims->clear();
  for (std::string_view d : split(value, 'x')) {
    int v = 0;
    if (!parse_int(d, &v) || v < 1)
      return token_error(token, "torus dimension '" + std::string(d) + "' is not a positive integer (use e.g. 16x16x64)");
    dims->push_back(v);
  }
  if (dims->empty() || dims->size() > 3) return token_error(token, "a torus has 1 to 3 dimensions, e.g. 16x16x64");
  return Status();
}

// The calibrated line for `name` ("shm", "tcp") from the embedded calibration text, or a default.
std::string calibrated(std::string_view name) {
  std::istringstream in{std::string(kCalibrationText)};
  std::string line;
  while (std::getline(in, line)) {
    const auto toks = tokens_of(line);
    if (toks.empty() || toks[0].front() == '#') continue;
    if (toks[0] == name) return line.substr(line.find(name) + name.size());
  }
  // Uncalibrated fallbacks (rough numbers for a small VM), so the presets always exist.
  if (name == "shm") return "intra=10GB/s,2us reduce=10GB/s copy=20GB/s cores=2 wake=100us";
  return "intra=2GB/s,40us reduce=10GB/s copy=20GB/s cores=2 wake=200us";
}

struct Given {
  bool nodes = false, ranks = false, nics = false, torus = false;
};

Status apply_token(std::string_view token, ClusterSpec* s, Given* given, bool first);

// A preset token: name[:arg].
Status apply_preset(std::string_view token, ClusterSpec* s, Given* given) {
  const size_t colon = token.find(':');
  const std::string_view name = token.substr(0, colon);
  const std::string_view arg = colon == std::string_view::npos ? std::string_view() : token.substr(colon + 1);
  if (colon != std::string_view::npos && arg.empty()) return token_error(token, "nothing after ':'");
  // The preset's own tokens do not count as the user's (a torus override stays legal).
  auto apply_all = [&](std::string_view text) -> Status {
    Given own;
    for (std::string_view t : tokens_of(text)) WEFT_TRY(apply_token(t, s, &own, false));
    return Status();
  };
  if (name == "dgx-h100") {
    int nodes = 1;
    if (!arg.empty() && (!parse_int(arg, &nodes) || nodes < 1))
      return token_error(token, "the node count '" + std::string(arg) + "' is not a positive integer (e.g. dgx-h100:2048)");
    *s = ClusterSpec{};
    s->name = std::string(token);
    WEFT_TRY(apply_all("ranks=8 intra=450GB/s,1us nics=8 nic=400Gb/s,3us fabric=rail leaf=32 oversub=1 "
                       "fabric_lat=1us reduce=1.1TB/s copy=1.6TB/s"));
    s->nodes = nodes;
    return Status();
  }
  if (name == "torus") {
    if (arg.empty()) return token_error(token, "a torus preset needs dimensions, e.g. torus:16x16x64");
    *s = ClusterSpec{};
    s->name = std::string(token);
    WEFT_TRY(parse_dims(token, arg, &s->torus));
    WEFT_TRY(apply_all("link=50GB/s,1us reduce=1.1TB/s copy=1.6TB/s"));
    given->torus = true;
    return Status();
  }
  if (name == "shm" || name == "tcp") {
    int ranks = 2;
    if (!arg.empty() && (!parse_int(arg, &ranks) || ranks < 1))
      return token_error(token, "the rank count '" + std::string(arg) + "' is not a positive integer (e.g. " +
                                    std::string(name) + ":4)");
    *s = ClusterSpec{};
    s->name = std::string(token);
    WEFT_TRY(apply_all(calibrated(name)).with_context("calibration line '" + std::string(name) + "'"));
    s->nodes = 1;
    s->ranks_per_node = ranks;
    s->shared_memory = name == "shm";
    return Status();
  }
  std::string known;
  for (const std::string& p : Cluster::presets()) known += "\n  " + p;
  return token_error(token, "not a preset nor key=value; presets:" + known);
}

Status apply_token(std::string_view token, ClusterSpec* s, Given* given, bool first) {
  const size_t eq = token.find('=');
  if (eq == std::string_view::npos) {
    if (!first) return token_error(token, "a preset must come first; later tokens are key=value");
    return apply_preset(token, s, given);
  }
  const std::string_view key = token.substr(0, eq), value = token.substr(eq + 1);
  if (value.empty()) return token_error(token, "no value after '='");
  auto count = [&](int* out, int min) -> Status {
    int v = 0;
    if (!parse_int(value, &v) || v < min)
      return token_error(token, "'" + std::string(value) + "' is not an integer >= " + std::to_string(min));
    *out = v;
    return Status();
  };
  auto bandwidth = [&](double* out) -> Status {
    auto v = parse_bandwidth(value);
    if (!v.ok()) return token_error(token, v.status().message());
    *out = *v;
    return Status();
  };
  auto latency = [&](double* out) -> Status {
    auto v = parse_latency(value);
    if (!v.ok()) return token_error(token, v.status().message());
    *out = *v;
    return Status();
  };
  if (key == "nodes") return given->nodes = true, count(&s->nodes, 1);
  if (key == "ranks") return given->ranks = true, count(&s->ranks_per_node, 1);
  if (key == "intra") return parse_link_class(token, value, &s->intra);
  if (key == "nics") return given->nics = true, count(&s->nics, 0);
  if (key == "nic") return parse_link_class(token, value, &s->nic);
  if (key == "link") return parse_link_class(token, value, &s->torus_link);
  if (key == "leaf") return count(&s->leaf_nodes, 1);
  if (key == "cores") return count(&s->cores, 0);
  if (key == "reduce") return bandwidth(&s->reduce_bandwidth);
  if (key == "copy") return bandwidth(&s->copy_bandwidth);
  if (key == "wake") return latency(&s->wake_latency);
  if (key == "fabric_lat") return latency(&s->fabric_latency);
  if (key == "cache") {
    auto v = parse_size(value);
    if (!v.ok()) return token_error(token, v.status().message());
    s->cache_bytes = *v;
    return Status();
  }
  if (key == "spill") {
    double x = 0;
    if (!parse_double(value, &x) || !(x > 0) || x > 1)
      return token_error(token, "'" + std::string(value) + "' is not a factor in (0, 1]");
    s->spill = x;
    return Status();
  }
  if (key == "shm") {
    if (value != "0" && value != "1") return token_error(token, "'" + std::string(value) + "' is not 0 or 1");
    s->shared_memory = value == "1";
    return Status();
  }
  if (key == "torus") return given->torus = true, parse_dims(token, value, &s->torus);
  if (key == "fabric") {
    if (value == "none") s->fabric = Fabric::kNone;
    else if (value == "rail") s->fabric = Fabric::kRail;
    else if (value == "fattree") s->fabric = Fabric::kFatTree;
    else return token_error(token, "unknown fabric '" + std::string(value) + "' (use none, rail or fattree)");
    return Status();
  }
  if (key == "oversub") {
    std::string_view v = value;
    if (v.size() > 2 && v.substr(v.size() - 2) == ":1") v = v.substr(0, v.size() - 2);
    double x = 0;
    if (!parse_double(v, &x) || !(x > 0))
      return token_error(token, "'" + std::string(value) + "' is not a positive ratio (e.g. 2 or 2:1)");
    s->oversubscription = x;
    return Status();
  }
  return token_error(token, "unknown key '" + std::string(key) +
                                "' (keys: nodes ranks intra nics nic fabric leaf oversub fabric_lat torus link reduce "
                                "copy cores wake cache spill shm)");
}

}  // namespace

std::string_view fabric_name(Fabric f) {
  switch (f) {
    case Fabric::kNone: return "none";
    case Fabric::kRail: return "rail";
    case Fabric::kFatTree: return "fattree";
  }
  return "?";
}

std::string_view link_kind_name(LinkKind k) {
  switch (k) {
    case LinkKind::kCompute: return "compute";
    case LinkKind::kIntraOut: return "intra-out";
    case LinkKind::kIntraIn: return "intra-in";
    case LinkKind::kNicOut: return "nic-out";
    case LinkKind::kNicIn: return "nic-in";
    case LinkKind::kLeafUp: return "leaf-up";
    case LinkKind::kLeafDown: return "leaf-down";
    case LinkKind::kTorus: return "torus";
    case LinkKind::kNodeCpu: return "node-cpu";
  }
  return "?";
}

Result<double> parse_bandwidth(std::string_view text) {
  auto [num, unit] = split_unit(text);
  double v = 0;
  if (!parse_double(num, &v) || !(v > 0))
    return invalid_argument("'" + std::string(text) + "' does not start with a positive number (e.g. 400Gb/s)");
  struct U {
    std::string_view name;
    double scale;
  };
  static constexpr U kUnits[] = {
      {"B/s", 1},         {"KB/s", 1e3},          {"MB/s", 1e6},          {"GB/s", 1e9},
      {"TB/s", 1e12},     {"KiB/s", 1024.0},      {"MiB/s", 1048576.0},   {"GiB/s", 1073741824.0},
      {"b/s", 1.0 / 8},   {"Kb/s", 1e3 / 8},      {"Mb/s", 1e6 / 8},      {"Gb/s", 1e9 / 8},
      {"Tb/s", 1e12 / 8},
  };
  for (const U& u : kUnits)
    if (unit == u.name) return v * u.scale;
  if (unit.empty()) return invalid_argument("'" + std::string(text) + "' has no unit (e.g. GB/s or Gb/s)");
  return invalid_argument("unknown bandwidth unit '" + std::string(unit) +
                          "' (use B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s, or bits: Kb/s, Mb/s, Gb/s, Tb/s)");
}

Result<double> parse_latency(std::string_view text) {
  auto [num, unit] = split_unit(text);
  double v = 0;
  if (!parse_double(num, &v) || v < 0)
    return invalid_argument("'" + std::string(text) + "' does not start with a number >= 0 (e.g. 1.5us)");
  if (unit == "ns") return v * 1e-9;
  if (unit == "us") return v * 1e-6;
  if (unit == "ms") return v * 1e-3;
  if (unit == "s") return v;
  if (unit.empty()) return invalid_argument("'" + std::string(text) + "' has no unit (ns, us, ms or s)");
  return invalid_argument("unknown latency unit '" + std::string(unit) + "' (use ns, us, ms or s)");
}

Result<double> parse_size(std::string_view text) {
  auto [num, unit] = split_unit(text);
  double v = 0;
  if (!parse_double(num, &v) || v < 0)
    return invalid_argument("'" + std::string(text) + "' does not start with a number >= 0 (e.g. 32MiB)");
  struct U {
    std::string_view name;
    double scale;
  };
  static constexpr U kUnits[] = {{"B", 1},        {"KB", 1e3},           {"MB", 1e6},
                                 {"GB", 1e9},     {"KiB", 1024.0},       {"MiB", 1048576.0},
                                 {"GiB", 1073741824.0}};
  for (const U& u : kUnits)
    if (unit == u.name) return v * u.scale;
  if (unit.empty()) return invalid_argument("'" + std::string(text) + "' has no unit (e.g. MiB)");
  return invalid_argument("unknown size unit '" + std::string(unit) + "' (use B, KB, MB, GB, KiB, MiB or GiB)");
}

std::string format_bandwidth(double b) {
  if (b >= 1e12) return fmt(b / 1e12) + "TB/s";
  if (b >= 1e9) return fmt(b / 1e9) + "GB/s";
  if (b >= 1e6) return fmt(b / 1e6) + "MB/s";
  if (b >= 1e3) return fmt(b / 1e3) + "KB/s";
  return fmt(b) + "B/s";
}

std::string format_latency(double s) {
  if (s == 0) return "0us";
  if (s >= 1) return fmt(s) + "s";
  if (s >= 1e-3) return fmt(s * 1e3) + "ms";
  if (s >= 1e-6) return fmt(s * 1e6) + "us";
  return fmt(s * 1e9) + "ns";
}

std::vector<std::string> Cluster::presets() {
  return {"dgx-h100:NODES   NODES x 8 GPUs, NVSwitch 450GB/s per GPU, 8 x 400Gb/s NICs, rail-optimised",
          "torus:XxYxZ      a torus of X*Y*Z devices, 50GB/s per link direction",
          "shm:N            N ranks on this machine over shared memory (calibrated)",
          "tcp:N            N ranks on this machine over TCP loopback (calibrated)"};
}

Result<Cluster> Cluster::parse(std::string_view text) {
  const auto toks = tokens_of(text);
  if (toks.empty()) return invalid_argument("cluster: empty description (e.g. dgx-h100:2048, torus:16x16x64, shm:4)");
  ClusterSpec s;
  Given given;
  for (size_t i = 0; i < toks.size(); ++i) WEFT_TRY(apply_token(toks[i], &s, &given, i == 0));
  if (s.name == "custom" || toks.size() > 1) s.name = std::string(text);
  if (!s.torus.empty() && (given.nodes || given.ranks || given.nics))
    return invalid_argument("cluster: '" + std::string(text) +
                            "': a torus describes its own devices (one per vertex); drop nodes=, ranks= and nics=");
  return from_spec(std::move(s));
}

Result<Cluster> Cluster::from_spec(ClusterSpec s) {
  auto bad = [&](const std::string& what) { return invalid_argument("cluster " + s.name + ": " + what); };
  auto check_class = [&](const char* what, const LinkClass& c) -> Status {
    if (!(c.bandwidth > 0) || !std::isfinite(c.bandwidth)) return bad(std::string(what) + " bandwidth must be positive");
    if (!(c.latency >= 0) || !std::isfinite(c.latency)) return bad(std::string(what) + " latency must be >= 0");
    return Status();
  };
  if (!s.torus.empty()) {
    int64_t n = 1;
    for (int d : s.torus) {
      if (d < 1) return bad("torus dimensions must be positive");
      n *= d;
      if (n > kMaxDevices) return bad("more than " + std::to_string(kMaxDevices) + " devices");
    }
    if (s.torus.size() > 3) return bad("a torus has 1 to 3 dimensions");
    s.nodes = static_cast<int>(n);
    s.ranks_per_node = 1;
    s.nics = 0;
    WEFT_TRY(check_class("link", s.torus_link));
  }
  if (s.nodes < 1 || s.ranks_per_node < 1) return bad("nodes and ranks must be positive");
  if (static_cast<int64_t>(s.nodes) * s.ranks_per_node > kMaxDevices)
    return bad("more than " + std::to_string(kMaxDevices) + " devices");
  if (static_cast<int64_t>(s.nodes) * s.nics > kMaxDevices)
    return bad("more than " + std::to_string(kMaxDevices) + " NICs (nodes x nics)");
  if (s.torus.empty() && s.nodes > 1 && s.nics < 1)
    return bad(std::to_string(s.nodes) + " nodes but no NICs: set nics= and nic=");
  WEFT_TRY(check_class("intra", s.intra));
  if (s.nics > 0) WEFT_TRY(check_class("nic", s.nic));
  if (s.nics > s.ranks_per_node && s.fabric == Fabric::kRail)
    return bad("a rail-optimised node needs at least as many ranks as NICs");
  if (s.leaf_nodes < 1) return bad("leaf must be positive");
  if (!(s.oversubscription > 0)) return bad("oversub must be positive");
  if (!(s.reduce_bandwidth > 0) || !(s.copy_bandwidth > 0)) return bad("reduce and copy bandwidths must be positive");
  if (s.cores < 0 || !(s.wake_latency >= 0) || !(s.fabric_latency >= 0)) return bad("cores, wake, fabric_lat must be >= 0");
  if (!(s.cache_bytes >= 0) || !(s.spill > 0) || s.spill > 1) return bad("cache must be >= 0 and spill in (0, 1]");
  Cluster c;
  c.spec_ = std::move(s);
  c.build();
  return c;
}

void Cluster::build() {
  const ClusterSpec& s = spec_;
  devices_ = s.nodes * s.ranks_per_node;
  const double share = oversubscribed() ? static_cast<double>(s.cores) / s.ranks_per_node : 1.0;
  links_.clear();
  for (int d = 0; d < devices_; ++d) links_.push_back({LinkKind::kCompute, s.reduce_bandwidth * share, d});
  intra_out_ = static_cast<uint32_t>(links_.size());
  if (s.ranks_per_node > 1) {
    for (int d = 0; d < devices_; ++d) links_.push_back({LinkKind::kIntraOut, s.intra.bandwidth, d});
  }
  intra_in_ = static_cast<uint32_t>(links_.size());
  if (s.ranks_per_node > 1) {
    for (int d = 0; d < devices_; ++d) links_.push_back({LinkKind::kIntraIn, s.intra.bandwidth, d});
  }
  node_cpu_ = static_cast<uint32_t>(links_.size());
  if (oversubscribed()) {
    for (int node = 0; node < s.nodes; ++node) links_.push_back({LinkKind::kNodeCpu, s.cores * s.intra.bandwidth, node});
  }
  nic_out_ = static_cast<uint32_t>(links_.size());
  const int nic_count = s.nics > 0 && s.nodes > 1 ? s.nodes * s.nics : 0;
  for (int i = 0; i < nic_count; ++i) links_.push_back({LinkKind::kNicOut, s.nic.bandwidth, i});
  nic_in_ = static_cast<uint32_t>(links_.size());
  for (int i = 0; i < nic_count; ++i) links_.push_back({LinkKind::kNicIn, s.nic.bandwidth, i});
  rails_ = s.fabric == Fabric::kRail ? s.nics : 1;
  leaves_ = (s.nodes + s.leaf_nodes - 1) / s.leaf_nodes;
  leaf_up_ = static_cast<uint32_t>(links_.size());
  const bool leafs = leaf_links() && s.nodes > 1;
  const int nics_per_leaf_node = s.fabric == Fabric::kRail ? 1 : s.nics;
  for (int dir = 0; dir < 2 && leafs; ++dir) {
    if (dir == 1) leaf_down_ = static_cast<uint32_t>(links_.size());
    for (int r = 0; r < rails_; ++r)
      for (int l = 0; l < leaves_; ++l) {
        const int under = std::min(s.leaf_nodes, s.nodes - l * s.leaf_nodes);
        links_.push_back({dir == 0 ? LinkKind::kLeafUp : LinkKind::kLeafDown,
                          under * nics_per_leaf_node * s.nic.bandwidth / s.oversubscription, r * leaves_ + l});
      }
  }
  if (!leafs) leaf_down_ = static_cast<uint32_t>(links_.size());
  torus_ = static_cast<uint32_t>(links_.size());
  if (is_torus()) {
    const int nd = static_cast<int>(s.torus.size());
    for (int d = 0; d < devices_; ++d)
      for (int k = 0; k < 2 * nd; ++k) links_.push_back({LinkKind::kTorus, s.torus_link.bandwidth, d});
  }
  // Symmetry under device shifts.
  if (is_torus()) {
    period_ = devices_ / s.torus.back();
  } else if (leafs) {
    const int group = s.leaf_nodes * s.ranks_per_node;
    period_ = s.nodes % s.leaf_nodes == 0 ? group : devices_;
  } else {
    period_ = s.ranks_per_node;
  }
  if (period_ < 1 || devices_ % period_ != 0) period_ = devices_;
}

int Cluster::node_of(int device) const { return device / spec_.ranks_per_node; }

uint32_t Cluster::nic_of(int device) const {
  const int node = device / spec_.ranks_per_node, local = device % spec_.ranks_per_node;
  const int nic = static_cast<int>(static_cast<int64_t>(local) * spec_.nics / spec_.ranks_per_node);
  return static_cast<uint32_t>(node * spec_.nics + nic);
}

void Cluster::route(int a, int b, std::vector<uint32_t>* links, double* latency) const {
  const ClusterSpec& s = spec_;
  *latency = oversubscribed() ? s.wake_latency : 0.0;
  if (a == b) {
    *latency = 0;
    return;
  }
  if (is_torus()) {
    const int nd = static_cast<int>(s.torus.size());
    int cur = a, stride = 1;
    int hops = 0;
    for (int k = 0; k < nd; ++k) {
      const int dim = s.torus[static_cast<size_t>(k)];
      const int ca = (cur / stride) % dim, cb = (b / stride) % dim;
      const int fwd = ((cb - ca) % dim + dim) % dim;
      const bool plus = fwd <= dim - fwd;
      const int steps = plus ? fwd : dim - fwd;
      int c = ca;
      for (int h = 0; h < steps; ++h) {
        links->push_back(torus_ + static_cast<uint32_t>(cur) * 2 * nd + static_cast<uint32_t>(2 * k + (plus ? 0 : 1)));
        const int next = plus ? (c + 1) % dim : (c + dim - 1) % dim;
        cur += (next - c) * stride;
        c = next;
        ++hops;
      }
      stride *= dim;
    }
    *latency += hops * s.torus_link.latency;
    return;
  }
  const int na = node_of(a), nb = node_of(b);
  if (na == nb) {
    links->push_back(intra_out_ + static_cast<uint32_t>(a));
    links->push_back(intra_in_ + static_cast<uint32_t>(b));
    if (oversubscribed()) links->push_back(node_cpu_ + static_cast<uint32_t>(na));
    *latency += s.intra.latency;
    return;
  }
  const uint32_t ia = nic_of(a), ib = nic_of(b);
  links->push_back(nic_out_ + ia);
  if (leaf_links()) {
    const int rail_a = s.fabric == Fabric::kRail ? static_cast<int>(ia) % s.nics : 0;
    const int rail_b = s.fabric == Fabric::kRail ? static_cast<int>(ib) % s.nics : 0;
    const int la = leaf_of(na), lb = leaf_of(nb);
    if (rail_a != rail_b || la != lb) {
      links->push_back(leaf_up_ + static_cast<uint32_t>(rail_a * leaves_ + la));
      links->push_back(leaf_down_ + static_cast<uint32_t>(rail_b * leaves_ + lb));
    }
  }
  links->push_back(nic_in_ + ib);
  *latency += s.nic.latency + s.fabric_latency;
}

uint32_t Cluster::shift_link(uint32_t id, int shift) const {
  const Link& l = links_[id];
  const int64_t n = devices_;
  auto dev = [&](int d) { return static_cast<int>(((d + static_cast<int64_t>(shift)) % n + n) % n); };
  switch (l.kind) {
    case LinkKind::kCompute:
    case LinkKind::kIntraOut:
    case LinkKind::kIntraIn: {
      const uint32_t base = id - static_cast<uint32_t>(l.owner);
      return base + static_cast<uint32_t>(dev(l.owner));
    }
    case LinkKind::kTorus: {
      const uint32_t per = static_cast<uint32_t>(2 * spec_.torus.size());
      const uint32_t k = (id - torus_) % per;
      return torus_ + static_cast<uint32_t>(dev(l.owner)) * per + k;
    }
    case LinkKind::kNodeCpu: {
      const int moved = ((l.owner + shift / spec_.ranks_per_node) % spec_.nodes + spec_.nodes) % spec_.nodes;
      return node_cpu_ + static_cast<uint32_t>(moved);
    }
    case LinkKind::kNicOut:
    case LinkKind::kNicIn: {
      const uint32_t base = l.kind == LinkKind::kNicOut ? nic_out_ : nic_in_;
      const int node_shift = shift / spec_.ranks_per_node;
      const int node = l.owner / spec_.nics, nic = l.owner % spec_.nics;
      const int moved = ((node + node_shift) % spec_.nodes + spec_.nodes) % spec_.nodes;
      return base + static_cast<uint32_t>(moved * spec_.nics + nic);
    }
    case LinkKind::kLeafUp:
    case LinkKind::kLeafDown: {
      const uint32_t base = l.kind == LinkKind::kLeafUp ? leaf_up_ : leaf_down_;
      const int leaf_shift = shift / (spec_.ranks_per_node * spec_.leaf_nodes);
      const int rail = l.owner / leaves_, leaf = l.owner % leaves_;
      const int moved = ((leaf + leaf_shift) % leaves_ + leaves_) % leaves_;
      return base + static_cast<uint32_t>(rail * leaves_ + moved);
    }
  }
  return id;
}

std::pair<uint32_t, uint64_t> Cluster::orbit(uint32_t id, int t) const {
  // Shifts by multiples of t permute the devices in devices/t classes; every link kind is indexed
  // by something (a device, node or leaf) that moves with them, so every orbit is free and the
  // representative is the one whose owner falls in the first period.
  const Link& l = links_[id];
  const uint64_t size = static_cast<uint64_t>(devices_ / t);
  int owner_device = 0;
  switch (l.kind) {
    case LinkKind::kCompute:
    case LinkKind::kIntraOut:
    case LinkKind::kIntraIn:
    case LinkKind::kTorus: owner_device = l.owner; break;
    case LinkKind::kNodeCpu: owner_device = l.owner * spec_.ranks_per_node; break;
    case LinkKind::kNicOut:
    case LinkKind::kNicIn: owner_device = (l.owner / spec_.nics) * spec_.ranks_per_node; break;
    case LinkKind::kLeafUp:
    case LinkKind::kLeafDown:
      owner_device = (l.owner % leaves_) * spec_.leaf_nodes * spec_.ranks_per_node;
      break;
  }
  const int back = (owner_device / t) * t;
  return {shift_link(id, -back), size};
}

int Cluster::half_translation_mask_of(const std::vector<int>& dims) {
  int mask = 0, stride = 1;
  for (int d : dims) {
    if ((d & (d - 1)) != 0) return 0;
    if (d > 1) mask |= (d / 2) * stride;
    stride *= d;
  }
  return mask;
}

std::pair<uint32_t, uint64_t> Cluster::orbit_xor(uint32_t id, int mask) const {
  // A torus has device-owned links only (compute and torus links), and a translation moves a
  // link with its device: every orbit is free.
  const int owner = links_[id].owner;
  return {shift_link(id, (owner & ~mask) - owner), uint64_t{1} << std::popcount(static_cast<unsigned>(mask))};
}

std::string Cluster::link_name(uint32_t id) const {
  const Link& l = links_[id];
  std::string s(link_kind_name(l.kind));
  switch (l.kind) {
    case LinkKind::kCompute:
    case LinkKind::kIntraOut:
    case LinkKind::kIntraIn: return s + " device " + std::to_string(l.owner);
    case LinkKind::kNodeCpu: return s + " node " + std::to_string(l.owner);
    case LinkKind::kNicOut:
    case LinkKind::kNicIn:
      return s + " node " + std::to_string(l.owner / spec_.nics) + " nic " + std::to_string(l.owner % spec_.nics);
    case LinkKind::kLeafUp:
    case LinkKind::kLeafDown:
      return s + " rail " + std::to_string(l.owner / leaves_) + " leaf " + std::to_string(l.owner % leaves_);
    case LinkKind::kTorus: {
      const uint32_t per = static_cast<uint32_t>(2 * spec_.torus.size());
      const uint32_t k = (id - torus_) % per;
      static constexpr const char* kDims = "xyz";
      return s + " device " + std::to_string(l.owner) + " " + (k % 2 == 0 ? "+" : "-") + kDims[k / 2];
    }
  }
  return s;
}

std::string Cluster::describe() const {
  const ClusterSpec& s = spec_;
  std::string out;
  auto cls = [](const LinkClass& c) { return format_bandwidth(c.bandwidth) + "," + format_latency(c.latency); };
  if (is_torus()) {
    out = "torus=";
    for (size_t i = 0; i < s.torus.size(); ++i) {
      if (i > 0) out += 'x';
      out += std::to_string(s.torus[i]);
    }
    out += " link=" + cls(s.torus_link);
  } else {
    out = "nodes=" + std::to_string(s.nodes) + " ranks=" + std::to_string(s.ranks_per_node) + " intra=" + cls(s.intra);
    if (s.nics > 0) {
      out += " nics=" + std::to_string(s.nics) + " nic=" + cls(s.nic) + " fabric=" + std::string(fabric_name(s.fabric)) +
             " leaf=" + std::to_string(s.leaf_nodes) + " oversub=" + fmt(s.oversubscription) +
             " fabric_lat=" + format_latency(s.fabric_latency);
    }
  }
  out += " reduce=" + format_bandwidth(s.reduce_bandwidth) + " copy=" + format_bandwidth(s.copy_bandwidth);
  if (s.cores > 0) out += " cores=" + std::to_string(s.cores) + " wake=" + format_latency(s.wake_latency);
  if (s.cache_bytes > 0) out += " cache=" + fmt(s.cache_bytes / 1048576.0) + "MiB spill=" + fmt(s.spill);
  if (!s.shared_memory) out += " shm=0";
  return out;
}

}  // namespace weft::topology
