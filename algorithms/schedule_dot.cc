#include "algorithms/schedule_dot.h"

#include <deque>
#include <map>
#include <sstream>
#include <tuple>

namespace weft::algorithms {
namespace {

std::string node(int r, size_t s) { return "r" + std::to_string(r) + "s" + std::to_string(s); }

const char* colour(StepKind k) {
  switch (k) {
    case StepKind::kSend: return "#cfe2ff";
    case StepKind::kRecv: return "#d1e7dd";
    case StepKind::kRecvReduce: return "#ffe69c";
    case StepKind::kReduce: return "#ffe69c";
    case StepKind::kCopy: return "#e2e3e5";
    case StepKind::kDivide: return "#f8d7da";
  }
  return "white";
}

std::string label(const Step& s) {
  std::ostringstream os;
  switch (s.kind) {
    case StepKind::kSend: os << "send to " << s.peer << "\\n" << region_to_string(s.src); break;
    case StepKind::kRecv: os << "recv from " << s.peer << "\\n" << region_to_string(s.dst); break;
    case StepKind::kRecvReduce: os << "recv+reduce from " << s.peer << "\\n" << region_to_string(s.dst); break;
    case StepKind::kCopy: os << "copy\\n" << region_to_string(s.src) << " -> " << region_to_string(s.dst); break;
    case StepKind::kReduce: os << "reduce\\n" << region_to_string(s.src) << " -> " << region_to_string(s.dst); break;
    case StepKind::kDivide: os << "divide\\n" << region_to_string(s.dst); break;
  }
  if (s.channel != 0 && s.peer >= 0) os << " ch" << s.channel;
  return os.str();
}

}  // namespace

std::string schedule_to_dot(const std::string& title, const std::vector<Program>& programs) {
  std::ostringstream os;
  os << "digraph schedule {\n  label=\"" << title << "\"; labelloc=t; fontname=Helvetica; newrank=true;\n"
     << "  node [shape=box, style=\"rounded,filled\", fontname=Helvetica, fontsize=10];\n";
  std::map<std::tuple<int, int, int>, std::deque<size_t>> sends;  // (from, to, channel) -> send steps
  for (const Program& p : programs) {
    os << "  subgraph cluster_" << p.rank << " {\n    label=\"rank " << p.rank << "\"; style=dashed;\n";
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const Step& st = p.steps[s];
      os << "    " << node(p.rank, s) << " [label=\"" << label(st) << "\", fillcolor=\"" << colour(st.kind) << "\"];\n";
      if (s > 0) os << "    " << node(p.rank, s - 1) << " -> " << node(p.rank, s) << " [style=invis, weight=10];\n";
      if (st.kind == StepKind::kSend) sends[{p.rank, st.peer, st.channel}].push_back(s);
    }
    os << "  }\n";
  }
  for (const Program& p : programs) {
    for (size_t s = 0; s < p.steps.size(); ++s) {
      const Step& st = p.steps[s];
      if (st.kind != StepKind::kRecv && st.kind != StepKind::kRecvReduce) continue;
      auto& q = sends[{st.peer, p.rank, st.channel}];
      if (q.empty()) continue;
      os << "  " << node(st.peer, q.front()) << " -> " << node(p.rank, s) << " [color=\"#0d6efd\", constraint=false];\n";
      q.pop_front();
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace weft::algorithms
