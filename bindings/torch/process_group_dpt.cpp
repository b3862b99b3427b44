#include "bindings/torch/process_group_dpt.h"

#include "bindings/torch/tensor_buffers.h"

namespace dpt::torch_plugin {

using c10d::OpType;
using WorkRef = c10::intrusive_ptr<c10d::Work>;

ProcessGroupDpt::ProcessGroupDpt(std::unique_ptr<Communicator> comm, c10::intrusive_ptr<c10d::Store> store)
    : c10d::Backend(comm->rank(), comm->size()),
      comm_(std::move(comm)),
      store_(std::move(store)),
      watcher_(std::make_shared<Watcher>()) {
  mailbox_ = std::make_unique<AnySourceMailbox>(*comm_);
  init();
}

ProcessGroupDpt::~ProcessGroupDpt() {
  watcher_.reset();  // finishes what is still in flight while the communicator exists
}

OpStatePtr ProcessGroupDpt::new_op(const std::string& name, std::chrono::milliseconds timeout, bool p2p) {
  auto op = std::make_shared<OpState>();
  op->name = name;
  op->p2p = p2p;
  op->wait_timeout = timeout.count() > 0 ? Millis(timeout.count()) + Communicator::kWaitGrace : comm_->wait_timeout();
  if (!p2p) ++collectives_issued_;
  return op;
}

WorkRef ProcessGroupDpt::start(OpType type, OpStatePtr op) {
  return c10::make_intrusive<DptWork>(std::move(op), rank_, type, watcher_);
}

// ---- collectives on one tensor ----

WorkRef ProcessGroupDpt::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const ErrorContext ctx = comm_->context("broadcast");
  check_single(ctx, tensors.size(), "tensor");
  check_tensor(ctx, tensors[0]);
  if (opts.rootTensor != 0) refuse(ctx, "root tensor " + std::to_string(opts.rootTensor) + ": there is one tensor per process");
  auto op = new_op("broadcast", opts.timeout);
  at::Tensor t = output_view(*op, tensors[0], /*keep_values=*/true);
  op->pieces.push_back(comm_->broadcast_async(buffer_of(ctx, t), static_cast<int>(opts.rootRank)));
  op->outputs = tensors;
  return start(OpType::BROADCAST, op);
}

WorkRef ProcessGroupDpt::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const ErrorContext ctx = comm_->context("allreduce");
  check_single(ctx, tensors.size(), "tensor");
  check_tensor(ctx, tensors[0]);
  const ReduceOp rop = reduce_op_for(ctx, opts.reduceOp, tensors[0]);
  auto op = new_op("allreduce", opts.timeout);
  at::Tensor t = output_view(*op, tensors[0], true);
  const Buffer b = buffer_of(ctx, t);
  op->pieces.push_back(comm_->allreduce_async(b, b, rop));
  op->outputs = tensors;
  return start(OpType::ALLREDUCE, op);
}

WorkRef ProcessGroupDpt::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const ErrorContext ctx = comm_->context("allreduce_coalesced");
  if (tensors.empty()) refuse(ctx, "no tensors");
  for (const auto& t : tensors)
    if (t.scalar_type() != tensors[0].scalar_type()) refuse(ctx, "every tensor must have the same dtype");
  auto op = new_op("allreduce_coalesced", opts.timeout);
  for (const auto& user : tensors) {
    check_tensor(ctx, user);
    const ReduceOp rop = reduce_op_for(ctx, opts.reduceOp, user);
    at::Tensor t = output_view(*op, user, true);
    const Buffer b = buffer_of(ctx, t);
    op->pieces.push_back(comm_->allreduce_async(b, b, rop));
  }
  op->outputs = tensors;
  return start(OpType::ALLREDUCE_COALESCED, op);
}

