#!/usr/bin/python3
"""perf/compare.py end to end at a tiny scale: every backend that is available gives a time
for every size, ratios are computed from them, and a missing backend is named, not hidden."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--build-dir", required=True)
ap.add_argument("--mpi", required=True)
a = ap.parse_args()
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "c.json")
    cmd = [sys.executable, os.path.join(root, "perf", "compare.py"), "--build-dir", a.build_dir, "--np", "2",
           "--sizes", "8", "4K", "--reps", "2", "--no-gloo", "--iter-scale", "0.1", "--json", out, "--plot", ""]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    print(p.stdout, p.stderr)
    assert p.returncode == 0, f"compare.py exited {p.returncode}"
    with open(out) as f:
        doc = json.load(f)
    rows = doc["rows"]
    assert {(r["collective"], r["requested_bytes"]) for r in rows} == {
        (c, s) for c in ("all_reduce", "all_gather") for s in (8, 4096)}, rows
    have_mpi = a.mpi.upper() in ("1", "ON", "TRUE")
    for r in rows:
        assert len(r["accl"]["samples_us"]) == 2 and r["accl"]["best_us"] > 0, r
        assert r["accl"]["best_us"] <= r["accl"]["median_us"], r
        assert r["bytes"] >= 32 or r["collective"] == "all_reduce", r  # all-gather: 16 B per rank at least
        if have_mpi:
            assert len(r["mpi"]["samples_us"]) == 2, r
            assert abs(r["x_mpi_best"] - r["mpi"]["best_us"] / r["accl"]["best_us"]) < 1e-9, r
    if not have_mpi:
        assert "no OpenMPI column" in p.stdout, p.stdout
    assert "## np=2 all_reduce" in p.stdout and "## np=2 all_gather" in p.stdout
print("compare smoke test passed")
