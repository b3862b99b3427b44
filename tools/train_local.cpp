// train_local: trains one model in one process and reports accuracy and speed.
//   build/bin/train_local --model mlp --epochs 10
//   build/bin/train_local --model cnn --epochs 5
//   build/bin/train_local --model gpt --steps 2000 --lr 2e-3 --lr-schedule cosine
//   build/bin/train_local --model gpt2 --gpt2-size 124M --batch-size 4 --steps 10
//   build/bin/train_local --model resnet18 --image-size 32 --augment crop-flip --optimizer sgd
//                         --lr 0.1 --momentum 0.9 --weight-decay 1e-5 --batch-size 128 --epochs 2
// Prints a config table, one line per epoch, then the figures the issue asks for:
// held-out accuracy or loss, samples/s, achieved GFLOP/s (model FLOPs x samples/s)
// next to OpenBLAS sgemm GFLOP/s on the model's own GEMM calls, and for language
// models the held-out loss per token (per byte, next to the bytes' unigram entropy, on
// byte-level text) and a generated sample (gpt: by default; gpt2: with --sample-len).
// --min-accuracy / --max-entropy-ratio / --min-gemm-ratio make the exit status 1 when a
// target is missed, so a test can run this program.
#include <boost/program_options.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

#include "data/tokenizer/tokenizer.h"
#include "models/kernels/cpu/gemm.h"
#include "models/kernels/cpu/gemm_choice.h"
#include "models/kernels/cpu/conv_engine.h"
#include "models/zoo/generate.h"
#include "api/cli/cli.h"
#include "api/cli/data_flags.h"
#include "api/cli/figures.h"
#include "api/cli/model_data_check.h"
#include "api/cli/model_flags.h"
#include "api/cli/optim_flags.h"
#include "api/cli/run_flags.h"
#include "train/cpu_threads_setup.h"
#include "train/local_trainer.h"

namespace po = boost::program_options;

namespace {

void row(const char* key, const std::string& value) { std::printf("| %-18s | %-36s |\n", key, value.c_str()); }

std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += (c == '\n' || c == '\t' || (c >= 32 && c < 127)) ? char(c) : '?';
  return out;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The sample at the end of a language model's run: bytes on byte-level text, GPT-2's BPE
// tokens (encoded and decoded with its tokenizer) on text-docs.
std::string sample_text(dpt::LocalTrainer& t, const std::string& prompt, int64_t n, float temperature, uint64_t seed) {
  const auto& c = t.config();
  if (c.dataset != "text-docs") return printable(t.generate(prompt, n, temperature, seed));
  dpt::tokenizer::Gpt2Tokenizer tok(c.tokenizer_dir.empty() ? dpt::tokenizer::default_tokenizer_dir() : c.tokenizer_dir);
  std::vector<int32_t> context = tok.encode(prompt);
  if (context.empty()) context.push_back(50256);  // <|endoftext|>
  return tok.decode(dpt::generate_tokens(t.model(), context, c.model_config.seq_len, n, temperature, seed));
}

}  // namespace

