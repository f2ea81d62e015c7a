"""Collectives on CUDA tensors through torch.distributed, checked against CPU references.

  torchrun --nproc-per-node=2 tests/torch/cuda_ops.py --backend accl     # route 2 (import torch_accl)
  LD_PRELOAD=build/lib/libnccl.so.2 torchrun --nproc-per-node=2 tests/torch/cuda_ops.py --backend nccl
                                                                         # route 1 (ProcessGroupNCCL)

Every rank uses cuda:0 by default (--spread: cuda:LOCAL_RANK % device count); NVIDIA's NCCL
refuses two ranks on one GPU, ACCL serves them. Rank 0 prints one line per check,
"ROW <check> PASS|FAIL <detail>", and the script exits 1 when any check failed.
"""
import argparse
import datetime
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist


def inp(rank, n, dtype, device="cpu"):
    x = (torch.arange(n, dtype=torch.int64) * (rank + 1) + 3 * rank) % 11 + 1
    if dtype.is_floating_point:
        x = x.to(torch.float64) / 2
    return x.to(dtype).to(device)


def close(a, b, what):
    a, b = a.cpu(), b.cpu()
    if a.dtype.is_floating_point:
        tol = 1e-2 if a.dtype in (torch.float16, torch.bfloat16) else 1e-6
        ok = torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(a, b)
    assert ok, f"{what}: got {a.flatten()[:6].tolist()}, expected {b.flatten()[:6].tolist()}"


def ref_sum(ws, n, dtype):
    return sum(inp(r, n, dtype).double() for r in range(ws)).to(dtype)


