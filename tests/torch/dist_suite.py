"""PyTorch's own distributed test base against the "accl" backend, next to gloo.

Runs torch/testing/_internal/distributed/distributed_test.py (DistributedTest._DistTestBase with
TestDistBackend, as PyTorch's test/distributed/test_distributed_spawn.py drives it: BACKEND,
WORLD_SIZE, TEMP_DIR/INIT_METHOD) in three modes:

  gloo          the reference: BACKEND=gloo, every process group on gloo;
  accl-as-gloo  gloo's test selection (BACKEND=gloo, so every test gated on gloo runs), but every
                process group is created on accl (torch's _new_process_group_helper is wrapped);
  accl          BACKEND=accl, registered as a third-party backend through the suite's own hook
                DistTestCases.backend_feature["plugin"] (plus "ddp" and "subgroup", which accl
                serves on CPU).

Tests run in processes forked from one parent that imported torch once (PyTorch spawns, which
re-imports torch per rank and test: ~10x slower here). Prints per-group passed/failed/skipped for
each mode, and fails when a test that passes on gloo does not pass on accl-as-gloo, unless it
is listed in KNOWN_DIFFERENCES (each with its reason; docs/pytorch.md lists them too).

  python dist_suite.py --world-sizes 2 --groups default       # what ctest torch.DistSuite runs
  python dist_suite.py --world-sizes 3,4 --modes gloo,accl-as-gloo,accl   # ctest torch.DistSuiteLong
  python dist_suite.py --world-sizes 8 --groups all --tests small-worldsize  # torch.DistSuiteWs8
  python dist_suite.py --world-sizes 2,3,4 --groups ddp --modes gloo,accl-as-gloo,accl  # torch.DistSuiteDDP
  python dist_suite.py --mode accl --world-size 2 --tests 'all_gather_coalesced'   # one mode
"""
import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# Test name -> group, first match wins. "default" groups run in ctest torch.DistSuite; the rest
# (DDP and its relatives: minutes each at world size 2 on a loaded machine) in torch_long.
GROUPS = [
    ("all_gather_coalesced", r"all_gather_coalesced"),
    ("object", r"_object"),
    ("all_gather", r"all_gather"),
    ("all_reduce", r"all_reduce"),
    ("reduce", r"^test_reduce"),
    ("broadcast", r"^test_broadcast"),
    ("scatter_gather", r"^test_(scatter|gather)"),
    ("all_to_all", r"all_to_all"),
    ("p2p", r"send_recv|isend|irecv"),
    ("barrier", r"barrier"),
    ("group", r"get_rank|get_backend|destroy|new_subgroups|coalescing_manager|dump_DDP"),
    ("ddp", r"."),
]
DEFAULT_GROUPS = [g for g, _ in GROUPS if g != "ddp"]
# --tests small-worldsize: the tests the suite skips below world size 8 (skip_if_small_worldsize).
SMALL_WORLDSIZE = (r"^test_(reduce|all_reduce_coalesced)_group_|^test_(scatter|gather)_group$|^test_all_to_all\w*_group"
                   r"|^test_monitored_barrier_wait_all_ranks$|^test_barrier_timeout_group$")

# Tests that pass on gloo but cannot pass on accl-as-gloo, for reasons outside accl's control.
# {test name: reason}; docs/pytorch.md carries the same list.
KNOWN_DIFFERENCES = {
    "test_get_backend": "asserts dist.get_backend() == BACKEND ('gloo'); in accl-as-gloo the group's "
                        "backend is 'accl' (passes in mode accl)",
    "test_ddp_logging_data_cpu": "asserts DDP's logged backend_name == dist.get_backend() ('accl'); DDP logs "
                                 "c10d::ProcessGroup::getBackendName(), which torch derives from the group's "
                                 "BackendType, and every third-party backend's is CUSTOM: 'custom'",
}

# Failures known by their message (a torch release's own limit), {regex: reason}.
KNOWN_FAILURE_MESSAGES = {
    r"monitored_barrier is only implemented for GLOO backend":
        "this torch's dist.monitored_barrier accepts only gloo by name (torch 2.5; 2.15 routes it to any "
        "backend); the group's own method reaches accl: dist.group.WORLD.monitored_barrier(...)",
}


def known_difference(name, rec):
    if name in KNOWN_DIFFERENCES:
        return KNOWN_DIFFERENCES[name]
    for rx, why in KNOWN_FAILURE_MESSAGES.items():
        if rec["status"] == "failed" and re.search(rx, rec["detail"]):
            return why
    return None


def group_of(name):
    for g, rx in GROUPS:
        if re.search(rx, name):
            return g
    return "ddp"


# ---------------------------------------------------------------------------------------------
# One mode, one world size: runs in its own process (BACKEND is read when torch's test module
# is imported). Writes one JSON object per test to --out.

