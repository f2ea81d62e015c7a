"""CUDA tensors through both routes (docs/pytorch.md), two ranks on cuda:0. Skipped, with the
reason, on a machine without a GPU or when the loaded ACCL has no CUDA backend; the same checks
run from scripts/gpu-check-torch.sh on a GPU machine."""
import os

import pytest
import torch

import torch_accl
from common import HERE, torchrun

OPS = os.path.join(HERE, "cuda_ops.py")
TRAIN = os.path.join(HERE, "train.py")


def gpu_skip_reason():
    if not torch.cuda.is_available():
        return f"no GPU visible to torch {torch.__version__} (CUDA checks run in scripts/gpu-check-torch.sh)"
    if "cuda" not in torch_accl.version().split("backends:")[-1]:
        return f"the loaded ACCL has no CUDA backend: {torch_accl.version()}"
    return None


pytestmark = pytest.mark.skipif(gpu_skip_reason() is not None, reason=str(gpu_skip_reason()))


def route_env(route):
    return {"LD_PRELOAD": os.path.realpath(torch_accl.LIBNCCL)} if route == "nccl" else {}


@pytest.mark.parametrize("route", ["accl", "nccl"])
def test_cuda_ops(route):
    r = torchrun(OPS, 2, "--backend", route, env=route_env(route), timeout=300)
    rows = [l for l in r.stdout.splitlines() if l.startswith("ROW ")]
    print("\n".join(rows))
    assert r.returncode == 0 and rows, r.stdout[-3000:] + r.stderr[-3000:]


def test_ddp_cuda_matches_gloo_cpu(tmp_path):
    outs = {}
    for backend, device in (("gloo", "cpu"), ("accl", "cuda"), ("nccl", "cuda")):
        out = str(tmp_path / f"{backend}.pt")
        r = torchrun(TRAIN, 2, "--backend", backend, "--device", device, "--steps", "20", "--out", out,
                     env=route_env(backend), timeout=300)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        outs[backend] = torch.load(out, weights_only=True)
    for backend in ("accl", "nccl"):
        d = max((outs[backend][k] - outs["gloo"][k]).abs().max().item() for k in outs["gloo"])
        print(f"DDP 20 steps, 2 ranks on cuda:0, {backend}: max |param - gloo CPU| = {d:.3g}")
        assert d < 1e-4
