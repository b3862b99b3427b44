#pragma once
// The launcher's part in an elastic job (launch --elastic).
//
// Terms (see comm/store/elastic_membership.h for generations):
//   store    node 0's launcher serves the rendezvous store at MASTER_ADDR:MASTER_PORT
//            for the whole job (as torchrun's agent does), so losing any rank, rank 0
//            included, loses no coordination. Every launcher keeps a client to it.
//   id       "n<node>.l<slot>.i<incarnation>": the name a process has in the job's
//            memberships; a restarted slot gets the next incarnation.
//   dead     when a child exits, its launcher writes elastic/dead/<id>, so the
//            survivors re-form at once instead of waiting for it.
//   done     elastic/done, written by the members when training finished: after it, a
//            failure is a real failure again.
//   cut off  a launcher whose store call failed stops asking (a host cut from the
//            network must still end promptly, with its ranks' errors).
#include <memory>
#include <string>

#include "comm/store/tcp_store.h"
#include "tools/launch/options.h"

namespace launch {

class ElasticRole {
 public:
  // Node 0 binds the store (net::SocketError, with the address, if it cannot).
  explicit ElasticRole(const Options& o);
  ~ElasticRole();

  static std::string id_for(int node, int slot, int incarnation);
  void mark_dead(const std::string& id, const std::string& how);
  bool done();

 private:
  std::unique_ptr<dpt::TcpStoreServer> server_;
  std::unique_ptr<dpt::TcpStoreClient> client_;
  bool reachable_ = true;  // false after a store call failed: this host is cut off
  bool done_seen_ = false;
};

}  // namespace launch