int main(int argc, char** argv) {
  dpt::LocalTrainConfig cfg;
  auto& mc = cfg.model_config;
  double min_accuracy = 0, max_entropy_ratio = 0, min_gemm_ratio = 0;
  int64_t sample_len = 0;  // set in the check: 300 for gpt, 0 (off) for gpt2 unless given
  float temperature = 0.8f;
  std::string prompt = "The ";
  dpt::tools::ModelFlags model_flags;
  dpt::tools::DataFlags data_flags;
  bool eval_only = false;
  std::string precision = "fp32";
  int threads = 0;
  cfg.lr_config.lr = 1e-3f;
  cfg.lr_config.total_steps = 0;
  dpt::tools::Cli cli("train_local", "train_local: single-process training of toy | mlp | cnn | gpt | gpt2 | resnet18");
  auto& flags = cli.flags();
  dpt::tools::add_model_options(flags, cfg.model, mc, model_flags);
  dpt::tools::add_data_options(flags, cfg.dataset, cfg.data_path, cfg.seed, data_flags);
  dpt::tools::add_optim_options(flags, cfg);
  dpt::tools::add_run_options(flags, cfg.epochs, cfg.max_steps, cfg.log_every, cfg.max_eval_samples);
  flags.add_options()
    ("total-steps", po::value(&cfg.lr_config.total_steps)->default_value(0), "cosine: length (0: --steps, else epochs x batches)")
    ("stride", po::value(&cfg.text_stride)->default_value(0), "--dataset text: training window spacing in tokens (bytes; 0: seq-len)")
    ("eval-only", po::bool_switch(&eval_only), "evaluate the held-out set (e.g. after --init-from) and exit")
    ("save", po::value(&cfg.save_path), "write the trained model to this .safetensors file")
    ("sample-len", po::value(&sample_len), "gpt, gpt2: tokens of the sample generated at the end (default: 300 bytes for gpt; none for gpt2, whose every token is a forward of the whole model: build/bin/generate samples a saved one)")
    ("temperature", po::value(&temperature)->default_value(0.8f), "gpt, gpt2: sampling temperature")
    ("prompt", po::value(&prompt)->default_value("The "), "gpt, gpt2: generation prompt")
    ("min-accuracy", po::value(&min_accuracy)->default_value(0), "exit 1 if final accuracy is below")
    ("max-entropy-ratio", po::value(&max_entropy_ratio)->default_value(0), "exit 1 if val loss / unigram entropy is above")
    ("min-gemm-ratio", po::value(&min_gemm_ratio)->default_value(0), "exit 1 if achieved / sgemm GFLOP/s is below")
    ("threads", po::value(&threads)->default_value(0), "compute threads (products, loops); 0: the cores this process may use, unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS says")
    ("precision", po::value(&precision)->default_value("fp32"), "fp32 | bf16: bf16 runs the matrix products and convolutions with bf16 operands and fp32 accumulation, fp32 master weights (as torch.autocast(\"cpu\", dtype=torch.bfloat16)), where the CPU has AMX-BF16 or AVX512-BF16; elsewhere they stay fp32 and a line says so");
  dpt::tools::add_model_aliases(cli);
  dpt::tools::add_data_aliases(cli);
  dpt::tools::add_optim_aliases(cli);
  dpt::tools::add_run_aliases(cli);
  const auto rc = cli.parse(argc, argv, [&](const po::variables_map& vm) {
    dpt::conv_setting();  // a bad DPT_CONV is refused first, before any data is looked for
    dpt::tools::apply_model_options(cfg.model, vm, model_flags, mc);
    // gpt2 reads Hugging Face's layout while the model is built; the others load a model
    // checkpoint into the built model (train/init_from.h).
    if (cfg.model != "gpt2") cfg.init_from = model_flags.gpt2.init_from;
    cfg.num_classes = model_flags.num_classes;
    // gpt2's own dataset, text-docs (GPT-2's tokenizer over the fortunes or --data-file),
    // named here so that the document flags see it.
    dpt::tools::check_dataset(cfg.dataset);
    if (cfg.model == "gpt2" && cfg.dataset.empty()) cfg.dataset = dpt::default_dataset(cfg.model);
    dpt::tools::apply_data_options(data_flags, cfg.seed, cfg.image, cfg.data_path, cfg.jsonl_field, cfg.tokenizer_dir);
    dpt::tools::apply_val_flags(data_flags.docs, vm, cfg.dataset, cfg.val_fraction, cfg.val_file);
    dpt::tools::apply_run_options(vm, cfg.dataset.empty() ? dpt::default_dataset(cfg.model) : cfg.dataset,
                                  cfg.max_eval_samples);
    dpt::tools::check_model_data(cfg.model, mc.vocab, cfg.dataset, cfg.data_path, data_flags.docs.data_file);
    if (!vm.count("sample-len")) sample_len = cfg.model == "gpt" ? 300 : 0;
    // gpt2 evaluates in batches of the training batch, as train does: 256 sequences of
    // GPT-2 124M at once (logits alone 256 x seq x 50257 floats) held 12 GiB here.
    if (cfg.model == "gpt2") cfg.eval_batch_size = cfg.batch_size;
    const std::string dataset = cfg.dataset.empty() ? dpt::default_dataset(cfg.model) : cfg.dataset;
    if (max_entropy_ratio > 0 && dataset != "text")
      throw std::invalid_argument("--max-entropy-ratio compares the loss per byte with the bytes' unigram entropy: it "
                                  "applies to --dataset text only, not '" + dataset + "'");
    if (sample_len < 0) throw std::invalid_argument("--sample-len must be >= 0, got " + std::to_string(sample_len));
    if (precision != "fp32" && precision != "bf16")
      throw std::invalid_argument("--precision: expected fp32 or bf16, got '" + precision + "'");
  });
  if (rc) return *rc;
  std::string threads_text;
  try {
    threads_text = dpt::setup_cpu_threads(argv, threads).text();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "train_local: error: %s\n", e.what());
    return 2;
  }
  cfg.on_log = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  try {
    dpt::LocalTrainer run_trainer(cfg);
    const auto& c = run_trainer.config();
    if (precision == "bf16") run_trainer.model().set_gemm_precision(dpt::GemmPrecision::bf16);
    std::printf("+--------------------+--------------------------------------+\n");
    row("model", c.model + " (" + std::to_string(run_trainer.model().num_params()) + " params)");
    row("dataset", run_trainer.train_set().name() + " (" + std::to_string(run_trainer.train_set().size()) +
                       " train, " + std::to_string(run_trainer.held_out_set().size()) + " held out)");
    row("optimizer", cfg.optimizer + " lr " + fmt("%g", cfg.lr_config.lr) + " " + cfg.lr_schedule +
                         (cfg.lr_schedule == "cosine" ? " over " + std::to_string(c.lr_config.total_steps) : ""));
    row("batch size", std::to_string(cfg.batch_size));
    row("epochs / max steps", std::to_string(cfg.epochs) + " / " + std::to_string(cfg.max_steps));
    if (c.model == "gpt" || c.model == "gpt2")
      row(c.model.c_str(), "T=" + std::to_string(mc.seq_len) + " d=" + std::to_string(mc.d_model) + " L=" +
                               std::to_string(mc.n_layer) + " H=" + std::to_string(mc.n_head) + " V=" +
                               std::to_string(mc.vocab) + " p=" + std::to_string(mc.dropout).substr(0, 4));
    const auto& cm = c.model_config;  // adapted to the data (channels, image size)
    if (c.model == "resnet18")
      row("resnet18", "stem " + cm.resnet_stem + ", input " + std::to_string(cm.in_channels) + "x" +
                          std::to_string(cm.image_h) + "x" + std::to_string(cm.image_w));
    if (!cfg.init_from.empty()) row("init from", cfg.init_from);
    row("augmentation", dpt::augment_name(cfg.image.augment));
    row("precision", precision);
    row("threads", threads_text);
    std::printf("+--------------------+--------------------------------------+\n");
    if (precision == "bf16") {
      std::printf("--precision bf16: %s\n", dpt::bf16_gemm_description().c_str());
      if (const std::string note = dpt::bf16_speed_note(); !note.empty()) std::printf("--precision bf16: %s\n", note.c_str());
    }
    if (c.model == "resnet18" || c.model == "cnn") std::printf("%s\n", dpt::conv_engine_description().c_str());
    std::fflush(stdout);
    if (eval_only) {
      const dpt::EvalResult ev = run_trainer.evaluate_held_out();
      const std::string covered = dpt::tools::eval_coverage(ev.samples, run_trainer.held_out_set().size(), c.dataset);
      if (ev.accuracy) std::printf("eval-only: held-out loss %.6f accuracy %.4f (%s)\n", ev.loss, *ev.accuracy, covered.c_str());
      else std::printf("eval-only: held-out loss %.6f (%s)\n", ev.loss, covered.c_str());
      return 0;
    }

    dpt::LocalTrainResult r = run_trainer.run();
    if (r.epochs.empty()) throw std::runtime_error("no training step ran");
    const auto& last = r.epochs.back();
    const double ratio = r.sgemm_gflops > 0 ? r.achieved_gflops / r.sgemm_gflops : 0;
    std::printf("\nresults\n");
    std::printf("  model FLOPs per sample  : %.3f MFLOP (GEMMs of forward + backward)\n", r.flops_per_sample / 1e6);
    // A language model's samples are seq-len token positions each (text-docs: padding included).
    const std::string tokens = !run_trainer.model().takes_tokens() ? ""
        : " (" + dpt::tools::rate(r.samples_per_s * double(c.model_config.seq_len)) + " token positions/s" +
              (c.dataset == "text-docs" ? ", padding included)" : ")");
    std::printf("  training throughput     : %s samples/s%s\n", dpt::tools::rate(r.samples_per_s).c_str(), tokens.c_str());
    std::printf("  achieved                : %.2f GFLOP/s\n", r.achieved_gflops);
    std::printf("  sgemm, same shapes      : %.2f GFLOP/s (%s)\n", r.sgemm_gflops, dpt::gemm_engine_description().c_str());
    std::printf("  ratio                   : %.1f%%\n", 100 * ratio);
    bool ok = true;
    const std::string covered = dpt::tools::eval_coverage(last.eval.samples, run_trainer.held_out_set().size(), c.dataset);
    if (last.eval.accuracy) {
      std::printf("  test accuracy           : %.4f (%s)\n", *last.eval.accuracy, covered.c_str());
      if (min_accuracy > 0 && !(*last.eval.accuracy >= min_accuracy)) {
        std::printf("  FAIL: accuracy below %.4f\n", min_accuracy);
        ok = false;
      }
    } else if (c.dataset == "text-docs") {  // GPT-2's BPE tokens
      std::printf("  held-out loss           : %.4f nats/token (perplexity %.4g; %s)\n", last.eval.loss,
                  std::exp(last.eval.loss), covered.c_str());
    } else if (r.unigram_entropy > 0) {  // byte-level text: the loss is per byte, comparable to the bytes' entropy
      const double er = last.eval.loss / r.unigram_entropy;
      std::printf("  held-out loss           : %.4f nats/byte (%.3f bits/byte; %s)\n", last.eval.loss,
                  last.eval.loss / std::log(2.0), covered.c_str());
      std::printf("  unigram entropy         : %.4f nats/byte (of the held-out bytes' frequencies)\n", r.unigram_entropy);
      std::printf("  loss / unigram entropy  : %.1f%%%s\n", 100 * er,
                  max_entropy_ratio > 0 ? (" (target < " + fmt("%g", 100 * max_entropy_ratio) + "%)").c_str() : "");
      if (max_entropy_ratio > 0 && !(er < max_entropy_ratio)) {
        std::printf("  FAIL: loss / entropy above %.2f\n", max_entropy_ratio);
        ok = false;
      }
    } else {
      std::printf("  held-out loss           : %.4f (%s%s)\n", last.eval.loss,
                  c.dataset == "synthetic-regression" ? "mean squared error; " : "", covered.c_str());
    }
    if (sample_len > 0 && run_trainer.model().takes_tokens()) {
      const std::string text = sample_text(run_trainer, prompt, sample_len, temperature, cfg.seed + 1);
      std::printf("\nsample (%lld %s, temperature %.2f):\n%s\n", (long long)sample_len,
                  c.dataset == "text-docs" ? "tokens" : "bytes", temperature, text.c_str());
    }
    if (min_gemm_ratio > 0 && !(ratio >= min_gemm_ratio)) {
      std::printf("  FAIL: GEMM efficiency below %.0f%%\n", 100 * min_gemm_ratio);
      ok = false;
    }
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "train_local: error: " << e.what() << std::endl;
    return 1;
  }
}
