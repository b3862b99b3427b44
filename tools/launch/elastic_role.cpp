#include "tools/launch/elastic_role.h"

#include <cstdlib>

#include "comm/launch/env.h"
#include "comm/store/elastic_membership.h"
#include "comm/store/job_token.h"
#include "comm/store/munge_secret.h"
#include "tools/launch/process_io.h"

namespace launch {

ElasticRole::ElasticRole(const Options& o) {
  std::string token = dpt::job_token_from_env();
  // Several hosts and no secret, where munge works (launch.cpp): node 0 draws one and its
  // store hands it to the other launchers as munge credentials; each passes it to its
  // ranks in COMM_JOB_TOKEN.
  const bool by_munge = token.empty() && dpt::token_by_munge_asked();
  if (by_munge && o.node_rank == 0) token = dpt::generate_job_token();
  if (by_munge && o.node_rank != 0)
    token = dpt::fetch_job_token_by_munge(o.master_addr, o.master_port, dpt::env::rendezvous_timeout(),
                                          dpt::ErrorContext{-1, -1, "launch", "elastic store", -1, -1});
  if (by_munge) {
    ::setenv(dpt::env::kJobToken, token.c_str(), 1);
    ::unsetenv(dpt::kTokenByMunge);
  }
  if (o.node_rank == 0) server_ = std::make_unique<dpt::TcpStoreServer>(o.master_addr, o.master_port, token);
  if (by_munge && server_) server_->hand_out_token_by_munge();
  // Short waits: a launcher cut off from the store must still end (and say so) promptly.
  client_ = std::make_unique<dpt::TcpStoreClient>(o.master_addr, o.master_port, dpt::Millis(5000),
                                                  dpt::ErrorContext{-1, -1, "launch", "elastic store", -1, -1}, token);
}

ElasticRole::~ElasticRole() = default;

std::string ElasticRole::id_for(int node, int slot, int incarnation) {
  return "n" + std::to_string(node) + ".l" + std::to_string(slot) + ".i" + std::to_string(incarnation);
}

void ElasticRole::mark_dead(const std::string& id, const std::string& how) {
  if (!reachable_) return;
  try {
    dpt::ElasticRendezvous::mark_dead(*client_, id, how);
  } catch (const std::exception& e) {
    reachable_ = false;
    say("could not record " + id + " as dead in the store (no longer asking it): " + e.what());
  }
}

bool ElasticRole::done() {
  if (done_seen_) return true;  // once written it stays: the store may be gone by the next ask
  if (!reachable_) return false;
  try {
    done_seen_ = client_->check("elastic/done");
    return done_seen_;
  } catch (const std::exception& e) {
    reachable_ = false;
    say(std::string("the rendezvous store is unreachable (no longer asking it): ") + e.what());
    return false;
  }
}

}  // namespace launch
