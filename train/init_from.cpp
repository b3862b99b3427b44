#include "train/init_from.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "models/io/checkpoint.h"
#include "models/io/safetensors_file.h"

namespace dpt {
namespace {

// The classifier head a fine-tuning run may replace, by model: weight [classes, in], bias [classes].
struct Head {
  std::string weight, bias;
};

bool has_head(const std::string& model_name, Head& head) {
  if (model_name != "resnet18") return false;
  head = {"fc.weight", "fc.bias"};
  return true;
}

const ParamInfo* find_param(const Module& model, const std::string& name) {
  for (const auto& p : model.param_infos())
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace

std::string load_init_from(const std::string& path, const std::string& model_name, Module& model,
                           bool num_classes_given, const std::string& data_name) {
  Head head;
  const ParamInfo* ours = has_head(model_name, head) ? find_param(model, head.weight) : nullptr;
  if (ours) {
    std::vector<int64_t> file_weight, file_bias;
    {
      const SafetensorsFile file(path);  // the header only; load_model reads the tensors
      if (const SafetensorsEntry* w = file.index().find(head.weight)) file_weight = w->shape;
      if (const SafetensorsEntry* b = file.index().find(head.bias)) file_bias = b->shape;
    }
    // A head of another class count; any other difference is load_model's to report.
    if (file_weight.size() == 2 && file_weight[0] != ours->shape[0]) {
      const std::string theirs = std::to_string(file_weight[0]), mine = std::to_string(ours->shape[0]);
      if (!num_classes_given)
        throw std::invalid_argument("--init-from " + path + ": its classifier head " + head.weight + " " +
                                    shape_str(file_weight) + " has " + theirs + " classes but " + data_name + " has " +
                                    mine + "; give --num-classes " + mine + " to replace the head with a freshly "
                                    "initialised " + mine + "-class one (the rest of the file is loaded)");
      const ParamInfo* bias = find_param(model, head.bias);
      load_model(path, model, {head.weight, head.bias});
      return "--init-from " + path + ": classifier head " + head.weight + " " + shape_str(file_weight) + ", " +
             head.bias + " " + (file_bias.empty() ? "(absent)" : shape_str(file_bias)) +
             " replaced by a freshly initialised " + shape_str(ours->shape) + ", " +
             (bias ? shape_str(bias->shape) : "") + " (--num-classes " + mine + ", --model-seed's initialisation); "
             "every other tensor loaded from the file";
    }
  }
  load_model(path, model);
  return "";
}

void set_model_classes(const Dataset& train, int64_t requested, ModelConfig& config) {
  const size_t data = train.num_classes();
  if (requested < 0) throw std::invalid_argument("--num-classes " + std::to_string(requested) + ": must be >= 1");
  if (data == 0) {
    if (requested > 0)
      throw std::invalid_argument("--num-classes " + std::to_string(requested) + ": " + train.name() +
                                  " has no class labels (it applies to classification data, e.g. cifar10)");
    return;
  }
  if (requested > 0 && size_t(requested) < data)
    throw std::invalid_argument("--num-classes " + std::to_string(requested) + ": " + train.name() + " has labels 0.." +
                                std::to_string(data - 1) + ", so the head needs at least " + std::to_string(data) +
                                " classes");
  config.num_classes = requested > 0 ? requested : int64_t(data);
}

}  // namespace dpt
