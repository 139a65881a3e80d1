#include "topology/nccl_xml.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

// GCC 12 at -O3 reports false -Wrestrict overlaps in std::string's operator+ (GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace weft::topology {
namespace {

using Attrs = std::vector<std::pair<std::string, std::string>>;

constexpr size_t kMaxDepth = 64;         // elements nested deeper are an error (NCCL's files: ~8)
constexpr int kMaxNvLinkCount = 1024;    // per <nvlink>; more is a typo, not a machine
constexpr double kGB = 1e9;

// ---------------------------------------------------------------------------------------------
// Small text helpers.

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (lower(s[i]) != lower(prefix[i])) return false;
  return true;
}

// A snippet of file text for an error message: at most 32 bytes, control and non-ASCII bytes as \xNN.
std::string quote(std::string_view s) {
  std::string out = "'";
  const size_t n = std::min<size_t>(s.size(), 32);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > n) out += "...";
  return out + "'";
}

// A whole-string integer: decimal, or hexadecimal after "0x".
bool parse_int(std::string_view s, int* out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return false;
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return false;
  *out = v;
  return true;
}

bool parse_double(std::string_view s, double* out) {
  if (s.empty()) return false;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'f'); }

std::string format_int(int v) { return std::to_string(v); }

std::string format_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.15g", v);
  return buf;
}

const std::string* find_attr(const Attrs& attrs, std::string_view key) {
  for (const auto& [k, v] : attrs)
    if (k == key) return &v;
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// The XML document: elements in one array, children by index (no recursion while parsing).

struct XmlAttr {
  std::string name;
  std::string value;
  int line = 0;
};

struct XmlElement {
  std::string name;
  int line = 0;
  std::vector<XmlAttr> attrs;
  std::vector<int> children;

  const XmlAttr* attr(std::string_view n) const {
    for (const XmlAttr& a : attrs)
      if (a.name == n) return &a;
    return nullptr;
  }
};

struct XmlDoc {
  std::vector<XmlElement> elements;
  int root = -1;
};

Status located(std::string_view source, int line, const std::string& what) {
  return invalid_argument(std::string(source) + ":" + std::to_string(line) + ": " + what);
}

class XmlParser {
 public:
  XmlParser(std::string_view text, std::string_view source) : text_(text), source_(source) {
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') newlines_.push_back(i);
  }

  Result<XmlDoc> parse();

 private:
  int line_at(size_t pos) const {
    return 1 + static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), pos) - newlines_.begin());
  }
  Status error(size_t pos, const std::string& what) const { return located(source_, line_at(pos), what); }
  bool starts(size_t pos, std::string_view s) const { return text_.substr(pos, s.size()) == s; }
  void skip_space(size_t* p) const {
    while (*p < text_.size() && is_space(text_[*p])) ++*p;
  }
  // An XML name (ASCII subset: letters, digits, _ : . -, not starting with a digit, '.' or '-').
  std::string_view scan_name(size_t* p) const {
    const size_t start = *p;
    auto first = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; };
    auto rest = [&](char c) { return first(c) || (c >= '0' && c <= '9') || c == '.' || c == '-'; };
    if (*p < text_.size() && first(text_[*p])) {
      ++*p;
      while (*p < text_.size() && rest(text_[*p])) ++*p;
    }
    return text_.substr(start, *p - start);
  }
  Result<std::string> decode(std::string_view raw, size_t pos) const;
  Status parse_tag(size_t* pos, XmlElement* e, bool* self_closing) const;

  std::string_view text_;
  std::string_view source_;
  std::vector<size_t> newlines_;
};

void append_utf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xc0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xe0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    *out += static_cast<char>(0xf0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    *out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Replaces the entities in an attribute value; `pos` is where `raw` starts in the text.
Result<std::string> XmlParser::decode(std::string_view raw, size_t pos) const {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '&') {
      out += raw[i];
      continue;
    }
    const size_t semi = raw.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12)
      return error(pos + i, "'&' does not start an entity such as &amp; (write &amp; for '&')");
    const std::string_view name = raw.substr(i + 1, semi - i - 1);
    if (name == "amp") {
      out += '&';
    } else if (name == "lt") {
      out += '<';
    } else if (name == "gt") {
      out += '>';
    } else if (name == "quot") {
      out += '"';
    } else if (name == "apos") {
      out += '\'';
    } else if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      const std::string_view digits = name.substr(hex ? 2 : 1);
      uint32_t cp = 0;
      const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
      if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || cp == 0 ||
          cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return error(pos + i, "bad character reference " + quote(raw.substr(i, semi - i + 1)));
      append_utf8(&out, cp);
    } else {
      return error(pos + i, "unknown entity " + quote(raw.substr(i, semi - i + 1)) +
                                " (known: &amp; &lt; &gt; &quot; &apos; &#N;)");
    }
    i = semi;
  }
  return out;
}