WorkRef ProcessGroupDpt::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const ErrorContext ctx = comm_->context("reduce");
  check_single(ctx, tensors.size(), "tensor");
  check_tensor(ctx, tensors[0]);
  if (opts.rootTensor != 0) refuse(ctx, "root tensor " + std::to_string(opts.rootTensor) + ": there is one tensor per process");
  const ReduceOp rop = reduce_op_for(ctx, opts.reduceOp, tensors[0]);
  auto op = new_op("reduce", opts.timeout);
  // Non-roots reduce from a copy: PyTorch leaves their tensor as it was.
  const bool is_root = opts.rootRank == rank_;
  at::Tensor t = is_root ? output_view(*op, tensors[0], true) : input_view(*op, tensors[0].clone());
  const Buffer b = buffer_of(ctx, t);
  op->pieces.push_back(comm_->reduce_async(b, b, rop, static_cast<int>(opts.rootRank)));
  op->outputs = tensors;
  return start(OpType::REDUCE, op);
}

WorkRef ProcessGroupDpt::barrier(const c10d::BarrierOptions& opts) {
  auto op = new_op("barrier", opts.timeout);
  op->pieces.push_back(comm_->barrier_async());
  return start(OpType::BARRIER, op);
}

// ---- gathers and scatters: one contiguous buffer of size() slots on the wire ----

// Unpacks slot r of `flat` into outs[r] once the op succeeded.
static void unpack_after(OpState& op, const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  for (const auto& o : outs) op.keep_alive.push_back(o);
  op.on_success.push_back([flat, outs]() mutable {
    int64_t off = 0;
    for (auto& o : outs) {
      const int64_t n = o.numel();
      o.copy_(flat.narrow(0, off, n).view(o.sizes()));
      off += n;
    }
  });
}

static at::Tensor pack(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> flat;
  flat.reserve(parts.size());
  for (const auto& p : parts) flat.push_back(p.reshape({-1}));
  return at::cat(flat);
}

WorkRef ProcessGroupDpt::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                   const c10d::AllgatherOptions& opts) {
  const ErrorContext ctx = comm_->context("allgather");
  check_single(ctx, inputs.size(), "input tensor");
  check_single(ctx, outputs.size(), "output list");
  check_tensor(ctx, inputs[0]);
  if (static_cast<int>(outputs[0].size()) != size_)
    refuse(ctx, "the output list has " + std::to_string(outputs[0].size()) + " tensors, the group " + std::to_string(size_) + " ranks");
  for (size_t r = 0; r < outputs[0].size(); ++r) check_like(ctx, outputs[0][r], inputs[0], "output tensor " + std::to_string(r));
  auto op = new_op("allgather", opts.timeout);
  at::Tensor in = input_view(*op, inputs[0]);
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  op->keep_alive.push_back(flat);
  op->pieces.push_back(comm_->allgather_async(buffer_of(ctx, in), buffer_of(ctx, flat)));
  unpack_after(*op, flat, outputs[0]);
  op->outputs = outputs[0];
  return start(OpType::ALLGATHER, op);
}

// An allgather into one tensor: `output` holds size() copies of `input`'s shape.
static void check_gather_pair(const ErrorContext& ctx, const at::Tensor& output, const at::Tensor& input, int size) {
  check_tensor(ctx, input);
  check_tensor(ctx, output);
  if (output.scalar_type() != input.scalar_type()) refuse(ctx, "output and input dtypes differ");
  if (output.numel() != input.numel() * size)
    refuse(ctx, "the output has " + std::to_string(output.numel()) + " elements, expected " + std::to_string(size) +
                    " x " + std::to_string(input.numel()));
}

WorkRef ProcessGroupDpt::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const ErrorContext ctx = comm_->context("allgather");
  check_gather_pair(ctx, output, input, size_);
  auto op = new_op("allgather", opts.timeout);
  at::Tensor in = input_view(*op, input);
  at::Tensor out = output_view(*op, output, false);
  op->pieces.push_back(comm_->allgather_async(buffer_of(ctx, in), buffer_of(ctx, out)));
  op->outputs = {output};
  return start(OpType::_ALLGATHER_BASE, op);
}

