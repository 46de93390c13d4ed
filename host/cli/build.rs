//! Links the functions a `run` or `rpc` session executes next to each other (lld's
//! `--symbol-ordering-file`, from `link-order.txt`, made by `tests/bench/link_order.py`).
//! A short run then faults in a few hundred KiB of the binary's code instead of the 64 KiB
//! around each of ~200 functions spread over 30 MiB: its resident memory is mostly those pages.

fn main() {
    let order = "link-order.txt";
    println!("cargo:rerun-if-changed={order}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let optimised = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    // rustc links x86_64-unknown-linux-gnu with its own lld (since 1.90); another linker
    // would not know the option, and an unoptimised build has no layout worth ordering.
    if target == "x86_64-unknown-linux-gnu" && optimised {
        let path = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join(order);
        println!(
            "cargo:rustc-link-arg-bin=pichamber=-Wl,--symbol-ordering-file={}",
            path.display()
        );
        // Symbols the code no longer has (renamed or inlined since the file was made) are
        // skipped: the order degrades gracefully until it is made again.
        println!("cargo:rustc-link-arg-bin=pichamber=-Wl,--no-warn-symbol-ordering");
    }
}
