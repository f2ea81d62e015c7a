"""Per-rank body of test_ops: every op through "accl" against gloo (or a local reference where
gloo lacks the op or dtype) on the same inputs. Run by torch.multiprocessing.spawn."""
import datetime
import math
import os
import time
import traceback

import torch
import torch.distributed as dist

import torch_accl

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64,
          torch.int8, torch.uint8]
SIZES = [1, 7, 1000, 65537]


def inp(rank, n, dtype, small=False):
    x = (torch.arange(n, dtype=torch.int64) * (rank + 1) + 3 * rank) % (3 if small else 11) + 1
    if dtype.is_floating_point:
        x = x.to(torch.float64) / 2
    return x.to(dtype)


def close(a, b, what):
    if a.dtype.is_floating_point:
        tol = 1e-2 if a.dtype in (torch.float16, torch.bfloat16) else 1e-6
        ok = torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)
    else:
        ok = torch.equal(a, b)
    assert ok, f"{what}: accl {a.flatten()[:8].tolist()} != reference {b.flatten()[:8].tolist()}"


def with_gloo(fn, fallback):
    """fn() on the gloo group; fallback() when gloo cannot do it (op or dtype unsupported)."""
    try:
        return fn()
    except (RuntimeError, ValueError, NotImplementedError):
        return fallback()


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


