#include "models/io/safetensors_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "models/kernels/cpu/crc32.h"

namespace dpt {
namespace {
constexpr size_t kChunkBytes = 8u << 20;            // CRC pass and conversion buffer
}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw CheckpointError(path, std::string("cannot open: ") + std::strerror(errno));
  try {
    struct stat st {};
    require_checkpoint_file(fd_, path);
    ::fstat(fd_, &st);
    const uint64_t file_size = static_cast<uint64_t>(st.st_size);
    if (file_size < 8)
      throw CheckpointError(path, "file is " + std::to_string(file_size) +
                                      " bytes, too short for the 8-byte header length (truncated?)");
    uint64_t header_len = 0;
    read_bytes(0, reinterpret_cast<char*>(&header_len), 8);
    if (header_len > kMaxSafetensorsHeaderBytes || header_len > file_size - 8)
      throw CheckpointError(path, "header length " + std::to_string(header_len) + " does not fit in the file of " +
                                      std::to_string(file_size) + " bytes (truncated or corrupted)");
    std::vector<char> header(header_len);
    read_bytes(8, header.data(), header.size());
    const uint64_t data_start = 8 + header_len;
    index_ = parse_safetensors_header(header, file_size - data_start, path);
    index_.data_start = data_start;
    if (has_safetensors_crc(index_.metadata)) {
      std::vector<char> chunk(kChunkBytes);
      uint32_t crc = 0;
      for (uint64_t at = data_start; at < file_size; at += chunk.size()) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), file_size - at));
        read_bytes(at, chunk.data(), n);
        crc = crc32_update(crc, chunk.data(), n);
      }
      check_safetensors_crc(index_.metadata, crc, path);
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::read_bytes(uint64_t offset, char* dst, size_t n) const {
  while (n > 0) {
    const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw CheckpointError(path_, "read of " + std::to_string(n) + " bytes at offset " + std::to_string(offset) +
                                       " failed" + (got < 0 ? std::string(": ") + std::strerror(errno) : " (truncated?)"));
    dst += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
}

void SafetensorsFile::read(const SafetensorsEntry& entry, std::span<float> dst) const {
  const size_t numel = entry.numel();
  if (dst.size() != numel)
    throw CheckpointError(path_, "tensor " + entry.name + " holds " + std::to_string(numel) +
                                     " values but the destination " + std::to_string(dst.size()));
  const uint64_t start = index_.data_start + entry.begin;
  const size_t elem = SafetensorsEntry::dtype_bytes(entry.dtype);
  if (elem == sizeof(float)) {  // F32: straight into the destination
    read_bytes(start, reinterpret_cast<char*>(dst.data()), numel * sizeof(float));
    return;
  }
  std::vector<char> chunk(std::min(kChunkBytes, numel * elem));
  const size_t per_chunk = chunk.size() / elem;
  for (size_t done = 0; done < numel; done += per_chunk) {
    const size_t n = std::min(per_chunk, numel - done);
    read_bytes(start + done * elem, chunk.data(), n * elem);
    decode_floats(entry.dtype, chunk.data(), dst.data() + done, n);
  }
}

}  // namespace dpt
