// Model checkpoints: a model's (or a flat parameter buffer's) tensors in a safetensors
// file, one tensor per parameter under its plain name. The file format, its atomic
// write and its checks on load are in models/safetensors.h, included here.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "models/param_store.h"
#include "models/safetensors.h"

namespace dpt {

class Module;

// Views of every parameter of a flat buffer laid out by `infos` (e.g. a model's own
// flat_params(), or a buffer a ZeRO-3 rank gathered).
std::vector<NamedTensorView> param_views(const std::vector<ParamInfo>& infos,
                                         std::span<const float> flat);
// Copies a file's tensors into `flat`, checking that the file holds exactly the
// parameters in `infos` with the same shapes. Returns the file's metadata.
Metadata load_params(const std::string& path, const std::vector<ParamInfo>& infos,
                     std::span<float> flat);

void save_model(const std::string& path, const Module& model, const Metadata& metadata = {});
Metadata load_model(const std::string& path, Module& model);

// Path of a companion file beside a model checkpoint:
// sidecar_path("run/model.safetensors", "optim") == "run/model.optim.safetensors".
std::string sidecar_path(const std::string& model_path, const std::string& kind);

}  // namespace dpt
