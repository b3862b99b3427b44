#!/bin/bash
# tools/run_report.py's page for a finished and for a failed run, rendered by a real
# browser (Debian's Chromium, headless): the DOM it built has the parts (status, one
# timeline lane group per rank, the time table, the phases, the stragglers; the failed
# run's flight verdict naming the stopped rank) and the screenshot shows them (the status
# bar's green or red, the forward phase's blue and the communication lane's teal, counted
# in the PNG's pixels).
#   run_report.sh BIN_DIR REPO
set -euo pipefail
bin=$1 repo=$2
browser=$(command -v chromium || command -v chromium-browser || true)
[[ -n $browser ]] || { echo "SKIP: no chromium (tools/install_deps.sh installs Debian's)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

"$bin/launch" -n 2 "$bin/train" --steps 30 --trace "$tmp/ok_trace" --metrics-out "$tmp/ok.jsonl" > "$tmp/ok.log" 2>&1 ||
  { cat "$tmp/ok.log"; exit 1; }
# Rank 1 stopped inside step 3's backward: rank 0 times out, writes its flight record and trace.
COMM_TIMEOUT_S=3 DPT_FLIGHT_DIR="$tmp/flight" "$bin/launch" -n 2 "$bin/train" --steps 40 \
  --debug-signal 1:3:backward:STOP --trace "$tmp/bad_trace" --metrics-out "$tmp/bad.jsonl" > "$tmp/bad.log" 2>&1 &&
  { echo "FAIL: the run with a stopped rank succeeded"; exit 1; }
$py "$repo/tools/run_report.py" --trace "$tmp/ok_trace" --metrics "$tmp/ok.jsonl" -o "$tmp/ok.html"
$py "$repo/tools/run_report.py" --trace "$tmp/bad_trace" --metrics "$tmp/bad.jsonl" --flight "$tmp/flight" -o "$tmp/bad.html"

for page in ok bad; do
  flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1400)
  timeout 60 "$browser" "${flags[@]}" --dump-dom "file://$tmp/$page.html" > "$tmp/$page.dom" 2> "$tmp/$page.err" ||
    { cat "$tmp/$page.err"; echo "FAIL: chromium could not render $page.html"; exit 1; }
  timeout 60 "$browser" "${flags[@]}" --screenshot="$tmp/$page.png" "file://$tmp/$page.html" > /dev/null 2>&1 ||
    { echo "FAIL: no screenshot of $page.html"; exit 1; }
done

$py - "$tmp" <<'PY'
import re, struct, sys, zlib
d = sys.argv[1]

def pixels(path):
    """RGB(A) pixels of an 8-bit PNG, decoded with zlib (no imaging library needed)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, prev, out = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line))
        prev = line
    counts = {}
    for line in out:
        for i in range(0, stride, bpp):
            px = line[i:i + 3]
            counts[px] = counts.get(px, 0) + 1
    return counts

def count(counts, hexcolor):
    want = bytes.fromhex(hexcolor[1:])
    return sum(n for px, n in counts.items() if all(abs(px[k] - want[k]) <= 6 for k in range(3)))

fail = []
ok, bad = open(f"{d}/ok.dom").read(), open(f"{d}/bad.dom").read()
for what, cond in [
        ("ok: status finished", 'id="status" class="ok"' in ok),
        ("ok: a lane group per rank", len(re.findall(r'<g class="lane"', ok)) == 2),
        ("ok: bars drawn", len(re.findall(r'<rect class="phase"', ok)) >= 40 and len(re.findall(r'<rect class="comm"', ok)) >= 20),
        ("ok: the time table's two ranks", len(re.findall(r"<td>rank \d</td>", ok)) >= 4),
        ("ok: the stragglers' section", 'id="slowest"' in ok and 'id="straggler-events"' in ok),
        ("bad: status failed", 'id="status" class="failed"' in bad),
        ("bad: the verdict names the stopped rank", re.search(r'id="verdict".*never entered it: rank 1', bad, re.S) is not None)]:
    if not cond:
        fail.append(what)
okpx, badpx = pixels(f"{d}/ok.png"), pixels(f"{d}/bad.png")
figures = {"ok green status": count(okpx, "#2e7d32"), "ok forward blue": count(okpx, "#1e88e5"),
           "ok comm teal": count(okpx, "#00897b"), "bad red status": count(badpx, "#c62828"),
           "bad green status": count(badpx, "#2e7d32")}
print("pixels:", figures)
for name, low in [("ok green status", 5000), ("ok forward blue", 300), ("ok comm teal", 100), ("bad red status", 5000)]:
    if figures[name] < low:
        fail.append(f"{name}: {figures[name]} pixels (< {low})")
if figures["bad green status"] > 100:
    fail.append("the failed run's page shows the green status")
if fail:
    print("FAIL:\n  " + "\n  ".join(fail))
    sys.exit(1)
print("both pages rendered by chromium with their parts")
PY
