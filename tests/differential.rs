//! Differential tests: pi's own example extensions, taken unmodified from the pinned npm
//! package, run in real pi (`pi --mode rpc`) and in pichamber with the same commands and the
//! same dialog answers; the sequences of `extension_ui_request`s must be equal after
//! normalising request ids and extension paths (nothing else).
//!
//! Every scenario runs against both versions of real pi (0.73.1 with its examples, 1.6.0 with
//! its own), installed by tests/setup.sh; without them these tests fail under CI and are
//! skipped with a message elsewhere.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::oracle::Pi;
use serde_json::{Value, json};

/// A dialog answer in pi's extension_ui_response terms.
#[derive(Clone, Debug)]
enum Answer {
    Value(&'static str),
    Confirm(bool),
    Cancel,
}

impl Answer {
    fn cli(&self) -> String {
        match self {
            Answer::Value(v) => (*v).to_owned(),
            Answer::Confirm(true) => "yes".into(),
            Answer::Confirm(false) => "no".into(),
            Answer::Cancel => "<cancel>".into(),
        }
    }
    fn rpc(&self, id: &str) -> Value {
        match self {
            Answer::Value(v) => json!({ "type": "extension_ui_response", "id": id, "value": v }),
            Answer::Confirm(c) => {
                json!({ "type": "extension_ui_response", "id": id, "confirmed": c })
            }
            Answer::Cancel => {
                json!({ "type": "extension_ui_response", "id": id, "cancelled": true })
            }
        }
    }
}

/// Drives real pi over RPC: waits for start-up, sends each command as a prompt, answers
/// dialogs in order, and returns every extension_ui_request it printed.
fn run_pi(
    mut cmd: Command,
    extensions: &[PathBuf],
    commands: &[&str],
    answers: &[Answer],
    workdir: &Path,
) -> Vec<Value> {
    let home = workdir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    cmd.args(["--mode", "rpc", "--no-session"]);
    for e in extensions {
        cmd.arg("-e").arg(e);
    }
    let mut child = cmd
        .current_dir(workdir)
        .env("HOME", &home)
        .env("PI_OFFLINE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start pi");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut requests = Vec::new();
    let mut answers = answers.iter().cloned();
    let mut pending: Vec<(String, Value)> = vec![(
        "ready".into(),
        json!({ "id": "ready", "type": "get_state" }),
    )];
    pending.extend(commands.iter().enumerate().map(|(i, c)| {
        (
            format!("c{i}"),
            json!({ "id": format!("c{i}"), "type": "prompt", "message": c }),
        )
    }));
    let mut pending = pending.into_iter();
    let (first_id, first) = pending.next().unwrap();
    send(first);
    let mut waiting_for = first_id;
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("pi answered within 30s");
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match event["type"].as_str() {
            Some("extension_ui_request") => {
                let method = event["method"].as_str().unwrap_or_default();
                if matches!(method, "select" | "confirm" | "input" | "editor") {
                    let answer = answers.next().unwrap_or(Answer::Cancel);
                    send(answer.rpc(event["id"].as_str().unwrap()));
                }
                requests.push(event);
            }
            Some("response") if event["id"] == json!(waiting_for) => match pending.next() {
                Some((id, next)) => {
                    send(next);
                    waiting_for = id;
                }
                None => break,
            },
            _ => {}
        }
    }

    let _ = child.kill();
    let _ = child.wait();
    requests
}

