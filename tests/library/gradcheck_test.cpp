// gradcheck (dpt/gradcheck.h) passes a right backward and fails wrong ones; the model's
// own gradients through residual blocks, a custom layer and nested blocks agree with
// central differences of the loss in float64.
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "tests/library/library_test.h"

using namespace dpt;

namespace {
// y = a * x^2 + b per feature; `mistake` plants a wrong backward.
class Quadratic : public nn::CustomLayer {
 public:
  enum class Mistake { none, factor, missing_bias, input_scale };
  explicit Quadratic(Mistake m = Mistake::none) : m_(m) {}
  std::vector<nn::ParameterSpec> parameters() const override { return {{"a", {3}}, {"b", {3}}}; }
  nn::Tensor forward(const nn::Tensor& x, const std::vector<std::span<const float>>& p) override {
    nn::Tensor y(x.shape());
    for (size_t i = 0; i < x.numel(); ++i) y[i] = p[0][i % 3] * x[i] * x[i] + p[1][i % 3];
    return y;
  }
  nn::Tensor backward(const nn::Tensor& x, const nn::Tensor&, const nn::Tensor& dy,
                      const std::vector<std::span<const float>>& p, const std::vector<std::span<float>>& g) override {
    nn::Tensor dx(x.shape());
    for (size_t i = 0; i < x.numel(); ++i) {
      g[0][i % 3] += x[i] * x[i] * dy[i] * (m_ == Mistake::factor ? 2.0f : 1.0f);
      if (m_ != Mistake::missing_bias) g[1][i % 3] += dy[i];
      dx[i] = (m_ == Mistake::input_scale ? 1.0f : 2.0f) * p[0][i % 3] * x[i] * dy[i];
    }
    return dx;
  }

 private:
  Mistake m_;
};
}  // namespace

TEST_CASE("gradcheck passes a right backward and fails each planted mistake") {
  Quadratic right;
  const nn::GradCheckResult ok = nn::gradcheck(right, {5, 3});
  INFO(ok.report());
  CHECK(ok.passed);
  CHECK(ok.elements == 15 + 3 + 3);
  for (auto m : {Quadratic::Mistake::factor, Quadratic::Mistake::missing_bias, Quadratic::Mistake::input_scale}) {
    Quadratic wrong(m);
    const nn::GradCheckResult bad = nn::gradcheck(wrong, {5, 3});
    INFO(bad.report());
    CHECK_FALSE(bad.passed);
  }
  // Any seed: the bounds are sized for float32 rounding, not for one draw.
  for (uint64_t seed = 1; seed <= 20; ++seed) CHECK(nn::gradcheck(right, {4, 3}, {.seed = seed}).passed);
}

TEST_CASE("a model's gradients through residual blocks and a custom layer match central differences") {
  nn::Sequential inner{{"fc", nn::Linear(6, 6)}, {"act", nn::GELU()}};
  nn::Sequential net;
  net.add("stem", nn::Linear(4, 6));
  net.add("res", nn::Residual(nn::Sequential{{"fc1", nn::Linear(6, 6)}, {"gelu", nn::GELU()}, {"nested", inner}}));
  net.add("quad", nn::Custom(std::make_shared<Quadratic>()));
  net.add("down", nn::Residual(nn::Sequential{{"fc", nn::Linear(3 * 2, 3)}}, nn::Sequential{{"proj", nn::Linear(6, 3)}}));
  nn::Model model(net, {.seed = 5});
  const nn::Tensor x = nn::Tensor::randn({3, 4}, 1), y = nn::Tensor::randn({3, 3}, 2);
  auto loss_at = [&] {  // the loss in float64 from the float32 output
    const nn::Tensor& out = model.forward(x);
    double s = 0;
    for (size_t i = 0; i < out.numel(); ++i) s += (double(out[i]) - y[i]) * (double(out[i]) - y[i]);
    return s / double(out.numel());
  };
  model.zero_grad();
  model.backward(nn::mse_loss(model.forward(x), y));
  const std::vector<float> analytic(model.flat_gradients().begin(), model.flat_gradients().end());
  std::span<float> p = model.flat_parameters();
  REQUIRE(model.parameter_names().size() == 12);
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const float keep = p[i];
    const double h = 1e-2;
    p[i] = float(keep + h);
    const double up = loss_at();
    p[i] = float(keep - h);
    const double down = loss_at();
    p[i] = keep;
    const double numeric = (up - down) / (double(float(keep + h)) - double(float(keep - h)));
    const double err = std::fabs(numeric - double(analytic[i]));
    worst = std::max(worst, err);
    bad += err > 2e-3 + 2e-2 * std::fabs(numeric);  // float32 outputs, h = 1e-2 (smooth layers only)
  }
  INFO("largest |analytic - numeric| " << worst);
  CHECK(bad == 0);
  // The same forward and backward again give the same gradients, bit for bit.
  model.zero_grad();
  model.backward(nn::mse_loss(model.forward(x), y));
  for (size_t i = 0; i < analytic.size(); ++i) CHECK(model.flat_gradients()[i] == analytic[i]);
}

