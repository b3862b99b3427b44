// resnet_torch_io: runs one of our models on inputs a Python script wrote, and writes
// what it computed, so the script can compare it with PyTorch (torch_ref/*.py).
//
//   resnet_torch_io --model resnet18|bn2d|bn1d --input IN.safetensors --out OUT.safetensors
//                   [--stem imagenet|cifar] [--seed S] [--lr LR]
//                   [--init-from FILE.safetensors] [--save-model FILE.safetensors]
//
// IN holds "x" [N, ...] and "labels" [N] (resnet18, I64) or "targets" (the probes, MSE),
// plus "steps_x" [K, N, ...] and "steps_labels"/"steps_targets" for K training steps.
// The sequence, which the script repeats in PyTorch:
//   1. --init-from: load_model (the same call train_local --init-from makes);
//      --save-model: save_model before anything runs.
//   2. eval forward on x                     -> "eval_out"
//   3. train forward on x, loss, backward    -> "train_out", "train_loss", "grad/<param>",
//                                               "buffer/<buffer>" (running stats after it)
//   4. K steps of plain SGD (p -= lr * grad) on the steps_* batches, in training mode
//                                            -> "final/<param or buffer>", "final_eval_out"
// The probes (bn2d: Conv2d 1x1 -> BatchNorm2d -> Flatten; bn1d: Linear -> BatchNorm1d)
// put a parameterised layer below BatchNorm so its input gradient shows in "grad/".
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "models/io/checkpoint.h"
#include "models/nn/layers/batch_norm.h"
#include "models/nn/layers/conv2d.h"
#include "models/nn/layers/linear.h"
#include "models/nn/layers/shape_layers.h"
#include "models/zoo/models.h"

using namespace dpt;

namespace {

ModelConfig seeded(uint64_t seed) {
  ModelConfig c;
  c.seed = seed;
  return c;
}

class BatchNormProbe : public Module {
 public:
  BatchNormProbe(bool two_d, int64_t channels, std::vector<int64_t> sample_shape, uint64_t seed)
      : Module(two_d ? "bn2d" : "bn1d", seeded(seed), std::move(sample_shape), false) {
    if (two_d) add_layer<Conv2d>(store_, "conv", channels, channels, 1);
    else add_layer<Linear>(store_, "fc", channels, channels);
    add_layer<BatchNorm>(store_, "bn", channels);
    add_layer<Flatten>("flatten");
    finalize(std::make_unique<MseLoss>());
  }
};

struct Args {
  std::string model, input, out, stem = "imagenet", init_from, save_model;
  uint64_t seed = 1234;
  float lr = 0.1f;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(k + " needs a value");
    const std::string v = argv[++i];
    if (k == "--model") a.model = v;
    else if (k == "--input") a.input = v;
    else if (k == "--out") a.out = v;
    else if (k == "--stem") a.stem = v;
    else if (k == "--seed") a.seed = std::stoull(v);
    else if (k == "--lr") a.lr = std::stof(v);
    else if (k == "--init-from") a.init_from = v;
    else if (k == "--save-model") a.save_model = v;
    else throw std::invalid_argument("unknown option " + k);
  }
  if (a.model.empty() || a.input.empty() || a.out.empty())
    throw std::invalid_argument("--model, --input and --out are required");
  return a;
}

const NamedTensor& need(const SafetensorsContents& f, const std::string& name, const std::string& path) {
  const NamedTensor* t = f.find(name);
  if (!t) throw std::invalid_argument(path + ": no tensor " + name);
  return *t;
}

// Owns the float copies the output file's views point at.
struct Output {
  std::vector<std::pair<std::string, std::vector<int64_t>>> meta;
  std::vector<std::vector<float>> data;
  void add(const std::string& name, std::vector<int64_t> shape, std::span<const float> v) {
    meta.emplace_back(name, std::move(shape));
    data.emplace_back(v.begin(), v.end());
  }
  void save(const std::string& path) const {
    std::vector<NamedTensorView> views;
    for (size_t i = 0; i < meta.size(); ++i) views.push_back({meta[i].first, meta[i].second, data[i]});
    save_safetensors(path, views);
  }
};

struct Feed {
  std::vector<float> x;
  std::vector<int32_t> labels;
  std::vector<float> targets;
  ModelInput in;
  ModelTarget target;
};

