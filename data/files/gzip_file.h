#pragma once
// Reads a whole file through zlib's gz* interface: gzip files are decompressed (the CRC
// and length in the gzip trailer are checked by zlib), plain files are read as they are.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dpt {

// The most read_gzip_file inflates unless told otherwise: 1 GiB, 20 times the largest file
// the datasets read (Fashion-MNIST's training images, 47 MB). A gzip file can inflate
// about 1000-fold, so without a cap a few-MB file could ask for gigabytes.
inline constexpr size_t kMaxGzipBytes = size_t(1) << 30;

// Throws DataError naming `path` if it is missing, unreadable, truncated or corrupt, or
// would inflate past `max_bytes` (checked as it inflates: at most max_bytes + 1 are held).
std::vector<uint8_t> read_gzip_file(const std::string& path, size_t max_bytes = kMaxGzipBytes);

}  // namespace dpt
