#pragma once
// Reads a whole file through zlib's gz* interface: gzip files are decompressed (the CRC
// and length in the gzip trailer are checked by zlib), plain files are read as they are.
#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

// Throws DataError naming `path` if it is missing, unreadable, truncated or corrupt.
std::vector<uint8_t> read_gzip_file(const std::string& path);

}  // namespace dpt
