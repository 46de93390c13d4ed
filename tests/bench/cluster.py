#!/usr/bin/env python3
"""Benchmark (not a test): `pichamber serve` as a cluster of three nodes (docs/CLUSTER.md).

Starts a nats-server with JetStream and three `pichamber serve` nodes (a, b, c) on loopback
with tests/fixtures/cluster/counter.js, then:

1. opens N sessions round-robin over the nodes (spread over enough users: a user may have 64
   open per node) and prints how long that took;
2. for D seconds W workers send `/count` prompts to random sessions through random nodes,
   while a few watched users each read one event stream (GET /api/pi/events) on a random
   node; prints prompts/s accepted, refusals, how many were carried to another node, and the
   delay from sending a prompt of a watched user to its `count` status event arriving
   (percentiles, in ms);
3. K times: finds the node running a random session, kills it (SIGKILL), and asks another
   node for the session until it answers 200 (the first request may itself wait for the
   dead node's lease to lapse: that counts); checks another node runs it now, that it
   resumed with every count it had, then starts the killed node again; prints the failover
   time (min / median / p90 / max);
4. prints each node's resident memory (VmRSS, peak VmHWM) after the sessions opened and at
   the end, and the warnings and errors the nodes logged.

    python3 tests/bench/cluster.py [--sessions N] [--workers W] [--seconds D] [--kills K]
                                   [--lease 2s] [--watched U] [--pichamber PATH]
                                   [--nats-server PATH]

Uses the release build by default (target/release/pichamber, or $CARGO_TARGET_DIR's); pass
another with --pichamber. nats-server comes from --nats-server, $PICHAMBER_NATS_SERVER or
PATH (tests/setup.sh installs it). The clients are Python threads on the same machine, so
on a small machine the figures include the client's own overhead. Exits non-zero when the
cluster misbehaves (a node that does not start, a failover that does not happen, a count
lost): the figures gathered until then are printed first.
"""

import argparse
import collections
import concurrent.futures
import http.client
import itertools
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXTENSION = os.path.join(REPO, "tests", "fixtures", "cluster", "counter.js")
NODE_NAMES = ("a", "b", "c")
MAX_PER_USER = 64  # sessions a user may have open on one node


class BenchError(Exception):
    """The cluster did not do what the benchmark needs; the message says what."""


def default_binary():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return os.path.join(target, "release", "pichamber")


def find_nats(given):
    if given:
        return given
    if os.environ.get("PICHAMBER_NATS_SERVER"):
        return os.environ["PICHAMBER_NATS_SERVER"]
    found = shutil.which("nats-server")
    if not found:
        sys.exit("nats-server is needed: pass --nats-server PATH, set PICHAMBER_NATS_SERVER, "
                 "put it on PATH, or `source tests/setup.sh` (it installs it)")
    return found


def token(user):
    return f"bench-cluster-{user:05d}-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path, lines=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip() or "(empty)"
    except OSError:
        return "(none)"


def memory_kib(pid):
    """(VmRSS, VmHWM) in KiB, or None when the process is gone."""
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        return int(fields["VmRSS"].split()[0]), int(fields["VmHWM"].split()[0])
    except (OSError, KeyError, ValueError):
        return None


