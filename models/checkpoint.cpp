#include "models/checkpoint.h"

#include <algorithm>
#include <stdexcept>

#include "models/module.h"

namespace dpt {

std::vector<NamedTensorView> param_views(const std::vector<ParamInfo>& infos,
                                         std::span<const float> flat) {
  std::vector<NamedTensorView> views;
  views.reserve(infos.size());
  for (const auto& p : infos) {
    if (p.offset + p.numel > flat.size())
      throw std::invalid_argument("param_views: flat buffer too small for " + p.name);
    views.push_back({p.name, p.shape, flat.subspan(p.offset, p.numel)});
  }
  return views;
}

Metadata load_params(const std::string& path, const std::vector<ParamInfo>& infos,
                     std::span<float> flat) {
  SafetensorsContents file = load_safetensors(path);
  for (const auto& p : infos) {
    const NamedTensor* t = file.find(p.name);
    if (!t) throw CheckpointError(path, "missing tensor " + p.name);
    if (t->shape != p.shape)
      throw CheckpointError(path, "tensor " + p.name + " has shape " + shape_str(t->shape) +
                                      " but the model expects " + shape_str(p.shape));
  }
  if (file.tensors.size() != infos.size()) {
    for (const auto& t : file.tensors) {
      bool found = std::any_of(infos.begin(), infos.end(), [&](const ParamInfo& p) { return p.name == t.name; });
      if (!found) throw CheckpointError(path, "unexpected tensor " + t.name + " (not a parameter of the model)");
    }
  }
  // Copy only after every check passed, so a bad file leaves the buffer untouched.
  for (const auto& p : infos) {
    const NamedTensor* t = file.find(p.name);
    std::copy(t->data.begin(), t->data.end(), flat.begin() + static_cast<long>(p.offset));
  }
  return file.metadata;
}

void save_model(const std::string& path, const Module& model, const Metadata& metadata) {
  Metadata meta = metadata;
  meta.emplace("format", "pt");  // what HF tooling expects for PyTorch-style tensors
  meta.emplace("dpt.model", model.name());
  save_safetensors(path, param_views(model.param_infos(), model.flat_params()), meta);
}

Metadata load_model(const std::string& path, Module& model) {
  return load_params(path, model.param_infos(), model.flat_params());
}

std::string sidecar_path(const std::string& model_path, const std::string& kind) {
  const std::string ext = ".safetensors";
  std::string stem = model_path;
  if (stem.size() >= ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0)
    stem.resize(stem.size() - ext.size());
  return stem + "." + kind + ext;
}

}  // namespace dpt
