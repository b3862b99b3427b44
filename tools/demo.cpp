// demo: the smallest real use of the library. Every rank fills a vector with values
// that depend on its rank, allreduces it, and checks the result against the closed
// form computed locally. Prints one line per rank and a checksum that is the same for
// every backend and algorithm.
//   mpirun -np 3 build/bin/demo --backend mpi
//   build/bin/launch -n 3 build/bin/demo --backend tcp
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <vector>

#include "backends/registry.h"
#include "api/cli/cli.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  std::string backend, algo;
  size_t count = 0;
  dpt::tools::Cli cli("demo", "demo: allreduce of rank-dependent data, checked on every rank");
  cli.flags().add_options()
      ("backend", po::value(&backend)->default_value(dpt::backends::default_name()), "mpi, tcp, nccl or auto")
      ("algo", po::value(&algo)->default_value("auto"), dpt::algo::help_text().c_str())
      ("count", po::value(&count)->default_value(1 << 20), "float32 elements to allreduce");
  if (auto rc = cli.parse(argc, argv, [&](const po::variables_map&) { dpt::parse_algo(algo); })) return *rc;
  try {
    dpt::CommOptions opts = dpt::CommOptions::from_env();
    opts.algo = dpt::parse_algo(algo);
    auto comm = dpt::backends::create(backend, opts);
    const int r = comm->rank(), n = comm->size();
    // x[i] = (r + 1) * (i % 100): the sum over ranks is n(n+1)/2 * (i % 100), exact in float.
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = float((r + 1) * int(i % 100));
    comm->allreduce(dpt::make_buffer(x.data(), x.size()), dpt::ReduceOp::sum);
    const double factor = n * (n + 1) / 2.0;
    size_t wrong = 0;
    double checksum = 0;
    for (size_t i = 0; i < count; ++i) {
      if (x[i] != float(factor * double(i % 100))) ++wrong;
      checksum += x[i];
    }
    // The hosts as this rank sees them (a network namespace or a Slurm node is a host).
    const dpt::Topology& topo = comm->topology();
    std::printf("rank %d/%d backend=%s algo=%s: allreduce(sum) of %zu floats: %s, checksum %.0f; host %d of %s\n",
                r, n, comm->backend_name().c_str(), algo.c_str(), count, wrong ? "WRONG" : "correct", checksum,
                topo.my_host(), topo.describe().c_str());
    std::fflush(stdout);
    comm->barrier();
    return wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "demo: error: " << e.what() << std::endl;
    dpt::backends::abort_job(1);
    return 1;
  }
}
