#!/usr/bin/python3
"""GPT-2 weights from Hugging Face's layout, checked against an independent reference.

Terms:
  writer     this script's own safetensors writer: 8-byte little-endian header length,
             JSON header {name: {dtype, shape, data_offsets}, "__metadata__": ...},
             raw little-endian bytes. Nothing of the project's code is used to write.
  reference  GPT-2's forward written here in PyTorch, float64: wte + wpe, per block
             x += c_proj(attn(ln_1(x))), x += mlp.c_proj(gelu_new(mlp.c_fc(ln_2(x)))),
             Conv1D y = x W + b with W [in, out], causal softmax attention, ln_f,
             logits = x wte^T, F.cross_entropy(ignore_index=-100); gradients by autograd.
  ours       tests/models/gpt2/gpt2_forward (the C++ model) on the same file and batch.
  rel error  max |ours - reference| / max |reference| over a whole tensor.

Checks (each prints one line; any failure exits 1):
  1. F32 GPT2LMHeadModel file (transformer. prefix, attn.bias buffers, lm_head.weight
     equal to wte), F16 and BF16 GPT2Model files (no prefix, masked_bias buffers): logits,
     loss sum, target count and mean loss within 1e-5 relative of the reference computed
     on the same (rounded) weights; every parameter gradient within GRAD_TOL.
  2. The F16 decoder on all 65536 bit patterns equals numpy's float16 -> float32.
  3. Refused files: a wrong shape, a missing tensor, an untied lm_head, an extra layer,
     a requested size the file does not have: exit 1 naming the tensor (and both shapes).
  4. Export: the model written back (save_gpt2_pretrained) has exactly GPT2LMHeadModel's
     parameter names minus the tied lm_head, F32, [in, out] layouts, metadata format=pt,
     the same values as loaded, and a config.json with GPT2Config's keys and this shape.

GRAD_TOL = 1e-4: ours is float32, the reference float64. Each gradient element sums
B*T = 48 products of backpropagated values through 2 blocks, each with float32 rounding
(unit roundoff 6e-8) and a softmax/LayerNorm chain; measured errors are ~1e-6 (printed),
so 1e-4 leaves room for a different BLAS kernel order yet fails on any real bug (a wrong
transpose, a missing term or a dropped position gives errors of order 1).
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import st_io  # noqa: E402  (the independent safetensors reader/writer)

LAYERS, WIDTH, HEADS, VOCAB, POSITIONS = 2, 64, 4, 300, 32
BATCH, SEQ = 3, 16
LOGIT_TOL, GRAD_TOL = 1e-5, 1e-4
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


# ---- the writer and reader ------------------------------------------------------------
def encode(arr, dtype):
    t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))
    if dtype == "F32":
        return t.numpy().astype("<f4").tobytes()
    if dtype == "F16":
        return t.numpy().astype("<f2").tobytes()
    if dtype == "BF16":
        return t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
    raise ValueError(dtype)


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    st_io.write_raw(path, tensors, metadata)


def read_safetensors(path):
    raw, meta = st_io.read_raw(path)
    out = {}
    for name, (dtype, shape, data) in raw.items():
        if dtype == "F32":
            a = np.frombuffer(data, dtype="<f4")
        elif dtype == "F16":
            a = np.frombuffer(data, dtype="<f2").astype(np.float32)
        elif dtype == "BF16":
            a = torch.from_numpy(np.frombuffer(data, dtype="<i2").copy()).view(torch.bfloat16).float().numpy()
        else:
            raise ValueError(dtype)
        out[name] = (dtype, a.reshape(shape).astype(np.float32))
    return out, meta


# ---- random GPT-2 weights, with Hugging Face's names (no prefix) --------------------------
def make_weights(seed):
    g = np.random.default_rng(seed)
    n = lambda *s, std=0.2: (g.standard_normal(s) * std).astype(np.float32)
    w = {"wte.weight": n(VOCAB, WIDTH, std=0.5), "wpe.weight": n(POSITIONS, WIDTH, std=0.3)}
    for l in range(LAYERS):
        p = f"h.{l}."
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"] = 1 + n(WIDTH, std=0.1)
            w[p + ln + ".bias"] = n(WIDTH, std=0.1)
        w[p + "attn.c_attn.weight"] = n(WIDTH, 3 * WIDTH)
        w[p + "attn.c_attn.bias"] = n(3 * WIDTH, std=0.1)
        w[p + "attn.c_proj.weight"] = n(WIDTH, WIDTH)
        w[p + "attn.c_proj.bias"] = n(WIDTH, std=0.1)
        w[p + "mlp.c_fc.weight"] = n(WIDTH, 4 * WIDTH)
        w[p + "mlp.c_fc.bias"] = n(4 * WIDTH, std=0.1)
        w[p + "mlp.c_proj.weight"] = n(4 * WIDTH, WIDTH, std=0.1)
        w[p + "mlp.c_proj.bias"] = n(WIDTH, std=0.1)
    w["ln_f.weight"] = 1 + n(WIDTH, std=0.1)
    w["ln_f.bias"] = n(WIDTH, std=0.1)
    return w


def causal_buffers(l, masked_bias):
    tril = np.tril(np.ones((POSITIONS, POSITIONS), np.float32)).reshape(1, 1, POSITIONS, POSITIONS)
    out = [(f"h.{l}.attn.bias", "F32", tril.shape, encode(tril, "F32"))]
    if masked_bias:
        out.append((f"h.{l}.attn.masked_bias", "F32", (), encode(np.array(-1e4, np.float32), "F32")))
    return out


def write_model(path, w, dtype, prefix, head=False, masked_bias=False, skip=(), override=None):
    tensors = []
    for name, a in w.items():
        if name in skip:
            continue
        a = override[name] if override and name in override else a
        tensors.append((prefix + name, dtype, a.shape, encode(a, dtype)))
        if name.endswith("ln_1.bias"):
            tensors += [(prefix + t[0], *t[1:]) for t in causal_buffers(int(name.split(".")[1]), masked_bias)]
    if head is not False:
        h = w["wte.weight"] if head is True else head
        tensors.append(("lm_head.weight", dtype, h.shape, encode(h, dtype)))
    write_safetensors(path, tensors, {"format": "pt"})


def stored(w, dtype):  # the values a reader of that dtype gets back
    out = {}
    for k, a in w.items():
        if dtype == "F16":
            out[k] = a.astype(np.float16).astype(np.float32)
        elif dtype == "BF16":
            out[k] = torch.from_numpy(a).to(torch.bfloat16).float().numpy()
        else:
            out[k] = a
    return out


# ---- the reference computation ----------------------------------------------------------
def reference(w, tokens, labels):
    P = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in w.items()}
    tok = torch.tensor(tokens, dtype=torch.long)
    B, T = tok.shape
    hd = WIDTH // HEADS

    def ln(x, name):
        return F.layer_norm(x, (WIDTH,), P[name + ".weight"], P[name + ".bias"], eps=1e-5)

    def conv1d(x, name):  # Hugging Face's Conv1D: x @ W + b, W stored [in, out]
        return x @ P[name + ".weight"] + P[name + ".bias"]

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))

    x = P["wte.weight"][tok] + P["wpe.weight"][:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(LAYERS):
        p = f"h.{l}."
        q, k, v = conv1d(ln(x, p + "ln_1"), p + "attn.c_attn").split(WIDTH, dim=-1)
        q, k, v = (t.view(B, T, HEADS, hd).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / np.sqrt(hd)
        a = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + conv1d(a.transpose(1, 2).reshape(B, T, WIDTH), p + "attn.c_proj")
        x = x + conv1d(gelu_new(conv1d(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
    logits = ln(x, "ln_f") @ P["wte.weight"].T
    lab = torch.tensor(labels, dtype=torch.long).view(-1)
    loss_sum = F.cross_entropy(logits.view(-1, VOCAB), lab, ignore_index=-100, reduction="sum")
    loss_mean = F.cross_entropy(logits.view(-1, VOCAB), lab, ignore_index=-100)
    loss_mean.backward()
    grads = {k: p.grad.numpy() for k, p in P.items()}
    return logits.detach().numpy(), float(loss_sum), int((lab != -100).sum()), float(loss_mean), grads


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def run(binary, *args):
    return subprocess.run([binary, *map(str, args)], capture_output=True, text=True)


def main():
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    g = np.random.default_rng(7)
    tokens = g.integers(0, VOCAB, (BATCH, SEQ)).astype(np.int32)
    labels = np.concatenate([tokens[:, 1:], g.integers(0, VOCAB, (BATCH, 1))], axis=1).astype(np.int32)
    labels[0, :3] = -100          # a prompt that does not count
    labels[1, 10:] = -100         # right padding
    labels[2, 5] = -100           # one position in the middle
    tokens.tofile(os.path.join(work, "tokens.i32"))
    labels.tofile(os.path.join(work, "labels.i32"))
    batch = ["--tokens", os.path.join(work, "tokens.i32"), "--labels", os.path.join(work, "labels.i32"),
             "--batch", BATCH, "--seq", SEQ, "--heads", HEADS]
    w = make_weights(1)

    # 1. three files as published, each against the reference on its own stored values
    variants = [("f32_lmhead", "F32", "transformer.", dict(head=True)),
                ("f16_model", "F16", "", dict(masked_bias=True)),
                ("bf16_model", "BF16", "", dict(masked_bias=True))]
    for name, dtype, prefix, kw in variants:
        path = os.path.join(work, name + ".safetensors")
        write_model(path, w, dtype, prefix, **kw)
        out = os.path.join(work, name + ".ours.safetensors")
        export = os.path.join(work, name + ".export")
        r = run(binary, "--init-from", path, "--out", out, "--export", export, *batch)
        check(r.returncode == 0, f"{name}: our gpt2 loads the {dtype} file ({r.stderr.strip()})")
        if r.returncode:
            continue
        ours, _ = read_safetensors(out)
        ref_logits, ref_sum, ref_count, ref_mean, ref_grads = reference(stored(w, dtype), tokens, labels)
        e = rel(ours["logits"][1], ref_logits)
        check(e <= LOGIT_TOL, f"{name}: logits rel error {e:.2e} <= {LOGIT_TOL:g}")
        e = rel(ours["loss_sum"][1], ref_sum)
        check(e <= LOGIT_TOL, f"{name}: loss sum {ours['loss_sum'][1][0]:.6f} vs {ref_sum:.6f}, rel {e:.2e}")
        check(int(ours["count"][1][0]) == ref_count == BATCH * SEQ - 10,
              f"{name}: target count {int(ours['count'][1][0])} == {ref_count} (ignored positions skipped)")
        e = rel(ours["loss_mean"][1], ref_mean)
        check(e <= LOGIT_TOL, f"{name}: mean loss {ours['loss_mean'][1][0]:.6f} vs {ref_mean:.6f}, rel {e:.2e}")
        worst = max((rel(ours["grad.transformer." + k][1], ref_grads[k]), k) for k in w)
        check(worst[0] <= GRAD_TOL, f"{name}: worst gradient rel error {worst[0]:.2e} ({worst[1]}) <= {GRAD_TOL:g}")
        check_export(export, stored(w, dtype))

    # 2. the F16 decoder on every bit pattern
    bits = np.arange(65536, dtype=np.uint16)
    path = os.path.join(work, "all_f16.safetensors")
    write_safetensors(path, [("all", "F16", (65536,), bits.astype("<u2").tobytes())])
    out = os.path.join(work, "all_f16.ours.safetensors")
    r = run(binary, "--decode", path, "--out", out)
    if r.returncode == 0:
        got = read_safetensors(out)[0]["all"][1]
        want = bits.view(np.float16).astype(np.float32)
        same = np.array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
        same = same and bool(np.all(np.isnan(got[np.isnan(want)])))
        check(same, "F16 decoding of all 65536 bit patterns equals numpy's float16 -> float32")
    else:
        check(False, "F16 decoding ran: " + r.stderr)

    # 3. files that must be refused, with the tensor named (and shapes where they differ)
    shape = ["--layers", LAYERS, "--width", WIDTH, "--vocab", VOCAB, "--positions", POSITIONS]
    bad = {"wrong_shape": (dict(override={"h.1.mlp.c_fc.weight": w["h.1.mlp.c_fc.weight"][:, :200]}),
                           ["h.1.mlp.c_fc.weight", "[64, 200]", "[64, 256]"]),
           "transposed": (dict(override={"h.0.attn.c_attn.weight": w["h.0.attn.c_attn.weight"].T.copy()}),
                          ["h.0.attn.c_attn.weight", "[192, 64]", "[64, 192]"]),
           "missing": (dict(skip={"h.1.ln_2.bias"}), ["missing tensor", "transformer.h.1.ln_2.bias"]),
           "untied_head": (dict(head=w["wte.weight"] * 1.5), ["lm_head.weight", "differs"])}
    for name, (kw, words) in bad.items():
        path = os.path.join(work, name + ".safetensors")
        write_model(path, w, "F32", "transformer.", **kw)
        r = run(binary, "--init-from", path, "--out", os.path.join(work, "x"), *shape, *batch)
        msg = r.stderr.strip()
        check(r.returncode == 1 and all(s in msg for s in words), f"{name}: refused naming {words}: {msg}")
    # a 3-layer file where 2 layers are asked for
    w3 = dict(w, **{k.replace("h.1.", "h.2."): v for k, v in w.items() if k.startswith("h.1.")})
    path = os.path.join(work, "three_layers.safetensors")
    write_model(path, w3, "F32", "")
    r = run(binary, "--init-from", path, "--out", os.path.join(work, "x"), *shape, *batch)
    check(r.returncode == 1 and "unexpected tensor h.2." in r.stderr, f"extra layer refused: {r.stderr.strip()}")
    # the same file with no shape flags: its shape (3 layers) is taken from the file
    r = run(binary, "--init-from", path, "--out", os.path.join(work, "x3.safetensors"), *batch)
    check(r.returncode == 0, f"shape from the file (3 layers) loads: {r.stderr.strip()}")
    # a requested width the file does not have
    r = run(binary, "--init-from", os.path.join(work, "f32_lmhead.safetensors"), "--out", os.path.join(work, "x"),
            "--layers", LAYERS, "--width", 128, "--vocab", VOCAB, "--positions", POSITIONS, *batch)
    check(r.returncode == 1 and "transformer.wte.weight" in r.stderr and "[300, 64]" in r.stderr
          and "[300, 128]" in r.stderr, f"size mismatch refused: {r.stderr.strip()}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)
    print("all checks passed")


GPT2_CONFIG_KEYS = {  # GPT2Config's documented arguments (transformers' GPT-2 docs)
    "vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner", "activation_function",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "layer_norm_epsilon", "initializer_range", "summary_type",
    "summary_use_proj", "summary_activation", "summary_proj_to_labels", "summary_first_dropout",
    "scale_attn_weights", "use_cache", "bos_token_id", "eos_token_id", "scale_attn_by_inverse_layer_idx",
    "reorder_and_upcast_attn"}


def check_export(export, w):
    tensors, meta = read_safetensors(os.path.join(export, "model.safetensors"))
    want = {"transformer." + k for k in w}
    check(set(tensors) == want, f"export: names are GPT2LMHeadModel's parameters (lm_head tied, left out) "
                                f"[{len(tensors)} tensors]")
    check(meta.get("format") == "pt", "export: metadata format=pt (what from_pretrained requires)")
    same = all(tensors[k][0] == "F32" and np.array_equal(tensors[k][1], w[k[len("transformer."):]])
               for k in want if k in tensors)
    check(same, "export: every tensor F32 with the loaded values in the file's own [in, out] layout")
    with open(os.path.join(export, "config.json")) as f:
        cfg = json.load(f)
    check(GPT2_CONFIG_KEYS <= set(cfg), "export: config.json has every GPT2Config key")
    check(cfg.get("model_type") == "gpt2" and cfg.get("architectures") == ["GPT2LMHeadModel"]
          and cfg.get("activation_function") == "gelu_new", "export: model_type, architectures, activation")
    shape = (cfg.get("n_layer"), cfg.get("n_head"), cfg.get("n_embd"), cfg.get("vocab_size"), cfg.get("n_positions"),
             cfg.get("n_ctx"), cfg.get("layer_norm_epsilon"))
    check(shape == (LAYERS, HEADS, WIDTH, VOCAB, POSITIONS, POSITIONS, 1e-5), f"export: config shape {shape}")


if __name__ == "__main__":
    main()
