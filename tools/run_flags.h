// The run-length and logging flags shared by train and train_local: --epochs, --steps,
// --log-every, --max-eval-samples. Each program passes its own fields, whose values are
// the defaults --help shows.
#pragma once

#include <boost/program_options.hpp>

#include <cstddef>
#include <cstdint>

#include "tools/cli.h"

namespace dpt::tools {

template <class LogEvery>
void add_run_options(boost::program_options::options_description& d, int& epochs, int64_t& steps, LogEvery& log_every,
                     size_t& max_eval_samples) {
  namespace po = boost::program_options;
  po::options_description g("run length and logging");
  g.add_options()
    ("epochs", po::value(&epochs)->default_value(epochs), "passes over the training set")
    ("steps", po::value(&steps)->default_value(steps), "stop after this many steps (0: run the epochs)")
    ("log-every", po::value(&log_every)->default_value(log_every), "steps between log lines")
    ("max-eval-samples", po::value(&max_eval_samples)->default_value(max_eval_samples), "evaluate on at most this many held-out samples (0: all)");
  d.add(g);
}

// train_local's old names, kept as hidden aliases.
inline void add_run_aliases(Cli& cli) {
  cli.alias("max-steps", "steps");
  cli.alias("eval-samples", "max-eval-samples");
}

}  // namespace dpt::tools
