#!/usr/bin/env python3
"""Benchmark (not a test): what one event's dispatch to a no-op handler costs.

`pichamber run noop.wasm` with tests/bench/noop.ts (its `turn_start` handler does nothing)
and three lists of steps, each run as one process:

  base          one `--event turn_start`
  subscribed    that, then K more `--event turn_start`: each crosses into the guest and runs
                the handler
  unsubscribed  that, then K `--event turn_end`, which the extension does not handle: each is
                a step of `run` (the session's emit, its result printed) that never reaches
                the guest

so (subscribed - unsubscribed) / K is the dispatch itself: the event and context handed over,
the handler chain run, the result handed back. (unsubscribed - base) / K is what `run` spends
on a step around it. Both are printed in wall time (median of --runs processes each) and in
instructions counted by valgrind's callgrind (one process each; deterministic).

    python3 tests/bench/dispatch.py [--events K] [--runs N] [--pichamber PATH] [--no-callgrind]

Under valgrind the guest's code is compiled again (valgrind's CPU has other features than
the host's) into a cache of the benchmark's own, once per run of this script: about four
minutes on the project's 2-core machine.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

from oracles import REPO

NOOP = os.path.join(REPO, "tests", "bench", "noop.ts")


def steps(kind, events):
    argv = ["--event", "turn_start"]
    if kind != "base":
        argv += ["--event", "turn_start" if kind == "subscribed" else "turn_end"] * events
    return argv


def run(argv, env, expected):
    """Runs one process; fails loudly unless every event's result was printed."""
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    printed = proc.stdout.count(" -> ")
    if proc.returncode != 0 or printed != expected:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed (exit {proc.returncode}, {printed} of {expected} "
                         f"results):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def wall(argv, env, expected, runs):
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        run(argv, env, expected)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def instructions(argv, env, expected, out):
    """Instructions the process executed, as callgrind counted them."""
    run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv, env, expected)
    with open(out) as f:
        for line in f:
            m = re.match(r"(?:summary|totals): (\d+)", line)
            if m:
                return int(m.group(1))
    raise SystemExit(f"no instruction total in {out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1000, help="events per process beyond the first (default 1000)")
    parser.add_argument("--runs", type=int, default=11, help="processes per list of steps for wall time (default 11)")
    parser.add_argument("--pichamber", default=os.path.join(REPO, "target", "release", "pichamber"))
    parser.add_argument("--no-callgrind", action="store_true", help="wall time only")
    args = parser.parse_args()
    if args.events < 1 or args.runs < 1:
        raise SystemExit("--events and --runs must be at least 1")
    if not os.path.exists(args.pichamber):
        raise SystemExit(f"missing {args.pichamber}: build it (cargo build --release) or pass --pichamber PATH")
    callgrind = not args.no_callgrind
    if callgrind and not shutil.which("valgrind"):
        raise SystemExit("valgrind is not installed (apt-get install valgrind), or pass --no-callgrind")

    work = tempfile.mkdtemp(prefix="pichamber-bench-")
    wasm = os.path.join(work, "noop.wasm")
    subprocess.run([args.pichamber, "build", NOOP, "-o", wasm], check=True, capture_output=True)
    env = dict(os.environ, HOME=work, PICHAMBER_CACHE_DIR=os.path.join(work, "cache"))
    kinds = ["base", "subscribed", "unsubscribed"]
    argvs = {k: [args.pichamber, "run", wasm] + steps(k, args.events) for k in kinds}
    expected = {k: 1 if k == "base" else 1 + args.events for k in kinds}

    run(argvs["base"], env, 1)  # compiles the guest into the cache
    seconds = {k: wall(argvs[k], env, expected[k], args.runs) for k in kinds}
    counts = None
    if callgrind:
        vg_env = dict(env, PICHAMBER_CACHE_DIR=os.path.join(work, "valgrind-cache"))
        print("compiling the guest under valgrind (its CPU differs from this one's): a few minutes ...", flush=True)
        run(["valgrind", "--tool=none"] + argvs["base"], vg_env, 1)
        counts = {k: instructions(argvs[k], vg_env, expected[k], os.path.join(work, f"{k}.callgrind")) for k in kinds}

    k = args.events
    print(f"`pichamber run noop.wasm`, {k} events beyond the first; wall: median of {args.runs} processes")
    print(f"  {'':34} {'wall':>10}   {'instructions':>14}")
    for kind in kinds:
        ir = f"{counts[kind]:14,d}" if counts else f"{'-':>14}"
        print(f"  {kind + ' (whole process)':34} {seconds[kind] * 1e3:8.2f}ms   {ir}")
    per_dispatch = (seconds["subscribed"] - seconds["unsubscribed"]) / k
    per_step = (seconds["unsubscribed"] - seconds["base"]) / k
    rows = [("dispatch to the no-op handler", per_dispatch, counts and (counts["subscribed"] - counts["unsubscribed"]) / k),
            ("a step of `run` around it", per_step, counts and (counts["unsubscribed"] - counts["base"]) / k)]
    print("per event:")
    for name, s, ir in rows:
        ir_text = f"{ir:14,.0f}" if counts else f"{'-':>14}"
        print(f"  {name:34} {s * 1e6:8.2f}us   {ir_text}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
