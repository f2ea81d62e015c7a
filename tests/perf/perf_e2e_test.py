#!/usr/bin/env python3
"""End-to-end tests of build/perf: run the binaries in every launch mode with small sizes and
read their output the way an nccl-tests parser would (table rows, footer, JSON records).

Needs working collectives in libnccl.so.2. Run: perf_e2e_test.py --bin-dir build/perf [--mpi 1]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

BIN_DIR = None
HAVE_MPI = False
TIMEOUT = 60

BUSBW_FACTOR = {  # n = total ranks
    "all_reduce_perf": lambda n: 2.0 * (n - 1) / n,
    "all_gather_perf": lambda n: (n - 1) / n,
    "reduce_scatter_perf": lambda n: (n - 1) / n,
    "alltoall_perf": lambda n: (n - 1) / n,
    "gather_perf": lambda n: (n - 1) / n,
    "scatter_perf": lambda n: (n - 1) / n,
    "broadcast_perf": lambda n: 1.0,
    "reduce_perf": lambda n: 1.0,
    "sendrecv_perf": lambda n: 1.0,
    "hypercube_perf": lambda n: 1.0,
}


def run(cmd, env_extra=None):
    env = dict(os.environ)
    env.pop("ACCL_PERF_CORRUPT", None)
    env.update(env_extra or {})
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT, env=env)
    return p.returncode, p.stdout, p.stderr


def parse_table(text):
    """Rows as dicts, like a parser of nccl-tests output (whitespace split, '#' = comment)."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        f = line.split()
        if len(f) == 12:  # hypercube: empty redop column
            f.insert(3, "")
        assert len(f) == 13, f"unexpected row: {line!r}"
        rows.append({
            "size": int(f[0]), "count": int(f[1]), "type": f[2], "redop": f[3], "root": int(f[4]),
            "oop": {"time": float(f[5]), "algbw": float(f[6]), "busbw": float(f[7]), "wrong": f[8]},
            "ip": {"time": float(f[9]), "algbw": float(f[10]), "busbw": float(f[11]), "wrong": f[12]},
        })
    return rows


def footer_value(text, key):
    for line in text.splitlines():
        if line.startswith("# " + key):
            return line.split(":", 1)[1].split()[0]
    return None


