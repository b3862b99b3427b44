#!/usr/bin/python3
"""Our BatchNorm and ResNet-18 against PyTorch 1.13 / torchvision 0.14.

Usage: resnet_vs_torch.py RESNET_TORCH_IO WORK_DIR [--train-local TRAIN_LOCAL] [case ...]

Cases (all by default):
  bn2d, bn1d        a layer with parameters, then BatchNorm (2d, 1d): outputs in eval and
                    train mode, loss, every gradient, running statistics after one step and
                    after 3 more SGD steps, against the same module in PyTorch.
  resnet18          torchvision.models.resnet18(num_classes=10): our checkpoint has exactly
                    torchvision's state_dict names, shapes and dtypes, loads with
                    strict=True, and the outputs, gradients and buffers match.
  resnet18-cifar    the same with the cifar stem (3x3/1 conv1, no max-pool), 1 input channel, 16x16
                    (at 8x8 layer 4 runs at 1x1 and every gradient is within one float32
                    rounding of a kink: sensitivity 1e-2 everywhere, nothing left to test).
  torchvision-in    the other way: a torchvision model trained 3 steps, its state_dict
                    written by an independent writer (tests/support/st_io.py), loaded by our
                    load_model (what --init-from calls), outputs compared; our re-save of
                    it equals the file torchvision wrote.
  init-from-flag    (with --train-local) the same kind of file through the user's path:
                    train_local --model resnet18 --dataset cifar10 --init-from FILE
                    --eval-only on a CIFAR-10 folder this script writes; the held-out loss
                    and accuracy equal torchvision's on the same bytes (tutorial Normalize).
Every comparison is against PyTorch run in float64 (the exact answer, to float32's
eyes), and prints three figures, rel(x) = max|x - torch64| / max|torch64|: ours,
PyTorch's own in float32, and the case's sensitivity to float32 rounding: the largest
rel() of SENS_RUNS float64 runs whose inputs, parameters and every layer's output carry
random relative perturbations: one float32 ulp (2^-23) for the first forward and
backward, 32 ulps (2^-18) once SGD steps begin. Why two sizes: one computation's
rounding is what separates two kernels' first gradients, but from the second step on
the two runs start from parameters already apart by the first gradient's error, which
a float32 dot product accumulates over thousands of terms.
Ours passes when it is within the tolerance, or within 3x PyTorch's float32 error, or
within 10x that sensitivity. The bound is the case's own: a well-conditioned tensor is
held to the tolerance, while one where a float32 rounding can move the answer
(BatchNorm over the few values of a small batch at 1x1 resolution; an activation
within rounding of a ReLU kink, where the gradient of every weight that sees it jumps;
SGD steps that carry such a jump on) is held to what float32 can promise on it,
whichever CPU kernel computed it. A single PyTorch float32 run is no such bound: it lands
on one side of each kink, another kernel may land on the other (issue 25: 6e-2 against
PyTorch's 1e-2 on a CPU whose OpenBLAS picked other kernels; and with one-ulp
perturbations throughout, OpenBLAS's Cooperlake kernels moved torchvision-in's
parameters after 2 SGD steps by 4.7e-4..3.8e-3 where the measured sensitivity was 1e-7).
"""
import copy
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import st_io  # noqa: E402

torch.set_num_threads(1)
TOL_OUT = 1e-5      # forward outputs, eval and train mode, the loss, running statistics
TOL_GRAD = 1e-4     # gradients after one backward through up to 20 BatchNorms
TOL_STEPS = 1e-4    # parameters and buffers after the SGD steps
SENS_RUNS = 3       # perturbed float64 runs that measure each case's sensitivity
ULP = 2.0 ** -23    # one-step figures: perturbations of one float32 ulp
STEP_NOISE = 2.0 ** -18  # after SGD steps: 32 ulps, a float32 dot product's accumulated
                         # rounding (about sqrt(k)/2 ulps for k up to 4608), which is how
                         # far the parameters of two kernels' runs are apart after a step
failures = []