// Sample `k` of a stacked tensor ([K, N, ...]) or the whole tensor (k < 0).
Feed make_feed(const SafetensorsContents& f, const std::string& path, bool classifier, int64_t k) {
  const std::string prefix = k < 0 ? "" : "steps_";
  const NamedTensor& x = need(f, prefix + "x", path);
  const size_t skip = k < 0 ? 0 : 1;
  Feed feed;
  const size_t per_batch = x.data.size() / (k < 0 ? 1 : static_cast<size_t>(x.shape[0]));
  const size_t begin = k < 0 ? 0 : static_cast<size_t>(k) * per_batch;
  feed.x.assign(x.data.begin() + static_cast<long>(begin), x.data.begin() + static_cast<long>(begin + per_batch));
  feed.in.n = x.shape[skip];
  feed.in.sample_shape.assign(x.shape.begin() + static_cast<long>(skip) + 1, x.shape.end());
  feed.in.x = feed.x.data();
  if (classifier) {
    const NamedTensor& l = need(f, prefix + "labels", path);
    const size_t n = static_cast<size_t>(feed.in.n);
    const size_t first = k < 0 ? 0 : static_cast<size_t>(k) * n;
    for (size_t i = 0; i < n; ++i) feed.labels.push_back(static_cast<int32_t>(l.data[first + i]));
    feed.target.labels = feed.labels.data();
  } else {
    const NamedTensor& t = need(f, prefix + "targets", path);
    const size_t per = t.data.size() / (k < 0 ? 1 : static_cast<size_t>(t.shape[0]));
    const size_t b = k < 0 ? 0 : static_cast<size_t>(k) * per;
    feed.targets.assign(t.data.begin() + static_cast<long>(b), t.data.begin() + static_cast<long>(b + per));
    feed.target.values = feed.targets.data();
  }
  return feed;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args a = parse(argc, argv);
    const SafetensorsContents in = load_safetensors(a.input);
    const NamedTensor& x = need(in, "x", a.input);
    std::unique_ptr<Module> model;
    const bool classifier = a.model == "resnet18";
    if (classifier) {
      ModelConfig cfg;
      cfg.seed = a.seed;
      cfg.in_channels = x.shape.at(1);
      cfg.image_h = x.shape.at(2);
      cfg.image_w = x.shape.at(3);
      cfg.num_classes = 10;
      cfg.resnet_stem = a.stem;
      model = make_model("resnet18", cfg);
    } else if (a.model == "bn2d" || a.model == "bn1d") {
      model = std::make_unique<BatchNormProbe>(a.model == "bn2d", x.shape.at(1),
                                               std::vector<int64_t>(x.shape.begin() + 1, x.shape.end()), a.seed);
    } else {
      throw std::invalid_argument("unknown --model " + a.model);
    }
    if (!a.init_from.empty()) load_model(a.init_from, *model);
    if (!a.save_model.empty()) save_model(a.save_model, *model);
    Output out;
    Feed feed = make_feed(in, a.input, classifier, -1);
    const Tensor& ev = model->forward(feed.in, false);
    out.add("eval_out", ev.shape(), ev.span());
    model->zero_grad();
    const Tensor& tr = model->forward(feed.in, true);
    out.add("train_out", tr.shape(), tr.span());
    const float loss = model->loss(feed.target);
    model->backward();
    out.add("train_loss", {1}, std::span<const float>(&loss, 1));
    for (const auto& p : model->param_infos())
      out.add("grad/" + p.name, p.shape, model->flat_grads().subspan(p.offset, p.numel));
    for (const auto& b : model->buffer_infos())
      out.add("buffer/" + b.name, b.shape, model->flat_buffers().subspan(b.offset, b.numel));
    const int64_t steps = in.find("steps_x") ? need(in, "steps_x", a.input).shape.at(0) : 0;
    for (int64_t k = 0; k < steps; ++k) {
      Feed f = make_feed(in, a.input, classifier, k);
      model->zero_grad();
      model->train_step(f.in, f.target);
      auto p = model->flat_params();
      auto g = model->flat_grads();
      for (size_t i = 0; i < p.size(); ++i) p[i] -= a.lr * g[i];
    }
    for (const auto& p : model->param_infos())
      out.add("final/" + p.name, p.shape, model->flat_params().subspan(p.offset, p.numel));
    for (const auto& b : model->buffer_infos())
      out.add("final/" + b.name, b.shape, model->flat_buffers().subspan(b.offset, b.numel));
    const Tensor& fe = model->forward(feed.in, false);
    out.add("final_eval_out", fe.shape(), fe.span());
    out.save(a.out);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resnet_torch_io: %s\n", e.what());
    return 1;
  }
}
