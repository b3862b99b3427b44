#include "comm/store/job_token.h"

#include <array>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "comm/launch/env.h"
#include "comm/net/log.h"
#include "comm/net/socket.h"

namespace dpt {

std::string job_token_from_env() {
  const char* v = std::getenv(env::kJobToken);
  if (!v || !*v) return "";
  std::string t(v);
  if (t.size() < kMinJobTokenBytes)
    throw std::invalid_argument(std::string(env::kJobToken) + " is " + std::to_string(t.size()) +
                                " characters long; use at least " + std::to_string(kMinJobTokenBytes) +
                                " (e.g. `openssl rand -hex 32`)");
  if (const double bits = token_entropy_bits(t); bits < kMinJobTokenBits)
    throw std::invalid_argument(fmt::format("{} has an estimated {:.0f} bits of entropy, below {:.0f}: too few distinct "
                                            "characters for its length to be guessed by nobody; draw one "
                                            "(`openssl rand -hex 32`)",
                                            env::kJobToken, bits, kMinJobTokenBits));
  return t;
}

double token_entropy_bits(std::string_view token) {
  if (token.empty()) return 0;
  std::array<size_t, 256> count{};
  for (unsigned char ch : token) ++count[ch];
  double h = 0;
  for (size_t c : count)
    if (c) {
      const double p = double(c) / double(token.size());
      h -= p * std::log2(p);
    }
  return h * double(token.size());
}

std::string network_exposure(const std::string& master, const std::string& listen_host) {
  if (!master.empty() && !net::is_loopback_host(master))
    return "MASTER_ADDR " + master + " is not a loopback address";
  if (!listen_host.empty() && !net::is_loopback_host(listen_host))
    return "its ranks listen on " + listen_host + ", not a loopback address";
  return "";
}

std::string open_job_refusal(const std::string& token, const std::string& exposure) {
  if (!token.empty() || exposure.empty()) return "";
  if (env::get_string(env::kRunOpen) == "1") {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log::warn("running open ({}=1): {}, and connections are authenticated with an empty token, so anyone who "
                "reaches this job's ports can join it and read or change its traffic",
                env::kRunOpen, exposure);
    return "";
  }
  return fmt::format("{} is not set and no launcher provided one, but this job can be reached from other hosts ({}): "
                     "refusing to run open. Start it with build/bin/launch, mpirun or srun (each provides a secret), "
                     "set {} to the same value on every rank (`openssl rand -hex 32`), or set {}=1 to run without "
                     "one (anyone who reaches its ports could then join it)",
                     env::kJobToken, exposure, env::kJobToken, env::kRunOpen);
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
            "token, so any process that can reach this job's ports can join it (use build/bin/launch, mpirun "
            "or srun, or set {})",
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
