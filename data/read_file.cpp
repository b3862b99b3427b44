#include "data/read_file.h"

#include <fstream>

#include "data/data_error.h"

namespace dpt {

namespace {

template <class Bytes>
void append_any(const std::string& path, Bytes& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_data_error(path, "cannot open for reading");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) throw_data_error(path, "cannot determine file size");
  const size_t old = out.size();
  out.resize(old + size_t(size));
  if (!in.read(reinterpret_cast<char*>(out.data() + old), size)) {
    throw_data_error(path, "read failed after " + std::to_string(in.gcount()) + " bytes");
  }
}

}  // namespace

void append_file(const std::string& path, std::vector<uint8_t>& out) { append_any(path, out); }
void append_file(const std::string& path, std::string& out) { append_any(path, out); }

}  // namespace dpt
