//! Embeds the guest shim with its hash, so a run can find its compiled code in the cache
//! without reading (or hashing) the component at start-up, and the sources of the shim's
//! virtual modules, whose exports a build checks imports against.
use sha2::{Digest, Sha256};

fn main() {
    virtual_sources();
    let path = "../assets/guest-shim.wasm";
    println!("cargo:rerun-if-changed={path}");
    let bytes = std::fs::read(path)
        .expect("host/assets/guest-shim.wasm (build it with guest-shim/build.sh)");
    let hex: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=GUEST_SHIM_SHA256={hex}");
    // The bytes embedded are the ones hashed: a copy of this run's, not the checkout's file,
    // which another checkout sharing the target dir may have made newer than this output.
    let out = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("guest-shim.wasm");
    std::fs::write(out, &bytes).expect("copy the guest shim into OUT_DIR");
}

/// `$OUT_DIR/virtual_sources.rs`: `(module id, its source)` for each virtual module.
fn virtual_sources() {
    let js = std::path::Path::new("../../guest-shim/js");
    let table = js.join("virtual-modules.json");
    println!("cargo:rerun-if-changed={}", js.display());
    let text = std::fs::read_to_string(&table).expect("guest-shim/js/virtual-modules.json");
    let modules: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let mut out = String::from("pub static VIRTUAL_SOURCES: &[(&str, &str)] = &[\n");
    for (id, file) in modules["modules"].as_object().expect("a modules table") {
        let file = file.as_str().expect("a file name");
        assert!(js.join(file).is_file(), "guest-shim/js/{file} is missing");
        // Relative to the crate being compiled, not to this checkout: cargo shares a build
        // script's output between checkouts that share a target dir.
        out += &format!(
            "    ({id:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/../../guest-shim/js/{file}\"))),\n"
        );
    }
    out += "];\n";
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("virtual_sources.rs");
    std::fs::write(dest, out).expect("write virtual_sources.rs");
}
