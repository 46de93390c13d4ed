#!/usr/bin/env bash
# Builds the guest shim (QuickJS + the pi prelude) into a WASI component and copies it to
# host/assets/guest-shim.wasm, the prebuilt artifact a fresh clone runs with.
#
# QuickJS is C; its build script wants wasi-sdk, which cannot be downloaded here. Debian's
# clang-14, lld and wasi-libc stand in for it through a wasi-sdk-shaped folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
target_dir=${CARGO_TARGET_DIR:-$here/../target}
mkdir -p "$target_dir"
target_dir=$(cd "$target_dir" && pwd)

need=()
for p in clang-14 llvm-ar-14 wasm-ld-14; do command -v "$p" >/dev/null || need+=("$p"); done
[ -d /usr/include/wasm32-wasi ] || need+=(wasi-libc)
ls /usr/lib/llvm-14/lib/clang/14*/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1 || need+=(clang-rt-wasm32)
if [ ${#need[@]} -gt 0 ]; then
  echo "guest-shim/build.sh: missing ${need[*]}." >&2
  echo "Install with: apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32" >&2
  exit 1
fi
rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2 || rustup target add wasm32-wasip2

sdk="$target_dir/wasi-sdk-shim"
mkdir -p "$sdk/bin" "$sdk/share/wasi-sysroot/include" "$sdk/share/wasi-sysroot/lib"
printf '#!/bin/sh\nexec clang-14 "$@"\n' > "$sdk/bin/clang"
chmod +x "$sdk/bin/clang"
ln -sf /usr/bin/llvm-ar-14 "$sdk/bin/ar"
for t in wasm32-wasi wasm32-wasip1 wasm32-wasip2; do
  ln -sfn /usr/include/wasm32-wasi "$sdk/share/wasi-sysroot/include/$t"
  ln -sfn /usr/lib/wasm32-wasi "$sdk/share/wasi-sysroot/lib/$t"
done

cd "$here"
# SQLite (node:sqlite) is built by the cc crate: the same clang and sysroot; temporary tables
# in memory (the WASI file system layer has no temporary files) and no loadable extensions.
export CC_wasm32_wasip2="$sdk/bin/clang" AR_wasm32_wasip2="$sdk/bin/ar"
export CFLAGS_wasm32_wasip2="--sysroot=$sdk/share/wasi-sysroot"
export LIBSQLITE3_FLAGS="-DSQLITE_TEMP_STORE=3 -DSQLITE_OMIT_LOAD_EXTENSION"
WASI_SDK="$sdk" CARGO_TARGET_DIR="$target_dir" cargo build --target wasm32-wasip2 --release "$@"
out="$target_dir/wasm32-wasip2/release/pichamber_guest_shim.wasm"
dest="${GUEST_SHIM_OUT:-$here/../host/assets/guest-shim.wasm}"
mkdir -p "$(dirname "$dest")"
cp "$out" "$dest"
echo "guest shim: $dest ($(stat -c %s "$dest") bytes)"
