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


def tag_swap(rank, ws):
    # Issue 44: rank 0 sends tag 1 then tag 2, rank 1 posts tag 2 first. Gloo matches by (peer,
    # tag); so must accl, with isend/irecv and with blocking send/recv. The sizes differ per tag.
    for blocking in (False, True):
        salt = 10 + blocking
        if rank == 0:
            if blocking:
                dist.send(payload(0, 5, salt), 1, tag=1)
                dist.send(payload(0, 7, salt + 1), 1, tag=2)
            else:
                reqs = [dist.isend(payload(0, 5, salt), 1, tag=1), dist.isend(payload(0, 7, salt + 1), 1, tag=2)]
                for r in reqs:
                    r.wait()
        elif rank == 1:
            t1, t2 = torch.zeros(5, dtype=torch.int64), torch.zeros(7, dtype=torch.int64)
            if blocking:
                dist.recv(t2, 0, tag=2)
                dist.recv(t1, 0, tag=1)
            else:
                reqs = [dist.irecv(t2, 0, tag=2), dist.irecv(t1, 0, tag=1)]
                for r in reversed(reqs):
                    r.wait()
            expect(t1, payload(0, 5, salt), f"tag 1 received after tag 2 (blocking={blocking})")
            expect(t2, payload(0, 7, salt + 1), f"tag 2 received first (blocking={blocking})")
    collectives_exact(rank, ws, 12)


def tags_interleaved(rank, ws):
    # Every rank sends to every other one tags 3, 1, 2, 1, 3 (sizes by tag and order), with an
    # untagged message in the middle; each receiver posts its receives per peer in another order
    # (tag 1s first, then 2, then 3s, the untagged one last), the peers' receives interleaved.
    # The k-th receive with tag T from a peer gets that peer's k-th send with tag T.
    plan = [(3, 0), (1, 0), (2, 0), (1, 1), (3, 1)]  # (tag, k-th of that tag)

    def msg(src, tag, k):
        return payload(src, 3 + tag * 2 + k, 20 + tag * 10 + k)

    peers = [p for p in range(ws) if p != rank]
    sends = []
    for p in peers:
        for i, (tag, k) in enumerate(plan):
            sends.append(dist.isend(msg(rank, tag, k), p, tag=tag))
            if i == 2:
                sends.append(dist.isend(payload(rank, 4, 30), p))
    want_order = sorted(plan) + [(0, 0)]
    got, reqs = {}, []
    for tag, k in want_order:
        for p in reversed(peers):
            n = 4 if tag == 0 else msg(p, tag, k).numel()
            got[(p, tag, k)] = torch.full((n,), -1, dtype=torch.int64)
            reqs.append(dist.irecv(got[(p, tag, k)], p, tag=tag))
    for r in reversed(reqs):
        r.wait()
    for r in sends:
        r.wait()
    for (p, tag, k), t in got.items():
        want = payload(p, 4, 30) if tag == 0 else msg(p, tag, k)
        expect(t, want, f"from rank {p}, tag {tag} #{k}")
    collectives_exact(rank, ws, 13)


def tags_batch(rank, ws):
    # batch_isend_irecv: receives posted first, with tags in the reverse of the senders' order.
    peers = [p for p in range(ws) if p != rank]
    got = {(p, tag): torch.zeros(2 + tag, dtype=torch.int64) for p in peers for tag in (5, 6, 7)}
    ops = [dist.P2POp(dist.irecv, got[(p, tag)], p, tag=tag) for p in peers for tag in (7, 6, 5)]
    ops += [dist.P2POp(dist.isend, payload(rank, 2 + tag, tag), p, tag=tag) for p in peers for tag in (5, 6, 7)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    for (p, tag), t in got.items():
        expect(t, payload(p, 2 + tag, tag), f"batch from rank {p}, tag {tag}")
    collectives_exact(rank, ws, 14)


def tag_size_mismatch(rank, ws):
    # A send and its receive (same peer and tag) of different sizes: the receive fails naming both
    # sizes, the other tags still match, and the group stays usable.
    if rank == 0:
        dist.send(payload(0, 5, 40), 1, tag=9)
        dist.send(payload(0, 3, 41), 1, tag=8)
    elif rank == 1:
        bad = torch.zeros(6, dtype=torch.int64)
        try:
            dist.recv(bad, 0, tag=9)
        except RuntimeError as e:
            assert "40 bytes" in str(e) and "48 bytes" in str(e) and "tag 9" in str(e), f"unclear error: {e}"
        else:
            raise AssertionError("a receive of 48 bytes matched a send of 40 bytes without an error")
        ok = torch.zeros(3, dtype=torch.int64)
        dist.recv(ok, 0, tag=8)
        expect(ok, payload(0, 3, 41), "tag 8 after the mismatched tag 9")
    collectives_exact(rank, ws, 15)
    tag_swap(rank, ws)


def tag_never_matched(rank, ws):
    # A receive whose tag the peer never sends fails alone with "Timed out" after the group's
    # timeout (a group of its own with a short one), naming what it waited for; then that group
    # still matches tags and runs collectives.
    g = dist.new_group(list(range(ws)), timeout=datetime.timedelta(seconds=3))
    if rank == 1:
        try:
            dist.recv(torch.zeros(4, dtype=torch.int64), 0, tag=77, group=g)
        except RuntimeError as e:
            assert "Timed out" in str(e) and "tag 77 from rank 0" in str(e), f"unclear error: {e}"
        else:
            raise AssertionError("a receive with a tag nobody sends completed")
    dist.barrier()
    if rank == 0:
        dist.send(payload(0, 4, 50), 1, tag=78, group=g)
    elif rank == 1:
        t = torch.zeros(4, dtype=torch.int64)
        dist.recv(t, 0, tag=78, group=g)
        expect(t, payload(0, 4, 50), "tag 78 after a receive that timed out")
    x = payload(rank, 6, 51)
    dist.all_reduce(x, group=g)
    expect(x, sum(payload(r, 6, 51) for r in range(ws)), "all_reduce on the group after the timeout")
    collectives_exact(rank, ws, 16)


def worker(rank, ws, port, result_dir, case):
    try:
        dist.init_process_group("accl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws,
                                timeout=datetime.timedelta(seconds=60))
        {"failed_batch": failed_batch, "p2p_across_collective": p2p_across_collective, "tag_swap": tag_swap,
         "tags_interleaved": tags_interleaved, "tags_batch": tags_batch,
         "tag_size_mismatch": tag_size_mismatch, "tag_never_matched": tag_never_matched}[case](rank, ws)
        dist.barrier()
        dist.destroy_process_group()
    except Exception:
        with open(os.path.join(result_dir, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise
