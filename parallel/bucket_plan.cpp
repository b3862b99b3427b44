#include "parallel/bucket_plan.h"

namespace dpt {

BucketPlan plan_buckets(const std::vector<ParamInfo>& infos, size_t first_bucket_bytes, size_t bucket_bytes) {
  BucketPlan plan;
  plan.bucket_of_param.assign(infos.size(), 0);
  BucketRange cur;
  size_t cap = first_bucket_bytes;
  bool open = false;
  for (size_t k = infos.size(); k-- > 0;) {
    const ParamInfo& p = infos[k];
    if (!open) {
      cur = BucketRange{};
      cur.end = p.offset + p.numel;
      open = true;
    }
    cur.begin = p.offset;
    ++cur.num_params;
    plan.bucket_of_param[k] = plan.buckets.size();
    if ((cur.end - cur.begin) * sizeof(float) >= cap) {
      plan.buckets.push_back(cur);
      open = false;
      cap = bucket_bytes;
    }
  }
  if (open) plan.buckets.push_back(cur);
  return plan;
}

}  // namespace dpt