// Reads the attributes and the end of a start tag; *pos is just after the element name.
Status XmlParser::parse_tag(size_t* pos, XmlElement* e, bool* self_closing) const {
  size_t& p = *pos;
  const size_t n = text_.size();
  const std::string tag = "<" + e->name + ">";
  while (true) {
    const size_t before = p;
    skip_space(&p);
    if (p >= n) return located(source_, e->line, "tag " + tag + " is never ended by '>'");
    if (text_[p] == '>') {
      ++p;
      *self_closing = false;
      return Status();
    }
    if (text_[p] == '/') {
      if (p + 1 < n && text_[p + 1] == '>') {
        p += 2;
        *self_closing = true;
        return Status();
      }
      return error(p, "bad attribute syntax in " + tag + ": '/' is not followed by '>'");
    }
    if (p == before) return error(p, "bad attribute syntax in " + tag + ": expected a space before " + quote(text_.substr(p, 8)));
    const size_t attr_pos = p;
    const std::string_view name = scan_name(&p);
    if (name.empty())
      return error(p, "bad attribute syntax in " + tag + ": " + quote(text_.substr(p, 8)) + " does not start an attribute name");
    const std::string what = "attribute '" + std::string(name) + "' of " + tag;
    skip_space(&p);
    if (p >= n || text_[p] != '=') return error(attr_pos, "bad attribute syntax: " + what + " has no '=' and value");
    ++p;
    skip_space(&p);
    if (p >= n || (text_[p] != '"' && text_[p] != '\''))
      return error(attr_pos, "bad attribute syntax: " + what + " needs a value in quotes");
    const char q = text_[p];
    const size_t close = text_.find(q, p + 1);
    if (close == std::string_view::npos) return error(attr_pos, "the value of " + what + " is never closed by " + q);
    const std::string_view raw = text_.substr(p + 1, close - p - 1);
    if (raw.find('<') != std::string_view::npos)
      return error(attr_pos, "'<' inside the value of " + what + " (a missing closing quote? write &lt; for '<')");
    Result<std::string> value = decode(raw, p + 1);
    WEFT_TRY(value);
    if (e->attr(name) != nullptr) return error(attr_pos, "attribute '" + std::string(name) + "' appears twice in " + tag);
    e->attrs.push_back(XmlAttr{std::string(name), std::move(value).value(), line_at(attr_pos)});
    p = close + 1;
  }
}

Result<XmlDoc> XmlParser::parse() {
  XmlDoc doc;
  std::vector<int> open;
  const size_t n = text_.size();
  size_t pos = 0;
  while (pos < n) {
    if (text_[pos] != '<') {
      const size_t end = std::min(text_.find('<', pos), n);
      for (size_t i = pos; i < end; ++i)
        if (!is_space(text_[i]))
          return error(i, "text " + quote(trim(text_.substr(i, end - i))) + " outside a tag (the format has elements only)");
      pos = end;
      continue;
    }
    if (starts(pos, "<?")) {
      const size_t end = text_.find("?>", pos + 2);
      if (end == std::string_view::npos) return error(pos, "'<?' is never closed by '?>'");
      pos = end + 2;
      continue;
    }
    if (starts(pos, "<!--")) {
      const size_t end = text_.find("-->", pos + 4);
      if (end == std::string_view::npos) return error(pos, "comment '<!--' is never closed by '-->'");
      pos = end + 3;
      continue;
    }
    if (starts(pos, "<!")) return error(pos, "'<!' markup (DOCTYPE, CDATA) is not supported");
    if (starts(pos, "</")) {
      size_t p = pos + 2;
      const std::string name(scan_name(&p));
      if (name.empty()) return error(pos, "'</' is not followed by an element name");
      skip_space(&p);
      if (p >= n || text_[p] != '>') return error(pos, "closing tag </" + name + " is not ended by '>'");
      if (open.empty()) return error(pos, "</" + name + "> closes nothing: no element is open");
      const XmlElement& top = doc.elements[static_cast<size_t>(open.back())];
      if (top.name != name)
        return error(pos, "mismatched close tag: </" + name + "> where <" + top.name + "> (opened at line " +
                              std::to_string(top.line) + ") must close");
      open.pop_back();
      pos = p + 1;
      continue;
    }
    size_t p = pos + 1;
    const std::string_view name = scan_name(&p);
    if (name.empty()) return error(pos, "'<' is not followed by an element name (write &lt; for '<')");
    if (open.empty() && doc.root >= 0)
      return error(pos, "<" + std::string(name) + "> after the root element <" +
                            doc.elements[static_cast<size_t>(doc.root)].name + "> has closed (a file has one root)");
    if (open.size() >= kMaxDepth) return error(pos, "elements nest deeper than " + std::to_string(kMaxDepth) + " levels");
    XmlElement e;
    e.name = std::string(name);
    e.line = line_at(pos);
    bool self_closing = false;
    WEFT_TRY(parse_tag(&p, &e, &self_closing));
    const int id = static_cast<int>(doc.elements.size());
    if (open.empty()) {
      doc.root = id;
    } else {
      doc.elements[static_cast<size_t>(open.back())].children.push_back(id);
    }
    doc.elements.push_back(std::move(e));
    if (!self_closing) open.push_back(id);
    pos = p;
  }
  if (!open.empty()) {
    const XmlElement& top = doc.elements[static_cast<size_t>(open.back())];
    return located(source_, top.line, "unclosed tag: <" + top.name + "> is never closed (the file ends first)");
  }
  if (doc.root < 0) return error(n, "no root element: an NCCL topology file holds one <system>");
  return doc;
}

// ---------------------------------------------------------------------------------------------
// From the document to a System.

