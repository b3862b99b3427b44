#pragma once
// The one exception type of data/: a dataset file that is missing, unreadable, truncated
// or malformed. The message always names the file and what is wrong with it.
#include <stdexcept>
#include <string>

namespace dpt {

class DataError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "<path>: <problem>"
[[noreturn]] void throw_data_error(const std::string& path, const std::string& problem);

}  // namespace dpt
