# The Python every PyTorch-facing part uses: the torch.distributed plugin is built
# against its torch, and every test and benchmark that compares with PyTorch runs it.
# Default: the project's virtual environment (.venv, made by tools/install_deps.sh with
# the pinned wheels of tools/python-requirements.txt), else Debian's /usr/bin/python3.
# -DDPT_PYTHON=/path/to/python picks another (a conda or system interpreter with torch).
if(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(_dpt_python_default ${PROJECT_SOURCE_DIR}/.venv/bin/python)
else()
  set(_dpt_python_default /usr/bin/python3)
endif()
set(DPT_PYTHON ${_dpt_python_default} CACHE FILEPATH
    "Python with PyTorch for the torch plugin, the references and the benchmarks")
execute_process(COMMAND ${DPT_PYTHON} -c "import torch, sys; sys.stdout.write(torch.__version__)"
                OUTPUT_VARIABLE DPT_PYTHON_TORCH_VERSION RESULT_VARIABLE _dpt_python_rc ERROR_QUIET)
if(NOT _dpt_python_rc EQUAL 0)
  set(DPT_PYTHON_TORCH_VERSION "")
endif()
