#!/usr/bin/env python3
"""Benchmark (not a test): the GUI server under load, on loopback, bounded.

Starts `pichamber serve` with one user and the GUI test fixture, opens N sessions and M
event-stream clients (GET /api/pi/events, all sessions), then for D seconds W workers send
`/app-next <timestamp>` prompts round-robin over the sessions (each appends a live-panel
card, so every prompt becomes a session.entry and an extension.ui panel event on every
stream). Prints requests/s, the delay from sending a prompt to its panel event arriving at
each stream (percentiles), events delivered, and the server's RSS.

    python3 tests/bench/gui_load.py [--sessions N] [--clients M] [--workers W]
                                    [--seconds D] [--pichamber PATH]

Uses the debug build by default (target/debug/pichamber, or $CARGO_TARGET_DIR's); pass a
release build with --pichamber for production figures. The clients are Python threads, so
on a small machine the figures include the client's own overhead.
"""

import argparse
import http.client
import json
import os
import sys
import threading
import time

import serve

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "gui", "gui-fixture.js")
TOKEN = "bench-token-0123456789abcdef"


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, payload


def rss_kib(pid):
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])


class StreamClient(threading.Thread):
    """Reads the event stream; records the delay of every panel event sent by the bench."""

    def __init__(self, port, ready):
        super().__init__(daemon=True)
        self.port, self.ready = port, ready
        self.latencies, self.events, self.stop = [], 0, False

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("GET", "/api/pi/events", headers={"Authorization": f"Bearer {TOKEN}"})
        response = conn.getresponse()
        assert response.status == 200, response.status
        self.ready.release()
        name = None
        while not self.stop:
            line = response.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:") and name == "extension.ui":
                now = time.time_ns()
                data = json.loads(line[5:])
                self.events += 1
                if data.get("kind") == "panel" and "card" in data:
                    rows = data["card"]["props"]["rows"]
                    sent = rows[1].get("value", "")
                    if sent.isdigit():
                        self.latencies.append((now - int(sent)) / 1e6)
            elif line == "":
                name = None
        conn.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--pichamber", default=serve.default_binary())
    args = parser.parse_args()

    server, port = serve.start(
        args.pichamber,
        {"extensions": [FIXTURE], "users": [{"name": "bench", "token": TOKEN}]},
        "gui-load-",
    )
    try:
        rss_idle = rss_kib(server.pid)

        started = time.monotonic()
        sessions = []
        for _ in range(args.sessions):
            status, body = request(port, "POST", "/api/pi/sessions", {})
            assert status == 201, (status, body)
            sessions.append(json.loads(body)["id"])
        open_s = time.monotonic() - started
        rss_sessions = rss_kib(server.pid)

        ready = threading.Semaphore(0)
        clients = [StreamClient(port, ready) for _ in range(args.clients)]
        for c in clients:
            c.start()
        for _ in clients:
            ready.acquire()

        sent = [0] * args.workers
        refused = [0] * args.workers
        deadline = time.monotonic() + args.seconds

        def worker(index):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            i = index
            while time.monotonic() < deadline:
                session = sessions[i % len(sessions)]
                i += args.workers
                body = json.dumps({"text": f"/app-next {time.time_ns()}"}).encode()
                conn.request(
                    "POST",
                    f"/api/pi/sessions/{session}/prompt",
                    body=body,
                    headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
                )
                response = conn.getresponse()
                response.read()
                if response.status == 202:
                    sent[index] += 1
                else:
                    refused[index] += 1
            conn.close()

        load_started = time.monotonic()
        workers = [threading.Thread(target=worker, args=(i,)) for i in range(args.workers)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        load_s = time.monotonic() - load_started
        total = sum(sent)
        # Let the queued prompts drain and their events arrive.
        expected = total * len(clients)
        drain_deadline = time.monotonic() + 60
        while time.monotonic() < drain_deadline:
            if sum(len(c.latencies) for c in clients) >= expected:
                break
            time.sleep(0.2)
        drained_s = time.monotonic() - load_started
        rss_load = rss_kib(server.pid)

        # Reads: the session list and one session's hydration.
        reads, read_started = 0, time.monotonic()
        while time.monotonic() - read_started < 2:
            status, _ = request(port, "GET", f"/api/pi/sessions/{sessions[reads % len(sessions)]}")
            assert status == 200
            reads += 1
        read_s = time.monotonic() - read_started

        for c in clients:
            c.stop = True
        latencies = sorted(x for c in clients for x in c.latencies)

        def pct(p):
            return latencies[min(len(latencies) - 1, int(p / 100 * len(latencies)))] if latencies else float("nan")

        print(f"binary:              {args.pichamber}")
        print(f"sessions:            {args.sessions} opened in {open_s:.2f} s ({open_s / args.sessions * 1000:.0f} ms each)")
        print(f"event-stream clients: {args.clients}")
        print(f"prompt POSTs:        {total} accepted ({sum(refused)} refused) by {args.workers} workers in {load_s:.1f} s = {total / load_s:.0f} requests/s")
        print(f"all handled and delivered after {drained_s:.1f} s = {total / drained_s:.0f} prompts/s end to end")
        print(f"panel events:        {len(latencies)} of {expected} expected delivered ({sum(c.events for c in clients)} extension.ui events read)")
        print(f"prompt -> panel event latency (ms): p50 {pct(50):.1f}  p90 {pct(90):.1f}  p99 {pct(99):.1f}  max {latencies[-1] if latencies else float('nan'):.1f}")
        print(f"GET /api/pi/sessions/:id: {reads / read_s:.0f} requests/s (one client)")
        print(f"RSS (MiB):           idle {rss_idle[0] / 1024:.0f}, with {args.sessions} sessions {rss_sessions[0] / 1024:.0f}, after load {rss_load[0] / 1024:.0f}, peak {rss_load[1] / 1024:.0f}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
