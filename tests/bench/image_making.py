#!/usr/bin/env python3
"""Benchmark (not a test): what making an extension's own snapshot costs.

A process that instantiates an extension a second time makes the extension's own image in
the background (README, "How it works"): the guest shim run with the extension's modules
compiled and evaluated, then compiled as a component. This runs `pichamber run EXT.wasm`
with `PICHAMBER_PREINIT=extension` (the image made before the first session, so the process
waits for it) in a cache that holds the guest's own snapshot but not the extension's image:

  first               an empty cache: the guest's snapshot and the extension's image, both
                      compiled from nothing (once per pichamber build on a machine)
  no function cache   the extension's image, without the compiled functions the guest's
                      snapshot left (functions-1.bin removed): every function compiled again
  function cache      the same with them: the image's functions are the guest's, found there

and prints the median wall and CPU time (user + system) of --runs processes of each, and a
plain run from the finished cache for comparison.

    python3 tests/bench/image_making.py [--runs N] [--pichamber PATH] [--extension FILE]
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

from oracles import REPO

NOOP = os.path.join(REPO, "tests", "bench", "noop.ts")
FUNCTIONS = "functions-1.bin"


def timed(argv, env):
    """(wall, cpu) seconds of one process, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or " -> " not in proc.stdout:
        raise SystemExit(f"{' '.join(argv)} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def entries(cache):
    return set(os.listdir(cache)) if os.path.isdir(cache) else set()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="processes per row (default 3)")
    parser.add_argument("--pichamber", default=os.path.join(REPO, "target", "release", "pichamber"))
    parser.add_argument("--extension", default=NOOP, help="extension source to build (default tests/bench/noop.ts)")
    args = parser.parse_args()
    if args.runs < 1:
        raise SystemExit("--runs must be at least 1")
    if not os.path.exists(args.pichamber):
        raise SystemExit(f"missing {args.pichamber}: build it (cargo build --release) or pass --pichamber PATH")

    work = tempfile.mkdtemp(prefix="pichamber-bench-")
    wasm = os.path.join(work, "ext.wasm")
    subprocess.run([args.pichamber, "build", args.extension, "-o", wasm], check=True, capture_output=True)
    cache = os.path.join(work, "cache")
    env = dict(os.environ, HOME=work, PICHAMBER_CACHE_DIR=cache)
    argv = [args.pichamber, "run", wasm, "--event", "session_start"]
    making = dict(env, PICHAMBER_PREINIT="extension")

    rows = {"first": [], "no function cache": [], "function cache": [], "from the finished cache": []}
    for _ in range(args.runs):
        shutil.rmtree(cache, ignore_errors=True)
        rows["first"].append(timed(argv, making))
    # The guest's snapshot alone, then what the extension's image adds to the cache.
    shutil.rmtree(cache, ignore_errors=True)
    timed(argv, dict(env, PICHAMBER_PREINIT="shim"))
    guest = entries(cache)
    functions = os.path.join(cache, FUNCTIONS)
    kept = os.path.join(work, FUNCTIONS)
    # A build from before the function cache has none: its image is made without.
    has_functions = os.path.exists(functions)
    if has_functions:
        shutil.copy(functions, kept)
    else:
        del rows["function cache"]

    def forget_the_image():
        for name in entries(cache) - guest:
            os.remove(os.path.join(cache, name))

    for _ in range(args.runs):
        forget_the_image()
        if os.path.exists(functions):
            os.remove(functions)
        rows["no function cache"].append(timed(argv, making))
        if has_functions:
            forget_the_image()
            shutil.copy(kept, functions)
            rows["function cache"].append(timed(argv, making))
    for _ in range(args.runs):
        rows["from the finished cache"].append(timed(argv, making))

    kept_text = f"{FUNCTIONS}: {os.path.getsize(kept) / 2**20:.1f} MiB" if has_functions else f"this build keeps no {FUNCTIONS}"
    print(f"`pichamber run` of {os.path.relpath(args.extension, REPO)} with PICHAMBER_PREINIT=extension; "
          f"median of {args.runs} processes ({kept_text})")
    print(f"  {'':28} {'wall':>9} {'CPU':>9}")
    for name, samples in rows.items():
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(f"  {name:28} {wall:8.2f}s {cpu:8.2f}s")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
