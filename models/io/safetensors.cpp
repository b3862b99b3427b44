#include "models/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>
#include <nlohmann/json.hpp>

#include "device/safe_file.h"
#include "models/kernels/cpu/crc32.h"

namespace dpt {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping");

constexpr const char* kCrcKey = "dpt.crc32";

std::string errno_text() { return std::strerror(errno); }

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
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

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits -> binary32.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // infinity or NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal: value mant * 2^-24; normalise the mantissa into the float's.
    exp = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
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

size_t SafetensorsEntry::dtype_bytes(const std::string& dtype) {
  if (dtype == "I64") return 8;
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

void decode_floats(const std::string& dtype, const char* src, float* dst, size_t n) {
  if (n == 0) return;
  if (dtype == "F32") {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  if (dtype == "I64") {
    for (size_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      dst[i] = static_cast<float>(v);
    }
    return;
  }
  const bool bf16 = dtype == "BF16";
  if (!bf16 && dtype != "F16") throw std::invalid_argument("decode_floats: unsupported dtype " + dtype);
  for (size_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = bf16 ? std::bit_cast<float>(static_cast<uint32_t>(h) << 16) : half_to_float(h);
  }
}

bool has_safetensors_crc(const Metadata& metadata) { return metadata.count(kCrcKey) > 0; }

void check_safetensors_crc(const Metadata& metadata, uint32_t crc, const std::string& path) {
  auto it = metadata.find(kCrcKey);
  if (it == metadata.end()) return;
  const std::string actual = hex32(crc);
  if (actual != it->second)
    throw CheckpointError(path, "data checksum mismatch (crc32 " + actual + ", header says " + it->second +
                                    "): the file is corrupted");
}

const SafetensorsEntry* SafetensorsIndex::find(const std::string& name) const {
  for (const auto& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

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

// Through device/safe_file.h: 0600, an unguessable temporary name created without
// following links, fsync'd and renamed into place, the folder fsync'd.
void save_safetensors(const std::string& path, const std::vector<NamedTensorView>& tensors,
                      const Metadata& metadata) {
  const std::string header = encode_safetensors_header(tensors, metadata, path);
  try {
    AtomicFile out(path);
    out.write(header);
    for (const auto& t : tensors) {
      if (t.dtype == FileDType::I64) out.write(as_int64(t, path).data(), t.data.size() * 8);
      else out.write(t.data.data(), t.data.size() * sizeof(float));
    }
    out.commit();
  } catch (const FileWriteError& e) {
    throw CheckpointError(path, e.reason());
  }
}

void require_checkpoint_file(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw CheckpointError(path, "cannot stat: " + errno_text());
  if (S_ISDIR(st.st_mode)) throw CheckpointError(path, "is a directory, expected a .safetensors file");
  if (!S_ISREG(st.st_mode))
    throw CheckpointError(path, "not a regular file (a pipe, FIFO or device): a checkpoint is read by offset; "
                                "copy it to a file first");
}

SafetensorsContents load_safetensors(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(path, "cannot open: " + errno_text());
  struct stat st {};
  try {
    require_checkpoint_file(fd, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::fstat(fd, &st);
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

SafetensorsIndex parse_safetensors_header(std::span<const char> json, uint64_t data_size, const std::string& path) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw CheckpointError(path, "header is not a JSON object");
  SafetensorsIndex out;
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
      SafetensorsEntry t;
      t.name = name;
      t.dtype = v["dtype"].get<std::string>();
      if (!known_dtype(t.dtype))
        throw CheckpointError(path, "tensor " + name + " has unknown dtype '" + t.dtype + "'");
      const size_t elem = SafetensorsEntry::dtype_bytes(t.dtype);
      if (elem == 0)
        throw CheckpointError(path, "tensor " + name + " has dtype " + t.dtype +
                                        "; supported are F32, F16, BF16 (and I64 for counters)");
      const auto& shape_j = v["shape"];
      const auto& off_j = v["data_offsets"];
      if (!shape_j.is_array()) throw CheckpointError(path, "tensor " + name + ": shape is not an array");
      for (const auto& d : shape_j) {
        if (!d.is_number_unsigned())
          throw CheckpointError(path, "tensor " + name + ": shape holds a non-integer or negative value");
        t.shape.push_back(d.get<int64_t>());
      }
      if (!off_j.is_array() || off_j.size() != 2 || !off_j[0].is_number_unsigned() ||
          !off_j[1].is_number_unsigned())
        throw CheckpointError(path, "tensor " + name + ": data_offsets is not [begin, end]");
      t.begin = off_j[0].get<uint64_t>();
      t.end = off_j[1].get<uint64_t>();
      if (t.begin > t.end || t.end > data_size)
        throw CheckpointError(path, "tensor " + name + ": data_offsets [" + std::to_string(t.begin) + ", " +
                                        std::to_string(t.end) + "] outside the " +
                                        std::to_string(data_size) + " data bytes (truncated?)");
      const size_t numel = checked_numel(t.shape, path, name);
      if (numel * elem != t.end - t.begin)
        throw CheckpointError(path, "tensor " + name + ": shape " + shape_str(t.shape) + " in " + t.dtype +
                                        " needs " + std::to_string(numel * elem) + " bytes but data_offsets span " +
                                        std::to_string(t.end - t.begin));
      out.entries.push_back(std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    throw CheckpointError(path, std::string("malformed header: ") + e.what());
  }
  // The tensors must tile the data exactly: no gap, no overlap, nothing left over. An
  // empty tensor [k, k] sorts before a tensor that starts at k (as in Python's
  // safetensors), else a file save_safetensors wrote could be rejected. The sort is
  // stable so equal extents keep the header's order.
  std::stable_sort(out.entries.begin(), out.entries.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t expect = 0;
  for (const auto& x : out.entries) {
    if (x.begin != expect)
      throw CheckpointError(path, "tensor " + x.name + " starts at byte " + std::to_string(x.begin) +
                                      " but the previous one ended at " + std::to_string(expect) +
                                      " (gap or overlap)");
    expect = x.end;
  }
  if (expect != data_size)
    throw CheckpointError(path, "tensors cover " + std::to_string(expect) + " data bytes but the file holds " +
                                    std::to_string(data_size) + " (truncated or trailing garbage)");
  return out;
}

SafetensorsContents parse_safetensors(std::span<const char> bytes, const std::string& path) {
  const uint64_t file_size = bytes.size();
  if (file_size < 8)
    throw CheckpointError(path, "file is " + std::to_string(file_size) +
                                    " bytes, too short for the 8-byte header length (truncated?)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxSafetensorsHeaderBytes || header_len > file_size - 8)
    throw CheckpointError(path, "header length " + std::to_string(header_len) +
                                    " does not fit in the file of " + std::to_string(file_size) +
                                    " bytes (truncated or corrupted)");
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  SafetensorsIndex index = parse_safetensors_header(bytes.subspan(8, header_len), data_size, path);
  const char* data = bytes.data() + data_start;
  if (has_safetensors_crc(index.metadata)) check_safetensors_crc(index.metadata, crc32(data, data_size), path);
  SafetensorsContents out;
  out.metadata = std::move(index.metadata);
  out.tensors.reserve(index.entries.size());
  for (auto& e : index.entries) {
    NamedTensor t;
    t.name = std::move(e.name);
    t.shape = std::move(e.shape);
    t.data.resize(e.numel());
    decode_floats(e.dtype, data + e.begin, t.data.data(), t.data.size());
    t.dtype = std::move(e.dtype);
    out.tensors.push_back(std::move(t));
  }
  return out;
}

}  // namespace dpt
