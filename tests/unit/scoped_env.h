// ScopedEnv: a test fixture member that clears a list of environment variables for the length of
// one test and then puts back whatever was there. Not thread-safe (setenv/unsetenv), like the
// code it serves.
#pragma once

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace weft::testing {

class ScopedEnv {
 public:
  template <size_t N>
  explicit ScopedEnv(const char* const (&names)[N]) : names_(names, names + N) {
    for (const char* v : names_) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      ::unsetenv(v);
    }
  }
  ~ScopedEnv() {
    for (const char* v : names_) ::unsetenv(v);
    for (auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<const char*> names_;
  std::map<std::string, std::string> saved_;
};

}  // namespace weft::testing
