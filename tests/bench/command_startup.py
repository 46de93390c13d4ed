#!/usr/bin/env python3
"""Benchmark (not a test): one slash command of one extension, from process start to exit.

Runs `pichamber run EXT.wasm --command ... --answer ...` and real pi 1.6.0 and 0.73.1
(`pi --mode rpc -e EXT.ts`, answering the same dialog over RPC) on pi's rpc-demo.ts,
several times each, and prints median wall time, peak RSS and the ratios.

    python3 tests/bench/command_startup.py [--runs N] [--pichamber PATH]

Needs the dist build (cargo build --profile dist: the size-optimised release), real pi 1.6.0
and 0.73.1 (tests/setup.sh) and GNU time (apt-get install time), which measures the peak
resident memory of each process. Wall time is measured around each process, so it includes
the same small overhead of GNU time for both.
"""

import argparse
import atexit
import json
import os
import shutil
import subprocess
import tempfile
import time

from oracles import REPO, measured, pi_releases, print_link_order, print_sides, read_rss, time_sides

EXAMPLE = "rpc-demo.ts"  # one of pi's example extensions, in both releases
COMMAND = "/rpc-input"
ANSWER = "benchmark"


def run_once(spec):
    """One measurement: (seconds from start to exit, peak RSS KiB)."""
    argv, rss_file = measured(spec["argv"])
    start = time.perf_counter()
    if spec["kind"] == "pichamber":
        proc = subprocess.run(argv, capture_output=True, text=True, env=spec["env"])
        elapsed = time.perf_counter() - start
        if proc.returncode != 0 or ANSWER not in proc.stdout:
            raise SystemExit(f"pichamber run failed: {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    else:
        drive_pi(argv, spec["env"], spec["cwd"])
        elapsed = time.perf_counter() - start
    return elapsed, read_rss(rss_file)


def drive_pi(argv, env, cwd):
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd)
    proc.stdin.write(json.dumps({"id": "c", "type": "prompt", "message": COMMAND}) + "\n")
    proc.stdin.flush()
    answered = False
    for line in proc.stdout:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "extension_ui_request" and event.get("method") == "input":
            proc.stdin.write(json.dumps({"type": "extension_ui_response", "id": event["id"], "value": ANSWER}) + "\n")
            proc.stdin.flush()
        if event.get("type") == "extension_ui_request" and event.get("method") == "notify" and ANSWER in event.get("message", ""):
            answered = True
        if event.get("type") == "response" and event.get("id") == "c":
            break
    proc.stdin.close()
    proc.wait()
    if not answered:
        raise SystemExit("pi did not run the command")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--pichamber", default=os.path.join(REPO, "target", "dist", "pichamber"))
    args = parser.parse_args()
    if not os.path.exists(args.pichamber):
        raise SystemExit(f"missing {args.pichamber}: run `cargo build --profile dist` first, or pass --pichamber PATH")
    releases = pi_releases()
    if not releases:
        raise SystemExit("no real pi to compare with: run tests/setup.sh first")

    work = tempfile.mkdtemp(prefix="pichamber-bench-")
    atexit.register(shutil.rmtree, work, True)  # on failure too
    wasm = os.path.join(work, "rpc-demo.wasm")
    subprocess.run([args.pichamber, "build", os.path.join(releases[0][2], EXAMPLE), "-o", wasm],
                   check=True, capture_output=True)
    env = dict(os.environ, PICHAMBER_CACHE_DIR=os.path.join(work, "cache"), HOME=os.path.join(work, "home"))
    os.makedirs(env["HOME"], exist_ok=True)
    ours = {"kind": "pichamber", "argv": [args.pichamber, "run", wasm, "--command", COMMAND, "--answer", ANSWER], "env": env}
    sides = [("pichamber run rpc-demo.wasm", ours)]
    for release, pi, examples in releases:
        argv = pi + ["--mode", "rpc", "--no-session", "-e", os.path.join(examples, EXAMPLE)]
        sides.append((f"pi {release} --mode rpc -e rpc-demo.ts", {"kind": "pi", "argv": argv, "env": env, "cwd": work}))

    cold = run_once(ours)  # the first run compiles the component into the cache
    results = time_sides(sides, run_once, args.runs)
    print(f"command {COMMAND} of rpc-demo.ts, answered '{ANSWER}'; median of {args.runs} runs, process start to exit")
    print(f"  {'pichamber (first run, compiling)':36} {cold[0] * 1000:8.1f} ms  {cold[1] / 1024:7.1f} MiB peak")
    print_sides(results, releases, lambda release: f"pi {release} --mode rpc -e rpc-demo.ts")
    print_link_order(args.pichamber)

if __name__ == "__main__":
    main()
