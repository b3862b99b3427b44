#include "models/kernels/cpu/huge_pages.h"

namespace dpt {
namespace {
std::atomic<size_t> g_now{0}, g_peak{0};
}  // namespace

void count_host_floats(std::ptrdiff_t bytes) {
  const size_t now = g_now.fetch_add(static_cast<size_t>(bytes), std::memory_order_relaxed) + static_cast<size_t>(bytes);
  size_t peak = g_peak.load(std::memory_order_relaxed);
  while (bytes > 0 && now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

HostFloatsBytes host_floats_bytes() {
  return {g_now.load(std::memory_order_relaxed), g_peak.load(std::memory_order_relaxed)};
}

}  // namespace dpt
