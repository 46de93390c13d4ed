//! Embeds the prelude and the virtual modules listed in js/virtual-modules.json.
use std::{env, fs, path::PathBuf};

fn main() {
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("js");
    let list = dir.join("virtual-modules.json");
    println!("cargo:rerun-if-changed={}", dir.display());
    let table: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&list).unwrap()).unwrap();
    let mut out = String::from("pub static VIRTUAL_MODULES: &[(&str, &str)] = &[\n");
    for (id, file) in table["modules"].as_object().unwrap() {
        let path = dir.join(file.as_str().unwrap());
        assert!(path.exists(), "{} is listed but missing", path.display());
        println!("cargo:rerun-if-changed={}", path.display());
        out.push_str(&format!(
            "    ({id:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    fs::write(
        PathBuf::from(env::var("OUT_DIR").unwrap()).join("virtual_modules.rs"),
        out,
    )
    .unwrap();
}
