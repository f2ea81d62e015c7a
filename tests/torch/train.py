"""A small model trained for N steps with DDP or FSDP2 (fully_shard) on CPU, under torchrun (env://).

  python train.py --backend accl|gloo --mode ddp|fsdp --out params.pt [--steps 20]
  python train.py --backend accl|nccl --device cuda ...   # DDP with every rank on cuda:0
  [--kill-rank R --kill-step S --timeout SEC]   # rank R dies at step S; others must raise

Rank 0 writes the final (full) parameters to --out. With --kill-rank, each surviving rank prints
"RAISED <seconds> <message>" and exits 3 when the collective fails, or exits 4 if it did not.
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import torch_accl  # noqa: F401  registers backend "accl"


def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="accl")
    p.add_argument("--mode", default="ddp", choices=["ddp", "fsdp", "fsdp1"])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--out", default="")
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=5)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--hang", action="store_true", help="the --kill-rank stalls (alive) instead of dying")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="cuda: every rank on cuda:0 (DDP only; ACCL serves several ranks on one GPU)")
    a = p.parse_args()
    if a.device == "cuda":
        torch.cuda.set_device(0)
        torch.backends.cuda.matmul.allow_tf32 = False  # compared against a float32 CPU run
        torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")

    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=a.timeout))
    rank, ws = dist.get_rank(), dist.get_world_size()
    net = model().to(dev)
    if a.mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(net, device_ids=[dev.index] if dev.type == "cuda" else None)
    elif a.mode == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        from torch.distributed.fsdp import ShardingStrategy
        net = FSDP(net, device_id=torch.device("cpu"), use_orig_params=True,
                   sharding_strategy=ShardingStrategy.FULL_SHARD)
    else:  # FSDP2; torch 2.5.1 raises "FSDP requires CUDA for streams" on CPU
        from torch.distributed._composable.fsdp import fully_shard
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (ws,))
        for layer in net:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(net, mesh=mesh)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(1000 + rank)
    t0 = None
    try:
        for step in range(a.steps):
            if step == a.kill_step and rank == a.kill_rank:
                if a.hang:
                    time.sleep(a.timeout * 3)
                os._exit(1)  # dies mid-training, without any cleanup
            if step == a.kill_step:
                t0 = time.time()
            x = torch.randn(16, 32, generator=gen).to(dev)
            y = torch.randn(16, 4, generator=gen).to(dev)
            loss = nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    except Exception as e:  # noqa: BLE001
        if a.kill_rank >= 0:
            elapsed = time.time() - (t0 or time.time())
            print(f"RAISED {elapsed:.1f} {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            os._exit(3)
        raise
    if a.kill_rank >= 0:
        print("NOT RAISED", flush=True)
        os._exit(4)

    params = {}
    if a.mode == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
        ctx = FSDP.summon_full_params(net)
    else:
        import contextlib
        ctx = contextlib.nullcontext()
    with ctx:
        named = [(n, q.detach().clone()) for n, q in net.named_parameters()]
    for name, prm in named:
        t = prm.detach()
        if hasattr(t, "full_tensor"):
            t = t.full_tensor()
        params[name.replace("module.", "").replace("_fsdp_wrapped_", "").replace("_flat_param", "")] = t.cpu().clone()
    if rank == 0 and a.out:
        torch.save(params, a.out)
        print(f"loss {loss.item():.6f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
