#include "comm/store/rendezvous.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace dpt {

using Clock = std::chrono::steady_clock;

// Waiting happens in slices so a duplicate rank or a world-size disagreement seen by
// another process is reported within a slice, not only at the full timeout.
static constexpr Millis kSlice{250};
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
  auto rank_key = [&](int r) { return prefix + "/rank/" + std::to_string(r); };

  if (rank == 0) store.set(world_key, std::to_string(world));
  if (store.add(rank_key(rank), 1) > 1) report_duplicate_rank(store, prefix, rank, ctx);

  auto check_world = [&] {
    if (rank == 0 || !store.check(world_key)) return;
    std::string w = store.get(world_key, kSlice);
    if (w != std::to_string(world))
      throw MismatchError(ctx, "this rank has WORLD_SIZE=" + std::to_string(world) + " but rank 0 has " + w +
                                   ": were the ranks started with different launch variables?");
  };
  auto check_duplicate = [&] {
    if (store.check(dup_key))
      throw UsageError(ctx, "rank " + store.get(dup_key, kSlice) +
                                " was claimed by two processes (two processes started with the same RANK?)");
  };

  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(rank_key(r));
  const auto start = Clock::now();
  // Rank 0 serves the TCP store, and its exit takes the store away: it waits a little
  // longer than the others so that they can still read who is missing and say so.
  const auto deadline = start + timeout + (rank == 0 && world > 1 ? kServerGrace : Millis(0));
  for (;;) {
    check_world();
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    try {
      store.wait(keys, std::clamp(left, Millis(0), kSlice));
      break;
    } catch (const TimeoutError&) {
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
    if (missing.empty()) break;  // the last one arrived just now
    throw TimeoutError(ctx, std::to_string(world - static_cast<int>(missing.size())) + " of " +
                                std::to_string(world) + " ranks joined within " +
                                fmt::format("{:g}", timeout.count() / 1000.0) + " s, missing ranks " +
                                format_rank_list(missing) + " (did they start, and do they use the same MASTER_ADDR/MASTER_PORT?)");
  }
  check_world();
  check_duplicate();
}

}  // namespace dpt
