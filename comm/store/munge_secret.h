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
//   socket     - munged's socket: COMM_MUNGE_SOCKET, else AuthInfo's "socket=" in
//                slurm.conf ($SLURM_CONF, else /etc/slurm/slurm.conf) where set (Slurm then
//                talks to that munged), else munge's default.
//   asked      - build/bin/launch --nnodes without COMM_JOB_TOKEN, where munge works, sets
//                COMM_JOB_TOKEN_BY_MUNGE=1 for its ranks: they agree on a token as srun's do.
// The munge and unmunge commands do the work (no library to link: a machine without
// Slurm builds and runs dpt the same).
#include <string>

namespace dpt {

inline constexpr const char* kTokenByMunge = "COMM_JOB_TOKEN_BY_MUNGE";

// Under Slurm (SLURM_JOB_ID set) with the munge and unmunge commands on PATH.
bool munge_usable();
// munge and unmunge on PATH and munged answering (a credential round trip).
bool munge_works();
// COMM_JOB_TOKEN_BY_MUNGE=1 (launch asked its ranks to agree on a token by munge).
bool token_by_munge_asked();
// A credential carrying `payload`, decodable by this uid only. Throws std::runtime_error
// with munge's own message (munged not running, say).
std::string munge_seal(const std::string& payload);
// The payload of a credential minted by this uid. Throws std::runtime_error with
// unmunge's message (expired, replayed, another uid's, another cluster's key).
std::string munge_open(const std::string& credential);

}  // namespace dpt
