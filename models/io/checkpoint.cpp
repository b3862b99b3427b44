#include "models/io/checkpoint.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "models/nn/module.h"
#include "models/io/safetensors_file.h"

namespace dpt {
namespace {

// One tensor the file must hold: its name, shape, stored dtype and where it goes.
struct Expected {
  const std::string* name;
  const std::vector<int64_t>* shape;
  FileDType dtype;
  std::span<float> dest;
  const char* what;  // "parameter" or "buffer", for messages
};

// Streams the file one tensor at a time (SafetensorsFile: header and checksum checked at
// open), so a load costs the model plus one tensor, not the model plus the whole file;
// after_each(i) runs once expected[i] is in place (a sharded build seals it there).
// Tensors of the file named in `ignored` are neither loaded nor unexpected.
Metadata load_expected(const std::string& path, const std::vector<Expected>& expected,
                       const std::function<void(size_t)>& after_each = {},
                       const std::vector<std::string>& ignored = {}) {
  const SafetensorsFile file(path);
  const SafetensorsIndex& index = file.index();
  for (const auto& e : expected) {
    const SafetensorsEntry* t = index.find(*e.name);
    if (!t) throw CheckpointError(path, "missing tensor " + *e.name);
    if (t->shape != *e.shape)
      throw CheckpointError(path, "tensor " + *e.name + " has shape " + shape_str(t->shape) +
                                      " but the model expects " + shape_str(*e.shape));
    // Floats may be stored as F32, F16 or BF16 (widened on load); a counter must be I64.
    if ((t->dtype == "I64") != (e.dtype == FileDType::I64))
      throw CheckpointError(path, std::string("tensor ") + *e.name + " has dtype " + t->dtype +
                                      " but the model's " + e.what + " is " + file_dtype_name(e.dtype));
  }
  if (index.entries.size() != expected.size()) {
    for (const auto& t : index.entries) {
      bool found = std::any_of(expected.begin(), expected.end(), [&](const Expected& e) { return *e.name == t.name; });
      if (!found && std::find(ignored.begin(), ignored.end(), t.name) == ignored.end())
        throw CheckpointError(path, "unexpected tensor " + t.name + " (not a parameter or buffer of the model)");
    }
  }
  // Copy only after every check passed, so a bad file leaves the buffers untouched.
  for (size_t i = 0; i < expected.size(); ++i) {
    file.read(*index.find(*expected[i].name), expected[i].dest);
    if (after_each) after_each(i);
  }
  return index.metadata;
}

void expect_params(const std::vector<ParamInfo>& infos, std::span<float> flat, std::vector<Expected>& out) {
  for (const auto& p : infos) {
    if (p.offset + p.numel > flat.size())
      throw std::invalid_argument("load_params: flat buffer too small for " + p.name);
    out.push_back({&p.name, &p.shape, FileDType::F32, flat.subspan(p.offset, p.numel), "parameter"});
  }
}

}  // namespace

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

std::vector<NamedTensorView> buffer_views(const std::vector<BufferInfo>& infos, std::span<const float> flat) {
  std::vector<NamedTensorView> views;
  views.reserve(infos.size());
  for (const auto& b : infos) {
    if (b.offset + b.numel > flat.size())
      throw std::invalid_argument("buffer_views: flat buffer too small for " + b.name);
    views.push_back({b.name, b.shape, flat.subspan(b.offset, b.numel), b.is_count ? FileDType::I64 : FileDType::F32});
  }
  return views;
}

Metadata load_params(const std::string& path, const std::vector<ParamInfo>& infos,
                     std::span<float> flat) {
  std::vector<Expected> expected;
  expect_params(infos, flat, expected);
  return load_expected(path, expected);
}

void save_model(const std::string& path, const Module& model, const Metadata& metadata) {
  Metadata meta = metadata;
  meta.emplace("format", "pt");  // what HF tooling expects for PyTorch-style tensors
  meta.emplace("dpt.model", model.name());
  std::vector<NamedTensorView> views = param_views(model.param_infos(), model.flat_params());
  for (auto& v : buffer_views(model.buffer_infos(), model.flat_buffers())) views.push_back(std::move(v));
  save_safetensors(path, views, meta);
}

Metadata load_model(const std::string& path, Module& model, const std::vector<std::string>& keep_own) {
  auto kept = [&](const std::string& name) { return std::find(keep_own.begin(), keep_own.end(), name) != keep_own.end(); };
  std::vector<Expected> expected;
  std::vector<size_t> param_index;  // expected[i]'s parameter index, for the parameters
  std::span<float> params = model.flat_params();
  for (const auto& p : model.param_infos()) {
    if (kept(p.name)) continue;
    expected.push_back({&p.name, &p.shape, FileDType::F32, params.subspan(p.offset, p.numel), "parameter"});
    param_index.push_back(p.index);
  }
  std::span<float> buffers = model.flat_buffers();
  for (const auto& b : model.buffer_infos())
    if (!kept(b.name))
      expected.push_back({&b.name, &b.shape, b.is_count ? FileDType::I64 : FileDType::F32,
                          buffers.subspan(b.offset, b.numel), "buffer"});
  // Parameters come first in `expected`: a sharded build keeps only its shard of each as
  // it arrives (param_store.h); a kept one was sealed when the model was built.
  ParamStore& store = model.store();
  return load_expected(
      path, expected,
      [&](size_t i) {
        if (i < param_index.size()) store.seal(param_index[i]);
      },
      keep_own);
}

std::string sidecar_path(const std::string& model_path, const std::string& kind) {
  const std::string ext = ".safetensors";
  std::string stem = model_path;
  if (stem.size() >= ext.size() && stem.compare(stem.size() - ext.size(), ext.size(), ext) == 0)
    stem.resize(stem.size() - ext.size());
  return stem + "." + kind + ext;
}

}  // namespace dpt