def rel(ours, ref, floor=1e-12):
    """max|ours - ref| / max|ref|; `floor` bounds the denominator from below."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if ours.shape != ref.shape:
        return float("inf")
    scale = max(np.abs(ref).max(initial=0.0), floor)
    return float(np.abs(ours - ref).max(initial=0.0) / scale)


def check(label, ours, ref32, ref64, perturbed, tol, floor=1e-12):
    e_ours, e_torch = rel(ours, ref64, floor), rel(ref32, ref64, floor)
    sens = max(rel(p, ref64, floor) for p in perturbed)
    ok = e_ours <= max(tol, 3 * e_torch, 10 * sens)
    print(f"  {'ok  ' if ok else 'FAIL'} {label:46s} ours {e_ours:.1e}  torch-f32 {e_torch:.1e}  "
          f"sensitivity {sens:.1e}  (tol {tol:.0e})")
    if not ok:
        failures.append(label)


class Probe(torch.nn.Module):
    def __init__(self, two_d, channels):
        super().__init__()
        if two_d:
            self.conv = torch.nn.Conv2d(channels, channels, 1)
            self.bn = torch.nn.BatchNorm2d(channels)
        else:
            self.fc = torch.nn.Linear(channels, channels)
            self.bn = torch.nn.BatchNorm1d(channels)
        self.two_d = two_d

    def forward(self, x):
        x = self.conv(x) if self.two_d else self.fc(x)
        return torch.flatten(self.bn(x), 1)


def torchvision_resnet(stem, in_channels):
    m = torchvision.models.resnet18(num_classes=10)
    if stem == "cifar":
        m.conv1 = torch.nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        m.maxpool = torch.nn.Identity()
    elif in_channels != 3:
        m.conv1 = torch.nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    return m


def state_dict_from_file(path):
    tensors, _ = st_io.read(path)
    return {k: torch.from_numpy(v) for k, v in tensors.items()}


def check_names(ours_sd, module):
    """Every name, shape and dtype of our checkpoint against torchvision's state_dict."""
    ref = module.state_dict()
    missing = sorted(set(ref) - set(ours_sd))
    extra = sorted(set(ours_sd) - set(ref))
    bad = [k for k in ref if k in ours_sd and
           (tuple(ours_sd[k].shape) != tuple(ref[k].shape) or ours_sd[k].dtype != ref[k].dtype)]
    ok = not missing and not extra and not bad
    print(f"  {'ok  ' if ok else 'FAIL'} names/shapes/dtypes: {len(ours_sd)} tensors vs torchvision's {len(ref)}"
          + (f" missing {missing[:5]} extra {extra[:5]} mismatched {bad[:5]}" if not ok else ""))
    if not ok:
        failures.append("names")
    module.load_state_dict(ours_sd, strict=True)


def torch_sequence(module, feed, classifier, lr):
    """The sequence resnet_torch_io runs, in PyTorch, in float32, in float64 (on a copy),
    and SENS_RUNS times in float64 with float32-sized perturbations. Returns the float32
    and float64 dicts of results and the list of perturbed ones."""
    m64 = copy.deepcopy(module).double()
    f64 = {k: v.astype(np.float64) if v.dtype == np.float32 else v for k, v in feed.items()}
    gen = torch.Generator().manual_seed(2025)
    perturbed = [perturbed_run(m64, f64, classifier, lr, gen) for _ in range(SENS_RUNS)]
    return torch_run(module, feed, classifier, lr), torch_run(m64, f64, classifier, lr), perturbed


def perturbed_run(m64, f64, classifier, lr, gen):
    """torch_run in float64 where the inputs, the parameters and the output of every
    convolution, linear layer and BatchNorm are multiplied by (1 + level * N(0, 1)): what
    float32 rounding does to each of them, in one random draw; level is ULP, then
    STEP_NOISE from the first SGD step on."""
    level = [ULP]

    def jitter(t):
        return t * (1 + level[0] * torch.randn(t.shape, generator=gen, dtype=torch.float64))
    m = copy.deepcopy(m64)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(jitter(p))
    layers = (torch.nn.Conv2d, torch.nn.Linear, torch.nn.BatchNorm1d, torch.nn.BatchNorm2d)
    for mod in m.modules():
        if isinstance(mod, layers):
            mod.register_forward_hook(lambda _m, _i, out: jitter(out))
    feed = {k: jitter(torch.from_numpy(v)).numpy() if v.dtype == np.float64 else v for k, v in f64.items()}
    return torch_run(m, feed, classifier, lr, before_steps=lambda: level.__setitem__(0, STEP_NOISE))


def torch_run(module, feed, classifier, lr, before_steps=None):
    out = {}
    x = torch.from_numpy(feed["x"])
    loss_fn = torch.nn.CrossEntropyLoss() if classifier else torch.nn.MSELoss()
    target = torch.from_numpy(feed["labels"] if classifier else feed["targets"])
    module.eval()
    with torch.no_grad():
        out["eval_out"] = module(x).numpy().copy()
    module.train()
    module.zero_grad()
    y = module(x)
    loss = loss_fn(y, target)
    loss.backward()
    out["train_out"] = y.detach().numpy().copy()
    out["train_loss"] = np.array([loss.item()], dtype=np.float32)
    for name, p in module.named_parameters():
        out["grad/" + name] = p.grad.numpy().copy()
    for name, b in module.named_buffers():
        out["buffer/" + name] = b.numpy().copy()
    steps_x = feed.get("steps_x")
    if before_steps:
        before_steps()
    for k in range(0 if steps_x is None else steps_x.shape[0]):
        module.zero_grad()
        t = torch.from_numpy(feed["steps_labels"][k] if classifier else feed["steps_targets"][k])
        loss_fn(module(torch.from_numpy(steps_x[k])), t).backward()
        with torch.no_grad():
            for p in module.parameters():
                p -= lr * p.grad
    for name, t in module.state_dict().items():
        out["final/" + name] = t.numpy().copy()
    module.eval()
    with torch.no_grad():
        out["final_eval_out"] = module(x).numpy().copy()
    return out


