// knobs(): the declared COMM_* knobs with every registered algorithm's threshold put in
// their place and COMM_ALGO's text naming the registered algorithms. Apart from env.cpp so
// that the getters do not pull in the algorithm registry.
#include <deque>
#include <string>
#include <string_view>

#include "comm/algorithms/registry.h"
#include "comm/launch/env.h"

namespace dpt::env {

namespace detail {
const std::vector<Knob>& declared_knobs();
}

const std::vector<Knob>& knobs() {
  static const std::vector<Knob> all = [] {
    static std::deque<std::string> text;  // the generated strings (a deque never moves them)
    auto keep = [](std::string s) { return text.emplace_back(std::move(s)).c_str(); };
    std::vector<Knob> out;
    for (const Knob& k : detail::declared_knobs()) {
      if (k.name == nullptr) {
        for (const algo::Algorithm* a : algo::all())
          if (a->threshold.env)
            out.push_back({a->threshold.env, keep(std::to_string(a->threshold.default_bytes)), a->threshold.meaning});
      } else if (std::string_view(k.name) == kAlgo) {
        std::string names;
        for (const std::string& n : algo::names()) names += (names.empty() ? "" : ", ") + n;
        out.push_back({k.name, k.default_value,
                       keep("collective algorithm: auto, native, or a registered algorithm's name (" + names +
                            "), which applies to the collectives that have one")});
      } else {
        out.push_back(k);
      }
    }
    return out;
  }();
  return all;
}

}  // namespace dpt::env
