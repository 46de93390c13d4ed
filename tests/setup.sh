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
#   npm packages     real pi 0.73.1 (tests/oracle), the third-party extensions
#                    (tests/thirdparty), playwright-core (tests/browser), example extensions'
#                    dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

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

npm_install() { # a folder with package-lock.json
  if [ ! -d "$1/node_modules" ] || [ "$1/package-lock.json" -nt "$1/node_modules" ]; then
    echo "== npm ci in $1"
    npm ci --prefix "$1" --no-audit --no-fund --loglevel=error
    touch "$1/node_modules"
  fi
}
npm_install tests/oracle
npm_install tests/thirdparty
npm_install tests/browser # playwright-core: drives Debian's chromium (no browser download)
for lock in extensions/*/package-lock.json; do
  [ -e "$lock" ] && npm_install "$(dirname "$lock")"
done
echo "== set-up done"
