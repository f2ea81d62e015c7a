#!/usr/bin/python3
# Debian's python3 on purpose: the plot uses python3-matplotlib, not a venv.
"""ACCL against OpenMPI and Gloo on this machine, side by side in one run.

  perf/compare.py [--np 2 4 8] [--collectives all_reduce all_gather] [--sizes 8 64K 1M 16M 128M]
               [--reps 3] [--gloo-reps 1] [--no-mpi] [--no-gloo] [--stream null|host]
               [--json compare.json] [--plot compare.png] [--build-dir build]

For every rank count and repetition it runs, interleaved (the order flips every repetition):
ACCL's *_perf through accl-run (one launch per size, out-of-place and in-place), OpenMPI's
MPI_Allreduce / MPI_Allgather (build/perf/mpi_coll_bench through mpirun) and torch.distributed's
Gloo (perf/gloo_coll_bench.py in the torch venv). Float32 sum; sizes as nccl-tests count them
(all-gather: total output bytes). Benchmarks here drift by up to 4x between runs, so each
figure is the best of the repetitions and the median, and only ratios taken in the same run
mean anything. Prints ratio tables (x = other's time / ACCL's time: above 1 ACCL is faster),
writes every sample to --json and a bus-bandwidth plot to --plot.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from sizes import human, parse_size

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUSBW_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n}


def effective_size(coll, n, nbytes):
    """all_*_perf rounds an all-gather's size down to whole 16-byte pieces per rank (8 B on
    2 ranks would time nothing), so smaller all-gathers run at 16 bytes x ranks, in every column."""
    return max(nbytes, 16 * n) if coll == "all_gather" else nbytes


def iterations(nbytes, scale):
    """Timed and warm-up iterations: about 32 MiB moved per size, 3..50000 ops (x scale). Small
    sizes get up to 50000 ops so that one sample spans ~10 ms: at 0.2 us an op, 5000 ops were a
    1 ms window that one scheduler tick or descheduled rank could stretch 2-10x."""
    iters = max(3, min(50000, (32 << 20) // max(nbytes, 1)))
    iters = max(2, int(iters * scale))
    return iters, max(1, iters // 10)


LAUNCH_PREFIX = []  # ["chrt", "-f", "1"] with --realtime


def run(cmd, timeout, env=None):
    """Runs cmd; returns stdout, or None with a message on stderr when it failed."""
    cmd = LAUNCH_PREFIX + cmd
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        print(f"# compare: timed out after {timeout}s: {' '.join(cmd)}", file=sys.stderr)
        return None
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-5:])
        print(f"# compare: exit {p.returncode}: {' '.join(cmd)}\n{tail}", file=sys.stderr)
        return None
    return p.stdout


def run_accl(a, coll, n, nbytes):
    """(out-of-place µs, in-place µs) from one all_*_perf launch, or None."""
    iters, warm = iterations(nbytes, a.iter_scale)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "r.json")
        cmd = [os.path.join(a.bin_dir, "accl-run"), "-np", str(n), os.path.join(a.bin_dir, f"{coll}_perf"),
               "-b", str(nbytes), "-e", str(nbytes), "-n", str(iters), "-w", str(warm), "-c", "0",
               "-y", "1" if a.stream == "null" else "0", "-d", "float", "-o", "sum", "-J", report]
        if run(cmd, a.timeout) is None or not os.path.exists(report):
            return None
        with open(report) as f:
            row = json.load(f)["results"][0]
    return row["out_of_place"]["time"], row["in_place"]["time"]


def run_mpi(a, coll, n, sizes):
    """{bytes: µs} from one mpi_coll_bench launch, or None."""
    cases = []
    for s in sizes:
        iters, warm = iterations(s, a.iter_scale)
        cases.append(f"{s}:{iters}:{warm}")
    cmd = [a.mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(n),
           os.path.join(a.bin_dir, "mpi_coll_bench"), coll] + cases
    out = run(cmd, a.timeout)
    if out is None:
        return None
    doc = json.loads(out.strip().splitlines()[-1])
    return {r["bytes"]: r["time_us"] for r in doc["results"]}


def run_gloo(a, colls, n, sizes):
    """{coll: {bytes: µs}} from one gloo_coll_bench launch, or None."""
    cmd = [a.torch_python, os.path.join(HERE, "gloo_coll_bench.py"), "--np", str(n), "--collectives", *colls,
           "--sizes", *map(str, sizes), "--budget", str(a.gloo_budget)]
    out = run(cmd, a.timeout * 4)
    if out is None:
        return None
    res = {}
    for line in out.strip().splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            res[doc["collective"]] = {r["bytes"]: r["time_us"] for r in doc["results"]}
    return res


def best_median(samples):
    return (min(samples), statistics.median(samples)) if samples else (None, None)


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def ratio(other, ours):
    return None if other is None or ours is None or ours <= 0 else other / ours


def summarize(samples, a):
    """Per (np, coll, size): best and median time of each backend, busbw and ratios."""
    rows = []
    for n in a.np:
        for coll in a.collectives:
            for s in a.sizes:
                key = lambda b: samples.get((b, n, coll, s), [])  # noqa: E731
                r = {"np": n, "collective": coll, "bytes": effective_size(coll, n, s), "requested_bytes": s}
                for b in ("accl", "accl_inplace", "mpi", "gloo"):
                    r[b] = dict(zip(("best_us", "median_us"), best_median(key(b))), samples_us=key(b))
                    best = r[b]["best_us"]
                    r[b]["busbw_best"] = r["bytes"] / 1e3 / best * BUSBW_FACTOR[coll](n) if best else None
                for b in ("mpi", "gloo"):
                    r[f"x_{b}_best"] = ratio(r[b]["best_us"], r["accl"]["best_us"])
                    r[f"x_{b}_median"] = ratio(r[b]["median_us"], r["accl"]["median_us"])
                r["inplace_over_outofplace_median"] = ratio(r["accl_inplace"]["median_us"], r["accl"]["median_us"])
                rows.append(r)
    return rows


def print_tables(rows, a):
    if a.realtime:
        print("# every launch ran under chrt -f 1 (SCHED_FIFO): other load on this machine could not take its cores")
    print(f"# ACCL vs OpenMPI vs Gloo, float32 sum, ACCL on the {a.stream.upper()} stream, best-of-{a.reps} "
          f"(Gloo best-of-{a.gloo_reps}) / median. x = other's time / ACCL's (>1: ACCL faster).")
    head = (f"{'size':>6} | {'ACCL us':>18} {'busbw':>6} {'in-pl/oop':>9} | {'OpenMPI us':>18} {'busbw':>6} | "
            f"{'Gloo us':>18} {'busbw':>6} | {'x MPI best/med':>14} | {'x Gloo best/med':>15}")
    for n in a.np:
        for coll in a.collectives:
            print(f"\n## np={n} {coll}")
            print(head)
            print("-" * len(head))
            for r in rows:
                if r["np"] != n or r["collective"] != coll:
                    continue

                def t(b):
                    return f"{fmt(r[b]['best_us'])}/{fmt(r[b]['median_us'])}"
                print(f"{human(r['bytes']):>6} | {t('accl'):>18} {fmt(r['accl']['busbw_best']):>6} "
                      f"{fmt(r['inplace_over_outofplace_median']):>9} | {t('mpi'):>18} "
                      f"{fmt(r['mpi']['busbw_best']):>6} | {t('gloo'):>18} {fmt(r['gloo']['busbw_best']):>6} | "
                      f"{fmt(r['x_mpi_best']) + '/' + fmt(r['x_mpi_median']):>14} | "
                      f"{fmt(r['x_gloo_best']) + '/' + fmt(r['x_gloo_median']):>15}")
    sys.stdout.flush()


def plot(rows, a):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"# compare: no plot ({a.plot}): python3-matplotlib is not installed (make deps installs it)")
        return
    fig, axes = plt.subplots(len(a.collectives), len(a.np), figsize=(5 * len(a.np), 4 * len(a.collectives)),
                             squeeze=False)
    for i, coll in enumerate(a.collectives):
        for j, n in enumerate(a.np):
            ax = axes[i][j]
            for b, label in (("accl", "ACCL"), ("mpi", "OpenMPI"), ("gloo", "Gloo")):
                pts = [(r["bytes"], r[b]["busbw_best"]) for r in rows
                       if r["np"] == n and r["collective"] == coll and r[b]["busbw_best"]]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_title(f"{coll}, np={n}")
            ax.set_xlabel("bytes")
            ax.set_ylabel("busbw GB/s (best)")
            ax.grid(True, alpha=0.3)
            ax.legend()
    fig.tight_layout()
    fig.savefig(a.plot)
    print(f"# compare: plot written to {a.plot}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--collectives", nargs="+", default=["all_reduce", "all_gather"],
                    choices=["all_reduce", "all_gather"])
    ap.add_argument("--sizes", nargs="+", default=["8", "64K", "1M", "16M", "128M"])
    ap.add_argument("--reps", type=int, default=3, help="repetitions of ACCL and OpenMPI (best-of-N, median)")
    ap.add_argument("--gloo-reps", type=int, default=1, help="repetitions of Gloo (slow to start)")
    ap.add_argument("--iter-scale", type=float, default=1.0, help="multiplies the iterations per size")
    ap.add_argument("--gloo-budget", type=float, default=0.2, help="seconds Gloo times each size")
    ap.add_argument("--stream", choices=["null", "host"], default="null", help="ACCL's stream (-y 1 / -y 0)")
    ap.add_argument("--realtime", action="store_true",
                    help="run every launch (ACCL, OpenMPI and Gloo alike) under `chrt -f 1`, so other load on a "
                         "shared machine does not take the cores mid-measurement (needs root or CAP_SYS_NICE)")
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--no-gloo", action="store_true")
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--torch-python", default=None, help="python with torch (default: .venv, then ~/.cache/accl)")
    ap.add_argument("--mpirun", default=shutil.which("mpirun") or "mpirun")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per launch")
    ap.add_argument("--json", default="compare.json")
    ap.add_argument("--plot", default="compare.png", help="PNG to write ('' for none)")
    a = ap.parse_args()
    if a.realtime:
        LAUNCH_PREFIX[:] = ["chrt", "-f", "1"]
    a.sizes = [parse_size(s) for s in a.sizes]
    a.bin_dir = os.path.join(a.build_dir, "perf")
    if not os.access(os.path.join(a.bin_dir, "accl-run"), os.X_OK):
        sys.exit(f"compare: {a.bin_dir}/accl-run not found: build first (cmake --build {a.build_dir})")
    if not a.no_mpi and not os.access(os.path.join(a.bin_dir, "mpi_coll_bench"), os.X_OK):
        print("# compare: no OpenMPI column: mpi_coll_bench was not built (CMake found no MPI; "
              "install libopenmpi-dev or pass --no-mpi)")
        a.no_mpi = True
    if not a.no_gloo:
        candidates = [a.torch_python] if a.torch_python else [
            os.path.join(os.environ.get("VENV", os.path.join(ROOT, ".venv")), "bin", "python"),
            os.path.expanduser("~/.cache/accl/torch-2.5.1/bin/python")]
        a.torch_python = next((c for c in candidates if c and os.access(c, os.X_OK) and
                               subprocess.run([c, "-c", "import torch.distributed as d; assert d.is_gloo_available()"],
                                              capture_output=True).returncode == 0), None)
        if not a.torch_python:
            print("# compare: no Gloo column: no python with torch found (make deps, or --torch-python)")
            a.no_gloo = True
    if a.no_gloo:
        a.gloo_reps = 0

    samples = {}  # (backend, np, coll, bytes) -> [µs]

    def add(b, n, coll, s, v):
        if v is not None:
            samples.setdefault((b, n, coll, s), []).append(v)

    started = time.time()
    for n in a.np:
        for rep in range(a.reps):
            order = ["accl", "mpi"] if rep % 2 == 0 else ["mpi", "accl"]
            if rep < a.gloo_reps:
                order.insert(1, "gloo")
            for backend in order:
                if backend == "gloo":
                    for coll in a.collectives:  # one launch per collective: sizes differ
                        eff = {s: effective_size(coll, n, s) for s in a.sizes}
                        res = (run_gloo(a, [coll], n, sorted(set(eff.values()))) or {}).get(coll, {})
                        for s in a.sizes:
                            add("gloo", n, coll, s, res.get(eff[s]))
                    continue
                for coll in a.collectives:
                    eff = {s: effective_size(coll, n, s) for s in a.sizes}
                    if backend == "mpi" and not a.no_mpi:
                        res = run_mpi(a, coll, n, sorted(set(eff.values()))) or {}
                        for s in a.sizes:
                            add("mpi", n, coll, s, res.get(eff[s]))
                    elif backend == "accl":
                        for s in a.sizes:
                            r = run_accl(a, coll, n, eff[s])
                            if r:
                                add("accl", n, coll, s, r[0])
                                add("accl_inplace", n, coll, s, r[1])
            print(f"# np={n} repetition {rep + 1}/{a.reps} done ({time.time() - started:.0f} s)", flush=True)

    rows = summarize(samples, a)
    print_tables(rows, a)
    with open(a.json, "w") as f:
        json.dump({"command": sys.argv, "stream": a.stream, "realtime": a.realtime, "reps": a.reps, "gloo_reps": a.gloo_reps,
                   "nproc": os.cpu_count(), "load_avg_at_end": os.getloadavg(), "rows": rows}, f, indent=1)
    print(f"# compare: samples written to {a.json} ({time.time() - started:.0f} s in all)")
    if a.plot:
        plot(rows, a)


if __name__ == "__main__":
    main()
