// runtime_library: the CUDA libraries models/ opens with dlopen on first use (cuBLAS,
// cuBLASLt, cuDNN) rather than links: cuBLAS's relocations alone cost every process that
// links models/ about 90 ms at start, and cuDNN is optional. Failures throw
// device::DeviceError naming the library, and what needs it.
#pragma once

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "device/runtime.h"

namespace dpt::gpu {

// The library `name` (e.g. "libcublas.so.13"), opened once per call site's static; `hint`
// ends the error when it cannot be opened.
inline void* open_runtime_library(const std::string& name, const std::string& hint = "") {
  void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) throw device::DeviceError("cannot load " + name + ": " + dlerror() + hint);
  return lib;
}

// f = the library's `symbol`, typed as f is.
template <class F>
void load_symbol(void* lib, const std::string& name, F& f, const char* symbol) {
  void* p = dlsym(lib, symbol);
  if (!p) throw device::DeviceError(name + " has no " + symbol);
  f = reinterpret_cast<std::remove_reference_t<F>>(p);
}

}  // namespace dpt::gpu
