// A layer of your own (docs/library.md): y = a * tanh(b * x) per feature, its backward
// checked against finite differences before it trains inside a model.
//   build/bin/custom_layer
#include <dpt/dpt.h>

#include <cmath>
#include <cstdio>
#include <memory>

using namespace dpt;

class ScaledTanh : public nn::CustomLayer {
 public:
  explicit ScaledTanh(int64_t features) : features_(features) {}
  std::vector<nn::ParameterSpec> parameters() const override { return {{"a", {features_}}, {"b", {features_}}}; }
  void reset_parameters(const std::vector<std::span<float>>& p, uint64_t) override {
    for (float& v : p[0]) v = 1.0f;
    for (float& v : p[1]) v = 1.0f;
  }
  nn::Tensor forward(const nn::Tensor& x, const std::vector<std::span<const float>>& p) override {
    nn::Tensor y(x.shape());
    for (size_t i = 0; i < x.numel(); ++i) {
      const size_t f = i % size_t(features_);
      y[i] = p[0][f] * std::tanh(p[1][f] * x[i]);
    }
    return y;
  }
  nn::Tensor backward(const nn::Tensor& x, const nn::Tensor&, const nn::Tensor& dy,
                      const std::vector<std::span<const float>>& p, const std::vector<std::span<float>>& g) override {
    nn::Tensor dx(x.shape());
    for (size_t i = 0; i < x.numel(); ++i) {
      const size_t f = i % size_t(features_);
      const float t = std::tanh(p[1][f] * x[i]);
      const float dt = 1.0f - t * t;
      g[0][f] += t * dy[i];                      // dL/da
      g[1][f] += p[0][f] * x[i] * dt * dy[i];    // dL/db
      dx[i] = p[0][f] * p[1][f] * dt * dy[i];    // dL/dx
    }
    return dx;
  }

 private:
  int64_t features_;
};

int main(int argc, char** argv) {
  Context ctx = init(argc, argv);
  ScaledTanh probe(8);
  const nn::GradCheckResult check = nn::gradcheck(probe, {4, 8});
  if (ctx.rank() == 0) std::printf("%s\n", check.report().c_str());
  if (!check.passed) return 1;

  nn::Model model(nn::Sequential{{"fc", nn::Linear(8, 8)}, {"act", nn::Custom(std::make_shared<ScaledTanh>(8))},
                                 {"head", nn::Linear(8, 1)}},
                  {.seed = 7});
  DistributedDataParallel ddp(model, ctx);
  optim::Adam optimizer(ddp.parameters(), {.lr = 0.01f});
  const nn::Tensor x = nn::Tensor::randn({64, 8}, 1 + ctx.rank());
  nn::Tensor y({64, 1});
  for (int64_t i = 0; i < 64; ++i) y[size_t(i)] = std::sin(x[size_t(i * 8)]) + 0.5f * x[size_t(i * 8 + 1)];
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    optimizer.zero_grad();
    nn::Loss loss = nn::mse_loss(ddp.forward(x), y);
    ddp.backward(loss);
    optimizer.step();
    (step == 0 ? first : last) = loss.item();
  }
  if (ctx.rank() == 0) std::printf("loss %.4f -> %.4f; a[0] = %.4f\n", first, last, model.parameter("act.a")[0]);
  return last < first ? 0 : 1;
}
