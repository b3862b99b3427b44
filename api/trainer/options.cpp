// train's flags and their checks (options.h).
#include "api/trainer/options.h"

#include "api/trainer/diloco_options.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "backends/registry.h"
#include "comm/error.h"
#include "api/cli/model_data_check.h"
#include "api/cli/optim_flags.h"
#include "api/cli/run_flags.h"
#include "api/trainer/elastic_setup.h"
#include "train/trainer_common.h"

namespace po = boost::program_options;

namespace train {
namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// "mpi | tcp | nccl | auto (built here: mpi, tcp)", from the backend registry.
std::string backend_help() {
  std::string known, built;
  for (const auto& k : dpt::backends::known()) known += (known.empty() ? "" : " | ") + k;
  for (const auto& b : dpt::backends::available()) built += (built.empty() ? "" : ", ") + b;
  return known + " (built here: " + built + ")";
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

void parse_switch(Options& o) {
  const auto colon = o.switch_backend.find(':');
  if (colon == std::string::npos)
    throw std::invalid_argument("--switch-backend wants STEP:NAME (e.g. 500:mpi), got '" + o.switch_backend + "'");
  o.switch_at = parse_int(o.switch_backend.substr(0, colon), "--switch-backend", "a step number (STEP:NAME, e.g. 500:mpi)");
  if (o.switch_at < 0) throw std::invalid_argument("--switch-backend: the step must be >= 0, got " + std::to_string(o.switch_at));
  o.switch_to = o.switch_backend.substr(colon + 1);
  const auto& known = dpt::backends::known();
  if (std::find(known.begin(), known.end(), o.switch_to) == known.end()) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw std::invalid_argument("--switch-backend: unknown backend '" + o.switch_to + "' (valid: " + list + ")");
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

std::vector<SignalHit> parse_signals(const std::string& text) {
  std::vector<SignalHit> hits;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) {
    std::vector<std::string> f;
    std::stringstream parts(item);
    for (std::string x; std::getline(parts, x, ':');) f.push_back(x);
    static const std::map<std::string, int> actions = {
        {"STOP", SIGSTOP}, {"KILL", SIGKILL}, {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"FAIL", 0}};
    if (f.size() < 3 || f.size() > 4 || (f.size() == 4 && !actions.count(f[3])))
      throw std::invalid_argument("--debug-signal wants R:S:PHASE[:STOP|KILL|TERM|USR1|USR2|FAIL][,...], got '" + item + "'");
    hits.push_back({parse_int(f[0], "--debug-signal", "a rank"), parse_int(f[1], "--debug-signal", "a step"), f[2],
                    actions.at(f.size() == 4 ? f[3] : "KILL")});
  }
  return hits;
}

// --grad-compress powersgd and its flags, refused where they cannot work (before any
// rendezvous), and DdpConfig's PowerSGD part filled.
void check_powersgd(Options& o, const po::variables_map& vm) {
  if (o.grad_compress != "powersgd") {
    for (const char* flag : {"powersgd-rank", "powersgd-start-step"})
      if (vm.count(flag) && !vm[flag].defaulted())
        throw std::invalid_argument(std::string("--") + flag + " applies to --grad-compress powersgd only (--grad-compress is " +
                                    o.grad_compress + ")");
    return;
  }
  const std::string why = "--grad-compress powersgd ";
  if (o.zero != 0)
    throw std::invalid_argument(why + "works with DDP only (--zero 0), not with --zero " + std::to_string(o.zero) +
                                ": ZeRO reduces each gradient to its shard's owner; use --grad-compress bf16|fp16 there");
  if (o.precision != "fp32")
    throw std::invalid_argument(why + "sends fp32 P and Q matrices; --precision " + o.precision +
                                " sends 16-bit gradients instead: use one or the other");
  if (o.device == "cuda") throw std::invalid_argument(why + "runs on host buckets: not with --device cuda (yet)");
  if (o.elastic)
    throw std::invalid_argument(why + "and --elastic cannot be combined (its per-rank error feedback does not travel to a re-formed group)");
  if (o.powersgd_rank < 1)
    throw std::invalid_argument("--powersgd-rank " + std::to_string(o.powersgd_rank) + ": the approximation rank must be >= 1");
  if (o.powersgd_start_step < 0)
    throw std::invalid_argument("--powersgd-start-step " + std::to_string(o.powersgd_start_step) + ": must be >= 0");
  o.cfg.parallel.ddp.powersgd.rank = o.powersgd_rank;
  o.cfg.parallel.ddp.powersgd.start_step = o.powersgd_start_step;
}

}  // namespace

void add_options(dpt::tools::Cli& cli, Options& o) {
  auto& c = o.cfg;
  // train's defaults where they differ from DistTrainConfig's.
  c.epochs = 3;
  c.batch_size = 32;
  c.optimizer = "adam";
  c.optimizer_config.momentum = 0.9f;
  c.lr_schedule = "cosine";
  c.lr_config.lr = 1e-3f;
  c.log_every = 50;
  c.dataset.clear();
  c.data_dir.clear();
  if (!o.user_model.empty()) c.model = o.user_model;  // --help shows it as the default
  auto& d = cli.flags();
  cli.config_file_flag("config");
  dpt::tools::add_model_options(d, c.model, c.model_config, o.model);
  dpt::tools::add_data_options(d, c.dataset, c.data_dir, c.seed, o.data);
  dpt::tools::add_optim_options(d, c);
  dpt::tools::add_run_options(d, c.epochs, c.steps, c.log_every, c.max_eval_samples);
  d.add_options()
    ("config", po::value(&o.config_file), "read these options from a file (key = value lines)")
    ("backend", po::value(&o.backend)->default_value(dpt::backends::default_name()), backend_help().c_str())
    ("algo", po::value(&o.algo)->default_value("auto"), dpt::algo::help_text().c_str())
    ("threads", po::value(&o.threads)->default_value(0), "compute threads per rank (products, loops); 0: the cores this process may use (affinity, cgroup) divided by the ranks on this host, unless OPENBLAS_NUM_THREADS or OMP_NUM_THREADS says; the header prints the choice and why")
    ("zero", po::value(&o.zero)->default_value(0), "ZeRO stage: 0 (DDP), 1 (optimizer state sharded), 2 (and gradients), 3 (and parameters)")
    ("overlap-comm", po::value(&o.overlap_comm)->default_value("on"), "on | off: gradient communication overlapped with backward (off = --no-overlap)")
    ("device", po::value(&o.device)->default_value("cpu"), "cpu or cuda: where the model computes (cuda: GPU LOCAL_RANK mod count; every model; the convolutions need cuDNN 9)")
    ("device-buckets", po::value(&o.device_buckets)->default_value("auto"), "auto | always: with --device cuda, reduce gradient buckets as device buffers only where the backend takes them (nccl, CUDA-aware MPI), else download each gradient once and reduce on the host; always = device buckets everywhere (staged; for measurements)")
    ("optimizer-device", po::value(&o.optimizer_device)->default_value("cpu"), "cpu | cuda: where the optimizer steps with --device cuda. cuda = device-resident training: parameters, gradients and optimizer state (sgd, adam, adamw) stay on the GPU, gradient clipping too, and a step moves nothing over PCIe but fp16's 4-byte overflow verdict (DDP, or ZeRO-1/2 with the shard's state and gradients on the GPU and the parameters allgathered there; fp32, bf16 or fp16 with fp32 device masters and gradients, as autocast keeps them; no --grad-compress; docs/gpu.md)")
    ("shuffle", "shuffle the data each epoch (default)")
    ("no-shuffle", po::bool_switch(&o.no_shuffle), "keep the data in order")
    ("bucket-mb", po::value(&o.bucket_mb)->default_value(25.0), "DDP bucket size in MiB")
    ("first-bucket-mb", po::value(&o.first_bucket_mb)->default_value(1.0), "size of the first (small) bucket in MiB")
    ("no-overlap", po::bool_switch(&o.no_overlap), "allreduce only after backward ends")
    ("grad-accum", po::value(&o.cfg.grad_accum)->default_value(1), "micro-steps per optimizer step")
    ("grad-compress", po::value(&o.grad_compress)->default_value("none"), "none | bf16 | fp16 gradients on the wire | powersgd: each >= 2-dim gradient as a rank-R product P Q^T with error feedback (DDP, fp32, CPU; the error and Q are not checkpointed: a resumed run restarts them; docs/zero.md)")
    ("powersgd-rank", po::value(&o.powersgd_rank)->default_value(4), "--grad-compress powersgd: the approximation rank R (matrices where R (n + m) >= n m travel uncompressed)")
    ("powersgd-start-step", po::value(&o.powersgd_start_step)->default_value(10), "--grad-compress powersgd: optimizer steps averaged uncompressed before compressing (PyTorch's start_powerSGD_iter)")
    ("precision", po::value(&o.precision)->default_value("fp32"), "fp32 | bf16 | fp16: 16-bit working weights and gradients (on the wire too) with fp32 master weights; fp16 also computes activations and gradients in fp16 (rounded after every layer, on the CPU or on CUDA) with a dynamic loss scaler")
    ("loss-scale-init", po::value(&o.cfg.loss_scaler.init_scale)->default_value(65536.0f), "fp16: initial loss scale (GradScaler's init_scale)")
    ("loss-scale-window", po::value(&o.cfg.loss_scaler.growth_interval)->default_value(2000), "fp16: clean steps before the loss scale doubles (GradScaler's growth_interval); an inf/NaN gradient halves it and skips the step")
    ("count-zero-grads", po::bool_switch(&o.cfg.count_zero_grads), "measure the fraction of synchronized gradient elements that are exactly 0 (final line: zero_grad_frac); fp16 without loss scaling against fp32 shows the underflow")
    ("debug-inject-inf", po::value(&o.inject_inf)->default_value(""), "testing: R:K sets one of rank R's synchronized gradients to inf in step K")
    ("checkpoint-dir", po::value(&o.cfg.checkpoint_dir)->default_value(""), "save checkpoints here")
    ("save-every", po::value(&o.cfg.save_every)->default_value(0), "steps between checkpoints")
    ("resume", po::bool_switch(&o.cfg.resume), "continue from --checkpoint-dir's latest checkpoint")
    ("auto-resume", po::bool_switch(&o.cfg.auto_resume), "continue from --checkpoint-dir's latest checkpoint if it has one, else start at step 0 (the same command for a first run and a requeued one; docs/slurm.md)")
    ("eval-every", po::value(&o.cfg.eval_every)->default_value(0), "steps between evaluations (0: each epoch)")
    ("eval-batch-size", po::value(&o.cfg.eval_batch_size)->default_value(0), "samples per evaluation forward (0: 256, for gpt2 the per-rank --batch-size)")
    ("metrics-out", po::value(&o.metrics_out)->default_value(""), "write JSON lines of metrics here (rank 0)")
    ("straggler-ratio", po::value(&o.cfg.straggler_ratio)->default_value(1.5), "name a rank a straggler (log, metrics, final line) when its compute per step is this many times the fastest rank's in 8 of the world's agreements in a row (carried by the agreement: no extra collective); 0: off")
    ("straggler-action", po::value(&o.straggler_action)->default_value(o.straggler_action), "log | evict: what naming a straggler does; evict (needs --elastic) makes it leave the job (exit 79, not restarted by launch) and the others re-form without it and go on, unless that would leave fewer than launch's MIN")
    ("trace", po::value(&o.trace_dir)->default_value(""), "write each rank's timeline (phases and collectives, Chrome trace events) as DIR/rank<R>.json at the end; tools/trace_merge.py DIR merges them and reports overlap, idle time and the slowest rank (docs/reliability.md)")
    ("switch-backend", po::value(&o.switch_backend)->default_value(""), "STEP:NAME switch to backend NAME once STEP steps are done")
    ("elastic-snapshot-every", po::value(&o.cfg.elastic_snapshot_every)->default_value(10), "elastic ZeRO: steps between in-memory copies of every shard on its ring neighbour (the steps a failure may cost)")
    ("elastic-snapshot-replicas", po::value(&o.cfg.elastic_snapshot_replicas)->default_value(1), "elastic ZeRO: ring neighbours each shard is copied to (R): any R ranks may die at once without falling back to disk; costs R shards of memory and traffic per snapshot")
    ("elastic", po::bool_switch(&o.elastic), "survive dead ranks: the others re-form a smaller group and go on; newcomers join at a step boundary (tcp backend, under launch --elastic; docs/elastic.md)")
    ("debug-collectives", po::bool_switch()->notifier([](bool on) { if (on) ::setenv("COMM_DEBUG_COLLECTIVES", "1", 1); }), "check before each collective that all ranks issue the same one (COMM_DEBUG_COLLECTIVES=1)")
    ("ignore-memory-check", po::bool_switch()->notifier([&o](bool on) { o.cfg.memory_check = !on; }), "start even when the model states and activations estimated per host exceed its available memory (docs/gpt2.md)")
    ("exit-after-step", po::value(&o.cfg.exit_after_step)->default_value(0), "testing: die abruptly after this step")
    ("debug-uneven", po::value(&o.uneven)->default_value(""), "testing: R:K gives rank R only K batches per epoch")
    ("debug-signal", po::value(&o.debug_signal)->default_value(""), "testing: R:S:PHASE[:STOP|KILL|TERM|USR1|USR2|FAIL][,...] sends SIGKILL (or SIGSTOP, SIGTERM, SIGUSR1, SIGUSR2: the flight record written, training goes on) to the process that started as rank R, inside step S at forward, backward, sync or update, at eval (the evaluation at the end of an epoch whose last step is S), at save (step S's checkpoint: this rank's files written, `latest` not yet moved), or at adopt (elastic: while a new generation takes the group's state before step S); FAIL instead makes that process alone see a communication failure there, once (under --elastic, after every other member reached the same point)")
    ("debug-sample-log", po::value(&o.cfg.sample_log)->default_value(""), "testing: append 'step world rank index...' for every completed step to PREFIX.<elastic id or rankN>")
    ("no-broadcast-buffers", po::bool_switch(&o.no_broadcast_buffers), "BatchNorm buffers: do not broadcast rank 0's running statistics before each step's first forward (PyTorch DDP's broadcast_buffers=False); each rank keeps its own")
    ("sync-bn", po::bool_switch(&o.cfg.sync_bn), "every BatchNorm is a SyncBatchNorm: batch statistics over all ranks' samples (one allgather per BatchNorm in forward, one allreduce in backward)")
    ("debug-state-dump", po::value(&o.cfg.state_dump)->default_value(""), "testing: at the end every rank writes its parameters and buffers to PREFIX.rank<r>.safetensors");
  add_diloco_options(d, o);
}

// check_options' two halves: the model and data flags of the built-in models and data,
// then the run's own flags (parallelism, precision, checkpoints, test hooks).
void check_builtin_model_data(Options& o, const po::variables_map& vm);
void check_run_options(Options& o, const po::variables_map& vm);

void check_options(Options& o, const po::variables_map& vm) {
  auto given = [&vm](const char* flag) { return vm.count(flag) && !vm[flag].defaulted(); };
  if (!o.user_model.empty() && given("model") && o.cfg.model != o.user_model)
    throw std::invalid_argument("--model " + o.cfg.model + ": " + o.program + " trains its own model, " + o.user_model);
  if (o.user_data)
    for (const char* flag : {"dataset", "data-dir", "data-file"})
      if (given(flag))
        throw std::invalid_argument(std::string("--") + flag + ": " + o.program + " trains on its own data");
  if (!o.user_model.empty() && o.user_data) {
    // Nothing of the built-in models and data applies: only the run's own flags.
    dpt::tools::apply_model_options(o.cfg.model, vm, o.model, o.cfg.model_config);
    dpt::tools::apply_run_options(vm, "", o.cfg.max_eval_samples);
  } else {
    check_builtin_model_data(o, vm);
  }
  check_run_options(o, vm);
}

void check_builtin_model_data(Options& o, const po::variables_map& vm) {
  dpt::tools::apply_model_options(o.cfg.model, vm, o.model, o.cfg.model_config);
  // gpt2 reads Hugging Face's layout while the model is built; the others load a model
  // checkpoint into the built model (train/init_from.h).
  if (o.cfg.model != "gpt2") o.cfg.init_from = o.model.gpt2.init_from;
  o.cfg.num_classes = o.model.num_classes;
  dpt::tools::apply_data_options(o.data, o.cfg.seed, o.cfg.image, o.cfg.data_dir, o.cfg.jsonl_field, o.cfg.tokenizer_dir);
  // gpt2's own dataset, text-docs (GPT-2's tokenizer over the fortunes or --data-file),
  // named here so that the document flags see it.
  dpt::tools::check_dataset(o.cfg.dataset);
  if (o.cfg.model == "gpt2" && o.cfg.dataset.empty()) o.cfg.dataset = dpt::default_dataset(o.cfg.model);
  dpt::tools::apply_val_flags(o.data.docs, vm, o.cfg.dataset, o.cfg.val_fraction, o.cfg.val_file);
  dpt::tools::apply_run_options(vm, o.cfg.dataset.empty() ? dpt::default_dataset(o.cfg.model) : o.cfg.dataset,
                                o.cfg.max_eval_samples);
  // A caller's own data is checked by its dataset; a built-in model on it needs none of this.
  if (!o.user_data)
    dpt::tools::check_model_data(o.cfg.model, o.cfg.model_config.vocab, o.cfg.dataset, o.cfg.data_dir,
                                 o.data.docs.data_file);
}

void check_run_options(Options& o, const po::variables_map& vm) {
  if (o.zero < 0 || o.zero > 3) throw std::invalid_argument("--zero " + std::to_string(o.zero) + ": valid stages are 0, 1, 2, 3");
  if (o.overlap_comm != "on" && o.overlap_comm != "off") throw std::invalid_argument("--overlap-comm '" + o.overlap_comm + "': valid are on, off");
  if (o.precision == "fp32") o.cfg.parallel.precision = dpt::DType::f32;
  else if (o.precision == "bf16") o.cfg.parallel.precision = dpt::DType::bf16;
  else if (o.precision == "fp16") o.cfg.parallel.precision = dpt::DType::f16;
  else throw std::invalid_argument("--precision '" + o.precision + "': valid are fp32, bf16, fp16");
  check_powersgd(o, vm);
  // Mixed precision sends its 16-bit gradients: that compression is implied, the other
  // conflicts. Not device-resident: there the masters and gradients stay fp32 on the GPU
  // (autocast's arrangement) and the device buckets are fp32 (checked below).
  if (o.precision != "fp32" && o.optimizer_device != "cuda") {
    const std::string other = o.precision == "bf16" ? "fp16" : "bf16";
    if (o.grad_compress == other)
      throw std::invalid_argument("--precision " + o.precision + " communicates gradients in " + o.precision +
                                  "; --grad-compress " + other + " conflicts with it");
    o.grad_compress = o.precision;
  }
  if (o.precision == "fp16" && o.elastic)
    throw std::invalid_argument("--precision fp16 and --elastic cannot be combined (the loss scaler's state does not travel to a re-formed group)");
  if (!o.inject_inf.empty()) {
    auto colon = o.inject_inf.find(':');
    if (colon == std::string::npos) throw std::invalid_argument("--debug-inject-inf wants R:K (rank:step), got '" + o.inject_inf + "'");
    o.cfg.inject_inf_rank = int(parse_int(o.inject_inf.substr(0, colon), "--debug-inject-inf", "a rank (R:K, e.g. 1:5)"));
    o.cfg.inject_inf_step = parse_int(o.inject_inf.substr(colon + 1), "--debug-inject-inf", "a step (R:K, e.g. 1:5)");
  }
  if (o.precision == "fp16") (void)dpt::LossScaler(o.cfg.loss_scaler);  // refuses bad --loss-scale-* values now
  if (!(o.cfg.straggler_ratio == 0 || o.cfg.straggler_ratio > 1))
    throw std::invalid_argument("--straggler-ratio " + std::to_string(o.cfg.straggler_ratio) +
                                ": 0 (off) or a ratio above 1 (default 1.5)");
  if (o.straggler_action != "log" && o.straggler_action != "evict")
    throw std::invalid_argument("--straggler-action '" + o.straggler_action + "': valid are log, evict");
  o.cfg.straggler_evict = o.straggler_action == "evict";
  if (o.cfg.straggler_evict && !o.elastic)
    throw std::invalid_argument("--straggler-action evict needs --elastic: only an elastic job can go on without the "
                                "straggler (build/bin/launch --elastic -n MIN:MAX build/bin/train --elastic ...)");
  if (o.cfg.straggler_evict && o.cfg.straggler_ratio == 0)
    throw std::invalid_argument("--straggler-action evict needs the straggler watch: --straggler-ratio 0 turns it off");
  o.cfg.parallel.zero_stage = o.zero;
  if (o.overlap_comm == "off") o.no_overlap = true;
  if (o.device != "cpu" && o.device != "cuda") throw std::invalid_argument("--device '" + o.device + "': valid are cpu, cuda");
  o.cfg.device = o.device;
  o.cfg.shuffle = !o.no_shuffle;
  o.cfg.broadcast_buffers = !o.no_broadcast_buffers;
  if (!(o.bucket_mb > 0) || o.bucket_mb > 1 << 20)
    throw std::invalid_argument("--bucket-mb " + fmt("%g", o.bucket_mb) + ": must be a size in MiB, > 0");
  if (!(o.first_bucket_mb > 0) || o.first_bucket_mb > 1 << 20)
    throw std::invalid_argument("--first-bucket-mb " + fmt("%g", o.first_bucket_mb) + ": must be a size in MiB, > 0");
  auto& ddp = o.cfg.parallel.ddp;
  ddp.bucket_bytes = std::max<size_t>(sizeof(float), size_t(o.bucket_mb * (1 << 20)));
  ddp.first_bucket_bytes = std::max<size_t>(sizeof(float), size_t(o.first_bucket_mb * (1 << 20)));
  ddp.overlap = !o.no_overlap;
  if (o.device_buckets != "auto" && o.device_buckets != "always")
    throw std::invalid_argument("--device-buckets '" + o.device_buckets + "': valid are auto, always");
  ddp.force_device_buckets = o.device_buckets == "always";
  if (o.optimizer_device != "cpu" && o.optimizer_device != "cuda")
    throw std::invalid_argument("--optimizer-device '" + o.optimizer_device + "': valid are cpu, cuda");
  ddp.optimizer_on_device = o.optimizer_device == "cuda";
  if (ddp.optimizer_on_device) {
    const auto refuse = [](const std::string& why) {
      throw std::invalid_argument("--optimizer-device cuda: " + why);
    };
    if (o.device != "cuda") refuse("needs --device cuda");
    if (o.zero > 2)
      refuse("DDP, ZeRO-1 or ZeRO-2 (ZeRO-3 gathers its parameters into host memory), not --zero " +
             std::to_string(o.zero));
    if (o.grad_compress != "none") refuse("reduces fp32 device buckets, not --grad-compress " + o.grad_compress);
  }
  if (o.grad_compress == "none") ddp.wire = dpt::DType::f32;
  else if (o.grad_compress == "bf16") ddp.wire = dpt::DType::bf16;
  else if (o.grad_compress == "fp16") ddp.wire = dpt::DType::f16;
  else if (o.grad_compress == "powersgd") ddp.wire = dpt::DType::f32;
  else throw std::invalid_argument("--grad-compress '" + o.grad_compress + "': valid are none, bf16, fp16, powersgd");
  if (!o.uneven.empty()) {
    auto colon = o.uneven.find(':');
    if (colon == std::string::npos) throw std::invalid_argument("--debug-uneven wants R:K (rank:batches), got '" + o.uneven + "'");
    o.cfg.uneven_rank = int(parse_int(o.uneven.substr(0, colon), "--debug-uneven", "a rank (R:K, e.g. 1:7)"));
    o.cfg.uneven_batches = parse_int(o.uneven.substr(colon + 1), "--debug-uneven", "a batch count (R:K, e.g. 1:7)");
    if (o.cfg.uneven_rank < 0 || o.cfg.uneven_batches < 0)
      throw std::invalid_argument("--debug-uneven " + o.uneven + ": rank and batches must be >= 0");
  }
  if (!o.switch_backend.empty()) parse_switch(o);
  check_elastic_launch(o.elastic);  // before the backend: under mpirun the launcher is the mistake
  if (o.elastic) {
    const std::string b = o.backend == "auto" ? dpt::backends::resolve("auto") : o.backend;
    if (b != "tcp")
      throw std::invalid_argument("--elastic needs --backend tcp: the " + b +
                                  " backend cannot shrink a world (MPI has no way to drop a dead process and go on)");
    if (!o.switch_backend.empty()) throw std::invalid_argument("--elastic and --switch-backend cannot be combined");
    if (o.cfg.elastic_snapshot_every < 1)
      throw std::invalid_argument("--elastic-snapshot-every must be at least 1, got " + std::to_string(o.cfg.elastic_snapshot_every));
    if (o.cfg.elastic_snapshot_replicas < 1)
      throw std::invalid_argument("--elastic-snapshot-replicas must be at least 1 (copies of each shard on its ring neighbours), got " +
                                  std::to_string(o.cfg.elastic_snapshot_replicas));
  }
  if (o.cfg.resume && o.cfg.checkpoint_dir.empty()) throw std::invalid_argument("--resume needs --checkpoint-dir");
  if (o.cfg.auto_resume && o.cfg.checkpoint_dir.empty())
    throw std::invalid_argument("--auto-resume needs --checkpoint-dir");
  if (o.cfg.auto_resume && o.cfg.resume)
    throw std::invalid_argument("--resume and --auto-resume: give one (--resume fails without a checkpoint, --auto-resume starts fresh)");
  check_diloco_options(o, vm);
  // With somewhere to save, SIGTERM and SIGUSR1 stop at a step boundary with a checkpoint
  // (train/stop_signals.h); without, they terminate as they always do.
  o.cfg.stop_on_signal = !o.cfg.checkpoint_dir.empty();
  if (o.cfg.save_every > 0 && o.cfg.checkpoint_dir.empty())
    throw std::invalid_argument("--save-every " + std::to_string(o.cfg.save_every) +
                                " needs --checkpoint-dir DIR, where the checkpoints go (without it nothing is saved)");
  // On --resume the checkpoint's schedule goes on; one of these given on the command line
  // (or in --config) must agree with it (DistTrainer refuses otherwise, naming the flag).
  for (const char* flag : {"lr-schedule", "lr", "warmup-steps", "min-lr", "step-size", "gamma"})
    if (vm.count(flag) && !vm[flag].defaulted()) o.cfg.lr_flags_given.emplace_back(flag);
  if (!o.cfg.checkpoint_dir.empty()) check_writable_dir(o.cfg.checkpoint_dir);
  dpt::parse_algo(o.algo);
  o.signals = parse_signals(o.debug_signal);
}

namespace {

// Polls the counter until `peers` members added to it. Bounded: peers that never come
// (one died meanwhile) leave the failure to be injected anyway, said on stderr.
void wait_for_peers(dpt::Store& store, const std::string& key, int peers) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int64_t got = 0;
  while ((got = store.add(key, 0)) < peers) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "--debug-signal FAIL: %lld of %d peers reached %s in 120 s; failing anyway\n",
                   (long long)got, peers, key.c_str());
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

std::function<void(int64_t, const char*)> signal_hook(const std::vector<SignalHit>& hits, int rank, FailGate gate) {
  if (hits.empty()) return {};
  // R is the rank this process started with (a re-formed group renumbers).
  // FAIL: this process alone sees its communicator fail there (a link that flaps for one
  // rank), once. The case it stands for is a failure after the step's gradient went out
  // and every peer completed the step; a peer still inside the step's allreduce when the
  // failure reaches it cannot complete it, so the failing rank first waits, through the
  // elastic store, until every other member has reached the same point (each adds one to
  // a counter there): no sleep to outlast the peers, however loaded the machine.
  return [rank, hits, gate, failed = std::vector<bool>(hits.size())](int64_t step, const char* phase) mutable {
    for (size_t i = 0; i < hits.size(); ++i) {
      const SignalHit& h = hits[i];
      if (step != h.step || h.phase != phase) continue;
      const std::string key = "debug-fail/" + std::to_string(h.rank) + "/" + std::to_string(h.step) + "/" + h.phase;
      if (rank != h.rank) {
        if (h.signal == 0 && gate.store) gate.store->add(key, 1);  // a peer of the failing rank got here
        continue;
      }
      if (h.signal != 0) {
        ::kill(::getpid(), h.signal);
      } else if (!failed[i]) {
        failed[i] = true;
        if (gate.store) wait_for_peers(*gate.store, key, gate.world_size() - 1);
        dpt::ErrorContext ctx;
        ctx.rank = int(rank);
        ctx.op = phase;
        throw dpt::PeerError(ctx, "--debug-signal " + std::to_string(h.rank) + ":" + std::to_string(h.step) + ":" +
                                      h.phase + ":FAIL: an injected communication failure");
      }
    }
  };
}

}  // namespace train
