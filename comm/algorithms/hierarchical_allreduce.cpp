// Hierarchical allreduce over the communicator's hosts (comm/launch/topology.h), as Horovod's
// hierarchical allreduce and Open MPI's coll/han do:
//   1. reduce-scatter in each host: a ring over its L ranks leaves local rank i with
//      the host's sum of chunk (i + 1) mod L of the buffer;
//   2. across hosts: the L ranks with one local rank each run an allreduce of their
//      chunk with their peers on the other H - 1 hosts, L such allreduces at once, each
//      on 1/L of the buffer (the algorithm `auto` picks for that size and H ranks);
//   3. allgather in each host: the ring again, every rank ends with every chunk.
// Each host sends 2 (H - 1) / H of the buffer over its link whatever the launcher's
// rank numbering, where a flat ring sends 2 (P - 1) / P of it per crossing link, and
// with round-robin numbering every one of its links crosses the network. Every element
// is reduced once, in one order for all ranks: the ranks end bit-identical (the order
// differs from the flat ring's, so the bits may differ from its by rounding).
// Buffers of at least two pieces (COMM_HIERARCHICAL_PIECE_BYTES): a pipeline of pieces,
// the host phases of some overlapping the cross-host allreduce of others (pipelined()).
// Hosts with different numbers of ranks: a ring in host order (crossing the network
// once per host per step). One host, or one rank per host: the flat ring.
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "comm/algorithms/registry.h"
#include "comm/algorithms/ring_common.h"

