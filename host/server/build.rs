//! The web page's files as a table of `include_bytes!`, so the binary serves the page without
//! reading the disk.

fn main() {
    embed_web_assets();
}

/// The web page's files (assets/web/, when there is one) as a table of `include_bytes!`,
/// so the binary serves the page without reading the disk.
fn embed_web_assets() {
    use std::path::{Path, PathBuf};
    // The whole assets folder is watched: assets/web may appear after the first build.
    println!("cargo:rerun-if-changed=../assets");
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.is_file() {
                files.push(path);
            }
        }
    }
    let root = Path::new("../assets/web");
    let mut files = Vec::new();
    walk(root, &mut files);
    files.sort();
    let mut table = String::from("pub static WEB_ASSETS: &[(&str, &[u8])] = &[\n");
    for file in files {
        let name = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        // Relative to the package, not absolute: checkouts that share a target folder share
        // this output, and a build script's rerun is decided by the checkout being built.
        table.push_str(&format!(
            "    ({name:?}, include_bytes!(concat!(env!(\"CARGO_MANIFEST_DIR\"), {:?}))),\n",
            format!("/../assets/web/{name}")
        ));
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("web_assets.rs");
    std::fs::write(out, table).unwrap();
}
