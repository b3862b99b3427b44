// ResNet-18 exactly as torchvision.models.resnet18(num_classes=...) builds it, with
// torchvision's parameter and buffer names, so checkpoints load into torchvision with
// load_state_dict(strict=True) and back:
//   conv1 (7x7/2, pad 3) bn1 relu maxpool (3x3/2, pad 1)        -- the "imagenet" stem
//   layer1: 2 BasicBlocks, 64 channels      layer2: 128, first block stride 2
//   layer3: 256, stride 2                   layer4: 512, stride 2
//   avgpool (adaptive, 1x1), flatten, fc (512 -> num_classes)
// The "cifar" stem (ModelConfig::resnet_stem) is conv1 3x3/1 pad 1 and no max-pool,
// the usual CIFAR adaptation (names unchanged; conv1.weight is [64, C, 3, 3]).
// conv1 takes ModelConfig::in_channels (1 for Fashion-MNIST; torchvision's is 3).
// Initialisation as torchvision: convolutions kaiming_normal_(fan_out, relu), BatchNorm
// weight 1 and bias 0, fc nn.Linear's default.
#pragma once

#include "models/nn/model_config.h"
#include "models/nn/module.h"

namespace dpt {

class ResNet18 : public Module {
 public:
  explicit ResNet18(const ModelConfig& cfg);
};

}  // namespace dpt
