// device_steps.h in a build without CUDA: link placeholders. No device memory exists there
// (device/runtime.h refuses every allocation), so no optimizer steps on a device; each
// raises device/'s "no CUDA" error.
#include "optim/cuda/device_steps.h"

#include "device/runtime.h"

namespace dpt::gpu {

void adam_step(float*, const float*, float*, float*, size_t, const AdamScalars&, bool, bool) {
  device::throw_not_built("adam_step");
}
void sgd_step(float*, const float*, float*, size_t, const SgdScalars&, bool, bool, bool, bool) {
  device::throw_not_built("sgd_step");
}
double squared_norm(const float*, size_t) { device::throw_not_built("squared_norm"); }
void scale(float*, size_t, float) { device::throw_not_built("scale"); }
bool scale_and_find_nonfinite(float*, size_t, float) { device::throw_not_built("scale_and_find_nonfinite"); }

}  // namespace dpt::gpu
