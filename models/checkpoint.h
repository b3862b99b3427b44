// Checkpoints in the safetensors format (readable by Python's safetensors/torch):
//   bytes [0, 8)        N, the JSON header length, little-endian u64
//   bytes [8, 8+N)      JSON: {"<name>": {"dtype": "F32", "shape": [...],
//                              "data_offsets": [begin, end]}, ...,
//                              "__metadata__": {"<key>": "<string>", ...}}
//                       padded with spaces to a multiple of 8 bytes
//   bytes [8+N, end)    the data; offsets are relative to its start, tensors are
//                       contiguous, cover it exactly, raw little-endian.
// Names are the model's plain parameter names ("fc1.weight", no "module." prefix).
// We add "dpt.crc32" (CRC-32 of the data, 8 hex digits) to the metadata so a flipped
// data byte is detected; files without it (e.g. written by Python) still load.
//
// Files are written atomically: a temporary file in the same folder is written,
// fsync'd and renamed over the target, then the folder is fsync'd. A reader sees the
// old file or the new one, never half of one.
//
// Every problem with a file on load throws CheckpointError naming the file and the
// fault; nothing is allocated from a size read out of the file before that size is
// checked against the file's real size.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/param_store.h"

namespace dpt {

class Module;

class CheckpointError : public std::runtime_error {
 public:
  CheckpointError(const std::string& path, const std::string& what)
      : std::runtime_error("checkpoint " + path + ": " + what), path_(path) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using Metadata = std::map<std::string, std::string>;

struct NamedTensorView {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
};

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct SafetensorsContents {
  std::vector<NamedTensor> tensors;  // in file order of their data
  Metadata metadata;
  const NamedTensor* find(const std::string& name) const;
};

// Generic named-tensor files (model, optimizer state, anything float).
void save_safetensors(const std::string& path, const std::vector<NamedTensorView>& tensors,
                      const Metadata& metadata = {});
SafetensorsContents load_safetensors(const std::string& path);

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
