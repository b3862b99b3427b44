// compare_runs: checks that two training runs agree.
//   compare_runs --metrics A.jsonl B.jsonl [--from-step S] --model A.safetensors B.safetensors --rtol R [--atol A]
// Per-step losses (metrics lines with "step" and "loss", not the "final" line) must match
// for every step after S (default 0): both files must log the same set of such steps (a
// step one file has and the other lacks fails, named), and there must be at least one.
// --from-step S is the explicit way to compare a run resumed after step S (which logs only
// the later steps) with the uninterrupted reference. Model tensors must match by name (a
// tensor in one file and not the other fails, named) and shape, with relative L2
// difference <= R per tensor. R = 0 demands identical bits.
// --atol A also accepts a tensor whose RMS difference is <= A: for tensors whose values
// are sums that cancel (a BatchNorm bias a few steps from its 0 start), where a relative
// comparison measures rounding against a value near 0 (numpy's allclose does the same).
// Any non-finite value on either side fails, named: a loss logged as NaN or inf (train
// writes them as JSON null) at any step, or a NaN/inf element of any tensor; two NaNs
// never "match", whatever R.
// Prints the largest differences it saw, so a pass shows its margin.
// Exit status: 0 MATCH, 1 MISMATCH, 2 bad usage or unreadable input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "models/io/checkpoint.h"

namespace {

// Steps are listed in a failure message up to this many, then counted.
constexpr size_t kListed = 8;

std::string list_steps(const std::vector<int64_t>& steps) {
  std::string out;
  for (size_t i = 0; i < steps.size() && i < kListed; ++i) out += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > kListed) out += " and " + std::to_string(steps.size() - kListed) + " more";
  return out;
}

struct Losses {
  std::map<int64_t, double> by_step;
  std::vector<std::string> problems;  // duplicate steps, non-finite losses
};

// A NaN or inf loss is written by nlohmann::json as null; a literal NaN/Infinity (as
// Python's json writes) is not JSON and is read here as non-finite too.
Losses read_losses(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  Losses out;
  std::map<int64_t, int> line_of;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line, nullptr, true);
    } catch (const nlohmann::json::parse_error&) {
      std::string fixed = line;  // NaN / Infinity / -Infinity, as Python's json.dumps writes them
      for (const char* bad : {"-Infinity", "Infinity", "NaN"})
        for (size_t p; (p = fixed.find(bad)) != std::string::npos;) fixed.replace(p, std::strlen(bad), "null");
      try {
        j = nlohmann::json::parse(fixed);
      } catch (const nlohmann::json::parse_error& e) {
        throw std::runtime_error(path + ":" + std::to_string(n) + ": not a JSON line: " + e.what());
      }
    }
    if (!j.is_object() || !j.contains("step") || !j.contains("loss") || j.contains("final")) continue;
    if (!j["step"].is_number_integer()) throw std::runtime_error(path + ":" + std::to_string(n) + ": \"step\" is not an integer");
    const int64_t step = j["step"].get<int64_t>();
    const auto& l = j["loss"];
    double loss;
    if (l.is_null()) loss = std::nan("");
    else if (l.is_number()) loss = l.get<double>();
    else throw std::runtime_error(path + ":" + std::to_string(n) + ": \"loss\" at step " + std::to_string(step) + " is not a number");
    if (!std::isfinite(loss))
      out.problems.push_back("loss at step " + std::to_string(step) + " of " + path + " (line " + std::to_string(n) + ") is " +
                             (l.is_null() ? "NaN or inf" : std::to_string(loss)));
    if (line_of.count(step))
      out.problems.push_back("step " + std::to_string(step) + " is logged twice in " + path + " (lines " +
                             std::to_string(line_of[step]) + " and " + std::to_string(n) + ")");
    line_of[step] = n;
    out.by_step[step] = loss;
  }
  return out;
}

bool same(double a, double b, double rtol) {
  if (rtol == 0) return std::memcmp(&a, &b, sizeof a) == 0;
  return std::fabs(a - b) <= rtol * std::max(std::fabs(a), std::fabs(b));
}

