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
    """Route 1 (docs/pytorch.md): LD_PRELOAD makes torch's libtorch_cuda use ACCL's libnccl.
    Newer torch also maps its own NVIDIA libnccl (it preloads its nvidia wheels), so what counts
    is where libtorch_cuda's NCCL calls bind: the dynamic linker's binding log says."""
    import re
    import subprocess
    import sys
    code = ("import ctypes, torch, torch.cuda.nccl\n"
            "f = ctypes.CDLL('libnccl.so.2').ncclAcclVersionString\n"
            "f.restype = ctypes.c_char_p\n"
            "print(f().decode())\n"
            "print(len(torch.cuda.nccl.unique_id()))\n")  # a real ncclGetUniqueId call, no GPU needed
    lib = os.path.realpath(torch_accl.LIBNCCL)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, LD_PRELOAD=lib, LD_DEBUG="bindings"))
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.startswith("ACCL "), r.stdout
    bindings = re.findall(r"binding file (\S*libtorch_cuda\.so) \[0\] to (\S+) \[0\]: normal symbol `(nccl\w+)'",
                          r.stderr)
    targets = {symbol: os.path.realpath(target) for _, target, symbol in bindings}
    assert "ncclGetUniqueId" in targets, "libtorch_cuda never called ncclGetUniqueId"
    assert targets and all(t == lib for t in targets.values()), targets


def test_cuda_support_built_for_cuda_torch():
    """setup.py finds CUDA's runtime headers in torch's own nvidia wheels (cu12 and cu13 layouts),
    so a CUDA build of torch always gets the CUDA-tensor path (route 2 on GPUs)."""
    import torch
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}); torch_accl serves CUDA tensors: "
          f"{torch_accl._C.built_with_cuda()}")
    assert torch_accl._C.built_with_cuda() == (torch.version.cuda is not None)
