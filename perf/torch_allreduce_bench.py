#!/usr/bin/env python3
"""dist.all_reduce throughput through ACCL under torch.distributed, against a reference, in one run.

CPU tensors (default): backend "accl" vs gloo.
  .venv/bin/python perf/torch_allreduce_bench.py [--ranks 2 4] [--min 1K] [--max 64M] [--dtype float32]
For each rank count it spawns the ranks once; each rank holds an "accl" default group and a gloo
group, and times in-place SUM all_reduce of 1 KiB..64 MiB on both (same tensors, alternating).

CUDA tensors (--device cuda; every rank on cuda:0):
  python3 perf/torch_allreduce_bench.py --device cuda --ranks 1 2 [--rounds 2]
Routes, each its own group of processes, run in turn and repeated --rounds times (best kept):
  accl         route 2: backend "accl" (import torch_accl)
  nccl+ACCL    route 1: backend "nccl" with ACCL's libnccl.so.2 in LD_PRELOAD
  nccl         NVIDIA's NCCL as bundled with torch - world size 1 only (it refuses two ranks on one GPU)

Prints the mean time per op (slowest rank) and the bus bandwidth (2(n-1)/n x bytes / time), as nccl-tests do.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def fmt_size(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n // div} {unit}"
    return f"{n} B"


def time_op(fn, gloo, budget=0.25):
    """Seconds per op. All ranks must run the same number of ops: the count is agreed over gloo."""
    fn()  # warm-up
    t0 = time.perf_counter()
    fn()
    guess = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
    dist.all_reduce(guess, op=dist.ReduceOp.MAX, group=gloo)
    reps = int(min(100, max(3, budget / max(guess.item(), 1e-6))))
    dist.barrier(group=gloo)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def worker(rank, ws, port, sizes, dtype, q):
    import torch_accl  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("accl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    rows = []
    for nbytes in sizes:
        t = torch.ones(max(1, nbytes // dtype.itemsize), dtype=dtype)
        res = {}
        for name, grp in (("accl", None), ("gloo", gloo)):
            def op():
                dist.all_reduce(t, group=grp)
            dist.barrier(group=gloo)
            # Each rank measures; the slowest rank's median is reported (ops are synchronous).
            mine = torch.tensor([time_op(op, gloo)], dtype=torch.float64)
            dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=gloo)
            res[name] = mine.item()
        rows.append((nbytes, res["accl"], res["gloo"]))
    if rank == 0:
        q.put(rows)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def cuda_worker(rank, ws, port, sizes, dtype, backend, q):
    """One route on CUDA tensors, every rank on cuda:0. Times include queueing and the GPU work
    (a synchronize after each batch); the op count is agreed over a gloo group."""
    if backend == "accl":
        import torch_accl  # noqa: F401
    torch.set_num_threads(1)
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                            timeout=datetime.timedelta(seconds=300))
    gloo = dist.new_group(backend="gloo")
    rows = []
    for nbytes in sizes:
        t = torch.ones(max(1, nbytes // dtype.itemsize), dtype=dtype, device=dev)

        def op():
            dist.all_reduce(t)
            torch.cuda.synchronize()
        dist.barrier(group=gloo)
        mine = torch.tensor([time_op(op, gloo)], dtype=torch.float64)
        dist.all_reduce(mine, op=dist.ReduceOp.MAX, group=gloo)
        rows.append((nbytes, mine.item()))
    if rank == 0:
        q.put(rows)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_group(ctx, target, ws, args, env):
    """Runs `target` in ws processes with os.environ updated by env (None: variable removed)."""
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        q = ctx.Queue()
        port = free_port()
        procs = [ctx.Process(target=target, args=(r, ws, port, *args, q)) for r in range(ws)]
        for pr in procs:
            pr.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    rows = q.get()
    for pr in procs:
        pr.join()
    return rows


def main_cuda(a, sizes, dtype, ctx):
    import torch_accl
    lib = os.path.realpath(torch_accl.LIBNCCL)
    routes = [("accl", "accl", {"LD_PRELOAD": None}), ("nccl+ACCL", "nccl", {"LD_PRELOAD": lib}),
              ("nccl", "nccl", {"LD_PRELOAD": None})]
    print(f"dist.all_reduce(SUM, {a.dtype}) on cuda:0, mean time per op incl. synchronize (slowest rank, "
          f"best of {a.rounds} rounds); GB/s = busbw = 2(n-1)/n x bytes / time (1 rank: bytes / time); ACCL: {torch_accl.version()}")
    names = [r[0] for r in routes]
    print(f"{'ranks':>5} {'size':>9} " + " ".join(f"{n + ' us':>13} {n + ' GB/s':>15}" for n in names))
    for ws in a.ranks:
        best = {}
        for _ in range(a.rounds):
            for name, backend, env in routes:
                if backend == "nccl" and env["LD_PRELOAD"] is None and ws > 1:
                    continue  # NVIDIA's NCCL refuses two ranks on one GPU
                rows = run_group(ctx, cuda_worker, ws, (sizes, dtype, backend), env)
                for nbytes, t in rows:
                    best[(name, nbytes)] = min(t, best.get((name, nbytes), float("inf")))
        for nbytes in sizes:
            f = (2 * (ws - 1) / ws if ws > 1 else 1) * nbytes / 1e9  # world size 1: bytes / time
            cells = []
            for n in names:
                t = best.get((n, nbytes))
                cells.append(f"{t * 1e6:>13.1f} {f / t:>15.2f}" if t else f"{'-':>13} {'-':>15}")
            print(f"{ws:>5} {fmt_size(nbytes):>9} " + " ".join(cells), flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--min", default="1K")
    p.add_argument("--max", default="64M")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--rounds", type=int, default=2, help="--device cuda: repetitions of every route")
    a = p.parse_args()
    dtype = getattr(torch, a.dtype)
    sizes, n = [], parse_size(a.min)
    while n <= parse_size(a.max):
        sizes.append(n)
        n *= 4
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")
    if a.device == "cuda":
        return main_cuda(a, sizes, dtype, ctx)
    print(f"dist.all_reduce(SUM, {a.dtype}) mean time per op (slowest rank); busbw = 2(n-1)/n x bytes / time")
    print(f"{'ranks':>5} {'size':>9} {'accl us':>10} {'gloo us':>10} {'accl GB/s':>10} {'gloo GB/s':>10} {'accl/gloo':>9}")
    for ws in a.ranks:
        rows = run_group(ctx, worker, ws, (sizes, dtype), {})
        for nbytes, ta, tg in rows:
            f = 2 * (ws - 1) / ws * nbytes / 1e9
            print(f"{ws:>5} {fmt_size(nbytes):>9} {ta * 1e6:>10.1f} {tg * 1e6:>10.1f} {f / ta:>10.2f} {f / tg:>10.2f} "
                  f"{tg / ta:>8.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
