// How train and train_local print a measured rate: at least three significant digits
// (41473, 92.3, 0.943), so a slow model's samples/s is not rounded to "1".
#pragma once

#include <cstdio>
#include <string>

namespace dpt::tools {

inline std::string rate(double v) {
  char b[64];
  std::snprintf(b, sizeof b, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 1 ? "%.2f" : "%.3g", v);
  return b;
}

}  // namespace dpt::tools
