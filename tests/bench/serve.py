"""What the serve benchmarks share: the binary they default to and a `pichamber serve` started
on a free loopback port with a given configuration."""

import json
import os
import socket
import subprocess
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_binary():
    """The debug build: target/debug/pichamber, or $CARGO_TARGET_DIR's."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target"))
    return os.path.join(target, "debug", "pichamber")


def start(binary, config, prefix):
    """Starts `binary serve` with `config` (its listen address added) once it listens;
    returns (process, port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = os.path.join(tempfile.mkdtemp(prefix=prefix), "serve.json")
    with open(path, "w") as f:
        json.dump(dict(config, listen=f"127.0.0.1:{port}"), f)
    server = subprocess.Popen(
        [binary, "serve", "--config", path],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PICHAMBER_LOG": "error"},
    )
    if not server.stdout.readline():  # the URL: listening
        raise SystemExit("serve exited before it listened")
    return server, port
