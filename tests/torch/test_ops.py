"""Every op of the "accl" backend against gloo / a local reference, 2 and 4 ranks."""
import glob
import os

import pytest
import torch.multiprocessing as mp

import ops_worker
from common import free_port


@pytest.mark.parametrize("world_size", [2, 4])
def test_ops_match_gloo(world_size, tmp_path):
    try:
        mp.spawn(ops_worker.worker, args=(world_size, free_port(), str(tmp_path)), nprocs=world_size, join=True)
    except Exception as e:
        errs = "".join(open(f).read() for f in sorted(glob.glob(os.path.join(tmp_path, "*.err"))))
        pytest.fail(f"{e}\n{errs}")
