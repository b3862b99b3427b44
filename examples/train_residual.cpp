// A model and data of your own, trained by build/bin/train's whole program
// (docs/library.md): every train flag works, --zero, --strategy diloco, checkpoints and
// --resume at any world size, --auto-resume, --stop-on-signal, --elastic, --switch-backend.
//   mpirun -np 2 build/bin/train_residual --steps 40 --checkpoint-dir /tmp/run
#include <dpt/trainer.h>

#include <cstdint>
#include <memory>

using namespace dpt;

// Residual blocks with BatchNorm: not a model of the zoo.
nn::Model residual_mlp(uint64_t seed) {
  auto block = [](int64_t w) {
    return nn::Sequential{{"fc1", nn::Linear(w, w)}, {"bn", nn::BatchNorm1d(w)}, {"relu", nn::ReLU()},
                          {"fc2", nn::Linear(w, w)}};
  };
  nn::Sequential net;
  net.add("stem", nn::Linear(16, 32));
  net.add("block1", nn::Residual(block(32)));
  net.add("relu1", nn::ReLU());
  net.add("block2", nn::Residual(block(32)));
  net.add("relu2", nn::ReLU());
  net.add("head", nn::Linear(32, 4));
  return nn::Model(net, {.seed = seed, .name = "residual_mlp", .loss = "cross_entropy"});
}

// Four classes by the signs of two projections of 16 features; sample i is generated
// from i alone, so every rank and every run sees the same data.
class Quadrants : public data::Dataset {
 public:
  explicit Quadrants(data::Split split) : split_(split) {}
  size_t size() const override { return split_ == data::Split::train ? 4096 : 512; }
  std::vector<int64_t> sample_shape() const override { return {16}; }
  size_t num_classes() const override { return 4; }
  void get(size_t index, std::span<float> x, int32_t& label, std::span<float>) const override {
    const nn::Tensor v = nn::Tensor::randn({16}, index * 2 + (split_ == data::Split::test));
    std::copy(v.data(), v.data() + 16, x.begin());
    label = int32_t((x[0] + x[3] > 0) * 2 + (x[5] - x[9] > 0));
  }
  std::string name() const override { return "quadrants"; }

 private:
  data::Split split_;
};

int main(int argc, char** argv) {
  TrainerSetup setup;
  setup.program = "train_residual";
  setup.model_name = "residual_mlp";
  setup.model = residual_mlp;
  setup.dataset = [](data::Split split) { return std::make_unique<Quadrants>(split); };
  return train_main(argc, argv, setup);
}
