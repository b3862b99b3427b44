#pragma once
// --init-from in train and train_local (one loader for both), for every model but gpt2,
// which reads Hugging Face's layout while it is built (models/zoo/gpt2.h, gpt2_weights.h).
// The file holds the model's own parameter and buffer names: a checkpoint of train or
// train_local, or for resnet18 torchvision's state_dict (the names and layouts
// torchvision.models.resnet18 saves). It loads strictly (models/io/checkpoint.h: load_model),
// into a ZeRO-3 sharded build too: each parameter is sealed to the rank's shard as it
// arrives, so every rank keeps only its shard and the ranks' fingerprints agree.
//
// Fine-tuning to another label set: resnet18's classifier head is fc (fc.weight [C, 512],
// fc.bias [C]). When the file's C differs from the model's (--num-classes, default the
// dataset's class count):
//   - --num-classes given: the head keeps the model's own seeded initialisation (the
//     C-class head the same --model-seed builds without a file) and everything else
//     loads; the returned note says so with both shapes;
//   - not given: refused, naming both counts and the --num-classes to give.
#include <string>

#include "data/dataset.h"
#include "models/nn/model_config.h"
#include "models/nn/module.h"

namespace dpt {

// Loads `path` into `model` (built as `model_name`); returns a one-line note when the
// head was replaced, else "". `data_name` names the training data in the refusal.
std::string load_init_from(const std::string& path, const std::string& model_name, Module& model,
                           bool num_classes_given, const std::string& data_name);

// The classes of a classifier: classification data (Dataset::num_classes() > 0) sets
// config.num_classes to `requested` (--num-classes; 0: the data's count). Refused: a
// request below the data's count (its labels would fall outside the head), or one for
// data without class labels.
void set_model_classes(const Dataset& train, int64_t requested, ModelConfig& config);

}  // namespace dpt
