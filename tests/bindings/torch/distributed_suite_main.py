"""Runs PyTorch's own DistributedTest suite (torch/testing/_internal/distributed/
distributed_test.py, shipped in the torch wheel) for one backend at one world size, as
PyTorch's test/distributed/test_distributed_spawn.py does, and writes one JSON line per
test to --results: {"test", "status": passed|skipped|failed, "reason", "seconds"}, and
one line per rank whose test body returned (passed on that rank) to --results + ".ranks":
{"test", "rank"}. Exit status 0 only when every test asked for ran and none failed
(skips count as success here; run_distributed_suite.py --no-skips refuses them).

Environment (set by run_distributed_suite.py): BACKEND (gloo or dpt), WORLD_SIZE, and
DPT_AS_GLOO=1 for the "dpt-as-gloo" run: BACKEND stays gloo, so every test PyTorch gates
on the name gloo is selected, but init_process_group and new_group get backend "dpt"
where the tests ask for gloo. Tests that check the backend's name or call
ProcessGroupGloo-only methods (monitored_barrier) fail there by construction; the
others are gloo's tests passed by dpt.
For BACKEND=dpt, `import dpt_torch` registers the backend, and the suite's feature
tables list "dpt" where they list gloo (ddp, subgroup, plugin, gpu, cuda): the same
gates gloo passes through, so the same tests run. Tests that PyTorch gates on the name
"gloo" itself stay skipped for dpt, with PyTorch's reason (docs/torch.md lists them).
--start fork (default) starts each test's ranks by fork() from this already-imported
process instead of spawning fresh interpreters: the tests are the same, the suite
takes a fraction of the time.
"""
import argparse
import json
import os
import sys
import time
import unittest

parser = argparse.ArgumentParser()
parser.add_argument("--results", required=True)
parser.add_argument("--start", choices=["fork", "spawn"], default="fork")
parser.add_argument("tests", nargs="*", help="test names (default: all)")
args, _ = parser.parse_known_args()

BACKEND = os.environ["BACKEND"]
import torch  # noqa: E402

import torch.distributed as dist  # noqa: E402
from torch.testing._internal import common_distributed  # noqa: E402

if BACKEND == "dpt":
    import dpt_torch  # noqa: F401,E402

    features = common_distributed.DistTestCases.backend_feature
    for key in ("gpu", "cuda", "ddp", "subgroup", "plugin"):
        features[key].add("dpt")

if os.environ.get("DPT_AS_GLOO") == "1":
    import dpt_torch  # noqa: F401,E402

    def as_dpt(backend):
        return "dpt" if backend is not None and str(backend).lower() == "gloo" else backend

    _init, _new_group = dist.init_process_group, dist.new_group

    def init_process_group(backend, *a, **k):
        return _init(as_dpt(backend), *a, **k)

    def new_group(*a, backend=None, **k):
        return _new_group(*a, backend=as_dpt(backend), **k)

    dist.init_process_group, dist.new_group = init_process_group, new_group

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402

START = args.start


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def run_test(self, test_name, parent_pipe):
        """In each rank's process: PyTorch's run_test exits the process on a failure or a
        skip, so the line below is written only when the test passed on this rank."""
        super().run_test(test_name, parent_pipe)
        with open(args.results + ".ranks", "a") as f:
            f.write(json.dumps({"test": test_name, "rank": self.rank}) + "\n")

    def setUp(self):
        super().setUp()
        if START == "fork":
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


class JsonResult(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.out = open(args.results, "a")
        self.t0 = 0.0

    def startTest(self, test):
        self.t0 = time.time()
        super().startTest(test)

    def _write(self, test, status, reason=""):
        name = test.id().split(".")[-1]
        rec = {"test": name, "status": status, "reason": reason.strip()[-2000:], "seconds": round(time.time() - self.t0, 1)}
        self.out.write(json.dumps(rec) + "\n")
        self.out.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self._write(test, "passed")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._write(test, "skipped", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._write(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._write(test, "failed", self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._write(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._write(test, "failed", "unexpected success")


if __name__ == "__main__":
    loader = unittest.TestLoader()
    if args.tests:
        suite = unittest.TestSuite(TestDistBackendWithSpawn(t) for t in args.tests)
    else:
        suite = loader.loadTestsFromTestCase(TestDistBackendWithSpawn)
    runner = unittest.TextTestRunner(resultclass=JsonResult, verbosity=1, stream=sys.stderr)
    result = runner.run(suite)
    ran_all = not args.tests or result.testsRun == len(args.tests)
    if not ran_all:
        print(f"distributed_suite_main: ran {result.testsRun} of the {len(args.tests)} tests asked for", file=sys.stderr)
    sys.exit(0 if result.wasSuccessful() and ran_all else 1)