WorkRef ProcessGroupDpt::allgather_coalesced(std::vector<std::vector<at::Tensor>>& output_lists,
                                             std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  const ErrorContext ctx = comm_->context("allgather_coalesced");
  if (static_cast<int>(output_lists.size()) != size_)
    refuse(ctx, "expected " + std::to_string(size_) + " output lists (one per rank), got " + std::to_string(output_lists.size()));
  for (const auto& list : output_lists)
    if (list.size() != inputs.size())
      refuse(ctx, "an output list has " + std::to_string(list.size()) + " tensors, the input list " + std::to_string(inputs.size()));
  auto op = new_op("allgather_coalesced", opts.timeout);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor(ctx, inputs[i]);
    std::vector<at::Tensor> outs;
    for (int r = 0; r < size_; ++r) {
      check_like(ctx, output_lists[r][i], inputs[i], "output tensor " + std::to_string(i) + " of rank " + std::to_string(r));
      outs.push_back(output_lists[r][i]);
    }
    at::Tensor in = input_view(*op, inputs[i]);
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    op->keep_alive.push_back(flat);
    op->pieces.push_back(comm_->allgather_async(buffer_of(ctx, in), buffer_of(ctx, flat)));
    unpack_after(*op, flat, outs);
  }
  for (const auto& list : output_lists) op->outputs.insert(op->outputs.end(), list.begin(), list.end());
  return start(OpType::ALLGATHER_COALESCED, op);
}

WorkRef ProcessGroupDpt::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                         const c10d::AllgatherOptions& opts) {
  const ErrorContext ctx = comm_->context("allgather_into_tensor_coalesced");
  if (outputs.size() != inputs.size())
    refuse(ctx, std::to_string(outputs.size()) + " outputs for " + std::to_string(inputs.size()) + " inputs");
  auto op = new_op("allgather_into_tensor_coalesced", opts.timeout);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_gather_pair(ctx, outputs[i], inputs[i], size_);
    at::Tensor in = input_view(*op, inputs[i]);
    at::Tensor out = output_view(*op, outputs[i], false);
    op->pieces.push_back(comm_->allgather_async(buffer_of(ctx, in), buffer_of(ctx, out)));
  }
  op->outputs = outputs;
  return start(OpType::ALLGATHER_INTO_TENSOR_COALESCED, op);
}

WorkRef ProcessGroupDpt::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                const c10d::GatherOptions& opts) {
  const ErrorContext ctx = comm_->context("gather");
  check_single(ctx, inputs.size(), "input tensor");
  check_tensor(ctx, inputs[0]);
  const bool is_root = opts.rootRank == rank_;
  auto op = new_op("gather", opts.timeout);
  at::Tensor in = input_view(*op, inputs[0]);
  Buffer recv{nullptr, 0, buffer_of(ctx, in).dtype, buffer_of(ctx, in).device};
  if (is_root) {
    check_single(ctx, outputs.size(), "output list");
    if (static_cast<int>(outputs[0].size()) != size_)
      refuse(ctx, "the root's output list has " + std::to_string(outputs[0].size()) + " tensors, the group " +
                      std::to_string(size_) + " ranks");
    for (size_t r = 0; r < outputs[0].size(); ++r) check_like(ctx, outputs[0][r], inputs[0], "output tensor " + std::to_string(r));
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    op->keep_alive.push_back(flat);
    recv = buffer_of(ctx, flat);
    unpack_after(*op, flat, outputs[0]);
    op->outputs = outputs[0];
  } else if (!outputs.empty() && !outputs[0].empty()) {
    refuse(ctx, "only the root (rank " + std::to_string(opts.rootRank) + ") passes output tensors");
  }
  op->pieces.push_back(comm_->gather_async(buffer_of(ctx, in), recv, static_cast<int>(opts.rootRank)));
  return start(OpType::GATHER, op);
}

