#include "comm/net/log.h"

#include <unistd.h>

#include <atomic>

#include "comm/launch/env.h"

namespace dpt::log {

static std::atomic<int> g_rank{-1};

static Level level_from_env() {
  std::string v = env::get_string(env::kLogLevel);
  if (v == "debug") return Level::debug;
  if (v == "info") return Level::info;
  if (v == "error") return Level::error;
  return Level::warn;
}

void set_rank(int rank) { g_rank = rank; }

bool enabled(Level l) {
  static const Level threshold = level_from_env();
  return static_cast<int>(l) >= static_cast<int>(threshold);
}

void write(Level l, const std::string& msg) {
  static const char kTag[] = {'D', 'I', 'W', 'E'};
  std::string line = fmt::format("[dpt rank {} {}] {}\n", g_rank.load(), kTag[static_cast<int>(l)], msg);
  // A single write(2) keeps concurrent ranks' lines whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace dpt::log
