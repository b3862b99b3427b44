#pragma once
// A job's secret carried by munge, the credential service every Slurm cluster runs: how
// ranks that srun started (and that share nothing but the cluster) agree on a job token
// with nothing set by hand.
//
// Terms:
//   credential - munge's text form of a payload: encrypted and signed with the cluster's
//                munge key, restricted here to this user's uid, with a time to live. Only a
//                process of this user on a host holding that key can decode it, and each
//                credential decodes once per host (munged keeps a replay cache), so one is
//                minted per request. A credential may therefore travel in the open: through
//                the store's unauthenticated bootstrap request, or PyTorch's store.
//   socket     - munged's socket: AuthInfo's "socket=" in slurm.conf ($SLURM_CONF, else
//                /etc/slurm/slurm.conf) where set (Slurm then talks to that munged), else
//                munge's default.
// The munge and unmunge commands do the work (no library to link: a machine without
// Slurm builds and runs dpt the same).
#include <string>

namespace dpt {

// Under Slurm (SLURM_JOB_ID set) with the munge and unmunge commands on PATH.
bool munge_usable();
// A credential carrying `payload`, decodable by this uid only. Throws std::runtime_error
// with munge's own message (munged not running, say).
std::string munge_seal(const std::string& payload);
// The payload of a credential minted by this uid. Throws std::runtime_error with
// unmunge's message (expired, replayed, another uid's, another cluster's key).
std::string munge_open(const std::string& credential);

}  // namespace dpt
