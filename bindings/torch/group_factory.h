#pragma once
// The communicator under one PyTorch process group, made from what PyTorch's backend
// creator receives (store, rank, size, timeout, the group's world ranks and name) and
// the plugin's environment. No PyTorch type appears here: the store arrives through
// an adapter (c10d_store_adapter.h), so this file builds without torch.
//
// Terms:
//   transport  - DPT_BACKEND: tcp (default; shared memory between same-host ranks) or
//                mpi (under mpirun). DPT_ALGO picks the algorithm as --algo does
//                (unset: COMM_ALGO); the timeout is the process group's.
//   job token  - COMM_JOB_TOKEN when set (build/bin/launch sets one). Otherwise rank 0
//                draws one and publishes it in the group's store, so the mesh still
//                refuses connections from anything that is not this job; that token is
//                then exactly as secret as PyTorch's store (docs/torch.md).
//   peer hint  - what the tcp transport listens towards: MASTER_ADDR when set, else the
//                host PyTorch's TCPStore was reached at, else loopback.
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/store/store.h"

namespace dpt::torch_plugin {

struct GroupParams {
  std::shared_ptr<Store> store;
  int rank = 0;
  int size = 1;
  std::vector<int> world_ranks;  // empty: the default (world) group
  std::string group_name;
  Millis timeout{std::chrono::minutes(30)};
  std::string store_host;        // TCPStore's host when PyTorch used one, else ""
};

// The transport DPT_BACKEND names ("tcp" unless set); std::invalid_argument otherwise.
std::string transport_from_env();

std::unique_ptr<Communicator> make_group_communicator(const GroupParams& p);

}  // namespace dpt::torch_plugin
