#pragma once
// What a communicator carried for its user: operations and payload bytes. Counted at the
// Communicator's front door, for every backend alike, so a trainer that switches
// backends can show which one moved its gradients (and that the one it left moved
// nothing more). Payload, not wire bytes: what this rank handed in and got out of each
// operation, whatever algorithm or transport ran it (a ring allreduce of B bytes counts
// B sent and B received, though about 2B cross the wire each way).
#include <cstdint>
#include <utility>

namespace dpt {

struct CollArgs;

struct Traffic {
  uint64_t ops = 0;             // point-to-point calls issued and collectives completed
  uint64_t bytes_sent = 0;      // payload this rank contributed
  uint64_t bytes_received = 0;  // payload delivered to this rank
  // Bytes exchanged with ranks on other hosts (the topology: COMM_FAKE_HOSTS's emulated
  // hosts count), counted where messages move rather than at the front door: every
  // point-to-point message this communicator moved to or from such a rank, its own
  // algorithms' included (a split of it runs on its point-to-point calls, so the tcp
  // backend's world counts its splits' messages too), plus the whole payload of each
  // native (backend-run) collective on a communicator that spans hosts (an upper bound:
  // the tcp backend's shared-memory arena under COMM_FAKE_HOSTS, Open MPI's own). What
  // an Open MPI or NCCL split moves is counted by that split, not by its parent.
  uint64_t other_hosts_sent = 0, other_hosts_received = 0;
  uint64_t bytes() const { return bytes_sent + bytes_received; }
  uint64_t other_hosts_bytes() const { return other_hosts_sent + other_hosts_received; }
};

// Payload bytes (sent, received) of one collective on `rank` of `size`:
//   sent: the send buffer where this rank contributes one (allreduce, reduce,
//         reduce_scatter, allgather, gather, alltoall; broadcast and scatter: the root);
//   received: the result this rank gets (allreduce, reduce_scatter, allgather,
//         alltoall, scatter; reduce and gather: the root; broadcast: the others).
std::pair<uint64_t, uint64_t> collective_payload(const CollArgs& a, int rank);

}  // namespace dpt
