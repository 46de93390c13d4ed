//! Records the hash of the embedded guest shim so a run can find its compiled code in the
//! cache without reading (or hashing) the 1.6 MB component at start-up, and embeds the
//! sources of the shim's virtual modules, whose exports a build checks imports against.
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
        let path = std::fs::canonicalize(js.join(file.as_str().expect("a file name")))
            .expect("a virtual module's file");
        out += &format!(
            "    ({id:?}, include_str!({:?})),\n",
            path.display().to_string()
        );
    }
    out += "];\n";
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("virtual_sources.rs");
    std::fs::write(dest, out).expect("write virtual_sources.rs");
}
