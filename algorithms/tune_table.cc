#include "algorithms/tune_table.h"

#include <fstream>
#include <sstream>

namespace weft::algorithms {

namespace {

std::string_view normalised(std::string_view transport) { return transport == "auto" ? "shm" : transport; }

bool to_number(const std::string& text, size_t* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19) return false;
  *out = std::stoull(text);
  return true;
}

}  // namespace

Result<TuneTable> TuneTable::parse(std::string_view text, std::string_view transport, std::string_view source) {
  TuneTable table;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    auto bad = [&](const std::string& what) {
      return invalid_argument(std::string(source) + ":" + std::to_string(lineno) + ": " + what);
    };
    if (f.size() != 7 && f.size() != 8)
      return bad("expected 7 or 8 fields (transport collective nranks nodes min_bytes max_bytes algorithm "
                 "[slice_bytes]), found " + std::to_string(f.size()));
    TuneEntry e;
    e.transport = std::string(normalised(f[0]));
    const auto coll = parse_collective(f[1]);
    if (!coll) return bad("unknown collective '" + f[1] + "'");
    e.coll = *coll;
    size_t nranks = 0, nodes = 0;
    if (!to_number(f[2], &nranks) || nranks < 1 || nranks > (1u << 24)) return bad("bad rank count '" + f[2] + "'");
    if (!to_number(f[3], &nodes) || nodes < 1 || nodes > nranks) return bad("bad node count '" + f[3] + "'");
    e.nranks = static_cast<int>(nranks);
    e.nodes = static_cast<int>(nodes);
    if (!to_number(f[4], &e.min_bytes)) return bad("bad min_bytes '" + f[4] + "'");
    if (!to_number(f[5], &e.max_bytes) || e.max_bytes < e.min_bytes) return bad("bad max_bytes '" + f[5] + "'");
    const auto algo = algorithm_by_name(f[6]);
    if (!algo) return bad("unknown algorithm '" + f[6] + "'");
    e.algorithm = *algo;
    if (f.size() == 8 && (!to_number(f[7], &e.slice_bytes) || e.slice_bytes == 0))
      return bad("bad slice_bytes '" + f[7] + "' (a byte count > 0)");
    if (e.transport == normalised(transport)) table.entries_.push_back(std::move(e));
  }
  return table;
}

Result<TuneTable> TuneTable::load(const std::string& path, std::string_view transport) {
  std::ifstream f(path);
  if (!f) return invalid_argument("WEFT_TUNE_FILE: cannot read '" + path + "'");
  std::ostringstream text;
  text << f.rdbuf();
  return parse(text.str(), transport, path);
}

const TuneEntry* TuneTable::lookup(Collective coll, int nranks, int nodes, size_t bytes) const {
  for (const TuneEntry& e : entries_)
    if (e.coll == coll && e.nranks == nranks && e.nodes == nodes && bytes >= e.min_bytes && bytes <= e.max_bytes)
      return &e;
  return nullptr;
}

}  // namespace weft::algorithms
