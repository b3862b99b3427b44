#include "parallel/model_state_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace dpt {

double zero_formula_bytes(int stage, double p, int world, double k) {
  const double n = double(world);
  switch (stage) {
    case 0: return (8 + k) * p;
    case 1: return 8 * p + k * p / n;
    case 2: return 4 * p + (4 + k) * p / n;
    default: return (8 + k) * p / n;
  }
}

size_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return size_t(u.ru_maxrss) * 1024;  // Linux reports KiB
}

namespace {
std::string mib(double bytes) {
  char b[64];
  std::snprintf(b, sizeof b, "%12.3f MiB", bytes / (1 << 20));
  return b;
}
}  // namespace

std::string memory_table(const ModelStateBytes& m, const std::string& when) {
  const double total = double(m.params + m.grads + m.optimizer);
  const double formula = zero_formula_bytes(m.stage, double(m.numel), m.world, m.state_per_param);
  char f[160];
  const char* shape[] = {"(8+K)P", "8P + KP/N", "4P + (4+K)P/N", "(8+K)P/N (+ gathered, below)"};
  std::snprintf(f, sizeof f, "%s, K=%g, P=%zu, N=%d", shape[m.stage < 0 || m.stage > 3 ? 0 : m.stage], m.state_per_param,
                m.numel, m.world);
  std::vector<std::pair<std::string, std::string>> rows = {
      {"parameters", mib(double(m.params))},
      {"gradients", mib(double(m.grads))},
      {"optimizer state", mib(double(m.optimizer))},
      {"model states (sum)", mib(total)},
      {"ZeRO formula", mib(formula) + "  " + f},
      {"measured / formula", [&] { char b[32]; std::snprintf(b, sizeof b, "%12.4f", total / formula); return std::string(b); }()},
      {"comm buffers", mib(double(m.comm))},
      {"gathered (peak)", m.stage == 3 ? mib(double(m.gathered_peak)) + "  (stage-3 working set, not in the sum)" : mib(0)},
      {"peak RSS (process)", mib(double(peak_rss_bytes()))}};
  if (m.planned > 0) {
    rows.emplace_back("activations (estimate)", mib(m.activations_estimate) + "  (one micro-batch, gpt2_activation_bytes)");
    rows.emplace_back("planned per rank", mib(m.planned) + "  (the memory check: formula + gathers + activations)");
  }
  if (m.master)
    rows.insert(rows.begin() + 3, {"  of which fp32 master", mib(double(m.master)) + "  (mixed precision)"});
  if (m.grads_allocated != m.grads)
    rows.insert(rows.begin() + 2, {"  allocated", mib(double(m.grads_allocated)) + "  (shard + flat buffer, its pages released)"});
  if (m.params_allocated != m.params)
    rows.insert(rows.begin() + 1, {"  allocated", mib(double(m.params_allocated)) + "  (flat buffer, non-own pages released)"});
  size_t kw = 0, vw = 0;
  for (auto& [k, v] : rows) kw = std::max(kw, k.size()), vw = std::max(vw, v.size());
  const std::string title = "memory per rank at " + when + " (ZeRO stage " + std::to_string(m.stage) + ")";
  vw = std::max(vw, title.size() > kw + 3 ? title.size() - kw - 3 : 0);
  std::string line = "+" + std::string(kw + 2, '-') + "+" + std::string(vw + 2, '-') + "+\n";
  std::string out = line + "| " + title + std::string(kw + vw + 3 - title.size(), ' ') + " |\n" + line;
  for (auto& [k, v] : rows)
    out += "| " + k + std::string(kw - k.size(), ' ') + " | " + v + std::string(vw - v.size(), ' ') + " |\n";
  return out + line;
}

}  // namespace dpt
