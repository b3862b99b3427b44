"""build/bin/generate against an independent greedy decode in PyTorch (issue 17).

Writes a random 2-layer, width-64, 4-head GPT-2 with GPT-2's full vocabulary as a
Hugging Face GPT2LMHeadModel file (hf_reference.py's writer: the independent
tests/support/st_io.py) with a config.json giving n_head; runs
`generate --temperature 0 --ids` and `--top-k 1`, and checks the continuation token by
token against a greedy decode whose forward is hf_reference.py's GPT-2 written in
PyTorch float64 (each step re-runs the whole context and takes the argmax of the last
position's logits). The top-2 logit gap of every step is printed, so a pass shows that
the comparison was not decided by rounding. Also: the same seed gives the same sample
and another seed a different one; missing files and bad flags fail with a message.

  generate_reference.py <generate binary> <work dir> <tokenizer dir>
"""
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference as ref  # noqa: E402  (GPT-2 in PyTorch float64, the weights writer)

ref.LAYERS, ref.WIDTH, ref.HEADS, ref.VOCAB, ref.POSITIONS = 2, 64, 4, 50257, 32
PROMPT = "Hello world, the quick brown fox"
NEW = 12


def run(binary, *args, ok=True):
    p = subprocess.run([binary, *args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        ref.check(False, f"generate {' '.join(args)} exit {p.returncode}: {p.stderr}")
    return p


def parse_ids(out):
    prompt, _, cont = out.strip().partition("|")
    return [int(x) for x in prompt.split()], [int(x) for x in cont.split()]


def main():
    binary, work, tok_dir = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    w = ref.make_weights(7)
    path = os.path.join(work, "model.safetensors")
    ref.write_model(path, w, "F32", "transformer.", head=True)
    with open(os.path.join(work, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_head": ref.HEADS}, f)

    base = ["--init-from", path, "--tokenizer", tok_dir, "--prompt", PROMPT, "--max-tokens", str(NEW), "--ids"]
    prompt_ids, ours = parse_ids(run(binary, *base, "--temperature", "0").stdout)
    _, ours_k1 = parse_ids(run(binary, *base, "--top-k", "1", "--temperature", "0.8").stdout)

    ctx, want, gaps = list(prompt_ids), [], []
    for _ in range(NEW):
        logits, *_ = ref.reference(w, np.array([ctx]), np.array([ctx]))
        last = logits[0, -1]
        top2 = np.sort(last)[-2:]
        gaps.append(top2[1] - top2[0])
        ctx.append(int(np.argmax(last)))
        want.append(ctx[-1])
    print(f"prompt {len(prompt_ids)} tokens; greedy continuation {ours}; reference {want}; "
          f"smallest top-2 logit gap {min(gaps):.3g}")
    ref.check(len(prompt_ids) > 1, "the prompt was tokenized into several tokens")
    ref.check(ours == want, "--temperature 0 continuation equals PyTorch's greedy decode")
    ref.check(ours_k1 == want, "--top-k 1 continuation equals PyTorch's greedy decode")

    s1 = run(binary, *base, "--temperature", "1.5", "--top-k", "50", "--seed", "3").stdout
    s1b = run(binary, *base, "--temperature", "1.5", "--top-k", "50", "--seed", "3").stdout
    s2 = run(binary, *base, "--temperature", "1.5", "--top-k", "50", "--seed", "4").stdout
    ref.check(s1 == s1b, "the same seed gives the same sample")
    ref.check(s1 != s2, "another seed gives another sample")
    text = run(binary, *base[:-1], "--temperature", "0").stdout
    ref.check(text.startswith(PROMPT), "the text output starts with the prompt")

    for args, msg in [(["--tokenizer", tok_dir], "--init-from FILE is required"),
                      (["--init-from", os.path.join(work, "missing.safetensors")], "no such file"),
                      (["--init-from", path, "--tokenizer", os.path.join(work, "no_vocab")], "no_vocab"),
                      (["--init-from", path, "--top-k", "-1"], "--top-k must be >= 0"),
                      (["--init-from", path, "--heads", "5"], "heads")]:
        p = run(binary, *args, ok=False)
        ref.check(p.returncode != 0 and msg in p.stderr, f"refused: {' '.join(args[-2:])} -> {p.stderr.strip()[:150]!r}")
    if ref.failures:
        print(f"{len(ref.failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
