#include "models/generate.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace dpt {

std::vector<int32_t> generate_tokens(Module& model, std::vector<int32_t> context, int64_t seq_len,
                                     int64_t new_tokens, float temperature, uint64_t seed) {
  if (!model.takes_tokens()) throw std::invalid_argument("generate_tokens: model takes no tokens");
  if (context.empty()) context.push_back(0);
  std::mt19937_64 gen(seed);
  std::vector<double> probs;
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
    if (temperature <= 0.0f) {
      next = static_cast<int32_t>(std::max_element(last, last + v) - last);
    } else {
      const float mx = *std::max_element(last, last + v);
      probs.resize(static_cast<size_t>(v));
      for (int64_t j = 0; j < v; ++j) probs[j] = std::exp((last[j] - mx) / temperature);
      std::discrete_distribution<int32_t> dist(probs.begin(), probs.end());
      next = dist(gen);
    }
    context.push_back(next);
  }
  return context;
}

}  // namespace dpt
