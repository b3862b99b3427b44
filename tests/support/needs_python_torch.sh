#!/usr/bin/env bash
# Runs a test that needs PyTorch (DPT_PYTHON, by default the project's .venv that
# tools/install_deps.sh makes, with torch and per test torchvision, numpy) or the
# dpt_torch extension, or prints
# "SKIP: <reason>" and exits 77 (CTest: skipped, with SKIP_RETURN_CODE 77) where they are
# missing, so such a test is always registered and counted, never silently absent.
# usage: needs_python_torch.sh [--python PY] [--modules M1,M2,...] [--unavailable REASON]
#                              -- COMMAND [ARGS...]
#   --python       the interpreter the test runs (default /usr/bin/python3)
#   --modules      top-level modules that must be installed (default torch); looked up
#                  with importlib.util.find_spec, not imported: an installed but broken
#                  module is not skipped, the test runs and fails
#   --unavailable  configure found a prerequisite missing (dpt_torch not built): skip
#                  with REASON without trying anything
py=/usr/bin/python3 modules=torch unavailable=
while [[ $# -gt 0 && $1 != -- ]]; do
  case $1 in
    --python) py=$2; shift 2 ;;
    --modules) modules=$2; shift 2 ;;
    --unavailable) unavailable=$2; shift 2 ;;
    *) echo "needs_python_torch.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ ${1:-} == -- ]] && shift
[[ $# -gt 0 ]] || { echo "needs_python_torch.sh: no command" >&2; exit 2; }

if [[ -n $unavailable ]]; then
  echo "SKIP: $unavailable"
  exit 77
fi
if [[ ! -x $py ]]; then
  echo "SKIP: $py is not installed (tools/install_deps.sh makes the project's .venv)"
  exit 77
fi
missing=$("$py" - "$modules" <<'PY'
import importlib.util, sys
print(" ".join(m for m in sys.argv[1].split(",") if m and importlib.util.find_spec(m) is None))
PY
) || { echo "FAIL: $py could not look up the modules $modules"; exit 1; }
if [[ -n $missing ]]; then
  echo "SKIP: $py cannot import $missing (tools/install_deps.sh installs them into the project's .venv)"
  exit 77
fi
exec "$@"
