"""DiLoCo against an independent PyTorch implementation of the paper's algorithm
(Douillard et al. 2023, Algorithm 1), written from its pseudo-code:

    for outer step t = 1..T:
        for each worker i (in parallel):
            theta_i = theta                     (every worker starts from the global params)
            for inner step h = 1..H:
                x ~ D_i;  L = f(x, theta_i);  theta_i = InnerOpt(theta_i, grad L)
            delta_i = theta - theta_i
        delta = mean_i(delta_i)
        theta = OuterOpt(theta, delta)          (SGD with Nesterov momentum, delta as the gradient)

with torch.optim.AdamW as InnerOpt (its state kept per worker across rounds) and
torch.optim.SGD(momentum=mu, nesterov=True) as OuterOpt, on the MLP train builds
(784-256-128-10, ReLU, mean cross-entropy) or its CNN, over Fashion-MNIST normalized as
train reads it; and around it what docs/diloco.md says train does beyond the paper:

- a worker of g ranks (an inner group) takes the mean of its ranks' gradients, each the
  gradient of its own batch's mean loss;
- bf16/fp16 on the wire: each worker's pseudo-gradient times 1/G (G workers) rounded to
  the 16-bit type (torch's round to nearest even), summed in float and rounded back
  after each addition, then widened (the reduction rule of NCCL and Gloo);
- overlap D: the exchange begun at a round's end lands D inner steps later as
  params = theta_new + (params - params_at_round_end); with D = H just before the next
  round's exchange begins;
- the end of a run: an exchange in flight lands, and a round cut short gets its outer
  step (so every rank ends with theta);
- an elastic regroup at a round's end: the survivors go on from that round's end, theta
  and the outer momentum whole, each new worker with the inner optimizer state it held
  there (what a resume from a checkpoint of that round's end would hold).

train runs `--strategy diloco` from the same initial parameters (written here, read with
--init-from) with --debug-sample-log, which names the samples each rank trained on in
each step; the reference trains each worker on exactly those. Every rank's final
parameters (--debug-state-dump) must agree within 1e-5: the relative L2 difference of
every tensor, ||ours - ref|| / ||ref|| (16-bit wires: a tenth of their unit roundoff,
WIRE_TOL below); and so must every rank's slices of theta and of the outer momentum in
the checkpoint of the last round's end (--save-every H; the slice layout
[i * ceil(n / g), (i + 1) * ceil(n / g)) for rank i of a group of g, cut at n).
Not element by element: a hidden unit whose pre-activation sits within rounding of 0 for
some sample switches its ReLU one way in one run and the other way in another, and AdamW
turns the few tiny gradients that follow into full-size steps, so single elements of fc1
differ by up to ~2e-5 between this reference in fp32 and the same reference in fp64
(measured), whatever the implementation. Each scenario also runs the reference with the
wrong rule that the scenario is there to catch (a sum for the mean, no Nesterov, the
overlapped steps dropped, the run's last outer step skipped, the outer momentum dropped
at the regroup), which must miss by far more (so the bound is known to be able to fail).

Scenarios (each one `train` run; several may be named in one call):
  fp32          2 workers of 1 rank, H = 5, 3 rounds
  bf16_overlap  2 workers of 1 rank, bf16 on the wire, overlap D = 2, 16 steps: the run
                ends with an exchange in flight and a round one step old
  fp16_hosts    4 ranks as 2 emulated hosts x 2 (inner groups of 2 by host), fp16 on the
                wire, 13 steps (ends mid-round): every rank's final parameters compared
  group3_epochs one inner group of 3 ranks over a CNN of 12,839 parameters (not a
                multiple of 3: uneven slices (numel + 2) / 3), 2 epochs of a 300-sample
                subset (7 steps each, the last batch short) at H = 4: rounds cross the
                epoch's end and the run ends mid-round
  elastic       launch --elastic, 3 workers of 1 rank, H = 5: rank 2 dies in step 12,
                the 2 survivors go back to the round end of step 10 and finish 20 steps

usage: diloco_vs_torch.py BIN_DIR WORK_DIR [SCENARIO...]   (default: fp32)
"""
import copy
import glob
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import st_io  # noqa: E402  (the independent safetensors reader/writer)