def run_mode(args):
    mode, ws = args.mode, args.world_size
    os.environ["BACKEND"] = "accl" if mode == "accl" else "gloo"
    os.environ["WORLD_SIZE"] = str(ws)
    if "TEMP_DIR" not in os.environ:  # setUp replaces it; this one only has to exist, then go
        placeholder, owner = tempfile.mkdtemp(prefix="accl-dist-"), os.getpid()
        os.environ["TEMP_DIR"] = placeholder
        # Forked test processes inherit the handler: only this process removes the directory.
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(placeholder, ignore_errors=True))
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    import unittest

    import torch
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    from torch.testing._internal import common_distributed
    from torch.testing._internal.common_distributed import DistTestCases

    if mode != "gloo":
        import torch_accl  # noqa: F401  registers "accl"
    if mode == "accl":
        for feature in ("plugin", "ddp", "subgroup"):
            DistTestCases.backend_feature[feature].add("accl")
    if mode == "accl-as-gloo":
        import inspect
        helper = c10d._new_process_group_helper
        sig = inspect.signature(helper)

        def on_accl(*a, **kw):
            bound = sig.bind(*a, **kw)
            b = bound.arguments["backend"]
            if isinstance(b, str):
                bound.arguments["backend"] = dist.Backend(b.replace("gloo", "accl")) if ":" not in b \
                    else b.replace("gloo", "accl")
            return helper(*bound.args, **bound.kwargs)
        c10d._new_process_group_helper = on_accl

    # The per-test limit of torch's own runner (it kills the ranks past it); a hang costs this much.
    common_distributed.TIMEOUT_DEFAULT = args.test_timeout
    from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend

    class TestDistBackendWithFork(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._start_processes(torch.multiprocessing.get_context("fork").Process)

        def _get_timedout_process_traceback(self):
            # torch asks a hung rank for its Python traceback through its pipe, which a rank
            # past its test (in destroy_process_group or at exit) has closed: print every live
            # rank's native stacks first, where a hang inside the library shows.
            print_native_stacks([p.pid for p in self.processes if p.exitcode is None])
            super()._get_timedout_process_traceback()

    names = sorted(n for n in dir(TestDistBackendWithFork) if n.startswith("test_"))
    groups = set(args.groups.split(","))
    names = [n for n in names if group_of(n) in groups and (not args.tests or re.search(args.tests, n))]
    # accl-as-gloo makes the same skip decisions as gloo (BACKEND=gloo): a test gloo skipped is
    # not started again (each start forks the ranks and sets up a group: ~1 s).
    skip_as = {}
    if args.skip_as:
        with open(args.skip_as) as f:
            for line in f:
                r = json.loads(line)
                if r["status"] == "skipped":
                    skip_as[r["test"]] = r["detail"]

    class Result(unittest.TestResult):
        def __init__(self, sink):
            super().__init__()
            self.sink = sink

        def startTest(self, test):
            super().startTest(test)
            self.t0 = time.monotonic()
            self.status, self.detail = "passed", ""

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self.status, self.detail = "failed", self._exc_info_to_string(err, test)

        def addError(self, test, err):
            super().addError(test, err)
            self.status, self.detail = "failed", self._exc_info_to_string(err, test)

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self.status, self.detail = "skipped", reason

        def stopTest(self, test):
            super().stopTest(test)
            name = test.id().split(".")[-1]
            rec = dict(test=name, group=group_of(name), status=self.status, seconds=round(time.monotonic() - self.t0, 2),
                       detail=self.detail[-4000:])
            self.sink.write(json.dumps(rec) + "\n")
            self.sink.flush()
            print(f"[{mode} ws={ws}] {name}: {self.status} ({rec['seconds']} s)", file=sys.__stderr__, flush=True)

    with open(args.out, "w") as sink:
        for n in [n for n in names if n in skip_as]:
            rec = dict(test=n, group=group_of(n), status="skipped", seconds=0, detail="as on gloo: " + skip_as[n])
            sink.write(json.dumps(rec) + "\n")
        suite = unittest.TestSuite(TestDistBackendWithFork(n) for n in names if n not in skip_as)
        suite.run(Result(sink))
    return 0


def print_native_stacks(pids):
    """Every thread's native stack of each process (gdb), to stderr, or why it cannot."""
    gdb = shutil.which("gdb")
    for pid in pids:
        if gdb is None:
            print(f"rank process {pid} hung; no gdb to print its stacks (scripts/install-deps.sh installs it)",
                  file=sys.__stderr__, flush=True)
            continue
        r = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                           capture_output=True, text=True, timeout=120)
        frames = [l for l in r.stdout.splitlines() if l.startswith(("Thread ", "#"))]
        print(f"=== native stacks of hung rank process {pid} ===\n" + "\n".join(frames or [r.stderr[-2000:]]),
              file=sys.__stderr__, flush=True)


# ---------------------------------------------------------------------------------------------
# The driver: every mode at every world size, a table, and the comparison.

