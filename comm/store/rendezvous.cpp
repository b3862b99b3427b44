#include "comm/store/rendezvous.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace dpt {

using Clock = std::chrono::steady_clock;

// Waiting happens in slices so a duplicate rank or a world-size disagreement seen by
// another process is reported within a slice, not only at the full timeout.
static constexpr Millis kSlice{250};
static constexpr Millis kMaxSlice{2000};
static constexpr Millis kServerGrace{1500};

std::string format_rank_list(const std::vector<int>& ranks) {
  std::string s = "[";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) s += ", ";
    s += std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s + "]";
}

void report_duplicate_rank(Store& store, const std::string& prefix, int rank, ErrorContext ctx) {
  ctx.op = "rendezvous";
  store.set(prefix + "/duplicate", std::to_string(rank));
  throw UsageError(ctx, "rank " + std::to_string(rank) +
                            " was claimed by two processes (two processes started with the same RANK?)");
}

void rendezvous(Store& store, const std::string& prefix, int rank, int world, Millis timeout,
                ErrorContext ctx, const std::function<bool(int rank)>& gone) {
  ctx.op = "rendezvous";
  if (world <= 0 || rank < 0 || rank >= world)
    throw UsageError(ctx, "rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world) +
                              "): check RANK and WORLD_SIZE");
  const std::string world_key = prefix + "/world";
  const std::string dup_key = prefix + "/duplicate";
  const std::string joined_key = prefix + "/joined";
  auto rank_key = [&](int r) { return prefix + "/rank/" + std::to_string(r); };

  if (rank == 0) store.set(world_key, std::to_string(world));
  if (store.add(rank_key(rank), 1) > 1) report_duplicate_rank(store, prefix, rank, ctx);

  bool world_agrees = rank == 0;  // read once: rank 0 writes it before anything else
  auto check_world = [&] {
    if (world_agrees || !store.check(world_key)) return;
    std::string w = store.get(world_key, kSlice);
    if (w != std::to_string(world))
      throw MismatchError(ctx, "this rank has WORLD_SIZE=" + std::to_string(world) + " but rank 0 has " + w +
                                   ": were the ranks started with different launch variables?");
    world_agrees = true;
  };
  auto check_duplicate = [&] {
    if (store.check(dup_key))
      throw UsageError(ctx, "rank " + store.get(dup_key, kSlice) +
                                " was claimed by two processes (two processes started with the same RANK?)");
  };

  // Rank 0 waits for every rank's key and then sets <prefix>/joined; the others wait for
  // that one key. A wait naming all P keys from every rank made the store parse P keys
  // per rank per slice (O(P^2) at start-up); now only rank 0's wait is O(P).
  std::vector<std::string> keys;
  if (rank == 0)
    for (int r = 0; r < world; ++r) keys.push_back(rank_key(r));
  else
    keys.push_back(joined_key);
  const auto start = Clock::now();
  // Rank 0 serves the TCP store, and its exit takes the store away: it waits a little
  // longer than the others so that they can still read who is missing and say so.
  const auto deadline = start + timeout + (rank == 0 && world > 1 ? kServerGrace : Millis(0));
  // Slices grow from kSlice to kMaxSlice: a rank that waits long (hundreds of ranks
  // starting on a few cores) asks the store a few times a second, not four.
  Millis slice = kSlice;
  for (;;) {
    check_world();
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    try {
      store.wait(keys, std::clamp(left, Millis(0), slice));
      break;
    } catch (const TimeoutError&) {
      slice = std::min(slice * 2, kMaxSlice);
      check_duplicate();
      if (gone) {
        std::vector<int> dead;
        for (int r = 0; r < world; ++r)
          if (!store.check(rank_key(r)) && gone(r)) dead.push_back(r);
        if (!dead.empty())
          throw PeerError(ctx, "rank(s) " + format_rank_list(dead) + " will not join: the process exited before it " +
                                   "reached the rendezvous");
      }
      if (Clock::now() < deadline) continue;
    }
    std::vector<int> missing;
    for (int r = 0; r < world; ++r)
      if (!store.check(rank_key(r))) missing.push_back(r);
    if (missing.empty() && rank == 0) break;  // the last one arrived just now
    if (missing.empty())
      throw TimeoutError(ctx, "every rank joined, but rank 0 did not confirm it within " +
                                  fmt::format("{:g}", timeout.count() / 1000.0) +
                                  " s (did rank 0 exit or hang after joining?)");
    throw TimeoutError(ctx, std::to_string(world - static_cast<int>(missing.size())) + " of " +
                                std::to_string(world) + " ranks joined within " +
                                fmt::format("{:g}", timeout.count() / 1000.0) + " s, missing ranks " +
                                format_rank_list(missing) + " (did they start, and do they use the same MASTER_ADDR/MASTER_PORT?)");
  }
  if (rank == 0) store.set(joined_key, "1");
  check_world();
  check_duplicate();
}

}  // namespace dpt
