#include "comm/error.h"

namespace dpt {

std::string format_error(const ErrorContext& c, const std::string& detail) {
  std::string s = "[rank " + std::to_string(c.rank);
  if (c.world_size >= 0) s += "/" + std::to_string(c.world_size);
  if (!c.backend.empty()) s += " " + c.backend;
  s += "] ";
  if (!c.op.empty()) s += c.op;
  if (c.seq >= 0) s += " #" + std::to_string(c.seq);
  if (c.peer >= 0) s += " (peer " + std::to_string(c.peer) + ")";
  if (!c.op.empty() || c.peer >= 0) s += ": ";
  return s + detail;
}

}  // namespace dpt
