#include "data/images/idx_file.h"

#include <cstdio>
#include <cstring>

#include "data/data_error.h"
#include "data/files/gzip_file.h"

namespace dpt {

namespace {

uint32_t read_be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string hex_magic(const uint8_t* p) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02x%02x%02x%02x", p[0], p[1], p[2], p[3]);
  return buf;
}

}  // namespace

std::string idx_dims_text(const std::vector<uint32_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& path) {
  if (bytes.size() < 4) {
    throw_data_error(path, "truncated IDX file: " + std::to_string(bytes.size()) +
                               " bytes, too short for the 4-byte magic number");
  }
  const uint8_t* b = bytes.data();
  if (b[0] != 0 || b[1] != 0) {
    throw_data_error(path, "bad IDX magic number " + hex_magic(b) +
                               " (expected 0x0000TTNN; is this an IDX file?)");
  }
  if (b[2] != 0x08) {
    throw_data_error(path, "unsupported IDX element type 0x" + hex_magic(b).substr(6, 2) +
                               " (only 0x08, unsigned byte, is supported)");
  }
  const size_t ndims = b[3];
  if (ndims == 0 || ndims > 4) {
    throw_data_error(path, "implausible IDX dimension count " + std::to_string(ndims));
  }
  const size_t header = 4 + 4 * ndims;
  if (bytes.size() < header) {
    throw_data_error(path, "truncated IDX header: " + std::to_string(bytes.size()) +
                               " bytes, header needs " + std::to_string(header));
  }
  // The product of the dimensions, overflow-checked: four uint32 dimensions can multiply
  // past 2^64 and wrap to the file's real size, which the size check below would pass.
  IdxArray arr;
  const size_t payload = bytes.size() - header;
  size_t count = 1;
  bool overflows = false;
  for (size_t d = 0; d < ndims; ++d) {
    arr.dims.push_back(read_be32(b + 4 + 4 * d));
    overflows = overflows || __builtin_mul_overflow(count, size_t(arr.dims.back()), &count);
  }
  if (overflows)
    throw_data_error(path, "IDX dimensions " + idx_dims_text(arr.dims) + " multiply past 2^64 elements; the file has " +
                               std::to_string(bytes.size()) + " bytes (corrupt header?)");
  if (count != payload) {
    throw_data_error(path, "IDX size mismatch: header promises " + std::to_string(count) +
                               " elements (" + std::to_string(header) + " + " + std::to_string(count) +
                               " bytes), file has " + std::to_string(bytes.size()) + " bytes" +
                               (payload < count ? " (truncated)" : ""));
  }
  // Move the payload down in place instead of copying 47 MB.
  std::memmove(bytes.data(), bytes.data() + header, count);
  bytes.resize(count);
  arr.data = std::move(bytes);
  return arr;
}

IdxArray read_idx_file(const std::string& path) { return parse_idx(read_gzip_file(path), path); }

}  // namespace dpt
