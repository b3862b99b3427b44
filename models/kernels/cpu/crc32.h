// CRC-32 (IEEE 802.3 polynomial 0xEDB88320, as zlib and PNG). Checkpoints store it in
// their metadata so that a flipped byte in the tensor data is detected on load.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dpt {

uint32_t crc32_update(uint32_t crc, const void* data, size_t size);
inline uint32_t crc32(const void* data, size_t size) { return crc32_update(0, data, size); }

}  // namespace dpt
