// The optimisation flags shared by train and train_local: batch size, optimizer and its
// settings, the learning-rate schedule, gradient clipping. Config is DistTrainConfig or
// LocalTrainConfig (the same field names); its values are the defaults --help shows.
#pragma once

#include <boost/program_options.hpp>

#include "api/cli/cli.h"

namespace dpt::tools {

template <class Config>
void add_optim_options(boost::program_options::options_description& d, Config& c) {
  namespace po = boost::program_options;
  po::options_description g("optimisation");
  auto& o = c.optimizer_config;
  auto& s = c.lr_config;
  g.add_options()
    ("batch-size", po::value(&c.batch_size)->default_value(c.batch_size), "samples per step (train: per rank, per micro-step)")
    ("optimizer", po::value(&c.optimizer)->default_value(c.optimizer), "sgd | adam | adamw")
    ("lr", po::value(&s.lr)->default_value(s.lr), "learning rate (the peak, with schedules)")
    ("momentum", po::value(&o.momentum)->default_value(o.momentum), "sgd: momentum")
    ("nesterov", po::bool_switch(&o.nesterov), "sgd: Nesterov momentum")
    ("weight-decay", po::value(&o.weight_decay)->default_value(o.weight_decay), "weight decay")
    ("lr-schedule", po::value(&c.lr_schedule)->default_value(c.lr_schedule), "constant | step | cosine")
    ("warmup-steps", po::value(&s.warmup_steps)->default_value(s.warmup_steps), "cosine: warm-up steps")
    ("min-lr", po::value(&s.min_lr)->default_value(s.min_lr), "cosine: the floor reached at the end")
    ("step-size", po::value(&s.step_size)->default_value(s.step_size), "step: steps between decays")
    ("gamma", po::value(&s.gamma)->default_value(s.gamma), "step: decay factor")
    ("clip-norm", po::value(&c.clip_norm)->default_value(c.clip_norm), "clip the global gradient norm (0: off)");
  d.add(g);
}

// train_local's old names, kept as hidden aliases.
inline void add_optim_aliases(Cli& cli) {
  cli.alias("schedule", "lr-schedule");
  cli.alias("warmup", "warmup-steps");
  cli.alias("clip", "clip-norm");
}

}  // namespace dpt::tools
