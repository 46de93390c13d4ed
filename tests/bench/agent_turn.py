#!/usr/bin/env python3
"""Benchmark (not a test): one agent prompt over pi's RPC protocol, process start to exit.

The same scripted model (`pichamber mock-model`, an OpenAI-compatible endpoint on loopback)
answers every side: a turn that calls the extension's tool and the built-in `read`, then a
text turn. Runs `pichamber rpc -e hello-tool` and real pi 1.6.0 and 0.73.1
(`pi --mode rpc -e hello-tool/index.ts`), sends one prompt, waits for `agent_end`, closes
stdin, and prints median wall time, peak RSS and their ratios.

    python3 tests/bench/agent_turn.py [--runs N] [--pichamber PATH]

Needs the dist build (cargo build --profile dist: the size-optimised release), real pi 1.6.0
and 0.73.1 (tests/setup.sh) and GNU time (apt-get install time).
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

EXTENSION = os.path.join(REPO, "extensions", "hello-tool", "index.ts")
SCRIPT = {
    "turns": [
        {
            "text": "Greeting and reading.",
            "toolCalls": [
                {"id": "c1", "name": "greet", "arguments": {"name": "Ada"}},
                {"id": "c2", "name": "read", "arguments": {"path": "notes.txt"}},
            ],
        },
        {"text": "Done."},
    ]
}


def mock_model(pichamber, script_path):
    """A fresh scripted endpoint (a script is consumed turn by turn): (process, base URL)."""
    proc = subprocess.Popen(
        [pichamber, "mock-model", "--script", script_path, "--api-key", "bench"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    base = json.loads(proc.stdout.readline())["baseUrl"]
    return proc, base


def write_models(agent_dir, base):
    os.makedirs(agent_dir, exist_ok=True)
    models = {"providers": {"mock": {
        "baseUrl": base, "api": "openai-completions", "apiKey": "bench",
        "models": [{"id": "mock-model", "contextWindow": 128000, "maxTokens": 4096}],
    }}}
    path = os.path.join(agent_dir, "models.json")
    with open(path, "w") as f:
        json.dump(models, f)
    return path


def run_once(spec, pichamber, script_path, work):
    mock, base = mock_model(pichamber, script_path)
    agent_dir = tempfile.mkdtemp(prefix="agent-", dir=work)
    models = write_models(agent_dir, base)
    argv = spec(models)
    env = dict(os.environ, PI_CODING_AGENT_DIR=agent_dir, PICHAMBER_CACHE_DIR=os.path.join(work, "cache"))
    argv, rss_file = measured(argv)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, env=env, cwd=work)
    proc.stdin.write(json.dumps({"id": "p", "type": "prompt", "message": "greet Ada and read notes"}) + "\n")
    proc.stdin.flush()
    results = 0
    for line in proc.stdout:
        event = json.loads(line)
        if event.get("type") == "tool_execution_end" and not event.get("isError"):
            results += 1
        if event.get("type") == "agent_end":
            break
    proc.stdin.close()
    proc.wait()
    elapsed = time.perf_counter() - start
    mock.stdin.close()
    mock.wait()
    if results != 2:
        raise SystemExit(f"{' '.join(argv)}: expected two successful tool calls, got {results}")
    return elapsed, read_rss(rss_file)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pichamber", default=os.path.join(REPO, "target", "dist", "pichamber"))
    args = parser.parse_args()
    if not os.path.exists(args.pichamber):
        raise SystemExit(f"missing {args.pichamber}: run `cargo build --profile dist` first, or pass --pichamber PATH")
    releases = pi_releases()
    if not releases:
        raise SystemExit("no real pi to compare with: run tests/setup.sh first")
    work = tempfile.mkdtemp(prefix="pichamber-bench-")
    atexit.register(shutil.rmtree, work, True)  # on failure too
    with open(os.path.join(work, "notes.txt"), "w") as f:
        f.write("bench notes\n" * 50)
    script_path = os.path.join(work, "script.json")
    with open(script_path, "w") as f:
        json.dump(SCRIPT, f)
    wasm = os.path.join(work, "hello-tool.wasm")
    subprocess.run([args.pichamber, "build", EXTENSION, "-o", wasm], check=True, capture_output=True)
    common = ["--provider", "mock", "--model", "mock-model"]
    sides = [("pichamber rpc -e hello-tool.wasm", lambda models: [args.pichamber, "rpc", "-e", wasm, "--models", models] + common)]
    for release, pi, _ in releases:
        sides.append((f"pi {release} --mode rpc -e hello-tool",
                       lambda models, pi=pi: pi + ["--mode", "rpc", "--no-session", "--no-extensions", "--no-skills",
                                                   "--no-prompt-templates", "-e", EXTENSION] + common))
    results = time_sides(sides, lambda spec: run_once(spec, args.pichamber, script_path, work), args.runs)
    print(f"one prompt (extension tool + built-in read, then text) over RPC; median of {args.runs} runs, start to exit")
    print_sides(results, releases, lambda release: f"pi {release} --mode rpc -e hello-tool")
    print_link_order(args.pichamber)

if __name__ == "__main__":
    main()
