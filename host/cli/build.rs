//! Links the functions a `run` or `rpc` session executes next to each other, ahead of the
//! rest of the binary's code (lld's `--symbol-ordering-file`). A short run faults the binary
//! in 64 KiB (or a page-cache folio) at a time, so ~2,500 functions spread over 45 MiB kept
//! 14 MiB of code resident where they hold 1.7 MiB; packed, they cost about that.
//!
//! `link-order.txt` is made by `tests/bench/link_order.py` from the release and dist builds:
//! a Rust symbol ends in a hash of its crate's build settings, so each profile has names of
//! its own. A name the build does not have is skipped (a function renamed or inlined since).

fn main() {
    let order = "link-order.txt";
    println!("cargo:rerun-if-changed={order}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let optimised = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    // rustc links x86_64-unknown-linux-gnu with its own lld (since 1.90), which has the
    // option; an unoptimised build has no layout worth ordering.
    if target == "x86_64-unknown-linux-gnu" && optimised {
        let path = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join(order);
        println!(
            "cargo:rustc-link-arg-bin=pichamber=-Wl,--symbol-ordering-file={}",
            path.display()
        );
        println!("cargo:rustc-link-arg-bin=pichamber=-Wl,--no-warn-symbol-ordering");
    }
}
