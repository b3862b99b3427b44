// dpt::train_main (dpt/trainer.h): build/bin/train's program, for the built-in models and
// data or for a caller's own. Steps: the flags, threads per rank, the group (a backend's
// world or an elastic job's first generation), the trainer with its elastic context and
// scheduled backend switch, the run and its report.
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "api/cli/cli.h"
#include "api/model_impl.h"
#include "api/trainer/elastic_setup.h"
#include "api/trainer/options.h"
#include "api/trainer/report.h"
#include "api/trainer/user_dataset.h"
#include "backends/registry.h"
#include "comm/dispatch/timeline.h"
#include "dpt/trainer.h"
#include "train/cpu_threads_setup.h"
#include "train/dist_trainer.h"
#include "train/stop_signals.h"

namespace {

int run(int argc, char** argv, const dpt::TrainerSetup& setup) {
  // 1. Flags (tools/train/options.h): checked before any rendezvous; errors exit 2.
  train::Options o;
  o.program = setup.program;
  o.user_model = setup.model ? setup.model_name : "";
  o.user_data = bool(setup.dataset);
  dpt::tools::Cli cli(o.program, o.program + ": data-parallel training (DDP, ZeRO 1-3, DiLoCo) over the backends below");
  train::add_options(cli, o);
  if (auto rc = cli.parse(argc, argv, [&](const auto& vm) { train::check_options(o, vm); })) return *rc;
  // Threads per rank before anything starts a thread (may re-execute this program once to
  // make its threads wait passively: train/cpu_threads_setup.h).
  try {
    o.threads_text = dpt::setup_cpu_threads(argv, o.threads).text();
  } catch (const std::invalid_argument& e) {
    std::cerr << o.program << ": error: " << e.what() << std::endl;
    return 2;
  }

  // SIGTERM/SIGUSR1 (a scheduler's time limit, scancel, preemption) become a stop at the
  // next step boundary with a checkpoint, where there is a folder to write it to.
  if (o.cfg.stop_on_signal) dpt::install_stop_signals();
  // The caller's model and data (dpt/trainer.h), built by the trainer on every rank.
  if (setup.model)
    o.cfg.make_model = [&setup](const dpt::ModelConfig& c) { return dpt::take_module(setup.model(c.seed)); };
  if (setup.dataset)
    o.cfg.make_dataset = [&setup](dpt::Split split) {
      return std::unique_ptr<dpt::Dataset>(std::make_unique<dpt::UserDataset>(
          setup.dataset(split == dpt::Split::train ? dpt::data::Split::train : dpt::data::Split::test)));
    };
  std::unique_ptr<dpt::Communicator> comm;
  std::optional<train::ElasticSetup> elastic;
  int exit_code = 0;
  try {
    // 2. The group: a backend's world, or the first generation of an elastic job.
    dpt::CommOptions opts = dpt::CommOptions::from_env();
    opts.algo = dpt::parse_algo(o.algo);
    if (o.elastic) {
      elastic = train::elastic_setup(opts);
      if (!elastic) {
        std::printf("elastic: the job finished before this process could join\n");
        return 0;
      }
      comm = std::move(elastic->comm);
      o.cfg.elastic_join = elastic->joining;
      o.cfg.elastic = true;
    } else {
      comm = dpt::backends::create(o.backend, opts);
    }
    const int rank = comm->rank();
    // The timeline's file is written when this block ends, by a failure too.
    struct TimelineScope {
      explicit TimelineScope(const std::string& dir, int rank, int world) : on(!dir.empty()) {
        if (on) dpt::timeline_open(dir, rank, world);
      }
      ~TimelineScope() {
        if (on) dpt::timeline_close();
      }
      bool on;
    } timeline(o.trace_dir, rank, comm->size());
    // One file per process: the prefix plus its elastic id, or its rank.
    if (!o.cfg.sample_log.empty())
      o.cfg.sample_log += "." + (elastic ? elastic->rendezvous->id() : "rank" + std::to_string(rank));

    // 3. The trainer, its elastic context and a scheduled backend switch.
    dpt::DistTrainer trainer(o.cfg, *comm);
    if (elastic) trainer.enable_elastic({elastic->rendezvous.get(), elastic->membership, elastic->make_comm});
    if (o.switch_at >= 0)
      trainer.schedule_switch(o.switch_at, [name = o.switch_to, opts] { return dpt::backends::create(name, opts); });

    // 4. Run: the boxed configuration, a line per logged step, the final line (report.h).
    if (rank == 0) train::print_config(o, trainer, *comm);
    train::Reporter report(o, trainer, rank);
    dpt::TrainSummary s;
    try {
      train::FailGate gate{elastic ? elastic->store.get() : nullptr, [&trainer] { return trainer.communicator().size(); }};
      s = trainer.run(report.callbacks(train::signal_hook(o.signals, rank, gate)));
    } catch (const dpt::SimulatedCrash& e) {
      std::fprintf(stderr, "%s: %s: dying without cleanup\n", o.program.c_str(), e.what());
      std::fflush(stderr);
      std::_Exit(137);
    }
    if (s.stopped) {
      if (rank == 0)
        std::printf("%s: stopped by a signal after step %lld: checkpoint in '%s'; the same command with "
                    "--auto-resume (or --resume) goes on from there (exit %d)\n",
                    o.program.c_str(), (long long)s.steps, o.cfg.checkpoint_dir.c_str(), dpt::kExitStoppedBySignal);
      std::fflush(stdout);
      // No comm.reset() here: the trainer goes at the end of this block, and its strategy's
      // destructor settles work it may hold in flight on the communicator (~DistTrainer,
      // ~ZeroStrategy), so comm must outlive it, as on the normal path.
      exit_code = dpt::kExitStoppedBySignal;
    } else {
      report.final_line(s);
      try {
        trainer.communicator().barrier();
      } catch (const dpt::CommError& e) {
        // Training finished and the job is marked done: a peer gone by now (killed at the
        // very end) changes nothing, and a failure here would make the launcher fail the job.
        if (!elastic) throw;
        std::fprintf(stderr, "%s: the job finished; the last barrier failed (%s)\n", o.program.c_str(), e.what());
      }
    }
  } catch (const dpt::ElasticStoreUnreachable& e) {
    // Its launcher reads the status: no restart of this slot.
    std::cerr << o.program << ": error: " << e.what() << std::endl;
    return dpt::kExitStoreUnreachable;
  } catch (const dpt::ElasticEvicted& e) {
    // The group evicted this process (a straggler) and goes on without it: its launcher
    // reads the status and does not restart the slot.
    std::cerr << o.program << ": " << e.what() << std::endl;
    comm.reset();
    return dpt::kExitEvicted;
  } catch (const dpt::ElasticFinishedWithout& e) {
    // Left out while it was stopped or cut off, and the others finished meanwhile: the
    // job succeeded, so this process does not report a failure (its launcher would end
    // the whole job as failed).
    std::printf("%s\n", e.what());
    comm.reset();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << o.program << ": error: " << e.what() << std::endl;
    comm.reset();
    dpt::backends::abort_job(1);
    return 1;
  }
  comm.reset();  // after the trainer (gone with the try block) and its strategy
  return exit_code;
}

}  // namespace

namespace dpt {

int train_main(int argc, char** argv, const TrainerSetup& setup) {
  if (setup.program.empty()) throw std::invalid_argument("dpt::TrainerSetup::program: empty");
  return run(argc, argv, setup);
}

}  // namespace dpt
