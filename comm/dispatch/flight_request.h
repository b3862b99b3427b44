#pragma once
// Flight records asked for through the job's rendezvous store, so that a person on any
// host that reaches the store (and holds the job's secret) can get every rank's record
// from a running job: no signal has to cross hosts (SIGUSR2 is the same-host way).
//
// Terms:
//   watcher   one thread per process (started with its first tcp store: the tcp world's,
//             or an elastic job's), on a connection of its own to the store, parked in a
//             get of the next request's key: the server holds the request until the key
//             is set (no polling, nothing on the training threads). When it is set, the
//             watcher writes this process's record (dump_flight_records, as SIGUSR2
//             does) and acknowledges. It ends quietly when the store goes away (the job
//             ends).
//   rank      the process's launch rank (RANK, or MPI's): the record's file name, rank<R>.json.
//   request   n = 1, 2, ...: flight_request_records adds 1 to the counter, then sets the
//             request's key to its reason. A watcher reads the counter when it starts and
//             answers every request after that, in order.
// Keys (all under "flight/"):
//   world          the job's world size (every watcher writes it; elastic: the most members)
//   watching/<r>   rank r's watcher is parked (set after it read the counter)
//   requests       the counter
//   request/<n>    request n's reason
//   done/<n>/<r>   rank r's answer: "<host>:<path of its record>", or why it wrote none
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "comm/store/store.h"

namespace dpt {

// Starts this process's watcher once (later calls do nothing; none with DPT_FLIGHT=0): it
// connects to the store at host:port with `token`, as every store client of the job does.
void watch_flight_requests(const std::string& host, int port, const std::string& token);

struct FlightRequestResult {
  int64_t request = 0;                 // its number
  int world = 0;                       // ranks asked
  std::map<int, std::string> answers;  // rank -> its done/ value
  std::vector<int> silent;             // ranks that did not answer by the deadline, in order
};

// The asking side (build/bin/flight_request): waits for the job's world size and every
// watcher (until `deadline`), sets a new request with `reason` and waits for the answers
// until `deadline`. `world` > 0 overrides the world size the watchers wrote.
// Throws TimeoutError when the store holds no flight/world by the deadline (no watcher
// ever started: not a dpt job, or one with no tcp store).
FlightRequestResult request_flight_records(Store& store, const std::string& reason,
                                           std::chrono::steady_clock::time_point deadline, int world = 0);

}  // namespace dpt
