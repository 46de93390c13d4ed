#!/usr/bin/env python3
"""Benchmark (not a test): resident memory of idle sessions in `pichamber serve`.

Starts `pichamber serve` with tests/bench/noop.ts (a session_start handler and a /noop
command) and enough users for the largest count (a user may have 64 sessions open), opens
sessions up to each count (100, 1,000 and 10,000 by default) and prints, once they are open
and idle, the server's resident memory, its anonymous share and the growth per session over
the server with none; then how many pages of the image it starts from each session wrote
(copied), where in the image, and in how many runs of consecutive pages (past 32, a slot
that is freed and reused faults the pages past the 32nd run in again: see README). Then the
same with a second server whose sessions hibernate (`hibernate_after`), measured once they
have, and the time a request takes that wakes one (an argument completion of /noop, which
reaches the extension) against the same request once it is awake.

    python3 tests/bench/serve_memory.py [--counts 100,1000,10000] [--extension FILE]
                                        [--pichamber PATH] [--hibernate-after 2s|off]

Uses the debug build by default (target/debug/pichamber, or $CARGO_TARGET_DIR's); pass a
release build with --pichamber for production figures.
"""

import argparse
import collections
import concurrent.futures
import http.client
import json
import os
import statistics
import struct
import sys
import time

import serve

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXTENSION = os.path.join(REPO, "tests", "bench", "noop.ts")
PER_USER = 64


def token(user):
    return f"bench-token-{user:05d}-0123456789abcdef"


def memory_kib(pid):
    """(resident, anonymous) in KiB, from smaps_rollup."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                fields[key] = int(value.split()[0])
    return fields["Rss"], fields["Anonymous"]


def open_session(port, user):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request(
        "POST",
        "/api/pi/sessions",
        body=b"{}",
        headers={"Authorization": f"Bearer {token(user)}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    body = response.read()
    conn.close()
    if response.status != 201:
        raise RuntimeError(f"POST /api/pi/sessions: {response.status} {body[:200]!r}")
    return json.loads(body)["id"]


def image_pages(pid):
    """What the sessions wrote of the image they start from, from the kernel's pagemap.

    Each instance maps the image from the compiled file, privately: a page it wrote is its own
    (anonymous) copy, one it only read is still the file's. Returns (image pages, median
    written per instance, [share of the pages written in each eighth of the image, averaged
    over the instances], median runs of consecutive written pages per instance), or None when
    no image mapping is found."""
    mappings = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[1] == "rw-p" and parts[5].endswith(".cwasm"):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                mappings.append((start, end))
    if not mappings:
        return None
    pages = max((end - start) // 4096 for start, end in mappings)
    eighth = -(-pages // 8)
    written, runs, bands = [], [], collections.Counter()
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for start, end in mappings:
            pagemap.seek(start // 4096 * 8)
            entries = pagemap.read((end - start) // 4096 * 8)
            count, run_count, previous = 0, 0, False
            for page in range(len(entries) // 8):
                entry = struct.unpack_from("<Q", entries, page * 8)[0]
                present, file_page = entry >> 63 & 1, entry >> 61 & 1
                copied = bool(present and not file_page)
                if copied:
                    count += 1
                    bands[page // eighth] += 1
                    run_count += not previous
                previous = copied
            written.append(count)
            runs.append(run_count)
    shares = [bands[b] / len(mappings) / min(eighth, pages - b * eighth) for b in range(8) if b * eighth < pages]
    return pages, statistics.median(written), shares, statistics.median(runs)


def seconds_of(duration):
    """A duration as the server reads it ("500ms", "2s", "1m"), in seconds; None for "off"."""
    if duration == "off":
        return None
    for suffix, scale in (("ms", 0.001), ("s", 1), ("m", 60)):
        if duration.endswith(suffix) and duration[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(duration[: -len(suffix)]) * scale
    sys.exit(f"--hibernate-after {duration!r}: give a duration such as 2s or 500ms, or off")


def settle(pid, seconds=2.0):
    """Waits until resident memory stops moving (sessions finish their start in the background)."""
    last = memory_kib(pid)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(seconds)
        now = memory_kib(pid)
        if abs(now[0] - last[0]) < 256:
            return now
        last = now
    return last


def complete_ms(connection, user, session):
    """Times one argument completion of /noop: a round trip through the session to its
    extension's instance (waking it when it hibernates)."""
    started = time.perf_counter()
    connection.request(
        "GET",
        f"/api/pi/sessions/{session}/complete?command=noop&prefix=",
        headers={"Authorization": f"Bearer {token(user)}"},
    )
    response = connection.getresponse()
    body = response.read()
    took = (time.perf_counter() - started) * 1000
    if response.status != 200:
        raise RuntimeError(f"GET .../complete: {response.status} {body[:200]!r}")
    return took


