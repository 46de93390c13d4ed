//! pi-acp, the ACP adapter for pi (npm, pinned in tests/pi-acp), drives pichamber exactly as it
//! drives pi: it spawns `pi --mode rpc --no-themes [--session FILE]` from PATH, and here the `pi`
//! first on PATH is real pi 1.6.0 on one side and pichamber (a symlink named `pi`, no flag
//! rewriting) on the other. tests/pi-acp/drive.mjs plays the editor: initialize, session/new, a
//! prompt the mock model answers with a `read` call, `/export`, session/list, then in a second
//! pi-acp process session/load of the first session. What the adapter says back must be the
//! same on both sides after normalising ids, times, durations and the sides' folders.
//!
//! One value is not compared: the context size pi-acp reports (`usage_update.used`, pi's
//! estimate of the context). pi's default system prompt has a section pointing at pi's own
//! documentation, which pichamber, shipping none, leaves out (README); the estimate differs by
//! its size. That both report a size is checked.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::compare::{first_difference, mock_model_home, normalise};
use common::oracle::Pi;
use pichamber_model::mock_server;
use pichamber_model::scripted::Script;
use serde_json::{Value, json};

const PI_ACP: &str = "tests/pi-acp/node_modules/pi-acp/dist/index.js";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Side {
    Pi,
    Pichamber,
}

fn script() -> Script {
    Script::from_value(json!({"turns": [
        {"toolCalls": [{"id": "call_1", "name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "The notes have two lines."},
    ]}))
    .unwrap()
}

/// Runs the driver with `side` as `pi`; returns its output and the side's root folder.
fn drive(side: Side, node: &Path, root: &Path) -> Value {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(mock_server::start(script())).unwrap();
    let (agent, ws) = mock_model_home(root, &mock.base_url());
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    match side {
        Side::Pi => {
            let cli = Pi::V1_6.package().join("dist/cli.js");
            let wrapper = format!(
                "#!/bin/sh\nexec '{}' '{}' \"$@\"\n",
                node.display(),
                cli.display()
            );
            let path = bin.join("pi");
            std::fs::write(&path, wrapper).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Side::Pichamber => std::os::unix::fs::symlink(common::bin(), bin.join("pi")).unwrap(),
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(node)
        .arg(common::repo().join("tests/pi-acp/drive.mjs"))
        .arg(&ws)
        .current_dir(&ws)
        .env_clear()
        .env("PATH", path)
        .env("HOME", root.join("home"))
        .env("PI_CODING_AGENT_DIR", &agent)
        .env("PI_OFFLINE", "1")
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .output()
        .expect("run node");
    drop(mock);
    assert!(
        out.status.success(),
        "{side:?}: the ACP driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{side:?}: driver output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn node_and_adapter() -> Option<PathBuf> {
    let ready = Pi::V1_6.command().is_some() && common::repo().join(PI_ACP).exists();
    if !ready {
        assert!(
            std::env::var_os("CI").is_none(),
            "pi-acp or real pi 1.6.0 is missing: run tests/setup.sh (CI must install them)"
        );
        eprintln!("SKIPPED: pi-acp or real pi 1.6.0 not installed (tests/setup.sh)");
        return None;
    }
    Pi::V1_6.node()
}

#[test]
fn pi_acp_drives_pichamber_as_it_drives_pi() {
    let Some(node) = node_and_adapter() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Both sides' folders have names of the same length (paths show in text).
    let (pi_root, our_root) = (dir.path().join("side1"), dir.path().join("side2"));
    let pi = drive(Side::Pi, &node, &pi_root);
    let ours = drive(Side::Pichamber, &node, &our_root);
    let pi = normalise(&pi, &pi_root.to_string_lossy());
    let ours = normalise(&ours, &our_root.to_string_lossy());

    let labels = |v: &Value| -> Vec<String> {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["label"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        labels(&pi),
        [
            "initialize",
            "session/new",
            "prompt (tool call)",
            "/export",
            "session/list",
            "initialize again",
            "session/load"
        ],
        "real pi did not get through the scenario: {pi}"
    );
    assert_eq!(labels(&ours), labels(&pi), "{ours}");
    let mut differences = Vec::new();
    for (p, o) in pi["steps"]
        .as_array()
        .unwrap()
        .iter()
        .zip(ours["steps"].as_array().unwrap())
    {
        let (pm, om) = (&p["messages"], &o["messages"]);
        if pm.as_array().unwrap().len() != om.as_array().unwrap().len() {
            differences.push(format!(
                "{}: pi said {} messages, pichamber {}:\npi: {pm}\npichamber: {om}",
                p["label"],
                pm.as_array().unwrap().len(),
                om.as_array().unwrap().len()
            ));
        } else if let Some(d) = first_difference(pm, om, p["label"].as_str().unwrap()) {
            differences.push(d);
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));

    // What the scenario is about, said once more in plain terms: the read happened, the
    // export wrote a page, the session was listed and reloaded with its conversation.
    let text = ours.to_string();
    assert!(text.contains("first line\\nsecond line"), "{text}");
    assert!(text.contains("pi-session-<id>.html"), "{text}");
    let listed = &ours["steps"][4]["messages"][0]["result"]["sessions"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert!(
        text.contains("<context size>"),
        "no context size was reported: {text}"
    );
    let exported = std::fs::read_dir(our_root.join("ws"))
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().ends_with(".html"));
    assert!(exported, "the export wrote no page in the workspace");
}
