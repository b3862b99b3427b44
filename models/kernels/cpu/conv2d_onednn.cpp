#include "models/kernels/cpu/conv2d_onednn.h"

#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

#include "models/kernels/cpu/cpu_features.h"
#include "models/kernels/cpu/gemm_engine.h"

#ifdef DPT_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace dpt {

#ifndef DPT_HAVE_ONEDNN

bool onednn_conv_available() { return false; }
struct OnednnConv::Plan {};
struct OnednnConv::Plans {};
OnednnConv::OnednnConv() = default;
OnednnConv::~OnednnConv() = default;
bool OnednnConv::prepare(const ConvGeometry&, bool) { return false; }
std::string OnednnConv::impl() const { return ""; }
static void absent() { throw std::logic_error("OnednnConv: this build has no oneDNN"); }
void OnednnConv::forward(const float*, const float*, float*) { absent(); }
void OnednnConv::backward_weights(const float*, float*) { absent(); }
void OnednnConv::backward_data(const float*, float*) { absent(); }

#else

namespace detail {
void onednn_threads_for(int m, int n, int k);  // models/kernels/cpu/gemm_engine.cpp
}

namespace {
using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  // Never destroyed: primitives in layers that outlive statics hold it.
  static dnnl::engine* e = [] {
    cap_onednn_isa();
    request_amx_permission();
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *e;
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(cpu_engine());
  return s;
}

// DPT_CONV_LAYOUT=plain|blocked (default blocked): plain is for measuring the choice only.
bool plain_layout() {
  static const bool plain = [] {
    const char* v = std::getenv("DPT_CONV_LAYOUT");
    const std::string s = v ? v : "";
    if (s.empty() || s == "blocked") return false;
    if (s == "plain") return true;
    throw std::invalid_argument("DPT_CONV_LAYOUT=" + s + ": expected blocked or plain");
  }();
  return plain;
}

// One conversion between a user tensor (plain fp32) and a primitive's memory; nothing to
// do when the layouts and types already agree (`same`), else a reorder into or out of
// `buf`, a buffer of the primitive's layout owned here. `sum` adds into the destination.
struct Stage {
  memory::desc user, prim;
  bool same = true;
  dnnl::reorder r;
  memory buf;

  Stage() = default;
  Stage(const memory::desc& user_md, const memory::desc& prim_md, bool into_prim, bool sum = false)
      : user(user_md), prim(prim_md), same(user_md == prim_md && !sum) {
    if (same) return;
    dnnl::primitive_attr attr;
    if (sum) {
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    r = into_prim ? dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), user_md, cpu_engine(), prim_md, attr))
                  : dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), prim_md, cpu_engine(), user_md, attr));
  }
  // The primitive's memory holding the user tensor at p (reordered into buf, or p itself).
  memory in(const float* p) {
    memory u(user, cpu_engine(), const_cast<float*>(p));
    if (same) return u;
    r.execute(thread_stream(), u, buffer());
    return buf;
  }
  // Where the primitive writes a result meant for p; then out(p) finishes the move.
  memory target(float* p) { return same ? memory(user, cpu_engine(), p) : buffer(); }
  // Made at first use: an evaluation-only shape never allocates its backward's buffers.
  memory& buffer() {
    if (!buf) buf = memory(prim, cpu_engine());
    return buf;
  }
  void out(float* p) {
    if (same) return;
    memory u(user, cpu_engine(), p);
    r.execute(thread_stream(), buf, u);
  }
};

}  // namespace

struct OnednnConv::Plan {
  dnnl::convolution_forward fwd;
  dnnl::convolution_backward_data bwd_d;
  dnnl::convolution_backward_weights bwd_w;
  Stage x_f, w_f, y_f;      // forward: x, w in; y out
  Stage x_w, dy_w, dw_w;    // backward weights: x, dy in; dw out (added)
  Stage w_d, dy_d, dx_d;    // backward data: w, dy in; dx out
  bool x_shared = false;    // backward weights reads the forward's reordered x
  bool w_shared = false;    // backward data reads the forward's reordered w
  bool dy_shared = false;   // backward data reads backward weights' reordered dy
  std::string impl;
  ConvGeometry g{};
  const float* x = nullptr;  // the last forward's input and weights
  const float* w = nullptr;
  const float* dy = nullptr;  // the dy backward weights last reordered
  memory x_prim, w_prim, dy_prim;
};