def run_all(rank, ws, gloo):
    # The extension calls OUR libnccl, resolved from a handle opened by absolute path.
    assert torch_accl.version().startswith("ACCL"), torch_accl.version()
    assert os.path.realpath(torch_accl.library_path()) == os.path.realpath(torch_accl.LIBNCCL)
    assert dist.get_backend() == "accl"

    Op = dist.ReduceOp
    for dtype in DTYPES:
        for n in SIZES:
            for op in (Op.SUM, Op.PRODUCT, Op.MIN, Op.MAX):
                small = op == Op.PRODUCT
                a = inp(rank, n, dtype, small)
                dist.all_reduce(a, op=op)
                g = inp(rank, n, dtype, small)
                ref = with_gloo(lambda: (dist.all_reduce(g, op=op, group=gloo), g)[1],
                                lambda: local_reduce(ws, n, dtype, op, small))
                close(a, ref, f"all_reduce {op} {dtype} n={n}")
            if dtype.is_floating_point:
                a = inp(rank, n, dtype)
                dist.all_reduce(a, op=Op.AVG)
                close(a, local_reduce(ws, n, dtype, Op.SUM) / ws, f"all_reduce AVG {dtype} n={n}")
                a = inp(rank, n, dtype)
                dist.all_reduce(a, op=dist._make_nccl_premul_sum(0.5))
                close(a, local_reduce(ws, n, dtype, Op.SUM) * 0.5, f"all_reduce PREMUL_SUM {dtype} n={n}")

    for dtype in (torch.float32, torch.int64, torch.bfloat16, torch.uint8):
        for n in (5, 4099):
            # broadcast
            a = inp(rank, n, dtype)
            dist.broadcast(a, src=ws - 1)
            close(a, inp(ws - 1, n, dtype), f"broadcast {dtype}")
            # reduce
            a = inp(rank, n, dtype)
            dist.reduce(a, dst=1 % ws)
            if rank == 1 % ws:
                close(a, local_reduce(ws, n, dtype, Op.SUM), f"reduce {dtype}")
            # all_gather (list) vs gloo
            outs = [torch.empty(n, dtype=dtype) for _ in range(ws)]
            dist.all_gather(outs, inp(rank, n, dtype))
            for r in range(ws):
                close(outs[r], inp(r, n, dtype), f"all_gather {dtype}")
            # all_gather_into_tensor
            out = torch.empty(ws * n, dtype=dtype)
            dist.all_gather_into_tensor(out, inp(rank, n, dtype))
            close(out, torch.cat([inp(r, n, dtype) for r in range(ws)]), f"all_gather_into_tensor {dtype}")
            # reduce_scatter (list) and reduce_scatter_tensor
            full = [inp(rank, n * ws, dtype)[r * n:(r + 1) * n].clone() for r in range(ws)]
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter(out, full)
            ref = local_reduce(ws, n * ws, dtype, Op.SUM)[rank * n:(rank + 1) * n]
            close(out, ref, f"reduce_scatter {dtype}")
            out = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(out, inp(rank, n * ws, dtype))
            close(out, ref, f"reduce_scatter_tensor {dtype}")
            # gather / scatter
            gl = [torch.empty(n, dtype=dtype) for _ in range(ws)] if rank == 0 else None
            dist.gather(inp(rank, n, dtype), gl, dst=0)
            if rank == 0:
                for r in range(ws):
                    close(gl[r], inp(r, n, dtype), f"gather {dtype}")
            out = torch.empty(n, dtype=dtype)
            dist.scatter(out, [inp(r, n, dtype) for r in range(ws)] if rank == ws - 1 else None, src=ws - 1)
            close(out, inp(rank, n, dtype), f"scatter {dtype}")

    # all_gather vs gloo directly (same inputs, both groups)
    x = torch.randn(33, generator=torch.Generator().manual_seed(rank))
    oa = [torch.empty(33) for _ in range(ws)]
    og = [torch.empty(33) for _ in range(ws)]
    dist.all_gather(oa, x)
    dist.all_gather(og, x, group=gloo)
    for r in range(ws):
        close(oa[r], og[r], "all_gather vs gloo")
    ba, bg = x.clone(), x.clone()
    dist.broadcast(ba, src=0)
    dist.broadcast(bg, src=0, group=gloo)
    close(ba, bg, "broadcast vs gloo")

    # all_to_all_single: equal and uneven splits; all_to_all (list), vs gloo
    n = 6
    a = inp(rank, ws * n, torch.float32)
    oa, og = torch.empty_like(a), torch.empty_like(a)
    dist.all_to_all_single(oa, a)
    dist.all_to_all_single(og, a, group=gloo)
    close(oa, og, "all_to_all_single equal")
    in_splits = [(rank + r) % 3 + 1 for r in range(ws)]
    out_splits = [(r + rank) % 3 + 1 for r in range(ws)]
    a = inp(rank, sum(in_splits) * 2, torch.float64).view(-1, 2)
    oa = torch.empty(sum(out_splits), 2, dtype=torch.float64)
    og = torch.empty_like(oa)
    dist.all_to_all_single(oa, a, out_splits, in_splits)
    dist.all_to_all_single(og, a, out_splits, in_splits, group=gloo)
    close(oa, og, "all_to_all_single uneven")
    ins = [inp(rank * ws + r, r + 1, torch.int32) for r in range(ws)]
    outs = [torch.empty(rank + 1, dtype=torch.int32) for _ in range(ws)]
    dist.all_to_all(outs, ins)
    for r in range(ws):
        close(outs[r], inp(r * ws + rank, rank + 1, torch.int32), "all_to_all")

    # coalesced
    ts = [inp(rank, 10, torch.float32), inp(rank, 3, torch.float32)]
    dist.all_reduce_coalesced(ts)
    close(ts[0], local_reduce(ws, 10, torch.float32, Op.SUM), "all_reduce_coalesced[0]")
    close(ts[1], local_reduce(ws, 3, torch.float32, Op.SUM), "all_reduce_coalesced[1]")
    # all_gather_coalesced: PyTorch's layout is outputs[rank][input]. Both as many inputs as
    # ranks (where the transposed layout goes unnoticed without a value check) and not, with an
    # empty input (torch wants one dtype per call); against gloo and against the inputs themselves.
    for shapes, dt in (([(4,), (2, 3)][:ws] + [(5,)] * max(0, ws - 2), torch.float32),
                       ([(4,), (0,), (3, 2)], torch.int64)):
        mk = lambda r: [inp(r * 7 + i, max(1, math.prod(s)), dt)[:math.prod(s)].view(s)  # noqa: E731
                        for i, s in enumerate(shapes)]
        outa = [[torch.empty_like(x) for x in mk(0)] for _ in range(ws)]
        outg = [[torch.empty_like(x) for x in mk(0)] for _ in range(ws)]
        dist.all_gather_coalesced(outa, mk(rank))
        dist.all_gather_coalesced(outg, mk(rank), group=gloo)
        for r in range(ws):
            for i, x in enumerate(mk(r)):
                close(outa[r][i], x, f"all_gather_coalesced[{r}][{i}] {shapes}")
                close(outa[r][i], outg[r][i], f"all_gather_coalesced vs gloo [{r}][{i}] {shapes}")

    # send / recv ring, and batched isend/irecv
    t = inp(rank, 100, torch.float32)
    r_ = torch.empty(100)
    if rank % 2 == 0:
        dist.send(t, dst=(rank + 1) % ws)
        dist.recv(r_, src=(rank - 1) % ws)
    else:
        dist.recv(r_, src=(rank - 1) % ws)
        dist.send(t, dst=(rank + 1) % ws)
    close(r_, inp((rank - 1) % ws, 100, torch.float32), "send/recv")
    r2 = torch.empty(100)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (rank + 1) % ws),
                                   dist.P2POp(dist.irecv, r2, (rank - 1) % ws)])
    for q in reqs:
        q.wait()
    close(r2, inp((rank - 1) % ws, 100, torch.float32), "batch_isend_irecv")
    # Every rank posts its receives first (gloo's test does), batched and one by one: they are
    # held back and started together with the sends, so nothing waits for a peer's later op.
    for batched in (True, False):
        recvd = {p: torch.full((64,), -1.0) for p in range(ws) if p != rank}
        ops = [(dist.irecv, recvd[p], p, p) for p in recvd] + \
              [(dist.isend, inp(rank, 64, torch.float32), p, rank) for p in recvd]
        if batched:
            reqs = dist.batch_isend_irecv([dist.P2POp(f, x, p, tag=tag) for f, x, p, tag in ops])
        else:
            reqs = [f(x, p, tag=tag) for f, x, p, tag in ops]
        for q in reqs:
            q.wait()
        for p, x in recvd.items():
            close(x, inp(p, 64, torch.float32), f"irecv before isend (batched={batched}) from {p}")
    # a send nobody waits on still goes out (started after a delay)
    if ws >= 2 and rank < 2:
        if rank == 0:
            dist.isend(inp(0, 8, torch.float32), 1)
            time.sleep(0.1)
            assert gloo_flag(gloo, 0) == 1
        else:
            x = torch.empty(8)
            dist.recv(x, 0)
            close(x, inp(0, 8, torch.float32), "unwaited isend")
            gloo_flag(gloo, 1)
    else:
        gloo_flag(gloo, 1)
    # (receive from any source: test_any_source.py)

    # bool and complex
    b = (inp(rank, 9, torch.int64) % 2).bool()
    dist.all_reduce(b)
    close(b, sum((inp(r, 9, torch.int64) % 2) for r in range(ws)) > 0, "all_reduce bool")
    c = torch.complex(inp(rank, 5, torch.float32), inp(rank + 1, 5, torch.float32))
    dist.all_reduce(c)
    ref = sum(torch.complex(inp(r, 5, torch.float32), inp(r + 1, 5, torch.float32)) for r in range(ws))
    assert torch.allclose(c, ref), "all_reduce complex"

    # non-contiguous tensors: handled (staged and copied back)
    base = inp(rank, 48, torch.float32).view(6, 8)
    view = base.t()[:, ::2]
    expect = sum(inp(r, 48, torch.float32).view(6, 8).t()[:, ::2] for r in range(ws))
    dist.all_reduce(view)
    close(view, expect, "all_reduce non-contiguous")
    close(base.t()[:, 1::2], inp(rank, 48, torch.float32).view(6, 8).t()[:, 1::2], "untouched elements")

    # Work API: async op, wait, is_completed, future value
    t = inp(rank, 1 << 16, torch.float32)
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future()
    w.wait()
    assert w.is_completed() and w.is_success()
    v = fut.wait()
    assert isinstance(v, list) and v[0] is not None
    close(v[0], local_reduce(ws, 1 << 16, torch.float32, Op.SUM), "future value")
    t2 = inp(rank, 1000, torch.float32)
    fut2 = dist.all_reduce(t2, async_op=True).get_future().then(lambda f: f.value()[0] * 2)
    close(fut2.wait(), local_reduce(ws, 1000, torch.float32, Op.SUM) * 2, "future.then")

    # a sub-group (its own communicator, rendezvous under the group's store prefix)
    members = [r for r in range(ws) if r % 2 == 1]
    sub = dist.new_group(members, backend="accl")
    if rank in members:
        t = torch.full((3,), float(rank))
        dist.all_reduce(t, group=sub)
        close(t, torch.full((3,), float(sum(members))), "sub-group all_reduce")
        dist.barrier(group=sub)

    # bitwise reductions, against gloo
    for op in (Op.BAND, Op.BOR, Op.BXOR):
        for dtype in (torch.int32, torch.int64, torch.uint8, torch.bool):
            for n in (1, 1000):
                x = (torch.arange(n) * 2654435761 + rank * 40503 + 7) % 251
                x = (x % 2).bool() if dtype == torch.bool else x.to(dtype)
                a, g = x.clone(), x.clone()
                dist.all_reduce(a, op=op)
                dist.all_reduce(g, op=op, group=gloo)
                close(a, g, f"all_reduce {op} {dtype} n={n}")
    # sparse all_reduce (SUM), against gloo; a rank may hold no nonzeros
    for nnz in (2, 0 if rank == 0 else 3):
        i = torch.stack([torch.arange(nnz) % (ws + 1), (torch.arange(nnz) * (rank + 1)) % (ws + 2)])
        x = torch.sparse_coo_tensor(i, torch.arange(nnz, dtype=torch.float32) + rank, (ws + 1, ws + 2, 2)[:2])
        a, g = x.clone(), x.clone()
        dist.all_reduce(a)
        dist.all_reduce(g, group=gloo)
        close(a.to_dense(), g.to_dense(), f"sparse all_reduce nnz={nnz}")
    # a clear error where a reduce op cannot apply
    try:
        dist.all_reduce(torch.ones(2), op=Op.BAND)
        raise AssertionError("BAND on float should raise")
    except (RuntimeError, ValueError) as e:
        assert "integer or bool" in str(e), str(e)

    # monitored barrier (the failure cases are in PyTorch's own tests, tests/torch/dist_suite.py)
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    except ValueError as e:  # torch 2.5's Python allows it on gloo only; the group's own method reaches us
        assert "GLOO" in str(e), str(e)
        dist.group.WORLD.monitored_barrier(datetime.timedelta(seconds=30), wait_all_ranks=True)
    dist.barrier()


def gloo_flag(gloo, value):
    """An all-reduce (MAX) of `value` on the gloo group: a side channel that never touches accl."""
    t = torch.tensor([value])
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=gloo)
    return int(t.item())


def local_reduce(ws, n, dtype, op, small=False):
    xs = [inp(r, n, dtype, small) for r in range(ws)]
    if dtype.is_floating_point:
        xs64 = [x.double() for x in xs]
    else:
        xs64 = xs
    Op = dist.ReduceOp
    acc = xs64[0].clone()
    for x in xs64[1:]:
        if op == Op.SUM:
            acc = acc + x
        elif op == Op.PRODUCT:
            acc = acc * x
        elif op == Op.MIN:
            acc = torch.minimum(acc, x)
        elif op == Op.MAX:
            acc = torch.maximum(acc, x)
    return acc.to(dtype)


def file_init_worker(rank, ws, path):
    """file:// rendezvous: the c10d FileStore carries the unique id."""
    dist.init_process_group("accl", init_method=f"file://{path}", rank=rank, world_size=ws)
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [ws * (ws + 1) / 2] * 5, t
    dist.destroy_process_group()
