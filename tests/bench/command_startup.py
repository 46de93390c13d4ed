#!/usr/bin/env python3
"""Benchmark (not a test): one slash command of one extension, from process start to exit.

Runs `pichamber run EXT.wasm --command ... --answer ...` and real pi
(`pi --mode rpc -e EXT.ts`, answering the same dialog over RPC) on the same extension,
several times each, and prints median wall time, peak RSS and the ratios.

    python3 tests/bench/command_startup.py [--runs N] [--pichamber PATH]

Needs the dist build (cargo build --profile dist: the size-optimised release), real pi in tests/oracle
(npm ci --prefix tests/oracle) and GNU time (apt-get install time), which measures the peak
resident memory of each process. Wall time is measured around each process, so it includes
the same small overhead of GNU time for both.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLE = os.path.join(REPO, "tests", "oracle", "node_modules")
EXAMPLE = os.path.join(ORACLE, "@mariozechner", "pi-coding-agent", "examples", "extensions", "rpc-demo.ts")
COMMAND = "/rpc-input"
ANSWER = "benchmark"
TIME = "/usr/bin/time"  # GNU time: reports the peak RSS of exactly the process it runs


def measured(argv):
    """argv prefixed with GNU time writing the peak RSS (KiB) to a file; returns (argv, file).

    The peak RSS of a child started directly from Python would include Python's own memory:
    the kernel carries the forking process's high-water mark across exec."""
    fd, path = tempfile.mkstemp(prefix="pichamber-bench-rss-")
    os.close(fd)
    return [TIME, "-f", "%M", "-o", path] + argv, path


def read_rss(path):
    with open(path) as f:
        value = int(f.read().strip().splitlines()[-1])
    os.unlink(path)
    return value


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
    pi = os.path.join(ORACLE, ".bin", "pi")
    for needed, how in [
        (args.pichamber, "cargo build --profile dist"),
        (pi, "npm ci --prefix tests/oracle"),
        (TIME, "apt-get install time"),
    ]:
        if not os.path.exists(needed):
            raise SystemExit(f"missing {needed}: run `{how}` first")

    work = tempfile.mkdtemp(prefix="pichamber-bench-")
    wasm = os.path.join(work, "rpc-demo.wasm")
    subprocess.run([args.pichamber, "build", EXAMPLE, "-o", wasm], check=True, capture_output=True)
    env = dict(os.environ, PICHAMBER_CACHE_DIR=os.path.join(work, "cache"), HOME=os.path.join(work, "home"))
    os.makedirs(env["HOME"], exist_ok=True)
    ours = {"kind": "pichamber", "argv": [args.pichamber, "run", wasm, "--command", COMMAND, "--answer", ANSWER], "env": env}
    theirs = {"kind": "pi", "argv": [pi, "--mode", "rpc", "--no-session", "-e", EXAMPLE], "env": env, "cwd": work}

    cold = run_once(ours)  # the first run compiles the component into the cache
    results = {}
    for name, spec in [("pichamber", ours), ("pi", theirs)]:
        run_once(spec)  # warm-up (page cache, compile cache)
        samples = [run_once(spec) for _ in range(args.runs)]
        results[name] = (statistics.median(s for s, _ in samples), max(r for _, r in samples))

    (ps, pm), (ns, nm) = results["pichamber"], results["pi"]
    print(f"command {COMMAND} of rpc-demo.ts, answered '{ANSWER}'; median of {args.runs} runs, process start to exit")
    print(f"  pichamber (first run, compiling):  {cold[0] * 1000:8.1f} ms  {cold[1] / 1024:7.1f} MiB peak")
    print(f"  pichamber run rpc-demo.wasm:       {ps * 1000:8.1f} ms  {pm / 1024:7.1f} MiB peak")
    print(f"  pi --mode rpc -e rpc-demo.ts:      {ns * 1000:8.1f} ms  {nm / 1024:7.1f} MiB peak")
    print(f"  ratio pi/pichamber:                {ns / ps:8.1f}x time  {nm / pm:6.1f}x memory")


if __name__ == "__main__":
    main()
