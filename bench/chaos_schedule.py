#!/usr/bin/env python3
"""A seeded fault schedule for bench/chaos.sh: the same seed gives the same schedule.

One fault a line, 'T KIND TARGET ARG', T seconds after the job started:
  kill        SIGKILL of rank slot TARGET (host.local)                 ARG -
  stop_short  SIGSTOP, SIGCONT after ARG s (< COMM_TIMEOUT_S: no re-form)
  stop_long   SIGSTOP, SIGCONT after ARG s (> COMM_TIMEOUT_S: dropped, woken excluded)
  link        host TARGET's link down for ARG s, then up
  double      two kills ARG s apart, inside one re-forming window (TARGET a,b)
  ckpt_kill   SIGKILL of TARGET while a checkpoint is being written    ARG -
  join_stop   SIGSTOP of TARGET while a restarted process joins        ARG s stopped
Host 0's rank 0 slot (0.0) holds the rendezvous store's launcher and is never a target
of a link cut (the job cannot outlive its store).

usage: chaos_schedule.py --seed N --seconds S --hosts H [--ranks R] [--timeout T]
       chaos_schedule.py --self-test
"""
import argparse
import random
import sys

KINDS = ["kill", "stop_short", "stop_long", "link", "double", "ckpt_kill", "join_stop"]


def schedule(seed, seconds, hosts, ranks=2, timeout=5, gap=(6.0, 12.0)):
    rng = random.Random(seed)
    slots = [f"{h}.{l}" for h in range(hosts) for l in range(ranks)]
    out, t, i = [], rng.uniform(*gap) / 2, 0
    # Every kind once first (in a seeded order), then seeded draws: a short run still
    # covers every kind.
    order = rng.sample(KINDS, len(KINDS))
    while t < seconds:
        kind = order[i] if i < len(order) else rng.choice(KINDS)
        i += 1
        if kind == "link":
            if hosts < 2:
                continue
            target, arg = str(rng.randrange(1, hosts)), f"{rng.uniform(1, 2 * timeout):.1f}"
        elif kind == "double":
            a, b = rng.sample(slots[1:], 2)
            target, arg = f"{a},{b}", f"{rng.uniform(0.2, 1.5):.1f}"
        elif kind == "stop_short":
            target, arg = rng.choice(slots[1:]), f"{rng.uniform(0.5, timeout / 2):.1f}"
        elif kind in ("stop_long", "join_stop"):
            target, arg = rng.choice(slots[1:]), f"{rng.uniform(timeout + 2, timeout + 6):.1f}"
        else:
            target, arg = rng.choice(slots[1:]), "-"
        out.append((round(t, 1), kind, target, arg))
        t += rng.uniform(*gap)
    return out


def self_test():
    a, b = schedule(7, 120, 4), schedule(7, 120, 4)
    assert a == b, "the same seed must give the same schedule"
    assert a != schedule(8, 120, 4), "different seeds must differ"
    assert {f[1] for f in a} == set(KINDS), f"a 2-minute schedule must cover every kind: {a}"
    assert all(f[2] != "0.0" and "0.0" not in f[2].split(",") for f in a), "slot 0.0 is never a target"
    assert all(f[1] != "link" or f[2] != "0" for f in a), "host 0 keeps its link"
    assert all(x[0] < y[0] for x, y in zip(a, a[1:])), "times increase"
    print("chaos_schedule: self-test passed")


def main():
    ap = argparse.ArgumentParser(usage=__doc__.strip().splitlines()[-2].replace("usage: ", ""))
    ap.add_argument("--seed", type=int)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--hosts", type=int)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if a.seed is None or not a.seconds or not a.hosts or a.hosts < 1 or a.ranks < 1:
        sys.exit("chaos_schedule.py: need --seed N --seconds S (> 0) --hosts H (>= 1)")
    for f in schedule(a.seed, a.seconds, a.hosts, a.ranks, a.timeout):
        print(*f)


main()