// Where each element the reader knows may sit, and what to say when it sits elsewhere.
Status check_placement(const XmlElement& child, const XmlElement& parent, std::string_view source) {
  const std::string& c = child.name;
  const std::string& p = parent.name;
  auto fail = [&](const std::string& what) { return located(source, child.line, what); };
  if (c == "system") return fail("<system> inside <" + p + "> (it is the root)");
  if (c == "cpu" && p != "system") return fail("<cpu> inside <" + p + "> (CPUs sit directly in <system>)");
  if (c == "pci" && p != "cpu" && p != "pci") return fail("<pci> outside a <cpu> or <pci> (it is in <" + p + ">)");
  if (c == "gpu" && p != "pci") return fail("<gpu> outside a <pci> (a GPU sits in the <pci> of its bus id; it is in <" + p + ">)");
  if (c == "nic" && p != "cpu" && p != "pci") return fail("<nic> outside a <cpu> or <pci> (it is in <" + p + ">)");
  if (c == "net" && p != "nic") return fail("<net> outside a <nic> (it is in <" + p + ">)");
  if (c == "nvlink" && p != "gpu") return fail("<nvlink> outside a <gpu> (it is in <" + p + ">)");
  return Status();
}

class Builder {
 public:
  Builder(const XmlDoc& doc, std::string_view source) : doc_(doc), source_(source) {}
  Result<System> build();

 private:
  const XmlElement& el(int id) const { return doc_.elements[static_cast<size_t>(id)]; }
  Status error(int line, const std::string& what) const { return located(source_, line, what); }
  Status check_children(const XmlElement& e) const {
    for (int c : e.children) WEFT_TRY(check_placement(el(c), e, source_));
    return Status();
  }
  // Parses integer attribute `a` of element `e` into *out.
  Status int_attr(const XmlAttr& a, const XmlElement& e, int* out) const {
    if (!parse_int(trim(a.value), out))
      return error(a.line, a.name + " " + quote(a.value) + " of <" + e.name + "> is not a number");
    return Status();
  }
  // Registers a vertex name; an error when another element took it.
  Status claim_name(const std::string& name, int line, const std::string& what) {
    auto [it, fresh] = names_.emplace(name, line);
    if (!fresh) return error(line, what + " '" + name + "' is already used by the element at line " + std::to_string(it->second));
    return Status();
  }
  int add(Vertex v) {
    const int id = system_.add_vertex(std::move(v));
    ids_[system_.vertex(id).name] = id;
    return id;
  }

  Status add_cpu(const XmlElement& e);
  Status add_pci(const XmlElement& e, int parent);
  Status add_nets(const XmlElement& nic, int parent, double link_bandwidth, const Attrs& base);
  Status add_nvlinks();

  struct BusId {
    int line = 0;
    int vertex = -1;  // the GPU or PCI switch named by it; -1 for a NIC's bus id
  };
  struct GpuElement {
    int vertex = 0;
    const XmlElement* element = nullptr;
    int sm = 0;
  };

  const XmlDoc& doc_;
  std::string_view source_;
  System system_;
  std::map<std::string, int> names_;  // vertex name -> line of the element that made it
  std::map<std::string, int> ids_;    // vertex name -> id
  std::map<int, std::set<int>> nic_parents_;  // a NIC's vertex -> the vertices that list it
  std::map<std::string, BusId> bus_ids_;
  std::map<int, int> numas_;  // numaid -> line
  std::vector<GpuElement> gpus_;
};

Result<System> Builder::build() {
  const XmlElement& root = el(doc_.root);
  if (root.name != "system")
    return error(root.line, "the root element is <" + root.name + ">; an NCCL topology file's root is <system>");
  WEFT_TRY(check_children(root));
  for (int c : root.children)
    if (el(c).name == "cpu") WEFT_TRY(add_cpu(el(c)));
  WEFT_TRY(add_nvlinks());
  // The CPU-to-CPU interconnect: every pair of NUMA nodes.
  const std::vector<int> cpus = system_.of_type(VertexType::kCpu);
  for (size_t i = 0; i < cpus.size(); ++i)
    for (size_t j = i + 1; j < cpus.size(); ++j)
      system_.add_link(cpus[i], cpus[j], LinkType::kSmp, smp_bandwidth(system_.vertex(cpus[i]), system_.vertex(cpus[j])),
                       kSmpLatency);
  if (Status s = system_.validate(); !s.ok())
    return internal_error(std::string(source_) + ": the system read is inconsistent: " + s.message());
  return std::move(system_);
}

Status Builder::add_cpu(const XmlElement& e) {
  const XmlAttr* numaid = e.attr("numaid");
  if (numaid == nullptr) return error(e.line, "<cpu> has no numaid attribute");
  Vertex v;
  v.type = VertexType::kCpu;
  WEFT_TRY(int_attr(*numaid, e, &v.numa));
  // -1: NCCL's where the NUMA node is unknown (sysfs says -1, as in many virtual machines).
  if (v.numa < -1) return error(numaid->line, "numaid " + std::to_string(v.numa) + " of <cpu> is below -1 (unknown)");
  if (auto [it, fresh] = numas_.emplace(v.numa, e.line); !fresh)
    return error(numaid->line, "numaid " + std::to_string(v.numa) + " is already used by the <cpu> at line " +
                                   std::to_string(it->second));
  for (const XmlAttr& a : e.attrs) {
    if (a.name == "numaid") continue;
    if (a.name == "package") {
      WEFT_TRY(int_attr(a, e, &v.package));
    } else if (a.name == "cores") {
      WEFT_TRY(int_attr(a, e, &v.cores));
    } else if (a.name == "threads") {
      WEFT_TRY(int_attr(a, e, &v.threads));
    } else {
      if (a.name == "familyid" || a.name == "modelid") {
        int unused = 0;
        WEFT_TRY(int_attr(a, e, &unused));
      }
      v.attrs.emplace_back(a.name, a.value);
    }
  }
  v.name = "cpu" + std::to_string(v.numa);
  WEFT_TRY(claim_name(v.name, e.line, "<cpu> name"));
  const int id = add(std::move(v));
  WEFT_TRY(check_children(e));
  for (int c : e.children) {
    const XmlElement& child = el(c);
    if (child.name == "pci") WEFT_TRY(add_pci(child, id));
    if (child.name == "nic") WEFT_TRY(add_nets(child, id, 0, {}));
  }
  return Status();
}

