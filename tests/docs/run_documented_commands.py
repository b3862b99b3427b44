#!/usr/bin/python3
"""Runs every fenced command of README.md and docs/*.md (CTests docs.commands.*), so that a
documented flag that is renamed, or a documented command that stops working, fails the
suite instead of drifting.

usage: run_documented_commands.py [--repo DIR] [--build DIR] [--only FILE]... [--grep TEXT]
                                  [--section TEXT | --not-section TEXT] [--timeout S] [--list]
  --only FILE  only this markdown file (any path, e.g. a doctored copy; repeatable)
  --grep TEXT  only the commands whose text as written contains TEXT
  --section TEXT, --not-section TEXT
               only the commands under (not under) a `## ` heading containing TEXT: a long
               document's commands as two tests (a section's commands must not need what
               another section's wrote)
  --list       print the extracted commands, as they would run, without running them

What is a command (the rule README.md's "Tests" section states):
  * Blocks are fenced by ``` lines. A fence tagged sh, bash, shell or console, or not
    tagged, holds commands; any other tag (text, python, cpp, ...) is never run.
  * Lines ending in `\\` continue on the next; `#` outside quotes starts a comment (a line
    that is only a comment is dropped); `a && b` stays one command.
  * A line that starts with a prompt (`$ ` or `host$ `) is a command, and the lines after
    it up to the next prompt are its output (a transcript).
  * Otherwise a line is a command when its first word after any NAME=value assignments is
    a path (contains `/`, does not end in `/`: build/bin/train, bench/x.sh, /usr/bin/python3)
    or one of KNOWN_PROGRAMS; a line that only assigns variables (`c=(...)`, `X=1`) is set
    up for the later commands of its fence, which run with it in front; any other line is
    output (a sample, a table, a layout listing). Prefer tagging output fences `text`.

Markers, on the lines right before a fence (blank lines allowed between):
    <!-- docs-test: skip REASON -->              no command of the fence runs
    <!-- docs-test: skip "TEXT" REASON -->       the commands containing TEXT do not run
  A skipped command is printed with its reason and counted as skipped, never as passed.
  A marker that is not before a fence, selects no command, or is misspelt is an error, so
  the markers cannot drift either.

How the commands run: in document order, one scratch folder per markdown file (commands
may use what an earlier one of the same file wrote), holding symlinks `build` -> the build
folder and every other top-level entry -> the source tree, so build/bin/..., tests/...,
third_party/... resolve while checkpoints and outputs land in the scratch folder (TMPDIR
too); under bash -o pipefail, stdin /dev/null, each with a timeout; the environment adds
Open MPI's root variables (OMPI_ENV). Each command is shortened by the rules of RULES
below, and every rule that changed it is printed next to it. A command that, as run, is
identical to one that passed earlier in the run (README.md and docs/gpt2.md share the
GPT-2 commands, a minute of the total) is not run again: it is counted as repeated, not
as passed (so a later command of its file must not need what the repeat would write).
Exit status: 0 when at least one command ran and every command run passed; 1 otherwise.
"""
import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

RUN_TAGS = {"", "sh", "bash", "shell", "console"}
KNOWN_PROGRAMS = {"mpirun", "mpiexec", "srun", "torchrun", "bash", "sh", "env", "flock",
                  "cmake", "ctest", "make", "python3", "node", "git"}
# Open MPI refuses to run as root without these (README.md, "Running").
OMPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}

STEPS, EVAL, SAMPLE, TOKENS = 2, 16, 8, 8  # the caps the rules shorten to (EVAL: a GPT-2 124M eval batch costs a second)
TRAINER = r"build/bin/(?:train|train_local)(?=\s|$)"
LOCAL = r"build/bin/train_local(?=\s|$)"
GENERATE = r"build/bin/generate(?=\s|$)"


def cap(flag, limit, where=TRAINER, add=True):
    """--FLAG N -> --FLAG min(N, limit) in commands that run `where`; added when absent."""
    def apply(cmd, _scratch):
        if not re.search(where, cmd) or re.search(r"(?<![\w-])--help\b", cmd):
            return cmd
        pat = r"(?<![\w-])(%s[ =])(\d+)" % re.escape(flag)
        if re.search(pat, cmd):
            return re.sub(pat, lambda m: m.group(1) + str(min(int(m.group(2)), limit)), cmd)
        return re.sub(where, lambda m: "%s %s %d" % (m.group(0), flag, limit), cmd) if add else cmd
    return apply


