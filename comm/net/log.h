#pragma once
// Logging tagged with the rank: "[dpt rank 2 W] message". The level comes from
// COMM_LOG_LEVEL; one line is written with one call so ranks' lines do not interleave.
#include <fmt/format.h>

#include <string>

namespace dpt::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };

void set_rank(int rank);
bool enabled(Level l);
void write(Level l, const std::string& msg);

template <typename... Args> void debug(fmt::format_string<Args...> f, Args&&... a) {
  if (enabled(Level::debug)) write(Level::debug, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args> void info(fmt::format_string<Args...> f, Args&&... a) {
  if (enabled(Level::info)) write(Level::info, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args> void warn(fmt::format_string<Args...> f, Args&&... a) {
  if (enabled(Level::warn)) write(Level::warn, fmt::format(f, std::forward<Args>(a)...));
}
template <typename... Args> void error(fmt::format_string<Args...> f, Args&&... a) {
  if (enabled(Level::error)) write(Level::error, fmt::format(f, std::forward<Args>(a)...));
}

}  // namespace dpt::log