def run_all(args):
    modes = args.modes.split(",")
    results = {}  # (mode, ws) -> {test: rec}
    gloo_out = {}
    t_start = time.monotonic()
    for ws in [int(w) for w in args.world_sizes.split(",")]:
        for mode in modes:
            with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as f:
                out = f.name
            log = out[:-6] + ".log"
            cmd = [sys.executable, os.path.abspath(__file__), "--mode", mode, "--world-size", str(ws), "--groups",
                   args.groups, "--out", out, "--test-timeout", str(args.test_timeout)]
            if args.tests:
                cmd += ["--tests", args.tests]
            if mode == "accl-as-gloo" and ("gloo", ws) in gloo_out:
                cmd += ["--skip-as", gloo_out[("gloo", ws)]]
            t0 = time.monotonic()
            with open(log, "w") as lf:
                rc = subprocess.call(cmd, stdout=lf, stderr=subprocess.STDOUT)
            recs = {}
            with open(out) as f:
                for line in f:
                    r = json.loads(line)
                    recs[r["test"]] = r
            if mode == "gloo":
                gloo_out[(mode, ws)] = out
            results[(mode, ws)] = recs
            print(f"{mode} ws={ws}: {len(recs)} tests in {time.monotonic() - t0:.0f} s (log {log}, rc {rc})", flush=True)
            if rc != 0:
                print(open(log).read()[-3000:])
                for out in gloo_out.values():
                    os.unlink(out)
                return 1
    for out in gloo_out.values():
        os.unlink(out)
    print(f"total {time.monotonic() - t_start:.0f} s\n")
    return report(results, modes, args)


def counts(recs, group):
    c = {"passed": 0, "failed": 0, "skipped": 0}
    for r in recs.values():
        if group in (None, r["group"]):
            c[r["status"]] += 1
    return c


def report(results, modes, args):
    wss = sorted({ws for _, ws in results})
    fmt = lambda c: f"{c['passed']:>3}/{c['failed']:>2}/{c['skipped']:>3}"  # noqa: E731
    head = "group".ljust(22) + "".join(f"{m + ' ws=' + str(ws):>20}" for ws in wss for m in modes)
    print("passed/failed/skipped per group")
    print(head)
    groups = [g for g, _ in GROUPS if any(r["group"] == g for recs in results.values() for r in recs.values())]
    for g in groups + [None]:
        row = (g or "TOTAL").ljust(22)
        for ws in wss:
            for m in modes:
                row += f"{fmt(counts(results[(m, ws)], g)):>20}"
        print(row)

    bad = []
    print("\ntests whose outcome differs from gloo:")
    for ws in wss:
        ref = results.get(("gloo", ws))
        if not ref:
            continue
        for m in modes:
            if m == "gloo":
                continue
            for name, r in sorted(results[(m, ws)].items()):
                g = ref.get(name)
                if not g or g["status"] == r["status"]:
                    continue
                known = known_difference(name, r) if m == "accl-as-gloo" else None
                errs = [ln for ln in r["detail"].splitlines() if re.search(r"Error|Exception|accl:", ln)]
                why = known or (errs or r["detail"].strip().splitlines() or [""])[-1].strip()[:300]
                print(f"  [{m} ws={ws}] {name}: gloo {g['status']}, accl {r['status']}: {why}")
                if m == "accl-as-gloo" and g["status"] == "passed" and not known:
                    bad.append((ws, name, r))
    if bad:
        print(f"\nFAIL: {len(bad)} test(s) pass on gloo but not on accl:")
        for ws, name, r in bad:
            print(f"--- ws={ws} {name} ({r['status']})\n{r['detail'][-2500:]}")
        return 1
    for (m, ws), recs in results.items():
        failed = [n for n, r in recs.items() if r["status"] == "failed" and not known_difference(n, r)]
        if m == "accl" and failed and not args.allow_accl_failures:
            ref = results.get(("gloo", ws), {})
            real = [n for n in failed if ref.get(n, {}).get("status") == "passed" or not ref]
            if real:
                print(f"\nFAIL: mode accl ws={ws} fails {real}")
                return 1
    print("\nOK: every test that passes on gloo passes on accl (known differences listed above)")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["gloo", "accl-as-gloo", "accl"], help="run one mode (internal)")
    p.add_argument("--world-size", type=int, default=2)
    p.add_argument("--out", help="results file of --mode (JSON lines)")
    p.add_argument("--modes", default="gloo,accl-as-gloo")
    p.add_argument("--world-sizes", default="2")
    p.add_argument("--groups", default="default", help="comma list, 'default' or 'all'")
    p.add_argument("--tests", default="", help="regex on test names")
    p.add_argument("--test-timeout", type=int, default=90, help="seconds per test before its ranks are killed")
    p.add_argument("--allow-accl-failures", action="store_true")
    p.add_argument("--skip-as", help="results file (JSON lines) whose skipped tests are not run again")
    args = p.parse_args()
    if args.tests == "small-worldsize":
        args.tests = SMALL_WORLDSIZE
    if args.groups == "default":
        args.groups = ",".join(DEFAULT_GROUPS)
    elif args.groups == "all":
        args.groups = ",".join(g for g, _ in GROUPS)
    if args.mode:
        return run_mode(args)
    return run_all(args)


if __name__ == "__main__":
    sys.exit(main())
