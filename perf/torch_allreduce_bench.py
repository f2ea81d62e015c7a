#!/usr/bin/env python3
"""dist.all_reduce throughput through backend "accl" vs gloo, in the same run.

  .venv/bin/python perf/torch_allreduce_bench.py [--ranks 2 4] [--min 1K] [--max 64M] [--dtype float32]

For each rank count it spawns the ranks once; each rank holds an "accl" default group and a gloo
group, and times in-place SUM all_reduce of 1 KiB..64 MiB on both (same tensors, alternating).
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--min", default="1K")
    p.add_argument("--max", default="64M")
    p.add_argument("--dtype", default="float32")
    a = p.parse_args()
    dtype = getattr(torch, a.dtype)
    sizes, n = [], parse_size(a.min)
    while n <= parse_size(a.max):
        sizes.append(n)
        n *= 4
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import socket
    ctx = mp.get_context("spawn")
    print(f"dist.all_reduce(SUM, {a.dtype}) mean time per op (slowest rank); busbw = 2(n-1)/n x bytes / time")
    print(f"{'ranks':>5} {'size':>9} {'accl us':>10} {'gloo us':>10} {'accl GB/s':>10} {'gloo GB/s':>10} {'accl/gloo':>9}")
    for ws in a.ranks:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        q = ctx.Queue()
        procs = [ctx.Process(target=worker, args=(r, ws, port, sizes, dtype, q)) for r in range(ws)]
        for pr in procs:
            pr.start()
        rows = q.get()
        for pr in procs:
            pr.join()
        for nbytes, ta, tg in rows:
            f = 2 * (ws - 1) / ws * nbytes / 1e9
            print(f"{ws:>5} {fmt_size(nbytes):>9} {ta * 1e6:>10.1f} {tg * 1e6:>10.1f} {f / ta:>10.2f} {f / tg:>10.2f} "
                  f"{tg / ta:>8.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
