#!/usr/bin/env python3
"""The verdict of a bench/chaos.sh run, from its work directory. Each part must hold,
and none passes on missing evidence:
  job       host 0's launcher exited 0 and the final line says steps=STEPS;
  samples   tests/train/elastic/check_samples.py over every process that ran (ran.ids,
            recorded from /proc during the run, not from the logs): each one's sample
            log exists, every sample of every epoch dealt exactly once (the data set's
            size from the job's log: each completed epoch dealt all of it); a process
            that did not reach STEPS is taken to have died in the step after its last;
  steps     lost_steps=0 under DDP (ZeRO: at most --elastic-snapshot-every per recovery),
            and every step 1..STEPS has a metrics line; a ZeRO recovery from the disk
            checkpoint (event from_checkpoint) may lose more, and only when its lost ids
            include R+1 ranks in a row on the ring of the group that trained before
            (R = --elastic-snapshot-replicas: no in-memory copy of some shard could be
            left) and it resumed at a --save-every step;
  params    ck/model.safetensors bitwise equal to a replay (no faults, plain launch -n W)
            of the same membership changes at the same steps: world W0 to k1 with a
            checkpoint, resumed at W1 to k2, ... to STEPS (cached in replay/);
  leftovers no process, socket (any host's namespace) or /dev/shm/dpt-* segment left;
  faults    every scheduled fault due over a second before the job ended (the injector
            polls the job) is named in faults.log, and
            each killed process is named in the job's log (killed by signal 9) or
            among a membership event's lost ids, and every SIGKILL the job's log
            names was injected (a long stop may end in a drop or, woken within the
            settle time, in a re-form without loss: not checked).
usage: chaos_verdict.py WORK [--bin DIR] [--seed N] [--launch-rc RC] [--self-test]
--self-test: on a copy of a passed WORK, puts one bug back per part (drops a sample from
a log, removes a step's metrics line, flips a parameter byte, leaves a process running,
hides a fault from faults.log; ZeRO: marks recoveries as from disk with nobody lost) and
requires the verdict to fail on that part.
"""
import argparse, glob, json, os, re, shutil, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECK_SAMPLES = os.path.join(HERE, "..", "tests", "train", "elastic", "check_samples.py")


def run(cmd, log, env=None):
    with open(log, "w") as f:
        return subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)


