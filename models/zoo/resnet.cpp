#include "models/zoo/resnet.h"

#include <stdexcept>

#include "models/nn/layers/avg_pool.h"
#include "models/nn/layers/basic_block.h"
#include "models/nn/layers/batch_norm.h"
#include "models/nn/layers/conv2d.h"
#include "models/nn/layers/linear.h"
#include "models/nn/layers/shape_layers.h"

namespace dpt {

ResNet18::ResNet18(const ModelConfig& cfg)
    : Module("resnet18", cfg, {cfg.in_channels, cfg.image_h, cfg.image_w}, false) {
  const bool imagenet = cfg.resnet_stem == "imagenet";
  if (!imagenet && cfg.resnet_stem != "cifar")
    throw std::invalid_argument("resnet18: unknown stem '" + cfg.resnet_stem + "' (valid: imagenet, cifar)");
  if (imagenet)
    add_layer<Conv2d>(store_, "conv1", cfg.in_channels, 64, 7, 2, 3, false, ConvInit::kKaimingNormalFanOut);
  else
    add_layer<Conv2d>(store_, "conv1", cfg.in_channels, 64, 3, 1, 1, false, ConvInit::kKaimingNormalFanOut);
  add_layer<BatchNorm>(store_, "bn1", 64, /*fuse_relu=*/true);
  if (imagenet) add_layer<MaxPool2d>("maxpool", 3, 2, 1);
  int64_t in = 64;
  const int64_t widths[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage) {
    const std::string prefix = "layer" + std::to_string(stage + 1);
    add_layer<BasicBlock>(store_, prefix + ".0", in, widths[stage], stage == 0 ? 1 : 2);
    add_layer<BasicBlock>(store_, prefix + ".1", widths[stage], widths[stage], 1);
    in = widths[stage];
  }
  add_layer<AdaptiveAvgPool2d>("avgpool", 1, 1);
  add_layer<Flatten>("flatten");
  add_layer<Linear>(store_, "fc", 512, cfg.num_classes);
  finalize(std::make_unique<SoftmaxCrossEntropy>());
}

}  // namespace dpt
