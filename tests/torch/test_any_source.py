"""Receive from any source on "accl" against gloo (any_source_worker.py), 3 ranks."""
import glob
import os

import pytest
import torch.multiprocessing as mp

import any_source_worker
from common import free_port


def test_recv_any_source_matches_gloo(tmp_path):
    ws = 3
    try:
        mp.spawn(any_source_worker.worker, args=(ws, free_port(), str(tmp_path)), nprocs=ws, join=True)
    except Exception as e:
        errs = "".join(open(f).read() for f in sorted(glob.glob(os.path.join(tmp_path, "*.err"))))
        pytest.fail(f"{e}\n{errs}")
