#pragma once
// Where data lives: host memory or a CUDA device. comm/'s Buffer and models/' Tensor name
// their memory with this one type, so a device pointer passes between them unchanged.
#include <cstdint>
#include <string>

namespace dpt {

enum class DeviceKind : uint8_t { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace dpt
