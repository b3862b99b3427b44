// The device reduction kernels (comm/device/cuda_reduce.cu) against the host kernels
// (comm/reduce_kernels.cpp), byte for byte, for every dtype and op, on inputs that mix
// signs, overflow integers and round 16-bit floats. Needs a real GPU (registered behind
// tests/support/needs_gpu.sh, which reports the test as skipped where there is none).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "comm/device/device_reduce.h"
#include "comm/reduce_kernels.h"

using namespace dpt;

TEST_CASE("device reduce_into and divide_in_place equal the host kernels") {
  const Device d{DeviceKind::cuda, 0};
  std::mt19937 rng(7);
  for (DType t : kAllDTypes) {
    for (ReduceOp op : kAllReduceOps) {
      for (size_t n : {size_t(1), size_t(1000), size_t(1) << 20}) {
        const size_t bytes = n * dtype_size(t);
        std::vector<unsigned char> a(bytes), b(bytes);
        for (auto& x : a) x = static_cast<unsigned char>(rng());
        for (auto& x : b) x = static_cast<unsigned char>(rng());
        if (is_floating(t)) {  // finite values: random bytes are often NaN patterns
          for (size_t i = 0; i < n; ++i) {
            float va = float(int(rng() % 2001) - 1000) / 8.f, vb = float(int(rng() % 2001) - 1000) / 8.f;
            switch (t) {
              case DType::f32: reinterpret_cast<float*>(a.data())[i] = va; reinterpret_cast<float*>(b.data())[i] = vb; break;
              case DType::f64: reinterpret_cast<double*>(a.data())[i] = va; reinterpret_cast<double*>(b.data())[i] = vb; break;
              default: break;  // f16/bf16: random bit patterns with the exponent masked below
            }
          }
          if (t == DType::f16 || t == DType::bf16)
            for (size_t i = 0; i < n; ++i) {  // clear the top exponent bit: no inf/NaN
              a[2 * i + 1] &= 0xbf;
              b[2 * i + 1] &= 0xbf;
            }
        }
        std::vector<unsigned char> want = a;
        reduce_into(want.data(), b.data(), n, t, op);
        divide_in_place(want.data(), n, t, 3);
        device::DeviceMemory da(d, bytes), db(d, bytes);
        device::copy(da.data(), a.data(), bytes);
        device::copy(db.data(), b.data(), bytes);
        device::reduce_into(d, da.data(), db.data(), n, t, op);
        device::divide_in_place(d, da.data(), n, t, 3);
        std::vector<unsigned char> got(bytes);
        device::copy(got.data(), da.data(), bytes);
        INFO(dtype_name(t) << " " << reduce_op_name(op) << " n=" << n);
        CHECK(std::memcmp(got.data(), want.data(), bytes) == 0);
      }
    }
  }
}
