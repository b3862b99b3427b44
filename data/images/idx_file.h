#pragma once
// The IDX format of (Fashion-)MNIST. Terms: the *magic* is 4 bytes, 0x00 0x00, a type
// code (0x08 = unsigned byte, the only one these datasets use) and the number of
// dimensions; then one big-endian uint32 per dimension; then the elements, row-major.
// A valid file is exactly 4 + 4 * ndims + prod(dims) bytes long.
#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

struct IdxArray {
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;  // prod(dims) elements
};

// Parses bytes read from `path` (the path is only used in error messages). Throws
// DataError on a bad magic, an unsupported type, dimensions whose product overflows, or a
// size that disagrees with the header; nothing is allocated from the dimensions.
IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& path);

// "[60000, 28, 28]", for messages.
std::string idx_dims_text(const std::vector<uint32_t>& dims);

// read_gzip_file (at most kMaxGzipBytes inflated) + parse_idx.
IdxArray read_idx_file(const std::string& path);

}  // namespace dpt
