//! The web GUI in a real browser: runs tests/browser/run.mjs (playwright-core driving Debian's
//! chromium against the real `pichamber` server and page) and fails when any case fails.
//! Skipped, saying so, only when /usr/bin/chromium is missing; tests/run.sh installs
//! playwright-core (`npm ci` in tests/browser) and CI installs chromium.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn web_gui_in_chromium() {
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    if !Path::new(&chromium).exists() {
        eprintln!("SKIPPED: browser tests need chromium at {chromium} (apt-get install chromium)");
        return;
    }
    let dir = common::repo().join("tests/browser");
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is not installed: run `npm ci --prefix tests/browser` (tests/run.sh does)"
    );
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap_or(Path::new(env!("CARGO_TARGET_TMPDIR")))
        .join("browser-artifacts");
    let status = Command::new("node")
        .arg(dir.join("run.mjs"))
        .current_dir(common::repo())
        .env("PICHAMBER_BIN", common::bin())
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .env("BROWSER_ARTIFACTS", &artifacts)
        .env_remove("PICHAMBER_LOG")
        .status()
        .expect("run node tests/browser/run.mjs");
    assert!(
        status.success(),
        "browser tests failed (screenshots in {})",
        artifacts.display()
    );
}
