"""Stand-in for the pip package `expecttest`, which Debian does not ship.

torch.testing._internal.common_utils imports it for its TestCase base class and the
ACCEPT flag; PyTorch's distributed tests never use expect-tests, so a plain
unittest.TestCase and an assertion that compares exactly are all they need. The suite
runner (run_distributed_suite.py) puts this folder on PYTHONPATH only when the real
package is missing.
"""
import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    def assertExpectedInline(self, actual, expect, skip=0):
        self.assertEqual(actual, expect)
