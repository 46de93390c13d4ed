//! Helpers shared by the integration tests: run the `pichamber` binary and read its NDJSON.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub mod compare;
pub mod oracle;
pub mod session;
pub mod sse;

use serde_json::Value;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap()
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_pichamber"))
}

/// A compile cache private to the test run (shared by all tests of one target dir).
pub fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("pichamber-cache")
}

pub fn pichamber(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("PICHAMBER_CACHE_DIR", cache_dir())
        .env_remove("PICHAMBER_LOG")
        .output()
        .expect("run pichamber")
}

/// Runs `command` with `stdin` written to it and then closed; what it printed.
pub fn output_with_stdin(command: &mut Command, stdin: &str) -> Output {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    child.wait_with_output().expect("wait")
}

/// Runs `pichamber run ... --json` and returns (exit success, events).
pub fn run_json(args: &[&str]) -> (bool, Vec<Value>, String) {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = pichamber(&all);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    (
        out.status.success(),
        events,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Events of one type.
pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The `extension_ui_request` events as (method, event) pairs, in order.
pub fn ui_requests(events: &[Value]) -> Vec<(String, Value)> {
    of_type(events, "extension_ui_request")
        .into_iter()
        .map(|e| {
            (
                e["method"].as_str().unwrap_or_default().to_owned(),
                e.clone(),
            )
        })
        .collect()
}

/// Text of the first text block of a content array.
pub fn text_of(content: &Value) -> String {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A path under the repo as a string.
pub fn path(rel: &str) -> String {
    repo().join(rel).to_string_lossy().into_owned()
}
