// The run-length and logging flags shared by train and train_local: --epochs, --steps,
// --log-every, --max-eval-samples. Each program passes its own fields, whose values are
// the defaults --help shows; --max-eval-samples's default depends on the dataset
// (apply_run_options).
#pragma once

#include <boost/program_options.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

#include "api/cli/cli.h"

namespace dpt::tools {

// text-docs evaluates this many held-out documents unless --max-eval-samples says
// otherwise: each is a whole forward of the model, and fortunes holds out thousands
// (evaluating them all made the documented GPT-2 commands take minutes).
inline constexpr size_t kTextDocsEvalSamples = 512;

template <class LogEvery>
void add_run_options(boost::program_options::options_description& d, int& epochs, int64_t& steps, LogEvery& log_every,
                     size_t& max_eval_samples) {
  namespace po = boost::program_options;
  po::options_description g("run length and logging");
  g.add_options()
    ("epochs", po::value(&epochs)->default_value(epochs), "passes over the training set")
    ("steps", po::value(&steps)->default_value(steps), "stop after this many steps (0: run the epochs)")
    ("log-every", po::value(&log_every)->default_value(log_every), "steps between log lines")
    ("max-eval-samples", po::value(&max_eval_samples), ("evaluate on at most this many held-out samples, 0: all (default: " + std::to_string(kTextDocsEvalSamples) + " documents for text-docs, all for the other datasets)").c_str());
  d.add(g);
}

// Call after notify, with the dataset the run trains on (the model's default resolved):
// the default --max-eval-samples.
inline void apply_run_options(const boost::program_options::variables_map& vm, const std::string& dataset,
                              size_t& max_eval_samples) {
  if (!vm.count("max-eval-samples") && dataset == "text-docs") max_eval_samples = kTextDocsEvalSamples;
}

// How much of the held-out set an evaluation covered, for its output line: "8052 samples",
// or "512 of 4026 held-out documents; --max-eval-samples 0 for all" when capped.
inline std::string eval_coverage(size_t evaluated, size_t held_out, const std::string& dataset) {
  const std::string unit = dataset == "text-docs" ? "documents" : "samples";
  if (evaluated >= held_out) return std::to_string(evaluated) + " " + unit;
  return std::to_string(evaluated) + " of " + std::to_string(held_out) + " held-out " + unit +
         "; --max-eval-samples 0 for all";
}

// train_local's old names, kept as hidden aliases.
inline void add_run_aliases(Cli& cli) {
  cli.alias("max-steps", "steps");
  cli.alias("eval-samples", "max-eval-samples");
}

}  // namespace dpt::tools
