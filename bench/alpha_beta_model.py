#!/usr/bin/env python3
"""alpha_beta_model.py: an alpha-beta(-gamma) cost model of dpt's allreduce algorithms,
fitted to the comm_bench runs in bench/results, and its predictions for 1k-16k ranks
(issue 58, item 5; docs/scale.md shows and explains the output).

usage: alpha_beta_model.py             the whole report (markdown) on stdout
       alpha_beta_model.py --self-test checks of the model itself (CTest tools.alpha_beta_model)

The model, per algorithm, is built from the code in comm/algorithms/, not from a textbook
formula: each algorithm is a list of rounds, a round being the messages every rank sends at
once (source rank, destination rank, bytes) and the bytes a receiver then reduces. A round
costs the slowest of its transfers:
    a message between ranks of one host:    alpha_intra + bytes * beta_intra
    messages leaving a host over its link:  alpha_net + (bytes that host sends or
                                            receives in the round) * beta_net
plus gamma per reduced byte. The algorithm's time is the sum over its rounds, so
T = steps * alpha + bytes * beta + reduced * gamma with steps, bytes and reduced from the code:
    ring                2 (P-1) rounds of n/P bytes; the first P-1 reduce n/P
                        (ring_allreduce.cpp, ring_common.cpp)
    tree                binomial reduce to rank 0, ceil(log2 P) rounds of the whole buffer,
                        each reduced; then the binomial broadcast, the same rounds reversed
                        (tree_allreduce.cpp, tree_reduce.cpp, tree_broadcast.cpp)
    recursive_doubling  log2 p exchanges of the whole buffer (p the largest power of two
                        <= P), each reduced; ranks p..P-1 fold in before and get the result
                        after: two more rounds (recursive_doubling_allreduce.cpp)
    hierarchical        ring reduce-scatter inside each host (L-1 rounds of n/L), the
                        allreduce `auto` picks for n/L bytes on H ranks across hosts (L of
                        them at once, sharing each host's link), ring allgather inside each
                        host; from 2 pieces (COMM_HIERARCHICAL_PIECE_BYTES, 1 MiB) a pipeline
                        of pieces, host phases overlapping the cross-host ones
                        (hierarchical_allreduce.cpp)
Measured here, P ranks share this machine's few cores: a round whose A active ranks exceed
the cores takes A/cores times as long in its CPU terms (every alpha, the shared-memory and
loopback betas, gamma; not the shaped link's beta). At scale every rank has its own core.
"""
import argparse
import collections
import glob
import math
import os
import statistics
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The model's parameters (seconds, seconds per byte). Transports: shm (same-host peers over
# the tcp backend's shared memory, COMM_TCP_SHM=1), lo (same-host peers over loopback TCP,
# COMM_TCP_SHM=0), net (a host's network link: measured on emulated hosts, bench/hierarchical.sh).
PARAMS = ["a_shm", "b_shm", "a_lo", "b_lo", "a_net", "b_net", "g"]
IDX = {p: i for i, p in enumerate(PARAMS)}
CPU_TERMS = np.array([p != "b_net" for p in PARAMS], dtype=float)  # scaled by core sharing

# `auto`'s thresholds, the defaults registered in comm/algorithms/ (and comm/communicator.h);
# line numbers as of this file's writing.
RD_MAX = 64 * 1024         # COMM_RD_MAX_BYTES, recursive_doubling_allreduce.cpp:56
TREE_MAX = 256 * 1024      # COMM_TREE_MAX_BYTES, tree_allreduce.cpp:25
HIER_MIN = 64 * 1024       # COMM_HIERARCHICAL_MIN_BYTES, hierarchical_allreduce.cpp:160
BLOCK_SAVING = 0.10        # kHierarchyBlockSaving, registry.h:85
BLOCK_FACTOR = 4           # kHierarchyBlockFactor, registry.h:86
PIECE = 1 << 20            # hierarchical_piece_bytes (COMM_HIERARCHICAL_PIECE_BYTES), communicator.h:69

ALGOS = ["ring", "tree", "recursive_doubling", "hierarchical"]
SHORT = {"ring": "ring", "tree": "tree", "recursive_doubling": "rd", "hierarchical": "hier"}


# ---------------------------------------------------------------- topology and rounds

