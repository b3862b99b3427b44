"""dpt as a torch.distributed backend: PyTorch programs switch one word.

    import torch.distributed as dist
    import dpt_torch                           # registers the backend name "dpt"
    dist.init_process_group(backend="dpt")     # was: backend="gloo"

Process groups of backend "dpt" run on the project's Communicator (docs/torch.md):
DPT_BACKEND picks the transport (tcp, the default, with shared memory between ranks
on one host; or mpi under mpirun), DPT_ALGO the collective algorithm as --algo does.
"""
import ctypes
import os
import socket

import torch.distributed as dist

__all__ = ["BACKEND_NAME", "transport", "ProcessGroupDpt"]

BACKEND_NAME = "dpt"


def _load_mpi_globally():
    # Open MPI opens its components with dlopen and they need libmpi's symbols in the
    # global namespace; a Python extension is loaded with RTLD_LOCAL, so load it first.
    for name in ("libmpi.so.40", "libmpi.so"):
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue


_UNDER_MPIRUN = "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ
if _UNDER_MPIRUN:
    _load_mpi_globally()

from . import _C  # noqa: E402  (after the MPI preload)

ProcessGroupDpt = _C.ProcessGroupDpt
transport = _C.transport


def _fill_launch_env_from_mpirun():
    """Under mpirun, give env:// the torchrun-style variables it reads.

    RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE come from Open MPI's (or PMI's)
    variables; MASTER_ADDR defaults to this host for a one-host job; a missing
    MASTER_PORT is a free port of rank 0, agreed over MPI. Variables already set win.
    """
    if not _UNDER_MPIRUN or ("RANK" in os.environ and "WORLD_SIZE" in os.environ):
        return
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        rank, size = env["OMPI_COMM_WORLD_RANK"], env["OMPI_COMM_WORLD_SIZE"]
        local_rank = env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0")
        local_size = env.get("OMPI_COMM_WORLD_LOCAL_SIZE", size)
    else:
        rank, size = env["PMI_RANK"], env["PMI_SIZE"]
        local_rank = env.get("MPI_LOCALRANKID", "0")
        local_size = env.get("MPI_LOCALNRANKS", size)
    # Agree first: share_over_mpi recognizes mpirun by the variables set below.
    if "MASTER_ADDR" not in env:
        one_host = local_size == size
        host = "127.0.0.1" if one_host else socket.gethostname()
        env["MASTER_ADDR"] = _C.share_over_mpi(host if rank == "0" else "")
    if "MASTER_PORT" not in env:
        port = ""
        if rank == "0":
            with socket.socket() as s:
                s.bind(("", 0))
                port = str(s.getsockname()[1])
        env["MASTER_PORT"] = _C.share_over_mpi(port)
    env.setdefault("RANK", rank)
    env.setdefault("WORLD_SIZE", size)
    env.setdefault("LOCAL_RANK", local_rank)
    env.setdefault("LOCAL_WORLD_SIZE", local_size)


def _fill_launch_env_from_slurm():
    """Under srun, give env:// the torchrun-style variables it reads, from Slurm's own
    (docs/slurm.md): ranks from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, MASTER_ADDR the
    step's first node, MASTER_PORT derived from the job and step ids. Variables already
    set win."""
    env = os.environ
    if "SLURM_PROCID" not in env or _UNDER_MPIRUN or ("RANK" in env and "WORLD_SIZE" in env):
        return
    li = _C.launch_info()
    env.setdefault("RANK", str(li["rank"]))
    env.setdefault("WORLD_SIZE", str(li["world_size"]))
    env.setdefault("LOCAL_RANK", str(li["local_rank"]))
    env.setdefault("LOCAL_WORLD_SIZE", str(li["local_size"]))
    if li["master_addr"]:
        env.setdefault("MASTER_ADDR", li["master_addr"])
    if li["master_port"]:
        env.setdefault("MASTER_PORT", str(li["master_port"]))


def _store_host(store):
    """The host a TCPStore under PyTorch's PrefixStores was reached at, else ''."""
    while isinstance(store, dist.PrefixStore):
        store = store.underlying_store
    return store.host if isinstance(store, dist.TCPStore) else ""


def _create_process_group(opts, pg_options):
    """torch.distributed's creator for backend "dpt" (extended API: it gets the group's
    world ranks and name too, which the mpi transport needs for new_group). Returns a
    c10d Backend that PyTorch's ProcessGroup dispatches to."""
    if pg_options is not None:
        raise RuntimeError("the dpt backend takes no pg_options")
    return _C.create_group(
        opts.store,
        opts.group_rank,
        opts.group_size,
        opts.timeout,
        list(opts.global_ranks_in_group),
        opts.group_id,
        _store_host(opts.store),
    )


_fill_launch_env_from_mpirun()
_fill_launch_env_from_slurm()
if BACKEND_NAME.upper() not in dist.Backend._plugins:
    # CPU tensors, and CUDA tensors staged through pinned host memory (docs/gpu.md).
    dist.Backend.register_backend(BACKEND_NAME, _create_process_group, extended_api=True, devices=["cpu", "cuda"])