Status Builder::add_pci(const XmlElement& e, int parent) {
  const XmlAttr* busid_attr = e.attr("busid");
  if (busid_attr == nullptr) return error(e.line, "<pci> has no busid attribute");
  if (!is_bus_id(trim(busid_attr->value)))
    return error(busid_attr->line, "bus id " + quote(busid_attr->value) + " is not a PCI address (DDDD:BB:DD.F, hex)");
  const std::string busid = to_lower(trim(busid_attr->value));
  if (auto it = bus_ids_.find(busid); it != bus_ids_.end())
    return error(busid_attr->line, "duplicate bus id " + busid + ": already used by the <pci> at line " +
                                       std::to_string(it->second.line));
  bus_ids_[busid] = BusId{e.line, -1};

  // The link up to the parent, from this device's speed and width.
  const XmlAttr* speed = e.attr("link_speed");
  const XmlAttr* width = e.attr("link_width");
  Result<double> bandwidth = pcie_link_bandwidth(speed ? speed->value : "", width ? width->value : "");
  if (!bandwidth.ok())
    return error(speed && bandwidth.status().message().starts_with("link_speed") ? speed->line
                 : width                                                      ? width->line
                                                                              : e.line,
                 "<pci> " + busid + ": " + bandwidth.status().message());

  WEFT_TRY(check_children(e));
  const XmlElement* gpu = nullptr;
  int nics = 0, pcis = 0;
  for (int c : e.children) {
    const XmlElement& child = el(c);
    if (child.name == "gpu") {
      if (gpu != nullptr) return error(child.line, "<pci> " + busid + " holds a second <gpu> (one GPU per bus id)");
      gpu = &child;
    }
    nics += child.name == "nic";
    pcis += child.name == "pci";
  }
  if (gpu != nullptr && (nics > 0 || pcis > 0))
    return error(gpu->line, "<pci> " + busid + " holds a <gpu> and a <" + (nics > 0 ? "nic" : "pci") +
                                "> (a GPU's <pci> holds the GPU alone)");

  Attrs pci_attrs;  // everything but the bus id, in file order
  for (const XmlAttr& a : e.attrs)
    if (a.name != "busid") pci_attrs.emplace_back(a.name, a.value);
  const XmlAttr* klass = e.attr("class");
  const bool bridge = klass != nullptr && starts_with_nocase(trim(klass->value), "0x0604");

  if (gpu != nullptr) {
    Vertex v;
    v.type = VertexType::kGpu;
    v.name = busid;
    v.attrs = pci_attrs;
    int sm = 0;
    for (const XmlAttr& a : gpu->attrs) {
      if (a.name == "dev") {
        WEFT_TRY(int_attr(a, *gpu, &v.dev));
      } else if (a.name == "rank") {
        WEFT_TRY(int_attr(a, *gpu, &v.rank));
      } else {
        if (a.name == "sm") WEFT_TRY(int_attr(a, *gpu, &sm));
        v.attrs.emplace_back("gpu." + a.name, a.value);
      }
    }
    WEFT_TRY(claim_name(busid, e.line, "bus id"));
    const int id = add(std::move(v));
    bus_ids_[busid].vertex = id;
    system_.add_link(parent, id, LinkType::kPci, *bandwidth, kPciLatency);
    WEFT_TRY(check_children(*gpu));
    gpus_.push_back(GpuElement{id, gpu, sm});
    return Status();
  }

  if (nics > 0 && pcis == 0 && !bridge) {
    // The NIC's own PCI function: each <net> is a NIC vertex carrying the pci's attributes.
    Attrs base;
    base.emplace_back("busid", busid);
    base.insert(base.end(), pci_attrs.begin(), pci_attrs.end());
    for (int c : e.children)
      if (el(c).name == "nic") WEFT_TRY(add_nets(el(c), parent, *bandwidth, base));
    return Status();
  }

  // A PCIe switch (or another device that is neither GPU nor NIC).
  Vertex v;
  v.type = VertexType::kPciSwitch;
  v.name = busid;
  v.attrs = std::move(pci_attrs);
  WEFT_TRY(claim_name(busid, e.line, "bus id"));
  const int id = add(std::move(v));
  bus_ids_[busid].vertex = id;
  system_.add_link(parent, id, LinkType::kPci, *bandwidth, kPciLatency);
  for (int c : e.children) {
    const XmlElement& child = el(c);
    if (child.name == "pci") WEFT_TRY(add_pci(child, id));
    if (child.name == "nic") WEFT_TRY(add_nets(child, id, 0, {}));
  }
  return Status();
}

