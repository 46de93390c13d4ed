//! pi's one-shot modes through the pi entry, against real pi 1.6.0: `pi --mode json` writes
//! the session header and then the same events (checked by type, by the messages' text and by
//! what the extension saw), and `pi --print` the final answer, with text piped on stdin and an
//! `@file` (a text file and an image) making the first prompt as pi makes it.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use common::compare::{Side, first_difference, mock_model_home, normalise, pi_command};
use common::oracle::Pi;
use pichamber_model::mock_server;
use pichamber_model::scripted::Script;
use serde_json::{Value, json};

/// A 1x1 PNG, attached as an image by `@pic.png`.
const TINY_PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d, 0x49, 0x48, 0x44, 0x52, 0, 0, 0,
    1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0d, 0x49, 0x44, 0x41, 0x54,
    0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0, 0x1f, 0, 0x05, 0, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d,
    0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

fn script() -> Script {
    Script::from_value(json!({"turns": [
        {"toolCalls": [{"id": "call_1", "name": "read", "arguments": {"path": "notes.txt"}}]},
        {"text": "The notes have two lines."},
        {"text": "Second prompt, second answer."},
    ]}))
    .unwrap()
}

/// Runs `pi ARGS` on one side with `stdin` piped in; (exit code, stdout, stderr).
fn pi(side: Side, root: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(mock_server::start(script())).unwrap();
    let (_, ws) = mock_model_home(root, &mock.base_url());
    std::fs::write(ws.join("pic.png"), TINY_PNG).unwrap();
    let extension = common::repo().join("tests/fixtures/pi-modes/mode.ts");
    let mut command = pi_command(side, root);
    command
        .args(["--no-session", "-e"])
        .arg(&extension)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawn pi");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    drop(mock);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What JSON mode's records say, without what differs by design: each record's type; the
/// header's keys; the text of each message that ended; the tool results; what the extension
/// recorded.
fn summary(stdout: &str, root: &Path) -> Value {
    let records: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let text = |content: &Value| -> Value {
        match content {
            Value::String(s) => json!(s),
            Value::Array(blocks) => json!(
                blocks
                    .iter()
                    .map(|b| match b["text"].as_str() {
                        Some(t) => json!(t),
                        None if b["type"] == "image" => json!(["image", b["mimeType"], b["data"]]),
                        None => b["type"].clone(),
                    })
                    .collect::<Vec<_>>()
            ),
            other => other.clone(),
        }
    };
    let header = &records[0];
    let summary = json!({
        "header": header.as_object().map(|h| h.keys().cloned().collect::<Vec<_>>()),
        "headerType": header["type"],
        "types": records[1..].iter().map(|r| r["type"].clone()).collect::<Vec<_>>(),
        "messages": records.iter().filter(|r| r["type"] == "message_end" && r["message"]["role"] != "system")
            .map(|r| json!([r["message"]["role"], text(&r["message"]["content"])])).collect::<Vec<_>>(),
        "toolResults": records.iter().filter(|r| r["type"] == "tool_execution_end")
            .map(|r| text(&r["result"]["content"])).collect::<Vec<_>>(),
        "entries": records.iter().filter(|r| r["type"] == "entry_appended")
            .map(|r| r["entry"]["data"].clone()).collect::<Vec<_>>(),
    });
    normalise(&summary, &root.to_string_lossy())
}

#[test]
fn json_and_print_modes_behave_as_pi_1_6_does() {
    if Pi::V1_6.command().is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "real pi 1.6.0 is missing: run tests/setup.sh (CI must install it)"
        );
        eprintln!("SKIPPED: real pi 1.6.0 not installed (tests/setup.sh)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Both sides' folders have names of the same length (paths show in text).
    let roots = [dir.path().join("side1"), dir.path().join("side2")];
    let args = [
        "--mode",
        "json",
        "@notes.txt",
        "@pic.png",
        "What do the notes say?",
        "And then?",
    ];
    let run = |side: Side, root: &Path| {
        let (code, stdout, stderr) = pi(side, root, &args, "Piped context.\n");
        assert_eq!(code, 0, "{side:?}: {stderr}");
        summary(&stdout, root)
    };
    let theirs = run(Side::Pi, &roots[0]);
    let ours = run(Side::Pichamber, &roots[1]);
    // What is compared is said outright too, so a change that breaks both alike fails here.
    assert_eq!(theirs["headerType"], "session");
    assert_eq!(
        theirs["messages"][0],
        json!([
            "user",
            [
                json!(
                    "Piped context.<file name=\"<root>/ws/notes.txt\">\nfirst line\nsecond line\n\n</file>\n<file name=\"<root>/ws/pic.png\"></file>\nWhat do the notes say?"
                ),
                json!([
                    "image",
                    "image/png",
                    pichamber_tools::inline_image(TINY_PNG, pichamber_tools::PiVersion::V1_6)
                        .unwrap()
                        .data
                ]),
            ]
        ])
    );
    assert_eq!(
        theirs["entries"],
        json!([
            { "mode": "json", "hasUI": false, "version": "1.6.0" },
            { "defaultProvider": "mock", "defaultModel": "mock-model", "quietStartup": true },
        ])
    );
    if let Some(difference) = first_difference(&theirs, &ours, "") {
        panic!(
            "pichamber's JSON mode differs from pi's at {difference}\npi: {theirs:#}\npichamber: {ours:#}"
        );
    }

    let print = ["-p", "What do the notes say?"];
    let theirs = pi(Side::Pi, &roots[0], &print, "");
    let ours = pi(Side::Pichamber, &roots[1], &print, "");
    assert_eq!(
        (theirs.0, theirs.1.as_str()),
        (0, "The notes have two lines.\n"),
        "{}",
        theirs.2
    );
    assert_eq!(
        (ours.0, ours.1.as_str()),
        (0, "The notes have two lines.\n"),
        "{}",
        ours.2
    );
}
