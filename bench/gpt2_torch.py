#!/usr/bin/python3
"""The PyTorch side of bench/gpt2_speed.sh: GPT-2 (Hugging Face's GPT2LMHeadModel
architecture, written here in plain PyTorch: learned positions, pre-LayerNorm blocks,
fused q/k/v Conv1D as addmm, causal softmax attention, gelu tanh form, tied head,
dropout on embeddings, attention probabilities and residuals) trained with
torch.optim.Adam on random tokens, fp32, with the thread count given (--bf16: under CPU autocast to bf16).

With --ddp N, N processes on this host train it under DistributedDataParallel (gloo
backend, its default 25 MiB buckets), each with --threads threads and its own batch.

Prints one "result key=value ..." line (rank 0): tokens_per_s (all ranks' tokens) over
the timed steps after the warm-up (mean step time), best_tokens_per_s (the fastest
step), step_ms, and peak_rss_mb (ru_maxrss, rank 0).
usage: gpt2_torch.py [--size 124M] [--batch 4] [--seq 64] [--steps 10] [--warmup 2]
                     [--threads 2] [--dropout 0.1] [--ddp N] [--bf16] [--compile]
With --compile the model runs under torch.compile (inductor), compiled in the warm-up.
"""
import argparse
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {"124M": (12, 12, 768), "355M": (24, 16, 1024), "774M": (36, 20, 1280), "1558M": (48, 25, 1600)}


class Conv1D(nn.Module):  # y = x W + b with W [in, out], as Hugging Face's GPT-2
    def __init__(self, n_in, n_out, std):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_in, n_out) * std)
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class Block(nn.Module):
    def __init__(self, d, heads, layers, p):
        super().__init__()
        resid_std = 0.02 / math.sqrt(2 * layers)
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        self.c_attn, self.c_proj = Conv1D(d, 3 * d, 0.02), Conv1D(d, d, resid_std)
        self.c_fc, self.mlp_proj = Conv1D(d, 4 * d, 0.02), Conv1D(4 * d, d, resid_std)
        self.heads, self.p = heads, p

    def forward(self, x):
        B, T, d = x.shape
        hd = d // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (t.view(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        a = F.dropout(torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1), self.p, self.training)
        y = (a @ v).transpose(1, 2).reshape(B, T, d)
        x = x + F.dropout(self.c_proj(y), self.p, self.training)
        h = F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")
        return x + F.dropout(self.mlp_proj(h), self.p, self.training)


class GPT2(nn.Module):
    def __init__(self, layers, heads, d, vocab=50257, positions=1024, p=0.1):
        super().__init__()
        self.wte = nn.Parameter(torch.randn(vocab, d) * 0.02)
        self.wpe = nn.Parameter(torch.randn(positions, d) * 0.02)
        self.h = nn.ModuleList(Block(d, heads, layers, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        self.p = p

    def forward(self, tokens, labels):
        T = tokens.shape[1]
        x = F.dropout(self.wte[tokens] + self.wpe[:T], self.p, self.training)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.t()  # the head tied to the embedding
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)


def train(rank, a):
    world = max(a.ddp, 1)
    torch.set_num_threads(a.threads)
    if a.ddp:
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1)
    layers, heads, d = SIZES[a.size]
    model = GPT2(layers, heads, d, p=a.dropout)
    model.train()
    if a.ddp:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    # --compile: forward and backward through inductor's generated C++/OpenMP kernels (the
    # optimizer stays eager); the first step compiles, so give at least one warm-up step.
    run = torch.compile(model) if a.compile else model
    params = sum(p.numel() for p in model.parameters())
    gen = torch.Generator().manual_seed(100 + rank)
    times = []
    for s in range(a.warmup + a.steps):
        tokens = torch.randint(0, 50257, (a.batch, a.seq), generator=gen)
        labels = torch.cat([tokens[:, 1:], torch.full((a.batch, 1), -100)], dim=1)
        t0 = time.perf_counter()
        opt.zero_grad()  # PyTorch 2.x's default: gradients freed (set_to_none)
        # --bf16: CPU autocast, as PyTorch users get AMX/AVX512-BF16 (oneDNN bf16 matmuls,
        # fp32 weights and Adam); fp32 otherwise.
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = run(tokens, labels)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if rank == 0:
            print(f"step {s} loss {loss.item():.4f} {dt:.3f} s", file=sys.stderr, flush=True)
        if s >= a.warmup:
            times.append(dt)
    if rank == 0:
        step_s = sum(times) / len(times)
        tokens_per_step = a.batch * a.seq * world
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"result size={a.size} precision={'bf16' if a.bf16 else 'fp32'} compiled={int(a.compile)} "
              f"params={params} batch={a.batch} "
              f"seq={a.seq} ranks={world} "
              f"threads={torch.get_num_threads()} tokens_per_s={tokens_per_step / step_s:.1f} "
              f"best_tokens_per_s={tokens_per_step / min(times):.1f} step_ms={1e3 * step_s:.1f} "
              f"peak_rss_mb={rss:.0f}", flush=True)
    if a.ddp:
        torch.distributed.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="124M")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--ddp", type=int, default=0)
    ap.add_argument("--bf16", action="store_true", help="torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the model (inductor; compiled during the warm-up steps)")
    a = ap.parse_args()
    if a.ddp:
        torch.multiprocessing.spawn(train, args=(a,), nprocs=a.ddp)
    else:
        train(0, a)


if __name__ == "__main__":
    main()
