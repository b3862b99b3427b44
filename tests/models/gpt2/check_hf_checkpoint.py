"""Checks that a checkpoint folder is what GPT2LMHeadModel.from_pretrained(dir) loads,
with the independent safetensors reader (tests/support/st_io.py) and the names and
shapes written out here from Hugging Face's GPT2LMHeadModel (transformers'
modeling_gpt2.py: Conv1D weights are [in, out]; lm_head is tied and left out, as
save_pretrained leaves it; the attn.bias / masked_bias buffers are not saved).

  check_hf_checkpoint.py --layers L --heads H --width D --vocab V --positions P DIR...
  check_hf_checkpoint.py --same DIR_A DIR_B      (model.safetensors tensors identical)
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
import st_io  # noqa: E402


def expected_tensors(L, D, V, P):
    t = {"transformer.wte.weight": [V, D], "transformer.wpe.weight": [P, D]}
    for i in range(L):
        h = f"transformer.h.{i}."
        t.update({h + "ln_1.weight": [D], h + "ln_1.bias": [D],
                  h + "attn.c_attn.weight": [D, 3 * D], h + "attn.c_attn.bias": [3 * D],
                  h + "attn.c_proj.weight": [D, D], h + "attn.c_proj.bias": [D],
                  h + "ln_2.weight": [D], h + "ln_2.bias": [D],
                  h + "mlp.c_fc.weight": [D, 4 * D], h + "mlp.c_fc.bias": [4 * D],
                  h + "mlp.c_proj.weight": [4 * D, D], h + "mlp.c_proj.bias": [D]})
    t.update({"transformer.ln_f.weight": [D], "transformer.ln_f.bias": [D]})
    return t


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check_dir(d, a):
    path = os.path.join(d, "model.safetensors")
    raw, meta = st_io.read_raw(path)
    want = expected_tensors(a.layers, a.width, a.vocab, a.positions)
    if set(raw) != set(want):
        fail(f"{path}: names differ from GPT2LMHeadModel's: missing {sorted(set(want) - set(raw))[:5]}, "
             f"extra {sorted(set(raw) - set(want))[:5]}")
    for name, shape in want.items():
        dtype, got, data = raw[name]
        if dtype != "F32" or list(got) != shape or len(data) != 4 * eval("*".join(map(str, shape))):
            fail(f"{path}: {name} is {dtype} {got}, want F32 {shape}")
    if meta.get("format") != "pt":
        fail(f"{path}: metadata format is {meta.get('format')!r}, from_pretrained wants 'pt'")
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    want_cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": a.layers, "n_head": a.heads,
                "n_embd": a.width, "vocab_size": a.vocab, "n_positions": a.positions, "n_ctx": a.positions,
                "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
    for k, v in want_cfg.items():
        if cfg.get(k) != v:
            fail(f"{d}/config.json: {k} = {cfg.get(k)!r}, want {v!r}")
    print(f"{d}: {len(raw)} tensors with GPT2LMHeadModel's names and shapes, F32, format=pt; config.json matches")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--vocab", type=int)
    p.add_argument("--positions", type=int)
    p.add_argument("--same", action="store_true")
    p.add_argument("dirs", nargs="+")
    a = p.parse_args()
    if a.same:
        ra, _ = st_io.read_raw(os.path.join(a.dirs[0], "model.safetensors"))
        rb, _ = st_io.read_raw(os.path.join(a.dirs[1], "model.safetensors"))
        if set(ra) != set(rb):
            fail("different tensor names")
        bad = [n for n in ra if ra[n] != rb[n]]
        if bad:
            fail(f"{len(bad)} tensors differ, first {bad[0]}")
        print(f"{a.dirs[0]} == {a.dirs[1]}: {len(ra)} tensors, identical bytes")
        return
    for d in a.dirs:
        check_dir(d, a)


main()