LR, WD, OUTER_LR, OUTER_MU = 1e-3, 0.01, 0.7, 0.9
DATA = "/usr/share/datasets/fashion-mnist"
TOL = 1e-5
# 16-bit wires: a tenth of the wire's unit roundoff (bf16 2^-9 / 10 = 2.0e-4, fp16 2^-12 / 10
# = 2.4e-5). Rounding the same sums, train and the reference still round a few values the
# other way (those within the fp32 runs' differences of a rounding boundary: 83 of fc1's
# 200,704, one of fc2's 128 biases), one 16-bit step apart each; leaving the rounding out
# of the reference misses by 28x (bf16) and 9x (fp16) more than this bound.
WIRE_TOL = {"fp32": TOL, "bf16": 2.0 ** -9 / 10, "fp16": 2.0 ** -12 / 10}
# The outer state (theta's and the momentum's slices in the checkpoints) on 16-bit wires:
# half the unit roundoff. The momentum is made of the rounded averages themselves, so a
# value rounded the other way moves it by a 16-bit step of the pseudo-gradient, not of
# the parameter (measured: fp16 1.1e-5 and 1.5e-5 with OpenBLAS's Haswell kernels,
# bf16 2.7e-5).
OUTER_TOL = {"fp32": TOL, "bf16": 2.0 ** -9 / 2, "fp16": 2.0 ** -12 / 2}
CNN = dict(c1=4, c2=8, hidden=31)  # 40 + 296 + 12,183 + 320 = 12,839 parameters

SCENARIOS = {
    "fp32": dict(np=2, group=1, H=5, steps=15),
    "bf16_overlap": dict(np=2, group=1, H=5, D=2, dtype="bf16", steps=16),
    "fp16_hosts": dict(np=4, group=2, hosts=2, H=5, dtype="fp16", steps=13),
    "group3_epochs": dict(np=3, group=3, H=4, model="cnn", subset=300, epochs=2, shuffle=True),
    "elastic": dict(np=3, group=1, H=5, steps=20, kill="2:12:update"),
}


