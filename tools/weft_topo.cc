// weft-topo: shows a system graph (docs/TOPOLOGY.md): this machine as hwloc sees it, an NCCL
// topology XML file, or a synthetic system; as a tree, the placement of ranks on it, the path
// matrix between ranks, and as a picture (graphviz).
//
//   weft-topo                                  this machine (or WEFT_TOPO_FILE / NCCL_TOPO_FILE)
//   weft-topo --synthetic dgx-h100:4 --png docs/topology/dgx-h100-4.png
//   weft-topo --file topo.xml --paths            (NCCL XML, or a cluster description)
//
// Usage errors exit 2; a source that cannot be read or drawn exits 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "topology/discover.h"
#include "topology/nccl_xml.h"
#include "topology/nvml.h"
#include "topology/placement.h"
#include "topology/synthetic.h"
#include "topology/system.h"
#include "topology/topo_file.h"

namespace {

using weft::topology::System;

constexpr int kUsageExit = 2;

constexpr const char* kUsage =
    "usage: weft-topo [SOURCE] [--tree] [--placement] [--paths] [OUTPUTS]\n"
    "source (default: WEFT_TOPO_FILE or NCCL_TOPO_FILE when set, else --discover):\n"
    "  --discover         this machine, through hwloc (and NVML, where the driver is)\n"
    "  --file PATH        a topology file as WEFT_TOPO_FILE takes it: NCCL topology XML, or a\n"
    "                     cluster description (shm:2 nodes=2 nics=1 nic=1Gb/s,40us)\n"
    "  --synthetic TEXT   a synthetic system: dgx-h100:4, torus:4x4x4, dragonfly:4,2,2, or cluster\n"
    "                     keys such as 'nodes=16 ranks=8 nics=8 fabric=fattree oversub=2:1'\n"
    "what to print (default: all three):\n"
    "  --tree             machines, CPUs and what hangs below them, then the other links\n"
    "  --placement        each rank's machine, local index, rail, torus coordinates; the ring\n"
    "  --paths            path type and bottleneck bandwidth between ranks (first --max-ranks)\n"
    "  --max-ranks N      size of the path matrix (default 16)\n"
    "outputs:\n"
    "  --dot FILE         the graph in graphviz's dot language\n"
    "  --png FILE, --svg FILE   drawn by graphviz (`dot`, Debian package graphviz)\n"
    "  --dump-xml FILE    as an NCCL topology XML file (as NCCL_TOPO_DUMP_FILE does)\n"
    "  -h, --help         this help\n";

struct Options {
  enum class Source { kDefault, kDiscover, kFile, kSynthetic } source = Source::kDefault;
  std::string source_arg;
  bool tree = false, placement = false, paths = false;
  int max_ranks = 16;
  std::string dot, png, svg, xml;
};

int usage_error(const std::string& what) {
  std::fprintf(stderr, "weft-topo: %s\n%s", what.c_str(), kUsage);
  return kUsageExit;
}

// Returns -1 when the options are good, else the exit status.
int parse_options(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) return false;
      *out = argv[++i];
      return true;
    };
    auto source = [&](Options::Source s) {
      if (o->source != Options::Source::kDefault) return false;
      o->source = s;
      return s == Options::Source::kDiscover || value(&o->source_arg);
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--discover" || a == "--file" || a == "--synthetic") {
      const auto s = a == "--discover" ? Options::Source::kDiscover
                     : a == "--file"   ? Options::Source::kFile
                                       : Options::Source::kSynthetic;
      if (o->source != Options::Source::kDefault) return usage_error("give one source (" + a + " is a second)");
      if (!source(s)) return usage_error(a + " needs a value");
    } else if (a == "--tree") {
      o->tree = true;
    } else if (a == "--placement") {
      o->placement = true;
    } else if (a == "--paths") {
      o->paths = true;
    } else if (a == "--max-ranks") {
      std::string v;
      char* end = nullptr;
      if (!value(&v)) return usage_error("--max-ranks needs a value");
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 4096) return usage_error("--max-ranks '" + v + "' is not in 1..4096");
      o->max_ranks = static_cast<int>(n);
    } else if (a == "--dot" || a == "--png" || a == "--svg" || a == "--dump-xml") {
      std::string* out = a == "--dot" ? &o->dot : a == "--png" ? &o->png : a == "--svg" ? &o->svg : &o->xml;
      if (!value(out)) return usage_error(a + " needs a file name");
    } else {
      return usage_error("unknown option '" + a + "'");
    }
  }
  if (!o->tree && !o->placement && !o->paths && o->dot.empty() && o->png.empty() && o->svg.empty() && o->xml.empty())
    o->tree = o->placement = o->paths = true;
  if (o->source == Options::Source::kDefault) {
    const char* file = std::getenv("WEFT_TOPO_FILE");
    if (file == nullptr || *file == '\0') file = std::getenv("NCCL_TOPO_FILE");
    if (file != nullptr && *file != '\0') {
      o->source = Options::Source::kFile;
      o->source_arg = file;
    } else {
      o->source = Options::Source::kDiscover;
    }
  }
  return -1;
}

