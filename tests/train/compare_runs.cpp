// compare_runs: checks that two training runs agree.
//   compare_runs --metrics A.jsonl B.jsonl [--from-step S] --model A.safetensors B.safetensors --rtol R
// Per-step losses (metrics lines with "step" and "loss") must match for every step both
// files have after S (and there must be at least one); model tensors must match by name
// and shape with relative L2 difference <= R per tensor. R = 0 demands identical bits.
// --atol A also accepts a tensor whose RMS difference is <= A: for tensors whose values
// are sums that cancel (a BatchNorm bias a few steps from its 0 start), where a relative
// comparison measures rounding against a value near 0 (numpy's allclose does the same).
// Prints the largest differences it saw, so a pass shows its margin.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "models/checkpoint.h"

namespace {

std::map<int64_t, double> read_losses(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::map<int64_t, double> out;
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("step") && j.contains("loss") && !j.contains("final")) out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  return out;
}

bool same(double a, double b, double rtol) {
  if (rtol == 0) return std::memcmp(&a, &b, sizeof a) == 0;
  return std::fabs(a - b) <= rtol * std::max(std::fabs(a), std::fabs(b));
}

}  // namespace

int main(int argc, char** argv) {
  std::string ma, mb, pa, pb;
  double rtol = 1e-5, atol = 0;
  int64_t from = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--metrics" && i + 2 < argc) ma = argv[++i], mb = argv[++i];
    else if (a == "--model" && i + 2 < argc) pa = argv[++i], pb = argv[++i];
    else if (a == "--rtol" && i + 1 < argc) rtol = std::stod(argv[++i]);
    else if (a == "--atol" && i + 1 < argc) atol = std::stod(argv[++i]);
    else if (a == "--from-step" && i + 1 < argc) from = std::stoll(argv[++i]);
    else { std::fprintf(stderr, "compare_runs: unknown argument '%s'\n", a.c_str()); return 2; }
  }
  try {
    bool ok = true;
    if (!ma.empty()) {
      auto la = read_losses(ma), lb = read_losses(mb);
      int compared = 0;
      double worst = 0;
      for (auto& [step, a] : la) {
        if (step <= from || !lb.count(step)) continue;
        double b = lb[step];
        ++compared;
        worst = std::max(worst, std::fabs(a - b) / std::max(std::fabs(a), 1e-30));
        if (!same(a, b, rtol)) {
          if (ok) std::printf("loss differs at step %lld: %.17g vs %.17g\n", (long long)step, a, b);
          ok = false;
        }
      }
      if (compared == 0) { std::printf("no common steps after %lld to compare\n", (long long)from); ok = false; }
      std::printf("losses: %d steps compared, largest relative difference %.3g (allowed %.3g)\n", compared, worst, rtol);
    }
    if (!pa.empty()) {
      auto a = dpt::load_safetensors(pa), b = dpt::load_safetensors(pb);
      double worst = 0;
      if (a.tensors.size() != b.tensors.size()) { std::printf("models hold %zu vs %zu tensors\n", a.tensors.size(), b.tensors.size()); ok = false; }
      for (const auto& t : a.tensors) {
        const auto* u = b.find(t.name);
        if (!u || u->shape != t.shape) { std::printf("tensor %s missing or shaped differently\n", t.name.c_str()); ok = false; continue; }
        double d2 = 0, n2 = 0;
        bool bits = std::memcmp(t.data.data(), u->data.data(), t.data.size() * sizeof(float)) == 0;
        for (size_t i = 0; i < t.data.size(); ++i) d2 += double(t.data[i] - u->data[i]) * (t.data[i] - u->data[i]), n2 += double(t.data[i]) * t.data[i];
        double rel = std::sqrt(d2 / std::max(n2, 1e-30));
        worst = std::max(worst, rel);
        const double rms = std::sqrt(d2 / double(std::max<size_t>(1, t.data.size())));
        if (rtol == 0 ? !bits : rel > rtol && !(atol > 0 && rms <= atol)) { std::printf("tensor %s differs: relative L2 %.3g, RMS %.3g\n", t.name.c_str(), rel, rms); ok = false; }
      }
      std::printf("parameters: %zu tensors compared, largest relative L2 difference %.3g (allowed %.3g)\n", a.tensors.size(), worst, rtol);
    }
    std::printf("%s\n", ok ? "MATCH" : "MISMATCH");
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_runs: %s\n", e.what());
    return 2;
  }
}
