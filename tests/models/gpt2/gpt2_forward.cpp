// gpt2_forward: the C++ side of tests/models/gpt2/hf_reference.py. Loads a Hugging Face style
// GPT-2 safetensors file into our gpt2, runs one forward, loss and backward on a given
// batch, and writes what it computed (logits, loss sum, target count, mean loss, every
// parameter's gradient as "grad.<name>") to an F32 safetensors file that the Python
// script compares with its own PyTorch computation. It judges nothing itself.
//   gpt2_forward --init-from F [--heads H] [--layers L --width D --vocab V --positions P]
//                --tokens T.i32 --labels L.i32 --batch B --seq T --out OUT [--export DIR]
//   gpt2_forward --decode F --out OUT      every tensor of F widened to F32, same names
// Token and label files are raw little-endian int32, B*T of each. Exit 1 with the error
// on stderr when the file is refused.
#include <boost/program_options.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "models/zoo/gpt2.h"
#include "models/io/gpt2_weights.h"
#include "models/zoo/models.h"
#include "models/io/safetensors_file.h"

namespace po = boost::program_options;
using namespace dpt;

namespace {

std::vector<int32_t> read_ints(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::vector<int32_t> v(n);
  if (!in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(int32_t))))
    throw std::runtime_error("cannot read " + std::to_string(n) + " int32 from " + path);
  return v;
}

int decode(const std::string& path, const std::string& out) {
  const SafetensorsFile file(path);
  std::vector<NamedTensor> tensors;
  for (const auto& e : file.index().entries) {
    NamedTensor t{e.name, e.shape, std::vector<float>(e.numel())};
    file.read(e, t.data);
    tensors.push_back(std::move(t));
  }
  std::vector<NamedTensorView> views;
  for (const auto& t : tensors) views.push_back({t.name, t.shape, t.data});
  save_safetensors(out, views);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string init_from, tokens_path, labels_path, out, export_dir, decode_path;
  int64_t batch = 0, seq = 0;
  float dropout = 0.0f;
  po::options_description desc("gpt2_forward");
  desc.add_options()("init-from", po::value(&init_from))("tokens", po::value(&tokens_path))(
      "labels", po::value(&labels_path))("batch", po::value(&batch))("seq", po::value(&seq))("out", po::value(&out))(
      "export", po::value(&export_dir))("decode", po::value(&decode_path))("dropout", po::value(&dropout))(
      "heads", po::value<int64_t>())("layers", po::value<int64_t>())("width", po::value<int64_t>())(
      "vocab", po::value<int64_t>())("positions", po::value<int64_t>());
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
    if (!decode_path.empty()) return decode(decode_path, out);
    auto opt = [&](const char* k) -> std::optional<int64_t> {
      return vm.count(k) ? std::optional<int64_t>(vm[k].as<int64_t>()) : std::nullopt;
    };
    Gpt2Request req;
    req.init_from = init_from;
    req.heads = opt("heads");
    req.layers = opt("layers");
    req.width = opt("width");
    req.vocab = opt("vocab");
    req.positions = opt("positions");
    ModelConfig cfg;
    cfg.seq_len = seq;
    cfg.dropout = dropout;
    configure_gpt2(req, cfg);
    auto model = make_model("gpt2", cfg);
    const size_t n = static_cast<size_t>(batch * seq);
    const std::vector<int32_t> tokens = read_ints(tokens_path, n), labels = read_ints(labels_path, n);
    ModelInput in;
    in.tokens = tokens.data();
    in.n = batch;
    in.sample_shape = {seq};
    ModelTarget target;
    target.labels = labels.data();
    model->zero_grad();
    const Tensor& logits = model->forward(in, true);
    const std::vector<float> logits_copy(logits.data(), logits.data() + logits.numel());
    const std::vector<int64_t> logits_shape = logits.shape();
    const float mean = model->loss(target);
    const LossSum sum = model->loss_fn().last();
    model->backward();
    const std::vector<float> loss_sum{static_cast<float>(sum.sum)}, count{static_cast<float>(sum.count)},
        loss_mean{mean};
    std::vector<NamedTensorView> views{{"logits", logits_shape, logits_copy},
                                       {"loss_sum", {1}, loss_sum},
                                       {"count", {1}, count},
                                       {"loss_mean", {1}, loss_mean}};
    std::vector<std::string> names;
    for (const auto& p : model->param_infos()) names.push_back("grad." + p.name);
    for (size_t i = 0; i < names.size(); ++i) {
      const auto& p = model->param_infos()[i];
      views.push_back({names[i], p.shape, model->flat_grads().subspan(p.offset, p.numel)});
    }
    save_safetensors(out, views);
    if (!export_dir.empty()) save_gpt2_pretrained(export_dir, model->param_infos(), model->flat_params(), cfg);
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "gpt2_forward: error: " << e.what() << "\n";
    return 1;
  }
}
