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


if "accl" not in dist.Backend.backend_list:
    dist.Backend.register_backend("accl", _create, devices=["cpu", "cuda"])

__all__ = ["LIBNCCL", "version", "library_path"]