// One NIC vertex per <net> of `nic`, linked to `parent` at `link_bandwidth` (0: the NIC's own port
// speed when it has one, else the default PCIe bandwidth).
Status Builder::add_nets(const XmlElement& nic, int parent, double link_bandwidth, const Attrs& base) {
  WEFT_TRY(check_children(nic));
  Attrs nic_attrs = base;
  for (const XmlAttr& a : nic.attrs) nic_attrs.emplace_back("nic." + a.name, a.value);
  for (int c : nic.children) {
    const XmlElement& net = el(c);
    if (net.name != "net") continue;
    WEFT_TRY(check_children(net));
    Vertex v;
    v.type = VertexType::kNic;
    v.attrs = nic_attrs;
    const XmlAttr* name = net.attr("name");
    if (name == nullptr || name->value.empty()) return error(net.line, "<net> has no name attribute");
    v.name = name->value;
    for (const XmlAttr& a : net.attrs) {
      if (a.name == "name") continue;
      if (a.name == "dev") {
        WEFT_TRY(int_attr(a, net, &v.dev));
      } else if (a.name == "rail") {
        WEFT_TRY(int_attr(a, net, &v.rail));
      } else if (a.name == "speed") {
        double mbps = 0;
        if (!parse_double(trim(a.value), &mbps) || mbps < 0 || mbps > 1e15)
          return error(a.line, "speed " + quote(a.value) + " of <net> is not a number of Mb/s (0 to 1e15)");
        v.speed = mbps * 1e6 / 8;
      } else {
        v.attrs.emplace_back("net." + a.name, a.value);
      }
    }
    const double bandwidth = link_bandwidth > 0 ? link_bandwidth : v.speed > 0 ? v.speed : default_pcie_bandwidth();
    // The same NIC listed again under another parent (NCCL lists a socket NIC under each <cpu>):
    // one NIC, kept where it was first listed. (Linked under both CPUs, it would carry their
    // traffic as a bridge.) Twice under one parent is an error, as any other repeated name.
    if (auto it = ids_.find(v.name);
        it != ids_.end() && system_.vertex(it->second) == v && nic_parents_[it->second].insert(parent).second)
      continue;
    WEFT_TRY(claim_name(v.name, net.line, "<net> name"));
    const int id = add(std::move(v));
    nic_parents_[id].insert(parent);
    system_.add_link(parent, id, LinkType::kPci, bandwidth, kPciLatency);
  }
  return Status();
}

Status Builder::add_nvlinks() {
  std::set<std::pair<int, int>> gpu_pairs;
  for (const GpuElement& gpu : gpus_) {
    const std::string& self = system_.vertex(gpu.vertex).name;
    // Targets in order of first mention; several <nvlink>s to one target add up.
    std::vector<std::pair<std::string, long long>> targets;
    std::vector<int> lines;
    for (int c : gpu.element->children) {
      const XmlElement& link = el(c);
      if (link.name != "nvlink") continue;
      const XmlAttr* target = link.attr("target");
      if (target == nullptr) return error(link.line, "<nvlink> has no target attribute");
      // The target's PCI class: an NVSwitch's (0x068000) makes any target one, as in NCCL, which
      // writes a switch that is not a PCI device of the machine as an all-f bus id.
      const XmlAttr* tclass = link.attr("tclass");
      const bool to_switch = tclass != nullptr && starts_with_nocase(trim(tclass->value), "0x0680");
      if (!is_bus_id(trim(target->value)) && !(to_switch && !trim(target->value).empty()))
        return error(target->line, "nvlink target " + quote(target->value) +
                                       " is not a PCI address (DDDD:BB:DD.F, hex), nor of an NVSwitch's tclass 0x068000");
      const std::string name = to_lower(trim(target->value));
      if (name == self) return error(link.line, "<nvlink> from GPU " + self + " to itself");
      const XmlAttr* count_attr = link.attr("count");
      if (count_attr == nullptr) return error(link.line, "<nvlink> has no count attribute");
      int count = 0;
      WEFT_TRY(int_attr(*count_attr, link, &count));
      if (count < 1 || count > kMaxNvLinkCount)
        return error(count_attr->line, "count " + std::to_string(count) + " of <nvlink> is not between 1 and " +
                                           std::to_string(kMaxNvLinkCount));
      auto it = std::find_if(targets.begin(), targets.end(), [&](const auto& t) { return t.first == name; });
      if (it == targets.end()) {
        targets.emplace_back(name, count);
        lines.push_back(link.line);
      } else {
        it->second += count;
      }
    }
    for (size_t i = 0; i < targets.size(); ++i) {
      const auto& [name, count] = targets[i];
      const double bandwidth = static_cast<double>(count) * nvlink_bandwidth(gpu.sm);
      int to = -1;
      if (auto bus = bus_ids_.find(name); bus != bus_ids_.end()) {
        to = bus->second.vertex;
        if (to < 0 || system_.vertex(to).type != VertexType::kGpu)
          return error(lines[i], "nvlink target " + name + " is the <pci> at line " + std::to_string(bus->second.line) +
                                     ", which holds no GPU (a target is a GPU or an NVSwitch)");
        // Both GPUs usually list the link; it is one link.
        if (!gpu_pairs.insert({std::min(gpu.vertex, to), std::max(gpu.vertex, to)}).second) continue;
      } else if (auto it = ids_.find(name); it != ids_.end()) {
        to = it->second;  // an NVSwitch an earlier <nvlink> created, or a vertex misnamed as one
        if (system_.vertex(to).type != VertexType::kNvSwitch)
          return error(lines[i], "nvlink target " + name + " names a " +
                                     std::string(vertex_type_name(system_.vertex(to).type)) + ", not a GPU or an NVSwitch");
      } else {
        Vertex nvswitch;
        nvswitch.type = VertexType::kNvSwitch;
        nvswitch.name = name;
        WEFT_TRY(claim_name(name, lines[i], "nvlink target"));
        to = add(std::move(nvswitch));
      }
      system_.add_link(gpu.vertex, to, LinkType::kNvLink, bandwidth, kNvLinkLatency);
    }
  }
  return Status();
}

