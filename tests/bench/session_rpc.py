#!/usr/bin/env python3
"""Benchmark (not a test): a new session, and a no-op command's round trip, over pi's RPC mode.

One long-lived process per side with tests/bench/noop.ts loaded: `new_session` requests, then
`/noop` prompts, each timed from the request written to its response read, and the page
faults the process took per new session (the kernel's count of its minor faults: pages an
instance's slot had to map again). Sides, in one run:

  pichamber                  `pichamber rpc -e noop.wasm`: instances start from the extension's
                             own snapshot (its modules compiled in, those that touch no session
                             evaluated; made before the run)
  pichamber, compiled only   PICHAMBER_PREINIT=compiled: from the extension's own snapshot made
                             without evaluating its modules
  pichamber, shim snapshot   PICHAMBER_PREINIT=shim: from the guest's snapshot, compiling the
                             extension's modules in each instance
  pichamber, no snapshot     PICHAMBER_PREINIT=off: every instance initialises QuickJS and
                             compiles its modules itself (the baseline)
  pi 1.6.0, pi 0.73.1        `pi --mode rpc -e noop.ts` (skipped when not installed)

    python3 tests/bench/session_rpc.py [--requests N] [--pichamber PATH] [--extension PATH]

`--extension` times new sessions of another extension (a file or a package folder, as `-e`
takes it) instead, with no command round trip.

Real pi comes from tests/setup.sh (tests/oracle, tests/oracle-1.6 and Node 24 for 1.6.0).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from oracles import REPO, pi_releases

NOOP = os.path.join(REPO, "tests", "bench", "noop.ts")


class Rpc:
    """A process speaking pi's RPC protocol: JSON lines in, JSON lines out."""

    def __init__(self, argv, env, cwd):
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=env, cwd=cwd)
        self.next_id = 0

    def request(self, command):
        """Sends one command; returns (seconds until its response, the response)."""
        self.next_id += 1
        rid = f"b{self.next_id}"
        start = time.perf_counter()
        self.proc.stdin.write(json.dumps(dict(command, id=rid)) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("type") == "response" and record.get("id") == rid:
                elapsed = time.perf_counter() - start
                if not record.get("success"):
                    raise SystemExit(f"{command['type']} failed: {record}")
                return elapsed, record
        raise SystemExit(f"the process exited before answering {command}")

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def measure(argv, env, cwd, requests, noop):
    rpc = Rpc(argv, env, cwd)
    try:
        commands = rpc.request({"type": "get_commands"})[1]
        names = [c.get("name") for c in commands.get("data", {}).get("commands", [])]
        if noop and "noop" not in names:
            raise SystemExit(f"{argv[0]} did not load noop.ts (commands: {names})")
        if not names:
            raise SystemExit(f"{argv[0]} loaded no command of the extension")
        for _ in range(3):  # warm-up
            rpc.request({"type": "new_session"})
            if noop:
                rpc.request({"type": "prompt", "message": "/noop"})
        faults = minor_faults(rpc.proc.pid)
        sessions = [rpc.request({"type": "new_session"})[0] for _ in range(requests)]
        faults = (minor_faults(rpc.proc.pid) - faults) / requests
        if not noop:
            return sessions, [float("nan")], faults
        noops = [rpc.request({"type": "prompt", "message": "/noop"})[0] for _ in range(requests)]
        return sessions, noops, faults
    finally:
        rpc.close()


def minor_faults(pid):
    """The process's minor page faults so far (/proc/PID/stat, field 10)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def summary(samples):
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(len(ordered) * 0.9) - 1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=100, help="requests of each kind per side (default 100)")
    parser.add_argument("--pichamber", default=os.path.join(REPO, "target", "release", "pichamber"))
    parser.add_argument("--extension", default=NOOP, help="the extension whose sessions are timed (default tests/bench/noop.ts)")
    args = parser.parse_args()
    extension = os.path.abspath(args.extension)
    noop = extension == NOOP
    if not os.path.exists(args.pichamber):
        raise SystemExit(f"missing {args.pichamber}: build it (cargo build --release) or pass --pichamber PATH")

    work = tempfile.mkdtemp(prefix="pichamber-bench-")
    home = os.path.join(work, "home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home, PICHAMBER_CACHE_DIR=os.path.join(work, "cache"),
               PI_CODING_AGENT_DIR=os.path.join(home, ".pi", "agent"))
    wasm = os.path.join(work, "extension.wasm")
    subprocess.run([args.pichamber, "build", extension, "-o", wasm], check=True, capture_output=True)
    ours = [args.pichamber, "rpc", "--no-session", "-e", wasm]
    # Fills the compile cache: the guest's snapshot, the extension's own and the code as built.
    for preinit in ["extension", "compiled", "off"]:
        subprocess.run(ours + ["--print", "--", "/noop" if noop else "hello"], env=dict(env, PICHAMBER_PREINIT=preinit),
                       cwd=work, capture_output=True, timeout=600)

    sides = [
        ("pichamber", ours, env),
        ("pichamber, compiled only", ours, dict(env, PICHAMBER_PREINIT="compiled")),
        ("pichamber, shim snapshot", ours, dict(env, PICHAMBER_PREINIT="shim")),
        ("pichamber, no snapshot", ours, dict(env, PICHAMBER_PREINIT="off")),
    ]
    for release, pi, _ in pi_releases():
        sides.append((f"pi {release}", pi + ["--mode", "rpc", "--no-session", "-e", extension], env))

    results, faults = {}, {}
    for name, argv, side_env in sides:
        sessions, noops, faults[name] = measure(argv, side_env, work, args.requests, noop)
        results[name] = [summary(sessions), summary(noops)]

    loaded = os.path.relpath(extension, REPO)
    print(f"over pi's RPC mode, {loaded} loaded; {args.requests} requests of each kind, one process per side")
    print(f"  {'':24} {'new_session':>22} {'faults':>7}   {'/noop round trip':>22}")
    print(f"  {'':24} {'median':>10} {'p90':>10} {'each':>7}   {'median':>10} {'p90':>10}")
    for name, ((sm, sp), (nm, np)) in results.items():
        print(f"  {name:24} {sm * 1e3:8.3f}ms {sp * 1e3:8.3f}ms {faults[name]:7.1f}"
              f"   {nm * 1e3:8.3f}ms {np * 1e3:8.3f}ms")
    base = results["pichamber"]
    for name, ((sm, _), (nm, _)) in results.items():
        if name != "pichamber":
            print(f"  {name + ' / pichamber':34} {sm / base[0][0]:6.1f}x {'':14} {nm / base[1][0]:6.1f}x")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
