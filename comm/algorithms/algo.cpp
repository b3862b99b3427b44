#include "comm/algorithms/algo.h"

#include <stdexcept>
#include <string>

#include "comm/algorithms/registry.h"

namespace dpt {

Algo Algo::of(const algo::Algorithm& algorithm) { return Algo(algorithm.name); }

Algo parse_algo(std::string_view text) {
  if (text == Algo::automatic.name()) return Algo::automatic;
  if (text == Algo::native.name()) return Algo::native;
  if (const algo::Algorithm* a = algo::find_any(text)) return Algo::of(*a);
  std::string valid = "auto";
  for (const std::string& n : algo::names()) valid += ", " + n;
  throw std::invalid_argument("unknown algorithm '" + std::string(text) + "'; valid: " + valid + ", native");
}

// Every name is a string literal (auto, native, or a registered Algorithm's).
const char* algo_name(Algo a) { return a.name().data(); }

std::string algo::help_text() {
  std::string out = "auto | native";
  for (const std::string& name : names()) {
    std::string colls;
    for (const std::string& c : collectives_of(name)) colls += (colls.empty() ? "" : ", ") + c;
    out += " | " + name + " (" + colls + ")";
  }
  return out;
}

}  // namespace dpt
