// The Python module dpt_torch._C: the process group class and its creator, which
// dpt_torch/__init__.py registers as the torch.distributed backend "dpt".
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "backends/registry.h"
#include "comm/launch/launch_env.h"
#include "bindings/torch/c10d_store_adapter.h"
#include "bindings/torch/group_factory.h"
#include "bindings/torch/process_group_dpt.h"

namespace py = pybind11;
using dpt::torch_plugin::ProcessGroupDpt;

namespace {

c10::intrusive_ptr<ProcessGroupDpt> create_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                 std::chrono::milliseconds timeout, std::vector<int> world_ranks,
                                                 std::string group_name, std::string store_host) {
  dpt::torch_plugin::GroupParams p;
  p.store = std::make_shared<dpt::torch_plugin::C10dStoreAdapter>(
      store, dpt::ErrorContext{rank, size, dpt::torch_plugin::transport_from_env(), "rendezvous", -1, -1});
  p.rank = rank;
  p.size = size;
  p.world_ranks = std::move(world_ranks);
  p.group_name = std::move(group_name);
  p.timeout = dpt::Millis(timeout.count());
  p.store_host = std::move(store_host);
  std::unique_ptr<dpt::Communicator> comm;
  {
    py::gil_scoped_release no_gil;  // rendezvous waits for the other ranks
    comm = dpt::torch_plugin::make_group_communicator(p);
  }
  return c10::make_intrusive<ProcessGroupDpt>(std::move(comm), store);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "dpt as a torch.distributed backend (see docs/torch.md)";
  py::module::import("torch.distributed");  // registers c10d.Backend, our base class
  py::class_<ProcessGroupDpt, c10d::Backend, c10::intrusive_ptr<ProcessGroupDpt>>(m, "ProcessGroupDpt")
      .def_property_readonly("transport", &ProcessGroupDpt::transport,
                             "the dpt transport under this group: tcp or mpi (DPT_BACKEND)");
  m.def("create_group", &create_group, py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
        py::arg("world_ranks"), py::arg("group_name"), py::arg("store_host") = "",
        "Makes the process group: rendezvous in `store` (tcp) or MPI's world (mpi).");
  m.def("share_over_mpi", &dpt::backends::share_over_mpi, py::arg("value"),
        py::call_guard<py::gil_scoped_release>(),
        "Rank 0's value on every rank of an mpirun job; the value itself elsewhere.");
  m.def("transport", &dpt::torch_plugin::transport_from_env, "The transport DPT_BACKEND names.");
  m.def(
      "launch_info",
      [] {
        const dpt::LaunchInfo li = dpt::detect_launch();
        py::dict d;
        d["source"] = li.source;
        d["rank"] = li.rank;
        d["world_size"] = li.world_size;
        d["local_rank"] = li.local_rank;
        d["local_size"] = li.local_size;
        d["master_addr"] = li.master_addr;
        d["master_port"] = li.master_port;
        return d;
      },
      "This process's place as the launcher says it (comm/launch/launch_env.h): under srun the rank, "
      "local rank, the step's first node and the port derived from the job id.");
}
