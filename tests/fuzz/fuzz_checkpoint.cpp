// Fuzz target: the safetensors checkpoint parser (models/io/safetensors.h), which
// load_safetensors runs on a whole file's bytes.
//
// Terms:
//   input  - the bytes of a whole file, given to parse_safetensors as load_safetensors
//            gives it a file's contents.
//   data   - the bytes after the 8-byte header length and the JSON header.
//   rewrite - the parsed tensors and metadata written again: encode_safetensors_header
//            (what save_safetensors writes first), then each tensor's data.
// Checks, for every input:
//   - parse_safetensors throws CheckpointError or returns tensors that tile the data: in
//     the order returned, their bytes are the data exactly (no gap, no overlap, nothing
//     left over), and each holds as many values as its shape says; an F32 tensor's
//     values are its bytes, an F16 or BF16 tensor's values are its 2-byte elements'
//     values computed here by the formula (sign, exponent, fraction via ldexp), not by
//     the reader's bit manipulation;
//   - a "dpt.crc32" in the metadata is the CRC-32 of the data;
//   - the rewrite, in the order returned and in reverse order, is accepted by our writer
//     and parses back to the same tensors (bit for bit) and metadata: whatever the
//     reader accepts, the writer can write and the reader reads back;
//   - no read past the input (ASan), no leak, no undefined behaviour (UBSan), no
//     exception other than CheckpointError (a JSON exception escaping would be a bug).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "models/kernels/cpu/crc32.h"
#include "models/io/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

using namespace dpt;

namespace {

size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// The value of a 16-bit float element, from its definition.
bool same_value(float got, uint16_t bits, bool bf16) {
  const int sign = bits >> 15;
  const int exp_bits = bf16 ? 8 : 5, frac_bits = bf16 ? 7 : 10, bias = bf16 ? 127 : 15;
  const int e = (bits >> frac_bits) & ((1 << exp_bits) - 1);
  const int f = bits & ((1 << frac_bits) - 1);
  if (e == (1 << exp_bits) - 1) {
    if (f != 0) return std::isnan(got);
    return std::isinf(got) && std::signbit(got) == bool(sign);
  }
  const double mag = e == 0 ? std::ldexp(double(f), 1 - bias - frac_bits)
                            : std::ldexp(double(f + (1 << frac_bits)), e - bias - frac_bits);
  return double(got) == (sign ? -mag : mag) && std::signbit(got) == bool(sign);
}

std::vector<NamedTensor> by_name(std::vector<NamedTensor> v) {
  std::sort(v.begin(), v.end(), [](const NamedTensor& a, const NamedTensor& b) { return a.name < b.name; });
  return v;
}

bool same_tensors(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].shape != b[i].shape || a[i].data.size() != b[i].data.size()) return false;
    if (!a[i].data.empty() && std::memcmp(a[i].data.data(), b[i].data.data(), a[i].data.size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

void check_rewrite(const SafetensorsContents& c, bool reverse) {
  std::vector<NamedTensorView> views;
  for (const auto& t : c.tensors) views.push_back({t.name, t.shape, t.data});
  if (reverse) std::reverse(views.begin(), views.end());
  std::string file;
  try {
    file = encode_safetensors_header(views, c.metadata, "rewrite");
  } catch (const CheckpointError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    FUZZ_CHECK(false, "the writer accepts every set of tensors the reader accepted");
  }
  for (const auto& v : views) file.append(reinterpret_cast<const char*>(v.data.data()), v.data.size_bytes());
  SafetensorsContents again;
  try {
    again = parse_safetensors(file, "rewrite");
  } catch (const CheckpointError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    FUZZ_CHECK(false, "the reader accepts what the writer wrote");
  }
  FUZZ_CHECK(same_tensors(by_name(again.tensors), by_name(c.tensors)), "a rewrite reads back the same tensors");
  Metadata meta = again.metadata;
  Metadata want = c.metadata;
  meta.erase("dpt.crc32");
  want.erase("dpt.crc32");
  FUZZ_CHECK(meta == want, "a rewrite reads back the same metadata");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const char> bytes(reinterpret_cast<const char*>(data), size);
  SafetensorsContents c;
  try {
    c = parse_safetensors(bytes, "fuzz-input");
  } catch (const CheckpointError& e) {
    FUZZ_CHECK(std::strstr(e.what(), "fuzz-input") != nullptr, "an error names the file");
    return 0;
  }
  uint64_t header_len = 0;
  FUZZ_CHECK(size >= 8, "an accepted file has the 8-byte header length");
  std::memcpy(&header_len, data, 8);
  FUZZ_CHECK(header_len <= size - 8, "an accepted header fits in the file");
  const std::string_view tensor_data(reinterpret_cast<const char*>(data) + 8 + header_len, size - 8 - header_len);
  size_t at = 0;
  for (const auto& t : c.tensors) {
    FUZZ_CHECK(t.data.size() == numel(t.shape), "a tensor holds as many values as its shape says");
    FUZZ_CHECK(t.dtype == "F32" || t.dtype == "F16" || t.dtype == "BF16" || t.dtype == "I64",
               "only F32, F16, BF16 and I64 are accepted");
    const size_t elem = t.dtype == "I64" ? 8 : t.dtype == "F32" ? sizeof(float) : 2;
    const size_t n = t.data.size() * elem;
    FUZZ_CHECK(n <= tensor_data.size() - at, "the tensors do not reach past the data");
    if (t.dtype == "I64") {
      for (size_t i = 0; i < t.data.size(); ++i) {
        int64_t v;
        std::memcpy(&v, tensor_data.data() + at + 8 * i, 8);
        FUZZ_CHECK(t.data[i] == static_cast<float>(v), "an I64 element converts to its value");
      }
    } else if (elem == sizeof(float)) {
      FUZZ_CHECK(n == 0 || std::memcmp(t.data.data(), tensor_data.data() + at, n) == 0,
                 "each tensor's values are the next bytes of the data");
    } else {
      for (size_t i = 0; i < t.data.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, tensor_data.data() + at + 2 * i, 2);
        FUZZ_CHECK(same_value(t.data[i], bits, t.dtype == "BF16"), "a 16-bit element widens to its value");
      }
    }
    at += n;
  }
  FUZZ_CHECK(at == tensor_data.size(), "the tensors cover the data exactly");
  if (auto it = c.metadata.find("dpt.crc32"); it != c.metadata.end()) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", crc32(tensor_data.data(), tensor_data.size()));
    FUZZ_CHECK(it->second == hex, "a dpt.crc32 in the metadata is the data's CRC-32");
  }
  check_rewrite(c, false);
  check_rewrite(c, true);
  return 0;
}
