// The device-resident optimizer (optim/cuda/device_steps.h) against the CPU optimizer:
// every variant of SGD, Adam and AdamW stepped on the GPU gives the CPU's parameters and
// state bit for bit, over several steps (the first step of SGD's momentum differs from the
// rest); a state written through state_buffers() (a restore) reaches the device before the
// next step; the device squared norm equals the host's to double rounding and scale()
// multiplies exactly. Needs a GPU (gpu.optim, through tests/support/needs_gpu.sh).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "device/runtime.h"
#include "models/kernels/cuda/device_floats.h"
#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/cuda/device_steps.h"
#include "optim/sgd.h"

using namespace dpt;

namespace {

std::vector<float> random_floats(size_t n, uint64_t seed, float scale) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

std::vector<float> download(const DeviceFloats& d) {
  std::vector<float> h(d.size());
  device::copy(h.data(), d.data(), h.size() * sizeof(float));
  return h;
}

void upload(DeviceFloats& d, const std::vector<float>& h) {
  d.reserve(h.size());
  device::copy(d.data(), h.data(), h.size() * sizeof(float));
}

bool same_bits(const std::vector<float>& a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Variant {
  const char* name;
  std::unique_ptr<Optimizer> (*make)(size_t n);
};

}  // namespace

TEST_CASE("optimizers step on the device with the cpu's bits", "[cuda]") {
  device::set_current(Device{DeviceKind::cuda, 0});
  const Variant variants[] = {
      {"sgd", [](size_t n) -> std::unique_ptr<Optimizer> { return std::make_unique<Sgd>(n); }},
      {"sgd momentum dampening decay",
       [](size_t n) -> std::unique_ptr<Optimizer> { return std::make_unique<Sgd>(n, 0.9f, 0.1f, false, 0.01f); }},
      {"sgd nesterov", [](size_t n) -> std::unique_ptr<Optimizer> { return std::make_unique<Sgd>(n, 0.8f, 0.0f, true); }},
      {"adam", [](size_t n) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(n); }},
      {"adam l2", [](size_t n) -> std::unique_ptr<Optimizer> { return std::make_unique<Adam>(n, 0.9f, 0.99f, 1e-6f, 0.05f); }},
      {"adamw", [](size_t n) -> std::unique_ptr<Optimizer> { return std::make_unique<AdamW>(n, 0.9f, 0.95f, 1e-8f, 0.1f); }},
  };
  const size_t n = 1000003;  // odd: the grid-stride loops' tails
  for (const Variant& v : variants) {
    DYNAMIC_SECTION(v.name) {
      auto host = v.make(n);
      auto dev = v.make(n);
      REQUIRE(dev->has_device_step());
      dev->to_device();
      std::vector<float> p_host = random_floats(n, 1, 1.0f);
      DeviceFloats p_dev, g_dev;
      upload(p_dev, p_host);
      for (int step = 0; step < 4; ++step) {
        const std::vector<float> g = random_floats(n, 10 + step, 0.1f);
        upload(g_dev, g);
        const float lr = 0.01f * float(step + 1);
        host->step(p_host, g, lr);
        dev->step_on_device(p_dev.data(), g_dev.data(), lr);
        INFO("step " << step + 1);
        CHECK(dev->step_count() == host->step_count());
        CHECK(same_bits(download(p_dev), p_host));
        const auto hs = host->state_buffers(), ds = dev->state_buffers();
        REQUIRE(hs.size() == ds.size());
        for (size_t i = 0; i < hs.size(); ++i) {
          INFO(hs[i].first);
          CHECK(ds[i].first == hs[i].first);
          CHECK(same_bits(std::vector<float>(hs[i].second.begin(), hs[i].second.end()), ds[i].second));
        }
        if (step == 1)  // a restore writes through the views: both halve their state
          for (auto* o : {host.get(), dev.get()})
            for (auto& [name, span] : o->state_buffers())
              for (float& x : span) x *= 0.5f;
      }
    }
  }
}

TEST_CASE("device squared norm and scale match the host", "[cuda]") {
  device::set_current(Device{DeviceKind::cuda, 0});
  for (const size_t n : {size_t(1), size_t(255), size_t(257), size_t(3000017)}) {
    DYNAMIC_SECTION("n " << n) {
      std::vector<float> x = random_floats(n, n, 3.0f);
      DeviceFloats d;
      upload(d, x);
      const double want = squared_norm(x);
      const double got = gpu::squared_norm(d.data(), n);
      CHECK(std::abs(got - want) <= 1e-12 * want);
      CHECK(gpu::squared_norm(d.data(), n) == got);  // the same order every call
      gpu::scale(d.data(), n, 0.37f);
      for (float& v : x) v *= 0.37f;
      CHECK(same_bits(download(d), x));
    }
  }
}
