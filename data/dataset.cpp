#include "data/dataset.h"

#include <stdexcept>
#include <string>

#include "data/data_error.h"

namespace dpt {

Dataset::~Dataset() = default;

Split parse_split(std::string_view s) {
  if (s == "train") return Split::train;
  if (s == "test" || s == "val" || s == "valid" || s == "validation") return Split::test;
  throw std::invalid_argument("unknown split '" + std::string(s) +
                              "' (valid: train, test, val, valid, validation)");
}

const char* split_name(Split s) { return s == Split::train ? "train" : "test"; }

void check_indices(const Dataset& ds, std::span<const size_t> indices) {
  const size_t n = ds.size();
  for (size_t i : indices) {
    if (i >= n) {
      throw std::out_of_range(ds.name() + ": sample index " + std::to_string(i) +
                              " out of range (size " + std::to_string(n) + ")");
    }
  }
}

void throw_data_error(const std::string& path, const std::string& problem) {
  throw DataError(path + ": " + problem);
}

}  // namespace dpt
