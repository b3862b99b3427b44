#include "comm/store/elastic_membership.h"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>


namespace dpt {

namespace {
using Clock = std::chrono::steady_clock;
constexpr Millis kPoll{20};
constexpr Millis kArrivalKeyWait{2000};  // an arrival's key follows its counter at once
}  // namespace

std::string encode_members(const Membership& m) {
  std::ostringstream out;
  for (size_t i = 0; i < m.ids.size(); ++i) out << "m " << m.ids[i] << " " << m.prev_ranks[i] << "\n";
  for (const auto& id : m.lost) out << "l " << id << "\n";
  return out.str();
}

Membership decode_members(const std::string& text, int generation) {
  if (!text.empty() && text[0] == '!') throw ElasticError(text.substr(1));
  Membership m;
  m.generation = generation;
  std::istringstream in(text);
  std::string kind, id;
  while (in >> kind >> id) {
    if (kind == "m") {
      int prev = -1;
      in >> prev;
      m.ids.push_back(id);
      m.prev_ranks.push_back(prev);
    } else if (kind == "l") {
      m.lost.push_back(id);
    } else {
      throw ElasticError("elastic membership of generation " + std::to_string(generation) + " is garbled ('" +
                         kind + "')");
    }
  }
  return m;
}

ElasticRendezvous::ElasticRendezvous(Store& store, std::string my_id, ElasticLimits limits)
    : store_(store), id_(std::move(my_id)), limits_(limits) {
  if (id_.empty() || id_.find_first_of(" \n/") != std::string::npos)
    throw std::invalid_argument("elastic id '" + id_ + "' must be non-empty, without spaces or '/'");
  if (limits_.min < 1 || limits_.max < limits_.min)
    throw std::invalid_argument("elastic limits: need 1 <= min <= max, got " + std::to_string(limits_.min) + ":" +
                                std::to_string(limits_.max));
}

std::string ElasticRendezvous::key(int g, const std::string& what) const {
  return "elastic/g" + std::to_string(g) + "/" + what;
}

void ElasticRendezvous::mark_dead(Store& store, const std::string& id, const std::string& how) {
  store.set("elastic/dead/" + id, how);
}

int ElasticRendezvous::current() {
  if (!store_.check("elastic/current")) return -1;
  return std::stoi(store_.get("elastic/current", limits_.timeout));
}

bool ElasticRendezvous::arrivals_waiting(int g) { return store_.add(key(g, "arrived"), 0) > 0; }

void ElasticRendezvous::mark_done() { store_.set("elastic/done", "1"); }

bool ElasticRendezvous::done() { return store_.check("elastic/done"); }

Membership ElasticRendezvous::read_members(int g) {
  Membership m = decode_members(store_.get(key(g, "members"), limits_.timeout), g);
  for (int r = 0; r < m.size(); ++r)
    if (m.ids[size_t(r)] == id_) m.rank = r;
  return m;
}

std::vector<std::string> ElasticRendezvous::expected_for(int g) {
  if (g == 0) return {};
  return read_members(g - 1).ids;
}

bool ElasticRendezvous::try_close(int g, const std::vector<std::string>& prev) {
  if (store_.add(key(g, "closed"), 1) != 1) return false;  // another process closes it
  const int64_t count = store_.add(key(g, "arrived"), 0);
  struct Arrival {
    std::string id;
    int prev = -1;
  };
  std::vector<Arrival> arrivals;
  std::set<std::string> seen;
  for (int64_t i = 0; i < count; ++i) {
    std::string text;
    try {
      text = store_.get(key(g, "arrival/" + std::to_string(i)), kArrivalKeyWait);
    } catch (const TimeoutError&) {
      continue;  // it died between counting itself and naming itself
    }
    std::istringstream in(text);
    Arrival a;
    in >> a.id >> a.prev;
    if (!a.id.empty() && seen.insert(a.id).second) arrivals.push_back(a);
  }
  // Survivors keep their order; newcomers follow, by id.
  std::stable_sort(arrivals.begin(), arrivals.end(), [](const Arrival& a, const Arrival& b) {
    const bool sa = a.prev >= 0, sb = b.prev >= 0;
    if (sa != sb) return sa;
    return sa ? a.prev < b.prev : a.id < b.id;
  });
  if (int(arrivals.size()) > limits_.max) arrivals.resize(size_t(limits_.max));
  Membership m;
  m.generation = g;
  for (const auto& a : arrivals) {
    m.ids.push_back(a.id);
    m.prev_ranks.push_back(a.prev);
  }
  for (const auto& id : prev)
    if (std::find(m.ids.begin(), m.ids.end(), id) == m.ids.end()) m.lost.push_back(id);
  if (m.size() < limits_.min) {
    std::string lost;
    for (const auto& id : m.lost) lost += (lost.empty() ? "" : ", ") + id;
    store_.set(key(g, "members"), "!generation " + std::to_string(g) + " would have " + std::to_string(m.size()) +
                                      " member(s), below the minimum of " + std::to_string(limits_.min) +
                                      "; lost: [" + lost + "]");
    return true;
  }
  store_.set(key(g, "members"), encode_members(m));
  store_.set("elastic/current", std::to_string(g));
  return true;
}

Membership ElasticRendezvous::form(int g, int prev_rank) {
  const auto t0 = Clock::now();
  const int64_t n = store_.add(key(g, "arrived"), 1);
  store_.set(key(g, "arrival/" + std::to_string(n - 1)), id_ + " " + std::to_string(prev_rank));
  // Who closes: the survivors of g-1, and anyone at the job's start; a newcomer joining a
  // running job waits for the members to arrive at a step boundary: they hold the state.
  // Only when every member of g-1 is dead (none can ever arrive) do newcomers close, after
  // `settle` from then so the other restarted processes come too; they hold no state, so
  // the trainer resumes from the last checkpoint on disk (DistTrainer::sync_state).
  const bool survivor = prev_rank >= 0 || g == 0;
  bool may_close = survivor;
  std::vector<std::string> prev = prev_rank >= 0 ? expected_for(g) : std::vector<std::string>{};
  if (!survivor && store_.check(key(g - 1, "members"))) {
    try {
      prev = expected_for(g);
    } catch (const ElasticError&) {  // g-1 did not form (below the minimum): the job is failing
    }
  }
  auto all_dead = [&] {
    return !prev.empty() && std::all_of(prev.begin(), prev.end(), [&](const std::string& id) {
      return store_.check("elastic/dead/" + id);
    });
  };
  Clock::time_point orphaned{};  // when this newcomer saw every member of g-1 dead
  auto t_last_dead_check = Clock::now() - limits_.settle;
  for (;;) {
    if (store_.check(key(g, "members"))) return read_members(g);
    if (!survivor && done()) {  // the members finished while this newcomer waited
      Membership out;
      out.generation = g;
      return out;
    }
    if (!may_close && Clock::now() - t_last_dead_check >= Millis(500)) {  // a few store reads, twice a second
      t_last_dead_check = Clock::now();
      if (all_dead()) {
        may_close = true;
        orphaned = Clock::now();
      }
    }
    if (may_close && !survivor) {  // every member of g-1 is gone: close after settle, with >= min
      if (Clock::now() - orphaned >= limits_.settle && store_.add(key(g, "arrived"), 0) >= limits_.min) try_close(g, prev);
    } else if (may_close) {
      const int64_t count = store_.add(key(g, "arrived"), 0);
      bool all_in = false;
      if (g == 0) {
        all_in = count >= limits_.max;
      } else {
        std::set<std::string> arrived;
        for (int64_t i = 0; i < count; ++i) {
          const std::string k = key(g, "arrival/" + std::to_string(i));
          if (!store_.check(k)) continue;
          std::istringstream in(store_.get(k, kArrivalKeyWait));
          std::string id;
          in >> id;
          arrived.insert(id);
        }
        all_in = std::all_of(prev.begin(), prev.end(), [&](const std::string& id) {
          return arrived.count(id) || store_.check("elastic/dead/" + id);
        });
      }
      const bool settled = Clock::now() - t0 >= limits_.settle && count >= limits_.min;
      if (all_in || settled) try_close(g, prev);
    }
    // Only a member gives up: a newcomer holds nothing and waits until it is taken in,
    // the job is done, or the store is gone. (With a timeout of its own, a newcomer whose
    // wait outlasted the members' failing communicator builds, each up to the rendezvous
    // timeout, exited just as they closed the next generation with it in the list; that
    // generation then failed waiting for it, and its restart arrived in the next: chaos
    // runs livelocked so.)
    if (survivor && Clock::now() - t0 > limits_.timeout)
      throw TimeoutError(ErrorContext{-1, -1, "elastic", "rendezvous", -1, g},
                         "generation " + std::to_string(g) + " did not form within " +
                             std::to_string(limits_.timeout.count() / 1000) + " s (process " + id_ + ")");
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace dpt
