"""Per-rank body of test_any_source: receive from any source (dist.recv / irecv without src) on
"accl", checked against gloo doing the same on the same ranks: which rank's data arrived, how
often, and in which order per sender. Run by torch.multiprocessing.spawn."""
import datetime
import os
import traceback

import torch
import torch.distributed as dist

import torch_accl  # noqa: F401  registers "accl"

MSGS = 3  # messages each sender sends to rank 0


def worker(rank, ws, port, result_dir):
    try:
        dist.init_process_group("accl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                                timeout=datetime.timedelta(seconds=60))
        gloo = dist.new_group(backend="gloo")
        run_all(rank, ws, gloo)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        with open(os.path.join(result_dir, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise


def payload(src, i, n=5):
    """Message i of sender src: every element names both (1000 * src + i)."""
    return torch.full((n,), float(1000 * src + i))


def gather_to_zero(rank, ws, group):
    """Ranks 1.. send MSGS messages each to rank 0, which receives them all from any source
    (alternating recv and irecv). Returns rank 0's list of (reported sender, message) in arrival order."""
    got = []
    if rank == 0:
        for k in range((ws - 1) * MSGS):
            t = torch.full((5,), -1.0)
            if k % 2 == 0:
                sender = dist.recv(t, group=group)
            else:
                w = dist.irecv(t, group=group)
                w.wait()
                sender = w._source_rank()
            assert torch.equal(t, t[:1].expand(5)), f"message mixes senders: {t.tolist()}"
            val = int(t[0].item())
            got.append((sender, val // 1000, val % 1000))
    else:
        for i in range(MSGS):
            dist.send(payload(rank, i), 0, group=group)
    return got


def per_sender(got):
    """{sender: [message numbers in arrival order]}"""
    out = {}
    for sender, src, i in got:
        out.setdefault(sender, []).append(i)
    return out


def run_all(rank, ws, gloo):
    # 1. many senders, one receiver from any source: on both backends every message arrives once,
    # labelled with the rank whose data it holds, each sender's messages in its sending order.
    acc = gather_to_zero(rank, ws, None)
    ref = gather_to_zero(rank, ws, gloo)
    if rank == 0:
        for name, got in (("accl", acc), ("gloo", ref)):
            for sender, src, i in got:
                assert sender == src, f"{name}: recv reported rank {sender} but the data is rank {src}'s message {i}"
        assert per_sender(acc) == per_sender(ref) == {p: list(range(MSGS)) for p in range(1, ws)}, \
            f"accl {per_sender(acc)} gloo {per_sender(ref)}"

    # 2. every rank posts irecv from any source before its isend to the next rank (a ring): it
    # completes, and each rank hears from its left neighbour, as on gloo.
    for group in (None, gloo):
        t = torch.full((4,), -1.0)
        w = dist.irecv(t, group=group)
        s = dist.isend(payload(rank, 7, 4), (rank + 1) % ws, group=group)
        w.wait()
        s.wait()
        left = (rank - 1) % ws
        assert w._source_rank() == left and torch.equal(t, payload(left, 7, 4)), \
            f"{'gloo' if group else 'accl'} ring: rank {w._source_rank()} {t.tolist()}"

    # 3. a receive naming rank 1, posted after one from any source, keeps rank 1's only message:
    # the any-source receive gets rank 2's (accl's matching; gloo might hand rank 1's message to
    # the any-source receive and leave the named one waiting, so no gloo reference here).
    if ws >= 3:
        if rank == 0:
            a, b = torch.full((3,), -1.0), torch.full((3,), -1.0)
            wa = dist.irecv(a)
            wb = dist.irecv(b, src=1)
            wa.wait()
            wb.wait()
            assert wa._source_rank() == 2 and torch.equal(a, payload(2, 0, 3)), (wa._source_rank(), a.tolist())
            assert wb._source_rank() == 1 and torch.equal(b, payload(1, 0, 3)), (wb._source_rank(), b.tolist())
        elif rank in (1, 2):
            dist.send(payload(rank, 0, 3), 0)

    # 4. nobody sends: the receive fails after the group's timeout with "Timed out", not a hang,
    # and fails alone: rank 0's isend held back with it (one batch) still reaches rank 1.
    short = dist.new_group(backend="accl", timeout=datetime.timedelta(seconds=3))
    if rank == 0:
        s = dist.isend(payload(0, 9, 2), 1, group=short)
        w = dist.irecv(torch.empty(2), group=short)
        try:
            w.wait()
            raise AssertionError("recv from any source with no sender should time out")
        except RuntimeError as e:
            assert "Timed out" in str(e) and "any source" in str(e), str(e)
        s.wait()
    elif rank == 1:
        x = torch.full((2,), -1.0)
        dist.recv(x, src=0, group=short)
        assert torch.equal(x, payload(0, 9, 2)), f"send batched with a failed any-source recv: {x.tolist()}"
    dist.barrier()
