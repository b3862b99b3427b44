// train: data-parallel training, one process per rank.
//   build/bin/launch -n 2 build/bin/train                    (tcp, Fashion-MNIST MLP)
//   mpirun -np 4 build/bin/train --model mlp --backend mpi
// Rank 0 prints a boxed configuration, one line per logged step, and a final line
// `final: key=value ...`. See --help for every flag.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "backends/registry.h"
#include "models/checkpoint.h"
#include "tools/doc_flags.h"
#include "tools/gpt2_flags.h"
#include "tools/image_flags.h"
#include "tools/train/elastic_setup.h"
#include "train/dist_trainer.h"

namespace po = boost::program_options;
using dpt::DistTrainConfig;

namespace {

struct Cli {
  DistTrainConfig cfg;
  int64_t switch_at = -1;
  std::string switch_to;
  std::string backend, algo, switch_backend, metrics_out, grad_compress, device, config_file, overlap_comm, precision;
  std::string device_buckets = "auto";
  int zero = 0;
  double bucket_mb = 25, first_bucket_mb = 1;
  bool no_overlap = false, no_shuffle = false, elastic = false;
  float lr = 1e-3f;
  std::string uneven, debug_signal;
  dpt::tools::Gpt2Flags gpt2;
  dpt::tools::ImageFlags image;
  dpt::tools::DocFlags docs;
  bool no_broadcast_buffers = false;
  std::string inject_inf;
};

void add_options(po::options_description& d, Cli& c) {
  auto& m = c.cfg.model_config;
  auto& o = c.cfg.optimizer_config;
  d.add_options()
    ("help,h", "show this help")
    ("config", po::value(&c.config_file), "read these options from a file (key = value lines)")
    ("model", po::value(&c.cfg.model)->default_value("mlp"), "toy | mlp | cnn | gpt | gpt2 | resnet18")
    ("dataset", po::value(&c.cfg.dataset)->default_value(""), "fashion-mnist | cifar10 | text | synthetic (default by model)")
    ("data-dir", po::value(&c.cfg.data_dir)->default_value(""), "dataset directory or file (default: the Debian package's path)")
    ("backend", po::value(&c.backend)->default_value(dpt::backends::default_name()), "mpi | tcp | nccl | auto")
    ("algo", po::value(&c.algo)->default_value("auto"), dpt::algo::help_text().c_str())
    ("zero", po::value(&c.zero)->default_value(0), "ZeRO stage: 0 (DDP), 1 (optimizer state sharded), 2 (and gradients), 3 (and parameters)")
    ("overlap-comm", po::value(&c.overlap_comm)->default_value("on"), "on | off: gradient communication overlapped with backward (off = --no-overlap)")
    ("device", po::value(&c.device)->default_value("cpu"), "cpu or cuda: where the model computes (cuda: GPU LOCAL_RANK mod count; toy, mlp and gpt)")
    ("device-buckets", po::value(&c.device_buckets)->default_value("auto"), "auto | always: with --device cuda, reduce gradient buckets as device buffers only where the backend takes them (nccl, CUDA-aware MPI), else download each gradient once and reduce on the host; always = device buckets everywhere (staged; for measurements)")
    ("epochs", po::value(&c.cfg.epochs)->default_value(3), "epochs")
    ("steps", po::value(&c.cfg.steps)->default_value(0), "stop after this many steps (0: run the epochs)")
    ("batch-size", po::value(&c.cfg.batch_size)->default_value(32), "samples per rank per micro-step")
    ("lr", po::value(&c.lr)->default_value(1e-3f), "learning rate (peak, with schedules)")
    ("lr-schedule", po::value(&c.cfg.lr_schedule)->default_value("cosine"), "constant | step | cosine")
    ("warmup-steps", po::value(&c.cfg.lr_config.warmup_steps)->default_value(0), "cosine warm-up steps")
    ("optimizer", po::value(&c.cfg.optimizer)->default_value("adam"), "sgd | adam | adamw")
    ("momentum", po::value(&o.momentum)->default_value(0.9f), "SGD momentum")
    ("nesterov", po::bool_switch(&o.nesterov), "SGD Nesterov momentum")
    ("weight-decay", po::value(&o.weight_decay)->default_value(0.0f), "weight decay")
    ("clip-norm", po::value(&c.cfg.clip_norm)->default_value(0.0f), "clip the global gradient norm (0: off)")
    ("seed", po::value(&c.cfg.seed)->default_value(0), "data order seed")
    ("model-seed", po::value(&m.seed)->default_value(1234), "parameter initialization seed")
    ("shuffle", "shuffle the data each epoch (default)")
    ("no-shuffle", po::bool_switch(&c.no_shuffle), "keep the data in order")
    ("bucket-mb", po::value(&c.bucket_mb)->default_value(25.0), "DDP bucket size in MiB")
    ("first-bucket-mb", po::value(&c.first_bucket_mb)->default_value(1.0), "size of the first (small) bucket in MiB")
    ("no-overlap", po::bool_switch(&c.no_overlap), "allreduce only after backward ends")
    ("grad-accum", po::value(&c.cfg.grad_accum)->default_value(1), "micro-steps per optimizer step")
    ("grad-compress", po::value(&c.grad_compress)->default_value("none"), "none | bf16 | fp16 gradients on the wire")
    ("precision", po::value(&c.precision)->default_value("fp32"), "fp32 | bf16 | fp16: 16-bit working weights and gradients (on the wire too) with fp32 master weights; fp16 also computes activations and gradients in fp16 (emulated on the CPU) with a dynamic loss scaler")
    ("loss-scale-init", po::value(&c.cfg.loss_scaler.init_scale)->default_value(65536.0f), "fp16: initial loss scale (GradScaler's init_scale)")
    ("loss-scale-window", po::value(&c.cfg.loss_scaler.growth_interval)->default_value(2000), "fp16: clean steps before the loss scale doubles (GradScaler's growth_interval); an inf/NaN gradient halves it and skips the step")
    ("count-zero-grads", po::bool_switch(&c.cfg.count_zero_grads), "measure the fraction of synchronized gradient elements that are exactly 0 (final line: zero_grad_frac); fp16 without loss scaling against fp32 shows the underflow")
    ("debug-inject-inf", po::value(&c.inject_inf)->default_value(""), "testing: R:K sets one of rank R's synchronized gradients to inf in step K")
    ("checkpoint-dir", po::value(&c.cfg.checkpoint_dir)->default_value(""), "save checkpoints here")
    ("save-every", po::value(&c.cfg.save_every)->default_value(0), "steps between checkpoints")
    ("resume", po::bool_switch(&c.cfg.resume), "continue from --checkpoint-dir's latest checkpoint")
    ("eval-every", po::value(&c.cfg.eval_every)->default_value(0), "steps between evaluations (0: each epoch)")
    ("max-eval-samples", po::value(&c.cfg.max_eval_samples)->default_value(0), "evaluate on at most this many samples")
    ("eval-batch-size", po::value(&c.cfg.eval_batch_size)->default_value(0), "samples per evaluation forward (0: 256, for gpt2 the per-rank --batch-size)")
    ("log-every", po::value(&c.cfg.log_every)->default_value(50), "steps between log lines")
    ("metrics-out", po::value(&c.metrics_out)->default_value(""), "write JSON lines of metrics here (rank 0)")
    ("switch-backend", po::value(&c.switch_backend)->default_value(""), "STEP:NAME switch to backend NAME once STEP steps are done")
    ("elastic-snapshot-every", po::value(&c.cfg.elastic_snapshot_every)->default_value(10), "elastic ZeRO: steps between in-memory copies of every shard on its ring neighbour (the steps a failure may cost)")
    ("elastic", po::bool_switch(&c.elastic), "survive dead ranks: the others re-form a smaller group and go on; newcomers join at a step boundary (tcp backend, under launch --elastic; docs/elastic.md)")
    ("debug-collectives", po::bool_switch()->notifier([](bool on) { if (on) ::setenv("COMM_DEBUG_COLLECTIVES", "1", 1); }), "check before each collective that all ranks issue the same one (COMM_DEBUG_COLLECTIVES=1)")
    ("ignore-memory-check", po::bool_switch()->notifier([&c](bool on) { c.cfg.memory_check = !on; }), "start even when the model states and activations estimated per host exceed its available memory (docs/gpt2.md)")
    ("exit-after-step", po::value(&c.cfg.exit_after_step)->default_value(0), "testing: die abruptly after this step")
    ("debug-uneven", po::value(&c.uneven)->default_value(""), "testing: R:K gives rank R only K batches per epoch")
    ("debug-signal", po::value(&c.debug_signal)->default_value(""), "testing: R:S:PHASE[:STOP][,...] sends SIGKILL (or SIGSTOP) to the process that started as rank R, inside step S at forward, backward, sync or update")
    ("debug-sample-log", po::value(&c.cfg.sample_log)->default_value(""), "testing: append 'step world rank index...' for every completed step to PREFIX.<elastic id or rankN>")
    ("gpt-layers", po::value(&m.n_layer)->default_value(4), "GPT blocks")
    ("gpt-dim", po::value(&m.d_model)->default_value(128), "GPT model width")
    ("gpt-heads", po::value(&m.n_head)->default_value(4), "GPT attention heads")
    ("seq-len", po::value(&m.seq_len)->default_value(64), "GPT context length (bytes)")
    ("cnn-c1", po::value(&m.cnn_c1)->default_value(16), "CNN first conv channels")
    ("cnn-c2", po::value(&m.cnn_c2)->default_value(32), "CNN second conv channels")
    ("resnet-stem", po::value(&m.resnet_stem)->default_value("imagenet"), "resnet18: imagenet (torchvision's 7x7/2 conv + max-pool) or cifar (3x3/1 conv, no max-pool)");
  d.add_options()
    ("no-broadcast-buffers", po::bool_switch(&c.no_broadcast_buffers), "BatchNorm buffers: do not broadcast rank 0's running statistics before each step's first forward (PyTorch DDP's broadcast_buffers=False); each rank keeps its own")
    ("sync-bn", po::bool_switch(&c.cfg.sync_bn), "every BatchNorm is a SyncBatchNorm: batch statistics over all ranks' samples (one allgather per BatchNorm in forward, one allreduce in backward)")
    ("debug-state-dump", po::value(&c.cfg.state_dump)->default_value(""), "testing: at the end every rank writes its parameters and buffers to PREFIX.rank<r>.safetensors");
  dpt::tools::add_gpt2_options(d, c.gpt2);
  dpt::tools::add_image_options(d, c.image);
  dpt::tools::add_doc_options(d, c.docs);
}

std::string box(const std::vector<std::pair<std::string, std::string>>& rows) {
  size_t kw = 0, vw = 0;
  for (auto& [k, v] : rows) kw = std::max(kw, k.size()), vw = std::max(vw, v.size());
  std::string line = "+" + std::string(kw + 2, '-') + "+" + std::string(vw + 2, '-') + "+\n";
  std::string out = line;
  for (auto& [k, v] : rows)
    out += "| " + k + std::string(kw - k.size(), ' ') + " | " + v + std::string(vw - v.size(), ' ') + " |\n";
  return out + line;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// A whole-string integer, or an error naming the flag, the value and what is expected.
int64_t parse_int(const std::string& text, const std::string& flag, const std::string& what) {
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && !text.empty()) return v;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(flag + ": '" + text + "' is not " + what);
}

// STEP:NAME, checked against the backends this binary knows (before any rendezvous).
// " sent_bytes_tcp=S recv_bytes_tcp=R ..." for the final line: payload each backend
// carried over the run (a backend used twice is summed).
std::string traffic_fields(const std::vector<dpt::BackendTraffic>& traffic) {
  std::vector<std::pair<std::string, dpt::Traffic>> by_name;
  for (const auto& t : traffic) {
    auto it = std::find_if(by_name.begin(), by_name.end(), [&](const auto& p) { return p.first == t.backend; });
    if (it == by_name.end()) it = by_name.insert(by_name.end(), {t.backend, {}});
    it->second.bytes_sent += t.carried.bytes_sent;
    it->second.bytes_received += t.carried.bytes_received;
  }
  std::string out;
  for (const auto& [name, t] : by_name)
    out += " sent_bytes_" + name + "=" + std::to_string(t.bytes_sent) + " recv_bytes_" + name + "=" + std::to_string(t.bytes_received);
  return out;
}

void parse_switch(Cli& c) {
  const auto colon = c.switch_backend.find(':');
  if (colon == std::string::npos)
    throw std::invalid_argument("--switch-backend wants STEP:NAME (e.g. 500:mpi), got '" + c.switch_backend + "'");
  c.switch_at = parse_int(c.switch_backend.substr(0, colon), "--switch-backend", "a step number (STEP:NAME, e.g. 500:mpi)");
  if (c.switch_at < 0) throw std::invalid_argument("--switch-backend: the step must be >= 0, got " + std::to_string(c.switch_at));
  c.switch_to = c.switch_backend.substr(colon + 1);
  const auto& known = dpt::backends::known();
  if (std::find(known.begin(), known.end(), c.switch_to) == known.end()) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw std::invalid_argument("--switch-backend: unknown backend '" + c.switch_to + "' (valid: " + list + ")");
  }
}

