// dpt::nn::gradcheck: is a custom layer's backward the derivative of its forward?
//
// With a random input x of `input_shape` and random parameters, and a fixed random
// weighting w of the output, L = sum(w * forward(x)) is accumulated in float64. Its
// central differences (L(v + h) - L(v - h)) / 2h for every element v of the input and of
// each parameter are compared with what backward returns for dy = w. The layer's own
// arithmetic is float32, so the step h and the tolerance are sized for float32 rounding:
// an element fails when |analytic - numeric| > atol + rtol * |numeric|. A wrong factor,
// a swapped index or a missing term fails by far more.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dpt/nn.h"

namespace dpt::nn {

struct GradCheckOptions {
  uint64_t seed = 0;    // of x, the parameters and w
  double step = 1e-2;   // h, relative to max(1, |v|)
  double atol = 1e-3;   // times (1 + the largest |numeric| of the checked tensor)
  double rtol = 1e-2;
};

struct GradCheckResult {
  bool passed = true;
  double max_error = 0;     // the largest |analytic - numeric| over every element
  std::string worst;        // where it was: "input[3]", "weight[0]", ...
  int64_t elements = 0;     // elements checked
  std::string report() const;  // one line for a log
};

GradCheckResult gradcheck(CustomLayer& layer, const std::vector<int64_t>& input_shape,
                          const GradCheckOptions& options = {});

}  // namespace dpt::nn
