#pragma once
// Bucket plan shared by DDP and ZeRO-2/3.
//   bucket: a contiguous slice [begin, end) of the flat gradient buffer holding whole
//   parameters, cut in REVERSE parameter order (the order backward finalizes gradients).
//   The first bucket closes once it reaches first_bucket_bytes (small, so communication
//   starts early), the others once they reach bucket_bytes.
#include <cstddef>
#include <vector>

#include "models/nn/param_store.h"

namespace dpt {

struct BucketRange {
  size_t begin = 0, end = 0;  // flat element range
  size_t num_params = 0;
};

struct BucketPlan {
  std::vector<BucketRange> buckets;     // in launch order (last parameters first)
  std::vector<size_t> bucket_of_param;  // parameter index -> bucket index
};

BucketPlan plan_buckets(const std::vector<ParamInfo>& infos, size_t first_bucket_bytes, size_t bucket_bytes);

// A caller's own bucket type (with its Work handles, timings, ...) for each planned
// range; B needs begin, end and num_params members.
template <class B>
std::vector<B> make_buckets(const BucketPlan& plan) {
  std::vector<B> out(plan.buckets.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].begin = plan.buckets[i].begin;
    out[i].end = plan.buckets[i].end;
    out[i].num_params = plan.buckets[i].num_params;
  }
  return out;
}

}  // namespace dpt