fn run_pichamber(
    extensions: &[PathBuf],
    commands: &[&str],
    answers: &[Answer],
    workdir: &Path,
) -> Vec<Value> {
    // Built once into .wasm files, as a user would, then run.
    let mut args: Vec<String> = vec![];
    for (i, e) in extensions.iter().enumerate() {
        let out = workdir.join(format!("ext{i}.wasm"));
        let built = common::pichamber(&["build", e.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert!(
            built.status.success(),
            "build {}: {}",
            e.display(),
            String::from_utf8_lossy(&built.stderr)
        );
        args.push(out.to_string_lossy().into_owned());
    }
    for c in commands {
        args.push("--command".into());
        args.push((*c).to_owned());
    }
    for a in answers {
        args.push(format!("--answer={}", a.cli()));
    }
    args.push("--ui".into());
    args.push("--cwd".into());
    args.push(workdir.to_string_lossy().into_owned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let (_ok, events, stderr) = common::run_json(&refs);
    assert!(
        common::of_type(&events, "extension_error").is_empty(),
        "pichamber reported errors: {events:#?}\n{stderr}"
    );
    common::of_type(&events, "extension_ui_request")
        .into_iter()
        .cloned()
        .collect()
}

/// Removes what legitimately differs: request ids and where an extension lives.
fn normalize(requests: Vec<Value>, extensions: &[PathBuf]) -> Vec<Value> {
    requests
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("id");
            let mut text = r.to_string();
            for e in extensions {
                let stem = e.file_stem().unwrap().to_string_lossy();
                text = text.replace(&e.to_string_lossy().into_owned(), &format!("<path:{stem}>"));
                text = text.replace(&format!("extension:{stem}"), &format!("<path:{stem}>"));
            }
            serde_json::from_str(&text).unwrap()
        })
        .collect()
}

/// pi's own examples `names` (each version's), compared.
fn differential(names: &[&str], commands: &[&str], answers: &[Answer]) {
    compare(
        |version| names.iter().map(|n| version.example(n)).collect(),
        commands,
        answers,
    );
}

fn compare(extensions_of: impl Fn(Pi) -> Vec<PathBuf>, commands: &[&str], answers: &[Answer]) {
    for version in Pi::ALL {
        let Some(mut pi) = version.command() else {
            continue;
        };
        pi.args(version.only_given_extensions());
        let extensions = extensions_of(version);
        let dir = tempfile::tempdir().unwrap();
        let theirs = normalize(
            run_pi(pi, &extensions, commands, answers, dir.path()),
            &extensions,
        );
        let ours = normalize(
            run_pichamber(&extensions, commands, answers, dir.path()),
            &extensions,
        );
        let v = version.version();
        assert!(
            !theirs.is_empty(),
            "the scenario produced no UI requests in pi {v}: it tests nothing"
        );
        let lines = |requests: &[Value]| {
            requests
                .iter()
                .map(Value::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(
            ours,
            theirs,
            "UI requests differ from real pi {v}\n--- pichamber ---\n{}\n--- pi {v} ---\n{}",
            lines(&ours),
            lines(&theirs)
        );
    }
}

#[test]
fn rpc_demo_matches_pi() {
    differential(
        &["rpc-demo.ts"],
        &[
            "/rpc-input",
            "/rpc-input",
            "/rpc-editor",
            "/rpc-editor",
            "/rpc-prefill",
        ],
        &[
            Answer::Value("hello"),
            Answer::Cancel,
            Answer::Value("a\nb"),
            Answer::Cancel,
        ],
    );
}

#[test]
fn timed_confirm_matches_pi() {
    differential(
        &["timed-confirm.ts"],
        &["/timed", "/timed-select", "/timed-signal", "/timed"],
        &[
            Answer::Confirm(true),
            Answer::Value("Option B"),
            Answer::Confirm(false),
            Answer::Cancel,
        ],
    );
}

#[test]
fn commands_matches_pi() {
    differential(
        &["commands.ts", "session-name.ts"],
        &["/commands", "/commands extension", "/commands prompt"],
        &[
            Answer::Value(
                "/session-name - Set or show session name (usage: /session-name [new name])",
            ),
            Answer::Confirm(true),
            Answer::Value("/commands - List available slash commands"),
            Answer::Confirm(false),
        ],
    );
}

#[test]
fn session_name_matches_pi() {
    differential(
        &["session-name.ts"],
        &[
            "/session-name",
            "/session-name Refactor auth",
            "/session-name",
        ],
        &[],
    );
}

#[test]
fn event_bus_matches_pi() {
    differential(&["event-bus.ts"], &["/emit", "/emit hello there"], &[]);
}

/// AsyncLocalStorage's store survives every kind of `await` (tests/fixtures/node/async-context.ts):
/// QuickJS resumes a native one with no hook, so the build lowers async code in an extension
/// that imports node:async_hooks.
#[test]
fn async_local_storage_carries_across_awaits_as_in_pi() {
    compare(
        |_| vec![common::path("tests/fixtures/node/async-context.ts").into()],
        &["/als"],
        &[],
    );
}