// ---------------------------------------------------------------------------------------------
// From a System to the document text.

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\t': out += "&#9;"; break;
      case '\n': out += "&#10;"; break;
      case '\r': out += "&#13;"; break;
      default: out += c;
    }
  }
  return out;
}

bool has_prefix(std::string_view key, std::string_view prefix) { return key.substr(0, prefix.size()) == prefix; }

bool is_element_prefixed(std::string_view key) {
  return has_prefix(key, "gpu.") || has_prefix(key, "nic.") || has_prefix(key, "net.");
}

// The attributes stored as "<prefix>name", with the prefix taken off, minus `skip` names.
Attrs with_prefix(const Attrs& attrs, std::string_view prefix, std::initializer_list<std::string_view> skip = {}) {
  Attrs out;
  for (const auto& [k, v] : attrs) {
    if (!has_prefix(k, prefix)) continue;
    const std::string name = k.substr(prefix.size());
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    out.emplace_back(name, v);
  }
  return out;
}

class Writer {
 public:
  Writer(const System& system, int machine) : s_(system), machine_(machine), claimed_(static_cast<size_t>(system.vertex_count())) {}

  std::string write() {
    out_ << "<system version=\"1\">\n";
    const std::vector<int> cpus = s_.of_type(VertexType::kCpu, machine_);
    // A CPU whose NUMA node is unknown (numa -1) gets the lowest numaid no other CPU has.
    std::set<int> numaids;
    for (int cpu : cpus) numaids.insert(s_.vertex(cpu).numa);
    int unused = 0;
    for (int cpu : cpus) {
      claimed_[static_cast<size_t>(cpu)] = true;
      const Vertex& v = s_.vertex(cpu);
      if (v.numa < 0) {
        while (numaids.count(unused) > 0) ++unused;
        numaids.insert(unused);
      }
      Attrs attrs{{"numaid", format_int(v.numa >= 0 ? v.numa : unused)}};
      for (const auto& [k, value] : v.attrs)
        if (k != "numaid" && k != "package" && k != "cores" && k != "threads") attrs.emplace_back(k, value);
      if (v.package >= 0) attrs.emplace_back("package", format_int(v.package));
      if (v.cores >= 0) attrs.emplace_back("cores", format_int(v.cores));
      if (v.threads >= 0) attrs.emplace_back("threads", format_int(v.threads));
      const std::vector<Child> children = claim_children(cpu);
      open(1, "cpu", attrs, !children.empty());
      write_children(children, 2);
      if (!children.empty()) close(1, "cpu");
    }
    out_ << "</system>\n";
    return out_.str();
  }

 private:
  struct Child {
    int vertex = 0;
    double bandwidth = 0;  // of the PCIe link from the parent
  };

  // The vertices below `v` in the tree: PCI switches, GPUs and NICs over PCIe links, in link order,
  // that no vertex written earlier claimed.
  std::vector<Child> claim_children(int v) {
    std::vector<Child> out;
    for (int l : s_.links_of(v)) {
      const Edge& link = s_.links()[static_cast<size_t>(l)];
      if (link.type != LinkType::kPci) continue;
      const int w = s_.other_end(l, v);
      const Vertex& vw = s_.vertex(w);
      if (claimed_[static_cast<size_t>(w)] || vw.machine != machine_) continue;
      if (vw.type != VertexType::kPciSwitch && vw.type != VertexType::kGpu && vw.type != VertexType::kNic) continue;
      claimed_[static_cast<size_t>(w)] = true;
      out.push_back(Child{w, link.bandwidth});
    }
    return out;
  }

  // A PCI vertex's bus id: its name where that is one; else (synthetic systems name theirs
  // "gpu3@node0") one made from the machine and the vertex id: unique within the file for vertex
  // ids below 65,536 (2^16 bus/device/function numbers), which a synthetic machine's are.
  std::string bus_id(int v) const {
    const std::string& name = s_.vertex(v).name;
    if (is_bus_id(name)) return name;
    const unsigned id = static_cast<unsigned>(v);
    return format_bus_id(static_cast<unsigned>(machine_) & 0xffff, id & 0xff, (id >> 8) & 0x1f, (id >> 13) & 7);
  }

  void open(int depth, std::string_view name, const Attrs& attrs, bool has_children) {
    out_ << std::string(static_cast<size_t>(2 * depth), ' ') << '<' << name;
    for (const auto& [k, v] : attrs) out_ << ' ' << k << "=\"" << escape(v) << '"';
    out_ << (has_children ? ">\n" : "/>\n");
  }
  void close(int depth, std::string_view name) {
    out_ << std::string(static_cast<size_t>(2 * depth), ' ') << "</" << name << ">\n";
  }

  // A <pci> element's attributes: the bus id, then the vertex's own attributes (class and link speed
  // filled in when it has none).
  Attrs pci_attrs(const std::string& busid, const Vertex& v, double bandwidth, const char* default_class) const {
    Attrs attrs{{"busid", busid}};
    if (find_attr(v.attrs, "class") == nullptr) attrs.emplace_back("class", default_class);
    for (const auto& [k, value] : v.attrs)
      if (k != "busid" && !is_element_prefixed(k)) attrs.emplace_back(k, value);
    std::string speed, width;
    if (find_attr(v.attrs, "link_speed") == nullptr && find_attr(v.attrs, "link_width") == nullptr &&
        std::abs(bandwidth - default_pcie_bandwidth()) > 1e-9 * bandwidth &&
        pcie_speed_for(bandwidth, 1e-9, &speed, &width)) {
      attrs.emplace_back("link_speed", speed);
      attrs.emplace_back("link_width", width);
    }
    return attrs;
  }