using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, int>;
struct OnednnConv::Plans {
  std::map<PlanKey, std::unique_ptr<Plan>> by_key;
};

bool onednn_conv_available() { return true; }

OnednnConv::OnednnConv() : plans_(std::make_unique<Plans>()) {}
OnednnConv::~OnednnConv() = default;

static std::unique_ptr<OnednnConv::Plan> make_plan(const ConvGeometry& g, bool bf16);

bool OnednnConv::prepare(const ConvGeometry& g, bool bf16) {
  detail::onednn_threads_for(int(g.oc), int(g.n * g.oh * g.ow), int(g.c * g.k * g.k));
  const PlanKey key{g.n, g.c, g.h, g.w, g.oc, g.k, g.stride, g.pad, bf16, gemm_engine_threads(GemmEngine::onednn)};
  auto it = plans_->by_key.find(key);
  if (it == plans_->by_key.end()) {
    // A few shapes per layer in a run (training batch, evaluation batch, a last partial
    // batch of each): past kMaxPlans the buffers of old ones are given back.
    constexpr size_t kMaxPlans = 4;
    if (plans_->by_key.size() >= kMaxPlans) plans_->by_key.clear();
    std::unique_ptr<Plan> p;
    try {
      p = make_plan(g, bf16);
    } catch (const dnnl::error&) {
      p = nullptr;  // a shape or precision oneDNN has no implementation for: im2col runs it
    }
    it = plans_->by_key.emplace(key, std::move(p)).first;
  }
  current_ = it->second.get();
  return current_ != nullptr;
}

std::string OnednnConv::impl() const { return current_ ? current_->impl : ""; }

static std::unique_ptr<OnednnConv::Plan> make_plan(const ConvGeometry& g, bool bf16) {
  auto p = std::make_unique<OnednnConv::Plan>();
  p->g = g;
  const dt low = bf16 ? dt::bf16 : dt::f32;
  const memory::dims xd{g.n, g.c, g.h, g.w}, wd{g.oc, g.c, g.k, g.k}, yd{g.n, g.oc, g.oh, g.ow};
  const memory::dims strides{g.stride, g.stride}, pad_l{g.pad, g.pad};
  // oneDNN wants the padding that makes (in + pad_l + pad_r - k) / stride + 1 = out exactly;
  // below pad when the stride skips the last rows (negative for a 1x1/2 on an even size).
  const memory::dims pad_r{(g.oh - 1) * g.stride + g.k - g.h - g.pad, (g.ow - 1) * g.stride + g.k - g.w - g.pad};
  const memory::desc x_user(xd, dt::f32, tag::nchw), w_user(wd, dt::f32, tag::oihw), y_user(yd, dt::f32, tag::nchw);
  const bool plain = plain_layout();
  auto md = [&](const memory::dims& d, dt t, tag plain_tag) { return memory::desc(d, t, plain ? plain_tag : tag::any); };
  const auto alg = dnnl::algorithm::convolution_direct;

  dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, alg, md(xd, low, tag::nchw),
                                     md(wd, low, tag::oihw), md(yd, dt::f32, tag::nchw), strides, pad_l, pad_r);
  dnnl::convolution_forward::primitive_desc fpd(fd, cpu_engine());
  dnnl::convolution_backward_data::desc dd(alg, md(xd, dt::f32, tag::nchw), md(wd, low, tag::oihw),
                                           md(yd, low, tag::nchw), strides, pad_l, pad_r);
  dnnl::convolution_backward_data::primitive_desc dpd(dd, cpu_engine(), fpd);
  dnnl::convolution_backward_weights::desc wdsc(alg, md(xd, low, tag::nchw), md(wd, dt::f32, tag::oihw),
                                                md(yd, low, tag::nchw), strides, pad_l, pad_r);
  dnnl::convolution_backward_weights::primitive_desc wpd(wdsc, cpu_engine(), fpd);

  p->fwd = dnnl::convolution_forward(fpd);
  p->bwd_d = dnnl::convolution_backward_data(dpd);
  p->bwd_w = dnnl::convolution_backward_weights(wpd);
  p->x_f = Stage(x_user, fpd.src_desc(), true);
  p->w_f = Stage(w_user, fpd.weights_desc(), true);
  p->y_f = Stage(y_user, fpd.dst_desc(), false);
  p->x_shared = wpd.src_desc() == fpd.src_desc();
  if (!p->x_shared) p->x_w = Stage(x_user, wpd.src_desc(), true);
  p->dy_w = Stage(y_user, wpd.diff_dst_desc(), true);
  p->dw_w = Stage(w_user, wpd.diff_weights_desc(), false, /*sum=*/true);
  p->w_shared = dpd.weights_desc() == fpd.weights_desc();
  if (!p->w_shared) p->w_d = Stage(w_user, dpd.weights_desc(), true);
  p->dy_shared = dpd.diff_dst_desc() == wpd.diff_dst_desc();
  if (!p->dy_shared) p->dy_d = Stage(y_user, dpd.diff_dst_desc(), true);
  p->dx_d = Stage(x_user, dpd.diff_src_desc(), false);
  p->impl = std::string(fpd.impl_info_str()) + " / " + dpd.impl_info_str() + " / " + wpd.impl_info_str();
  return p;
}

