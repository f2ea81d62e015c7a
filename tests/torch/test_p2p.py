"""Point-to-point ops on "accl" (CPU tensors) next to collectives, a failed batch_isend_irecv, and
send/recv matched by (peer, tag) as on gloo (p2p_worker.py), 2 and 3 ranks, exact payloads."""
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


@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("case", ["tag_swap", "tags_interleaved", "tags_batch", "tag_size_mismatch",
                                  "tag_never_matched"])
def test_p2p_tags(case, world_size, tmp_path):
    spawn(case, world_size, tmp_path)
