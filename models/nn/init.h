// Parameter initialisation, matching PyTorch's defaults where a model copies a
// PyTorch one: Linear/Conv2d draw weight and bias from U(-1/sqrt(fan_in), +..)
// (kaiming_uniform with a=sqrt(5)); GPT uses N(0, 0.02) like GPT-2.
// Each parameter gets its own generator seeded from (model seed, parameter name), so
// the values do not depend on the order in which layers are initialised.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dpt {

uint64_t param_seed(uint64_t model_seed, const std::string& param_name);
void init_uniform(std::span<float> p, float bound, uint64_t seed);
void init_normal(std::span<float> p, float stddev, uint64_t seed);
void init_constant(std::span<float> p, float value);

}  // namespace dpt