namespace dpt::algo {

// The three phases one after another on `data` (in place), on this thread.
static void three_phases(Communicator& c, const CollArgs& in_place, const Buffer& data, int L) {
  Communicator& host = c.host_group();
  Communicator& across = c.cross_host_group();
  CollArgs d = in_place;
  d.send = d.recv = data;
  const ChunkLayout layout{data.count, L};
  ring_reduce_scatter_phase(host, d, data, layout, 0);
  const int mine = mod(host.rank() + 1, L);
  const Buffer shard = data.slice(layout.offset(mine), layout.len(mine));
  if (shard.count > 0) {  // empty on every host alike (same layout), so all skip together
    CollArgs b = d;
    b.send = b.recv = shard;
    auto_pick(CollKind::allreduce, shard.bytes(), across.size(), c.options().thresholds, across.topology())
        .run(across, b);
  }
  ring_allgather_phase(host, d, data, layout, 1, post_allgather_recvs(host, d, data, layout, 1));
}

// Buffers of at least two pieces (COMM_HIERARCHICAL_PIECE_BYTES): the phases run as a
// pipeline of pieces, so the host's reduce-scatter or allgather of one piece (memory and
// the host's cores) overlaps another piece's allreduce across hosts (the network); one
// after another, the host phases left the link idle for their whole time. This thread
// runs the host phases: every piece's reduce-scatter, then every piece's allgather as
// its allreduce ends; a second thread runs the allreduces across hosts, each as its
// piece's reduce-scatter ends. Each group sees its phases in the same order on every
// rank, all under this collective's tag: messages of one group between two ranks match
// in the order sent, as the ring's segments do, and the two groups share no pair of
// ranks. The last piece takes the remainder. Returns false for buffers under two pieces.
static bool pipelined(Communicator& c, const CollArgs& in_place, int L) {
  const Buffer& all = in_place.recv;
  const size_t piece = c.options().thresholds.hierarchical_piece_bytes / dtype_size(all.dtype);
  if (piece == 0 || all.count < 2 * piece) return false;
  Communicator& host = c.host_group();
  Communicator& across = c.cross_host_group();
  const size_t pieces = all.count / piece;
  auto piece_of = [&](size_t i) {
    const size_t begin = i * piece;
    return all.slice(begin, (i + 1 == pieces ? all.count : begin + piece) - begin);
  };
  const int mine = mod(host.rank() + 1, L);  // the chunk the host reduce-scatter leaves here
  CollArgs d = in_place;

  std::mutex mu;
  std::condition_variable cv;
  size_t scattered = 0, reduced = 0;  // pieces whose reduce-scatter / cross-host allreduce ended
  bool stop = false;
  std::exception_ptr across_error;
  std::thread across_thread([&] {
    try {
      for (size_t i = 0; i < pieces; ++i) {
        {
          std::unique_lock<std::mutex> lk(mu);
          cv.wait(lk, [&] { return stop || scattered > i; });
          if (stop) return;
        }
        const Buffer p = piece_of(i);
        const ChunkLayout layout{p.count, L};
        const Buffer shard = p.slice(layout.offset(mine), layout.len(mine));
        if (shard.count > 0) {
          CollArgs b = in_place;  // (not d: this thread's own copy)
          b.send = b.recv = shard;
          auto_pick(CollKind::allreduce, shard.bytes(), across.size(), c.options().thresholds, across.topology())
              .run(across, b);
        }
        std::lock_guard<std::mutex> lk(mu);
        reduced = i + 1;
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lk(mu);
      across_error = std::current_exception();
      cv.notify_all();
    }
  });
  try {
    for (size_t i = 0; i < pieces; ++i) {
      const Buffer p = piece_of(i);
      d.send = d.recv = p;
      ring_reduce_scatter_phase(host, d, p, ChunkLayout{p.count, L}, 0);
      std::lock_guard<std::mutex> lk(mu);
      scattered = i + 1;
      cv.notify_all();
    }
    for (size_t i = 0; i < pieces; ++i) {
      {
        std::unique_lock<std::mutex> lk(mu);
        cv.wait(lk, [&] { return across_error || reduced > i; });
        if (reduced <= i) std::rethrow_exception(across_error);
      }
      const Buffer p = piece_of(i);
      const ChunkLayout layout{p.count, L};
      d.send = d.recv = p;
      ring_allgather_phase(host, d, p, layout, 1, post_allgather_recvs(host, d, p, layout, 1));
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
      cv.notify_all();
    }
    across_thread.join();  // ends with its current allreduce (a failed group fails it too)
    throw;
  }
  across_thread.join();
  return true;
}

static void run(Communicator& c, const CollArgs& a) {
  copy_if_distinct(a.recv, a.send);
  if (c.size() == 1 || a.recv.count == 0) return;
  CollArgs in_place = a;
  in_place.send = a.recv;
  const Topology& t = c.topology();
  const int L = t.uniform_local_size();
  const Algorithm& ring = *find(CollKind::allreduce, "ring");
  if (t.hosts() == 1 || L == 1) return ring.run(c, in_place);
  if (L == 0) return ring.run(c.host_ordered_group(), in_place);
  if (pipelined(c, in_place, L)) return;
  three_phases(c, in_place, a.recv, L);
}

// `auto`: on several hosts with L > 1 ranks each, numbered other than in blocks (the flat
// ring then leaves each host on every link), from COMM_HIERARCHICAL_MIN_BYTES. With block
// numbering the flat ring already crosses each host's link once per step; the hierarchy
// still sends fewer bytes over it, and pays from 4x the threshold where that saving is at
// least 10% (hierarchy_pays_allreduce in registry.h: 4 x 2 yes, 8 x 2 no, where
// docs/multihost.md measured the ring 10-15% faster).
extern const Algorithm hierarchical_allreduce;
const Algorithm hierarchical_allreduce{
    "hierarchical", CollKind::allreduce, run,
    hierarchy_pays_allreduce,
    {"COMM_HIERARCHICAL_MIN_BYTES", 64 * 1024,
     "auto selector: on several hosts with several ranks each, numbered other than in blocks, allreduce messages of at least this many bytes run "
     "hierarchically (reduce-scatter within hosts, allreduce across them, allgather within); numbered in blocks, from 4 times it where the "
     "hierarchy sends at least 10% fewer bytes over each host's link than the flat ring"}};

}  // namespace dpt::algo