def compare(ours, refs):
    ref, ref64, perturbed = refs

    def check_key(key, tol, floor=1e-12):
        check(key, ours[key], ref[key], ref64[key], [p[key] for p in perturbed], tol, floor)

    for key in ["eval_out", "train_out", "train_loss"]:
        check_key(key, TOL_OUT)
    # A bias right before a BatchNorm has a gradient that is zero in exact arithmetic
    # (the normalisation removes any shift); both sides hold rounding noise there, so
    # gradients are measured against 1e-3 of the model's largest gradient at least.
    grads = [k for k in ref if k.startswith("grad/")]
    grad_floor = 1e-3 * max(np.abs(ref64[k]).max(initial=0.0) for k in grads)
    for key in sorted(grads):
        check_key(key, TOL_GRAD, grad_floor)
    for key in sorted(k for k in ref if k.startswith("buffer/")):
        check_key(key, TOL_OUT)
    for key in sorted(k for k in ref if k.startswith("final/")):
        check_key(key, TOL_STEPS)
    check_key("final_eval_out", TOL_STEPS)


def make_feed(rng, shape, classifier, steps, out_numel=None):
    feed = {"x": (rng.standard_normal(shape) * 2.0 + 0.5).astype(np.float32)}
    xs = (rng.standard_normal((steps,) + shape) * 2.0 + 0.5).astype(np.float32)
    feed["steps_x"] = xs
    n = shape[0]
    if classifier:
        feed["labels"] = rng.integers(0, 10, n).astype(np.int64)
        feed["steps_labels"] = rng.integers(0, 10, (steps, n)).astype(np.int64)
    else:
        feed["targets"] = rng.standard_normal((n, out_numel)).astype(np.float32)
        feed["steps_targets"] = rng.standard_normal((steps, n, out_numel)).astype(np.float32)
    return feed


def run_ours(tool, work, name, model, feed, lr, extra=()):
    inp = os.path.join(work, name + ".in.safetensors")
    out = os.path.join(work, name + ".ours.safetensors")
    saved = os.path.join(work, name + ".model.safetensors")
    st_io.write(inp, feed)
    cmd = [tool, "--model", model, "--input", inp, "--out", out, "--save-model", saved, "--lr", str(lr)] + list(extra)
    subprocess.run(cmd, check=True)
    return st_io.read(out)[0], saved


def case_probe(tool, work, two_d):
    name = "bn2d" if two_d else "bn1d"
    print(f"{name}: BatchNorm{'2d' if two_d else '1d'} against PyTorch")
    rng = np.random.default_rng(7 if two_d else 8)
    shape = (6, 4, 5, 3) if two_d else (10, 6)
    numel = int(np.prod(shape[1:]))
    feed = make_feed(rng, shape, False, 3, numel)
    ours, saved = run_ours(tool, work, name, name, feed, 0.1)
    module = Probe(two_d, shape[1])
    module.load_state_dict(state_dict_from_file(saved), strict=True)
    compare(ours, torch_sequence(module, feed, False, 0.1))


def case_resnet(tool, work, stem, in_channels, size):
    name = f"resnet18-{stem}-{in_channels}ch"
    print(f"{name}: ResNet-18 ({stem} stem, {in_channels} input channels, {size}x{size}) against torchvision")
    rng = np.random.default_rng(11)
    feed = make_feed(rng, (8, in_channels, size, size), True, 2)
    ours, saved = run_ours(tool, work, name, "resnet18", feed, 0.01, ["--stem", stem])
    module = torchvision_resnet(stem, in_channels)
    check_names(state_dict_from_file(saved), module)
    compare(ours, torch_sequence(module, feed, True, 0.01))


