#include "models/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <tuple>
#include <nlohmann/json.hpp>

#include "models/crc32.h"

namespace dpt {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the limit Python's safetensors uses
constexpr const char* kCrcKey = "dpt.crc32";

std::string errno_text() { return std::strerror(errno); }

void write_all(int fd, const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw CheckpointError(path, "write failed: " + errno_text());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// Temp file in the target's folder; removed unless disarmed.
struct TempFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!keep) ::unlink(path.c_str());
  }
};

void fsync_parent(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw CheckpointError(path, "cannot open folder " + dir + ": " + errno_text());
  int rc = ::fsync(dfd);
  ::close(dfd);
  if (rc != 0) throw CheckpointError(path, "fsync of folder " + dir + " failed: " + errno_text());
}

size_t checked_numel(const std::vector<int64_t>& shape, const std::string& path,
                     const std::string& name) {
  size_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw CheckpointError(path, "tensor " + name + " has a negative dimension");
    if (d != 0 && n > std::numeric_limits<size_t>::max() / 8 / static_cast<size_t>(d))
      throw CheckpointError(path, "tensor " + name + " shape overflows");
    n *= static_cast<size_t>(d);
  }
  return n;
}

size_t element_bytes(FileDType d) { return d == FileDType::I64 ? 8 : 4; }

// An I64 tensor's values as the integers the file holds; refuses a value that is not one.
std::vector<int64_t> as_int64(const NamedTensorView& t, const std::string& path) {
  std::vector<int64_t> v(t.data.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const float f = t.data[i];
    if (!std::isfinite(f) || std::trunc(f) != f)
      throw CheckpointError(path, "tensor " + t.name + " is stored as I64 but holds " + std::to_string(f));
    v[i] = static_cast<int64_t>(f);
  }
  return v;
}

bool known_dtype(const std::string& d) {
  static const char* kKnown[] = {"BOOL", "U8",  "I8",  "I16", "U16", "F16",     "BF16",
                                 "I32",  "U32", "F32", "F64", "I64", "U64",     "F8_E4M3",
                                 "F8_E5M2"};
  return std::any_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return d == k; });
}

}  // namespace

const char* file_dtype_name(FileDType d) { return d == FileDType::I64 ? "I64" : "F32"; }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

const NamedTensor* SafetensorsContents::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::string encode_safetensors_header(const std::vector<NamedTensorView>& tensors, const Metadata& metadata,
                                      const std::string& path) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  uint32_t crc = 0;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__" || t.name.empty())
      throw CheckpointError(path, "invalid tensor name '" + t.name + "'");
    if (header.contains(t.name)) throw CheckpointError(path, "duplicate tensor name " + t.name);
    const size_t numel = checked_numel(t.shape, path, t.name);
    if (numel != t.data.size())
      throw CheckpointError(path, "tensor " + t.name + " has shape " + shape_str(t.shape) +
                                      " but " + std::to_string(t.data.size()) + " values");
    const uint64_t bytes = numel * element_bytes(t.dtype);
    header[t.name] = {{"dtype", file_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    if (t.dtype == FileDType::I64) crc = crc32_update(crc, as_int64(t, path).data(), bytes);
    else crc = crc32_update(crc, t.data.data(), bytes);
  }
  Metadata meta = metadata;
  meta[kCrcKey] = hex32(crc);
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t header_len = text.size();
  std::string out(reinterpret_cast<const char*>(&header_len), 8);
  return out + text;
}

void save_safetensors(const std::string& path, const std::vector<NamedTensorView>& tensors,
                      const Metadata& metadata) {
  const std::string header = encode_safetensors_header(tensors, metadata, path);
  TempFile tmp;
  tmp.path = path + ".tmp." + std::to_string(::getpid());
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) throw CheckpointError(path, "cannot create " + tmp.path + ": " + errno_text());
  write_all(tmp.fd, header.data(), header.size(), path);
  for (const auto& t : tensors) {
    if (t.dtype == FileDType::I64) write_all(tmp.fd, as_int64(t, path).data(), t.data.size() * 8, path);
    else write_all(tmp.fd, t.data.data(), t.data.size() * sizeof(float), path);
  }
  if (::fsync(tmp.fd) != 0) throw CheckpointError(path, "fsync failed: " + errno_text());
  if (::close(tmp.fd) != 0) {
    tmp.fd = -1;
    throw CheckpointError(path, "close failed: " + errno_text());
  }
  tmp.fd = -1;
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    throw CheckpointError(path, "rename from " + tmp.path + " failed: " + errno_text());
  tmp.keep = true;
  fsync_parent(path);
}