def job_env(w):
    """The job's environment for the replay: the variables chaos.sh set that change the
    arithmetic (OpenBLAS's thread count changes how a GEMM sums; a replay run from a
    shell without it differed from the job by rounding from the first step)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # runs recorded before train.env existed
    path = f"{w}/train.env"
    if os.path.isfile(path):
        env.update(l.strip().split("=", 1) for l in open(path) if "=" in l)
    return env


def disk_fallback_reason(e, replicas, save_every):
    """Why a ZeRO recovery from disk was unavoidable, or None: R+1 consecutive ranks of
    the previous group's ring (every holder of some shard's copies) among the lost."""
    if not e.get("from_checkpoint"): return None
    ring, lost = e.get("prev_members", []), set(e.get("lost", []))
    n = len(ring)
    if e["resumed_after_step"] % save_every: return None
    for q in range(n):
        run = [ring[(q - d) % n] for d in range(min(replicas, n - 1) + 1)]
        if all(i in lost for i in run): return f"{','.join(run)} lost together"
    return None


INJECTOR_LATENCY_S = 1.0  # chaos.sh's polls between a fault's time and the job end it records


def verdict(w, binp, launch_rc, quiet=False, scan_procs=True):
    fails = {}
    def fail(part, msg): fails.setdefault(part, []).append(msg)
    steps = int(open(f"{w}/steps").read())
    args = open(f"{w}/train.args").read().split()
    log = open(f"{w}/job.log", errors="replace").read()
    # Rank 0's metrics: host 0's file until that process is lost, then the file of the
    # host whose process became rank 0 (a long run moves it): all hosts', by time.
    rows = [json.loads(l) for m in sorted(glob.glob(f"{w}/m[0-9]*.jsonl")) for l in open(m) if l.strip()]
    with open(f"{w}/metrics.jsonl", "w") as f:
        f.writelines(json.dumps(j) + "\n" for j in sorted(rows, key=lambda j: j.get("unix_time", 0)))
    events, ranges = [], {}
    for line in open(f"{w}/metrics.jsonl"):
        j = json.loads(line)
        if j.get("event") == "membership": events.append(j)
        if "sample_begin" in j: ranges[j["step"]] = j
    # ---- job ----
    final = re.search(r"final: .*", log)
    if launch_rc != 0: fail("job", f"host 0's launcher exited {launch_rc}")
    if not final or f" steps={steps} " not in final.group(0):
        fail("job", f"no final line with steps={steps}")
    lost = int(re.search(r"lost_steps=(\d+)", final.group(0)).group(1)) if final else -1
    # ---- samples ----
    ids = sorted(set(open(f"{w}/ran.ids").read().split()))
    if not ids: fail("samples", "ran.ids is empty: no process was seen running")
    killed = []
    metrics, prefix = f"{w}/metrics.jsonl", f"{w}/samples"
    if "--zero" in args:
        # ZeRO rolls back to the last snapshot on a loss and trains the lost steps again:
        # a later line for a step supersedes the earlier ones (their effect was
        # discarded). Collapse the logs to the steps that count, a rollback by at most
        # --elastic-snapshot-every steps, then check them as DDP's.
        kz = int(args[args.index("--elastic-snapshot-every") + 1])
        replicas = int(args[args.index("--elastic-snapshot-replicas") + 1]) if "--elastic-snapshot-replicas" in args else 1
        save_every = int(open(f"{w}/save_every").read())
        # Rollbacks to disk the verdict accepts: the step each went back to.
        to_disk = {e["resumed_after_step"] for e in events if disk_fallback_reason(e, replicas, save_every)}
        shutil.rmtree(f"{w}/effective", ignore_errors=True)  # never a stale copy of a log (the self-test deletes one)
        os.makedirs(f"{w}/effective")
        prefix = f"{w}/effective/samples"
        for i in ids:
            if not os.path.isfile(f"{w}/samples.{i}"): continue
            rows = []
            for l in open(f"{w}/samples.{i}"):
                st = int(l.split()[0])
                if rows and st <= int(rows[-1].split()[0]):
                    if int(rows[-1].split()[0]) - st >= kz and st - 1 not in to_disk:
                        fail("samples", f"{i}: step {st} after step {rows[-1].split()[0]}: a rollback beyond {kz} steps")
                    rows = [r for r in rows if int(r.split()[0]) < st]
                rows.append(l)
            # A lost process's steps after the one the group rolled back to were discarded.
            lost_in = next((e for e in events if i in e.get("lost", [])), None)
            if lost_in is not None:
                rows = [r for r in rows if int(r.split()[0]) <= lost_in["resumed_after_step"]]
            open(f"{prefix}.{i}", "w").writelines(rows)
        keep = {}
        for l in open(f"{w}/metrics.jsonl"):
            j = json.loads(l)
            keep[(j.get("step"), "sample_begin" in j) if "event" not in j else ("ev", len(keep))] = l
        metrics = f"{w}/effective/m0.jsonl"
        open(metrics, "w").writelines(keep.values())
    else:
        # DDP: a process that completed a step the survivors did not (its ring allreduce
        # finished; it died before the group re-formed, which then redid that step from
        # the previous one) logged a step whose result was discarded. A lost process's
        # lines after the step its group went on from do not count (chaos seed 3403:
        # step 23458, logged at world 8 by a killed process, completed by the group at 7).
        cut = {}
        for i in ids:
            lost_in = next((e for e in events if i in e.get("lost", [])), None)
            p = f"{w}/samples.{i}"
            if lost_in is not None and os.path.isfile(p):
                rows = [l for l in open(p) if l.strip()]
                kept = [r for r in rows if int(r.split()[0]) <= lost_in["resumed_after_step"]]
                if len(kept) < len(rows): cut[i] = (rows, kept)
        if cut:
            shutil.rmtree(f"{w}/effective", ignore_errors=True)
            os.makedirs(f"{w}/effective")
            prefix = f"{w}/effective/samples"
            for i in ids:
                p = f"{w}/samples.{i}"
                rows = cut[i][1] if i in cut else (open(p).readlines() if os.path.isfile(p) else [])
                if rows:  # none left: as a process that never completed a step (below)
                    open(f"{prefix}.{i}", "w").writelines(rows)
            for i, (rows, kept) in sorted(cut.items()):
                print(f"samples: {i}: {len(rows) - len(kept)} line(s) after step {kept[-1].split()[0] if kept else 0} "
                      f"discarded (lost; its group went on from there)")
    for i in ids:
        p = f"{prefix}.{i}"
        if os.path.isfile(p):
            rows = [l for l in open(p) if l.strip()]
            last = int(rows[-1].split()[0]) if rows else 0
            if last < steps: killed.append(f"{i}:{last + 1}")
    # A process that ran but never completed a step (a newcomer whose first collective
    # failed) leaves no log. It is excused only if the launchers saw it fail; had it
    # trained a step, that step's rank would lack a line, which check_samples refuses.
    unlogged = [i for i in ids if not os.path.isfile(f"{prefix}.{i}")
                and re.search(rf"\({re.escape(i)}\) (exited with code [1-9]|killed by signal)", log)]
    logged = [i for i in ids if i not in unlogged]
    cmd = [sys.executable, CHECK_SAMPLES, metrics, prefix, str(steps), "--ids", ",".join(logged)]
    for k in killed: cmd += ["--killed", k]
    for e in events: cmd += ["--adopted", str(e["resumed_after_step"])]
    size = re.search(r"\| dataset +\| \S+ \((\d+) samples", log)
    if size: cmd += ["--epoch-size", size.group(1)]
    else: fail("samples", "the job's log names no data set size (the '| dataset' line of train's table)")
    if run(cmd, f"{w}/verdict.samples.log"):
        fail("samples", open(f"{w}/verdict.samples.log").read().strip().splitlines()[0])
    # ---- steps ----
    zero = "--zero" in args
    k = int(args[args.index("--elastic-snapshot-every") + 1]) if zero else 0
    # A step rank 0 failed while another survivor completed it (the group went on from
    # that step, its resumed_after_step) has no metrics line: train does not log a step
    # it adopted. Any other gap is a lost or skipped step.
    adopted = {e["resumed_after_step"] for e in events}
    missing = [s for s in range(1, steps + 1) if s not in ranges and s not in adopted]
    if missing: fail("steps", f"steps without a metrics line: {missing[:5]}")
    if any(e.get("lost_steps", 0) for e in events) and not zero:
        fail("steps", "a membership event lost steps under DDP")
    allowed = 0
    for e in events:
        disk = zero and disk_fallback_reason(e, replicas, save_every)
        allowed += e.get("lost_steps", 0) if disk else k
        if zero and e.get("from_checkpoint") and not disk:
            fail("steps", f"generation {e['generation']} fell back to disk without R+1 consecutive ranks lost "
                          f"(lost {e.get('lost')}, ring {e.get('prev_members')}, resumed after {e['resumed_after_step']})")
    if lost < 0 or lost > max(allowed, k):
        fail("steps", f"lost_steps={lost}, allowed {allowed} ({'ZeRO' if zero else 'DDP'})")
    # ---- params ----
    rep = f"{w}/replay"
    if not os.path.isfile(f"{rep}/done"):
        os.makedirs(rep, exist_ok=True)
        w0 = next(iter(sorted(ranges.items())))[1]["world_size"] if ranges else 0
        segs, world = [], w0
        for e in events:
            segs.append((world, e["resumed_after_step"])); world = e["world_size"]
        segs.append((world, steps))
        done, ok = 0, True
        # An interrupted replay goes on after its last finished segment (same segments).
        first = 0
        if os.path.isfile(f"{rep}/progress") and open(f"{rep}/segments").read().strip() == str(segs):
            first, done = (int(x) for x in open(f"{rep}/progress").read().split())
        with open(f"{rep}/segments", "w") as f: f.write(f"{segs}\n")
        for n, (ws, upto) in enumerate(segs):
            if n < first or (upto <= done and n < len(segs) - 1): continue
            cmd = [f"{binp}/launch", "-n", str(ws), f"{binp}/train", *args, "--steps", str(upto),
                   "--checkpoint-dir", f"{rep}/ck"] + (["--save-every", str(upto)] if upto < steps else []) + \
                  (["--resume"] if done else [])
            if run(cmd, f"{rep}/seg{n}.log", job_env(w)): ok = False; fail("params", f"replay segment {n} (world {ws} to step {upto}) failed: {rep}/seg{n}.log"); break
            done = upto
            with open(f"{rep}/progress", "w") as f: f.write(f"{n + 1} {done}\n")
        if ok: open(f"{rep}/done", "w").close()
    if os.path.isfile(f"{rep}/done"):
        if run([f"{binp}/compare_runs", "--model", f"{w}/ck/model.safetensors", f"{rep}/ck/model.safetensors", "--rtol", "0"],
               f"{w}/verdict.params.log"):
            fail("params", "final parameters differ from the replay " + open(f"{rep}/segments").read().strip())
    # ---- leftovers ----
    procs = open(f"{w}/leftover.procs").read().strip()
    if scan_procs:
        me = subprocess.run(["pgrep", "-af", "--", w + "/"], capture_output=True, text=True).stdout
        procs += "\n".join(l for l in me.splitlines()
                            if not any(x.endswith(("chaos.sh", "chaos_verdict.py")) for x in l.split()[1:3]))
    if procs.strip(): fail("leftovers", f"processes left: {procs.strip().splitlines()[:3]}")
    socks = open(f"{w}/leftover.sockets").read().strip()
    if socks: fail("leftovers", f"sockets left: {socks.splitlines()[:3]}")
    shm = [s for s in open(f"{w}/leftover.shm").read().split() if s.startswith("dpt-")]
    if shm: fail("leftovers", f"/dev/shm segments left: {shm[:3]}")
    # ---- faults ----
    injected = [l.split() for l in open(f"{w}/faults.log") if l.strip()]
    end = float(injected[-1][0]) if injected else 0.0
    sched = [l.split() for l in open(f"{w}/schedule") if l.strip()]
    named = {(f[1], f[2]) for f in injected}
    last_t = float(open(f"{w}/job.end").read())
    # A fault due in the last moments may find the job already gone: chaos.sh polls the job
    # every 0.2 s before a fault and every 0.5 s before it takes the end time, so a fault is
    # surely due only when it precedes the recorded end by more than those polls.
    due_before = last_t - INJECTOR_LATENCY_S
    for t, kind, target, _ in sched:
        if float(t) < due_before and (kind, target.split(",")[0]) not in named and (kind, target) not in named:
            fail("faults", f"scheduled fault '{t} {kind} {target}' is not named in faults.log")
    if not injected: fail("faults", "no fault was injected")
    # The other direction: every SIGKILL the launchers saw was injected and named.
    named_ids = {f[3] for f in injected if len(f) > 3}
    for i in re.findall(r"\(([^()\s]+)\) killed by signal 9", log):
        if i not in named_ids:
            fail("faults", f"{i} was killed (job log) but no fault in faults.log names it")
    if any(f[1] == "join_stop" for f in injected) and not any(f[1] == "join_stop_kill" for f in injected):
        fail("faults", "a join_stop's kill of another process is not named in faults.log")
    lost_ids = {i for e in events for i in e.get("lost", [])}
    for f in injected:
        if len(f) < 4 or f[3] == "-" or f[-1] == "write=gone": continue  # gone before the kill: not killed
        kind, ident = f[1], f[3]
        if kind in ("kill", "double", "ckpt_kill", "join_stop_kill") and f"({ident}) killed by signal 9" not in log and ident not in lost_ids:
            fail("faults", f"killed process {ident} ({kind} at {f[0]} s) is named nowhere in the job's log")
    if not quiet:
        kinds = {}
        for f in injected: kinds[f[1]] = kinds.get(f[1], 0) + 1
        rec = sorted(e["recovery_s"] for e in events if "recovery_s" in e)
        print(f"faults by kind: {dict(sorted(kinds.items()))} ({len(injected)} in all)")
        print(f"recoveries: {len(events)} (membership changes), lost steps: {lost}")
        ck = [f[5] for f in injected if f[1] == "ckpt_kill" and len(f) > 5]
        if ck: print(f"kills at a checkpoint write: {sum(c.startswith('write=inside=') for c in ck)} of {len(ck)} sent "
                     f"while a checkpoint's temporary file existed (seen before and after the kill): {ck[:3]}")
        if rec: print(f"recovery time s: min {rec[0]:.2f} median {statistics.median(rec):.2f} max {rec[-1]:.2f}")
        print(f"processes that ran: {len(ids)} ({len(unlogged)} failed before completing a step: {unlogged}); final: {final.group(0)[:60] + '...' if final else 'none'}")
        for part, msgs in fails.items():
            for m in msgs: print(f"  {part}: {m}")
    return fails


def self_test(w, binp):
    if verdict(w, binp, 0, quiet=True):
        sys.exit("self-test: the recorded run does not pass to begin with")
    def drop_sample(d):
        p = sorted(glob.glob(f"{d}/samples.*"))[0]
        rows = open(p).read().splitlines(); rows[len(rows) // 2] = rows[len(rows) // 2].rsplit(" ", 1)[0]
        open(p, "w").write("\n".join(rows) + "\n")
    def delete_log(d):
        os.remove(f"{d}/samples.n0.l0.i0")
    def skip_step(d):
        # A step from 50 on that is logged once in all the files and that no membership
        # event resumed after (a step adopted from a survivor has no line by design: a run
        # that re-formed right after step 50 would excuse its removal).
        files = sorted(glob.glob(f"{d}/m[0-9]*.jsonl"))
        rows = [json.loads(l) for m in files for l in open(m) if l.strip()]
        adopted = {j["resumed_after_step"] for j in rows if j.get("event") == "membership"}
        logged = [j["step"] for j in rows if "sample_begin" in j]
        step = next(st for st in sorted(set(logged)) if st >= 50 and st not in adopted and logged.count(st) == 1)
        for m in files:
            lines = open(m).read().splitlines()
            kept = [l for l in lines if not (f'"step":{step},' in l and "sample_begin" in l)]
            if len(kept) != len(lines): open(m, "w").write("\n".join(kept) + "\n")
    def flip_byte(d):
        p = f"{d}/ck/model.safetensors"; b = bytearray(open(p, "rb").read()); b[-3] ^= 1; open(p, "wb").write(b)
    def leave_process(d):
        return subprocess.Popen(["bash", "-c", f'exec -a "{d}/train" sleep 60'])
    def hide_fault(d):
        rows = open(f"{d}/faults.log").read().splitlines(); open(f"{d}/faults.log", "w").write("\n".join(rows[:-2] + rows[-1:]) + "\n")
    def unjustified_disk(d):
        # A ZeRO recovery that says it came from disk with nobody lost: the rollback rule
        # must refuse it (on a run with disk fallbacks, drop their lost ids instead).
        for m in sorted(glob.glob(f"{d}/m[0-9]*.jsonl")):
            rows = [json.loads(l) for l in open(m) if l.strip()]
            ev = [j for j in rows if j.get("event") == "membership"]
            if not ev: continue
            for j in ev: j["from_checkpoint"], j["lost"] = True, []
            open(m, "w").writelines(json.dumps(j) + "\n" for j in rows)
            return
    bugs = [("samples", drop_sample), ("samples", delete_log), ("steps", skip_step), ("params", flip_byte),
            ("leftovers", leave_process), ("faults", hide_fault)]
    if "--zero" in open(f"{w}/train.args").read().split(): bugs.append(("steps", unjustified_disk))
    bad = 0
    for part, bug in bugs:
        d = tempfile.mkdtemp(prefix="chaos_selftest.")
        shutil.copytree(w, d, dirs_exist_ok=True)
        proc = bug(d)
        got = verdict(d, binp, 0, quiet=True)
        if proc: proc.kill(); proc.wait()
        shutil.rmtree(d)
        ok = part in got
        print(f"self-test {bug.__name__}: verdict {'FAIL' if got else 'PASS'} on {sorted(got)}"
              f" -> {'ok' if ok else 'WRONG (the bug went unseen)'}")
        bad += not ok
    print("self-test: " + ("passed" if not bad else f"{bad} bug(s) not caught"))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work"); ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "bin"))
    ap.add_argument("--seed", default="?"); ap.add_argument("--launch-rc", type=int, default=0)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    w = os.path.abspath(a.work)
    if a.self_test: sys.exit(self_test(w, a.bin))
    print(f"seed: {a.seed}")
    fails = verdict(w, a.bin, a.launch_rc)
    print(f"verdict: {'PASS' if not fails else 'FAIL (' + ', '.join(sorted(fails)) + ')'}")
    sys.exit(1 if fails else 0)


main()