void OnednnConv::forward(const float* x, const float* w, float* y) {
  Plan& p = *current_;
  const ConvGeometry& g = p.g;
  detail::onednn_threads_for(int(g.oc), int(g.n * g.oh * g.ow), int(g.c * g.k * g.k));
  p.x = x, p.w = w, p.dy = nullptr;
  p.x_prim = p.x_f.in(x);
  p.w_prim = p.w_f.in(w);
  p.fwd.execute(thread_stream(), {{DNNL_ARG_SRC, p.x_prim}, {DNNL_ARG_WEIGHTS, p.w_prim},
                                  {DNNL_ARG_DST, p.y_f.target(y)}});
  p.y_f.out(y);
  thread_stream().wait();
}

void OnednnConv::backward_weights(const float* dy, float* dw) {
  Plan& p = *current_;
  const ConvGeometry& g = p.g;
  detail::onednn_threads_for(int(g.oc), int(g.n * g.oh * g.ow), int(g.c * g.k * g.k));
  const memory x = p.x_shared ? p.x_prim : p.x_w.in(p.x);
  p.dy_prim = p.dy_w.in(dy);
  p.dy = dy;
  p.bwd_w.execute(thread_stream(), {{DNNL_ARG_SRC, x}, {DNNL_ARG_DIFF_DST, p.dy_prim},
                                    {DNNL_ARG_DIFF_WEIGHTS, p.dw_w.target(dw)}});
  p.dw_w.out(dw);
  thread_stream().wait();
}

void OnednnConv::backward_data(const float* dy, float* dx) {
  Plan& p = *current_;
  const ConvGeometry& g = p.g;
  detail::onednn_threads_for(int(g.oc), int(g.n * g.oh * g.ow), int(g.c * g.k * g.k));
  const memory w = p.w_shared ? p.w_prim : p.w_d.in(p.w);
  const memory d = p.dy_shared && p.dy == dy ? p.dy_prim : (p.dy_shared ? p.dy_w.in(dy) : p.dy_d.in(dy));
  p.bwd_d.execute(thread_stream(), {{DNNL_ARG_DIFF_DST, d}, {DNNL_ARG_WEIGHTS, w},
                                    {DNNL_ARG_DIFF_SRC, p.dx_d.target(dx)}});
  p.dx_d.out(dx);
  thread_stream().wait();
}

#endif

}  // namespace dpt
