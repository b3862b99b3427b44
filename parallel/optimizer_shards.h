#pragma once
// ZeRO optimizer-state checkpoints: one file per rank, readable at any world size.
//
// Terms:
//   shard file   <step dir>/model.optim.shard_<r>.safetensors, written by rank r: the
//                optimizer's state buffers under their plain names ("exp_avg", ...)
//                holding only the real elements of r's shard (no padding), with
//                metadata shard_offset, shard_numel, world_size, total_numel, optimizer,
//                step_count. The model itself is the ordinary model.safetensors (all
//                ranks hold the full parameters in stages 1 and 2; rank 0 writes it).
//   full file    <step dir>/model.optim.safetensors as DDP writes it (or as
//                consolidate_optimizer_state() makes it from the shard files).
//   range read   a rank of a run at any world size reads the elements
//                [offset, offset + count) of every state buffer by copying, from each
//                source file (the full file, else every shard file), the slice that
//                overlaps it. Every element must be covered exactly once.
#include <string>

#include "optim/optimizer.h"
#include "parallel/shard_layout.h"

namespace dpt {

std::string optim_shard_path(const std::string& model_path, int rank);
void save_optimizer_shard(const std::string& model_path, Optimizer& optimizer, const ShardLayout& layout, int rank);
// Fills optimizer's buffers [0, count) from the checkpoint's elements [offset, offset+count)
// and sets its step count; throws CheckpointError on any mismatch.
void load_optimizer_range(const std::string& model_path, Optimizer& optimizer, size_t offset, size_t count);
// Writes the full file from the shard files; returns its path.
std::string consolidate_optimizer_state(const std::string& model_path);

}  // namespace dpt