WorkRef ProcessGroupDpt::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                 const c10d::ScatterOptions& opts) {
  const ErrorContext ctx = comm_->context("scatter");
  check_single(ctx, outputs.size(), "output tensor");
  check_tensor(ctx, outputs[0]);
  const bool is_root = opts.rootRank == rank_;
  auto op = new_op("scatter", opts.timeout);
  at::Tensor out = output_view(*op, outputs[0], false);
  Buffer send{nullptr, 0, buffer_of(ctx, out).dtype, buffer_of(ctx, out).device};
  if (is_root) {
    check_single(ctx, inputs.size(), "input list");
    if (static_cast<int>(inputs[0].size()) != size_)
      refuse(ctx, "the root's input list has " + std::to_string(inputs[0].size()) + " tensors, the group " +
                      std::to_string(size_) + " ranks");
    for (size_t r = 0; r < inputs[0].size(); ++r) check_like(ctx, inputs[0][r], outputs[0], "input tensor " + std::to_string(r));
    at::Tensor flat = pack(inputs[0]);
    op->keep_alive.push_back(flat);
    send = buffer_of(ctx, flat);
  } else if (!inputs.empty() && !inputs[0].empty()) {
    refuse(ctx, "only the root (rank " + std::to_string(opts.rootRank) + ") passes input tensors");
  }
  op->pieces.push_back(comm_->scatter_async(send, buffer_of(ctx, out), static_cast<int>(opts.rootRank)));
  op->outputs = outputs;
  return start(OpType::SCATTER, op);
}

WorkRef ProcessGroupDpt::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                        const c10d::ReduceScatterOptions& opts) {
  const ErrorContext ctx = comm_->context("reduce_scatter");
  check_single(ctx, outputs.size(), "output tensor");
  check_single(ctx, inputs.size(), "input list");
  check_tensor(ctx, outputs[0]);
  if (static_cast<int>(inputs[0].size()) != size_)
    refuse(ctx, "the input list has " + std::to_string(inputs[0].size()) + " tensors, the group " + std::to_string(size_) + " ranks");
  for (size_t r = 0; r < inputs[0].size(); ++r) check_like(ctx, inputs[0][r], outputs[0], "input tensor " + std::to_string(r));
  const ReduceOp rop = reduce_op_for(ctx, opts.reduceOp, outputs[0]);
  auto op = new_op("reduce_scatter", opts.timeout);
  at::Tensor flat = pack(inputs[0]);
  op->keep_alive.push_back(flat);
  at::Tensor out = output_view(*op, outputs[0], false);
  op->pieces.push_back(comm_->reduce_scatter_async(buffer_of(ctx, flat), buffer_of(ctx, out), rop));
  op->outputs = outputs;
  return start(OpType::REDUCE_SCATTER, op);
}

// A reduce-scatter of one tensor: `input` holds size() copies of `output`'s shape.
static void check_scatter_pair(const ErrorContext& ctx, const at::Tensor& output, const at::Tensor& input, int size) {
  check_tensor(ctx, input);
  check_tensor(ctx, output);
  if (output.scalar_type() != input.scalar_type()) refuse(ctx, "output and input dtypes differ");
  if (input.numel() != output.numel() * size)
    refuse(ctx, "the input has " + std::to_string(input.numel()) + " elements, expected " + std::to_string(size) + " x " +
                    std::to_string(output.numel()));
}

WorkRef ProcessGroupDpt::_reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const ErrorContext ctx = comm_->context("reduce_scatter");
  check_scatter_pair(ctx, output, input, size_);
  const ReduceOp rop = reduce_op_for(ctx, opts.reduceOp, output);
  auto op = new_op("reduce_scatter", opts.timeout);
  at::Tensor in = input_view(*op, input);
  at::Tensor out = output_view(*op, output, false);
  op->pieces.push_back(comm_->reduce_scatter_async(buffer_of(ctx, in), buffer_of(ctx, out), rop));
  op->outputs = {output};
  return start(OpType::_REDUCE_SCATTER_BASE, op);
}

WorkRef ProcessGroupDpt::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                         const c10d::ReduceScatterOptions& opts) {
  const ErrorContext ctx = comm_->context("reduce_scatter_tensor_coalesced");
  if (outputs.size() != inputs.size())
    refuse(ctx, std::to_string(outputs.size()) + " outputs for " + std::to_string(inputs.size()) + " inputs");
  auto op = new_op("reduce_scatter_tensor_coalesced", opts.timeout);
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_scatter_pair(ctx, outputs[i], inputs[i], size_);
    const ReduceOp rop = reduce_op_for(ctx, opts.reduceOp, outputs[i]);
    at::Tensor in = input_view(*op, inputs[i]);
    at::Tensor out = output_view(*op, outputs[i], false);
    op->pieces.push_back(comm_->reduce_scatter_async(buffer_of(ctx, in), buffer_of(ctx, out), rop));
  }
  op->outputs = outputs;
  return start(OpType::REDUCE_SCATTER_TENSOR_COALESCED, op);
}