  void write_children(const std::vector<Child>& children, int depth) {
    std::vector<bool> done(children.size());
    for (size_t i = 0; i < children.size(); ++i) {
      if (done[i]) continue;
      const int w = children[i].vertex;
      const Vertex& v = s_.vertex(w);
      if (v.type == VertexType::kNic) {
        // The NICs sharing this one's bus id (ports of one device) go into one <pci><nic>.
        const std::string* busid = find_attr(v.attrs, "busid");
        std::vector<int> group;
        for (size_t j = i; j < children.size(); ++j) {
          const Vertex& vj = s_.vertex(children[j].vertex);
          if (done[j] || vj.type != VertexType::kNic) continue;
          const std::string* bj = find_attr(vj.attrs, "busid");
          if ((busid == nullptr) != (bj == nullptr) || (busid != nullptr && *busid != *bj)) continue;
          done[j] = true;
          group.push_back(children[j].vertex);
        }
        int nic_depth = depth;
        if (busid != nullptr) {
          open(depth, "pci", pci_attrs(*busid, v, children[i].bandwidth, "0x020000"), true);
          nic_depth = depth + 1;
        }
        open(nic_depth, "nic", with_prefix(v.attrs, "nic."), true);
        for (int n : group) write_net(s_.vertex(n), nic_depth + 1);
        close(nic_depth, "nic");
        if (busid != nullptr) close(depth, "pci");
      } else if (v.type == VertexType::kGpu) {
        done[i] = true;
        open(depth, "pci", pci_attrs(bus_id(w), v, children[i].bandwidth, "0x030200"), true);
        write_gpu(w, depth + 1);
        close(depth, "pci");
      } else {
        done[i] = true;
        const std::vector<Child> below = claim_children(w);
        open(depth, "pci", pci_attrs(bus_id(w), v, children[i].bandwidth, "0x060400"), !below.empty());
        write_children(below, depth + 1);
        if (!below.empty()) close(depth, "pci");
      }
    }
  }

  void write_net(const Vertex& v, int depth) {
    Attrs attrs{{"name", v.name}};
    if (v.dev >= 0) attrs.emplace_back("dev", format_int(v.dev));
    attrs.emplace_back("speed", format_number(v.speed * 8 / 1e6));
    for (auto& a : with_prefix(v.attrs, "net.", {"name", "dev", "speed", "rail"})) attrs.push_back(std::move(a));
    if (v.rail >= 0) attrs.emplace_back("rail", format_int(v.rail));
    open(depth, "net", attrs, false);
  }

  void write_gpu(int gpu, int depth) {
    const Vertex& v = s_.vertex(gpu);
    Attrs attrs;
    if (v.dev >= 0) attrs.emplace_back("dev", format_int(v.dev));
    for (auto& a : with_prefix(v.attrs, "gpu.", {"dev", "rank"})) attrs.push_back(std::move(a));
    if (v.rank >= 0) attrs.emplace_back("rank", format_int(v.rank));
    int sm = 0;
    if (const std::string* s = find_attr(v.attrs, "gpu.sm")) (void)parse_int(trim(*s), &sm);
    // NVLinks by far end; parallel links add up. GPUs first, by id, then NVSwitches in link order:
    // the order read_nccl_xml gives the links back in, whichever GPU listed a GPU-GPU link.
    std::vector<std::pair<int, double>> targets;
    for (int l : s_.links_of(gpu)) {
      const Edge& link = s_.links()[static_cast<size_t>(l)];
      if (link.type != LinkType::kNvLink) continue;
      const int w = s_.other_end(l, gpu);
      const VertexType t = s_.vertex(w).type;
      if (t != VertexType::kGpu && t != VertexType::kNvSwitch) continue;
      auto it = std::find_if(targets.begin(), targets.end(), [&](const auto& x) { return x.first == w; });
      if (it == targets.end()) {
        targets.emplace_back(w, link.bandwidth);
      } else {
        it->second += link.bandwidth;
      }
    }
    std::stable_sort(targets.begin(), targets.end(), [&](const auto& x, const auto& y) {
      const bool gx = s_.vertex(x.first).type == VertexType::kGpu, gy = s_.vertex(y.first).type == VertexType::kGpu;
      if (gx != gy) return gx;
      return gx && x.first < y.first;
    });
    open(depth, "gpu", attrs, !targets.empty());
    for (const auto& [w, bandwidth] : targets) {
      const Vertex& target = s_.vertex(w);
      const long long count = std::max(1LL, std::llround(bandwidth / nvlink_bandwidth(sm)));
      std::string tclass = "0x068000";
      if (target.type == VertexType::kGpu) {
        const std::string* c = find_attr(target.attrs, "class");
        tclass = c != nullptr ? *c : "0x030200";
      }
      open(depth + 1, "nvlink", {{"target", bus_id(w)}, {"count", std::to_string(count)}, {"tclass", tclass}}, false);
    }
    if (!targets.empty()) close(depth, "gpu");
  }

  const System& s_;
  const int machine_;
  std::vector<bool> claimed_;
  std::ostringstream out_;
};