def case_torchvision_in(tool, work):
    print("torchvision-in: a torchvision state_dict (trained 3 steps) loaded by our load_model")
    torch.manual_seed(3)
    module = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(12)
    for _ in range(3):
        x = torch.from_numpy((rng.standard_normal((4, 3, 32, 32))).astype(np.float32))
        y = torch.from_numpy(rng.integers(0, 10, 4).astype(np.int64))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(module(x), y).backward()
        opt.step()
    sd = {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}
    assert sd["bn1.num_batches_tracked"].dtype == np.int64 and int(sd["bn1.num_batches_tracked"]) == 3
    path = os.path.join(work, "torchvision.safetensors")
    st_io.write(path, sd, {"format": "pt"})
    feed = make_feed(rng, (8, 3, 32, 32), True, 2)
    ours, resaved = run_ours(tool, work, "torchvision-in", "resnet18", feed, 0.01, ["--init-from", path])
    # Our re-save of what we loaded is torchvision's file, value for value and dtype for dtype.
    back, _ = st_io.read(resaved)
    same = set(back) == set(sd) and all(back[k].dtype == sd[k].dtype and np.array_equal(back[k], sd[k]) for k in sd)
    print(f"  {'ok  ' if same else 'FAIL'} re-saved checkpoint equals torchvision's state_dict exactly")
    if not same:
        failures.append("torchvision-in resave")
    compare(ours, torch_sequence(module, feed, True, 0.01))


def case_init_from_flag(train_local, work):
    print("init-from-flag: train_local --init-from a torchvision file, --eval-only on CIFAR-10 files")
    torch.manual_seed(4)
    module = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(module.parameters(), lr=0.01)
    rng = np.random.default_rng(13)
    folder = os.path.join(work, "cifar")
    os.makedirs(folder, exist_ok=True)
    records = rng.integers(0, 256, (40, 3073), dtype=np.uint8)
    records[:, 0] = rng.integers(0, 10, 40)
    for i in range(1, 6):
        records[(i - 1) * 8:i * 8].tofile(os.path.join(folder, f"data_batch_{i}.bin"))
    records.tofile(os.path.join(folder, "test_batch.bin"))
    mean = np.array([0.4914, 0.4822, 0.4465], np.float32).reshape(1, 3, 1, 1)
    std = np.array([0.2023, 0.1994, 0.2010], np.float32).reshape(1, 3, 1, 1)
    x = torch.from_numpy((records[:, 1:].reshape(-1, 3, 32, 32).astype(np.float32) / 255.0 - mean) / std)
    y = torch.from_numpy(records[:, 0].astype(np.int64))
    for k in range(10):  # some steps, so running statistics and num_batches_tracked are not initial
        opt.zero_grad()
        b = (k % 5) * 8
        torch.nn.functional.cross_entropy(module(x[b:b + 8]), y[b:b + 8]).backward()
        opt.step()
    path = os.path.join(work, "torchvision_trained.safetensors")
    st_io.write(path, {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}, {"format": "pt"})
    module.eval()
    with torch.no_grad():
        logits = module(x)
        ref_loss = torch.nn.functional.cross_entropy(logits, y).item()
        ref_acc = (logits.argmax(1) == y).float().mean().item()
    out = subprocess.run([train_local, "--model", "resnet18", "--dataset", "cifar10", "--data-dir", folder,
                          "--init-from", path, "--eval-only"], check=True, capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("eval-only:")][0]
    loss, acc = float(line.split("loss")[1].split()[0]), float(line.split("accuracy")[1].split()[0])
    n = len(records)
    ok = abs(loss - ref_loss) <= 1e-5 * abs(ref_loss) + 2e-6 and round(acc * n) == round(ref_acc * n)
    print(f"  {'ok  ' if ok else 'FAIL'} held-out loss ours {loss:.6f} torchvision {ref_loss:.6f}, "
          f"accuracy ours {acc:.4f} torchvision {ref_acc:.4f}")
    if not ok:
        failures.append("init-from-flag")


def main():
    args = sys.argv[1:]
    train_local = None
    if "--train-local" in args:
        i = args.index("--train-local")
        train_local = args[i + 1]
        del args[i:i + 2]
    if len(args) < 2:
        sys.exit(__doc__)
    tool, work = args[0], args[1]
    cases = args[2:] or (["bn2d", "bn1d", "resnet18", "resnet18-cifar", "torchvision-in"] +
                         (["init-from-flag"] if train_local else []))
    os.makedirs(work, exist_ok=True)
    for c in cases:
        if c == "bn2d":
            case_probe(tool, work, True)
        elif c == "bn1d":
            case_probe(tool, work, False)
        elif c == "resnet18":
            case_resnet(tool, work, "imagenet", 3, 32)
        elif c == "resnet18-cifar":
            case_resnet(tool, work, "cifar", 1, 16)
        elif c == "torchvision-in":
            case_torchvision_in(tool, work)
        elif c == "init-from-flag" and train_local:
            case_init_from_flag(train_local, work)
        else:
            sys.exit(f"unknown case {c}")
    if failures:
        print(f"FAILED: {len(failures)} comparisons: {failures[:10]}")
        sys.exit(1)
    print("all comparisons within tolerance")


if __name__ == "__main__":
    main()
