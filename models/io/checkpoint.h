// Model checkpoints: a model's (or a flat parameter buffer's) tensors in a safetensors
// file, one tensor per parameter and per buffer (BatchNorm's running statistics) under
// its plain name; counters (num_batches_tracked) are stored as I64, as PyTorch does. The file format, its atomic
// write and its checks on load are in models/io/safetensors.h, included here.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "models/nn/param_store.h"
#include "models/io/safetensors.h"

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
// Views of every buffer of a flat buffer laid out by `infos` (counters as I64).
std::vector<NamedTensorView> buffer_views(const std::vector<BufferInfo>& infos, std::span<const float> flat);

// Parameters and buffers. load_model is strict: the file must hold exactly the model's
// parameters (F32) and buffers (F32, counters I64) with the model's shapes, and the
// model is untouched when it does not. `keep_own` names tensors the model keeps as they
// are (a classifier head replaced for fine-tuning): the file need not hold them, and
// what it holds under those names, of any shape, is ignored.
void save_model(const std::string& path, const Module& model, const Metadata& metadata = {});
Metadata load_model(const std::string& path, Module& model, const std::vector<std::string>& keep_own = {});

// Path of a companion file beside a model checkpoint:
// sidecar_path("run/model.safetensors", "optim") == "run/model.optim.safetensors".
std::string sidecar_path(const std::string& model_path, const std::string& kind);

}  // namespace dpt