def pct(values, p):
    """The p-th percentile (nearest rank) of sorted values."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def call(port, method, path, tok, body=None, timeout=30.0):
    """One request on a fresh connection: (status, x-pichamber-node, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Authorization": f"Bearer {tok}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        return response.status, response.getheader("x-pichamber-node", ""), payload
    finally:
        conn.close()


class Nats:
    def __init__(self, binary, workdir):
        self.binary, self.store = binary, os.path.join(workdir, "nats")
        self.log = os.path.join(workdir, "nats.log")
        self.port = free_port()
        self.proc = None

    @property
    def url(self):
        return f"nats://127.0.0.1:{self.port}"

    def start(self):
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", self.store],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BenchError(f"nats-server exited ({self.proc.returncode}):\n{tail(self.log)}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        raise BenchError(f"nats-server did not listen on {self.port} within 15 s:\n{tail(self.log)}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Node:
    """One `pichamber serve` node; started again with the same config after a kill."""

    def __init__(self, name, binary, config, workdir, env):
        self.name, self.binary, self.config = name, binary, config
        self.workdir, self.env = workdir, env
        self.proc, self.port, self.starts = None, None, 0
        self.out = self.err = None

    def start(self, timeout=120.0):
        """Starts it and waits until it serves (a request for an unknown session gets 404,
        which asks NATS); returns the seconds that took."""
        self.starts += 1
        stem = os.path.join(self.workdir, f"{self.name}-{self.starts}")
        self.out, self.err = stem + ".out", stem + ".err"
        started = time.monotonic()
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                [self.binary, "serve", "--config", self.config],
                cwd=self.workdir, env=self.env,
                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            )
        deadline = started + timeout
        url = None
        while url is None:
            if self.proc.poll() is not None:
                raise BenchError(f"node {self.name} exited ({self.proc.returncode}) before it "
                                 f"listened; its stderr ends:\n{tail(self.err)}")
            if time.monotonic() > deadline:
                raise BenchError(f"node {self.name} printed no URL within {timeout:.0f} s; "
                                 f"its stderr ends:\n{tail(self.err)}")
            with open(self.out) as f:
                line = f.readline()
            if line.endswith("\n"):
                url = line.strip()
            else:
                time.sleep(0.05)
        prefix = "http://127.0.0.1:"
        if not url.startswith(prefix):
            raise BenchError(f"node {self.name} printed {url!r}, not {prefix}PORT/")
        self.port = int(url[len(prefix):].rstrip("/"))
        probe = f"/api/pi/sessions/{uuid.uuid4()}"
        last = None
        while time.monotonic() < deadline:
            try:
                status, _, body = call(self.port, "GET", probe, token(0), timeout=10)
                if status == 404:
                    return time.monotonic() - started
                last = f"{status} {body[:200]!r}"
            except OSError as e:
                last = repr(e)
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise BenchError(f"node {self.name} does not serve (last answer: {last}); "
                         f"its stderr ends:\n{tail(self.err)}")

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()


class Watcher(threading.Thread):
    """One event stream of one user: counts its snapshots and hands `count` status events
    to the bench."""

    def __init__(self, bench, user, node):
        super().__init__(daemon=True)
        self.bench, self.user, self.node = bench, user, node
        self.snapshots = set()
        self.events = 0
        self.connected = threading.Event()
        self.stopping = False
        self.error = None
        self.conn = None

    def run(self):
        try:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.node.port, timeout=60)
            self.conn.request("GET", "/api/pi/events",
                              headers={"Authorization": f"Bearer {token(self.user)}"})
            response = self.conn.getresponse()
            if response.status != 200:
                self.error = f"GET /api/pi/events: {response.status} {response.read()[:200]!r}"
                return
            self.connected.set()
            name, data = None, []
            while not self.stopping:
                line = response.readline()
                if not line:
                    if not self.stopping:
                        self.error = "the event stream ended"
                    return
                line = line.decode().rstrip("\r\n")
                if line == "":
                    if name is not None and data:
                        self.dispatch(name, "\n".join(data))
                    name, data = None, []
                elif line.startswith(":"):
                    continue  # keep-alive
                elif line.startswith("event:"):
                    name = line[6:].removeprefix(" ")
                elif line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
        except Exception as e:  # noqa: BLE001 (reported with the figures)
            if not self.stopping:
                self.error = f"event stream on node {self.node.name}: {e!r}"
        finally:
            self.connected.set()

    def dispatch(self, name, data):
        now = time.monotonic()
        self.events += 1
        event = json.loads(data)
        if name == "session.snapshot":
            self.snapshots.add(event.get("sessionId"))
        elif (name == "extension.ui" and event.get("kind") == "status"
              and event.get("key") == "count"):
            self.bench.counted(event.get("sessionId"), event.get("text"), now)

    def stop(self):
        self.stopping = True
        try:
            if self.conn is not None and self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Bench:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.figures = []
        self.problems = []
        self.workdir = tempfile.mkdtemp(prefix="pichamber-cluster-")
        self.nats = Nats(args.nats_server, self.workdir)
        self.nodes = []
        self.sessions = []  # (id, user)
        self.users = (args.sessions + args.per_user - 1) // args.per_user
        self.watched = set(range(min(args.watched, self.users)))
        self.lock = threading.Lock()
        self.pending = collections.defaultdict(collections.deque)  # session -> send entries
        self.latencies = []
        self.unmatched = 0
        self.accepted = collections.Counter()  # session -> prompts accepted

    def say(self, line):
        with self.lock:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def figure(self, line):
        self.figures.append(line)

    # ----- the cluster -----

    def start_cluster(self):
        self.nats.start()
        env = {k: v for k, v in os.environ.items() if k != "PICHAMBER_LOG"}
        env["PICHAMBER_CACHE_DIR"] = self.args.cache_dir
        users = "".join(f'\n[[users]]\nname = "u{u}"\ntoken = "{token(u)}"\n'
                        for u in range(self.users))
        for name in NODE_NAMES:
            config = os.path.join(self.workdir, f"{name}.toml")
            with open(config, "w") as f:
                f.write(f'listen = "127.0.0.1:0"\nextensions = [{json.dumps(EXTENSION)}]\n'
                        f'{users}\n[cluster]\nnats = "{self.nats.url}"\nnode = "{name}"\n'
                        f'lease = "{self.args.lease}"\n')
            self.nodes.append(Node(name, self.args.pichamber, config, self.workdir, env))
        started = time.monotonic()
        # One at a time: the first creates the streams and buckets.
        for node in self.nodes:
            node.start()
        self.figure(f"cluster:             nats-server {self.nats.url}, nodes "
                    + ", ".join(f"{n.name} :{n.port}" for n in self.nodes)
                    + f", lease {self.args.lease}, {self.users} users"
                    + f" (started in {time.monotonic() - started:.1f} s)")

    def stop_cluster(self):
        for node in self.nodes:
            try:
                node.kill()
            except Exception:  # noqa: BLE001
                pass
        self.nats.stop()

    def memory(self, when):
        parts = []
        for node in self.nodes:
            mem = memory_kib(node.proc.pid) if node.alive() else None
            restarted = f" (start {node.starts})" if node.starts > 1 else ""
            parts.append(f"{node.name}{restarted} " + (
                f"{mem[0] / 1024:.0f}/{mem[1] / 1024:.0f}" if mem else "gone"))
        mem = memory_kib(self.nats.proc.pid) if self.nats.proc else None
        if mem:
            parts.append(f"nats-server {mem[0] / 1024:.0f}/{mem[1] / 1024:.0f}")
        self.figure(f"RSS/peak MiB {when + ':':<22} " + ", ".join(parts))

    # ----- 1. sessions -----

    def open_sessions(self):
        n = self.args.sessions
        self.say(f"opening {n} sessions ...")
        done = itertools.count(1)

        def open_one(i):
            user, node = i // self.args.per_user, self.nodes[i % len(self.nodes)]
            status, ran, body = call(node.port, "POST", "/api/pi/sessions", token(user), {},
                                     timeout=120)
            if status != 201:
                raise BenchError(f"POST /api/pi/sessions on node {node.name} (session {i}, "
                                 f"user u{user}): {status} {body[:300]!r}")
            k = next(done)
            if k % max(1, n // 10) == 0:
                self.say(f"  {k}/{n}")
            return json.loads(body)["id"], user

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(self.args.parallel) as pool:
            self.sessions = list(pool.map(open_one, range(n)))
        took = time.monotonic() - started
        self.figure(f"sessions:            {n} opened in {took:.1f} s ({n / took:.0f}/s,"
                    f" {self.args.parallel} at a time, round-robin over the nodes)")

    # ----- 2. load, with watched event streams -----

    def counted(self, session, text, now):
        # A session runs its prompts in the order they arrive: the oldest send still waiting
        # is the one this event answers (two workers racing for one session blur that by the
        # gap between their sends at most).
        with self.lock:
            queue = self.pending.get(session)
            if queue:
                sent = queue.popleft()
                self.latencies.append((now - sent[0]) * 1000)
            else:
                self.unmatched += 1

    def watch(self):
        watchers = []
        per_user = collections.Counter(user for _, user in self.sessions)
        for user in sorted(self.watched):
            w = Watcher(self, user, self.rng.choice(self.nodes))
            w.start()
            watchers.append(w)
        started = time.monotonic()
        deadline = started + 120
        for w in watchers:
            w.connected.wait(max(0.0, deadline - time.monotonic()))
            if w.error:
                raise BenchError(f"user u{w.user}'s event stream on node {w.node.name}: {w.error}")
        # A fresh stream starts with a snapshot of each of the user's sessions.
        while time.monotonic() < deadline:
            if all(len(w.snapshots) >= per_user[w.user] for w in watchers):
                break
            time.sleep(0.1)
        short = [w for w in watchers if len(w.snapshots) < per_user[w.user]]
        for w in short:
            self.problems.append(f"user u{w.user}'s stream on node {w.node.name} had "
                                 f"{len(w.snapshots)} of {per_user[w.user]} snapshots after 120 s")
        self.figure(f"event streams:       {len(watchers)} (one per watched user), with their "
                    f"snapshots in {time.monotonic() - started:.1f} s")
        return watchers

    def load(self, watchers):
        args = self.args
        self.say(f"load: {args.workers} workers for {args.seconds:g} s ...")
        deadline = time.monotonic() + args.seconds
        tally = [None] * args.workers
        serial = itertools.count()

        def worker(index):
            rng = random.Random(f"{args.seed}-{index}")
            conns = {}
            t = {"accepted": collections.Counter(), "refused": collections.Counter(),
                 "errors": collections.Counter(), "carried": 0, "post_ms": [],
                 "samples": []}
            while time.monotonic() < deadline:
                i = rng.randrange(len(self.sessions))
                session, user = self.sessions[i]
                node = rng.choice(self.nodes)
                entry = None
                if user in self.watched:
                    entry = (time.monotonic(), next(serial))
                    with self.lock:
                        self.pending[session].append(entry)
                conn = conns.get(node.name)
                if conn is None:
                    conn = conns[node.name] = http.client.HTTPConnection(
                        "127.0.0.1", node.port, timeout=30)
                sent = time.monotonic()
                try:
                    conn.request("POST", f"/api/pi/sessions/{session}/prompt",
                                 body=b'{"text": "/count"}',
                                 headers={"Authorization": f"Bearer {token(user)}",
                                          "Content-Type": "application/json"})
                    response = conn.getresponse()
                    body = response.read()
                    status, ran = response.status, response.getheader("x-pichamber-node", "")
                except (OSError, http.client.HTTPException) as e:
                    conn.close()
                    del conns[node.name]
                    status, ran, body = None, "", repr(e).encode()
                t["post_ms"].append((time.monotonic() - sent) * 1000)
                if status == 202:
                    t["accepted"][session] += 1
                    if ran != node.name:
                        t["carried"] += 1
                    continue
                if entry is not None:
                    with self.lock:
                        try:
                            self.pending[session].remove(entry)
                        except ValueError:
                            pass  # its event came anyway (a timeout after it ran)
                key = status if status is not None else "no answer"
                (t["refused"] if status is not None else t["errors"])[key] += 1
                if len(t["samples"]) < 3:
                    t["samples"].append(f"{key} via {node.name}: {body[:200]!r}")
            for conn in conns.values():
                conn.close()
            tally[index] = t

        started = time.monotonic()
        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(args.workers)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(args.seconds + 120)
        took = time.monotonic() - started
        if any(t is None for t in tally):
            raise BenchError("a load worker did not finish within 120 s of the deadline")
        for t in tally:
            self.accepted.update(t["accepted"])
        accepted = sum(self.accepted.values())
        refused = sum((t["refused"] for t in tally), collections.Counter())
        errors = sum((t["errors"] for t in tally), collections.Counter())
        carried = sum(t["carried"] for t in tally)
        post_ms = sorted(x for t in tally for x in t["post_ms"])
        samples = [s for t in tally for s in t["samples"]]

        # Let the accepted prompts of watched users run and their events arrive.
        self.say("waiting for the watched users' count events ...")
        drain_deadline = time.monotonic() + 120
        while time.monotonic() < drain_deadline:
            with self.lock:
                waiting = sum(len(q) for q in self.pending.values())
            if waiting == 0 or any(w.error for w in watchers):
                break
            time.sleep(0.2)
        drained = time.monotonic() - started
        with self.lock:
            latencies = sorted(self.latencies)
            missing = sum(len(q) for q in self.pending.values())
            unmatched = self.unmatched

        self.figure(f"prompt POSTs:        {accepted} accepted by {args.workers} workers in "
                    f"{took:.1f} s = {accepted / took:.0f} requests/s; "
                    f"{sum(refused.values())} refused{f' {dict(refused)}' if refused else ''}, "
                    f"{sum(errors.values())} unanswered")
        if accepted:
            self.figure(f"                     {carried} ({carried / accepted * 100:.0f}%) "
                        f"carried to the node running the session")
        self.figure(f"POST latency (ms):   p50 {pct(post_ms, 50):.1f}  p90 {pct(post_ms, 90):.1f}"
                    f"  p99 {pct(post_ms, 99):.1f}  max {pct(post_ms, 100):.1f}"
                    f"  ({len(post_ms)} requests)")
        self.figure(f"prompt -> count event latency (ms), watched users: p50 {pct(latencies, 50):.1f}"
                    f"  p90 {pct(latencies, 90):.1f}  p99 {pct(latencies, 99):.1f}"
                    f"  max {pct(latencies, 100):.1f}  ({len(latencies)} samples; all in "
                    f"{drained:.1f} s)")
        for w in watchers:
            if w.error:
                self.problems.append(f"user u{w.user}'s event stream: {w.error}")
        if refused or errors:
            self.problems.append(f"prompts refused or unanswered during load: "
                                 f"{dict(refused + errors)}; e.g. " + "; ".join(samples[:5]))
        if missing:
            self.problems.append(f"{missing} accepted prompts of watched users had no count "
                                 f"event after 120 s")
        if unmatched:
            self.problems.append(f"{unmatched} count events of watched users matched no prompt")

    # ----- 3. failover -----

    def session_state(self, node, session, user, timeout=60.0):
        status, ran, body = call(node.port, "GET", f"/api/pi/sessions/{session}", token(user),
                                 timeout=timeout)
        state = None
        if status == 200:
            state = json.loads(body).get("snapshot", {}).get("status", {})
        return status, ran, body, state

    def failovers(self):
        args = self.args
        times, restarts, statuses, waited_counts = [], [], collections.Counter(), []
        by_name = {n.name: n for n in self.nodes}
        for k in range(args.kills):
            i = self.rng.randrange(len(self.sessions))
            session, user = self.sessions[i]
            expected = str(self.accepted[session])
            asked = self.rng.choice(self.nodes)
            # Which node runs it (asking claims it, if its node was killed before); with
            # every prompt it accepted run.
            deadline = time.monotonic() + 60
            while True:
                status, owner, body, state = self.session_state(asked, session, user)
                if status == 200 and state.get("count") == expected:
                    break
                if time.monotonic() > deadline:
                    raise BenchError(f"kill {k + 1}: session {session} on node {asked.name}: "
                                     f"{status} {body[:300]!r} (count {expected} expected)")
                time.sleep(0.2)
            victim = by_name.get(owner)
            if victim is None:
                raise BenchError(f"kill {k + 1}: GET session {session} names node {owner!r}")
            others = [n for n in self.nodes if n is not victim]
            self.say(f"kill {k + 1}/{args.kills}: node {victim.name} (runs {session}) ...")
            victim.proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            victim.proc.wait()
            answered, tries = None, 0
            while time.monotonic() - killed < args.failover_timeout:
                node = others[tries % len(others)]
                tries += 1
                try:
                    status, ran, body, state = self.session_state(node, session, user, timeout=30)
                except (OSError, http.client.HTTPException) as e:
                    statuses[f"{type(e).__name__}"] += 1
                    time.sleep(0.1)
                    continue
                if status == 200:
                    answered = time.monotonic() - killed
                    break
                statuses[status] += 1
                if len(self.problems) < 50:
                    self.problems.append(f"kill {k + 1}: GET via {node.name} after the kill: "
                                         f"{status} {body[:200]!r}")
                time.sleep(0.1)
            if answered is None:
                raise BenchError(f"kill {k + 1}: session {session} of killed node {victim.name} "
                                 f"was not served within {args.failover_timeout:.0f} s")
            times.append(answered)
            waited_counts.append(tries)
            if ran == victim.name or ran not in by_name:
                self.problems.append(f"kill {k + 1}: session {session} answered as run by "
                                     f"{ran!r} after {victim.name} was killed")
            if state.get("start") != "resume":
                self.problems.append(f"kill {k + 1}: session {session} on {ran} has start "
                                     f"{state.get('start')!r}, not 'resume'")
            if state.get("count") != expected:
                self.problems.append(f"kill {k + 1}: session {session} resumed on {ran} with "
                                     f"count {state.get('count')!r}, {expected} expected")
            self.say(f"  served by {ran} after {answered:.2f} s ({tries} request(s)); "
                     f"starting {victim.name} again ...")
            restarts.append(victim.start())
        if not times:
            return
        times.sort()
        self.figure(f"failover (ms), kill -9 to the first 200 from another node, {len(times)} "
                    f"kills: min {times[0] * 1000:.0f}  median {statistics.median(times) * 1000:.0f}"
                    f"  p90 {pct(times, 90) * 1000:.0f}  max {times[-1] * 1000:.0f}"
                    f"  (requests per failover: max {max(waited_counts)};"
                    f" other answers {dict(statuses) or 'none'})")
        restarts.sort()
        self.figure(f"node restart (s), start to serving: median {statistics.median(restarts):.2f}"
                    f"  max {restarts[-1]:.2f}")

    # ----- the nodes' logs -----

    def logs(self):
        counts, examples = collections.Counter(), []
        for node in self.nodes:
            for n in range(1, node.starts + 1):
                path = os.path.join(self.workdir, f"{node.name}-{n}.err")
                try:
                    with open(path, errors="replace") as f:
                        lines = f.readlines()
                except OSError:
                    continue
                for line in lines:
                    level = next((lv for lv in ("ERROR", "WARN", "panicked") if lv in line), None)
                    if level:
                        counts[(node.name, level)] += 1
                        if len(examples) < 8:
                            examples.append(f"  {node.name}-{n}: {line.rstrip()[:240]}")
        try:
            with open(self.nats.log, errors="replace") as f:
                for line in f:
                    level = next((lv for lv in ("[ERR]", "[WRN]", "[FTL]") if lv in line), None)
                    if level:
                        counts[("nats-server", level.strip("[]"))] += 1
                        if len(examples) < 8:
                            examples.append(f"  nats-server: {line.rstrip()[:240]}")
        except OSError:
            pass
        if counts:
            self.figure("logs:                " + ", ".join(
                f"{name} {level} {c}" for (name, level), c in sorted(counts.items())))
            self.figures.extend(examples)
        else:
            self.figure("logs:                no warnings or errors (nodes, nats-server)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3000, help="sessions to open (default 3000)")
    parser.add_argument("--per-user", type=int, default=50,
                        help=f"sessions per user, at most {MAX_PER_USER} (default 50)")
    parser.add_argument("--parallel", type=int, default=8,
                        help="sessions opened at once (default 8)")
    parser.add_argument("--workers", type=int, default=8, help="prompt-sending threads (default 8)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load (default 10)")
    parser.add_argument("--watched", type=int, default=5,
                        help="users with an event stream, for prompt-to-event latency (default 5)")
    parser.add_argument("--kills", type=int, default=20, help="nodes killed, one at a time (default 20)")
    parser.add_argument("--lease", default="2s", help="the cluster's lease (default 2s)")
    parser.add_argument("--failover-timeout", type=float, default=120.0,
                        help="seconds a killed node's session may take to be served again (default 120)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--pichamber", default=default_binary(),
                        help="the pichamber binary (default target/release/pichamber, or $CARGO_TARGET_DIR's)")
    parser.add_argument("--nats-server", help="nats-server (default $PICHAMBER_NATS_SERVER, then PATH)")
    parser.add_argument("--cache-dir",
                        default=os.environ.get("PICHAMBER_CACHE_DIR",
                                               os.path.expanduser("~/.cache/pichamber")),
                        help="the nodes' compile cache (default $PICHAMBER_CACHE_DIR or ~/.cache/pichamber)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary folder (configs, node logs, NATS store)")
    args = parser.parse_args()
    if not os.path.exists(args.pichamber):
        sys.exit(f"{args.pichamber}: no such binary (cargo build --release, or pass --pichamber PATH)")
    args.nats_server = find_nats(args.nats_server)
    if not os.path.exists(args.nats_server):
        sys.exit(f"{args.nats_server}: no such nats-server")
    if args.sessions < 1 or args.workers < 1 or args.seconds <= 0 or args.kills < 0:
        sys.exit("--sessions and --workers must be at least 1, --seconds above 0, --kills at least 0")
    if not 1 <= args.per_user <= MAX_PER_USER:
        sys.exit(f"--per-user must be 1 to {MAX_PER_USER} (a user's cap per node)")

    # SIGTERM ends the run as Ctrl-C does: everything started is killed.
    def terminated(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminated)
    bench = Bench(args)
    failure = None
    started = time.monotonic()
    try:
        bench.say(f"temporary folder {bench.workdir}")
        bench.start_cluster()
        bench.open_sessions()
        time.sleep(1)
        bench.memory("sessions open")
        watchers = bench.watch()
        bench.load(watchers)
        for w in watchers:
            w.stop()
        bench.memory("after load")
        bench.failovers()
        bench.memory("end")
    except BenchError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure = "interrupted"
    except Exception:  # noqa: BLE001 (a bug here, or an answer it did not expect)
        failure = traceback.format_exc().rstrip()
    finally:
        bench.stop_cluster()
        try:
            bench.logs()
        finally:
            if args.keep:
                print(f"kept {bench.workdir}", file=sys.stderr)
            else:
                shutil.rmtree(bench.workdir, ignore_errors=True)

    print(f"binary:              {args.pichamber}")
    for line in bench.figures:
        print(line)
    print(f"took:                {time.monotonic() - started:.0f} s")
    if bench.problems:
        print(f"problems ({len(bench.problems)}):")
        for p in bench.problems[:30]:
            print(f"  {p}")
    sys.stdout.flush()
    if failure:
        sys.exit(f"cluster benchmark failed: {failure}")
    return 1 if bench.problems else 0


if __name__ == "__main__":
    sys.exit(main())
