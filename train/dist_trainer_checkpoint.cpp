#include "train/dist_trainer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "comm/dispatch/flight_recorder.h"
#include "device/safe_file.h"
#include "models/io/checkpoint.h"
#include "models/io/gpt2_weights.h"

// DistTrainer's checkpoints: writing a step's files and `latest`, and resuming.
namespace dpt {
namespace fs = std::filesystem;

namespace {
// A checkpoint's metadata value, or an error naming the file and the key.
const std::string& required(const Metadata& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  if (it == meta.end()) throw CheckpointError(path, "metadata '" + key + "' is missing (not written by train?)");
  return it->second;
}

int64_t required_int(const Metadata& meta, const std::string& key, const std::string& path) {
  const std::string& v = required(meta, key, path);
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw CheckpointError(path, "metadata '" + key + "' is '" + v + "', not an integer");
}

float required_float(const Metadata& meta, const std::string& key, const std::string& path) {
  const std::string& v = required(meta, key, path);
  char* end = nullptr;
  const float x = std::strtof(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0') throw CheckpointError(path, "metadata '" + key + "' is '" + v + "', not a number");
  return x;
}

// A float as text that reads back to the same float.
std::string exact(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", double(v));
  return b;
}

// The learning-rate schedule a run started with, in every checkpoint's metadata.
void put_schedule(Metadata& meta, const std::string& kind, const LrScheduleConfig& c) {
  meta["lr_schedule"] = kind;
  meta["lr"] = exact(c.lr);
  meta["lr_warmup_steps"] = std::to_string(c.warmup_steps);
  meta["lr_total_steps"] = std::to_string(c.total_steps);
  meta["lr_min"] = exact(c.min_lr);
  meta["lr_step_size"] = std::to_string(c.step_size);
  meta["lr_gamma"] = exact(c.gamma);
}

// A float for people: 0.001, not 0.00100000005.
std::string shown(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", double(v));
  return b;
}

std::string describe(const std::string& kind, const LrScheduleConfig& c) {
  if (kind == "cosine")
    return "cosine from lr " + shown(c.lr) + ", warmup " + std::to_string(c.warmup_steps) + ", to min lr " +
           shown(c.min_lr) + " at step " + std::to_string(c.total_steps);
  if (kind == "step")
    return "step: lr " + shown(c.lr) + " x " + shown(c.gamma) + " every " + std::to_string(c.step_size) + " steps";
  return kind + " lr " + shown(c.lr);
}

// --resume continues the learning-rate schedule the checkpoint was written with, as a
// PyTorch or DeepSpeed user expects: scheduler.load_state_dict() (DeepSpeed: the
// lr_scheduler state in its checkpoint) restores the saved schedule's parameters over the
// ones the script constructed it with, so a resumed run never jumps to another curve
// (a larger --steps used to restart the cosine: 6e-8 -> 2.5e-4 at the resumed step).
// --steps only says where this run stops, so a length that differs is a note; a schedule
// flag given now that disagrees with the checkpoint is refused, naming both values, rather
// than silently dropped. Checkpoints written before the schedule was stored keep the
// configured one. Returns the line to print ("" when nothing differs).
std::string continue_schedule(const Metadata& meta, const std::string& path, DistTrainConfig& c) {
  if (!meta.count("lr_schedule")) return "";
  const std::string kind = meta.at("lr_schedule");
  LrScheduleConfig saved;
  saved.lr = required_float(meta, "lr", path);
  saved.warmup_steps = required_int(meta, "lr_warmup_steps", path);
  saved.total_steps = required_int(meta, "lr_total_steps", path);
  saved.min_lr = required_float(meta, "lr_min", path);
  saved.step_size = required_int(meta, "lr_step_size", path);
  saved.gamma = required_float(meta, "lr_gamma", path);
  struct Field {
    const char* flag;
    bool matters;
    std::string now, then;  // exact, compared
    std::string now_shown, then_shown;
  };
  const LrScheduleConfig& now = c.lr_config;
  auto number = [](const char* flag, bool matters, float a, float b) {
    // Shown with %g unless that hides the difference.
    const bool same_shown = shown(a) == shown(b);
    return Field{flag, matters, exact(a), exact(b), same_shown ? exact(a) : shown(a), same_shown ? exact(b) : shown(b)};
  };
  auto whole = [](const char* flag, bool matters, int64_t a, int64_t b) {
    return Field{flag, matters, std::to_string(a), std::to_string(b), std::to_string(a), std::to_string(b)};
  };
  const Field fields[] = {
      {"lr-schedule", true, c.lr_schedule, kind, c.lr_schedule, kind},
      number("lr", true, now.lr, saved.lr),
      whole("warmup-steps", kind == "cosine", now.warmup_steps, saved.warmup_steps),
      number("min-lr", kind == "cosine", now.min_lr, saved.min_lr),
      whole("step-size", kind == "step", now.step_size, saved.step_size),
      number("gamma", kind == "step", now.gamma, saved.gamma),
  };
  bool differs = kind == "cosine" && now.total_steps != saved.total_steps;
  for (const Field& f : fields) {
    if (!f.matters || f.now == f.then) continue;
    differs = true;
    if (std::find(c.lr_flags_given.begin(), c.lr_flags_given.end(), f.flag) != c.lr_flags_given.end())
      throw std::invalid_argument("--resume: --" + std::string(f.flag) + " " + f.now_shown + " differs from the " +
                                  f.then_shown + " of the schedule the checkpoint continues (" + path +
                                  "); leave --" + f.flag + " out to go on with it, or start a new schedule from "
                                  "these weights with --init-from " + path);
  }
  if (!differs) return "";
  std::string note = "resume: continuing the checkpoint's learning-rate schedule (" + describe(kind, saved) +
                     ") as PyTorch's scheduler.load_state_dict does, not this command's (" +
                     describe(c.lr_schedule, now) + ")";
  const int64_t end = c.steps > 0 ? c.steps : now.total_steps;
  if (kind == "cosine" && end > saved.total_steps)
    note += "; steps " + std::to_string(saved.total_steps + 1) + " to " + std::to_string(end) + " run at its min lr " +
            exact(saved.min_lr);
  c.lr_schedule = kind;
  c.lr_config = saved;
  return note;
}

// Points <dir>/latest at `target` so that it survives a crash or a power loss: written
// whole under an unguessable temporary name, fsync'd, renamed over `latest`, the folder
// fsync'd (device/safe_file.h). Readers see the old or the new name, never a torn one.
void write_latest(const fs::path& dir, const std::string& target) {
  write_file_atomically((dir / "latest").string(), target + "\n");
}
}  // namespace

std::string DistTrainer::final_model_path() const {
  return config_.checkpoint_dir.empty() ? "" : (fs::path(config_.checkpoint_dir) / "model.safetensors").string();
}

// Layout: <dir>/step_<N>/model.safetensors, the optimizer state beside it (DDP: one
// model.optim.safetensors written by rank 0, the replicas being identical; ZeRO: one
// model.optim.shard_<r>.safetensors per rank, optimizer_shards.h), and <dir>/latest
// naming the newest complete step. Every file is written atomically, and `latest`
// moves only after a barrier that follows every rank's writes, so a kill during a
// save leaves the previous checkpoint loadable and `latest` never names a step with a
// missing file.
void DistTrainer::save_checkpoint(int64_t step, int epoch, int64_t batches_done, const TrainCallbacks* cb) const {
  const fs::path dir = fs::path(config_.checkpoint_dir) / ("step_" + std::to_string(step));
  fs::create_directories(dir);
  const std::string model_path = (dir / "model.safetensors").string();
  strategy_->save_optimizer_state(model_path);
  strategy_->expose_full_parameters_on(0);  // rank 0 writes the model (ZeRO-3: gathers it; mixed precision: the masters)
  Metadata meta{{"step", std::to_string(step)},
                {"epoch", std::to_string(epoch)},
                {"batches_done", std::to_string(batches_done)},
                {"world_size", std::to_string(comm_->size())},
                {"zero_stage", std::to_string(strategy_->zero_stage())},
                {"sample_position", std::to_string(position_)},
                {"rng_step", std::to_string(model_->rng_step())},
                {"model", config_.model}};
  put_schedule(meta, config_.lr_schedule, config_.lr_config);
  if (scaler_) {  // fp16: the scale as a hexadecimal float (exact), the counters
    char hex[64];
    std::snprintf(hex, sizeof hex, "%a", double(scaler_->scale()));
    meta["loss_scale"] = hex;
    meta["loss_scale_growth_tracker"] = std::to_string(scaler_->state().growth_tracker);
    meta["loss_scale_skipped_steps"] = std::to_string(scaler_->state().skipped_steps);
  }
  if (comm_->rank() == 0) write_model_file(dir.string(), meta);
  set_flight_phase("save");
  if (cb && cb->on_phase) cb->on_phase(step, "save");
  comm_->barrier();  // every rank's files are in place before `latest` moves
  if (comm_->rank() == 0) write_latest(config_.checkpoint_dir, dir.filename().string());
  last_saved_step_ = step;
  strategy_->restore_working_parameters();
  comm_->barrier();
}

void DistTrainer::write_model_file(const std::string& dir, const Metadata& metadata) const {
  if (config_.model == "gpt2")
    save_gpt2_pretrained(dir, model_->param_infos(), model_->flat_params(), config_.model_config, metadata);
  else
    save_model((fs::path(dir) / "model.safetensors").string(), *model_, metadata);
}

bool DistTrainer::load_latest_checkpoint() {
  const fs::path latest = fs::path(config_.checkpoint_dir) / "latest";
  std::ifstream f(latest);
  std::string name;
  if (!(f >> name)) return false;
  const std::string model_path = (fs::path(config_.checkpoint_dir) / name / "model.safetensors").string();
  Metadata meta = load_model(model_path, *model_);
  // This rank's slice of whatever optimizer files the checkpoint holds (any stage, any
  // world size).
  strategy_->load_optimizer_state(model_path);
  step_ = required_int(meta, "step", model_path);
  strategy_->starts_at_step(step_);
  if (const std::string note = continue_schedule(meta, model_path, config_); !note.empty()) {
    schedule_ = make_lr_schedule(config_.lr_schedule, config_.lr_config);
    if (comm_->rank() == 0) std::printf("%s\n", note.c_str()), std::fflush(stdout);
  }
  // Dropout's masks continue where they were (written before rng_step was: from 0).
  if (meta.count("rng_step")) model_->set_rng_step(uint64_t(required_int(meta, "rng_step", model_path)));
  // fp16: the loss scaler goes on where it stood (a checkpoint without one, e.g. from an
  // fp32 run, starts the scaler afresh).
  if (scaler_ && meta.count("loss_scale")) {
    const std::string& text = meta.at("loss_scale");
    char* end = nullptr;
    const double s = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(s > 0))
      throw CheckpointError(model_path, "metadata 'loss_scale' is '" + text + "', not a positive number");
    scaler_->set_state({float(s), required_int(meta, "loss_scale_growth_tracker", model_path),
                        required_int(meta, "loss_scale_skipped_steps", model_path)});
  }
  epoch_ = int(required_int(meta, "epoch", model_path));
  // Where the epoch's order stands: exact at any world size (data/loading/sampler.h's start).
  if (meta.count("sample_position")) {
    position_ = size_t(required_int(meta, "sample_position", model_path));
  } else {  // written before sample_position existed: the same world size is assumed
    position_ = size_t(required_int(meta, "batches_done", model_path)) * config_.batch_size * size_t(comm_->size());
  }
  // The last step of an epoch may end up to world-1 positions past the data set (the
  // sampler pads the epoch to a multiple of the world size): that epoch is complete.
  const size_t writer_world = meta.count("world_size") ? size_t(required_int(meta, "world_size", model_path)) : 1;
  if (position_ > train_->size() && position_ < train_->size() + writer_world) position_ = train_->size();
  if (position_ > train_->size())
    throw CheckpointError(model_path, "sample_position " + std::to_string(position_) + " is past the dataset's " +
                                          std::to_string(train_->size()) + " samples by more than the padding of " +
                                          std::to_string(writer_world) + " rank(s) (another dataset?)");
  return true;
}

}  // namespace dpt
