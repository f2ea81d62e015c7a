"""torch_accl: `import torch_accl` registers the torch.distributed backend "accl".

dist.init_process_group(backend="accl") then runs collectives on CPU and CUDA tensors through ACCL's
libnccl.so.2 (loaded by absolute path, never torch's bundled NCCL).
"""
import os

import torch
import torch.distributed as dist

from ._build_info import LIBNCCL as _BUILD_LIBNCCL

#: Absolute path of the ACCL libnccl.so.2 this package uses (ACCL_LIBNCCL overrides).
LIBNCCL = os.environ.get("ACCL_LIBNCCL", _BUILD_LIBNCCL)

from . import _C  # noqa: E402

_C.load_library(LIBNCCL)


def version() -> str:
    """ncclAcclVersionString() of the loaded library, e.g. 'ACCL 0.1.0 (...)'."""
    return _C.accl_version()


def library_path() -> str:
    """The file that provides ncclAllReduce to this extension (via dladdr)."""
    return _C.library_path()


def _create(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout.total_seconds())


def _abandon_coalescing(p2p_op_list, exc):
    """After torch's batch_isend_irecv raised inside its coalescing block: torch leaves the group
    in coalescing mode (its context manager has no cleanup), where every later collective on the
    group only records itself and returns its input. End that state, and make an accl backend
    drop the ops it held for the batch (their Works fail) instead of starting them later."""
    import torch.distributed.distributed_c10d as c10d

    try:
        group = p2p_op_list[0].group or c10d._get_default_group()
        backend = group._get_backend(p2p_op_list[0].tensor.device)
    except Exception:  # noqa: BLE001 - the list itself was bad: nothing was started
        return
    if group not in c10d._world.pg_coalesce_state:  # raised before the block began
        return
    if _C.abort_coalescing(backend, f"batch_isend_irecv failed: {exc}") >= 0:
        c10d._world.pg_coalesce_state.pop(group, None)


def _wrap_batch_isend_irecv():
    import torch.distributed.distributed_c10d as c10d

    inner = c10d.batch_isend_irecv
    if getattr(inner, "_accl_wrapped", False):
        return

    def batch_isend_irecv(p2p_op_list):
        try:
            return inner(p2p_op_list)
        except Exception as e:
            _abandon_coalescing(p2p_op_list, e)
            raise

    batch_isend_irecv.__doc__ = inner.__doc__
    batch_isend_irecv.__wrapped__ = inner
    batch_isend_irecv._accl_wrapped = True
    c10d.batch_isend_irecv = batch_isend_irecv
    if getattr(dist, "batch_isend_irecv", None) is inner:
        dist.batch_isend_irecv = batch_isend_irecv


_wrap_batch_isend_irecv()

if "accl" not in dist.Backend.backend_list:
    dist.Backend.register_backend("accl", _create, devices=["cpu", "cuda"])

__all__ = ["LIBNCCL", "version", "library_path"]
