#include "comm/dispatch/flight_request.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "comm/dispatch/flight_recorder.h"
#include "comm/error.h"
#include "comm/launch/env.h"
#include "comm/launch/launch_env.h"
#include "comm/net/log.h"
#include "comm/store/tcp_store.h"

namespace dpt {
namespace {

using Clock = std::chrono::steady_clock;

// A parked get is answered at this timeout when nobody asks, and parked again: the
// server holds one request per watcher, nothing runs in between.
constexpr Millis kPark{std::chrono::hours(1)};
// What of a request's reason goes into the records and the log.
constexpr size_t kMaxReasonBytes = 200;

std::string request_key(int64_t n) { return "flight/request/" + std::to_string(n); }
std::string done_key(int64_t n, int rank) { return "flight/done/" + std::to_string(n) + "/" + std::to_string(rank); }
std::string watching_key(int rank) { return "flight/watching/" + std::to_string(rank); }
constexpr const char* kWorldKey = "flight/world";
constexpr const char* kCounterKey = "flight/requests";

std::string host_name() {
  char name[256] = {0};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

// Printable and short: it ends up in a JSON file and on stderr.
std::string clean_reason(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, kMaxReasonBytes)) out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  return out;
}

void watch(const std::string& host, int port, const std::string& token, int rank, int world) {
  // The client is never destroyed and the thread never returns: it is detached, so the
  // process may be exiting (static destructors, OpenSSL's own clean-up) when the store
  // closes under it, and tearing down a connection then crashed the process (seen: a
  // libtorch program's rank 1 with SIGSEGV after its last step). Parked, it touches nothing.
  try {
    auto* client = new TcpStoreClient(host, port, env::rendezvous_timeout(),
                                      ErrorContext{rank, world, "store", "flight request", -1, -1}, token);
    TcpStoreClient& store = *client;
    store.set(kWorldKey, std::to_string(world));
    // Requests made before this process started are not its to answer.
    int64_t next = store.add(kCounterKey, 0) + 1;
    store.set(watching_key(rank), std::to_string(next));
    if (rank == 0)
      log::info("flight records on request: build/bin/flight_request --master-addr {} --master-port {}", host, port);
    const std::string where = host_name() + ":";
    for (;; ++next) {
      std::string reason;
      for (;;) {
        try {
          reason = store.get(request_key(next), kPark);
          break;
        } catch (const TimeoutError&) {
          // nobody asked within kPark: park again
        }
      }
      std::string why;
      const std::string path =
          dump_flight_records("store request " + std::to_string(next) + ": " + clean_reason(reason), false, &why);
      store.set(done_key(next, rank), path.empty() ? "no record: " + why : where + path);
    }
  } catch (const std::exception&) {
    // The store went away (rank 0, which serves it, ended: the job is over) or refused
    // us: nothing more will be asked. Silent, as the job's own errors say what happened.
  }
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

Millis left_until(Clock::time_point deadline) {
  return std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now()));
}

}  // namespace

void watch_flight_requests(const std::string& host, int port, const std::string& token) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (!env::get_bool("DPT_FLIGHT")) return;  // nothing recorded, nothing to answer with
    LaunchInfo li;
    try {
      li = detect_launch();
    } catch (const std::exception&) {
      return;  // the launch variables are broken: the job says so elsewhere
    }
    // Detached: it holds only its own copies and its own connection, and stays parked in
    // the server until the store closes it (process exit ends it where that comes first).
    // (OpenSSL is told at load to keep its state until exit: comm/net/hmac.cpp.)
    std::thread(watch, host, port, token, li.rank, li.world_size).detach();
  });
}

FlightRequestResult request_flight_records(Store& store, const std::string& reason, Clock::time_point deadline,
                                           int world) {
  FlightRequestResult res;
  if (world <= 0) {
    const std::string w = store.get(kWorldKey, left_until(deadline));
    try {
      world = std::stoi(w);
    } catch (const std::exception&) {
      world = 0;
    }
    if (world <= 0) throw std::runtime_error("the store's " + std::string(kWorldKey) + " is '" + w + "', not a world size");
  }
  res.world = world;
  // A watcher still starting (at the job's start) would miss a request made before it
  // read the counter: give them half the time, and name any that never came below.
  std::vector<std::string> watching;
  for (int r = 0; r < world; ++r) watching.push_back(watching_key(r));
  try {
    store.wait(watching, left_until(Clock::now() + left_until(deadline) / 2));
  } catch (const TimeoutError&) {
  }
  res.request = store.add(kCounterKey, 1);
  store.set(request_key(res.request), reason);
  std::vector<std::string> done;
  for (int r = 0; r < world; ++r) done.push_back(done_key(res.request, r));
  try {
    store.wait(done, left_until(deadline));
  } catch (const TimeoutError&) {
    // a stopped, hung or dead rank: named in `silent`, never waited on past the deadline
  }
  for (int r = 0; r < world; ++r) {
    if (store.check(done[size_t(r)])) res.answers[r] = store.get(done[size_t(r)], Millis(1000));
    else res.silent.push_back(r);
  }
  return res;
}

}  // namespace dpt