def checks(rank, ws, dev):
    """(name, fn) pairs; every rank runs every fn in the same order."""
    Op = dist.ReduceOp

    def all_reduce():
        for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8):
            for n in (1, 1000, 1 << 20):
                t = inp(rank, n, dtype, dev)
                dist.all_reduce(t)
                close(t, ref_sum(ws, n, dtype), f"SUM {dtype} n={n}")
        t = inp(rank, 4099, torch.float32, dev)
        dist.all_reduce(t, op=Op.MAX)
        close(t, torch.stack([inp(r, 4099, torch.float32) for r in range(ws)]).amax(0), "MAX")
        t = inp(rank, 4099, torch.float32, dev)
        dist.all_reduce(t, op=Op.AVG)
        close(t, ref_sum(ws, 4099, torch.float32) / ws, "AVG")
        t = inp(rank, 4099, torch.float32, dev)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
        close(t, ref_sum(ws, 4099, torch.float32) * 0.5, "PREMUL_SUM")
        base = inp(rank, 48, torch.float32, dev).view(6, 8)
        view = base.t()[:, ::2]
        dist.all_reduce(view)
        close(view, sum(inp(r, 48, torch.float32).view(6, 8).t()[:, ::2] for r in range(ws)), "non-contiguous")
        return "6 dtypes x 3 sizes, MAX/AVG/PREMUL_SUM, non-contiguous"

    def broadcast():
        t = inp(rank, 65537, torch.float32, dev)
        dist.broadcast(t, src=ws - 1)
        close(t, inp(ws - 1, 65537, torch.float32), "broadcast")
        return "65537 float32 from the last rank"

    def reduce():
        t = inp(rank, 1000, torch.float32, dev)
        dist.reduce(t, dst=0)
        if rank == 0:
            close(t, ref_sum(ws, 1000, torch.float32), "reduce")
        return "1000 float32 to rank 0"

    def all_gather():
        n = 4099
        outs = [torch.empty(n, device=dev) for _ in range(ws)]
        dist.all_gather(outs, inp(rank, n, torch.float32, dev))
        for r in range(ws):
            close(outs[r], inp(r, n, torch.float32), "all_gather")
        out = torch.empty(ws * n, device=dev)
        dist.all_gather_into_tensor(out, inp(rank, n, torch.float32, dev))
        close(out, torch.cat([inp(r, n, torch.float32) for r in range(ws)]), "all_gather_into_tensor")
        return "list and into_tensor"

    def reduce_scatter():
        n = 4099
        ref = ref_sum(ws, n * ws, torch.float32)[rank * n:(rank + 1) * n]
        out = torch.empty(n, device=dev)
        dist.reduce_scatter(out, list(inp(rank, n * ws, torch.float32, dev).chunk(ws)))
        close(out, ref, "reduce_scatter")
        out = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(out, inp(rank, n * ws, torch.float32, dev))
        close(out, ref, "reduce_scatter_tensor")
        return "list and tensor"

    def all_to_all():
        n = 6
        a = inp(rank, ws * n, torch.float32, dev)
        out = torch.empty_like(a)
        dist.all_to_all_single(out, a)
        close(out, torch.cat([inp(r, ws * n, torch.float32)[rank * n:(rank + 1) * n] for r in range(ws)]),
              "all_to_all_single")
        in_splits = [(rank + r) % 3 + 1 for r in range(ws)]
        out_splits = [(r + rank) % 3 + 1 for r in range(ws)]
        a = inp(rank, sum(in_splits), torch.float32, dev)
        out = torch.empty(sum(out_splits), device=dev)
        dist.all_to_all_single(out, a, out_splits, in_splits)
        expect = []
        for r in range(ws):
            splits = [(r + q) % 3 + 1 for q in range(ws)]
            off = sum(splits[:rank])
            expect.append(inp(r, sum(splits), torch.float32)[off:off + splits[rank]])
        close(out, torch.cat(expect), "all_to_all_single uneven")
        ins = [inp(rank * ws + r, r + 1, torch.int32, dev) for r in range(ws)]
        outs = [torch.empty(rank + 1, dtype=torch.int32, device=dev) for _ in range(ws)]
        dist.all_to_all(outs, ins)
        for r in range(ws):
            close(outs[r], inp(r * ws + rank, rank + 1, torch.int32), "all_to_all")
        return "single (equal, uneven) and list"

    def send_recv():
        t = inp(rank, 1 << 16, torch.float32, dev)
        r_ = torch.empty(1 << 16, device=dev)
        if rank % 2 == 0:
            dist.send(t, dst=(rank + 1) % ws)
            dist.recv(r_, src=(rank - 1) % ws)
        else:
            dist.recv(r_, src=(rank - 1) % ws)
            dist.send(t, dst=(rank + 1) % ws)
        close(r_, inp((rank - 1) % ws, 1 << 16, torch.float32), "send/recv")
        r2 = torch.empty(1 << 16, device=dev)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (rank + 1) % ws),
                                       dist.P2POp(dist.irecv, r2, (rank - 1) % ws)])
        for q in reqs:
            q.wait()
        close(r2, inp((rank - 1) % ws, 1 << 16, torch.float32), "batch_isend_irecv")
        return "ring send/recv and batch_isend_irecv"

    def barrier():
        dist.barrier()
        return "dist.barrier()"

    def stream_semantics():
        # An op queued behind a long kernel on the current stream: its Work.wait() must return
        # without waiting for the GPU (the current stream waits), and the result must be right
        # when read on the current stream; also from a user stream.
        t = inp(rank, 1 << 20, torch.float32, dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.cuda._sleep(int(1e9))  # ~0.5 s of GPU time at ~2 GHz
        w = dist.all_reduce(t, async_op=True)
        w.wait()
        host = time.perf_counter() - t0
        torch.cuda.synchronize()
        total = time.perf_counter() - t0
        close(t, ref_sum(ws, 1 << 20, torch.float32), "after wait()")
        assert host < total / 2, f"wait() blocked the host: {host:.3f} s of {total:.3f} s"
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            u = inp(rank, 4099, torch.float32, dev)
            w = dist.all_reduce(u, async_op=True)
            w.wait()
            got = u.cpu()
        close(got, ref_sum(ws, 4099, torch.float32), "on a user stream")
        fut = dist.all_reduce(inp(rank, 1000, torch.float32, dev), async_op=True).get_future()
        v = fut.then(lambda f: f.value()[0] * 2).wait()
        close(v, ref_sum(ws, 1000, torch.float32) * 2, "future.then")
        return f"wait() returned after {host * 1e3:.0f} ms of {total * 1e3:.0f} ms GPU time"

    def cuda_graph():
        x = torch.zeros(4099, device=dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up outside capture, as PyTorch recommends
            dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            dist.all_reduce(x)
        for i in range(3):
            x.copy_(inp(rank + i, 4099, torch.float32, dev))
            g.replay()
            close(x, sum(inp(r + i, 4099, torch.float32).double() for r in range(ws)).float(), f"replay {i}")
        return "all_reduce captured once, replayed 3 times"

    def library():
        # Route 1: the libnccl.so.2 that serves ProcessGroupNCCL must be ACCL's (LD_PRELOAD).
        import ctypes
        lib = ctypes.CDLL("libnccl.so.2")
        assert hasattr(lib, "ncclAcclVersionString"), "NVIDIA's libnccl.so.2 serves this process, not ACCL's"
        lib.ncclAcclVersionString.restype = ctypes.c_char_p
        return lib.ncclAcclVersionString().decode()

    return [("library", library), ("all_reduce", all_reduce), ("broadcast", broadcast), ("reduce", reduce), ("all_gather", all_gather),
            ("reduce_scatter", reduce_scatter), ("all_to_all", all_to_all), ("send_recv", send_recv),
            ("barrier", barrier), ("stream_semantics", stream_semantics), ("cuda_graph", cuda_graph)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["accl", "nccl"], required=True)
    p.add_argument("--spread", action="store_true", help="rank i on cuda:i %% device count (default: all on cuda:0)")
    p.add_argument("--only", default="", help="comma-separated check names")
    a = p.parse_args()
    if a.backend == "accl":
        import torch_accl  # noqa: F401  registers "accl"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local % torch.cuda.device_count() if a.spread else 0)
    torch.cuda.set_device(dev)
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=120))
    rank, ws = dist.get_rank(), dist.get_world_size()
    route = "route 2 (accl)" if a.backend == "accl" else "route 1 (nccl + LD_PRELOAD)"
    failed = 0
    for name, fn in checks(rank, ws, dev):
        if a.only and name not in a.only.split(","):
            continue
        try:
            detail = fn()
            ok = torch.tensor([1], device=dev)
        except Exception as e:  # noqa: BLE001
            detail = f"rank {rank}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            traceback.print_exc()
            ok = torch.tensor([0], device=dev)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)
        passed = bool(ok.item())
        failed += not passed
        if rank == 0 or not passed:
            print(f"ROW torch {route} {name} {'PASS' if passed else 'FAIL'} {detail}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