SafetensorsContents load_safetensors(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(path, "cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CheckpointError(path, "not a regular file");
  }
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  std::vector<char> bytes(file_size);  // the file's real size, not a size read from it
  size_t got = 0;
  while (got < file_size) {
    ssize_t n = ::read(fd, bytes.data() + got, file_size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw CheckpointError(path, "read failed after " + std::to_string(got) + " bytes");
    }
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return parse_safetensors(bytes, path);
}

SafetensorsContents parse_safetensors(std::span<const char> bytes, const std::string& path) {
  const uint64_t file_size = bytes.size();
  if (file_size < 8)
    throw CheckpointError(path, "file is " + std::to_string(file_size) +
                                    " bytes, too short for the 8-byte header length (truncated?)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8)
    throw CheckpointError(path, "header length " + std::to_string(header_len) +
                                    " does not fit in the file of " + std::to_string(file_size) +
                                    " bytes (truncated or corrupted)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(header_len));
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw CheckpointError(path, "header is not a JSON object");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;

  SafetensorsContents out;
  struct Extent { uint64_t begin, end; size_t index; };
  std::vector<Extent> extents;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      const std::string& name = it.key();
      const auto& v = it.value();
      if (name == "__metadata__") {
        if (!v.is_object()) throw CheckpointError(path, "__metadata__ is not an object");
        for (auto m = v.begin(); m != v.end(); ++m) {
          if (!m.value().is_string())
            throw CheckpointError(path, "metadata value of '" + m.key() + "' is not a string");
          out.metadata[m.key()] = m.value().get<std::string>();
        }
        continue;
      }
      if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
          !v.contains("data_offsets"))
        throw CheckpointError(path, "tensor " + name + " lacks dtype, shape or data_offsets");
      if (!v["dtype"].is_string()) throw CheckpointError(path, "tensor " + name + ": dtype is not a string");
      const std::string dtype = v["dtype"].get<std::string>();
      if (!known_dtype(dtype))
        throw CheckpointError(path, "tensor " + name + " has unknown dtype '" + dtype + "'");
      if (dtype != "F32" && dtype != "I64")
        throw CheckpointError(path, "tensor " + name + " has dtype " + dtype + "; only F32 (and I64 for counters) is supported");
      const auto& shape_j = v["shape"];
      const auto& off_j = v["data_offsets"];
      if (!shape_j.is_array()) throw CheckpointError(path, "tensor " + name + ": shape is not an array");
      NamedTensor t;
      t.name = name;
      t.dtype = dtype == "I64" ? FileDType::I64 : FileDType::F32;
      for (const auto& d : shape_j) {
        if (!d.is_number_unsigned())
          throw CheckpointError(path, "tensor " + name + ": shape holds a non-integer or negative value");
        t.shape.push_back(d.get<int64_t>());
      }
      if (!off_j.is_array() || off_j.size() != 2 || !off_j[0].is_number_unsigned() ||
          !off_j[1].is_number_unsigned())
        throw CheckpointError(path, "tensor " + name + ": data_offsets is not [begin, end]");
      const uint64_t b = off_j[0].get<uint64_t>(), e = off_j[1].get<uint64_t>();
      if (b > e || e > data_size)
        throw CheckpointError(path, "tensor " + name + ": data_offsets [" + std::to_string(b) + ", " +
                                        std::to_string(e) + "] outside the " +
                                        std::to_string(data_size) + " data bytes (truncated?)");
      const size_t numel = checked_numel(t.shape, path, name);
      if (numel * element_bytes(t.dtype) != e - b)
        throw CheckpointError(path, "tensor " + name + ": shape " + shape_str(t.shape) + " needs " +
                                        std::to_string(numel * element_bytes(t.dtype)) + " bytes but data_offsets span " +
                                        std::to_string(e - b));
      extents.push_back({b, e, out.tensors.size()});
      out.tensors.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(path, std::string("malformed header: ") + e.what());
  }
  // The tensors must tile the data exactly: no gap, no overlap, nothing left over. An
  // empty tensor [k, k] sorts before a tensor that starts at k (as in Python's
  // safetensors), else a file save_safetensors wrote could be rejected.
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) {
    return std::tie(a.begin, a.end, a.index) < std::tie(b.begin, b.end, b.index);
  });
  uint64_t expect = 0;
  for (const auto& x : extents) {
    if (x.begin != expect)
      throw CheckpointError(path, "tensor " + out.tensors[x.index].name + " starts at byte " +
                                      std::to_string(x.begin) + " but the previous one ended at " +
                                      std::to_string(expect) + " (gap or overlap)");
    expect = x.end;
  }
  if (expect != data_size)
    throw CheckpointError(path, "tensors cover " + std::to_string(expect) + " data bytes but the file holds " +
                                    std::to_string(data_size) + " (truncated or trailing garbage)");
  const char* data = bytes.data() + data_start;
  if (auto it = out.metadata.find(kCrcKey); it != out.metadata.end()) {
    const std::string actual = hex32(crc32(data, data_size));
    if (actual != it->second)
      throw CheckpointError(path, "data checksum mismatch (crc32 " + actual + ", header says " +
                                      it->second + "): the file is corrupted");
  }
  std::vector<NamedTensor> ordered;
  ordered.reserve(extents.size());
  for (const auto& x : extents) {
    NamedTensor& t = out.tensors[x.index];
    t.data.resize((x.end - x.begin) / element_bytes(t.dtype));
    if (t.dtype == FileDType::I64) {
      for (size_t i = 0; i < t.data.size(); ++i) {
        int64_t v;
        std::memcpy(&v, data + x.begin + 8 * i, 8);
        t.data[i] = static_cast<float>(v);
      }
    } else if (x.end > x.begin) {
      // An empty tensor's data() may be null, which memcpy must not get even for 0 bytes.
      std::memcpy(t.data.data(), data + x.begin, x.end - x.begin);
    }
    ordered.push_back(std::move(t));
  }
  out.tensors = std::move(ordered);
  return out;
}

}  // namespace dpt