TEST_CASE("a model of two inputs: gradients match central differences, each input reaches its own branch") {
  nn::Sequential net;
  net.add("in", nn::Inputs({{"image", {1, 4, 4}, nn::Sequential{{"conv", nn::Conv2d(1, 2, 3, 1, 1)}, {"flat", nn::Flatten()}}},
                            {"meta", {3}, nn::Sequential{{"fc", nn::Linear(3, 4)}, {"gelu", nn::GELU()}}}}));
  net.add("head", nn::Linear(2 * 16 + 4, 2));
  nn::Model model(net, {.seed = 9});
  const std::vector<std::string> names = model.parameter_names();
  REQUIRE(names == std::vector<std::string>{"in.image.conv.weight", "in.image.conv.bias", "in.meta.fc.weight",
                                            "in.meta.fc.bias", "head.weight", "head.bias"});
  const nn::Tensor image = nn::Tensor::randn({2, 1, 4, 4}, 3), meta = nn::Tensor::randn({2, 3}, 4);
  const nn::Tensor y = nn::Tensor::randn({2, 2}, 5);
  auto loss_at = [&] {
    const nn::Tensor& out = model.forward({image, meta});
    double s = 0;
    for (size_t i = 0; i < out.numel(); ++i) s += (double(out[i]) - y[i]) * (double(out[i]) - y[i]);
    return s / double(out.numel());
  };
  model.zero_grad();
  model.backward(nn::mse_loss(model.forward({image, meta}), y));
  const std::vector<float> analytic(model.flat_gradients().begin(), model.flat_gradients().end());
  std::span<float> p = model.flat_parameters();
  size_t bad = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const float keep = p[i];
    p[i] = float(keep + 1e-2);
    const double up = loss_at();
    p[i] = float(keep - 1e-2);
    const double down = loss_at();
    p[i] = keep;
    const double numeric = (up - down) / (double(float(keep + 1e-2)) - double(float(keep - 1e-2)));
    bad += std::fabs(numeric - double(analytic[i])) > 2e-3 + 2e-2 * std::fabs(numeric);
  }
  CHECK(bad == 0);
  // Each input reaches its own branch: with the image all zeros the conv's weight gets no
  // gradient (dW = sum dy * x) while the fc's does, and the other way round.
  auto weight_grad_zero = [&](const nn::Tensor& img, const nn::Tensor& m, const std::string& name) {
    model.zero_grad();
    model.backward(nn::mse_loss(model.forward({img, m}), y));
    const std::span<const float> g = model.gradient(name);
    return std::all_of(g.begin(), g.end(), [](float v) { return v == 0.0f; });
  };
  const nn::Tensor no_image({2, 1, 4, 4}), no_meta({2, 3});
  CHECK(weight_grad_zero(no_image, meta, "in.image.conv.weight"));
  CHECK_FALSE(weight_grad_zero(no_image, meta, "in.meta.fc.weight"));
  CHECK(weight_grad_zero(image, no_meta, "in.meta.fc.weight"));
  CHECK_FALSE(weight_grad_zero(image, no_meta, "in.image.conv.weight"));
  CHECK_THROWS_WITH(model.forward({image, nn::Tensor::randn({3, 3}, 1)}), Catch::Matchers::Contains("the same batch size"));
}
