// dpt::init: the process's place in the job and its communicator, made once at the top
// of main (before any thread starts: it may re-execute the program once, see below).
//
//   int main(int argc, char** argv) {
//     dpt::Context ctx = dpt::init(argc, argv);   // mpirun, srun, launch, torchrun, or alone
//     ...
//
// What it does, as build/bin/train does:
//   launcher    reads the launcher's variables (Open MPI, PMI, Slurm, launch/torchrun's
//               RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT); a process started alone is a
//               world of one.
//   threads     sets this rank's compute threads (the BLAS and oneDNN teams): the cores
//               this process may use divided among the ranks on its host, or `threads`.
//               When the plan needs threads that wait passively and OMP_WAIT_POLICY is
//               unset, the program is re-executed once with it set (same pid, same argv;
//               DPT_NO_REEXEC=1 turns this off).
//   backend     "mpi", "tcp", "nccl" or "auto" (mpi under an MPI launcher, else tcp):
//               options.backend, else a `--backend NAME` argument, else COMM_BACKEND,
//               else "auto".
//   elastic     options.elastic or an `--elastic` argument: under `build/bin/launch
//               --elastic` the context is generation 0 of an elastic job (the tcp backend
//               meeting in the launcher's store, docs/elastic.md); a libtorch loop run by
//               dpt::torch::ElasticLoop (dpt/torch/elastic.h) then survives a dead rank.
//               Refused under any other launcher, and launch --elastic refuses a context
//               made without it (its launcher serves MASTER_PORT itself). A process
//               restarted by launch --max-restarts finds the job running: init returns
//               once the members' loop takes it in (its run() then takes their state), or
//               throws ElasticJobOver when they finished first (nothing failed: exit 0).
// Errors (a malformed variable, an unknown backend, a peer that never comes) are
// std::runtime_error / std::invalid_argument naming what is wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>

namespace dpt {

struct InitOptions {
  std::string backend;    // empty: --backend, COMM_BACKEND, "auto"
  int threads = 0;        // compute threads per rank; 0: --threads N, else planned
  std::string algorithm;  // collective algorithm ("ring", "tree", ...); empty: chosen per call
  bool elastic = false;   // generation 0 of a launch --elastic job; also set by an `--elastic` argument
};

// From init: this process was restarted under launch --elastic --max-restarts after the
// members had finished the job. Nothing failed; the program should exit 0.
struct ElasticJobOver : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Reduce { sum, avg, max, min };

class Context {
 public:
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  ~Context();

  int rank() const;
  int world_size() const;
  int local_rank() const;   // rank among the processes on this host
  int local_size() const;
  std::string backend() const;  // of the communicator in use ("tcp", "mpi", ...)
  std::string threads() const;  // the thread plan, e.g. "2 threads per rank (2 cores / 1 rank)"
  bool elastic() const;         // made with InitOptions::elastic under launch --elastic

  // Collectives over every rank (blocking).
  void barrier();
  void allreduce(std::span<float> values, Reduce op = Reduce::sum);
  void broadcast(std::span<float> values, int root = 0);

  // The run-time backend switch: from now on every wrapper made over this context
  // (DistributedDataParallel, ...) communicates through a new communicator of backend
  // `name` over the same ranks. Collective; only between steps (never with a backward's
  // communication in flight: std::logic_error names the wrapper). Not on an elastic
  // context (std::logic_error): a re-formed generation is always tcp.
  void switch_backend(const std::string& name);

  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  friend Context init(int argc, char** argv, InitOptions options);
  explicit Context(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

Context init(int argc, char** argv, InitOptions options = {});

}  // namespace dpt
