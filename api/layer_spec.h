// What a public layer description (dpt::nn::Layer, dpt/nn.h) holds: how to build the
// internal layer at a given place of a model, its parameters registered in the model's
// store under the dotted name of that place.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "dpt/nn.h"
#include "models/nn/layer.h"

struct dpt::nn::Layer::Spec {
  std::string kind;  // "Linear", "Sequential", ... (error messages)
  std::function<std::unique_ptr<::dpt::Layer>(::dpt::ParamStore& store, const std::string& name)> build;
};
