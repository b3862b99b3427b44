#include "data/files/gzip_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>

#include "data/data_error.h"

namespace dpt {

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// zlib's own description of the last error on `f` ("unexpected end of file",
// "incorrect data check", ...), without the "<path>: " zlib puts in front of it.
std::string gz_error_text(gzFile f, const std::string& path) {
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  if (code == Z_ERRNO) return std::strerror(errno);
  std::string text = msg ? msg : "unknown zlib error";
  if (text.rfind(path + ": ", 0) == 0) text.erase(0, path.size() + 2);
  return text;
}

}  // namespace

std::vector<uint8_t> read_gzip_file(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw_data_error(path, "file not found");
  if (std::filesystem::is_directory(path, ec))
    throw_data_error(path, "is a directory, expected a file");

  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) throw_data_error(path, std::string("cannot open: ") + std::strerror(errno));
  gzbuffer(f.get(), 1 << 18);  // fewer, larger reads of the compressed file

  // Inflated in chunks, never more than max_bytes + 1 in all: one byte past the cap tells
  // a file over it from one exactly at it, without inflating (or allocating) the rest.
  std::vector<uint8_t> out;
  constexpr size_t kChunk = size_t(1) << 22;
  const size_t limit = max_bytes == SIZE_MAX ? max_bytes : max_bytes + 1;
  while (out.size() < limit) {
    const size_t old = out.size(), want = std::min(kChunk, limit - old);
    out.resize(old + want);
    const int got = gzread(f.get(), out.data() + old, unsigned(want));
    if (got < 0) throw_data_error(path, "corrupt gzip data (" + gz_error_text(f.get(), path) + ")");
    out.resize(old + size_t(got));
    if (size_t(got) < want) break;
  }
  if (out.size() > max_bytes)
    throw_data_error(path, "inflates to more than " + std::to_string(max_bytes) +
                               " bytes, the cap of what is read (kMaxGzipBytes, data/files/gzip_file.h); "
                               "a gzip bomb, or not the file expected?");
  // gzread returns a short count, not an error, on a truncated stream; the reason is only
  // in the sticky error state, so check it explicitly.
  int code = Z_OK;
  gzerror(f.get(), &code);
  if (code != Z_OK) {
    throw_data_error(path, std::string(code == Z_BUF_ERROR ? "truncated" : "corrupt") +
                               " gzip data (" + gz_error_text(f.get(), path) + ")");
  }
  out.shrink_to_fit();
  return out;
}

}  // namespace dpt
