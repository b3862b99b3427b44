// Named-tensor files in the safetensors format (readable by Python's safetensors/torch):
//   bytes [0, 8)        N, the JSON header length, little-endian u64
//   bytes [8, 8+N)      JSON: {"<name>": {"dtype": "F32", "shape": [...],
//                              "data_offsets": [begin, end]}, ...,
//                              "__metadata__": {"<key>": "<string>", ...}}
//                       padded with spaces to a multiple of 8 bytes
//   bytes [8+N, end)    the data; offsets are relative to its start, tensors are
//                       contiguous, cover it exactly, raw little-endian.
// Names are the model's plain parameter names ("fc1.weight", no "module." prefix).
// We write F32, and I64 for integer counters (BatchNorm's num_batches_tracked, shape
// []). We read F32, I64, and F16 and BF16 (as Hugging Face publishes weights); values
// are held as floats in memory whatever the file stores: 16-bit floats widen exactly,
// an I64 tensor's floats must be whole numbers when written and read back exactly up to
// 2^24. Any other dtype is refused naming the tensor.
// We add "dpt.crc32" (CRC-32 of the data, 8 hex digits) to the metadata so a flipped
// data byte is detected; files without it (e.g. written by Python) still load.
//
// Files are written atomically: a temporary file in the same folder is written,
// fsync'd and renamed over the target, then the folder is fsync'd. A reader sees the
// old file or the new one, never half of one.
//
// Every problem with a file on load throws CheckpointError naming the file and the
// fault; nothing is allocated from a size read out of the file before that size is
// checked against the file's real size. The parser (parse_safetensors) works on bytes
// in memory, so it is also the entry point of the fuzz target tests/fuzz/fuzz_checkpoint.
//
// This file knows nothing of modules or parameter stores; models/io/checkpoint.h builds
// model checkpoints on it.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace dpt {

class CheckpointError : public std::runtime_error {
 public:
  CheckpointError(const std::string& path, const std::string& what)
      : std::runtime_error("checkpoint " + path + ": " + what), path_(path) {}
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using Metadata = std::map<std::string, std::string>;

// The largest JSON header accepted (the limit Python's safetensors uses).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

enum class FileDType { F32, I64 };  // how a tensor is written to the file

struct NamedTensorView {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
  FileDType dtype = FileDType::F32;
};

struct NamedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;
  std::string dtype = "F32";  // as stored in the file (F16, BF16 and I64 are converted into data)
};

// One tensor of a file's header: dtype, shape and its bytes [begin, end) of the data.
struct SafetensorsEntry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
  size_t numel() const { return static_cast<size_t>((end - begin) / dtype_bytes(dtype)); }
  static size_t dtype_bytes(const std::string& dtype);  // F32 4, F16 and BF16 2, I64 8; else 0
};

// A parsed and checked header: entries in the order of their data, which they tile.
struct SafetensorsIndex {
  std::vector<SafetensorsEntry> entries;
  Metadata metadata;
  uint64_t data_start = 0;  // file offset of the data: 8 + header length
  const SafetensorsEntry* find(const std::string& name) const;
};

struct SafetensorsContents {
  std::vector<NamedTensor> tensors;  // in file order of their data
  Metadata metadata;
  const NamedTensor* find(const std::string& name) const;
};

// Generic named-tensor files (model, optimizer state, anything float).
void save_safetensors(const std::string& path, const std::vector<NamedTensorView>& tensors,
                      const Metadata& metadata = {});
// Reads the whole file, then parse_safetensors().
SafetensorsContents load_safetensors(const std::string& path);

// Throws CheckpointError unless the open descriptor `fd` of `path` is a regular file: a
// checkpoint is read by offset, so a directory, pipe, FIFO or device is refused by name,
// before any read, saying what to do (a pipe would read as "truncated", or hang).
void require_checkpoint_file(int fd, const std::string& path);

// The bytes of a file in front of the tensor data: the 8-byte length, then the padded
// JSON header that lays `tensors` out one after another in the order given, with
// "dpt.crc32" of their data added to `metadata`. save_safetensors writes this, then
// each tensor's data. Throws CheckpointError (naming `path_for_errors`) for an empty,
// reserved or duplicate name, or a shape that does not match a tensor's data.
std::string encode_safetensors_header(const std::vector<NamedTensorView>& tensors, const Metadata& metadata,
                                      const std::string& path_for_errors);
// Parses and validates a whole file's bytes; throws CheckpointError naming
// `path_for_errors` for anything malformed. On success the tensors tile the data.
SafetensorsContents parse_safetensors(std::span<const char> bytes, const std::string& path_for_errors);
// The header part of that: the JSON text of a file whose data region holds data_size
// bytes, checked as parse_safetensors checks it (dtypes, shapes, tiling), the CRC aside.
// SafetensorsFile (models/io/safetensors_file.h) uses it to read tensors one at a time.
SafetensorsIndex parse_safetensors_header(std::span<const char> json, uint64_t data_size,
                                          const std::string& path_for_errors);
// Throws CheckpointError when metadata holds a "dpt.crc32" other than `crc` (the
// CRC-32 of the file's data); files without one (e.g. written by Python) pass.
void check_safetensors_crc(const Metadata& metadata, uint32_t crc, const std::string& path_for_errors);
// Whether the metadata carries our "dpt.crc32".
bool has_safetensors_crc(const Metadata& metadata);
// Converts n little-endian elements of `dtype` (F32, F16, BF16 or I64) at src to float.
// F16 subnormals, infinities and NaNs map to the same float values.
void decode_floats(const std::string& dtype, const char* src, float* dst, size_t n);

const char* file_dtype_name(FileDType d);  // "F32", "I64"

// "[2, 3]", for error messages about shapes.
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace dpt
