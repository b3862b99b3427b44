#include <algorithm>
#include <stdexcept>

#include "api/model_impl.h"
#include "api/tensor_convert.h"
#include "models/io/checkpoint.h"

namespace dpt::nn {
namespace {
const ::dpt::ParamInfo& info_of(const ::dpt::Module& m, const std::string& name, const char* who) {
  for (const auto& p : m.param_infos())
    if (p.name == name) return p;
  std::string have;
  for (size_t i = 0; i < m.param_infos().size() && i < 6; ++i) have += (i ? ", " : "") + m.param_infos()[i].name;
  if (m.param_infos().size() > 6) have += ", ...";
  throw std::invalid_argument(std::string("dpt::nn::Model::") + who + ": no parameter '" + name + "' in model '" +
                              m.name() + "' (its parameters: " + have + ")");
}
}  // namespace

const Tensor& Model::Impl::run_forward(const Tensor& x, bool train, const char* who) {
  if (x.dim() < 2)
    throw std::invalid_argument(std::string(who) + ": the input has shape " + x.shape_text() +
                                "; a batch is [batch, sample...]");
  ::dpt::ModelInput in;
  in.x = x.data();
  in.n = x.size(0);
  in.sample_shape.assign(x.shape().begin() + 1, x.shape().end());
  const ::dpt::Tensor& y = module->forward(in, train);
  output = ::dpt::to_public(y);
  return output;
}

void Model::Impl::run_backward(const Loss& loss, const char* who) {
  try {
    module->backward_from(::dpt::to_internal(loss.grad()));
  } catch (const std::logic_error& e) {
    throw std::logic_error(std::string(who) + ": " + e.what());
  }
  backward_since_step = true;
}

void Model::Impl::attach_optimizer(const std::string& name, const ::dpt::OptimizerConfig& config,
                                   const std::string& who) {
  if (optimizer) throw std::logic_error(who + ": model '" + module->name() + "' has an optimizer already");
  if (!wrapped_by.empty())
    throw std::logic_error(who + ": model '" + module->name() + "' is wrapped by " + wrapped_by +
                           ": make the optimizer over the wrapper's parameters()");
  optimizer = ::dpt::make_optimizer(name, config, module->num_params());
}

void Model::Impl::step(float lr, const std::string& who) {
  if (!wrapped_by.empty())
    throw std::logic_error(who + ": model '" + module->name() + "' is wrapped by " + wrapped_by +
                           " since this optimizer was made: make the optimizer over the wrapper's parameters()");
  if (!backward_since_step)
    throw std::logic_error(who + ": no backward() since the last step (stepping twice?)");
  optimizer->step(module->flat_params(), module->flat_grads(), lr);
  backward_since_step = false;
}

Model::Model(const Sequential& net, const ModelOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->module = std::make_unique<::dpt::UserModule>(net, options);
}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

void Model::train(bool on) { impl_->training = on; }
bool Model::training() const { return impl_->training; }

const Tensor& Model::forward(const Tensor& x) {
  if (!impl_->wrapped_by.empty() && impl_->training)
    throw std::logic_error("dpt::nn::Model::forward: model '" + impl_->module->name() + "' is wrapped by " +
                           impl_->wrapped_by + ": train through its forward() (eval() forwards may use either)");
  return impl_->run_forward(x, impl_->training, "dpt::nn::Model::forward");
}

void Model::backward(const Loss& loss) {
  if (!impl_->wrapped_by.empty())
    throw std::logic_error("dpt::nn::Model::backward: model '" + impl_->module->name() + "' is wrapped by " +
                           impl_->wrapped_by + ": call its backward(), which averages the gradients");
  impl_->run_backward(loss, "dpt::nn::Model::backward");
}

void Model::zero_grad() { impl_->module->zero_grad(); }
size_t Model::num_parameters() const { return impl_->module->num_params(); }

std::vector<std::string> Model::parameter_names() const {
  std::vector<std::string> out;
  for (const auto& p : impl_->module->param_infos()) out.push_back(p.name);
  return out;
}
std::vector<int64_t> Model::parameter_shape(const std::string& name) const {
  return info_of(*impl_->module, name, "parameter_shape").shape;
}
std::span<float> Model::parameter(const std::string& name) {
  impl_->settle("dpt::nn::Model::parameter");
  const auto& p = info_of(*impl_->module, name, "parameter");
  return impl_->module->flat_params().subspan(p.offset, p.numel);
}
std::span<const float> Model::gradient(const std::string& name) const {
  impl_->settle("dpt::nn::Model::gradient");
  const auto& p = info_of(*impl_->module, name, "gradient");
  return impl_->module->flat_grads().subspan(p.offset, p.numel);
}
std::span<float> Model::flat_parameters() {
  impl_->settle("dpt::nn::Model::flat_parameters");
  return impl_->module->flat_params();
}
std::span<const float> Model::flat_gradients() const {
  impl_->settle("dpt::nn::Model::flat_gradients");
  return static_cast<const ::dpt::Module&>(*impl_->module).flat_grads();
}

void Model::save(const std::string& path) const {
  impl_->settle("dpt::nn::Model::save");
  ::dpt::save_model(path, *impl_->module, {{"dpt.model", impl_->module->name()}});
}
void Model::load(const std::string& path) {
  impl_->settle("dpt::nn::Model::load");
  ::dpt::load_model(path, *impl_->module);
}

ParameterSet Model::parameters() { return ParameterSet(impl_.get()); }

}  // namespace dpt::nn

namespace dpt {
std::unique_ptr<Module> take_module(nn::Model model) { return std::move(model.impl().module); }
}  // namespace dpt