def measure(args, counts, hibernate_after):
    """One server: opens sessions up to each count and prints the memory they hold, awake
    (no hibernation) or once they have hibernated; with hibernation, then the time to wake."""
    users = (counts[-1] + PER_USER - 1) // PER_USER
    server, port = serve.start(
        args.pichamber,
        {
            "extensions": [os.path.abspath(args.extension)],
            "users": [{"name": f"u{u}", "token": token(u)} for u in range(users)],
            "hibernate_after": args.hibernate_after if hibernate_after else "off",
        },
        "serve-memory-",
    )
    try:
        base_rss, base_anon = settle(server.pid, 0.5)
        state = f"hibernated (hibernate_after {args.hibernate_after})" if hibernate_after else "awake"
        print(f"\n{state}:")
        print(f"{'sessions':>9} {'open s':>8} {'RSS MiB':>9} {'anon MiB':>9}"
              f" {'RSS/session':>12} {'anon/session':>13}")
        print(f"{0:>9} {'':>8} {base_rss / 1024:>9.1f} {base_anon / 1024:>9.1f}")
        sessions = []
        pool = concurrent.futures.ThreadPoolExecutor(args.parallel)
        for count in counts:
            started = time.monotonic()
            # Session i belongs to user i // 64: every user fills up before the next.
            sessions += pool.map(lambda i: (i // PER_USER, open_session(port, i // PER_USER)),
                                 range(len(sessions), count))
            took = time.monotonic() - started
            if hibernate_after:
                # Every session opened has then been idle that long, and hibernated.
                time.sleep(hibernate_after + 1)
            rss, anon = settle(server.pid)
            print(f"{count:>9} {took:>8.1f} {rss / 1024:>9.1f} {anon / 1024:>9.1f}"
                  f" {(rss - base_rss) / count:>8.0f} KiB {(anon - base_anon) / count:>9.0f} KiB",
                  flush=True)
        if not hibernate_after:
            image = image_pages(server.pid)
            if image:
                pages, written, bands, runs = image
                print(f"each session wrote {written:.0f} of its image's {pages} pages ({written * 4:.0f} KiB); "
                      "share written of each eighth of the image, first to last: "
                      + " ".join(f"{share:.0%}" for share in bands))
                # wasmtime 48 resets a freed slot's first 32 runs of written pages from the image
                # and decommits the rest, which the slot's next instance then faults in again.
                warning = " (over 32: a reused slot faults the rest in again)" if runs > 32 else ""
                print(f"in {runs:.0f} runs of consecutive pages{warning}")
            return
        # Wake some: each one's first completion wakes it, its second finds it awake.
        sample = sessions[:: max(1, len(sessions) // 200)][:200]
        connections = {}
        woken, awake = [], []
        for user, session in sample:
            connection = connections.setdefault(
                user, http.client.HTTPConnection("127.0.0.1", port, timeout=120))
            woken.append(complete_ms(connection, user, session))
        for user, session in sample:
            awake.append(complete_ms(connections[user], user, session))
        print(f"argument completion round trip over HTTP, {len(sample)} sessions: "
              f"median {statistics.median(woken):.3f} ms waking a hibernated one, "
              f"{statistics.median(awake):.3f} ms awake "
              f"(waking: {statistics.median(woken) - statistics.median(awake):+.3f} ms)")
    finally:
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="100,1000,10000",
                        help="session counts to measure at, ascending (default 100,1000,10000)")
    parser.add_argument("--extension", default=EXTENSION,
                        help="the extension every session loads (default tests/bench/noop.ts)")
    parser.add_argument("--pichamber", default=serve.default_binary(), help="the pichamber binary")
    parser.add_argument("--parallel", type=int, default=8, help="sessions opened at once")
    parser.add_argument("--hibernate-after", default="2s",
                        help="the second server's hibernate_after (\"2s\", the default), whose "
                             "sessions are measured once hibernated; \"off\": only awake ones")
    args = parser.parse_args()
    try:
        counts = sorted(int(c) for c in args.counts.split(","))
    except ValueError:
        sys.exit(f"--counts {args.counts!r}: give session counts separated by commas, e.g. 100,1000")
    if not counts or counts[0] < 1:
        sys.exit("--counts: every count must be at least 1")
    hibernate_after = seconds_of(args.hibernate_after)
    if not os.path.exists(args.pichamber):
        sys.exit(f"{args.pichamber}: no such binary (cargo build, or pass --pichamber PATH)")
    shown = os.path.relpath(os.path.abspath(args.extension), REPO)
    print(f"pichamber serve ({args.pichamber}), {shown}, {-(-counts[-1] // PER_USER)} users")
    measure(args, counts, None)
    if hibernate_after is not None:
        measure(args, counts, hibernate_after)


if __name__ == "__main__":
    main()
