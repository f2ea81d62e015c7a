"""Float32 all-reduce (sum) / all-gather through PyTorch's Gloo backend, for perf/compare.

  <torch venv>/bin/python perf/gloo_coll_bench.py --np 4 --collectives all_reduce all_gather \
      --sizes 8 65536 1048576 [--budget 0.3]

Spawns --np processes once; for each collective and size (bytes; all-gather: the total output,
as nccl-tests counts it) each rank times a loop sized to about --budget seconds (the count is
agreed on by all ranks), and the time per op is each rank's mean, averaged over ranks
(nccl-tests' default). Prints one JSON object per collective on stdout.
"""
import argparse
import datetime
import json
import os
import sys
import time

from free_port import free_port


def worker(rank, n, port, collectives, sizes, budget, queue):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=600))
    out = {}
    for coll in collectives:
        rows = []
        for nbytes in sizes:
            count = max(1, nbytes // 4) if coll == "all_reduce" else max(1, nbytes // 4 // n)
            x = torch.full((count,), float(rank + 1))
            if coll == "all_reduce":
                def op():
                    dist.all_reduce(x)
            else:
                y = torch.empty(count * n)
                parts = list(y.chunk(n))

                def op():
                    dist.all_gather(parts, x)
            op()  # warm-up, and a guess of the time per op that every rank agrees on
            t0 = time.perf_counter()
            op()
            guess = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
            dist.all_reduce(guess, op=dist.ReduceOp.MAX)
            iters = int(min(2000, max(3, budget / max(guess.item(), 1e-7))))
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                op()
            mine = torch.tensor([(time.perf_counter() - t0) / iters * 1e6], dtype=torch.float64)
            dist.all_reduce(mine)
            rows.append({"bytes": nbytes, "time_us": mine.item() / n, "iters": iters})
        out[coll] = rows
    if rank == 0:
        queue.put(out)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--collectives", nargs="+", default=["all_reduce"], choices=["all_reduce", "all_gather"])
    ap.add_argument("--sizes", type=int, nargs="+", required=True)
    ap.add_argument("--budget", type=float, default=0.3, help="seconds per (collective, size) loop")
    a = ap.parse_args()
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=worker, args=(r, a.np, port, a.collectives, a.sizes, a.budget, queue))
             for r in range(a.np)]
    for p in procs:
        p.start()
    import queue as queue_mod

    result = None
    while result is None:  # a rank that dies before answering must not hang us
        try:
            result = queue.get(timeout=1)
        except queue_mod.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                sys.exit(f"gloo_coll_bench: a rank failed (exit codes {[p.exitcode for p in procs]})")
    for p in procs:
        p.join()
    if any(p.exitcode != 0 for p in procs):
        sys.exit(f"gloo_coll_bench: a rank failed (exit codes {[p.exitcode for p in procs]})")
    for coll, rows in result.items():
        print(json.dumps({"backend": "gloo", "collective": coll, "np": a.np, "results": rows}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