class Topo:
    """P ranks, L per host (L == P: one host), numbered in blocks or round-robin (cyclic);
    `intra` names the same-host transport; `cores`: cores the ranks share (None: one each)."""

    def __init__(self, P, L=None, order="block", intra="shm", cores=None):
        L = P if L is None else L
        assert P % L == 0, "hosts of equal size only"
        self.P, self.L, self.H, self.order, self.intra, self.cores = P, L, P // L, order, intra, cores

    def host(self, ranks):
        ranks = np.asarray(ranks)
        return ranks // self.L if self.order == "block" else ranks % self.H

    def ranks_of_host(self, k):
        return np.arange(k * self.L, (k + 1) * self.L) if self.order == "block" else np.arange(k, self.P, self.H)


# A round: (repeat, src, dst, bytes per message, bytes each receiver reduces).

def ring_rounds(ranks, n, phases=("rs", "ag")):
    ranks = np.asarray(ranks)
    P = len(ranks)
    if P < 2:
        return []
    src, dst, m = ranks, np.roll(ranks, -1), n / P
    out = []
    if "rs" in phases:  # ring_reduce_scatter_phase: P-1 steps, each chunk reduced on arrival
        out.append((P - 1, src, dst, m, m))
    if "ag" in phases:  # ring_allgather_phase: P-1 steps, no reduction
        out.append((P - 1, src, dst, m, 0.0))
    return out


def tree_rounds(ranks, n):
    ranks = np.asarray(ranks)
    P = len(ranks)
    reduce_, mask = [], 1
    while mask < P:  # tree_reduce_into: vrank v + mask sends to v (v a multiple of 2 mask)
        v = np.arange(0, P, 2 * mask)
        v = v[v + mask < P]
        reduce_.append((1, ranks[v + mask], ranks[v], float(n), float(n)))
        mask *= 2
    bcast = [(1, d, s, float(n), 0.0) for (_, s, d, _, _) in reversed(reduce_)]  # tree_broadcast_buffer
    return reduce_ + bcast


def rd_rounds(ranks, n):
    ranks = np.asarray(ranks)
    P = len(ranks)
    p = 1
    while p * 2 <= P:
        p *= 2
    extra = np.arange(p, P)
    out = []
    if len(extra):  # fold: rank r >= p hands its buffer to r - p, which reduces it
        out.append((1, ranks[extra], ranks[extra - p], float(n), float(n)))
    mask = 1
    while mask < p:  # exchange with r XOR mask, both reduce
        r = np.arange(p)
        out.append((1, ranks[r], ranks[r ^ mask], float(n), float(n)))
        mask *= 2
    if len(extra):  # unfold: the result back to r + p
        out.append((1, ranks[extra - p], ranks[extra], float(n), 0.0))
    return out


def concurrent(groups_rounds):
    """Rounds of several groups that run the same schedule at the same time, as one list."""
    out = []
    for rounds in zip(*groups_rounds):
        rep, _, _, m, red = rounds[0]
        out.append((rep, np.concatenate([r[1] for r in rounds]), np.concatenate([r[2] for r in rounds]), m, red))
    return out


def round_coef(topo, rnd, params):
    """The coefficient vector (over PARAMS) of one round, repeat included."""
    rep, src, dst, m, red = rnd
    hs, hd = topo.host(src), topo.host(dst)
    cross = hs != hd
    active = len(np.unique(np.concatenate([src, dst])))
    share = max(1.0, active / topo.cores) if topo.cores else 1.0
    options = []
    if (~cross).any():
        v = np.zeros(len(PARAMS))
        v[IDX["a_" + topo.intra]] = 1.0
        v[IDX["b_" + topo.intra]] = m
        options.append(v)
    if cross.any():
        out = np.bincount(hs[cross], minlength=topo.H).max()
        inn = np.bincount(hd[cross], minlength=topo.H).max()
        v = np.zeros(len(PARAMS))
        v[IDX["a_net"]] = 1.0
        v[IDX["b_net"]] = max(out, inn) * m
        options.append(v)
    best = max(options, key=lambda v: v @ params)
    best = best.copy()
    best[IDX["g"]] = red
    best = best * np.where(CPU_TERMS > 0, share, 1.0)
    return rep * best


def rounds_coef(topo, rounds, params):
    v = np.zeros(len(PARAMS))
    for r in rounds:
        v += round_coef(topo, r, params)
    return v


# ---------------------------------------------------------------- auto (registry.h / registry.cpp)

