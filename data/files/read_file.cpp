#include "data/files/read_file.h"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "data/data_error.h"

namespace dpt {

namespace {

// A regular file is read in one call of its size; anything else a path can name on Unix
// (a pipe such as /dev/stdin, a FIFO, process substitution's /dev/fd/N, a character
// device) has no size to ask for and is read in chunks to its end. A directory is refused.
template <class Bytes>
void append_any(const std::string& path, Bytes& out) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_data_error(path, std::string("cannot open: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) throw_data_error(path, "is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_data_error(path, "cannot open for reading");
  const size_t old = out.size();
  if (S_ISREG(st.st_mode)) {
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    in.seekg(0, std::ios::beg);
    if (size < 0) throw_data_error(path, "cannot determine file size");
    out.resize(old + size_t(size));
    if (!in.read(reinterpret_cast<char*>(out.data() + old), size)) {
      throw_data_error(path, "read failed after " + std::to_string(in.gcount()) + " bytes");
    }
    return;
  }
  std::array<char, 1 << 16> chunk;
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    const auto got = size_t(in.gcount());
    out.insert(out.end(), chunk.data(), chunk.data() + got);
  }
  if (in.bad()) throw_data_error(path, "read failed after " + std::to_string(out.size() - old) + " bytes");
}

}  // namespace

void append_file(const std::string& path, std::vector<uint8_t>& out) { append_any(path, out); }
void append_file(const std::string& path, std::string& out) { append_any(path, out); }

}  // namespace dpt
