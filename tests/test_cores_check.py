#!/usr/bin/python3
"""tests.every_test_holds_cores: the suite's scheduling (tests/test_cores.cmake) holds.

usage: test_cores_check.py SOURCE_DIR BUILD_DIR

Fails, naming the test, when a registered test holds no share of the machine (no
RESOURCE_GROUPS, so `ctest -jN` would run it beside everything at once), holds more cores
than the resource spec has, or when a name in the lists of tests/test_cores.cmake is not a
test (a renamed test would silently lose its share); and when the build's test file does not
name the resource spec (CTEST_RESOURCE_SPEC_FILE), or the spec does not parse.
"""
import json
import re
import subprocess
import sys

src, build = sys.argv[1], sys.argv[2]
problems = []

testfile = open(f"{build}/CTestTestfile.cmake").read()
m = re.search(r'set\(CTEST_RESOURCE_SPEC_FILE "([^"]+)"\)', testfile)
if not m:
    sys.exit(f"FAIL: {build}/CTestTestfile.cmake does not set CTEST_RESOURCE_SPEC_FILE")
spec = json.load(open(m.group(1)))
capacity = {kind: inst[0]["slots"] for kind, inst in spec["local"][0].items()}

shown = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                       check=True, capture_output=True, text=True).stdout
tests = json.loads(shown)["tests"]
names = {t["name"] for t in tests}
for t in tests:
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    groups = props.get("RESOURCE_GROUPS")
    if not groups:
        problems.append(f"{t['name']}: no RESOURCE_GROUPS (dpt_test_cores() not called after it was added?)")
        continue
    for group in groups:
        for req in group["requirements"]:
            kind, slots = req[".type"], req["slots"]
            if kind not in capacity:
                problems.append(f"{t['name']}: resource '{kind}' is not in the spec {m.group(1)}")
            elif slots > capacity[kind]:
                problems.append(f"{t['name']}: {slots} {kind} of the {capacity[kind]} the spec has")

lists = open(f"{src}/tests/test_cores.cmake").read()
for list_name in ("DPT_IDLE_TESTS", "DPT_ONE_CORE_TESTS"):
    body = re.search(r"set\(%s\n(.*?)\n\)" % list_name, lists, re.S).group(1)
    for line in body.splitlines():
        name = line.split("#")[0].strip()
        if name and name not in names:
            problems.append(f"tests/test_cores.cmake: {list_name} names '{name}', which is not a test")

for p in problems:
    print("FAIL:", p)
if problems:
    sys.exit(1)
print(f"ok: {len(tests)} tests each hold a share; spec {capacity}")