// ---- all-to-all ----

void ProcessGroupDpt::exchange(OpState& op, const std::vector<at::Tensor>& sends, const std::vector<at::Tensor>& recvs) {
  const ErrorContext ctx = comm_->context("alltoall");
  // Below the envelope tag, the top of our user tag range.
  const int64_t tag = kUnevenAlltoallTag + (uneven_alltoalls_++ % (kMonitoredBarrierTag - kUnevenAlltoallTag));
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (recvs[p].numel() > 0) op.pieces.push_back(comm_->irecv(buffer_of(ctx, recvs[p]), p, tag));
  }
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    if (sends[p].numel() > 0) op.pieces.push_back(comm_->isend(buffer_of(ctx, sends[p]), p, tag));
  }
  if (sends[rank_].numel() != recvs[rank_].numel())
    refuse(ctx, "this rank sends itself " + std::to_string(sends[rank_].numel()) + " elements but expects " +
                    std::to_string(recvs[rank_].numel()));
  if (recvs[rank_].numel() > 0) recvs[rank_].view({-1}).copy_(sends[rank_].reshape({-1}));
}

// Rows of dim 0 per peer: the split sizes, or an even split when none are given.
static std::vector<int64_t> row_splits(const ErrorContext& ctx, const at::Tensor& t, const std::vector<int64_t>& splits,
                                       int size, const char* which) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  if (splits.empty()) {
    if (rows % size != 0)
      refuse(ctx, std::string(which) + " has " + std::to_string(rows) + " rows, not divisible by the group's " +
                      std::to_string(size) + " ranks (pass split sizes)");
    return std::vector<int64_t>(size, rows / size);
  }
  if (static_cast<int>(splits.size()) != size)
    refuse(ctx, std::string(which) + " split sizes name " + std::to_string(splits.size()) + " ranks, the group has " +
                    std::to_string(size));
  int64_t total = 0;
  for (int64_t s : splits) {
    if (s < 0) refuse(ctx, std::string(which) + " split sizes must not be negative");
    total += s;
  }
  if (total != rows)
    refuse(ctx, std::string(which) + " split sizes add up to " + std::to_string(total) + " rows, the tensor has " +
                    std::to_string(rows));
  return splits;
}

WorkRef ProcessGroupDpt::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
                                       std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const ErrorContext ctx = comm_->context("alltoall");
  check_tensor(ctx, input);
  check_tensor(ctx, output);
  if (output.scalar_type() != input.scalar_type()) refuse(ctx, "output and input dtypes differ");
  auto op = new_op("alltoall", opts.timeout);
  at::Tensor in = input_view(*op, input);
  at::Tensor out = output_view(*op, output, false);
  op->outputs = {output};
  if (output_splits.empty() && input_splits.empty()) {
    if (in.numel() != out.numel()) refuse(ctx, "output and input sizes differ");
    if (in.numel() % size_ != 0)
      refuse(ctx, std::to_string(in.numel()) + " elements do not split evenly over " + std::to_string(size_) + " ranks");
    op->pieces.push_back(comm_->alltoall_async(buffer_of(ctx, in), buffer_of(ctx, out)));
    return start(OpType::ALLTOALL_BASE, op);
  }
  const auto in_rows = row_splits(ctx, in, input_splits, size_, "the input");
  const auto out_rows = row_splits(ctx, out, output_splits, size_, "the output");
  const int64_t in_row = in.dim() == 0 || in.size(0) == 0 ? 0 : in.numel() / in.size(0);
  const int64_t out_row = out.dim() == 0 || out.size(0) == 0 ? 0 : out.numel() / out.size(0);
  std::vector<at::Tensor> sends, recvs;
  at::Tensor in_flat = in.reshape({-1}), out_flat = out.view({-1});
  int64_t in_off = 0, out_off = 0;
  for (int p = 0; p < size_; ++p) {
    sends.push_back(in_flat.narrow(0, in_off, in_rows[p] * in_row));
    recvs.push_back(out_flat.narrow(0, out_off, out_rows[p] * out_row));
    in_off += in_rows[p] * in_row;
    out_off += out_rows[p] * out_row;
  }
  exchange(*op, sends, recvs);
  return start(OpType::ALLTOALL_BASE, op);
}

