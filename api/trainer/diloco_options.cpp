#include "api/trainer/diloco_options.h"

#include <stdexcept>
#include <string>

namespace po = boost::program_options;

namespace train {

void add_diloco_options(po::options_description& d, Options& o) {
  auto& dl = o.cfg.parallel.diloco;
  d.add_options()
    ("strategy", po::value(&o.strategy)->default_value("ddp"), "ddp (with --zero for ZeRO) | diloco: inner groups take --inner-steps steps alone, then average their pseudo-gradients and take one outer Nesterov step (docs/diloco.md)")
    ("inner-steps", po::value(&o.inner_steps)->default_value(50), "--strategy diloco: H, the inner steps of a round")
    ("outer-lr", po::value(&dl.outer_lr)->default_value(0.7f), "--strategy diloco: the outer SGD's learning rate (the paper's 0.7)")
    ("outer-momentum", po::value(&dl.outer_momentum)->default_value(0.9f), "--strategy diloco: the outer Nesterov momentum (0: plain SGD on the pseudo-gradient)")
    ("outer-dtype", po::value(&o.outer_dtype)->default_value("fp32"), "--strategy diloco: fp32 | bf16 | fp16, the pseudo-gradient on the wire")
    ("diloco-group", po::value(&o.diloco_group)->default_value("host"), "--strategy diloco: the ranks of an inner group (synchronous DDP among them): host = the ranks of one host, N = consecutive blocks of N ranks (1: every rank its own worker)")
    ("outer-overlap-steps", po::value(&dl.overlap_steps)->default_value(0), "--strategy diloco: D > 0 runs the outer exchange during the next D inner steps and applies it after them, keeping their progress; 0 waits for it at the round's end")
    ("agree-every-s", po::value(&o.cfg.agreement_interval_s)->default_value(1.0), "--strategy diloco: between round ends all ranks agree (on a stop signal: SIGTERM/SIGUSR1 with --checkpoint-dir) about this often, in seconds, instead of before every step, which would cross the slow link every step; 0: before every step");
}

void check_diloco_options(Options& o, const po::variables_map& vm) {
  auto& dl = o.cfg.parallel.diloco;
  if (o.strategy != "diloco") {
    if (o.strategy != "ddp") throw std::invalid_argument("--strategy '" + o.strategy + "': valid are ddp, diloco");
    for (const char* flag : {"inner-steps", "outer-lr", "outer-momentum", "outer-dtype", "diloco-group", "outer-overlap-steps", "agree-every-s"})
      if (vm.count(flag) && !vm[flag].defaulted())
        throw std::invalid_argument(std::string("--") + flag + " applies to --strategy diloco only");
    return;
  }
  const auto refuse = [](const std::string& why) { throw std::invalid_argument("--strategy diloco: " + why); };
  if (o.zero != 0) refuse("the inner groups run DDP, not --zero " + std::to_string(o.zero));
  if (o.precision != "fp32") refuse("fp32 only (the pseudo-gradient of 16-bit working weights loses what it measures), not --precision " + o.precision);
  if (o.optimizer_device != "cpu") refuse("not with --optimizer-device " + o.optimizer_device);
  if (!o.switch_backend.empty()) refuse("not with --switch-backend");
  if (o.inner_steps < 1) refuse("--inner-steps " + std::to_string(o.inner_steps) + ": must be >= 1");
  dl.inner_steps = o.inner_steps;
  if (dl.overlap_steps < 0 || dl.overlap_steps > o.inner_steps)
    refuse("--outer-overlap-steps " + std::to_string(dl.overlap_steps) + ": must be in [0, --inner-steps " +
           std::to_string(o.inner_steps) + "]");
  if (o.elastic && dl.overlap_steps > 0) refuse("--elastic needs --outer-overlap-steps 0 (a round's end is the state a new group starts from)");
  if (!(o.cfg.agreement_interval_s >= 0)) refuse("--agree-every-s must be >= 0 seconds (0: agree before every step)");
  if (!(dl.outer_lr > 0)) refuse("--outer-lr must be > 0");
  if (dl.outer_momentum < 0 || dl.outer_momentum >= 1) refuse("--outer-momentum must be in [0, 1)");
  if (o.outer_dtype == "fp32") dl.outer_dtype = dpt::DType::f32;
  else if (o.outer_dtype == "bf16") dl.outer_dtype = dpt::DType::bf16;
  else if (o.outer_dtype == "fp16") dl.outer_dtype = dpt::DType::f16;
  else refuse("--outer-dtype '" + o.outer_dtype + "': valid are fp32, bf16, fp16");
  if (o.diloco_group == "host") {
    dl.group_size = 0;
  } else {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(o.diloco_group, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != o.diloco_group.size() || n < 1) refuse("--diloco-group '" + o.diloco_group + "': valid are host or a rank count >= 1");
    dl.group_size = n;
  }
}

}  // namespace train
