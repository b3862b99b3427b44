#include "models/zoo/generate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

namespace dpt {

std::vector<int32_t> generate_tokens(Module& model, std::vector<int32_t> context, int64_t seq_len,
                                     int64_t new_tokens, float temperature, uint64_t seed, int64_t top_k) {
  if (!model.takes_tokens()) throw std::invalid_argument("generate_tokens: model takes no tokens");
  if (top_k < 0) throw std::invalid_argument("generate_tokens: top_k must be >= 0");
  if (context.empty()) context.push_back(0);
  std::mt19937_64 gen(seed);
  std::vector<double> probs;
  std::vector<int32_t> order;
  for (int64_t i = 0; i < new_tokens; ++i) {
    const int64_t t = std::min<int64_t>(seq_len, static_cast<int64_t>(context.size()));
    ModelInput in;
    in.tokens = context.data() + (context.size() - static_cast<size_t>(t));
    in.n = 1;
    in.sample_shape = {t};
    const Tensor& logits = model.forward(in, false);
    const int64_t v = logits.last_dim();
    const float* last = logits.data() + (t - 1) * v;
    int32_t next = 0;
    if (temperature <= 0.0f || top_k == 1) {
      next = static_cast<int32_t>(std::max_element(last, last + v) - last);
    } else {
      // The candidates: every id, or the top_k by logit (ties by lower id).
      order.resize(static_cast<size_t>(v));
      std::iota(order.begin(), order.end(), 0);
      const size_t k = top_k > 0 ? static_cast<size_t>(std::min(top_k, v)) : order.size();
      if (k < order.size())
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                          [last](int32_t a, int32_t b) { return last[a] > last[b] || (last[a] == last[b] && a < b); });
      float mx = last[order[0]];
      for (size_t j = 0; j < k; ++j) mx = std::max(mx, last[order[j]]);
      probs.resize(k);
      for (size_t j = 0; j < k; ++j) probs[j] = std::exp((last[order[j]] - mx) / temperature);
      std::discrete_distribution<size_t> dist(probs.begin(), probs.end());
      next = order[dist(gen)];
    }
    context.push_back(next);
  }
  return context;
}

}  // namespace dpt
