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

// COMM_JOB_TOKEN, or "" when unset. Throws std::invalid_argument when set but shorter
// than kMinJobTokenBytes (the message does not contain the value).
std::string job_token_from_env();
// 32 random bytes as 64 hex characters.
std::string generate_job_token();
// Logs, once per process, that connections are authenticated with an empty token.
void warn_if_no_job_token(const std::string& token);

crypto::Mac handshake_proof(std::string_view token, std::string_view label, std::string_view transcript);
// Constant-time comparison of a received proof against the expected one.
bool check_handshake_proof(std::string_view token, std::string_view label, std::string_view transcript,
                           const unsigned char* received);

}  // namespace dpt
