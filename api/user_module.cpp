#include "api/user_module.h"

#include <stdexcept>

#include "api/layer_spec.h"
#include "models/nn/model_config.h"

namespace dpt {
namespace {
ModelConfig config_of(const nn::ModelOptions& o, int resident_rank, int resident_world) {
  ModelConfig c;
  c.seed = o.seed;
  c.resident_rank = resident_rank;
  c.resident_world = resident_world;
  return c;
}
}  // namespace

std::unique_ptr<Loss> make_loss(const std::string& name) {
  if (name == "cross_entropy") return std::make_unique<SoftmaxCrossEntropy>();
  if (name == "mse") return std::make_unique<MseLoss>();
  throw std::invalid_argument("dpt::nn::ModelOptions::loss '" + name + "': valid are cross_entropy, mse");
}

UserModule::UserModule(const nn::Sequential& net, const nn::ModelOptions& options, int resident_rank,
                       int resident_world)
    : Module(options.name, config_of(options, resident_rank, resident_world), {}, false) {
  if (net.size() == 0) throw std::invalid_argument("dpt::nn::Model '" + options.name + "': a model without layers");
  learn_sample_shape();
  for (const auto& [name, layer] : net.layers()) add_built_layer(layer.spec().build(store_, name));
  finalize(make_loss(options.loss));
}

}  // namespace dpt
