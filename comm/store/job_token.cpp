#include "comm/store/job_token.h"

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include "comm/launch/env.h"
#include "comm/net/log.h"

namespace dpt {

std::string job_token_from_env() {
  const char* v = std::getenv(env::kJobToken);
  if (!v || !*v) return "";
  std::string t(v);
  if (t.size() < kMinJobTokenBytes)
    throw std::invalid_argument(std::string(env::kJobToken) + " is " + std::to_string(t.size()) +
                                " characters long; use at least " + std::to_string(kMinJobTokenBytes) +
                                " (e.g. `openssl rand -hex 32`)");
  return t;
}

std::string generate_job_token() {
  unsigned char raw[32];
  crypto::random_bytes(raw, sizeof raw);
  return crypto::to_hex(raw, sizeof raw);
}

void warn_if_no_job_token(const std::string& token) {
  static std::atomic<bool> warned{false};
  if (!token.empty() || warned.exchange(true)) return;
  log::warn("{} is not set and no launcher provided one: tcp connections are authenticated with an empty "
            "token, so any process that can reach this job's ports can join it (use tools/launch or mpirun, "
            "or set {})",
            env::kJobToken, env::kJobToken);
}

crypto::Mac handshake_proof(std::string_view token, std::string_view label, std::string_view transcript) {
  std::string msg;
  msg.reserve(label.size() + 1 + transcript.size());
  msg.append(label);
  msg.push_back('\0');  // label and transcript cannot run into each other
  msg.append(transcript);
  return crypto::hmac_sha256(token, msg);
}

bool check_handshake_proof(std::string_view token, std::string_view label, std::string_view transcript,
                           const unsigned char* received) {
  crypto::Mac want = handshake_proof(token, label, transcript);
  return crypto::constant_time_equal(want.data(), received, want.size());
}

}  // namespace dpt
