// SafetensorsFile: a safetensors file read one tensor at a time, for files too large to
// hold twice (a published GPT-2 is 0.5 to 6 GB). Opening reads only the 8-byte length
// and the header, checked by parse_safetensors_header exactly as a whole-file load
// checks it; read() then fetches one tensor's bytes with pread and widens F16/BF16 to
// float straight into the caller's buffer. A "dpt.crc32" in the metadata (files we
// wrote) is verified at open by one streaming pass over the data, so a corrupted
// checkpoint is refused before any tensor is used.
#pragma once

#include <span>
#include <string>

#include "models/io/safetensors.h"

namespace dpt {

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const SafetensorsIndex& index() const { return index_; }
  const std::string& path() const { return path_; }
  // Reads `entry` (one of index().entries) into dst, which must hold entry.numel() floats.
  void read(const SafetensorsEntry& entry, std::span<float> dst) const;

 private:
  void read_bytes(uint64_t offset, char* dst, size_t n) const;
  std::string path_;
  int fd_ = -1;
  SafetensorsIndex index_;
};

}  // namespace dpt
