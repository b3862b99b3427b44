#!/usr/bin/env python3
"""PyTorch's distributed test suite as the judge of the dpt backend.

Runs PyTorch's DistributedTest suite (shipped with python3-torch) for each backend and
world size asked for, gloo being the reference measured in the same run, and writes
into --out:
  <backend>_ws<N>.jsonl                 one record per test (distributed_suite_main.py);
                                        backend dpt-as-gloo runs the tests PyTorch
                                        selects for gloo on dpt (distributed_suite_main.py)
  <backend>_ws<N>_passed.txt            names
  <backend>_ws<N>_skipped.txt           name: PyTorch's skip reason
  <backend>_ws<N>_failed.txt            name: the last line of the error
  summary.md                            counts side by side, and every test gloo passes
                                        that dpt does not, with dpt's status and reason
Exit status 1 with --require-pass when a dpt test failed (with a gloo reference: when
dpt fails a test gloo passes), when a test asked for with --tests has no result on dpt
(a partial run: a crash, a dropped test), when a dpt test recorded as passed lacks the
pass of one of its ranks (<backend>_ws<N>.jsonl.ranks), or when dpt's run of
distributed_suite_main.py exited non-zero without a gloo reference to explain it.

The whole suite (about an hour on 2 cores):
  /usr/bin/python3 tests/bindings/torch/run_distributed_suite.py --build build --out suite
A few tests (the CTest torch.suite_subset):
  ... --backends dpt --world-sizes 2 --tests test_all_reduce_sum,test_barrier --require-pass
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_one(backend, world, args):
    path = os.path.join(args.out, f"{backend}_ws{world}.jsonl")
    for stale in (path, path + ".ranks"):
        if os.path.exists(stale):
            os.remove(stale)
    env = dict(os.environ)
    env["BACKEND"] = "gloo" if backend == "dpt-as-gloo" else backend
    if backend == "dpt-as-gloo":
        env["DPT_AS_GLOO"] = "1"
    env["WORLD_SIZE"] = str(world)
    env["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.test_timeout)
    py_path = [os.path.join(os.path.abspath(args.build), "python")]
    if importlib.util.find_spec("expecttest") is None:
        py_path.append(os.path.join(HERE, "shim"))
    env["PYTHONPATH"] = os.pathsep.join(py_path + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    cmd = [sys.executable, os.path.join(HERE, "distributed_suite_main.py"), "--results", path, "--start", args.start]
    cmd += args.tests
    t0 = time.time()
    log_path = os.path.join(args.out, f"{backend}_ws{world}.log")
    with open(log_path, "w") as log:
        rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=args.out).returncode
    records = read_jsonl(path)
    rank_passes = {}
    for r in read_jsonl(path + ".ranks"):
        rank_passes.setdefault(r["test"], set()).add(r["rank"])
    print(f"{backend} ws{world}: {len(records)} tests in {time.time() - t0:.0f} s "
          f"({count(records, 'passed')} passed, {count(records, 'skipped')} skipped, {count(records, 'failed')} failed), "
          f"exit {rc}", flush=True)
    write_lists(args.out, f"{backend}_ws{world}", records)
    return {"records": records, "rank_passes": rank_passes, "rc": rc, "log": log_path}


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def incomplete(run, world, wanted, no_skips):
    """What keeps one run from being a pass of every test asked for (wanted; empty: the
    whole suite, whatever it ran) on every rank: (test, what) pairs."""
    by_test = {r["test"]: r for r in run["records"]}
    out = [(t, "no result (the run lost it)") for t in wanted if t not in by_test]
    for t, r in sorted(by_test.items()):
        if r["status"] == "skipped" and no_skips and (not wanted or t in wanted):
            out.append((t, "skipped: " + last_line(r["reason"])))
        if r["status"] == "passed":
            lacking = sorted(set(range(world)) - run["rank_passes"].get(t, set()))
            if lacking:
                out.append((t, f"recorded as passed, but rank(s) {lacking} never finished it"))
    return out


def count(records, status):
    return sum(1 for r in records if r["status"] == status)


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1] if lines else ""


def write_lists(out, stem, records):
    by = {"passed": [], "skipped": [], "failed": []}
    for r in sorted(records, key=lambda r: r["test"]):
        by[r["status"]].append(r)
    with open(os.path.join(out, f"{stem}_passed.txt"), "w") as f:
        f.writelines(r["test"] + "\n" for r in by["passed"])
    with open(os.path.join(out, f"{stem}_skipped.txt"), "w") as f:
        f.writelines(f"{r['test']}: {last_line(r['reason'])}\n" for r in by["skipped"])
    with open(os.path.join(out, f"{stem}_failed.txt"), "w") as f:
        f.writelines(f"{r['test']}: {last_line(r['reason'])}\n" for r in by["failed"])


def summary(out, results, worlds, backends):
    lines = ["| world size | backend | passed | skipped | failed |", "|---|---|---|---|---|"]
    for w in worlds:
        for b in backends:
            rec = results[(b, w)]
            lines.append(f"| {w} | {b} | {count(rec, 'passed')} | {count(rec, 'skipped')} | {count(rec, 'failed')} |")
    bad = []
    if "gloo" in backends and "dpt" in backends:
        for w in worlds:
            dpt = {r["test"]: r for r in results[("dpt", w)]}
            alias = {r["test"]: r for r in results.get(("dpt-as-gloo", w), [])}
            lines += ["", f"Tests gloo passes and dpt does not, world size {w}:", ""]
            for r in sorted(results[("gloo", w)], key=lambda r: r["test"]):
                d = dpt.get(r["test"])
                if r["status"] == "passed" and (d is None or d["status"] != "passed"):
                    status = d["status"] if d else "missing"
                    line = f"- {r['test']}: dpt {status}: {last_line(d['reason']) if d else ''}"
                    if r["test"] in alias:
                        a = alias[r["test"]]
                        line += f"; as gloo: {a['status']}" + (f": {last_line(a['reason'])}" if a["status"] != "passed" else "")
                    lines.append(line)
                    if status != "skipped":
                        bad.append((w, r["test"]))
    else:
        bad = [(w, r["test"]) for w in worlds for r in results[("dpt", w)] if r["status"] == "failed"] if "dpt" in backends else []
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build folder (its python/ holds dpt_torch)")
    ap.add_argument("--out", default="distributed_suite", help="folder for the lists and the summary")
    ap.add_argument("--backends", default="dpt,gloo")
    ap.add_argument("--world-sizes", default="2,3")
    ap.add_argument("--tests", default="", help="comma-separated test names (default: the whole suite)")
    ap.add_argument("--start", choices=["fork", "spawn"], default="fork")
    ap.add_argument("--test-timeout", type=int, default=180, help="seconds before a test's ranks are killed")
    ap.add_argument("--require-pass", action="store_true")
    ap.add_argument("--no-skips", action="store_true", help="with --require-pass: a skipped test fails too (for subsets)")
    args = ap.parse_args()
    args.tests = [t for t in args.tests.split(",") if t]
    os.makedirs(args.out, exist_ok=True)
    args.out = os.path.abspath(args.out)
    backends = [b for b in args.backends.split(",") if b]
    worlds = [int(w) for w in args.world_sizes.split(",") if w]
    runs = {}
    for w in worlds:
        for b in backends:
            runs[(b, w)] = run_one(b, w, args)
    results = {key: run["records"] for key, run in runs.items()}
    bad = summary(args.out, results, worlds, backends)
    missing = [(b, w) for (b, w), rec in results.items() if not rec]
    if missing:
        print(f"no results from {missing}: see the .log files in {args.out}")
        return 1
    # Every run on dpt is held to it: dpt's own and dpt-as-gloo's (gloo's tests on dpt).
    for b in [b for b in backends if b in ("dpt", "dpt-as-gloo")] if args.require_pass else []:
        for w in worlds:
            run = runs[(b, w)]
            for test, what in incomplete(run, w, args.tests, args.no_skips):
                print(f"{b} ws{w}: {test}: {what}")
                bad.append((w, f"{b}: {test}"))
            if run["rc"] != 0 and "gloo" not in backends:
                print(f"{b} ws{w}: distributed_suite_main.py exited {run['rc']}: see {run['log']}")
                bad.append((w, f"{b}: exit {run['rc']}"))
    if args.require_pass and bad:
        print(f"FAILED: {len(set(bad))} problem(s) (world size, test): {sorted(set(bad))}")
        return 1
    if args.require_pass:
        print(f"PASSED: every test asked for ({len(args.tests) if args.tests else 'the whole suite'}) passed on {'/'.join(b for b in backends if b != 'gloo')} "
              f"on every rank at world size(s) {worlds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
