"""The extension calls OUR libnccl.so.2 even though torch loads NVIDIA's bundled one."""
import os

import pytest

import torch  # noqa: F401  (loads torch's own libnccl.so.2 from nvidia-nccl-cu12, via libtorch_cuda)
import torch_accl
import torch.distributed as dist


def test_extension_resolves_accl_not_torch_nccl():
    assert torch_accl.version().startswith("ACCL "), torch_accl.version()
    ours = os.path.realpath(torch_accl.LIBNCCL)
    assert os.path.realpath(torch_accl.library_path()) == ours
    maps = open("/proc/self/maps").read()
    assert ours in maps
    # Both libraries coexist: torch's NCCL (if any) is a different file.
    others = {l.split()[-1] for l in maps.splitlines() if l.endswith("libnccl.so.2") and ours not in l}
    print("other libnccl.so.2 in this process:", others or "none")


def test_backend_registered_for_cpu():
    assert "accl" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map.get("cpu") in (None, "gloo")  # untouched
    assert "cpu" in dist.Backend.backend_capability["accl"]


def test_file_init_method(tmp_path):
    import torch.multiprocessing as mp
    import ops_worker
    mp.spawn(ops_worker.file_init_worker, args=(2, str(tmp_path / "rendezvous")), nprocs=2, join=True)


def test_route1_preload_replaces_torch_nccl():
    """Route 1 (docs/pytorch.md): LD_PRELOAD makes torch's libtorch_cuda use ACCL's libnccl."""
    import subprocess
    import sys
    code = ("import ctypes, torch\n"
            "f = ctypes.CDLL('libnccl.so.2').ncclAcclVersionString\n"
            "f.restype = ctypes.c_char_p\n"
            "print(f().decode())\n"
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libnccl' in l}))\n")
    lib = os.path.realpath(torch_accl.LIBNCCL)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, LD_PRELOAD=lib))
    import re
    missing = re.search(r"libtorch_cuda\.so: undefined symbol: (nccl\w+)", r.stderr)
    if r.returncode != 0 and missing:
        # Newer torch (2.15) links NCCL 2.29+ entry points ACCL does not export yet
        # (ncclCommResume, ncclCommSuspend, ncclCommGrow, ncclSignal, ...): a known gap, reported.
        pytest.xfail(f"torch {torch.__version__} needs {missing.group(1)} (and other NCCL 2.29+ symbols) "
                     "that ACCL's libnccl.so.2 does not export yet: route 1 cannot load this torch")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ACCL "), r.stdout
    assert "nvidia" not in r.stdout.splitlines()[1], r.stdout


def test_cuda_support_built_for_cuda_torch():
    """setup.py finds CUDA's runtime headers in torch's own nvidia wheels (cu12 and cu13 layouts),
    so a CUDA build of torch always gets the CUDA-tensor path (route 2 on GPUs)."""
    import torch
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}); torch_accl serves CUDA tensors: "
          f"{torch_accl._C.built_with_cuda()}")
    assert torch_accl._C.built_with_cuda() == (torch.version.cuda is not None)
