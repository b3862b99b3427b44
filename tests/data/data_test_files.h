#pragma once
// Helpers for the data tests: a scratch directory removed at scope exit (TempDir), and
// writers for small files in the formats the datasets read.
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace dpt::testing {

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void write_gzip(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot gzopen " + path);
  if (!bytes.empty() && gzwrite(f, bytes.data(), unsigned(bytes.size())) != int(bytes.size())) {
    gzclose(f);
    throw std::runtime_error("gzwrite failed on " + path);
  }
  gzclose(f);
}

// An IDX file: magic 0x0000 0x08 ndims, big-endian dims, then the payload. `magic`
// overrides the first four bytes when non-zero (to write a bad one).
inline std::vector<uint8_t> idx_bytes(const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& payload, uint32_t magic = 0) {
  std::vector<uint8_t> out;
  auto put32 = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
  };
  put32(magic ? magic : (0x0800u | uint32_t(dims.size())));
  for (uint32_t d : dims) put32(d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

}  // namespace dpt::testing
