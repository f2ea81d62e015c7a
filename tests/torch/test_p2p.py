"""Point-to-point ops on "accl" (CPU tensors) next to collectives, and a failed batch_isend_irecv
(p2p_worker.py), 2 and 3 ranks, exact payloads."""
import glob
import os

import pytest
import torch.multiprocessing as mp

import p2p_worker
from common import free_port


def spawn(case, ws, tmp_path):
    try:
        mp.spawn(p2p_worker.worker, args=(ws, free_port(), str(tmp_path), case), nprocs=ws, join=True)
    except Exception as e:
        errs = "".join(open(f).read() for f in sorted(glob.glob(os.path.join(tmp_path, "*.err"))))
        pytest.fail(f"{e}\n{errs}")


@pytest.mark.parametrize("world_size", [2, 3])
def test_failed_batch_leaves_coalescing(world_size, tmp_path):
    spawn("failed_batch", world_size, tmp_path)


@pytest.mark.parametrize("world_size", [2, 3])
def test_p2p_pending_across_collective(world_size, tmp_path):
    spawn("p2p_across_collective", world_size, tmp_path)