def load_images(data=DATA):
    with gzip.open(os.path.join(data, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(data, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), dtype=np.uint8, offset=8)
    x = (x.astype(np.float32) / np.float32(255.0) - np.float32(0.2860)) / np.float32(0.3530)
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def write_subset(src, dst, train_n, test_n):
    """The first train_n training and test_n test samples of Fashion-MNIST, as idx files."""
    os.makedirs(dst, exist_ok=True)
    for split, n in (("train", train_n), ("t10k", test_n)):
        with gzip.open(os.path.join(src, f"{split}-images-idx3-ubyte.gz")) as f:
            img = f.read()[16:16 + n * 784]
        with gzip.open(os.path.join(src, f"{split}-labels-idx1-ubyte.gz")) as f:
            lab = f.read()[8:8 + n]
        with gzip.open(os.path.join(dst, f"{split}-images-idx3-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">IIII", 2051, n, 28, 28) + img)
        with gzip.open(os.path.join(dst, f"{split}-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(struct.pack(">II", 2049, n) + lab)


def initial_params(model, seed=7):
    g = np.random.default_rng(seed)
    p = {}
    if model == "mlp":
        shapes = {"fc1": (256, 784), "fc2": (128, 256), "fc3": (10, 128)}
    else:
        c1, c2, hid = CNN["c1"], CNN["c2"], CNN["hidden"]
        shapes = {"conv1": (c1, 1, 3, 3), "conv2": (c2, c1, 3, 3), "fc1": (hid, c2 * 7 * 7), "fc2": (10, hid)}
    for name, shape in shapes.items():
        bound = 1 / np.sqrt(np.prod(shape[1:]))
        p[name + ".weight"] = g.uniform(-bound, bound, shape).astype(np.float32)
        p[name + ".bias"] = g.uniform(-bound, bound, (shape[0],)).astype(np.float32)
    return p


def forward(p, x, model):
    if model == "mlp":
        h = F.relu(F.linear(x, p["fc1.weight"], p["fc1.bias"]))
        h = F.relu(F.linear(h, p["fc2.weight"], p["fc2.bias"]))
        return F.linear(h, p["fc3.weight"], p["fc3.bias"])
    h = x.reshape(-1, 1, 28, 28)
    h = F.max_pool2d(F.relu(F.conv2d(h, p["conv1.weight"], p["conv1.bias"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, p["conv2.weight"], p["conv2.bias"], padding=1)), 2)
    h = F.relu(F.linear(h.flatten(1), p["fc1.weight"], p["fc1.bias"]))
    return F.linear(h, p["fc2.weight"], p["fc2.bias"])


def read_sample_logs(prefix, expect_files):
    """{file suffix: [(step, world, rank, [sample index, ...]), ...]} in the order written."""
    logs = {}
    files = sorted(glob.glob(prefix + ".*"))
    if len(files) != expect_files:
        sys.exit(f"FAIL: {len(files)} sample logs for {expect_files} processes: {files}")
    for path in files:
        rows = []
        for line in open(path):
            f = line.split()
            rows.append((int(f[0]), int(f[1]), int(f[2]), [int(v) for v in f[3:]]))
        logs[path[len(prefix) + 1:]] = rows
    return logs


def batches(logs, world, first, last):
    """{step: [rank's samples for rank in 0..world-1]} from the log lines of that world
    size (the last line wins: a step redone after a regroup replaces the failed one)."""
    by = {}
    for rows in logs.values():
        for step, w, rank, idx in rows:
            if w == world and first <= step <= last:
                by.setdefault(step, {})[rank] = idx
    out = {}
    for step in range(first, last + 1):
        got = by.get(step, {})
        if sorted(got) != list(range(world)):
            sys.exit(f"FAIL: step {step}: the sample logs name ranks {sorted(got)} of a world of {world}")
        if len({len(v) for v in got.values()}) != 1 or not got[0]:
            sys.exit(f"FAIL: step {step}: ranks trained batches of different or no sizes")
        out[step] = [got[r] for r in range(world)]
    return out


class Reference:
    """What train's DiLoCo computes, step by step (diloco_strategy.h's terms), in torch."""

    def __init__(self, p0, x, y, model, H, D=0, dtype="fp32", nesterov=True, mean=True, sign=1.0,
                 keep_overlap=True, settle=True):
        self.names, self.x, self.y, self.model = list(p0), x, y, model
        self.H, self.D, self.dtype = H, D, dtype
        self.mean, self.sign, self.keep_overlap, self.settle_on = mean, sign, keep_overlap, settle
        self.theta = [torch.tensor(p0[n]) for n in self.names]
        self.outer = torch.optim.SGD(self.theta, lr=OUTER_LR, momentum=OUTER_MU, nesterov=nesterov)
        self.workers, self.step, self.begun_at, self.in_flight = [], 0, -1, None
        self.round_ends = {}  # step -> (theta, outer momentum) after that round end's step

    def set_workers(self, count, inner_states=None):
        """count workers starting from theta; inner_states: their AdamW state_dicts."""
        self.workers = []
        for i in range(count):
            w = [t.clone().requires_grad_(True) for t in self.theta]
            opt = torch.optim.AdamW(w, lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=WD)
            if inner_states is not None:
                opt.load_state_dict(inner_states[i])
            self.workers.append((w, opt))

    def inner_states(self):
        return [copy.deepcopy(opt.state_dict()) for _, opt in self.workers]

    def inner_step(self, shares):
        """shares[i]: worker i's ranks' sample lists; its gradient is their gradients' mean."""
        self.step += 1
        for (w, opt), ranks in zip(self.workers, shares):
            grads = []
            for idx in ranks:
                i = torch.tensor(idx)
                loss = F.cross_entropy(forward(dict(zip(self.names, w)), self.x[i], self.model), self.y[i])
                grads.append(torch.autograd.grad(loss, w))
            for k, p in enumerate(w):
                p.grad = grads[0][k].clone() if len(grads) == 1 else sum(g[k] for g in grads) / len(grads)
            opt.step()
        if self.in_flight is not None and self.step == self.begun_at + self.D:
            self.finish()
        if self.step % self.H == 0:
            self.begin(self.D > 0)
            self.begun_at = self.step
            if self.D == 0:
                self.finish()
            self.round_ends[self.step] = self.outer_state()

    def begin(self, keep_round_end):
        G = len(self.workers)
        avg = []
        for k, t in enumerate(self.theta):
            deltas = [t - w[k].detach() for w, _ in self.workers]
            if self.dtype == "fp32":
                s = deltas[0].clone()
                for d in deltas[1:]:
                    s = s + d
                a = s / G if self.mean else s
            else:  # scaled by 1/G, rounded to 16 bits, summed in float with a rounding after each addition
                dt = torch.bfloat16 if self.dtype == "bf16" else torch.float16
                scale = torch.tensor(1.0 / G if self.mean else 1.0, dtype=torch.float32)
                s = (deltas[0] * scale).to(dt)
                for d in deltas[1:]:
                    s = (s.float() + (d * scale).to(dt).float()).to(dt)
                a = s.float()
            avg.append(self.sign * a)
        ends = [[p.detach().clone() for p in w] for w, _ in self.workers] if keep_round_end else None
        self.in_flight = (avg, ends)

    def finish(self):
        avg, ends = self.in_flight
        self.in_flight = None
        for t, a in zip(self.theta, avg):
            t.grad = a
        self.outer.step()
        with torch.no_grad():
            for i, (w, _) in enumerate(self.workers):
                for k, p in enumerate(w):
                    if ends is not None and self.keep_overlap:
                        p.copy_(self.theta[k] + (p - ends[i][k]))
                    else:
                        p.copy_(self.theta[k])

    def settle(self):
        if not self.settle_on:
            return
        if self.in_flight is not None:
            self.finish()
        if self.step % self.H != 0 and self.step > self.begun_at:
            self.begin(False)
            self.begun_at = self.step
            self.finish()

    def outer_state(self):
        """theta and the outer momentum, each flattened in the model's order."""
        mom = [self.outer.state[t].get("momentum_buffer", torch.zeros_like(t)) for t in self.theta]
        return torch.cat([t.flatten() for t in self.theta]).numpy().copy(), torch.cat([m.flatten() for m in mom]).numpy().copy()

    def worker_params(self, i):
        return {n: self.workers[i][0][k].detach().numpy().copy() for k, n in enumerate(self.names)}


def max_rel_l2(ref, other):
    """The largest over the tensors of ||other - ref|| / ||ref||, computed in float64."""
    return max(float(np.linalg.norm(other[n].astype(np.float64) - ref[n]) / np.linalg.norm(ref[n].astype(np.float64)))
               for n in ref)


def max_diff(a, b):
    return max(float(np.max(np.abs(a[n] - b[n]))) for n in a)


def run_train(bin_dir, work, sc, cfg, p0):
    d = os.path.join(work, sc)
    os.makedirs(d, exist_ok=True)
    init = os.path.join(d, "init.safetensors")
    st_io.write(init, p0)
    prefix = os.path.join(d, "samples")
    for old in glob.glob(prefix + ".*") + glob.glob(os.path.join(d, "dump.*")) + glob.glob(os.path.join(d, "m.jsonl")):
        os.remove(old)
    shutil.rmtree(os.path.join(d, "ck"), ignore_errors=True)
    np_, elastic = cfg["np"], "kill" in cfg
    launch = [os.path.join(bin_dir, "launch")] + (["--elastic", "-n", f"{np_ - 1}:{np_}"] if elastic else ["-n", str(np_)])
    group = [] if cfg.get("hosts") else ["--diloco-group", str(cfg["group"])]
    cmd = launch + [os.path.join(bin_dir, "train")] + (["--elastic"] if elastic else []) + [
        "--backend", "tcp", "--model", cfg.get("model", "mlp"), "--init-from", init, "--strategy", "diloco", *group,
        "--inner-steps", str(cfg["H"]), "--outer-lr", str(OUTER_LR), "--outer-momentum", str(OUTER_MU),
        "--outer-dtype", cfg.get("dtype", "fp32"), "--outer-overlap-steps", str(cfg.get("D", 0)),
        "--optimizer", "adamw", "--lr", str(LR), "--weight-decay", str(WD), "--lr-schedule", "constant",
        "--batch-size", "16", "--log-every", "5", "--max-eval-samples", "64", "--debug-sample-log", prefix,
        "--debug-state-dump", os.path.join(d, "dump"), "--metrics-out", os.path.join(d, "m.jsonl"),
        "--checkpoint-dir", os.path.join(d, "ck"), "--save-every", str(cfg["H"])]
    if cfg.get("model") == "cnn":
        cmd += ["--cnn-c1", str(CNN["c1"]), "--cnn-c2", str(CNN["c2"]), "--cnn-hidden", str(CNN["hidden"])]
    if cfg.get("subset"):
        cmd += ["--data-dir", os.path.join(d, "data"), "--epochs", str(cfg["epochs"]), "--steps", "0"]
    else:
        cmd += ["--steps", str(cfg["steps"])]
    if not cfg.get("shuffle"):
        cmd.append("--no-shuffle")
    if elastic:
        cmd += ["--debug-signal", cfg["kill"]]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if cfg.get("hosts"):
        env["COMM_FAKE_HOSTS"] = str(cfg["hosts"])
    if elastic:
        env.update(COMM_TIMEOUT_S="20", COMM_RENDEZVOUS_TIMEOUT_S="30")
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    out = run.stdout + run.stderr
    if run.returncode != 0:
        sys.exit("FAIL: %s: train exited with %d:\n%s" % (sc, run.returncode, out[-3000:]))
    return d, prefix, out


def check(sc, ours, ref, what, tol):
    d = max_rel_l2(ref, ours)
    if not d <= tol:
        sys.exit(f"FAIL: {sc}: {what} differ from the PyTorch reference by {d:.3g} > {tol:g} (relative L2)")
    return d


def check_outer(sc, d, r, group, theta, momentum, tol):
    """Rank r's checkpoint holds its slice i = r % group of theta and of the outer
    momentum: [i * chunk, (i + 1) * chunk) with chunk = ceil(numel / group), cut at numel."""
    t, _ = st_io.read(os.path.join(d, f"model.diloco.rank{r}.safetensors"))
    n, i = theta.size, r % group
    chunk = -(-n // group)
    lo, hi = min(n, i * chunk), min(n, (i + 1) * chunk)
    worst = 0.0
    for name, ref in (("theta", theta[lo:hi]), ("outer.momentum_buffer", momentum[lo:hi])):
        ours = t.get(name)
        if ours is None or ours.size != hi - lo:
            sys.exit(f"FAIL: {sc}: rank {r}'s checkpoint has no '{name}' of {hi - lo} values (slice [{lo}, {hi}) of {n})")
        e = float(np.linalg.norm(ours.astype(np.float64) - ref) / max(np.linalg.norm(ref.astype(np.float64)), 1e-30))
        if not e <= tol:
            sys.exit(f"FAIL: {sc}: rank {r}'s {name} (slice [{lo}, {hi}) of {n}) in {d} differs from the reference's by "
                     f"{e:.3g} > {tol:g} (relative L2)")
        worst = max(worst, e)
    return worst


def wrong_rules(sc, run_ref, ours, rules, tol):
    """Each wrong rule's reference must miss train's result: by more than 10x the bound
    (factor 10), or at all (factor 1: the 16-bit rounding left out)."""
    for what, kw, factor in rules:
        wrong = max_rel_l2(run_ref(**kw), ours)
        print(f"  {sc}: the reference with {what}: {wrong:.3g}")
        if wrong <= factor * tol:
            sys.exit(f"FAIL: {sc}: the reference with {what} is within {wrong:.3g} of train: the check cannot tell them apart")


def scenario(bin_dir, work, sc, images):
    cfg = SCENARIOS[sc]
    model, H, D, dtype = cfg.get("model", "mlp"), cfg["H"], cfg.get("D", 0), cfg.get("dtype", "fp32")
    p0 = initial_params(model)
    if cfg.get("subset"):
        write_subset(DATA, os.path.join(work, sc, "data"), cfg["subset"], 64)
        x, y = load_images(os.path.join(work, sc, "data"))
    else:
        x, y = images
    d, prefix, out = run_train(bin_dir, work, sc, cfg, p0)
    np_, group = cfg["np"], cfg["group"]
    want = f"DiLoCo(H={H}, {np_ // group} groups of {group}, outer {dtype}"
    if want not in out:
        sys.exit(f"FAIL: {sc}: train's header lacks '{want}'")
    logs = read_sample_logs(prefix, np_)
    dumps = [st_io.read(os.path.join(d, f"dump.rank{r}.safetensors"))[0] for r in range(np_ if "kill" not in cfg else np_ - 1)]
    last = [None]  # the latest reference run (its outer state)

    if "kill" in cfg:
        # The regroup: back to the newest round end R; steps 1..R by 3 workers, R+1..20 by 2.
        events = [json.loads(line) for line in open(os.path.join(d, "m.jsonl")) if '"event":"membership"' in line]
        if len(events) != 1:
            sys.exit(f"FAIL: {sc}: {len(events)} membership events, wanted 1")
        R = int(events[0]["resumed_after_step"])
        if R % H != 0 or R < H:
            sys.exit(f"FAIL: {sc}: the survivors went on after step {R}, not a round's end")
        if "world_size=2 " not in out or "recoveries=1 " not in out:
            sys.exit(f"FAIL: {sc}: the final line does not show 2 survivors after 1 recovery")
        first = batches(logs, np_, 1, R)
        second = batches(logs, np_ - 1, R + 1, cfg["steps"])
        # Which first-generation worker each survivor was: its process's rank in the world of 3.
        old_rank = {}
        for rows in logs.values():
            new = {r for s, w, r, _ in rows if w == np_ - 1}
            old = {r for s, w, r, _ in rows if w == np_ and s <= R}
            if new:
                old_rank[new.pop()] = old.pop()

        def run_ref(drop_momentum=False, **kw):
            ref = Reference(p0, x, y, model, **dict(dict(H=H, D=D, dtype=dtype), **kw))
            ref.set_workers(np_)
            for s in range(1, R + 1):
                ref.inner_step([[b] for b in first[s]])
            states = ref.inner_states()
            ref.set_workers(np_ - 1, [states[old_rank[r]] for r in range(np_ - 1)])
            if drop_momentum:
                ref.outer = torch.optim.SGD(ref.theta, lr=OUTER_LR, momentum=OUTER_MU, nesterov=True)
            for s in range(R + 1, cfg["steps"] + 1):
                ref.inner_step([[b] for b in second[s]])
            ref.settle()
            last[0] = ref
            return ref.worker_params(0)
        what = "rank {}'s final parameters (regrouped at step %d; new rank: worker before %s)" % (R, old_rank)
        rules = [("the outer momentum dropped at the regroup", dict(drop_momentum=True), 10)]
    else:
        steps = max(s for rows in logs.values() for s, *_ in rows)
        if cfg.get("steps") and steps != cfg["steps"]:
            sys.exit(f"FAIL: {sc}: the sample logs end at step {steps}, not {cfg['steps']}")
        per_step = batches(logs, np_, 1, steps)
        if cfg.get("subset"):
            per_epoch = -(-cfg["subset"] // np_)  # samples per rank and epoch
            sizes = [len(per_step[s][0]) for s in range(1, steps + 1)]
            want_sizes = ([16] * (per_epoch // 16) + ([per_epoch % 16] if per_epoch % 16 else [])) * cfg["epochs"]
            if sizes != want_sizes:
                sys.exit(f"FAIL: {sc}: batch sizes per step {sizes}, wanted {want_sizes}")
            if steps % H == 0 or (steps // cfg["epochs"]) % H == 0:
                sys.exit(f"FAIL: {sc}: H = {H} divides the epoch or the run ({steps} steps)")

        def run_ref(**kw):
            ref = Reference(p0, x, y, model, **dict(dict(H=H, D=D, dtype=dtype), **kw))
            ref.set_workers(np_ // group)
            for s in range(1, steps + 1):
                ref.inner_step([per_step[s][i * group:(i + 1) * group] for i in range(np_ // group)])
            ref.settle()
            last[0] = ref
            return ref.worker_params(0)
        what = "rank {}'s final parameters"
        rules = []
        if sc == "fp32":
            rules = [("plain momentum instead of Nesterov", dict(nesterov=False), 10),
                     ("a sum of the pseudo-gradients instead of their mean", dict(mean=False), 10),
                     ("the pseudo-gradient's sign flipped", dict(sign=-1.0), 10)]
        if dtype != "fp32":
            rules += [(f"a sum for the mean on the {dtype} wire (scale 1, not 1/G)", dict(mean=False), 10),
                      (f"the {dtype} rounding left out (fp32 on the wire)", dict(dtype="fp32"), 1)]
        if D:
            rules.append(("the overlapped steps dropped where the exchange lands", dict(keep_overlap=False), 10))
        if steps % H:
            rules.append(("no outer step for the round cut short (settle skipped)", dict(settle=False), 10))

    ref = run_ref()
    tol = WIRE_TOL[dtype]
    dist = [check(sc, dump, ref, what.replace("{}", str(r)), tol) for r, dump in enumerate(dumps)]
    # The last round end's checkpoint (--save-every H): every rank's slices of theta and momentum.
    k = int(open(os.path.join(d, "ck", "latest")).read().strip().removeprefix("step_"))
    if k not in last[0].round_ends:
        sys.exit(f"FAIL: {sc}: the last checkpoint is of step {k}, not a round's end")
    theta, momentum = last[0].round_ends[k]
    outer = [check_outer(sc, os.path.join(d, "ck", f"step_{k}"), r, group, theta, momentum, OUTER_TOL[dtype])
             for r in range(len(dumps))]
    moved = max_rel_l2(ref, p0)
    workers = f"{np_} workers of 1, regrouped as {np_ - 1} after step {R}" if "kill" in cfg else \
        f"{np_ // group} worker{'s' if np_ // group > 1 else ''} of {group}"
    print(f"{sc}: {workers}, H={H}, D={D}, {dtype} wire, "
          f"{len(dumps)} ranks' final parameters within {max(dist):.3g} of the reference (bound {tol:g}), largest "
          f"element difference {max(max_diff(ref, dm) for dm in dumps):.3g}; training moved them by {moved:.3g}; "
          f"their slices of theta and of the outer momentum at step {k} (checkpoint) within {max(outer):.3g} "
          f"(bound {OUTER_TOL[dtype]:g})")
    wrong_rules(sc, run_ref, dumps[0], rules, tol)


def main():
    bin_dir, work = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or ["fp32"]
    for sc in names:
        if sc not in SCENARIOS:
            sys.exit(f"FAIL: unknown scenario {sc} (valid: {', '.join(SCENARIOS)})")
    torch.set_num_threads(1)
    os.makedirs(work, exist_ok=True)
    images = load_images()
    for sc in names:
        scenario(bin_dir, work, sc, images)
    print("PASS")


if __name__ == "__main__":
    main()