WorkRef ProcessGroupDpt::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                  const c10d::AllToAllOptions& opts) {
  const ErrorContext ctx = comm_->context("alltoall");
  if (static_cast<int>(outputs.size()) != size_ || static_cast<int>(inputs.size()) != size_)
    refuse(ctx, "expected " + std::to_string(size_) + " output and input tensors, got " + std::to_string(outputs.size()) +
                    " and " + std::to_string(inputs.size()));
  auto op = new_op("alltoall", opts.timeout);
  std::vector<at::Tensor> sends, recvs;
  for (int p = 0; p < size_; ++p) {
    check_tensor(ctx, inputs[p]);
    check_tensor(ctx, outputs[p]);
    if (inputs[p].scalar_type() != inputs[0].scalar_type() || outputs[p].scalar_type() != inputs[0].scalar_type())
      refuse(ctx, "every tensor must have the same dtype");
    sends.push_back(input_view(*op, inputs[p]));
    recvs.push_back(output_view(*op, outputs[p], false));
  }
  exchange(*op, sends, recvs);
  op->outputs = outputs;
  return start(OpType::ALLTOALL, op);
}

// ---- point-to-point ----

void ProcessGroupDpt::check_tag(const std::string& op, int tag) const {
  if (tag < 0 || tag > kMaxTorchTag)
    refuse(comm_->context(op), "tag " + std::to_string(tag) + " is outside [0, " + std::to_string(kMaxTorchTag) + "]");
}

void ProcessGroupDpt::check_peer(const std::string& op, int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_)
    refuse(comm_->context(op), "peer rank " + std::to_string(peer) + " is not another rank of this group of " +
                                   std::to_string(size_));
}

WorkRef ProcessGroupDpt::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const ErrorContext ctx = comm_->context("send", dst);
  check_single(ctx, tensors.size(), "tensor");
  check_tensor(ctx, tensors[0]);
  check_tag("send", tag);
  check_peer("send", dst);
  auto op = new_op("send", std::chrono::milliseconds(0), /*p2p=*/true);
  at::Tensor t = input_view(*op, tensors[0]);
  op->pieces = mailbox_->send(buffer_of(ctx, t), dst, tag);
  op->outputs = tensors;
  return start(OpType::SEND, op);
}

WorkRef ProcessGroupDpt::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const ErrorContext ctx = comm_->context("recv", src);
  check_single(ctx, tensors.size(), "tensor");
  check_tensor(ctx, tensors[0]);
  check_tag("recv", tag);
  check_peer("recv", src);
  auto op = new_op("recv", std::chrono::milliseconds(0), true);
  at::Tensor t = output_view(*op, tensors[0], false);
  op->pieces.push_back(mailbox_->recv(buffer_of(ctx, t), src, tag));
  op->outputs = tensors;
  return start(OpType::RECV, op);
}

WorkRef ProcessGroupDpt::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const ErrorContext ctx = comm_->context("recv");
  check_single(ctx, tensors.size(), "tensor");
  check_tensor(ctx, tensors[0]);
  check_tag("recv", tag);
  auto op = new_op("recv", std::chrono::milliseconds(0), true);
  at::Tensor t = output_view(*op, tensors[0], false);
  auto r = mailbox_->recv_any(buffer_of(ctx, t), tag);
  op->pieces.push_back(r);
  op->source_rank = [r] { return r->source(); };
  op->outputs = tensors;
  return start(OpType::RECVANYSOURCE, op);
}

}  // namespace dpt::torch_plugin