def sub(pattern, repl):
    return lambda cmd, _scratch: re.sub(pattern, repl, cmd)


def mpi_flags(cmd, _scratch):
    """mpirun/mpiexec get --oversubscribe --bind-to none where missing."""
    def fix(m):
        extra = [f for f in ("--oversubscribe", "--bind-to none") if f not in cmd]
        return " ".join([m.group(0)] + extra)
    return re.sub(r"(?<![\w/-])(?:mpirun|mpiexec)(?=\s)", fix, cmd)


# The shortening, one table: (id, what it does and why, function(command, scratch) -> command).
# Each keeps the command's meaning (same programs, flags and data) but bounds its run time
# so that each docs.commands.* test takes under a minute on 2 cores.
RULES = [
    ("built", "a leading `bash tools/install_deps.sh && cmake -S . -B build && cmake --build build -j2 && ` "
     "is dropped (the Quick start's first command: CI installed and built before the tests run; the "
     "rest of the command runs)",
     sub(r"^bash tools/install_deps\.sh && cmake -S \. -B build && cmake --build build -j2 && ", "")),
    ("epochs", "train/train_local --epochs N -> 1", sub(r"(?<![\w-])(--epochs[ =])\d+", r"\g<1>1")),
    ("steps", "train/train_local --steps N -> min(N, %d), added when absent" % STEPS, cap("--steps", STEPS)),
    ("eval", "train/train_local --max-eval-samples N -> min(N, %d), added when absent" % EVAL,
     cap("--max-eval-samples", EVAL)),
    ("save", "--save-every K -> min(K, %d), so the shortened run still saves" % STEPS,
     cap("--save-every", STEPS, add=False)),
    ("ckpt", "a path's step_K (K > %d) -> step_%d, the checkpoint the shortened run saved" % (STEPS, STEPS),
     sub(r"(?<=/)step_(\d+)(?=/)", lambda m: "step_%d" % min(int(m.group(1)), STEPS))),
    ("switch", "--switch-backend S:NAME -> min(S, %d):NAME, so the switch happens" % (STEPS - 1),
     sub(r"(--switch-backend[ =])(\d+)", lambda m: m.group(1) + str(min(int(m.group(2)), STEPS - 1)))),
    ("sample", "train_local --sample-len N -> min(N, %d), added when absent (its end-of-run sample "
     "of 300 tokens takes a minute on GPT-2 124M)" % SAMPLE, cap("--sample-len", SAMPLE, where=LOCAL)),
    ("tokens", "generate --max-tokens N -> min(N, %d), added when absent" % TOKENS,
     cap("--max-tokens", TOKENS, where=GENERATE)),
    ("reps", "bench/tokenizer_speed.sh REPS -> 1", sub(r"(bench/tokenizer_speed\.sh) +\d+", r"\1 1")),
    ("mpi", "mpirun/mpiexec: --oversubscribe --bind-to none added where missing (more ranks "
     "than cores)", mpi_flags),
    ("tmp", "/tmp/X -> SCRATCH/tmp/X (outputs stay in the scratch folder)",
     lambda cmd, scratch: re.sub(r"(?<![\w/.])/tmp/", scratch + "/tmp/", cmd)),
]


@dataclass
class Command:
    path: str          # the markdown file as given
    line: int          # first line of the command in it
    written: str       # as written (continuations joined, comments dropped); markers and
                       # --grep match this
    text: str          # what runs: `written` without its prompt
    setup: list = field(default_factory=list)  # assignment lines run before it
    skip: str = ""     # the marker's reason, "" when it runs


class DocError(Exception):
    pass


MARKER = re.compile(r"^\s*<!--\s*docs-test:(.*?)-->\s*$")  # a line of its own (prose may quote one)
MARKER_SKIP = re.compile(r'\s*skip\s+(?:"([^"]+)"\s+)?(\S.*?)\s*$')
PROMPT = re.compile(r"^[\w.@-]*\$\s+")
ASSIGN = re.compile(r"^[A-Za-z_]\w*=")


def strip_comment(line):
    """The line up to an unquoted `#` that starts a word."""
    quote, prev = None, " "
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and prev.isspace():
            return line[:i].rstrip()
        prev = ch
    return line.rstrip()