weft::Result<System> load(const Options& o) {
  switch (o.source) {
    case Options::Source::kFile: {
      // What WEFT_TOPO_FILE takes: NCCL XML, or a cluster description drawn as its graph.
      auto file = weft::topology::load_topology_file(o.source_arg);
      WEFT_TRY(file);
      if (file->system) return std::move(*file->system);
      WEFT_TRY(weft::topology::describes_something(*file, o.source_arg));
      return weft::topology::system_of(*file->cluster);
    }
    case Options::Source::kSynthetic: return weft::topology::synthesize(o.source_arg);
    default: {
      weft::Status nvml;
      auto system = weft::topology::discover_this_machine(weft::topology::kNvmlLibrary, &nvml);
      // Say why GPUs come without NVLinks, where they would: NVML did not answer.
      if (!nvml.ok()) std::fprintf(stderr, "weft-topo: no NVLinks or GPU sm (%s)\n", nvml.message().c_str());
      return system;
    }
  }
}

std::string fixed(double v, int width) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%*.*g", width, 4, v);
  return buf;
}

// Two matrices over the first n ranks: path types, then bottleneck bandwidths in GB/s.
std::string path_matrix(const System& s, const std::vector<int>& ranks, int n) {
  std::string types = "path types (rank x rank)\n     ", bws = "bottleneck GB/s (rank x rank)\n     ";
  for (int j = 0; j < n; ++j) {
    types += fixed(j, 5);
    bws += fixed(j, 7);
  }
  types += "\n";
  bws += "\n";
  for (int i = 0; i < n; ++i) {
    types += fixed(i, 4) + " ";
    bws += fixed(i, 4) + " ";
    for (int j = 0; j < n; ++j) {
      auto p = s.path(ranks[static_cast<size_t>(i)], ranks[static_cast<size_t>(j)]);
      const std::string t = p.ok() ? std::string(weft::topology::path_type_name(p->type)) : "-";
      types += std::string(5 - t.size(), ' ') + t;
      bws += !p.ok() ? "      -" : i == j ? "      ." : fixed(p->bandwidth / 1e9, 7);
    }
    types += "\n";
    bws += "\n";
  }
  return types + bws;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return static_cast<bool>(f);
}

// Renders dot text to `out` in `format` with graphviz. Returns false (and says why) on failure.
bool render(const std::string& dot_text, const std::string& format, const std::string& out) {
  const std::string tmp = out + ".dot.tmp";
  if (!write_file(tmp, dot_text)) {
    std::fprintf(stderr, "weft-topo: cannot write %s\n", tmp.c_str());
    return false;
  }
  const std::string cmd = "dot -T" + format + " -o '" + out + "' '" + tmp + "'";
  const int rc = std::system(cmd.c_str());
  std::remove(tmp.c_str());
  if (rc != 0) {
    std::fprintf(stderr, "weft-topo: `%s` failed (status %d); is graphviz installed?\n", cmd.c_str(), rc);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const int rc = parse_options(argc, argv, &o); rc >= 0) return rc;
  auto system = load(o);
  if (!system.ok()) {
    std::fprintf(stderr, "weft-topo: %s\n", system.status().message().c_str());
    return 1;
  }
  const System& s = *system;
  const std::vector<int> ranks = weft::topology::default_rank_vertices(s);
  if (o.tree) std::printf("%s", s.tree().c_str());
  if (o.placement) {
    auto p = weft::topology::place(s, ranks);
    if (!p.ok()) {
      std::fprintf(stderr, "weft-topo: %s\n", p.status().message().c_str());
      return 1;
    }
    std::printf("placement of %zu ranks\n%s", ranks.size(), weft::topology::describe(s, *p).c_str());
  }
  if (o.paths) {
    const int n = std::min(o.max_ranks, static_cast<int>(ranks.size()));
    std::printf("%s", path_matrix(s, ranks, n).c_str());
  }
  bool ok = true;
  if (!o.dot.empty() && !write_file(o.dot, s.dot())) {
    std::fprintf(stderr, "weft-topo: cannot write %s\n", o.dot.c_str());
    ok = false;
  }
  if (!o.png.empty()) ok &= render(s.dot(), "png", o.png);
  if (!o.svg.empty()) ok &= render(s.dot(), "svg", o.svg);
  if (!o.xml.empty()) {
    const weft::Status st = weft::topology::save_nccl_xml(s, o.xml);
    if (!st.ok()) {
      std::fprintf(stderr, "weft-topo: %s\n", st.message().c_str());
      ok = false;
    }
  }
  return ok ? 0 : 1;
}