def auto_pick(nbytes, world, hosts=1, local_size=None, contiguous=True, native=False):
    """comm/algorithms/registry.cpp:69 auto_pick for allreduce: the first in the registry's
    order (registry.cpp:16-21) that accepts: recursive_doubling (world == 2 and bytes <=
    COMM_RD_MAX_BYTES, recursive_doubling_allreduce.cpp:55), hierarchical
    (hierarchy_pays_allreduce, registry.h:74-92), tree (up_to_threshold_per_hosts,
    registry.h:68), ring (always). `native`: selector.cpp:10 takes the backend's native
    collective first when it is offered and preferred (the tcp backend's shared-memory
    arena, every rank on one host). Checked against every choice comm_bench logged in
    bench/results (the report's "auto" section)."""
    if native:
        return "native"
    local_size = world // hosts if local_size is None else local_size
    if world == 2 and nbytes <= RD_MAX:
        return "recursive_doubling"
    pays = hosts > 1 and local_size > 1 and not contiguous and nbytes >= HIER_MIN
    if not pays and hosts >= 2 and local_size >= 2 and contiguous:
        ring, hier = (world - 1) / world, (hosts - 1) / hosts
        pays = hier <= (1.0 - BLOCK_SAVING) * ring and nbytes >= BLOCK_FACTOR * HIER_MIN
    if pays:
        return "hierarchical"
    if nbytes <= (TREE_MAX // 4 if hosts > 1 else TREE_MAX):
        return "tree"
    return "ring"


def flat_rounds(algo, ranks, n):
    return {"ring": ring_rounds, "tree": tree_rounds, "recursive_doubling": rd_rounds}[algo](ranks, n)


def hier_coef(topo, n, params):
    H, L = topo.H, topo.L
    allr = np.arange(topo.P)
    if H == 1 or L == 1:  # hierarchical_allreduce.cpp run(): the flat ring
        return rounds_coef(topo, ring_rounds(allr, n), params)
    hosts = [topo.ranks_of_host(k) for k in range(H)]
    across = [np.array([h[j] for h in hosts]) for j in range(L)]

    def phase(m, which):
        if which == "x":  # L allreduces of m/L bytes on H ranks, one rank per host
            algo = auto_pick(m / L, H, hosts=H, local_size=1)
            return rounds_coef(topo, concurrent([flat_rounds(algo, g, m / L) for g in across]), params)
        return rounds_coef(topo, concurrent([ring_rounds(h, m, (which,)) for h in hosts]), params)

    if n < 2 * PIECE:  # three_phases()
        return phase(n, "rs") + phase(n, "x") + phase(n, "ag")
    k = int(n // PIECE)  # pipelined(): k pieces (the last takes the remainder; here all equal)
    rs, x, ag = phase(n / k, "rs"), phase(n / k, "x"), phase(n / k, "ag")
    net_bound = rs + k * x + ag
    host_bound = k * (rs + ag) + x
    return max(net_bound, host_bound, key=lambda v: v @ params)


def coef(algo, topo, n, params):
    if algo == "hierarchical":
        return hier_coef(topo, n, params)
    return rounds_coef(topo, flat_rounds(algo, np.arange(topo.P), n), params)


def predict(algo, topo, n, params):
    return float(coef(algo, topo, n, params) @ params)


# ---------------------------------------------------------------- measurements

def read_bench(path):
    """comm_bench rows: (size, algo it ran, time_us)."""
    rows = []
    for line in open(path):
        f = line.replace("[rank 0]", "").split()
        if len(f) >= 9 and f[0].isdigit() and f[1].isdigit():
            rows.append((int(f[0]), f[4], float(f[5])))
    return rows


def collect(pattern_by_key):
    """{key: [files]} -> {(key, size): (algo ran, median time in seconds, reps)}."""
    out = {}
    for key, files in pattern_by_key.items():
        times = {}
        for path in files:
            for size, ran, us in read_bench(path):
                times.setdefault((size, ran), []).append(us)
        for (size, ran), ts in times.items():
            out[(key, size)] = (ran, statistics.median(ts) * 1e-6, len(ts))
    return out


# The cores the measured ranks shared: the machine of every run read here (the runs' launch
# lines say "2 cores on this host (2 online)", compare.sh's limits.txt "2 cores online";
# lscpu: Intel(R) Xeon(R) Processor). Not this machine's count: the model may run elsewhere.
CORES = 2
MACHINE = "Intel(R) Xeon(R) Processor (lscpu), 2 cores"


def datasets():
    """Each measured point: dict(set, source, P, L, order, intra, algo, n, t, reps)."""
    pts = []
    R = lambda *p: sorted(glob.glob(os.path.join(REPO, *p)))
    # This host, shared memory: bench/results/scale/measure.sh (P = 2, 4, 8) and bench/algo_auto.sh (P = 2).
    for tr, intra in (("shm", "shm"), ("noshm", "lo")):
        for P in (2, 4, 8):
            for algo in ("ring", "tree", "recursive_doubling"):
                files = R("bench/results/scale/raw", "%s.np%d.%s.r*.txt" % (tr, P, algo))
                if tr == "shm" and P == 2:
                    files += R("bench/results/algo_auto/raw", "host.np2.%s.r*.txt" % algo)
                for (key, n), (ran, t, reps) in collect({algo: files}).items():
                    pts.append(dict(set=intra, source="scale/raw" if n <= 16 << 20 else "algo_auto/raw",
                                    P=P, L=P, order="block", intra=intra, algo=ran, n=n, t=t, reps=reps))
    # This host, loopback TCP, compare.sh's runs (auto: the algorithm it ran is in the row).
    for P in (2, 4):
        files = R("bench/results/raw", "tcp-noshm.allreduce.np%d.rep*.txt" % P)
        for (key, n), (ran, t, reps) in collect({"auto": files}).items():
            pts.append(dict(set="lo", source="raw/tcp-noshm", P=P, L=P, order="block", intra="lo",
                            algo=ran, n=n, t=t, reps=reps))
    # 4 emulated hosts x 2 ranks, 1 Gbit/s links (bench/algo_auto.sh with HOSTS=4).
    for order in ("block", "cyclic"):
        for algo in ALGOS:
            files = R("bench/results/algo_auto/raw/hosts", "sweep.h4.%s.%s.r*.txt" % (order, algo))
            for (key, n), (ran, t, reps) in collect({algo: files}).items():
                pts.append(dict(set="net", source="algo_auto/raw/hosts", P=8, L=2, order=order, intra="shm",
                                algo=ran, n=n, t=t, reps=reps))
    return pts


def topo_of(pt, cores=CORES):
    return Topo(pt["P"], pt["L"], pt["order"], pt["intra"], cores)


# ---------------------------------------------------------------- fit

def fit(points, free, params, iters=8):
    """Least squares on relative error over `points` for the parameters named in `free`
    (the others stay as in `params`); a parameter that comes out negative is set to 0 and
    the rest refitted. The round maxima depend on the parameters: refit until stable."""
    params = params.copy()
    free = list(free)
    for _ in range(iters):
        rows = np.array([coef(p["algo"], p["topo"], p["n"], params) for p in points])
        t = np.array([p["t"] for p in points])
        active = list(free)
        while True:
            fi = [IDX[f] for f in active]
            fixed = [i for i in range(len(PARAMS)) if i not in fi]
            A = rows[:, fi] / t[:, None]
            b = (t - rows[:, fixed] @ params[fixed]) / t
            x = np.linalg.lstsq(A, b, rcond=None)[0]
            if (x >= 0).all() or len(active) == 1:
                break
            drop = active[int(np.argmin(x))]
            params[IDX[drop]] = 0.0
            active.remove(drop)
        new = params.copy()
        new[fi] = np.maximum(x, 0.0)
        if np.allclose(new, params, rtol=1e-9, atol=0):
            params = new
            break
        params = new
    return params


def errors(points, params):
    for p in points:
        p["pred"] = predict(p["algo"], p["topo"], p["n"], params)
        p["err"] = p["pred"] / p["t"] - 1.0
    e = [abs(p["err"]) for p in points]
    return statistics.median(e), max(e)


INITIAL = dict(a_shm=2e-5, b_shm=5e-10, a_lo=3e-5, b_lo=1e-9, a_net=1e-4, b_net=8e-9, g=2e-10)


def memcpy_beta():
    """Seconds per byte of two copies (into the shared-memory ring, out of it:
    backends/tcp/shm_channel.h) at the 64 MiB memcpy rate bench/physical_limits measured
    (bench/results/raw/limits.txt); None without that file."""
    try:
        for line in open(os.path.join(REPO, "bench/results/raw/limits.txt")):
            if line.startswith("memcpy 64 MiB"):
                return 2.0 / (float(line.split()[3]) * 1e9)
    except OSError:
        pass
    return None


def fit_all(pts, free_shm_beta=False):
    """shm: alpha and gamma fitted, beta from memcpy (the data alone cannot tell copying from
    reducing: both grow with the bytes); with free_shm_beta, all three fitted. lo and net:
    alpha and beta fitted, gamma as fitted on shm."""
    params = np.array([INITIAL[p] for p in PARAMS])
    shm = [p for p in pts if p["set"] == "shm"]
    lo = [p for p in pts if p["set"] == "lo"]
    net = [p for p in pts if p["set"] == "net"]
    b = None if free_shm_beta else memcpy_beta()
    if b is None:
        params = fit(shm, ["a_shm", "b_shm", "g"], params)
    else:
        params[IDX["b_shm"]] = b
        params = fit(shm, ["a_shm", "g"], params)
    params = fit(lo, ["a_lo", "b_lo"], params)
    params = fit(net, ["a_net", "b_net"], params)
    return params, dict(shm=shm, lo=lo, net=net)


# ---------------------------------------------------------------- report

def fmt_t(s):
    if s >= 1:
        return "%.2f s" % s
    if s >= 1e-3:
        return "%.2f ms" % (s * 1e3)
    return "%.1f us" % (s * 1e6)


def fmt_n(n):
    for unit, v in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= v and n % v == 0:
            return "%d %s" % (n // v, unit)
    return "%d B" % n


SCALE_P = (1024, 2048, 4096, 8192, 16384)
SCALE_N = (4 << 10, 256 << 10, 16 << 20, 256 << 20)
SCALE_L = 8
LINK_BPS = 100e9      # 100 Gbit/s
LINK_LATENCY = 1e-6   # 1 us


def scale_params(fitted):
    """At scale: the link at 100 Gbit/s with 1 us latency plus the software cost of one
    message measured here (a_lo: our engine and the kernel's TCP on loopback, per step);
    same-host transfers and reduction as fitted on this machine."""
    p = fitted.copy()
    p[IDX["a_net"]] = LINK_LATENCY + fitted[IDX["a_lo"]]
    p[IDX["b_net"]] = 8.0 / LINK_BPS
    return p


def scale_cells(numbering, params):
    """Each (P, n) of the scale table with ranks numbered `numbering` (block: a host's ranks
    contiguous, which auto learns; cyclic: round-robin): (P, n, {algo: time}, fastest, auto's pick)."""
    for P in SCALE_P:
        topo = Topo(P, SCALE_L, numbering, "shm", None)
        for n in SCALE_N:
            t = {a: predict(a, topo, n, params) for a in ALGOS}
            yield P, n, t, min(t, key=t.get), auto_pick(n, P, P // SCALE_L, SCALE_L, numbering == "block")


def report(out=sys.stdout):
    pts = datasets()
    for p in pts:
        p["topo"] = topo_of(p)
    params, sets = fit_all(pts)
    w = out.write
    w("## Fitted parameters\n\n")
    w("Measured on: %s. Least squares on relative error.\n\n" % MACHINE)
    w("| transport | points | alpha (us per step) | beta (ns per byte) | as bandwidth | median abs error | max abs error |\n")
    w("|---|---|---|---|---|---|---|\n")
    names = dict(shm="shared memory, one host (COMM_TCP_SHM=1)", lo="loopback TCP, one host (COMM_TCP_SHM=0)",
                 net="emulated hosts' links, 1 Gbit/s shaped (4 x 2 ranks)")
    for key in ("shm", "lo", "net"):
        med, mx = errors(sets[key], params)
        a, b = params[IDX["a_" + key]], params[IDX["b_" + key]]
        w("| %s | %d | %.1f | %.3f | %.2f GB/s | %.0f%% | %.0f%% |\n"
          % (names[key], len(sets[key]), a * 1e6, b * 1e9, (1.0 / b / 1e9) if b > 0 else float("inf"), med * 100, mx * 100))
    mb = memcpy_beta()
    if mb is not None:
        fp, _ = fit_all([dict(p) for p in pts], free_shm_beta=True)
        w("\nShared memory's beta is set, not fitted: %.3f ns/B, two copies per byte (into the receiver's ring and "
          "out of it) at the 64 MiB memcpy rate of bench/results/raw/limits.txt. Fitted freely, beta comes out %.3f ns/B and gamma %.3f ns/B: the one-host "
          "data cannot tell copying from reducing.\n" % (mb * 1e9, fp[IDX["b_shm"]] * 1e9, fp[IDX["g"]] * 1e9))
    w("\ngamma (reduction, float sum, fitted with shared memory): %.3f ns per byte (%.2f GB/s)\n"
      % (params[IDX["g"]] * 1e9, 1.0 / params[IDX["g"]] / 1e9 if params[IDX["g"]] > 0 else float("inf")))
    allp = sets["shm"] + sets["lo"] + sets["net"]
    e = [abs(p["err"]) for p in allp]
    w("\nAll %d points: median abs error %.0f%%, max %.0f%%; %d of them within 25%%, %d within 50%%.\n"
      % (len(allp), statistics.median(e) * 100, max(e) * 100, sum(x <= 0.25 for x in e), sum(x <= 0.5 for x in e)))

    # The link's beta from the points where bytes dominate, against the shaping's 1 Gbit/s.
    big = [dict(p) for p in sets["net"] if p["n"] >= 1 << 20]
    bp = fit(big, ["a_net", "b_net"], params)
    medb, mxb = errors(big, bp)
    w("\nThe emulated links fitted on their %d points of 1 MiB and more only: beta %.2f ns/B (the shaping, 1 Gbit/s, "
      "is 8.00 ns/B with the TCP/IP headers, so a little more per byte of payload), median abs error %.0f%%, max %.0f%% on those points; the fit on all points "
      "above lowers beta to fit the small messages.\n" % (len(big), bp[IDX["b_net"]] * 1e9, medb * 100, mxb * 100))
    # Held out: the shared-memory fit on P = 2 and 4 only, predicting P = 8.
    few = [p for p in sets["shm"] if p["P"] <= 4]
    eight = [dict(p) for p in sets["shm"] if p["P"] == 8]
    hp = fit(few, ["a_shm", "g"] if memcpy_beta() is not None else ["a_shm", "b_shm", "g"], params)
    med8, mx8 = errors(eight, hp)
    w("\nHeld out: fitted on the shared-memory points at P = 2 and 4 only (alpha %.1f us, beta %.3f ns/B, gamma %.3f ns/B), "
      "the %d points at P = 8 are predicted with median abs error %.0f%%, max %.0f%%.\n"
      % (hp[IDX["a_shm"]] * 1e6, hp[IDX["b_shm"]] * 1e9, hp[IDX["g"]] * 1e9, len(eight), med8 * 100, mx8 * 100))
    errors(sets["shm"], params)  # restore the full fit's predictions on these points

    w("\n## Measured against predicted\n\n")
    w("Each cell: measured time (median over the repetitions), then the prediction's error, (predicted - measured) / measured.\n")
    for key in ("shm", "lo", "net"):
        w("\n### %s\n\n" % names[key])
        sizes = sorted({p["n"] for p in sets[key]})
        rowsk = {}
        for p in sets[key]:
            rk = (p["source"] if key == "lo" and p["source"].startswith("raw") else "", p["P"], p["order"] if key == "net" else "", p["algo"])
            rowsk.setdefault(rk, {})[p["n"]] = p
        w("| P | " + ("order | " if key == "net" else "") + "algorithm | " + " | ".join(fmt_n(s) for s in sizes) + " |\n")
        w("|---" * (len(sizes) + (3 if key == "net" else 2)) + "|\n")
        for rk in sorted(rowsk, key=lambda r: (r[0], r[1], r[2], ALGOS.index(r[3]) if r[3] in ALGOS else 9)):
            src, P, order, algo = rk
            label = algo + (" (compare.sh, auto)" if src else "")
            cells = []
            for s in sizes:
                p = rowsk[rk].get(s)
                cells.append("%s %+.0f%%" % (fmt_t(p["t"]), p["err"] * 100) if p else "-")
            w("| %d | " % P + (order + " | " if key == "net" else "") + label + " | " + " | ".join(cells) + " |\n")

    # auto's choice as comm_bench logged it against this file's rule.
    w("\n## auto: the rule here against the choices comm_bench logged\n\n")
    checked, wrong = 0, []
    for path, P, H, L, contiguous, native in (
            [(f, 2, 1, 2, True, True) for f in glob.glob(os.path.join(REPO, "bench/results/algo_auto/raw/host.np2.auto.r*.txt"))]
            + [(f, int(f.split(".np")[1].split(".")[0]), 1, None, True, False)
               for f in glob.glob(os.path.join(REPO, "bench/results/raw/tcp-noshm.allreduce.np*.rep*.txt"))]
            + [(f, 8, 4, 2, ".block." in f, False)
               for f in glob.glob(os.path.join(REPO, "bench/results/algo_auto/raw/hosts/sweep.h4.*.auto.r*.txt"))]):
        for n, ran, _ in read_bench(path):
            mine = auto_pick(n, P, H, L if L else P, contiguous, native)
            checked += 1
            if mine != ran:
                wrong.append("%s %d B: logged %s, rule %s" % (os.path.relpath(path, REPO), n, ran, mine))
    w("%d logged choices (bench/results/algo_auto/raw/host.np2.auto.*, bench/results/raw/tcp-noshm.allreduce.*, "
      "bench/results/algo_auto/raw/hosts/sweep.h4.*.auto.*); the rule here differs on %d%s\n"
      % (checked, len(wrong), (": " + "; ".join(wrong)) if wrong else "."))

    sp = scale_params(params)
    w("\n## 1k-16k ranks\n\n")
    w("%d ranks per host, numbered in blocks, every rank on its own core; host links %g Gbit/s "
      "(beta %.3f ns/B) with alpha = %.1f us latency + %.1f us software per message (the loopback-TCP alpha fitted "
      "above) = %.1f us; same-host transfers at the shared-memory alpha/beta and reduction at the gamma fitted above.\n\n"
      % (SCALE_L, LINK_BPS / 1e9, sp[IDX["b_net"]] * 1e9, LINK_LATENCY * 1e6, params[IDX["a_lo"]] * 1e6,
         sp[IDX["a_net"]] * 1e6))
    w("| P | size | ring | tree | recursive doubling | hierarchical | fastest | auto picks | auto's time / fastest | auto's extra time |\n")
    w("|---|---|---|---|---|---|---|---|---|---|\n")
    disagreements = []
    for P, n, t, best, pick in scale_cells("block", sp):
        ratio, extra = t[pick] / t[best], t[pick] - t[best]
        if pick != best:
            disagreements.append((P, n, pick, best, ratio, extra))
        w("| %d | %s | %s | %s | %s | %s | %s | %s | %.2fx | %s |\n"
          % (P, fmt_n(n), *(fmt_t(t[a]) for a in ALGOS), best, pick, ratio, fmt_t(extra) if extra > 0 else "0"))
    w("\nauto agrees with the model on %d of %d cells.\n" % (len(SCALE_P) * len(SCALE_N) - len(disagreements),
                                                           len(SCALE_P) * len(SCALE_N)))
    # The same with no software cost: alpha = the link's 1 us, for same-host messages too.
    wp = sp.copy()
    wp[IDX["a_net"]] = wp[IDX["a_shm"]] = LINK_LATENCY
    w("\nWith no software cost per message (alpha = %.0f us for every message, same-host ones too; beta and gamma "
      "as above), the fastest algorithm and auto's time over it:\n\n" % (LINK_LATENCY * 1e6))
    w("| P | " + " | ".join(fmt_n(n) for n in SCALE_N) + " |\n")
    w("|---" * (len(SCALE_N) + 1) + "|\n")
    cells = collections.defaultdict(list)
    for P, n, t, best, pick in scale_cells("block", wp):
        cells[P].append("%s %s; auto %s %.2fx" % (SHORT[best], fmt_t(t[best]), SHORT[pick], t[pick] / t[best]))
    for P in SCALE_P:
        w("| %d | " % P + " | ".join(cells[P]) + " |\n")
    # Round-robin numbering: auto takes the hierarchy from COMM_HIERARCHICAL_MIN_BYTES.
    w("\nThe same hosts numbered round-robin (cyclic), auto's choice and the model's:\n\n")
    w("| P | size | ring | tree | recursive doubling | hierarchical | fastest | auto picks | auto's time / fastest |\n")
    w("|---|---|---|---|---|---|---|---|---|\n")
    for P, n, t, best, pick in scale_cells("cyclic", sp):
        w("| %d | %s | %s | %s | %s | %s | %s | %s | %.2fx |\n"
          % (P, fmt_n(n), *(fmt_t(t[a]) for a in ALGOS), best, pick, t[pick] / t[best]))
    return params


# ---------------------------------------------------------------- self-test

def counts(algo, P, n, L=1):
    """(steps, bytes on the critical path, reduced bytes) with every rank on its own host
    (L = 1) or with L per host: the coefficients of alpha, beta and gamma."""
    topo = Topo(P, L, "block", "shm", None)
    p = np.array([INITIAL[x] for x in PARAMS])
    v = coef(algo, topo, n, p)
    return (v[IDX["a_net"]] + v[IDX["a_shm"]], v[IDX["b_net"]] + v[IDX["b_shm"]], v[IDX["g"]])


def self_test():
    fails = []

    def check(what, got, want, rel=1e-9):
        if not all(abs(g - w_) <= rel * max(1.0, abs(w_)) for g, w_ in zip(got, want)):
            fails.append("%s: got %s, want %s" % (what, tuple(round(x, 6) for x in got), want))

    n = 1 << 20
    # Hand counts, every rank on its own host: (steps, bytes, reduced bytes).
    for P, lg in ((2, 1), (4, 2), (8, 3)):
        check("ring P=%d" % P, counts("ring", P, n), (2 * (P - 1), 2 * (P - 1) * n / P, (P - 1) * n / P))
        check("tree P=%d" % P, counts("tree", P, n), (2 * lg, 2 * lg * n, lg * n))
        check("recursive_doubling P=%d" % P, counts("recursive_doubling", P, n), (lg, lg * n, lg * n))
    # Not a power of two: RD folds ranks 4, 5 into 0, 1 and back (4 rounds), the tree needs ceil(log2 6) = 3 levels.
    check("recursive_doubling P=6", counts("recursive_doubling", 6, n), (4, 4 * n, 3 * n))
    check("tree P=6", counts("tree", 6, n), (6, 6 * n, 3 * n))
    # The hierarchy on 4 hosts x 2 below 2 pieces: 1 + 1 same-host ring steps of n/2, and across hosts
    # the ring on n/2 (n/2 > 64 KiB): 6 steps, each host's link carrying both groups' n/8 pieces.
    check("hierarchical 4x2, 1 MiB", counts("hierarchical", 8, n, L=2), (2 + 6, 2 * (n / 2) + 6 * 2 * (n / 8), n / 2 + 3 * n / 8))
    # Below 64 KiB per rank across hosts the tree: 1 + 1 + 2 log2(4) steps.
    check("hierarchical 4x2, 64 KiB", counts("hierarchical", 8, 64 << 10, L=2)[:1], (2 + 4,))
    # The shared link: with block numbering the ring's link carries one n/P per step, with
    # round-robin numbering L of them.
    v = coef("ring", Topo(8, 2, "cyclic", "shm", None), n, np.array([INITIAL[x] for x in PARAMS]))
    check("ring 4x2 cyclic link bytes", (v[IDX["b_net"]],), (14 * 2 * n / 8,))
    # Core sharing: 8 ranks on 2 cores, ring: every round has all 8 active, 4x the CPU terms.
    v = coef("ring", Topo(8, 8, "block", "shm", 2), n, np.array([INITIAL[x] for x in PARAMS]))
    check("ring 8 ranks on 2 cores", (v[IDX["a_shm"]],), (4 * 14,))

    # auto (registry.h): RD on 2 ranks to 64 KiB, tree to 256 KiB (a quarter across hosts), ring beyond;
    # hierarchical on round-robin hosts from 64 KiB, on block hosts from 256 KiB where it saves 10%.
    for args, want in (((64 << 10, 2), "recursive_doubling"), ((128 << 10, 2), "tree"), ((64 << 10, 4), "tree"),
                       ((512 << 10, 4), "ring"), ((64 << 10, 8, 4, 2, False), "hierarchical"),
                       ((32 << 10, 8, 4, 2, False), "tree"), ((256 << 10, 8, 4, 2, True), "hierarchical"),
                       ((128 << 10, 8, 4, 2, True), "ring"), ((1 << 20, 16, 8, 2, True), "ring"),
                       ((4 << 10, 1024, 128, 8, True), "tree"), ((1 << 20, 1024, 128, 8, True), "ring")):
        got = auto_pick(*args)
        if got != want:
            fails.append("auto_pick%s: got %s, want %s" % (args, got, want))

    # The fit recovers known parameters from synthetic times: exact times within 0.1%, times
    # with +-0.2% noise within 1%.
    truth = np.array([INITIAL[x] for x in PARAMS])
    truth[IDX["a_shm"]], truth[IDX["b_shm"]], truth[IDX["g"]] = 25e-6, 3e-10, 1.5e-10
    pts = []
    for P in (2, 4, 8):
        for algo in ("ring", "tree", "recursive_doubling"):
            for n_ in (4 << 10, 64 << 10, 1 << 20, 16 << 20):
                topo = Topo(P, P, "block", "shm", 2)
                pts.append(dict(algo=algo, topo=topo, n=n_, t=predict(algo, topo, n_, truth)))
    start = np.array([INITIAL[x] for x in PARAMS])
    for noise, tol in ((0.0, 0.001), (0.002, 0.01)):
        rng = np.random.default_rng(58)
        noisy = [dict(p, t=p["t"] * (1 + noise * rng.uniform(-1, 1))) for p in pts]
        got = fit(noisy, ["a_shm", "b_shm", "g"], start)
        for name in ("a_shm", "b_shm", "g"):
            rel = abs(got[IDX[name]] / truth[IDX[name]] - 1)
            if rel > tol:
                fails.append("fit (noise %.1f%%) %s: %.4g, truth %.4g (%.1f%% off)"
                             % (noise * 100, name, got[IDX[name]], truth[IDX[name]], rel * 100))
    for f in fails:
        print("FAIL:", f)
    print("alpha_beta_model self-test: %s (%d failures)" % ("FAILED" if fails else "ok", len(fails)))
    return 1 if fails else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true", help="check the model's counts, auto's rule and the fit")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