// The checkpoint folder must be creatable and writable now, not at the first save.
void check_writable_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw std::invalid_argument("--checkpoint-dir '" + dir + "' exists and is not a directory");
  fs::create_directories(dir, ec);
  if (ec) throw std::invalid_argument("--checkpoint-dir '" + dir + "': cannot create it: " + ec.message());
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw std::invalid_argument("--checkpoint-dir '" + dir + "' is not writable: " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  Cli c;
  po::options_description desc("train: data-parallel training (DDP) over mpi or tcp");
  add_options(desc, c);
  try {
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    if (vm.count("config")) {
      std::ifstream f(vm["config"].as<std::string>());
      if (!f) throw std::runtime_error("--config: cannot open '" + vm["config"].as<std::string>() + "'");
      po::store(po::parse_config_file(f, desc), vm);
    }
    po::notify(vm);
    dpt::tools::apply_model_flags(c.cfg.model, vm, c.gpt2, "gpt-layers", "gpt-heads", "gpt-dim", c.cfg.model_config);
    // The byte-level corpus until a tokenized one is chosen: bytes are valid GPT-2 ids.
    if (c.cfg.model == "gpt2" && c.cfg.dataset.empty()) c.cfg.dataset = "text";
    if (c.zero < 0 || c.zero > 3) throw std::invalid_argument("--zero " + std::to_string(c.zero) + ": valid stages are 0, 1, 2, 3");
    if (c.overlap_comm != "on" && c.overlap_comm != "off") throw std::invalid_argument("--overlap-comm '" + c.overlap_comm + "': valid are on, off");
    if (c.precision == "fp32") c.cfg.parallel.precision = dpt::DType::f32;
    else if (c.precision == "bf16") c.cfg.parallel.precision = dpt::DType::bf16;
    else if (c.precision == "fp16") c.cfg.parallel.precision = dpt::DType::f16;
    else throw std::invalid_argument("--precision '" + c.precision + "': valid are fp32, bf16, fp16");
    // Mixed precision sends its 16-bit gradients: that compression is implied, the other conflicts.
    if (c.precision != "fp32") {
      const std::string other = c.precision == "bf16" ? "fp16" : "bf16";
      if (c.grad_compress == other)
        throw std::invalid_argument("--precision " + c.precision + " communicates gradients in " + c.precision +
                                    "; --grad-compress " + other + " conflicts with it");
      c.grad_compress = c.precision;
    }
    if (c.precision == "fp16" && c.elastic)
      throw std::invalid_argument("--precision fp16 and --elastic cannot be combined (the loss scaler's state does not travel to a re-formed group)");
    if (!c.inject_inf.empty()) {
      auto colon = c.inject_inf.find(':');
      if (colon == std::string::npos) throw std::invalid_argument("--debug-inject-inf wants R:K (rank:step), got '" + c.inject_inf + "'");
      c.cfg.inject_inf_rank = int(parse_int(c.inject_inf.substr(0, colon), "--debug-inject-inf", "a rank (R:K, e.g. 1:5)"));
      c.cfg.inject_inf_step = parse_int(c.inject_inf.substr(colon + 1), "--debug-inject-inf", "a step (R:K, e.g. 1:5)");
    }
    if (c.precision == "fp16") (void)dpt::LossScaler(c.cfg.loss_scaler);  // refuses bad --loss-scale-* values now
    c.cfg.parallel.zero_stage = c.zero;
    if (c.overlap_comm == "off") c.no_overlap = true;
    if (c.device != "cpu" && c.device != "cuda") throw std::invalid_argument("--device '" + c.device + "': valid are cpu, cuda");
    c.cfg.device = c.device;
    c.cfg.shuffle = !c.no_shuffle;
    c.cfg.image = dpt::tools::image_options(c.image, c.cfg.seed);
    dpt::tools::apply_doc_flags(c.docs, c.cfg.data_dir, c.cfg.jsonl_field, "--data-dir");
    c.cfg.broadcast_buffers = !c.no_broadcast_buffers;
    c.cfg.lr_config.lr = c.lr;
    if (!(c.bucket_mb > 0) || c.bucket_mb > 1 << 20)
      throw std::invalid_argument("--bucket-mb " + fmt("%g", c.bucket_mb) + ": must be a size in MiB, > 0");
    if (!(c.first_bucket_mb > 0) || c.first_bucket_mb > 1 << 20)
      throw std::invalid_argument("--first-bucket-mb " + fmt("%g", c.first_bucket_mb) + ": must be a size in MiB, > 0");
    auto& ddp = c.cfg.parallel.ddp;
    ddp.bucket_bytes = std::max<size_t>(sizeof(float), size_t(c.bucket_mb * (1 << 20)));
    ddp.first_bucket_bytes = std::max<size_t>(sizeof(float), size_t(c.first_bucket_mb * (1 << 20)));
    ddp.overlap = !c.no_overlap;
    if (c.device_buckets != "auto" && c.device_buckets != "always")
      throw std::invalid_argument("--device-buckets '" + c.device_buckets + "': valid are auto, always");
    ddp.force_device_buckets = c.device_buckets == "always";
    if (c.grad_compress == "none") ddp.wire = dpt::DType::f32;
    else if (c.grad_compress == "bf16") ddp.wire = dpt::DType::bf16;
    else if (c.grad_compress == "fp16") ddp.wire = dpt::DType::f16;
    else throw std::invalid_argument("--grad-compress '" + c.grad_compress + "': valid are none, bf16, fp16");
    if (!c.uneven.empty()) {
      auto colon = c.uneven.find(':');
      if (colon == std::string::npos) throw std::invalid_argument("--debug-uneven wants R:K (rank:batches), got '" + c.uneven + "'");
      c.cfg.uneven_rank = int(parse_int(c.uneven.substr(0, colon), "--debug-uneven", "a rank (R:K, e.g. 1:7)"));
      c.cfg.uneven_batches = parse_int(c.uneven.substr(colon + 1), "--debug-uneven", "a batch count (R:K, e.g. 1:7)");
      if (c.cfg.uneven_rank < 0 || c.cfg.uneven_batches < 0)
        throw std::invalid_argument("--debug-uneven " + c.uneven + ": rank and batches must be >= 0");
    }
    if (!c.switch_backend.empty()) parse_switch(c);
    if (c.elastic) {
      const std::string b = c.backend == "auto" ? dpt::backends::resolve("auto") : c.backend;
      if (b != "tcp")
        throw std::invalid_argument("--elastic needs --backend tcp: the " + b +
                                    " backend cannot shrink a world (MPI has no way to drop a dead process and go on)");
      if (!c.switch_backend.empty()) throw std::invalid_argument("--elastic and --switch-backend cannot be combined");
      if (c.cfg.elastic_snapshot_every < 1)
        throw std::invalid_argument("--elastic-snapshot-every must be at least 1, got " + std::to_string(c.cfg.elastic_snapshot_every));
    }
    if (c.cfg.resume && c.cfg.checkpoint_dir.empty()) throw std::invalid_argument("--resume needs --checkpoint-dir");
    if (!c.cfg.checkpoint_dir.empty()) check_writable_dir(c.cfg.checkpoint_dir);
    dpt::parse_algo(c.algo);
  } catch (const std::exception& e) {
    std::cerr << "train: " << e.what() << "\n(see train --help)\n";
    return 2;
  }

  std::unique_ptr<dpt::Communicator> comm;
  std::optional<train::ElasticSetup> elastic;
  try {
    dpt::CommOptions opts = dpt::CommOptions::from_env();
    opts.algo = dpt::parse_algo(c.algo);
    if (c.elastic) {
      elastic = train::elastic_setup(opts);
      if (!elastic) {
        std::printf("elastic: the job finished before this process could join\n");
        return 0;
      }
      comm = elastic->make_comm(elastic->membership);
      c.cfg.elastic_join = elastic->joining;
      c.cfg.elastic = true;
    } else {
      comm = dpt::backends::create(c.backend, opts);
    }
    const int rank = comm->rank(), world = comm->size();
    // One file per process: the prefix plus its elastic id, or its rank.
    if (!c.cfg.sample_log.empty())
      c.cfg.sample_log += "." + (elastic ? elastic->rendezvous->id() : "rank" + std::to_string(rank));
    dpt::DistTrainer trainer(c.cfg, *comm);
    if (elastic) trainer.enable_elastic({elastic->rendezvous.get(), elastic->membership, elastic->make_comm});
    if (c.switch_at >= 0)
      trainer.schedule_switch(c.switch_at, [name = c.switch_to, opts] { return dpt::backends::create(name, opts); });
    const size_t params = trainer.model().num_params();
    if (rank == 0) {
      std::cout << box({{"model", c.cfg.model + " (" + std::to_string(params) + " parameters, " + fmt("%.2f", params * 4.0 / (1 << 20)) + " MiB)"},
                        {"dataset", trainer.train_set().name() + " (" + std::to_string(trainer.train_set().size()) + " samples)"},
                        {"input", dpt::tools::shape_text(trainer.model().sample_shape()) + ", augmentation " + dpt::augment_name(c.cfg.image.augment)},
                        {"BatchNorm", trainer.model().flat_buffers().empty() ? "none" : std::to_string(trainer.model().flat_buffers().size()) + " buffer values, " + (c.cfg.broadcast_buffers ? "broadcast from rank 0 each step" : "per rank (not broadcast)") + (c.cfg.sync_bn ? ", SyncBatchNorm" : "")},
                        {"world size", std::to_string(world)},
                        {"device", c.device == "cuda" ? "cuda (model on the GPU; optimizer and gradient exchange on host buffers)" : "cpu"},
                        {"backend", comm->backend_name() + (c.switch_backend.empty() ? "" : " (switch at " + c.switch_backend + ")")},
                        {"algorithm", c.algo},
                        {"per-rank batch", std::to_string(c.cfg.batch_size) + " x " + std::to_string(c.cfg.grad_accum) + " accum"},
                        {"global batch", std::to_string(c.cfg.batch_size * c.cfg.grad_accum * world)},
                        {"optimizer", c.cfg.optimizer + " lr " + fmt("%g", c.lr) + " (" + c.cfg.lr_schedule + ")"},
                        {"precision", c.precision == "fp32" ? "fp32" : c.precision + " working weights and gradients, fp32 master weights" + (c.precision == "fp16" ? ", fp16 activations, loss scale " + fmt("%g", c.cfg.loss_scaler.init_scale) + " (window " + std::to_string(c.cfg.loss_scaler.growth_interval) + ")" : "")},
                        {"ZeRO stage", std::to_string(c.zero) + (c.zero ? " (" + trainer.strategy().name() + ", shard " + std::to_string((params + world - 1) / world) + " elements per rank)" : " (DDP)")},
                        {c.zero >= 2 ? "ZeRO-2/3 buckets" : "DDP buckets", std::to_string(trainer.num_buckets()) + " (" + fmt("%g", c.bucket_mb) + " MiB, overlap " + (c.no_overlap ? "off" : "on") + ", wire " + c.grad_compress + ")"},
                        {"epochs / steps", std::to_string(c.cfg.epochs) + " / " + (c.cfg.steps ? std::to_string(c.cfg.steps) : "all")}});
      std::cout << dpt::memory_table(trainer.memory_bytes(), "start");
      std::cout.flush();
    }
    // Rank 0 of the current group prints and writes the metrics (in an elastic job the
    // process that is rank 0 may change: a new one appends to the same file).
    auto leader = [&] { return trainer.communicator().rank() == 0; };
    std::ofstream metrics;
    auto open_metrics = [&] {
      if (metrics.is_open() || c.metrics_out.empty() || !leader()) return;
      metrics.open(c.metrics_out, rank == 0 ? std::ios::trunc : std::ios::app);
      if (!metrics) throw std::runtime_error("--metrics-out: cannot write '" + c.metrics_out + "'");
    };
    open_metrics();
    // mpirun hands its ranks a pseudo-terminal even when its own output is a file, so
    // under Open MPI the bar stays off; tools/launch passes pipes and is judged honestly.
    const bool tty = rank == 0 && isatty(STDOUT_FILENO) && !std::getenv("OMPI_COMM_WORLD_SIZE");
    auto now_unix = [] { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); };
    auto on_log = [&](const dpt::StepLog& l) {
      if (!leader()) return;
      open_metrics();
      if (tty) std::printf("\r\033[K");
      std::printf("step %6lld | epoch %d | loss %.6f | lr %.3g | %9.0f samples/s | comm %.2f ms, exposed %.2f ms%s\n",
                  (long long)l.step, l.epoch, l.loss, l.lr, l.samples_per_s, l.comm_s * 1e3, l.exposed_s * 1e3,
                  l.loss_scale > 0 ? (" | scale " + fmt("%g", l.loss_scale) + ", skipped " + std::to_string(l.skipped_steps)).c_str() : "");
      if (tty && c.cfg.steps > 0) {
        int w = 30, fill = int(w * double(l.step) / double(c.cfg.steps));
        std::printf("[%s%s] %lld/%lld", std::string(fill, '#').c_str(), std::string(w - fill, ' ').c_str(), (long long)l.step, (long long)c.cfg.steps);
      }
      std::fflush(stdout);
      if (metrics.is_open()) {
        nlohmann::json j = {{"step", l.step}, {"epoch", l.epoch}, {"loss", l.loss}, {"lr", l.lr},
                            {"samples_per_s", l.samples_per_s}, {"comm_ms", l.comm_s * 1e3}, {"exposed_ms", l.exposed_s * 1e3}, {"comm_bytes", l.comm_bytes},
                            {"world_size", l.world_size}, {"sample_begin", l.sample_begin}, {"sample_end", l.sample_end},
                            {"unix_time", now_unix()}};
        if (l.loss_scale > 0) j["loss_scale"] = l.loss_scale, j["skipped_steps"] = l.skipped_steps;
        metrics << j.dump() << "\n" << std::flush;
      }
    };
    auto on_eval = [&](int64_t step, const dpt::EvalResult& e) {
      if (!leader()) return;
      open_metrics();
      if (tty) std::printf("\r\033[K");
      if (e.accuracy) std::printf("eval  step %lld: test_loss %.4f test_acc %.4f (%zu samples)\n", (long long)step, e.loss, *e.accuracy, e.samples);
      else std::printf("eval  step %lld: val_loss %.4f (%zu samples)\n", (long long)step, e.loss, e.samples);
      std::fflush(stdout);
      if (metrics.is_open()) {
        nlohmann::json j = {{"step", step}, {"eval_loss", e.loss}, {"eval_samples", e.samples}};
        if (e.accuracy) j["test_acc"] = *e.accuracy;
        metrics << j.dump() << "\n" << std::flush;
      }
    };
    auto on_event = [&](const std::string& what) {
      if (!leader()) return;
      open_metrics();
      if (tty) std::printf("\r\033[K");
      std::printf("%s\n", what.c_str());
      std::fflush(stdout);
      if (metrics.is_open()) metrics << nlohmann::json{{"event", what}}.dump() << "\n" << std::flush;
    };
    auto on_membership = [&](const dpt::MembershipChange& m) {
      if (!leader()) return;
      open_metrics();
      std::string lost;
      for (const auto& id : m.lost) lost += (lost.empty() ? "" : ", ") + id;
      std::printf("elastic: generation %d: world size %d (lost [%s], joined %d); resuming after step %lld, %lld step(s) lost, recovery %.2f s\n",
                  m.generation, m.world_size, lost.c_str(), m.joined, (long long)m.resumed_after_step, (long long)m.lost_steps, m.recovery_s);
      std::fflush(stdout);
      if (metrics.is_open())
        metrics << nlohmann::json{{"event", "membership"}, {"generation", m.generation}, {"world_size", m.world_size},
                                  {"lost", m.lost}, {"joined", m.joined}, {"resumed_after_step", m.resumed_after_step},
                                  {"lost_steps", m.lost_steps}, {"recovery_s", m.recovery_s}, {"reason", m.reason},
                                  {"unix_time", now_unix()}}.dump()
                << "\n" << std::flush;
    };
    // Test hook: a real SIGKILL (or SIGSTOP) of chosen ranks at a chosen point of a step.
    std::function<void(int64_t, const char*)> on_phase;
    if (!c.debug_signal.empty()) {
      struct Hit {
        int64_t rank, step;
        std::string phase;
        int signal;
      };
      std::vector<Hit> hits;
      std::stringstream list(c.debug_signal);
      for (std::string item; std::getline(list, item, ',');) {
        std::vector<std::string> f;
        std::stringstream parts(item);
        for (std::string x; std::getline(parts, x, ':');) f.push_back(x);
        if (f.size() < 3 || f.size() > 4 || (f.size() == 4 && f[3] != "STOP" && f[3] != "KILL"))
          throw std::invalid_argument("--debug-signal wants R:S:PHASE[:STOP|KILL][,...], got '" + item + "'");
        hits.push_back({parse_int(f[0], "--debug-signal", "a rank"), parse_int(f[1], "--debug-signal", "a step"), f[2],
                        f.size() == 4 && f[3] == "STOP" ? SIGSTOP : SIGKILL});
      }
      // R is the rank this process started with (a re-formed group renumbers).
      on_phase = [rank, hits](int64_t step, const char* phase) {
        for (const auto& h : hits)
          if (step == h.step && h.phase == phase && rank == h.rank) ::kill(::getpid(), h.signal);
      };
    }
    auto on_leave = [&](int generation, const std::string& why) {
      std::fprintf(stderr, "elastic: leaving generation %d as rank %d: %s\n", generation, trainer.communicator().rank(),
                   why.c_str());
      std::fflush(stderr);
    };
    dpt::TrainSummary s;
    try {
      s = trainer.run({on_log, on_eval, on_event, on_membership, on_leave, on_phase});
    } catch (const dpt::SimulatedCrash& e) {
      std::fprintf(stderr, "train: %s: dying without cleanup\n", e.what());
      std::fflush(stderr);
      std::_Exit(137);
    }
    if (leader()) {
      open_metrics();
      std::string acc = s.eval.accuracy ? "test_acc=" + fmt("%.4f", *s.eval.accuracy) : "val_loss=" + fmt("%.4f", s.eval.loss);
      double hidden = s.comm_s > 0 ? 1.0 - s.exposed_s / s.comm_s : 1.0;
      std::cout << dpt::memory_table(trainer.memory_bytes(), "end");
      std::printf("final: %s loss=%.6f samples_per_s=%.1f time_s=%.2f steps=%lld world_size=%d backend=%s comm_s=%.3f exposed_comm_s=%.3f hidden_frac=%.3f skipped_batches=%lld step_ms=%.3f zero=%d comm_mib_per_step=%.4f precision=%s device=%s tokens_per_s=%.1f d2h_bytes_per_step=%llu h2d_bytes_per_step=%llu recoveries=%d lost_steps=%lld loss_scale=%g skipped_steps=%lld zero_grad_frac=%.6f%s\n",
                  acc.c_str(), s.last_loss, s.samples_per_s, s.time_s, (long long)s.steps, s.world_size, s.backend.c_str(), s.comm_s, s.exposed_s, hidden, (long long)s.skipped_batches, s.step_s * 1e3, c.zero,
                  s.comm_bytes_per_step / (1 << 20), c.precision.c_str(), c.device.c_str(),
                  trainer.model().takes_tokens() ? s.samples_per_s * double(trainer.model().sample_shape().at(0)) : 0.0,
                  (unsigned long long)s.pcie_per_step.to_host, (unsigned long long)s.pcie_per_step.to_device, s.recoveries,
                  (long long)s.lost_steps, double(s.loss_scale), (long long)s.skipped_steps, s.zero_grad_frac,
                  traffic_fields(s.traffic).c_str());
      std::fflush(stdout);
      if (metrics.is_open()) {
        nlohmann::json j = {{"final", true}, {"steps", s.steps}, {"loss", s.last_loss}, {"samples_per_s", s.samples_per_s},
                            {"time_s", s.time_s}, {"step_ms", s.step_s * 1e3}, {"comm_s", s.comm_s}, {"exposed_comm_s", s.exposed_s}, {"eval_loss", s.eval.loss}};
        if (s.eval.accuracy) j["test_acc"] = *s.eval.accuracy;
        metrics << j.dump() << "\n";
      }
    }
    trainer.communicator().barrier();
  } catch (const std::exception& e) {
    std::cerr << "train: error: " << e.what() << std::endl;
    comm.reset();
    dpt::backends::abort_job(1);
    return 1;
  }
  comm.reset();
  return 0;
}
