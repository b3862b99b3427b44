// queue_overhead: what a queued (*_async) collective costs over a blocking one, and where
// the difference goes. comm_bench's default mode issues its iterations with *_async and
// then waits them (the way DDP issues its buckets); -z 1 calls the blocking form.
//
// Terms:
//   blocking  K plain allreduce calls (comm_bench -z 1).
//   queued    K allreduce_async calls, then a wait on each (comm_bench's default mode).
//   round     a barrier, then K collectives of one mode; its time is rank 0's, from the
//             first call to the last return.
//   per op    round time / K. Each printed figure is the median over the rounds; the
//             modes alternate round by round, so a noisy stretch of the machine hits both.
//   switches  context switches of this process (all its threads; getrusage: voluntary
//             plus involuntary) per op: every one is a thread giving up its core, the
//             cost a queue exists to avoid.
//   ran by    where rank 0's collectives ran (Communicator::queue_stats): the blocking
//             caller's own thread, a thread waiting on the Work (a driver), or the
//             communicator's worker thread; wakes = worker wake-ups with tasks queued
//             plus pushes that had to notify an idle worker, per op.
// With one rank the collective itself is nearly free, so the queued-minus-blocking time
// is the queue's own bookkeeping (allocating the Work, the lock, the hand-over).
//
//   launch -n N build/bin/queue_overhead [--backend tcp] [--bytes 4096,65536]
//                                        [--batch 10] [--rounds 300]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "comm/dispatch/collective_queue.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string backend = "tcp";
  std::vector<size_t> bytes{4096, 65536, 1 << 20};
  int batch = 10;
  int rounds = 300;
};

std::vector<size_t> parse_sizes(const std::string& s) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(pos, end - pos);
    char* stop = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0' || v < 4 || v % 4 != 0)
      throw std::invalid_argument("--bytes: '" + item + "' is not a positive multiple of 4");
    out.push_back(static_cast<size_t>(v));
    pos = end + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    auto positive = [&](const std::string& v) {
      const int n = std::atoi(v.c_str());
      if (n <= 0) throw std::invalid_argument(a + ": '" + v + "' is not a positive integer");
      return n;
    };
    if (a == "--backend") o.backend = value();
    else if (a == "--bytes") o.bytes = parse_sizes(value());
    else if (a == "--batch") o.batch = positive(value());
    else if (a == "--rounds") o.rounds = positive(value());
    else throw std::invalid_argument("unknown argument '" + a + "' (see the comment at the top of bench/queue_overhead.cpp)");
  }
  return o;
}

long context_switches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw + u.ru_nivcsw;
}

// One mode's rounds: per-op times, and totals of switches and of where tasks ran.
struct Tally {
  std::vector<double> per_op_us;
  long switches = 0;
  dpt::QueueStats ran;
  int64_t ops = 0;
};

void add(dpt::QueueStats& into, const dpt::QueueStats& after, const dpt::QueueStats& before) {
  into.by_caller += after.by_caller - before.by_caller;
  into.by_driver += after.by_driver - before.by_driver;
  into.by_worker += after.by_worker - before.by_worker;
  into.worker_wakeups += after.worker_wakeups - before.worker_wakeups;
  into.worker_notifies += after.worker_notifies - before.worker_notifies;
}

void round(dpt::Communicator& c, const dpt::Buffer& buf, int k, bool queued, Tally& t) {
  std::vector<dpt::WorkPtr> works;
  works.reserve(size_t(k));
  c.barrier();
  const dpt::QueueStats before = c.queue_stats();
  const long sw0 = context_switches();
  const auto t0 = Clock::now();
  if (queued) {
    for (int i = 0; i < k; ++i) works.push_back(c.allreduce_async(buf, buf, dpt::ReduceOp::sum));
    for (auto& w : works) w->wait();
  } else {
    for (int i = 0; i < k; ++i) c.allreduce(buf, buf, dpt::ReduceOp::sum);
  }
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  t.switches += context_switches() - sw0;
  add(t.ran, c.queue_stats(), before);
  t.per_op_us.push_back(us / k);
  t.ops += k;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(const Options& o) {
  auto comm = dpt::backends::create(o.backend, dpt::CommOptions::from_env());
  dpt::Communicator& c = *comm;
  if (c.rank() == 0) {
    std::printf("# queue_overhead: backend %s, %d ranks, %d collectives per round, %d rounds per mode (medians)\n",
                c.backend_name().c_str(), c.size(), o.batch, o.rounds);
    std::printf("# %9s %11s %11s %7s %10s %10s %9s %9s %9s %9s\n", "bytes", "blocking_us", "queued_us", "ratio",
                "sw/op_blk", "sw/op_que", "caller", "driver", "worker", "wakes/op");
  }
  for (size_t bytes : o.bytes) {
    std::vector<float> data(bytes / 4, 1.0f);
    const dpt::Buffer buf{data.data(), data.size(), dpt::DType::f32, {}};
    Tally blocking, queued;
    for (int w = 0; w < 3; ++w) {  // warm-up: connections, arenas, pages
      round(c, buf, o.batch, false, blocking);
      round(c, buf, o.batch, true, queued);
    }
    blocking = Tally{};
    queued = Tally{};
    for (int r = 0; r < o.rounds; ++r) {
      round(c, buf, o.batch, false, blocking);
      round(c, buf, o.batch, true, queued);
    }
    if (c.rank() != 0) continue;
    const double b = median(blocking.per_op_us), q = median(queued.per_op_us);
    const double ops = double(queued.ops);
    std::printf("  %9zu %11.2f %11.2f %7.2f %10.2f %10.2f %9.2f %9.2f %9.2f %9.3f\n", bytes, b, q, q / b,
                double(blocking.switches) / double(blocking.ops), double(queued.switches) / ops,
                double(queued.ran.by_caller) / ops, double(queued.ran.by_driver) / ops,
                double(queued.ran.by_worker) / ops,
                double(queued.ran.worker_wakeups + queued.ran.worker_notifies) / ops);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "queue_overhead: %s\n", e.what());
    return 2;
  }
}