class PerfRun(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="accl-perf-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def binary(self, name):
        return os.path.join(BIN_DIR, name)

    def check_run(self, rc, out, err, nranks, name, json_path=None, expect_rows=True):
        self.assertEqual(rc, 0, f"{name} failed rc={rc}\nstdout:\n{out}\nstderr:\n{err}")
        self.assertIn(f"# Collective test starting: {name}", out)
        self.assertIn(f"# Collective test concluded: {name}", out)
        self.assertEqual(footer_value(out, "Out of bounds values"), "0", out)
        self.assertIsNotNone(footer_value(out, "Avg bus bandwidth"))
        rows = parse_table(out)
        if expect_rows:
            self.assertGreater(len(rows), 0, out)
        for r in rows:
            for placement in ("oop", "ip"):
                self.assertEqual(r[placement]["wrong"], "0", f"{name} wrong results: {r}")
        if json_path:
            with open(json_path) as f:
                doc = json.load(f)
            records = doc["records"]
            self.assertEqual(len(records), 2 * len(rows))
            self.assertEqual(len(doc["results"]), len(rows))
            factor = BUSBW_FACTOR[name](nranks)
            for rec in records:
                for key in ("collective", "bytes", "count", "type", "op", "root", "placement", "time_us", "algbw",
                            "busbw", "wrong", "nranks", "transport", "algorithm"):
                    self.assertIn(key, rec)
                self.assertEqual(rec["nranks"], nranks)
                self.assertEqual(rec["collective"], name)
                self.assertEqual(rec["wrong"], 0)
                if rec["algbw"] > 1e-3:
                    self.assertAlmostEqual(rec["busbw"] / rec["algbw"], factor, places=3, msg=str(rec))
        return rows

    def test_every_binary_two_ranks_one_thread(self):
        for name in sorted(BUSBW_FACTOR):
            with self.subTest(binary=name):
                js = os.path.join(self.tmp, name + ".json")
                rc, out, err = run([self.binary(name), "-b", "64", "-e", "64K", "-f", "8", "-g", "2", "-n", "3",
                                    "-w", "1", "-c", "1", "-J", js])
                rows = self.check_run(rc, out, err, 2, name, js)
                self.assertEqual([r["size"] for r in rows][:1], [64])

    def test_every_binary_one_rank(self):
        for name in sorted(BUSBW_FACTOR):
            with self.subTest(binary=name):
                rc, out, err = run([self.binary(name), "-b", "64", "-e", "4K", "-f", "8", "-g", "1", "-n", "1",
                                    "-c", "1"])
                self.check_run(rc, out, err, 1, name)

    def test_every_binary_four_threads_parallel_init(self):
        for name in sorted(BUSBW_FACTOR):
            with self.subTest(binary=name):
                rc, out, err = run([self.binary(name), "-b", "64", "-e", "4K", "-f", "8", "-t", "4", "-p", "1",
                                    "-n", "1", "-c", "1", "-r", "-1"])
                self.check_run(rc, out, err, 4, name)

    def test_table_columns_and_sizes_follow_the_sweep(self):
        rc, out, err = run([self.binary("all_reduce_perf"), "-b", "8", "-e", "1K", "-f", "2", "-g", "2", "-n", "2"])
        rows = self.check_run(rc, out, err, 2, "all_reduce_perf")
        self.assertEqual([r["size"] for r in rows], [8, 16, 32, 64, 128, 256, 512, 1024])
        self.assertEqual([r["count"] for r in rows], [2, 4, 8, 16, 32, 64, 128, 256])
        self.assertTrue(all(r["type"] == "float" and r["redop"] == "sum" and r["root"] == -1 for r in rows))

    def test_all_types_and_ops_verify(self):
        rc, out, err = run([self.binary("all_reduce_perf"), "-b", "256", "-e", "256", "-g", "3", "-n", "1", "-d",
                            "all", "-o", "all"])
        rows = self.check_run(rc, out, err, 3, "all_reduce_perf")
        self.assertEqual(len(rows), 12 * 6)

    def test_every_root_is_visited(self):
        rc, out, err = run([self.binary("broadcast_perf"), "-b", "1K", "-e", "1K", "-g", "3", "-n", "1", "-r", "-1"])
        rows = self.check_run(rc, out, err, 3, "broadcast_perf")
        self.assertEqual([r["root"] for r in rows], [0, 1, 2])

    def test_threads_times_ranks(self):
        rc, out, err = run([self.binary("all_reduce_perf"), "-b", "1K", "-e", "4K", "-f", "2", "-t", "2", "-g", "2",
                            "-n", "2"])
        self.check_run(rc, out, err, 4, "all_reduce_perf")
        self.assertIn("nThread 2 nGpus 2", out)
        self.assertEqual(out.count("#  Rank "), 4)

    def test_blocking_cputime_and_aggregation_options_run(self):
        rc, out, err = run([self.binary("all_gather_perf"), "-b", "1K", "-e", "2K", "-f", "2", "-g", "2", "-n", "2",
                            "-z", "1", "-m", "2", "-C", "1", "-a", "3"])
        self.check_run(rc, out, err, 2, "all_gather_perf")
        self.assertIn("cputime", out)

    def test_corruption_is_counted_and_exits_7(self):
        js = os.path.join(self.tmp, "bad.json")
        rc, out, err = run([self.binary("all_reduce_perf"), "-b", "1K", "-e", "1K", "-g", "2", "-n", "1", "-J", js],
                           {"ACCL_PERF_CORRUPT": "1"})
        self.assertEqual(rc, 7, out + err)
        rows = parse_table(out)
        self.assertGreater(float(rows[0]["oop"]["wrong"]), 0)
        self.assertNotEqual(footer_value(out, "Out of bounds values"), "0")
        with open(js) as f:
            self.assertGreater(json.load(f)["records"][0]["wrong"], 0)

    def test_buffer_mode_is_named_and_a_device_demand_that_cannot_be_met_stops(self):
        # ACCL_BACKEND=host keeps the library (and so the harness) on host memory on any machine.
        js = os.path.join(self.tmp, "mode.json")
        env = {"ACCL_BACKEND": "host"}
        rc, out, err = run([self.binary("all_reduce_perf"), "-b", "8", "-e", "64", "-g", "2", "-n", "1", "-J", js], env)
        self.check_run(rc, out, err, 2, "all_reduce_perf", js)
        self.assertIn("# Buffers: host memory on ACCL host streams: ACCL_BACKEND=host", out)
        with open(js) as f:
            self.assertEqual({r["buffers"] for r in json.load(f)["records"]}, {"host"})
        for how in (["--device"], []):
            rc, out, err = run([self.binary("all_reduce_perf"), "-b", "8", "-e", "8", "-n", "1"] + how,
                               dict(env, ACCL_PERF_DEVICE="1" if not how else "0"))
            self.assertEqual(rc, 2, out + err)
            self.assertIn("cannot be honoured: ACCL_BACKEND=host", err)
        # --host keeps the library on its host backend too (ncclMemAlloc must give host memory).
        log = os.path.join(self.tmp, "init.log")
        rc, out, err = run([self.binary("all_reduce_perf"), "--host", "-b", "8", "-e", "64", "-n", "1"],
                           {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT", "NCCL_DEBUG_FILE": log})
        self.check_run(rc, out, err, 1, "all_reduce_perf")
        with open(log) as f:
            self.assertIn("host backend (ACCL_BACKEND=host)", f.read())

    def test_accl_run_launches_processes_without_mpi(self):
        js = os.path.join(self.tmp, "procs.json")
        rc, out, err = run([self.binary("accl-run"), "-np", "2", self.binary("all_reduce_perf"), "-b", "8", "-e",
                            "64K", "-f", "8", "-g", "1", "-n", "2", "-J", js])
        self.check_run(rc, out, err, 2, "all_reduce_perf", js)
        self.assertEqual(out.count("# Collective test starting"), 1)  # only rank 0 prints
        self.assertEqual(out.count("#  Rank "), 2)

    def test_accl_run_reports_a_failing_rank(self):
        rc, _, _ = run([self.binary("accl-run"), "-np", "2", "sh", "-c", 'exit $((RANK * 3))'])
        self.assertEqual(rc, 3)

    def rank_cpus(self, np, *opts):
        """{rank: set of CPUs it may run on} of an accl-run job."""
        script = 'echo "$RANK $(python3 -c "import os; print(*sorted(os.sched_getaffinity(0)))")"'
        rc, out, err = run([self.binary("accl-run"), "-np", str(np), *opts, "sh", "-c", script])
        self.assertEqual(rc, 0, err)
        lines = [line.split() for line in out.strip().splitlines()]
        return {int(f[0]): set(map(int, f[1:])) for f in lines}

    def test_accl_run_binds_each_rank_to_a_cpu_when_they_fit_like_mpirun(self):
        allowed = os.sched_getaffinity(0)
        if len(allowed) < 2:
            self.skipTest(f"needs 2 CPUs to bind 2 ranks apart; this process may use {len(allowed)}")
        bound = self.rank_cpus(2)
        self.assertEqual(sorted(bound), [0, 1])
        self.assertTrue(all(len(c) == 1 and c <= allowed for c in bound.values()), bound)
        self.assertNotEqual(bound[0], bound[1])
        # Oversubscribed (or --bind-to none): every rank may use every CPU, as mpirun does then.
        for cpus in self.rank_cpus(len(allowed) + 1).values():
            self.assertEqual(cpus, allowed)
        for cpus in self.rank_cpus(2, "--bind-to", "none").values():
            self.assertEqual(cpus, allowed)
        rc, _, err = run([self.binary("accl-run"), "-np", str(len(allowed) + 1), "--bind-to", "core", "true"])
        self.assertEqual(rc, 2)
        self.assertIn("needs a CPU per rank", err)

    @unittest.skipUnless(shutil.which("mpirun"), "mpirun not installed")
    def test_mpirun_launch(self):
        if not HAVE_MPI:
            self.skipTest("perf binaries built without MPI")
        rc, out, err = run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
                            self.binary("all_reduce_perf"), "-b", "8", "-e", "64K", "-f", "4", "-g", "1", "-c", "1",
                            "-n", "2"])
        self.check_run(rc, out, err, 2, "all_reduce_perf")
        self.assertEqual(out.count("#  Rank "), 2)

    def test_plot_writes_a_png(self):
        js = os.path.join(self.tmp, "a.json")
        rc, out, err = run([self.binary("all_reduce_perf"), "-b", "1K", "-e", "16K", "-f", "4", "-g", "2", "-n", "1",
                            "-J", js])
        self.assertEqual(rc, 0, out + err)
        png = os.path.join(self.tmp, "a.png")
        plot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "perf", "plot")
        rc, out, err = run([plot, js, js, "--label", "one", "--label", "two", "-o", png])
        self.assertEqual(rc, 0, out + err)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


def main():
    global BIN_DIR, HAVE_MPI
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--mpi", default="0")
    args, rest = ap.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    HAVE_MPI = args.mpi in ("1", "ON", "TRUE", "true")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
