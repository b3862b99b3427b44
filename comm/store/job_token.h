#pragma once
// The per-job secret of the tcp backend and its store, and the proofs built from it.
//
// Terms:
//   token      - the job's shared secret (any bytes; a generated one is 64 hex chars).
//                Sources, first that applies: COMM_JOB_TOKEN; tools/launch draws one and
//                hands it to its ranks in COMM_JOB_TOKEN; under mpirun without it rank 0
//                draws one and sends it to the others over MPI (backends/registry.cpp).
//                It is never logged or put in an error message.
//   transcript - every byte both sides sent in a handshake so far (both nonces
//                included), so a proof is bound to this one connection.
//   proof      - HMAC-SHA256(token, label || transcript). The label differs per role
//                ("...-server" vs "...-client"), so one side's proof can never be
//                replayed or reflected as the other's.
#include <string>
#include <string_view>

#include "comm/net/hmac.h"

namespace dpt {

// Shortest COMM_JOB_TOKEN accepted: a short secret is guessable offline from one
// recorded handshake.
inline constexpr size_t kMinJobTokenBytes = 16;

// Least estimated entropy of COMM_JOB_TOKEN (token_entropy_bits).
inline constexpr double kMinJobTokenBits = 64;

// COMM_JOB_TOKEN, or "" when unset. Throws std::invalid_argument when set but shorter
// than kMinJobTokenBytes or estimated below kMinJobTokenBits (the message does not
// contain the value).
std::string job_token_from_env();
// An estimate of a token's entropy: its length times the Shannon entropy of its
// characters' frequencies. It cannot tell a random token from a memorable one of the same
// letters, but it catches the short, the repetitive and the few-symbol ("aaaa...",
// "0000...1", "abababab...").
double token_entropy_bits(std::string_view token);
// The refusal of a job that runs without a token although other hosts can reach it
// (`exposure` says how: "MASTER_ADDR 10.0.0.1 is not a loopback address"), or "" when it
// may run: it has a token, it is reachable from this host only (exposure empty), or
// COMM_RUN_OPEN=1 (then logged once as a warning).
std::string open_job_refusal(const std::string& token, const std::string& exposure);
// How a job that listens on `listen_host` and meets at `master` is exposed beyond this
// host, or "" when both are loopback.
std::string network_exposure(const std::string& master, const std::string& listen_host);
// 32 random bytes as 64 hex characters.
std::string generate_job_token();
// Logs, once per process, that connections are authenticated with an empty token.
void warn_if_no_job_token(const std::string& token);

crypto::Mac handshake_proof(std::string_view token, std::string_view label, std::string_view transcript);
// Constant-time comparison of a received proof against the expected one.
bool check_handshake_proof(std::string_view token, std::string_view label, std::string_view transcript,
                           const unsigned char* received);

}  // namespace dpt
