#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "api/context_impl.h"
#include "api/trainer/elastic_setup.h"
#include "backends/registry.h"
#include "comm/launch/env.h"
#include "comm/algorithms/algo.h"
#include "parallel/parallel_strategy.h"
#include "train/cpu_threads_setup.h"

namespace dpt {
namespace {
// "--name VALUE" or "--name=VALUE" among argv; empty when absent.
std::string flag_value(int argc, char** argv, const char* name) {
  const size_t n = std::strlen(name);
  for (int i = 1; i < argc && argv[i]; ++i) {
    if (std::strncmp(argv[i], name, n) != 0) continue;
    if (argv[i][n] == '=') return argv[i] + n + 1;
    if (argv[i][n] == '\0' && i + 1 < argc && argv[i + 1]) return argv[i + 1];
  }
  return {};
}
bool has_flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc && argv[i]; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}
ReduceOp reduce_op(Reduce op) {
  switch (op) {
    case Reduce::sum: return ReduceOp::sum;
    case Reduce::avg: return ReduceOp::avg;
    case Reduce::max: return ReduceOp::max;
    case Reduce::min: return ReduceOp::min;
  }
  throw std::invalid_argument("dpt::Reduce: unknown operation");
}
}  // namespace

Context::Context(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;
Context::~Context() = default;

int Context::rank() const { return impl_->comm->rank(); }
int Context::world_size() const { return impl_->comm->size(); }
int Context::local_rank() const { return impl_->launch.local_rank; }
int Context::local_size() const { return impl_->launch.local_size; }
std::string Context::backend() const { return impl_->comm->backend_name(); }
std::string Context::threads() const { return impl_->threads; }
bool Context::elastic() const { return impl_->elastic != nullptr; }

void Context::barrier() { impl_->comm->barrier(); }
void Context::allreduce(std::span<float> values, Reduce op) {
  impl_->comm->allreduce(make_buffer(values.data(), values.size()), reduce_op(op));
}
void Context::broadcast(std::span<float> values, int root) {
  if (root < 0 || root >= world_size())
    throw std::invalid_argument("dpt::Context::broadcast: root " + std::to_string(root) + " of " +
                                std::to_string(world_size()) + " ranks");
  impl_->comm->broadcast(make_buffer(values.data(), values.size()), root);
}

void Context::switch_backend(const std::string& name) {
  if (impl_->elastic)
    throw std::logic_error("dpt::Context::switch_backend: the context is elastic (InitOptions::elastic): its generations "
                           "are built on the tcp backend in launch --elastic's store, and cannot switch to '" + name + "'");
  for (const Impl::Wrapper* w : impl_->wrappers)
    if (*w->in_backward)
      throw std::logic_error("dpt::Context::switch_backend: " + w->name +
                             " is between a forward and its backward; switch between steps");
  std::unique_ptr<Communicator> next = backends::create(name, impl_->options);
  if (next->size() != world_size() || next->rank() != rank())
    throw std::runtime_error("dpt::Context::switch_backend: backend " + name + " made rank " +
                             std::to_string(next->rank()) + " of " + std::to_string(next->size()) + ", not rank " +
                             std::to_string(rank()) + " of " + std::to_string(world_size()));
  for (Impl::Wrapper* w : impl_->wrappers)
    if (w->strategy) w->strategy->set_communicator(*next);
  impl_->retired.push_back(std::move(impl_->comm));
  impl_->comm = std::move(next);
}

Context init(int argc, char** argv, InitOptions options) {
  auto impl = std::make_unique<Context::Impl>();
  int threads = options.threads;
  if (threads == 0) {
    const std::string t = flag_value(argc, argv, "--threads");
    if (!t.empty()) {
      try {
        threads = std::stoi(t);
      } catch (const std::exception&) {
        throw std::invalid_argument("dpt::init: --threads '" + t + "' is not a number");
      }
    }
  }
  if (threads < 0) throw std::invalid_argument("dpt::init: threads " + std::to_string(threads) + " (must be >= 0)");
  // Before any thread starts (it may re-execute this program once: cpu_threads_setup.h).
  impl->threads = setup_cpu_threads(argv, threads).text();
  std::string backend = options.backend;
  if (backend.empty()) backend = flag_value(argc, argv, "--backend");
  if (backend.empty()) backend = backends::default_name();
  impl->options = CommOptions::from_env();
  if (!options.algorithm.empty()) impl->options.algo = parse_algo(options.algorithm);
  impl->launch = detect_launch();
  if (options.elastic || has_flag(argc, argv, "--elastic")) {
    // train --elastic's start (elastic_setup.h), refusing what the elastic loop cannot do.
    if (backend != "tcp" && backend != "auto")
      throw std::invalid_argument("dpt::init: InitOptions::elastic runs on the tcp backend only (an MPI world cannot "
                                  "shrink), not '" + backend + "'");
    if (const char* id = std::getenv(env::kElasticId); !id || !*id)
      throw std::invalid_argument("dpt::init: InitOptions::elastic (or --elastic) needs the rendezvous store of "
                                  "build/bin/launch --elastic, but this process was started by '" + impl->launch.source +
                                  "' (" + env::kElasticId + " is not set), which cannot re-form a job: start it as "
                                  "build/bin/launch --elastic -n MIN:MAX PROGRAM, or leave elastic out");
    // A process restarted by launch --max-restarts finds the job running and waits here
    // until the members take it in (dpt::torch::ElasticLoop gives it their state).
    auto setup = train::elastic_setup(impl->options);
    if (!setup)
      throw ElasticJobOver("elastic: the job finished before this process could join (dpt::init)");
    impl->comm = std::move(setup->comm);
    impl->elastic = std::make_shared<train::ElasticSetup>(std::move(*setup));
  } else {
    impl->comm = backends::create(backend, impl->options);
  }
  return Context(std::move(impl));
}

}  // namespace dpt
