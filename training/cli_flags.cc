// Command-line flags. See cli_flags.h.
#include "training/cli_flags.h"

#include <charconv>
#include <sstream>
#include <utility>

namespace weft::training {

namespace {

// The whole of `text` as a T, or false.
template <typename T>
bool parse_number(std::string_view text, T* out) {
  if (text.empty()) return false;
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return false;
  *out = value;
  return true;
}

// A flag's setter: parses the whole word into *value.
template <typename T>
std::function<bool(std::string_view)> number_setter(T* value) {
  return [value](std::string_view text) { return parse_number(text, value); };
}

template <typename T>
std::string to_text(T value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

FlagParser::FlagParser(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {}

void FlagParser::add(std::string name, std::string help, std::string default_text,
                     bool takes_value, std::function<bool(std::string_view)> set,
                     std::string expects) {
  flags_.push_back(Flag{std::move(name), std::move(help), std::move(default_text), takes_value,
                        std::move(set), std::move(expects)});
}

void FlagParser::add_string(std::string name, std::string* value, std::string help) {
  add(std::move(name), std::move(help), *value, true,
      [value](std::string_view v) {
        *value = std::string(v);
        return true;
      },
      "a value");
}

void FlagParser::add_int(std::string name, int* value, std::string help) {
  add(std::move(name), std::move(help), to_text(*value), true, number_setter(value), "an integer");
}

void FlagParser::add_int64(std::string name, int64_t* value, std::string help) {
  add(std::move(name), std::move(help), to_text(*value), true, number_setter(value), "an integer");
}

void FlagParser::add_uint64(std::string name, uint64_t* value, std::string help) {
  add(std::move(name), std::move(help), to_text(*value), true, number_setter(value),
      "a non-negative integer");
}

void FlagParser::add_float(std::string name, float* value, std::string help) {
  add(std::move(name), std::move(help), to_text(*value), true, number_setter(value), "a number");
}

void FlagParser::add_double(std::string name, double* value, std::string help) {
  add(std::move(name), std::move(help), to_text(*value), true, number_setter(value), "a number");
}

void FlagParser::add_bool(std::string name, bool* value, std::string help) {
  add(std::move(name), std::move(help), "", false,
      [value](std::string_view) {
        *value = true;
        return true;
      },
      "");
}

Status FlagParser::parse(int argc, const char* const* argv) {
  for (int i = 1; i < argc; i++) {
    const std::string_view word = argv[i];
    if (word == "--help" || word == "-h") {
      help_requested_ = true;
      continue;
    }
    if (!word.starts_with("--")) {
      return invalid_argument("unexpected argument '" + std::string(word) +
                              "' (flags start with --)");
    }
    std::string_view name = word.substr(2);
    std::string_view value;
    bool has_inline_value = false;
    if (const size_t eq = name.find('='); eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    Flag* flag = nullptr;
    for (Flag& f : flags_) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) return invalid_argument("unknown flag --" + std::string(name));
    if (flag->set_by_user) return invalid_argument("--" + flag->name + " given twice");
    if (flag->takes_value && !has_inline_value) {
      if (i + 1 >= argc) return invalid_argument("--" + flag->name + " needs a value");
      value = argv[++i];
    }
    if (!flag->takes_value && has_inline_value) {
      return invalid_argument("--" + flag->name + " takes no value");
    }
    if (!flag->set(value)) {
      return invalid_argument("--" + flag->name + " expects " + flag->expects + ", got '" +
                              std::string(value) + "'");
    }
    flag->set_by_user = true;
  }
  return Status();
}

bool FlagParser::was_set(std::string_view name) const {
  for (const Flag& f : flags_) {
    if (f.name == name) return f.set_by_user;
  }
  return false;
}

std::string FlagParser::usage() const {
  std::string text = "usage: " + program_ + " [flags]\n" + summary_ + "\n\nflags:\n";
  for (const Flag& f : flags_) {
    std::string left = "  --" + f.name + (f.takes_value ? " VALUE" : "");
    if (left.size() < 26) left.resize(26, ' ');
    else left += "  ";
    text += left + f.help;
    if (f.takes_value && !f.default_text.empty()) text += " (default: " + f.default_text + ")";
    text += "\n";
  }
  text += "  --help                  this text\n";
  return text;
}

}  // namespace weft::training
