"""Per-rank body of test_p2p: point-to-point ops next to collectives, and a batch_isend_irecv that
raises, on "accl" (CPU tensors), with exact payloads. Run by torch.multiprocessing.spawn."""
import datetime
import os
import traceback

import torch
import torch.distributed as dist

import torch_accl  # noqa: F401 - registers "accl"


def payload(src, n, salt):
    return torch.arange(n, dtype=torch.int64) * (src + 1) + 1000 * salt


def expect(got, want, what):
    assert torch.equal(got, want), f"{what}: got {got.flatten()[:8].tolist()}, want {want.flatten()[:8].tolist()}"


def collectives_exact(rank, ws, salt):
    """all_reduce, all_gather_into_tensor and reduce_scatter_tensor against sums computed here."""
    x = payload(rank, 6, salt)
    dist.all_reduce(x)
    expect(x, sum(payload(r, 6, salt) for r in range(ws)), f"all_reduce (salt {salt})")
    out = torch.empty(ws * 6, dtype=torch.int64)
    dist.all_gather_into_tensor(out, payload(rank, 6, salt))
    expect(out, torch.cat([payload(r, 6, salt) for r in range(ws)]), f"all_gather_into_tensor (salt {salt})")
    full = [payload(r, 4 * ws, salt) for r in range(ws)]
    mine = torch.empty(4, dtype=torch.int64)
    dist.reduce_scatter_tensor(mine, full[rank])
    expect(mine, sum(full)[4 * rank:4 * rank + 4], f"reduce_scatter_tensor (salt {salt})")


def ring_batch(rank, ws, salt):
    got = torch.zeros(5, dtype=torch.int64)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, payload(rank, 5, salt), (rank + 1) % ws),
                                   dist.P2POp(dist.irecv, got, (rank - 1) % ws)])
    for r in reqs:
        r.wait()
    expect(got, payload((rank - 1) % ws, 5, salt), f"batch_isend_irecv ring (salt {salt})")


def failed_batch(rank, ws):
    # A good isend held in the batch, then a receive from a rank outside the group: torch raises
    # inside its coalescing block. The held isend must be dropped (on every rank alike), and the
    # group must leave coalescing mode: otherwise later collectives return their inputs.
    ops = [dist.P2POp(dist.isend, payload(rank, 5, 7), (rank + 1) % ws),
           dist.P2POp(dist.irecv, torch.zeros(5, dtype=torch.int64), ws + 5)]
    try:
        dist.batch_isend_irecv(ops)
    except (ValueError, RuntimeError) as e:
        assert str(e), "the failed batch raised without a message"
    else:
        raise AssertionError("batch_isend_irecv with a peer outside the group did not raise")
    collectives_exact(rank, ws, 1)
    ring_batch(rank, ws, 2)  # the dropped isend of the failed batch is not received here
    collectives_exact(rank, ws, 3)


def p2p_across_collective(rank, ws):
    # gloo completes both: the sender's op is pending while both ranks run a collective (and a
    # barrier), and the receiver posts its side only afterwards.
    for sender_first_posts in ("isend", "irecv"):
        x = payload(rank, 6, 4)
        if rank == 0:
            if sender_first_posts == "isend":
                req = dist.isend(payload(0, 9, 5), 1)
            else:
                buf = torch.zeros(9, dtype=torch.int64)
                req = dist.irecv(buf, 1)
            dist.all_reduce(x)
            dist.barrier()
            req.wait()
            if sender_first_posts == "irecv":
                expect(buf, payload(1, 9, 5), "irecv posted before all_reduce")
        else:
            dist.all_reduce(x)
            dist.barrier()
            if rank == 1:
                if sender_first_posts == "isend":
                    buf = torch.zeros(9, dtype=torch.int64)
                    dist.recv(buf, 0)
                    expect(buf, payload(0, 9, 5), "recv posted after all_reduce")
                else:
                    dist.send(payload(1, 9, 5), 0)
        expect(x, sum(payload(r, 6, 4) for r in range(ws)), f"all_reduce with a pending {sender_first_posts}")
    collectives_exact(rank, ws, 6)


def worker(rank, ws, port, result_dir, case):
    try:
        dist.init_process_group("accl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                                timeout=datetime.timedelta(seconds=60))
        {"failed_batch": failed_batch, "p2p_across_collective": p2p_across_collective}[case](rank, ws)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        with open(os.path.join(result_dir, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise
