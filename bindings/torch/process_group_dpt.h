#pragma once
// ProcessGroupDpt: a torch.distributed backend (PyTorch 2.x's c10d::Backend, which
// PyTorch's ProcessGroup dispatches to by device) as a thin adapter over our
// Communicator. Each PyTorch call checks its tensors, makes dense views of them
// (tensor_buffers.h), issues the Communicator's asynchronous operations and returns a
// DptWork over them (dpt_work.h). The Communicator orders collectives, moves the bytes,
// bounds every wait by the group's timeout and words the errors.
//
// Terms:
//   one tensor per process - every call takes the single-tensor forms (the *_multigpu
//                forms of PyTorch, several tensors per process, are refused by name).
//   uneven all-to-all - alltoall_base with split sizes and alltoall with tensors of
//                different sizes: point-to-point to every peer on tags of their own,
//                `kUnevenAlltoallTag + n` for the group's n-th such call (every rank
//                counts alike), above the tags PyTorch programs may use.
//   user tags  - send/recv tags in [0, kMaxTorchTag]; above them, the uneven
//                all-to-all's, the monitored barrier's and the envelope tag of any-source
//                receives (any_source_mailbox.h: every send of the group carries an envelope).
//   monitored barrier - dist.monitored_barrier: every rank reports to rank 0, which names
//                the ranks that did not arrive in time, then releases the others
//                (monitored_barrier.cpp). Point-to-point on `kMonitoredBarrierTag + n`.
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <memory>

#include "bindings/torch/any_source_mailbox.h"
#include "bindings/torch/dpt_work.h"
#include "comm/communicator.h"

namespace dpt::torch_plugin {

class ProcessGroupDpt : public c10d::Backend {
 public:
  static constexpr int64_t kMaxTorchTag = (int64_t{1} << 29) - 1;
  static constexpr int64_t kUnevenAlltoallTag = int64_t{1} << 29;
  static constexpr int64_t kMonitoredBarrierTag = kUnevenAlltoallTag + (int64_t{1} << 28);

  ProcessGroupDpt(std::unique_ptr<Communicator> comm, c10::intrusive_ptr<c10d::Store> store);
  ~ProcessGroupDpt() override;

  const std::string getBackendName() const override { return "dpt"; }
  std::string transport() const { return comm_->backend_name(); }
  Communicator& communicator() { return *comm_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                            const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                  const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) override;
  // The coalescing manager's fast path (all_gather_into_tensor inside
  // dist._coalescing_manager): one allgather per pair, one Work.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                  std::vector<at::Tensor>& inputs,
                                                                  const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                         const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                          const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                       const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                  std::vector<at::Tensor>& inputs,
                                                                  const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                                std::vector<int64_t>& input_splits,
                                                const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // Collectives issued so far: every rank counts alike from 0 (PyTorch 2.x's rule), so
  // equal numbers mean the ranks are at the same collective.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return collectives_issued_.load(); }

 private:
  OpStatePtr new_op(const std::string& name, std::chrono::milliseconds timeout, bool p2p = false);
  c10::intrusive_ptr<c10d::Work> start(c10d::OpType type, OpStatePtr op);
  // Point-to-point exchange with every peer: sends[p] to p, recvs[p] from p (own slot copied).
  void exchange(OpState& op, const std::vector<at::Tensor>& sends, const std::vector<at::Tensor>& recvs);
  void check_tag(const std::string& op, int tag) const;
  void check_peer(const std::string& op, int peer) const;

  // Destroyed after the communicator, whose end settles the envelope receives.
  std::unique_ptr<AnySourceMailbox> mailbox_;
  // Receives and sends a monitored barrier gave up on, with their one-byte buffers: kept
  // past the communicator, which settles them as it ends (a late peer may complete them).
  std::vector<std::pair<std::shared_ptr<uint8_t>, WorkPtr>> abandoned_;
  // Declared before the watcher, destroyed after it: the watcher drains first.
  std::unique_ptr<Communicator> comm_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::shared_ptr<Watcher> watcher_;
  std::atomic<int64_t> uneven_alltoalls_{0};
  std::atomic<int64_t> monitored_barriers_{0};
  std::atomic<uint64_t> collectives_issued_{0};
};

}  // namespace dpt::torch_plugin
