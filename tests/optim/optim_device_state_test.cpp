// Optimizer's device-state protocol (optim/optimizer.h), on the emulated device
// (DPT_EMULATE_DEVICE=1: device memory is host memory, copies are memcpy, no kernels):
// to_device() uploads the state, state_buffers() shows the device state's current values
// and a write through its views reaches the device before the next device step. The
// optimizer here steps its "device" arrays with a host loop, which only the emulated
// device allows; the real kernels are gpu.optim's.
#include <catch2/catch.hpp>

#include <vector>

#include "device/runtime.h"
#include "optim/optimizer.h"

using namespace dpt;

namespace {

// State "velocity"; a device step adds the gradient to it and subtracts it from the
// parameter: v += g; p -= lr * v.
class CountingOptimizer : public Optimizer {
 public:
  explicit CountingOptimizer(size_t n) : Optimizer(n), v_(n, 0.0f) {}
  void step(std::span<float> p, std::span<const float> g, float lr) override {
    check_sizes(p, g);
    for (size_t i = 0; i < numel_; ++i) p[i] -= lr * (v_[i] += g[i]);
    ++step_count_;
  }
  std::string name() const override { return "counting"; }
  bool has_device_step() const override { return true; }

 protected:
  std::vector<std::pair<std::string, std::span<float>>> host_state() override { return {{"velocity", v_}}; }
  void device_step(float* p, const float* g, float lr, const std::vector<float*>& state) override {
    for (size_t i = 0; i < numel_; ++i) p[i] -= lr * (state[0][i] += g[i]);
    ++step_count_;
    device_steps_++;
  }

 public:
  int device_steps_ = 0;

 private:
  std::vector<float> v_;
};

}  // namespace

TEST_CASE("an optimizer's device state is uploaded, shown and written back", "[emulated]") {
  REQUIRE(device::emulated());
  device::set_current(Device{DeviceKind::cuda, 0});
  const size_t n = 5;
  CountingOptimizer host(n), dev(n);
  for (auto* o : {&host, &dev}) o->state_buffers()[0].second[2] = 1.0f;  // state before the move
  dev.to_device();
  REQUIRE(dev.on_device());
  std::vector<float> p_host(n, 0.0f), p_dev(n, 0.0f), g(n, 1.0f);
  for (int step = 0; step < 3; ++step) {
    host.step(p_host, g, 0.5f);
    dev.step_on_device(p_dev.data(), g.data(), 0.5f);  // emulated: host pointers are device pointers
    const auto hv = host.state_buffers()[0].second, dv = dev.state_buffers()[0].second;
    CHECK(std::vector<float>(dv.begin(), dv.end()) == std::vector<float>(hv.begin(), hv.end()));
    CHECK(p_dev == p_host);
    if (step == 0)  // a restore: written through the views of both
      for (auto* o : {static_cast<Optimizer*>(&host), static_cast<Optimizer*>(&dev)}) {
        const auto views = o->state_buffers();
        for (float& x : views[0].second) x = 10.0f;
      }
  }
  CHECK(dev.device_steps_ == 3);
  CHECK(dev.step_count() == 3);
  // Without a device step, no move.
  class HostOnly : public Optimizer {
   public:
    using Optimizer::Optimizer;
    void step(std::span<float>, std::span<const float>, float) override {}
    std::string name() const override { return "host_only"; }
  } plain(n);
  CHECK_THROWS_WITH(plain.to_device(), Catch::Contains("host_only has no device step"));
  CHECK_THROWS_WITH(plain.step_on_device(p_dev.data(), g.data(), 0.1f), Catch::Contains("before to_device"));
}
