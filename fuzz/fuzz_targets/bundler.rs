//! The bundler on hostile sources and package layouts: any input gives a build error or an
//! artifact, never a crash, and never a module read from outside the package. The input picks
//! a layout (its first byte) and is the source of the package's entry (the rest); next to the
//! package lies a secret, which no bundled module may contain.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pichamber_artifact::bundle::bundle;

const SECRET: &str = "FUZZ-SECRET-4b1f";

fuzz_target!(|data: &[u8]| {
    let Some((&layout, source)) = data.split_first() else {
        return;
    };
    let Ok(source) = std::str::from_utf8(source) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("secret.js"), format!("module.exports = {SECRET:?};\n")).unwrap();
    let package = root.join("pkg");
    std::fs::create_dir_all(package.join("node_modules/dep")).unwrap();
    std::fs::write(package.join("node_modules/dep/index.js"), "module.exports = 1;\n").unwrap();
    std::fs::write(package.join("lib.ts"), "export const lib = 2;\n").unwrap();
    let entry = match layout % 4 {
        0 => "index.ts",
        1 => "index.js",
        2 => "index.mjs",
        _ => "index.cjs",
    };
    std::fs::write(package.join(entry), source).unwrap();
    if layout & 4 != 0 {
        // A symlink planted in the package, pointing at the secret.
        let _ = std::os::unix::fs::symlink(root.join("secret.js"), package.join("link.js"));
    }
    if layout & 8 != 0 {
        std::fs::write(package.join("package.json"), r#"{"name":"pkg","pi":{"extensions":["./index.ts"]}}"#).unwrap();
    }
    if let Ok(built) = bundle(&package) {
        for module in &built.modules {
            assert!(
                !module.code.contains(SECRET),
                "{} holds the secret from outside the package",
                module.id
            );
        }
    }
});