def classify(text):
    """'command', 'setup' (assignments only) or 'output' for a line without a prompt."""
    if re.match(r"^[A-Za-z_]\w*=\(.*\)$", text):
        return "setup"
    try:
        words = shlex.split(text)
    except ValueError:
        words = text.split()
    while words and ASSIGN.match(words[0]):
        words.pop(0)
    if not words:
        return "setup"
    first = words[0]
    if ("/" in first and not first.endswith("/")) or first in KNOWN_PROGRAMS:
        return "command"
    return "output"


def logical_lines(body):
    """(line number, text) of a fence's lines, continuations joined, comments dropped."""
    out, acc, start = [], "", None
    for number, raw in body:
        if start is None:
            start = number
        if raw.rstrip().endswith("\\"):
            acc += (raw.lstrip() if acc else raw).rstrip()[:-1].rstrip() + " "
            continue
        text = strip_comment(acc + (raw.lstrip() if acc else raw)).strip()
        acc, first, start = "", start, None
        if text:
            out.append((first, text))
    return out


def fence_commands(path, body):
    """The commands of one runnable fence, with the set-up lines before each."""
    commands, setup, transcript = [], [], False
    for number, text in logical_lines(body):
        if PROMPT.match(text):
            transcript = True
            commands.append(Command(path, number, text, PROMPT.sub("", text, count=1), list(setup)))
            continue
        kind = "output" if transcript else classify(text)
        if kind == "setup":
            setup.append(text)
        elif kind == "command":
            commands.append(Command(path, number, text, text, list(setup)))
    return commands


def apply_markers(path, markers, commands):
    for line, pattern, reason in markers:
        chosen = [c for c in commands if pattern is None or pattern in c.written]
        if not chosen:
            raise DocError('%s:%d: marker "%s" selects no command of the fence below it'
                           % (path, line, pattern))
        for c in chosen:
            c.skip = c.skip or reason


def extract(path):
    """Every command of a markdown file, in document order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    commands, markers, fence = [], [], None
    for number, line in enumerate(lines, 1):
        if fence is not None:
            if line.startswith("```"):
                tag, start, body = fence
                if tag in RUN_TAGS:
                    found = fence_commands(path, body)
                    apply_markers(path, markers, found)
                    commands += found
                elif markers:
                    raise DocError("%s:%d: docs-test marker before a ```%s fence, which never runs"
                                   % (path, markers[0][0], tag))
                fence, markers = None, []
            else:
                fence[2].append((number, line))
            continue
        if line.startswith("```"):
            fence = (line[3:].strip().split(" ")[0], number, [])
            continue
        m = MARKER.match(line)
        if m:
            s = MARKER_SKIP.match(m.group(1))
            if not s:
                raise DocError("%s:%d: unknown docs-test marker %r (expected: skip [\"TEXT\"] REASON)"
                               % (path, number, m.group(0)))
            markers.append((number, s.group(1), s.group(2)))
        elif line.strip() and markers:
            raise DocError("%s:%d: docs-test marker is not right before a fence" % (path, markers[0][0]))
    if fence is not None:
        raise DocError("%s:%d: fence never closed" % (path, fence[1]))
    if markers:
        raise DocError("%s:%d: docs-test marker is not right before a fence" % (path, markers[0][0]))
    return commands


def rewrite(cmd, scratch):
    """The command as run (set-up lines first) and the ids of the rules that changed it."""
    text = "\n".join(cmd.setup + [cmd.text])
    fired = []
    for rule_id, _, fn in RULES:
        new = fn(text, scratch)
        if new != text:
            fired.append(rule_id)
            text = new
    return text, fired


def make_scratch(root, name, repo, build):
    """A folder where build/ is the build tree and every other top-level entry the source's."""
    scratch = os.path.join(root, re.sub(r"[^\w.-]", "_", name))
    os.makedirs(os.path.join(scratch, "tmp"))
    for entry in os.listdir(repo):
        if entry not in ("build", ".git"):
            os.symlink(os.path.join(repo, entry), os.path.join(scratch, entry))
    os.symlink(build, os.path.join(scratch, "build"))
    return scratch


