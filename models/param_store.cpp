#include "models/param_store.h"

#include <stdexcept>

#include "models/tensor.h"

namespace dpt {

size_t ParamStore::add(const std::string& name, std::vector<int64_t> shape) {
  if (finalized_) throw std::logic_error("ParamStore::add(" + name + ") after finalize()");
  if (find(name) != infos_.size()) throw std::logic_error("duplicate parameter name " + name);
  ParamInfo info;
  info.name = name;
  info.numel = shape_numel(shape);
  info.shape = std::move(shape);
  info.offset = total_;
  info.index = infos_.size();
  total_ += info.numel;
  infos_.push_back(std::move(info));
  return infos_.back().index;
}

void ParamStore::finalize() {
  if (finalized_) return;
  params_.assign(total_, 0.0f);
  grads_.assign(total_, 0.0f);
  finalized_ = true;
}

size_t ParamStore::find(const std::string& name) const {
  for (const auto& info : infos_)
    if (info.name == name) return info.index;
  return infos_.size();
}

}  // namespace dpt
