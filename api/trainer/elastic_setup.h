#pragma once
// train --elastic: the first generation this process belongs to, and how to build the
// communicator of any generation (the tcp backend meeting in the launcher's store).
//
// Terms (see comm/store/elastic_membership.h): the process's id, the limits and the store
// address come from launch --elastic (DPT_ELASTIC_ID/MIN/MAX, MASTER_ADDR/PORT). A
// process that finds the job already running (a restarted one) arrives as a newcomer
// and is taken in at the members' next step boundary.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "comm/store/elastic_membership.h"
#include "comm/store/tcp_store.h"

namespace train {

struct ElasticSetup {
  std::shared_ptr<dpt::TcpStoreClient> store;
  std::unique_ptr<dpt::ElasticRendezvous> rendezvous;
  dpt::Membership membership;
  std::function<std::unique_ptr<dpt::Communicator>(const dpt::Membership&)> make_comm;
  std::unique_ptr<dpt::Communicator> comm;  // membership's communicator
  bool joining = false;  // the job was running: the members' state comes in run()
};

// Before any work: train and its launcher must agree on elasticity. Under launch
// --elastic (DPT_ELASTIC_ID set) the launcher itself serves the store on MASTER_PORT, so a
// fixed-size rendezvous there fails on a port collision and the other ranks wait out the
// rendezvous timeout; train --elastic under any other launcher has no store at all. Both
// throw std::invalid_argument naming the flag that is missing.
void check_elastic_launch(bool elastic);

// Throws std::invalid_argument naming what is missing (not started by launch --elastic);
// std::nullopt when the job finished before this process could join. A newcomer whose
// generation's communicator fails to form (a member died meanwhile) arrives in the next.
// `refuse_join` (non-empty: who asks) makes a process that finds the job running throw
// dpt::ElasticError saying so, before it arrives: a program that cannot take in a
// newcomer's state (dpt::torch::ElasticLoop) must not leave an arrival the members wait for.
std::optional<ElasticSetup> elastic_setup(const dpt::CommOptions& options, const std::string& refuse_join = "");

}  // namespace train
