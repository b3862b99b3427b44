// dpt::train_main: build/bin/train's whole program, for your model and your data.
//
//   int main(int argc, char** argv) {
//     dpt::TrainerSetup setup;
//     setup.model_name = "resmlp";
//     setup.model = [](uint64_t seed) { return dpt::nn::Model(my_net(), {.seed = seed}); };
//     setup.dataset = [](dpt::data::Split split) { return std::make_unique<MyData>(split); };
//     return dpt::train_main(argc, argv, setup);
//   }
//
// The program takes every flag of `build/bin/train --help` (docs/usage.md) and does what
// train does: dpt::init's launch detection and threads, DDP / ZeRO 1-3 / DiLoCo
// (--zero, --strategy diloco), checkpoints and --resume at any world size, --auto-resume,
// SIGTERM/SIGUSR1 stops with a checkpoint (--stop-on-signal), --elastic recovery under
// `launch --elastic`, --switch-backend STEP:NAME, evaluation, --metrics-out. build/bin/train
// itself is train_main with no model and no data of its own (--model and --dataset name
// them). Returns the exit code (0; 2 for a bad flag; 1 for a failure; 75 (EX_TEMPFAIL) stopped by a
// signal with a checkpoint written).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dpt/nn.h"

namespace dpt {
namespace data {

enum class Split { train, test };

// Your data: samples of one shape, each with a class label (classification) or a vector
// of float targets (regression: the model's loss is "mse"). get() is called from a
// loader thread while training runs: keep the data immutable after construction.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual size_t size() const = 0;
  virtual std::vector<int64_t> sample_shape() const = 0;
  // Classification: labels 0 .. num_classes() - 1. 0: regression with target_size() floats.
  virtual size_t num_classes() const = 0;
  virtual size_t target_size() const { return 0; }
  // Sample `index` into x (sample_shape()'s element count), and its label, or its
  // targets into `target` (target_size() floats; empty for classification).
  virtual void get(size_t index, std::span<float> x, int32_t& label, std::span<float> target) const = 0;
  virtual std::string name() const { return "dataset"; }
};

}  // namespace data

struct TrainerSetup {
  std::string program = "train";       // in --help and error messages
  std::string model_name = "model";    // in the logs and checkpoints' metadata
  // Your model, built on every rank with --model-seed (the same everywhere). Empty:
  // --model names one of the built-in models.
  std::function<nn::Model(uint64_t seed)> model;
  // Your data, the training split and the held-out one. Empty: --dataset names one.
  std::function<std::unique_ptr<data::Dataset>(data::Split)> dataset;
};

int train_main(int argc, char** argv, const TrainerSetup& setup = {});

}  // namespace dpt
