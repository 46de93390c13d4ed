//! Records the hash of the embedded guest shim so a run can find its compiled code in the
//! cache without reading (or hashing) the 1.6 MB component at start-up.
use sha2::{Digest, Sha256};

fn main() {
    let path = "../assets/guest-shim.wasm";
    println!("cargo:rerun-if-changed={path}");
    let bytes = std::fs::read(path)
        .expect("host/assets/guest-shim.wasm (build it with guest-shim/build.sh)");
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=GUEST_SHIM_SHA256={hex}");
}