def run_one(text, scratch, timeout):
    """(exit code, seconds, output); exit code None on timeout (the process group is killed)."""
    env = dict(os.environ, TMPDIR=os.path.join(scratch, "tmp"), **OMPI_ENV)
    start = time.monotonic()
    proc = subprocess.Popen(["bash", "-o", "pipefail", "-c", text], cwd=scratch, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    return code, time.monotonic() - start, out.decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(here)))
    ap.add_argument("--build", default=None, help="build folder (default REPO/build)")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--grep", default=None)
    ap.add_argument("--section", action="append", default=[],
                    help="only the commands under a `## ` heading containing TEXT (repeatable: any of them)")
    ap.add_argument("--not-section", action="append", default=[],
                    help="only the commands under no `## ` heading containing TEXT (repeatable: none of them)")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args()
    repo = os.path.abspath(args.repo)
    build = os.path.abspath(args.build or os.path.join(repo, "build"))
    files = args.only or [os.path.join(repo, "README.md")] + sorted(
        os.path.join(repo, "docs", f) for f in os.listdir(os.path.join(repo, "docs")) if f.endswith(".md"))

    def section_of(path):
        """line number -> the `## ` heading above it (top level sections only)."""
        heading, out = "", {}
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f.read().split("\n"), 1):
                if line.startswith("## "):
                    heading = line[3:]
                out[number] = heading
        return out

    def wanted(path, commands):
        if not args.section and not args.not_section:
            return commands
        where = section_of(path)
        keep = lambda c: ((not args.section or any(t in where.get(c.line, "") for t in args.section))
                          and not any(t in where.get(c.line, "") for t in args.not_section))
        return [c for c in commands if keep(c)]

    try:
        per_file = [(f, wanted(f, extract(f))) for f in files]
    except (DocError, OSError) as e:
        print("docs-test: %s" % e)
        return 1
    show = lambda f: os.path.relpath(f, repo) if os.path.abspath(f).startswith(repo + os.sep) else f

    print("rewrite rules (applied in this order; each is named next to a command it changed):")
    for rule_id, what, _ in RULES:
        print("  %-7s %s" % (rule_id, what))
    ran, passed, failed, skipped, unselected, t0 = 0, 0, [], {}, 0, time.monotonic()
    passed_at, repeated = {}, 0  # command as run -> where it passed
    with tempfile.TemporaryDirectory(prefix="dpt-docs-") as root:
        for path, commands in per_file:
            scratch = make_scratch(root, show(path), repo, build)
            for cmd in commands:
                if args.grep is not None and args.grep not in cmd.written:
                    unselected += 1
                    continue
                where = "%s:%d" % (show(path), cmd.line)
                print("\n%s" % where)
                if cmd.skip:  # as written: it does not run, so no rule applies
                    print("  $ %s\n  SKIPPED: %s" % (cmd.written, cmd.skip))
                    skipped[cmd.skip] = skipped.get(cmd.skip, 0) + 1
                    continue
                text, fired = rewrite(cmd, scratch)
                print("  $ " + text.replace("\n", "\n    "))
                if fired:
                    print("  rewritten: " + ", ".join(fired))
                if args.list:
                    ran += 1  # would run
                    continue
                if text in passed_at:
                    print("  not run again: identical to %s, which passed" % passed_at[text])
                    repeated += 1
                    continue
                code, secs, out = run_one(text, scratch, args.timeout)
                ran += 1
                status = "timed out after %.0f s" % args.timeout if code is None else "exit %d" % code
                print("  %s, %.1f s" % (status, secs))
                if code == 0:
                    passed += 1
                    passed_at[text] = where
                else:
                    failed.append(where)
                    tail = out.rstrip("\n").split("\n")[-25:]
                    print("  FAILED: %s; its last output lines:\n    | %s" % (where, "\n    | ".join(tail)))
    total = sum(skipped.values())
    reasons = "; ".join("%s: %d" % (r, n) for r, n in skipped.items())
    print("\n%s%d run, %d passed, %d skipped (%s), %d repeated%s in %.0f s"
          % ("listed, nothing ran: " if args.list else "", ran, passed, total, reasons or "none", repeated,
             ", %d not matching --grep" % unselected if args.grep is not None else "",
             time.monotonic() - t0))
    for where in failed:
        print("FAILED: %s" % where)
    if args.list:
        return 0
    if ran == 0:
        print("docs-test: no command ran (every one skipped or none selected): nothing was checked")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
