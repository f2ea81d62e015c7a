#!/usr/bin/python3
"""ACCL's socket transport against raw TCP on this machine: 2 ranks over loopback, side by side.

  perf/socket_vs_raw.py [--sizes 16M 128M] [--collectives all_reduce all_gather] [--rounds 5]
                        [--lib-b DIR] [--build-dir build] [--json out.json]

What is compared (2 processes, NCCL_SHM_DISABLE=1, so every byte goes through TCP on 127.0.0.1):
* all_reduce of S bytes is a ring reduce-scatter then all-gather: each rank sends S/2 + S/2 = S
  bytes and receives S bytes, both directions at once; nccl-tests' busbw = algbw * 2(n-1)/n
  = S / time at n = 2.
* all_gather of S bytes (total output): each rank sends and receives S/2; busbw = algbw *
  (n-1)/n = (S/2) / time.
* raw: build/tools/accl-tcp-loopback "bidir" moving the same bytes per direction (S, resp.
  S/2): both processes send and receive at once on one TCP connection with ACCL's socket
  options (net::tuneForBulk: ACCL_SOCKET_BUF_BYTES buffers, TCP_NODELAY); per-direction GB/s =
  bytes / time. Raw is the better of its one-thread and two-thread variants, each round.

So busbw / raw is the fraction of what raw TCP moves in the same time. The raw figure does no
reduction and copies nothing outside the kernel, so it is an upper bound, not a twin.

Each round runs raw, A (this build) and, with --lib-b, B (a directory holding another
libnccl.so.2, e.g. a copy of an older build/lib; LD_LIBRARY_PATH puts it before the
binaries' RUNPATH), in an order that rotates every round: this machine drifts by 2-4x within
minutes, so only figures taken next to each other count. Reports best and median busbw (out
of place) per variant, and busbw / raw of the bests and of the medians.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from sizes import human, parse_size

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Bytes each rank sends (and receives) per operation of S bytes, at 2 ranks.
PER_DIRECTION = {"all_reduce": lambda s: s, "all_gather": lambda s: s // 2}


def run(cmd, env, timeout=600):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, timeout=timeout)
    if p.returncode != 0:
        sys.exit(f"socket_vs_raw: exit {p.returncode}: {' '.join(cmd)}\n{p.stderr[-2000:]}")
    return p.stdout


def raw_gbps(a, per_dir_sizes):
    """{bytes per direction: GB/s} from one accl-tcp-loopback run (best of its variants)."""
    out = run([os.path.join(a.bin, "tools", "accl-tcp-loopback"), "--tests", "bidir", "--reps", "1", "--sizes",
               ",".join(str(s) for s in per_dir_sizes)], dict(os.environ))
    res = {}
    for line in out.splitlines():
        m = re.match(r"bidir .*?(\d+) B\s+best\s+([\d.]+) GB/s", line)
        if m:
            res[int(m.group(1))] = max(res.get(int(m.group(1)), 0.0), float(m.group(2)))
    return res


def accl_busbw(a, coll, nbytes, lib_dir):
    """Out-of-place busbw (GB/s) of one all_*_perf launch of 2 ranks over sockets."""
    env = dict(os.environ, NCCL_SHM_DISABLE="1")
    if lib_dir:
        env["LD_LIBRARY_PATH"] = lib_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    iters = max(3, min(50, (512 << 20) // nbytes))
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        run([os.path.join(a.bin, "perf", "accl-run"), "-np", "2", os.path.join(a.bin, "perf", f"{coll}_perf"),
             "-b", str(nbytes), "-e", str(nbytes), "-n", str(iters), "-w", str(max(1, iters // 5)), "-c", "0",
             "-y", "1", "-d", "float", "-o", "sum", "-J", report], env)
        with open(report) as f:
            row = json.load(f)["results"][0]
    return row["out_of_place"]["bus_bw"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["16M", "128M"])
    ap.add_argument("--collectives", nargs="+", default=["all_reduce", "all_gather"], choices=list(PER_DIRECTION))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lib-b", default="", help="directory with another libnccl.so.2, measured as B")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.build_dir)
    sizes = [parse_size(s) for s in a.sizes]
    variants = ["raw", "A"] + (["B"] if a.lib_b else [])
    per_dir = sorted({PER_DIRECTION[c](s) for c in a.collectives for s in sizes})
    samples = {}  # (variant, coll, size) -> [GB/s]
    for rnd in range(a.rounds):
        order = variants[rnd % len(variants):] + variants[:rnd % len(variants)]
        for v in order:
            if v == "raw":
                raw = raw_gbps(a, per_dir)
                for c in a.collectives:
                    for s in sizes:
                        samples.setdefault(("raw", c, s), []).append(raw[PER_DIRECTION[c](s)])
                continue
            for c in a.collectives:
                for s in sizes:
                    bw = accl_busbw(a, c, s, a.lib_b if v == "B" else "")
                    samples.setdefault((v, c, s), []).append(bw)
        print(f"# round {rnd + 1}/{a.rounds} done (order {' '.join(order)})", file=sys.stderr, flush=True)

    print(f"# np2 over 127.0.0.1 (NCCL_SHM_DISABLE=1), {a.rounds} interleaved rounds; GB/s per direction; "
          f"A = {a.bin}/lib" + (f", B = {a.lib_b}" if a.lib_b else ""))
    head = f"{'collective':<11} {'size':>5} {'bytes/dir':>9} | {'raw best':>8} {'median':>7}"
    for v in variants[1:]:
        head += f" | {v + ' best':>7} {'median':>7} {'/raw b':>6} {'/raw m':>6}"
    print(head)
    rows = []
    for c in a.collectives:
        for s in sizes:
            rb, rm = max(samples[("raw", c, s)]), statistics.median(samples[("raw", c, s)])
            line = f"{c:<11} {human(s):>5} {human(PER_DIRECTION[c](s)):>9} | {rb:8.2f} {rm:7.2f}"
            row = {"collective": c, "bytes": s, "bytes_per_direction": PER_DIRECTION[c](s),
                   "samples": {v: samples[(v, c, s)] for v in variants}}
            for v in variants[1:]:
                b, m = max(samples[(v, c, s)]), statistics.median(samples[(v, c, s)])
                line += f" | {b:7.2f} {m:7.2f} {100 * b / rb:5.0f}% {100 * m / rm:5.0f}%"
            print(line)
            rows.append(row)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": a.rounds, "lib_b": a.lib_b, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