double cpu_interconnect_gbps(const Vertex& v) {
  const std::string* arch = find_attr(v.attrs, "arch");
  const std::string* vendor = find_attr(v.attrs, "vendor");
  int family = 0, model = 0;
  if (const std::string* f = find_attr(v.attrs, "familyid")) (void)parse_int(trim(*f), &family);
  if (const std::string* m = find_attr(v.attrs, "modelid")) (void)parse_int(trim(*m), &model);
  if (arch != nullptr && *arch == "ppc64") return 32.0;
  if (arch != nullptr && (*arch == "arm64" || *arch == "aarch64")) return 6.0;
  const std::string_view who = vendor != nullptr ? trim(*vendor) : std::string_view();
  if (who == "GenuineIntel") {
    if (family != 6) return 6.0;
    if (model >= 0xCF || (model >= 0xAD && model <= 0xAF)) return 40.0;  // Emerald / Granite Rapids
    if (model >= 0x8F) return 22.0;                                       // Sapphire Rapids
    if (model >= 0x55) return 10.0;                                       // Skylake
    return 6.0;                                                           // Broadwell
  }
  if (who == "AuthenticAMD") {
    if (family <= 24) return 16.0;  // Zen 1/2
    if (family == 25) return 24.0;  // Zen 3/4
    return 32.0;                    // Zen 5
  }
  if (who == "CentaurHauls" || who == "Shanghai") return family == 7 && model == 0x5B ? 9.0 : 6.0;
  return 6.0;
}

}  // namespace

Result<double> pcie_link_bandwidth(std::string_view link_speed, std::string_view link_width) {
  double rate = 8;
  const std::string_view speed = trim(link_speed);
  if (!speed.empty() && !starts_with_nocase(speed, "unknown")) {
    size_t i = 0;
    while (i < speed.size() && ((speed[i] >= '0' && speed[i] <= '9') || speed[i] == '.')) ++i;
    const std::string_view rest = trim(speed.substr(i));
    if (!parse_double(speed.substr(0, i), &rate) || !(rate > 0) || rate > 1024 || rest.substr(0, 4) != "GT/s")
      return invalid_argument("link_speed " + quote(link_speed) + " is not '<rate> GT/s'");
  }
  int lanes = 16;
  const std::string_view width = trim(link_width);
  if (!width.empty()) {
    int w = 0;
    if (!parse_int(width, &w) || w < 0 || w > 64)
      return invalid_argument("link_width " + quote(link_width) + " is not a lane count (0 to 64)");
    if (w > 0) lanes = w;
  }
  const double encoding = rate <= 5 ? 0.8 : rate <= 32 ? 128.0 / 130.0 : 242.0 / 256.0;
  return rate * encoding * lanes / 8 * kGB;
}

bool pcie_speed_for(double bandwidth, double tolerance, std::string* speed, std::string* width,
                    std::string_view first_width) {
  std::vector<std::string> widths;
  if (!first_width.empty()) widths.emplace_back(first_width);
  for (const char* w : {"16", "8", "4", "2", "1", "32", "12"}) widths.emplace_back(w);
  for (const std::string& w : widths) {
    for (const char* rate : {"2.5", "5.0", "8.0", "16.0", "32.0", "64.0"}) {
      const std::string s = std::string(rate) + " GT/s PCIe";
      Result<double> bw = pcie_link_bandwidth(s, w);
      if (bw.ok() && std::abs(*bw - bandwidth) <= tolerance * bandwidth) {
        *speed = s;
        *width = w;
        return true;
      }
    }
  }
  return false;
}

bool is_bus_id(std::string_view s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!is_hex(s[i])) return false;
  return s[11] >= '0' && s[11] <= '7';
}

std::string format_bus_id(unsigned domain, unsigned bus, unsigned device, unsigned function) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, device, function);
  return buf;
}

std::string normal_bus_id(std::string_view text) {
  const std::string s(text);
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  char end = 0;
  if (std::sscanf(s.c_str(), "%x:%x:%x.%x%c", &domain, &bus, &dev, &fn, &end) != 4) return "";
  std::string id = format_bus_id(domain, bus, dev, fn);
  return is_bus_id(id) ? id : "";
}

double default_pcie_bandwidth() { return 8 * (128.0 / 130.0) * 16 / 8 * kGB; }

double nvlink_bandwidth(int sm) {
  if (sm >= 100) return 40.1 * kGB;
  if (sm >= 90) return 20.6 * kGB;
  if (sm == 86) return 12.0 * kGB;
  if (sm >= 70) return 20.0 * kGB;
  if (sm >= 60) return 18.0 * kGB;
  return 20.0 * kGB;  // unknown: as SM80
}

double smp_bandwidth(const Vertex& a, const Vertex& b) {
  return std::min(cpu_interconnect_gbps(a), cpu_interconnect_gbps(b)) * kGB;
}

Result<System> read_nccl_xml(std::string_view text, std::string_view source_name) {
  Result<XmlDoc> doc = XmlParser(text, source_name).parse();
  WEFT_TRY(doc);
  return Builder(*doc, source_name).build();
}

Result<System> load_nccl_xml(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return system_error("cannot open NCCL topology file " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return system_error("cannot read NCCL topology file " + path);
  return read_nccl_xml(text, path);
}

std::string write_nccl_xml(const System& system, int machine) { return Writer(system, machine).write(); }

Status save_nccl_xml(const System& system, const std::string& path, int machine) {
  const std::string text = write_nccl_xml(system, machine);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return system_error("cannot create NCCL topology file " + path);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return system_error("cannot write NCCL topology file " + path);
  return Status();
}

}  // namespace weft::topology
