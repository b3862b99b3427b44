#pragma once
// PowerSGD's state in a checkpoint: each rank writes its buckets' Q (the same on every
// rank) and error-feedback buffer (its own) beside the model, as
// model.powersgd.rank_<r>.safetensors, so a resumed run compresses exactly as an
// uninterrupted one would (without them it would restart from zero error and the seeded
// Q, and its gradients would differ from the resumed step on).
#include <memory>
#include <string>
#include <vector>

#include "parallel/ddp/powersgd.h"

namespace dpt {

using PowerSgdBuckets = std::vector<std::unique_ptr<PowerSgdBucket>>;

// This rank's file beside model_path (every rank writes its own; local, no communication).
void save_powersgd_state(const std::string& model_path, const PowerSgdBuckets& buckets, int rank, int world);

// Restores the buckets from the files beside model_path. Same world size and layout:
// Q and this rank's error, exactly. Another world size: Q (rank 0's file) and zero
// error (the errors belong to ranks that no longer exist). No files (an older or
// uncompressed checkpoint) or another --powersgd-rank or bucket layout: fresh state.
// Returns a note saying what was not restored ("" when everything was); throws
// CheckpointError for a file that is there but unreadable or inconsistent.
std::string load_powersgd_state(const std::string& model_path, PowerSgdBuckets& buckets, int rank, int world);

}  // namespace dpt