// Every non-finite element of every tensor of a file is a failure (named with its count
// and its first index); returns whether there was none.
bool all_finite(const dpt::SafetensorsContents& c, const std::string& path) {
  bool ok = true;
  for (const auto& t : c.tensors) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < t.data.size(); ++i)
      if (!std::isfinite(t.data[i]) && bad++ == 0) first = i;
    if (bad) {
      std::printf("tensor %s in %s has %zu non-finite element(s) (the first at flat index %zu: %g)\n", t.name.c_str(),
                  path.c_str(), bad, first, double(t.data[first]));
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string ma, mb, pa, pb;
  double rtol = 1e-5, atol = 0;
  int64_t from = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--metrics" && i + 2 < argc) ma = argv[++i], mb = argv[++i];
      else if (a == "--model" && i + 2 < argc) pa = argv[++i], pb = argv[++i];
      else if (a == "--rtol" && i + 1 < argc) rtol = std::stod(argv[++i]);
      else if (a == "--atol" && i + 1 < argc) atol = std::stod(argv[++i]);
      else if (a == "--from-step" && i + 1 < argc) from = std::stoll(argv[++i]);
      else { std::fprintf(stderr, "compare_runs: unknown argument '%s'\n", a.c_str()); return 2; }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_runs: bad number in the arguments (%s)\n", e.what());
    return 2;
  }
  if (ma.empty() && pa.empty()) { std::fprintf(stderr, "compare_runs: nothing to compare (give --metrics and/or --model)\n"); return 2; }
  if (!(rtol >= 0) || !(atol >= 0)) { std::fprintf(stderr, "compare_runs: --rtol and --atol must be >= 0\n"); return 2; }
  try {
    bool ok = true;
    if (!ma.empty()) {
      auto la = read_losses(ma), lb = read_losses(mb);
      for (const auto* l : {&la, &lb})
        for (const auto& p : l->problems) std::printf("%s\n", p.c_str()), ok = false;
      // The same steps after `from` on both sides.
      std::vector<int64_t> only_a, only_b;
      for (const auto& [step, loss] : la.by_step)
        if (step > from && !lb.by_step.count(step)) only_a.push_back(step);
      for (const auto& [step, loss] : lb.by_step)
        if (step > from && !la.by_step.count(step)) only_b.push_back(step);
      if (!only_a.empty()) std::printf("step(s) %s after %lld in %s but not in %s\n", list_steps(only_a).c_str(), (long long)from, ma.c_str(), mb.c_str()), ok = false;
      if (!only_b.empty()) std::printf("step(s) %s after %lld in %s but not in %s\n", list_steps(only_b).c_str(), (long long)from, mb.c_str(), ma.c_str()), ok = false;
      int compared = 0;
      double worst = 0;
      bool first_difference = true;
      for (const auto& [step, a] : la.by_step) {
        auto it = lb.by_step.find(step);
        if (step <= from || it == lb.by_step.end()) continue;
        const double b = it->second;
        ++compared;
        if (!std::isfinite(a) || !std::isfinite(b)) { ok = false; continue; }  // named above
        worst = std::max(worst, std::fabs(a - b) / std::max({std::fabs(a), std::fabs(b), 1e-30}));
        if (!same(a, b, rtol)) {
          if (first_difference) std::printf("loss differs at step %lld: %.17g vs %.17g\n", (long long)step, a, b);
          first_difference = false;
          ok = false;
        }
      }
      if (compared == 0) { std::printf("no common steps after %lld to compare\n", (long long)from); ok = false; }
      std::printf("losses: %d steps compared, largest relative difference %.3g (allowed %.3g)\n", compared, worst, rtol);
    }
    if (!pa.empty()) {
      auto a = dpt::load_safetensors(pa), b = dpt::load_safetensors(pb);
      double worst = 0;
      size_t compared = 0;
      if (!all_finite(a, pa)) ok = false;
      if (!all_finite(b, pb)) ok = false;
      for (const auto& t : b.tensors)
        if (!a.find(t.name)) { std::printf("tensor %s is in %s but not in %s\n", t.name.c_str(), pb.c_str(), pa.c_str()); ok = false; }
      for (const auto& t : a.tensors) {
        const auto* u = b.find(t.name);
        if (!u) { std::printf("tensor %s is in %s but not in %s\n", t.name.c_str(), pa.c_str(), pb.c_str()); ok = false; continue; }
        if (u->shape != t.shape || u->data.size() != t.data.size()) { std::printf("tensor %s is shaped differently\n", t.name.c_str()); ok = false; continue; }
        ++compared;
        double d2 = 0, n2 = 0;
        bool bits = std::memcmp(t.data.data(), u->data.data(), t.data.size() * sizeof(float)) == 0;
        for (size_t i = 0; i < t.data.size(); ++i) d2 += double(t.data[i] - u->data[i]) * (t.data[i] - u->data[i]), n2 += double(t.data[i]) * t.data[i];
        double rel = std::sqrt(d2 / std::max(n2, 1e-30));
        const double rms = std::sqrt(d2 / double(std::max<size_t>(1, t.data.size())));
        if (!std::isfinite(d2)) { ok = false; continue; }  // a non-finite element, named above
        worst = std::max(worst, rel);
        if (rtol == 0 ? !bits : rel > rtol && !(atol > 0 && rms <= atol)) { std::printf("tensor %s differs: relative L2 %.3g, RMS %.3g\n", t.name.c_str(), rel, rms); ok = false; }
      }
      if (compared == 0) { std::printf("no tensors to compare\n"); ok = false; }
      std::printf("parameters: %zu of %zu vs %zu tensors compared, largest relative L2 difference %.3g (allowed %.3g)\n", compared,
                  a.tensors.size(), b.tensors.size(), worst, rtol);
    }
    std::printf("%s\n", ok ? "MATCH" : "MISMATCH");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_runs: %s\n", e.what());
    return 2;
  }
}
