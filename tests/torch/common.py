"""Shared helpers for the torch_accl pytest suite."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "perf"))
from free_port import free_port  # noqa: E402,F401  (the tests import it from here)


def torchrun(script, nproc, *args, timeout=180, env=None):
    """Runs `torchrun --nproc-per-node=nproc script args` on 127.0.0.1; returns CompletedProcess."""
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}",
           "--master-addr=127.0.0.1", f"--master-port={free_port()}", script, *args]
    e = dict(os.environ)
    e.update(env or {})
    e.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
