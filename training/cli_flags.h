// A small command-line flag parser for the training tools: "--name value" or "--name=value",
// boolean flags by presence ("--quiet"), strict value parsing (the whole word must be a number of
// the flag's type), and errors a user can act on ("--steps expects an integer, got '1e3'").
// The caller prints the error and usage() and exits 2; the parser never prints or exits.
//
// Ownership: the parser writes through the pointers it was given; they must outlive parse().
// Thread-safety: none.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/status.h"

namespace weft::training {

class FlagParser {
 public:
  FlagParser(std::string program, std::string summary);

  void add_string(std::string name, std::string* value, std::string help);
  void add_int(std::string name, int* value, std::string help);
  void add_int64(std::string name, int64_t* value, std::string help);
  void add_uint64(std::string name, uint64_t* value, std::string help);
  void add_float(std::string name, float* value, std::string help);
  void add_double(std::string name, double* value, std::string help);
  void add_bool(std::string name, bool* value, std::string help);  // presence sets true

  // Parses argv[1..argc). InvalidArgument for an unknown flag, a missing or malformed value, a
  // flag given twice, or a word that is not a flag. "--help"/"-h" sets help_requested().
  Status parse(int argc, const char* const* argv);
  bool help_requested() const { return help_requested_; }
  bool was_set(std::string_view name) const;
  // "usage: <program> [flags]\n<summary>\n\n  --name VALUE  help (default: ...)\n..."
  std::string usage() const;

 private:
  struct Flag {
    std::string name;
    std::string help;
    std::string default_text;  // the value before parsing, as text
    bool takes_value;
    std::function<bool(std::string_view)> set;  // false: malformed value
    std::string expects;                        // "an integer", "a number", ...
    bool set_by_user = false;
  };
  void add(std::string name, std::string help, std::string default_text, bool takes_value,
           std::function<bool(std::string_view)> set, std::string expects);

  std::string program_;
  std::string summary_;
  std::vector<Flag> flags_;
  bool help_requested_ = false;
};

}  // namespace weft::training
