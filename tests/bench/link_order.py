#!/usr/bin/env python3
"""Makes host/cli/link-order.txt: the functions of pichamber that the benchmarks' work runs.

The linker (lld's --symbol-ordering-file, set in host/cli/build.rs) places these functions
next to each other at the start of the binary's code. A short run faults in the binary's code
64 KiB (or a whole page-cache folio) at a time, so functions spread over 40 MiB cost the
process far more resident memory than the same functions packed together.

    python3 tests/bench/link_order.py [--pichamber PATH ...] [--out FILE]

Runs, under valgrind's callgrind (which names every function that executed), the work of
command_startup.py (`run rpc-demo.wasm --command`) and agent_turn.py (one prompt over `rpc`
with hello-tool), each after one run to fill the cache. Valgrind reports other CPU features
than the machine's, so the first of these runs compiles the guest again for them: expect a few
minutes. A Rust symbol's name ends in a hash of its crate's build settings, so each profile
has names of its own: pass each build the file serves (the default: release and dist). The
names stay as long as the crates' versions, dependencies and profiles do; a name the next
build no longer has is skipped by the linker, so the file needs making again only then, or
after larger changes (command_startup.py prints how much of it a binary still has).
Needs valgrind, GNU time (the benchmarks' runs are reused as they are) and real pi's examples
(tests/setup.sh) for rpc-demo.ts.
"""

import argparse
import atexit
import json
import os
import re
import shutil
import subprocess
import tempfile

import agent_turn
import command_startup
from oracles import REPO, pi_releases


def executed(callgrind_out, binary):
    """The names of the functions of `binary` that executed, most instructions first."""
    names = {"ob": {}, "fn": {}}
    cost = {}
    ob = fn = None
    call_line = False
    with open(callgrind_out, errors="replace") as f:
        for line in f:
            m = re.match(r"^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
            if m:
                callee, kind, ident, name = m.groups()
                if name is not None:
                    names[kind][ident] = name
                if not callee:
                    if kind == "ob":
                        ob = names["ob"].get(ident)
                    else:
                        fn = names["fn"].get(ident)
                continue
            if line.startswith("calls="):
                call_line = True  # the next cost line is the callee's, not this function's
                continue
            if line[:1].isdigit() or line[:1] in "+-*":
                if call_line:
                    call_line = False
                elif ob == binary and fn:
                    parts = line.split()
                    if len(parts) >= 2:
                        cost[fn] = cost.get(fn, 0) + int(parts[1])
    return [name for name, _ in sorted(cost.items(), key=lambda kv: -kv[1])]


def callgrind(argv, out):
    return ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}"] + argv


def command_run(pichamber, work, out):
    """command_startup.py's work: one command of rpc-demo.ts, its dialog answered."""
    releases = pi_releases()
    if not releases:
        raise SystemExit("real pi's examples are needed for rpc-demo.ts: run tests/setup.sh first")
    wasm = os.path.join(work, "rpc-demo.wasm")
    subprocess.run([pichamber, "build", os.path.join(releases[0][2], command_startup.EXAMPLE), "-o", wasm],
                   check=True, capture_output=True)
    env = dict(os.environ, PICHAMBER_CACHE_DIR=os.path.join(work, "cache"), HOME=os.path.join(work, "home"))
    os.makedirs(env["HOME"], exist_ok=True)
    argv = [pichamber, "run", wasm, "--command", command_startup.COMMAND, "--answer", command_startup.ANSWER]
    for target in (out + ".warm", out):
        command_startup.run_once({"kind": "pichamber", "argv": callgrind(argv, target), "env": env})


def agent_prompt(pichamber, work, out):
    """agent_turn.py's work: one prompt over `rpc`, the extension's tool and `read` called."""
    with open(os.path.join(work, "notes.txt"), "w") as f:
        f.write("notes\n")
    wasm = os.path.join(work, "hello-tool.wasm")
    subprocess.run([pichamber, "build", agent_turn.EXTENSION, "-o", wasm], check=True, capture_output=True)
    script_path = os.path.join(work, "script.json")
    with open(script_path, "w") as f:
        json.dump(agent_turn.SCRIPT, f)
    for target in (out + ".warm", out):
        argv = lambda models: callgrind([pichamber, "rpc", "-e", wasm, "--models", models,
                                         "--provider", "mock", "--model", "mock-model"], target)
        agent_turn.run_once(argv, pichamber, script_path, work)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target")
    parser.add_argument("--pichamber", nargs="+",
                        default=[os.path.join(target, profile, "pichamber") for profile in ("release", "dist")])
    parser.add_argument("--out", default=os.path.join(REPO, "host", "cli", "link-order.txt"))
    args = parser.parse_args()
    binaries = [os.path.realpath(b) for b in args.pichamber]
    for binary in binaries:
        if not os.path.exists(binary):
            raise SystemExit(f"missing {binary}: build it (cargo build --release; --profile dist) "
                             "or pass --pichamber PATH ...")
    work = tempfile.mkdtemp(prefix="pichamber-order-")  # one compile cache for every binary
    atexit.register(shutil.rmtree, work, True)  # on failure too
    order = []
    for binary in binaries:
        for name, workload in (("run --command", command_run), ("rpc prompt", agent_prompt)):
            out = os.path.join(work, f"callgrind.{workload.__name__}")
            print(f"{binary}, {name}: under callgrind ...", flush=True)
            workload(binary, work, out)
            functions = executed(out, binary)
            listed = set(order)
            fresh = [f for f in functions if f not in listed]
            print(f"  {len(functions)} functions executed, {len(fresh)} not already listed")
            order += fresh
    with open(args.out, "w") as f:
        f.write("\n".join(order) + "\n")
    print(f"wrote {len(order)} symbols to {args.out}")


if __name__ == "__main__":
    main()
