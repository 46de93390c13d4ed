//! pi 1.6.0's ExtensionAPI against real pi 1.6.0: both sides driven over RPC through the pi
//! entry with the same scripted mock model (a models.json provider) and the fixtures of
//! tests/fixtures/pi-api, which notify what they learn. Compared: `ctx.modelRegistry`
//! (lookups, credentials status, `complete` through the host) and a virtual model (listed and
//! selectable, each request routed by the extension with its reason, state, previous answer
//! and conversation, router state stored on the branch, the answer naming the routed model at
//! the clamped thinking level); the MCP server registry; `ui_prompt_start` / `ui_prompt_end`;
//! `provider_stream_event`; `before_provider_headers`; `context_with_system`; the proposals of
//! `turn_end` and `agent_before_settle`. Differences by design are asserted as
//! such: pi hands an extension the provider's API key (`getApiKeyAndHeaders`), pichamber
//! only under `--allow-model-key`; pi lets it replace the request's `authorization`,
//! pichamber does not.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::compare::{Side, first_difference, mock_model_home, normalise, pi_command};
use common::oracle::Pi;
use pichamber_model::mock_server::{self, MockServer, RecordedRequest};
use pichamber_model::scripted::Script;
use serde_json::{Value, json};

fn script() -> Script {
    Script::from_value(json!({"turns": [
        {"text": "hi"},
        {"text": "first answer"},
        {"text": "second answer"},
    ]}))
    .unwrap()
}

/// One side's RPC process: commands in, every line it wrote kept.
struct Rpc {
    side: Side,
    stdin: std::process::ChildStdin,
    child: std::process::Child,
    received: mpsc::Receiver<Value>,
    seen: Vec<Value>,
}

impl Rpc {
    /// `pi --mode rpc --no-session -e EXT...` on one side, with the mock model of `script`.
    fn start(side: Side, root: &Path, base_url: &str, extensions: &[&str]) -> Self {
        Self::start_with(side, root, base_url, extensions, &[])
    }

    /// [`Rpc::start`] with `pichamber rpc` options for pichamber's side (its grants).
    fn start_with(
        side: Side,
        root: &Path,
        base_url: &str,
        extensions: &[&str],
        pichamber_args: &[&str],
    ) -> Self {
        Self::start_full(
            side,
            root,
            base_url,
            extensions,
            pichamber_args,
            &[],
            &json!({}),
        )
    }

    /// [`Rpc::start_with`] with pi options both sides get, and settings.json entries; both
    /// sides without pi 1.6.0's built-in extensions ([`Rpc::start_command`] with them).
    fn start_full(
        side: Side,
        root: &Path,
        base_url: &str,
        extensions: &[&str],
        pichamber_args: &[&str],
        pi_args: &[&str],
        settings: &Value,
    ) -> Self {
        let mut args = Pi::V1_6.only_given_extensions().to_vec();
        args.extend_from_slice(pi_args);
        Self::start_command(
            side,
            root,
            base_url,
            extensions,
            pichamber_args,
            &args,
            settings,
        )
    }

    fn start_command(
        side: Side,
        root: &Path,
        base_url: &str,
        extensions: &[&str],
        pichamber_args: &[&str],
        pi_args: &[&str],
        settings: &Value,
    ) -> Self {
        let (agent, _) = mock_model_home(root, base_url);
        let path = agent.join("settings.json");
        let mut merged: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (key, value) in settings.as_object().into_iter().flatten() {
            merged[key] = value.clone();
        }
        std::fs::write(&path, merged.to_string()).unwrap();
        let mut command = pi_command(side, root);
        if side == Side::Pichamber && !pichamber_args.is_empty() {
            command.env("PICHAMBER_PI_ARGS", pichamber_args.join(" "));
        }
        command.args(pi_args);
        command.args(["--mode", "rpc", "--no-session"]);
        for extension in extensions {
            command
                .arg("-e")
                .arg(common::repo().join("tests/fixtures/pi-api").join(extension));
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().expect("spawn pi");
        let stdin = child.stdin.take().unwrap();
        let (lines, received) = mpsc::channel::<Value>();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if lines.send(value).is_err() {
                    break;
                }
            }
        });
        Rpc {
            side,
            stdin,
            child,
            received,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, command: Value) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads until a line `done` accepts (it is kept too).
    fn read_until(&mut self, done: impl Fn(&Value) -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.received.recv_timeout(left) else {
                panic!(
                    "{:?}: no {what} within 60 s; saw {:#?}",
                    self.side, self.seen
                );
            };
            let last = done(&line);
            self.seen.push(line);
            if last {
                return;
            }
        }
    }

    fn respond(&mut self, command: Value) {
        let name = command["type"].clone();
        self.send(command);
        self.read_until(
            |l| l["type"] == "response" && l["command"] == name,
            "response",
        );
    }

    fn finish(mut self) -> Vec<Value> {
        drop(self.stdin);
        let _ = self.child.wait();
        self.seen
    }
}

fn notify_starting(line: &Value, prefix: &str) -> bool {
    line["method"] == "notify"
        && line["message"]
            .as_str()
            .is_some_and(|m| m.starts_with(prefix))
}

/// The notifications as `[word, JSON]` pairs: the fixtures notify `word JSON`.
fn notes(lines: &[Value]) -> Vec<(String, Value)> {
    lines
        .iter()
        .filter(|l| l["method"] == "notify")
        .filter_map(|l| l["message"].as_str())
        .filter_map(|m| {
            let (kind, body) = m.split_once(' ')?;
            Some((kind.to_owned(), serde_json::from_str(body).ok()?))
        })
        .collect()
}

/// The notes of one side loaded with `fixture` and granted `grants`, after the command
/// `command`, read until a note starting with `last`.
fn command_notes(
    side: Side,
    root: &Path,
    fixture: &str,
    grants: &[&str],
    command: &str,
    last: &str,
) -> Vec<(String, Value)> {
    std::fs::create_dir_all(root.join("ws")).unwrap();
    with_mock(script(), |base_url| {
        let mut rpc = Rpc::start_with(side, root, base_url, &[fixture], grants);
        rpc.send(json!({"type": "prompt", "message": command}));
        rpc.read_until(|l| notify_starting(l, last), last);
        notes(&rpc.finish())
    })
}

fn with_mock<T>(script: Script, run: impl FnOnce(&str) -> T) -> T {
    with_mock_server(script, |mock| run(&mock.base_url()))
}

fn with_mock_server<T>(script: Script, run: impl FnOnce(&MockServer) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = runtime.block_on(mock_server::start(script)).unwrap();
    run(&mock)
}

/// The first model request the mock received.
fn first_request(mock: &MockServer) -> RecordedRequest {
    mock.recorded()
        .into_iter()
        .find(|r| r.path.ends_with("/chat/completions"))
        .expect("the mock model received no request")
}

/// One prompt to a side loaded with `extension`: the notes it made and the request the mock
/// model received.
fn prompt_once(
    side: Side,
    root: &Path,
    extension: &str,
) -> (Vec<(String, Value)>, RecordedRequest) {
    with_mock_server(script(), |mock| {
        let mut rpc = Rpc::start(side, root, &mock.base_url(), &[extension]);
        rpc.send(json!({"type": "prompt", "message": "hello"}));
        rpc.read_until(|l| l["type"] == "agent_end", "agent_end");
        (notes(&rpc.finish()), first_request(mock))
    })
}

fn drive_router(side: Side, root: &Path) -> Vec<Value> {
    with_mock(script(), |base_url| {
        // Granted the key, as a user would for an extension that reads it (tests/cli.rs has
        // the refusal without the grant).
        let mut rpc = Rpc::start_with(
            side,
            root,
            base_url,
            &["router.ts"],
            &["--allow-model-key=mock"],
        );
        rpc.send(json!({"type": "prompt", "message": "/catalog"}));
        rpc.read_until(|l| notify_starting(l, "complete "), "answer of complete()");
        rpc.respond(json!({"type": "get_available_models"}));
        rpc.respond(json!({"type": "set_model", "provider": "router", "modelId": "auto"}));
        rpc.respond(json!({"type": "get_state"}));
        for prompt in ["hello", "again"] {
            rpc.send(json!({"type": "prompt", "message": prompt}));
            rpc.read_until(|l| l["type"] == "agent_end", "agent_end");
        }
        rpc.finish()
    })
}

fn skip_without_pi() -> bool {
    if Pi::V1_6.command().is_some() {
        return false;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "real pi 1.6.0 is missing: run tests/setup.sh (CI must install it)"
    );
    eprintln!("SKIPPED: real pi 1.6.0 not installed (tests/setup.sh)");
    true
}

/// What both sides must agree on.
fn summary(lines: &[Value]) -> Value {
    let notes: Vec<Value> = notes(lines)
        .into_iter()
        .filter(|(kind, _)| kind != "auth")
        .map(|(kind, body)| json!([kind, body]))
        .collect();
    let response = |command: &str| -> Value {
        lines
            .iter()
            .find(|l| l["type"] == "response" && l["command"] == command)
            .map(|l| l["data"].clone())
            .unwrap_or(Value::Null)
    };
    let models = response("get_available_models")["models"].clone();
    let state = response("get_state");
    // pi 1.6.0 registers a `powershell` built-in tool (inactive off Windows); pichamber has none.
    let notes: Vec<Value> = notes
        .into_iter()
        .map(|mut note| {
            for field in ["toolSnippets", "toolGuidelines"] {
                if let Some(tools) = note[1][field].as_object_mut() {
                    tools.remove("powershell");
                }
            }
            note
        })
        .collect();
    without_port(json!({
        "notes": notes,
        "available": models,
        "selected": response("set_model"),
        "state": {"model": state["model"]["id"], "thinkingLevel": state["thinkingLevel"]},
        "entries": lines.iter().filter(|l| l["type"] == "entry_appended")
            .map(|l| json!([l["entry"]["customType"], l["entry"]["data"]])).collect::<Vec<_>>(),
        "answers": lines.iter()
            .filter(|l| l["type"] == "message_end" && l["message"]["role"] == "assistant")
            .map(|l| json!({
                "provider": l["message"]["provider"], "model": l["message"]["model"],
                "thinkingLevel": l["message"]["thinkingLevel"],
                "text": l["message"]["content"][0]["text"],
            }))
            .collect::<Vec<_>>(),
    }))
}

/// What `drive` makes of real pi 1.6.0 and of pichamber, each in a folder of its own; `None`
/// when real pi is not installed (outside CI).
fn on_both_sides<T>(drive: impl Fn(Side, &Path) -> T) -> Option<(T, T)> {
    if skip_without_pi() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let pi = drive(Side::Pi, &dir.path().join("side1"));
    let ours = drive(Side::Pichamber, &dir.path().join("side2"));
    Some((pi, ours))
}

/// Fails with the first place where pichamber's side differs from pi's, and both sides.
fn assert_same_as_pi(expected: &Value, actual: &Value) {
    if let Some(difference) = first_difference(expected, actual, "") {
        panic!(
            "pichamber differs from pi 1.6.0 {difference}\npi: {expected:#}\npichamber: {actual:#}"
        );
    }
}

/// Each side's mock model listens on its own port.
fn without_port(value: Value) -> Value {
    match value {
        Value::String(s) if s.starts_with("http://127.0.0.1:") => {
            json!("http://127.0.0.1:<port>/v1")
        }
        Value::Array(items) => Value::Array(items.into_iter().map(without_port).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, without_port(v))).collect())
        }
        other => other,
    }
}

fn auth_note(lines: &[Value]) -> Value {
    lines
        .iter()
        .filter_map(|l| l["message"].as_str())
        .find_map(|m| m.strip_prefix("auth "))
        .map(|body| serde_json::from_str(body).unwrap())
        .unwrap_or(Value::Null)
}

#[test]
fn model_registry_and_virtual_models_behave_as_pi_1_6_does() {
    if skip_without_pi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let roots = [dir.path().join("side1"), dir.path().join("side2")];
    let pi = drive_router(Side::Pi, &roots[0]);
    let ours = drive_router(Side::Pichamber, &roots[1]);
    let (expected, actual) = (
        normalise(&summary(&pi), &roots[0].to_string_lossy()),
        normalise(&summary(&ours), &roots[1].to_string_lossy()),
    );
    assert_same_as_pi(&expected, &actual);
    // What the summary must contain for the comparison to mean something.
    assert_eq!(
        actual["entries"].as_array().map(Vec::len),
        Some(1),
        "{actual:#}"
    );
    assert_eq!(actual["answers"][1]["text"], "second answer", "{actual:#}");
    // Granted, the key reaches the extension as in pi.
    assert_eq!(auth_note(&pi), json!({"ok": true, "apiKey": "test-key"}));
    assert_eq!(auth_note(&ours), auth_note(&pi));
}

/// What the MCP fixtures learn, with each extension's path (pi's file path, pichamber's
/// opaque name) replaced. The change announcements are compared in order but apart from the
/// other notes: pi calls an `mcp_servers_change` handler while the registering call runs,
/// pichamber when the call has returned (an extension is never re-entered).
fn mcp_summary(lines: &[Value]) -> Value {
    fn paths(value: Value) -> Value {
        let fixtures = common::repo().join("tests/fixtures/pi-api");
        let fixtures = fixtures.to_string_lossy();
        match value {
            Value::String(s) => json!(
                s.replace(&format!("{fixtures}/mcp-other.ts"), "<mcp-other>")
                    .replace(&format!("{fixtures}/mcp.ts"), "<mcp>")
                    .replace("extension:mcp-other", "<mcp-other>")
                    .replace("extension:mcp", "<mcp>")
            ),
            Value::Array(items) => Value::Array(items.into_iter().map(paths).collect()),
            Value::Object(map) => {
                Value::Object(map.into_iter().map(|(k, v)| (k, paths(v))).collect())
            }
            other => other,
        }
    }
    let (changes, others): (Vec<_>, Vec<_>) = notes(lines)
        .into_iter()
        .partition(|(kind, _)| kind == "change");
    paths(json!({
        "notes": others.into_iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "changes": changes.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    }))
}

#[test]
fn mcp_server_registry_behaves_as_pi_1_6_does() {
    if skip_without_pi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let drive = |side: Side, root: &Path| {
        with_mock(script(), |base_url| {
            let mut rpc = Rpc::start(side, root, base_url, &["mcp.ts", "mcp-other.ts"]);
            rpc.respond(json!({"type": "get_state"}));
            rpc.send(json!({"type": "prompt", "message": "/mcp-change"}));
            // pi announces each change during the command, pichamber once it returned.
            let (mut last_note, mut changes) = (false, 0);
            while !(last_note && changes == 2) {
                rpc.read_until(
                    |l| notify_starting(l, "after-remove ") || notify_starting(l, "change "),
                    "the command's notes and two announced changes",
                );
                let line = rpc.seen.last().unwrap();
                last_note |= notify_starting(line, "after-remove ");
                changes += usize::from(notify_starting(line, "change "));
            }
            rpc.finish()
        })
    };
    let pi = mcp_summary(&drive(Side::Pi, &dir.path().join("side1")));
    let ours = mcp_summary(&drive(Side::Pichamber, &dir.path().join("side2")));
    if let Some(difference) = first_difference(&pi, &ours, "") {
        panic!("pichamber differs from pi 1.6.0 {difference}\npi: {pi:#}\npichamber: {ours:#}");
    }
    assert_eq!(
        ours["changes"].as_array().map(Vec::len),
        Some(2),
        "{ours:#}"
    );
}

#[test]
fn dialogs_are_announced_as_pi_1_6_announces_them() {
    if skip_without_pi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let drive = |side: Side, root: &Path| {
        with_mock(script(), |base_url| {
            let mut rpc = Rpc::start(side, root, base_url, &["prompts.ts"]);
            rpc.send(json!({"type": "prompt", "message": "/ask"}));
            for answer in [json!({"confirmed": true}), json!({"value": "Ada"})] {
                rpc.read_until(
                    |l| l["type"] == "extension_ui_request" && l["method"] != "notify",
                    "a dialog",
                );
                let id = rpc.seen.last().unwrap()["id"].clone();
                let mut response = json!({"type": "extension_ui_response", "id": id});
                response
                    .as_object_mut()
                    .unwrap()
                    .extend(answer.as_object().unwrap().clone());
                rpc.send(response);
            }
            // pi announces a prompt while it is up, pichamber once the command returned.
            let count = |seen: &[Value], prefix: &str| {
                seen.iter().filter(|l| notify_starting(l, prefix)).count()
            };
            while count(&rpc.seen, "answered ") < 1 || count(&rpc.seen, "prompt ") < 4 {
                rpc.read_until(
                    |l| notify_starting(l, "prompt ") || notify_starting(l, "answered "),
                    "the answers and four prompt events",
                );
            }
            rpc.finish()
        })
    };
    let summary = |lines: &[Value]| {
        let (prompts, others): (Vec<_>, Vec<_>) = notes(lines)
            .into_iter()
            .partition(|(kind, _)| kind == "prompt");
        json!({
            "prompts": prompts.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
            "others": others.into_iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        })
    };
    let pi = summary(&drive(Side::Pi, &dir.path().join("side1")));
    let ours = summary(&drive(Side::Pichamber, &dir.path().join("side2")));
    if let Some(difference) = first_difference(&pi, &ours, "") {
        panic!("pichamber differs from pi 1.6.0 {difference}\npi: {pi:#}\npichamber: {ours:#}");
    }
    assert_eq!(ours["prompts"][0]["kind"], "confirm", "{ours:#}");
}

#[test]
fn provider_stream_events_reach_extensions_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let drive = |side: Side, root: &Path| {
        with_mock(script(), |base_url| {
            let mut rpc = Rpc::start(side, root, base_url, &["stream.ts"]);
            rpc.send(json!({"type": "prompt", "message": "hello"}));
            rpc.read_until(
                |l| notify_starting(l, "stream "),
                "the chunks the extension saw",
            );
            rpc.finish()
        })
    };
    let seen = |lines: &[Value]| {
        notes(lines)
            .into_iter()
            .find(|(kind, _)| kind == "stream")
            .map(|(_, v)| v)
            .unwrap()
    };
    let pi = seen(&drive(Side::Pi, &dir.path().join("side1")));
    let ours = seen(&drive(Side::Pichamber, &dir.path().join("side2")));
    if let Some(difference) = first_difference(&pi, &ours, "") {
        panic!("pichamber differs from pi 1.6.0 {difference}\npi: {pi:#}\npichamber: {ours:#}");
    }
    assert!(
        ours["seen"].as_array().is_some_and(|s| s.len() >= 2),
        "{ours:#}"
    );
}

#[test]
fn provider_headers_are_edited_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let drive = |side: Side, root: &Path| {
        let (noted, request) = prompt_once(side, root, "headers.ts");
        (noted, request.headers)
    };
    let (pi_notes, pi_sent) = drive(Side::Pi, &dir.path().join("side1"));
    let (our_notes, our_sent) = drive(Side::Pichamber, &dir.path().join("side2"));
    assert_eq!(pi_notes, our_notes);
    assert_eq!(
        our_notes[0].1,
        json!({"type": "before_provider_headers", "headers": {}})
    );
    assert_eq!(pi_sent["x-trace-id"], "trace-1");
    assert_eq!(our_sent["x-trace-id"], "trace-1");
    // pi lets the extension replace the key; pichamber keeps the provider's.
    assert_eq!(pi_sent["authorization"], "Bearer stolen");
    assert_eq!(our_sent["authorization"], "Bearer test-key");
}

#[test]
fn context_with_system_follows_context_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let drive = |side: Side, root: &Path| {
        let (noted, request) = prompt_once(side, root, "context.ts");
        let body = request.body;
        let sent: Vec<Value> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                let text = match &m["content"] {
                    Value::String(s) => s.clone(),
                    blocks => common::text_of(blocks),
                };
                json!([m["role"], text])
            })
            .collect();
        (noted, sent)
    };
    let (mut pi_notes, pi_sent) = drive(Side::Pi, &dir.path().join("side1"));
    let (our_notes, our_sent) = drive(Side::Pichamber, &dir.path().join("side2"));
    // pi's prompt has a section pointing at its own documentation, which pichamber leaves
    // out by design.
    for (_, shape) in &mut pi_notes {
        for message in shape.as_array_mut().into_iter().flatten() {
            if let Some(sections) = message.get_mut("sections").and_then(Value::as_array_mut) {
                sections.retain(|s| s != "docs");
            }
        }
    }
    assert_eq!(pi_notes, our_notes);
    // The request: the edited prompt, then the conversation with the note.
    let roles = |sent: &[Value]| sent.iter().map(|m| m[0].clone()).collect::<Vec<_>>();
    assert_eq!(roles(&pi_sent), roles(&our_sent));
    for sent in [&pi_sent, &our_sent] {
        let prompt = sent[0][1].as_str().unwrap();
        assert!(prompt.ends_with("Answer in French."), "{prompt}");
        assert_eq!(sent.last().unwrap()[1], "(a note)");
    }
}

/// What a side of the boundary test did: the fixture's notes, the entries it was told of
/// (ids replaced by their order of appearance), the errors, and each request's conversation.
fn drive_boundaries(side: Side, root: &Path) -> Value {
    let script = Script::from_value(json!({"turns": [
        {"text": "first answer"},
        {"text": "second answer"},
        {"text": "third answer"},
        {"text": "a fourth request was never due"},
    ]}))
    .unwrap();
    with_mock_server(script, |mock| {
        let mut rpc = Rpc::start(side, root, &mock.base_url(), &["boundary.ts"]);
        rpc.send(json!({"type": "prompt", "message": "hello"}));
        rpc.read_until(|l| l["type"] == "agent_settled", "agent_settled");
        let lines = rpc.finish();
        let requests: Vec<Value> = mock
            .recorded()
            .into_iter()
            .filter(|r| r.path.ends_with("/chat/completions"))
            .map(|r| {
                r.body["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|m| m["role"] != "system")
                    .map(|m| {
                        let text = match &m["content"] {
                            Value::String(s) => s.clone(),
                            blocks => common::text_of(blocks),
                        };
                        json!([m["role"], text])
                    })
                    .collect()
            })
            .collect();
        // Entry ids differ between the sides: name each by the order it first appears in.
        let mut ids: Vec<String> = Vec::new();
        let mut id = |value: &Value| -> Value {
            let Some(raw) = value.as_str() else {
                return value.clone();
            };
            let at = ids.iter().position(|i| i == raw).unwrap_or_else(|| {
                ids.push(raw.to_owned());
                ids.len() - 1
            });
            json!(format!("#{at}"))
        };
        let entries: Vec<Value> = lines
            .iter()
            .filter(|l| l["type"] == "entry_appended")
            .map(|l| {
                let e = &l["entry"];
                json!({
                    "type": e["type"], "customType": e["customType"], "data": e["data"],
                    "content": e["content"], "display": e["display"],
                    "targetId": id(&e["targetId"]), "replacement": e["replacement"],
                })
            })
            .collect();
        let errors: Vec<Value> = lines
            .iter()
            .filter(|l| l["type"] == "extension_error")
            .map(|l| json!([l["event"], l["error"]]))
            .collect();
        let notes: Vec<Value> = notes(&lines)
            .into_iter()
            .map(|(kind, body)| json!([kind, body]))
            .collect();
        let events: Vec<Value> = lines
            .iter()
            .filter(|l| {
                l["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("agent_") || t.starts_with("turn_"))
            })
            .map(|l| l["type"].clone())
            .collect();
        json!({ "notes": notes, "entries": entries, "errors": errors, "requests": requests, "events": events })
    })
}

#[test]
fn turn_boundaries_take_proposals_as_pi_1_6_does() {
    let Some((expected, actual)) = on_both_sides(drive_boundaries) else {
        return;
    };
    assert_same_as_pi(&expected, &actual);
    // What the comparison must contain to mean something: the first answer edited out of the
    // second request, the settle proposal in the third, the refused one reported, no fourth.
    let requests = actual["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 3, "{actual:#}");
    assert_eq!(
        requests[1],
        json!([["user", "hello"], ["user", "Answer again."]])
    );
    assert_eq!(
        requests[2].as_array().unwrap().last().unwrap(),
        &json!(["user", "Review the diff."])
    );
    assert_eq!(
        actual["errors"],
        json!([[
            "agent_before_settle",
            "Invalid boundary entries: Entry nope not found"
        ]])
    );
    assert_eq!(actual["entries"].as_array().unwrap().len(), 4, "{actual:#}");
}

/// The tool names one request to the mock model declared.
fn declared_tools(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn tool_exposure_decides_activation_as_in_pi_1_6() {
    let drive = |side: Side, root: &Path| {
        with_mock_server(script(), |mock| {
            let mut rpc = Rpc::start(side, root, &mock.base_url(), &["exposure.ts"]);
            rpc.send(json!({"type": "prompt", "message": "/all"}));
            rpc.read_until(|l| notify_starting(l, "all "), "the /all report");
            rpc.send(json!({"type": "prompt", "message": "hello"}));
            rpc.read_until(|l| l["type"] == "agent_end", "agent_end");
            let mut declared = declared_tools(&first_request(mock));
            // pi 1.6.0 registers a `powershell` built-in tool (inactive off Windows).
            declared.retain(|t| t != "powershell");
            (notes(&rpc.finish()), declared)
        })
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_eq!(pi, ours);
    let (notes, declared) = ours;
    // Registration activates direct and model-only tools only; activating a hidden one does
    // nothing, a codemode or deferred one is declared once activated.
    assert_eq!(notes[0].1["active"], json!(["plain", "orchestrate"]));
    assert_eq!(
        notes[1].1["active"],
        json!(["plain", "orchestrate", "scripted", "searchable", "later"])
    );
    assert!(declared.contains(&"scripted".to_owned()), "{declared:?}");
    assert!(!declared.contains(&"secret".to_owned()), "{declared:?}");
}

/// What the executeTool test compares of one side: the fixtures' notes, the execution events
/// of the nested calls, and the record on the calling tool's result.
fn drive_codemode(side: Side, root: &Path) -> Value {
    let script = Script::from_value(json!({"turns": [
        {"toolCalls": [{"name": "run_all", "arguments": {}}]},
        {"text": "done"},
    ]}))
    .unwrap();
    std::fs::create_dir_all(root.join("ws")).unwrap();
    std::fs::write(root.join("ws/note.txt"), "a note\n").unwrap();
    with_mock_server(script, |mock| {
        // A nested built-in runs under the calling extension's grants.
        let mut rpc = Rpc::start_with(
            side,
            root,
            &mock.base_url(),
            &["codemode.ts", "codemode-tools.ts"],
            &["--allow-read", "."],
        );
        rpc.send(json!({"type": "prompt", "message": "hello"}));
        rpc.read_until(|l| l["type"] == "agent_end", "agent_end");
        let lines = rpc.finish();
        let notes: Vec<Value> = notes(&lines)
            .into_iter()
            .map(|(kind, body)| json!([kind, body]))
            .collect();
        let events: Vec<Value> = lines
            .iter()
            .filter(|l| l["type"] == "tool_execution_start" || l["type"] == "tool_execution_end")
            .map(|l| {
                json!([
                    l["type"],
                    l["toolName"],
                    l["parentToolCallId"].is_string(),
                    l["isError"],
                    common::text_of(&l["result"]["content"])
                ])
            })
            .collect();
        let record = lines
            .iter()
            .find(|l| l["type"] == "message_end" && l["message"]["role"] == "toolResult")
            .map(|l| {
                let mut record = l["message"]["nestedCalls"].clone();
                for call in record["calls"].as_array_mut().into_iter().flatten() {
                    let call = call.as_object_mut().unwrap();
                    call.remove("durationMs");
                    let id = call["id"].as_str().unwrap();
                    call.insert("id".into(), json!(id.rsplit('/').next()));
                }
                record
            })
            .unwrap_or(Value::Null);
        json!({ "notes": notes, "events": events, "record": record })
    })
}

#[test]
fn execute_tool_runs_nested_calls_as_pi_1_6_does() {
    let Some((expected, actual)) = on_both_sides(drive_codemode) else {
        return;
    };
    assert_same_as_pi(&expected, &actual);
    // What the comparison must contain: another extension's codemode tool, patched by its
    // tool_result handler; a built-in; refusals as error results; six nested calls recorded.
    let outcomes = &actual["notes"][0][1]["outcomes"];
    assert_eq!(outcomes[0]["text"], "patched", "{actual:#}");
    assert_eq!(outcomes[1]["text"], "a note\n", "{actual:#}");
    assert_eq!(outcomes[3]["text"], "guarded is blocked", "{actual:#}");
    assert_eq!(actual["record"]["calls"].as_array().map(Vec::len), Some(6));
}

#[test]
fn typebox_value_and_compile_behave_as_in_pi_1_6() {
    let drive = |side: Side, root: &Path| {
        with_mock(script(), |base_url| {
            let mut rpc = Rpc::start(side, root, base_url, &["typebox-value.ts"]);
            rpc.send(json!({"type": "prompt", "message": "/validate"}));
            rpc.read_until(|l| notify_starting(l, "typebox "), "the typebox report");
            notes(&rpc.finish())
        })
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_eq!(pi, ours);
    // What the comparison must contain: the errors of the bad input, a default filled in.
    let report = &ours[0].1;
    assert!(
        !report["errors"].as_array().unwrap().is_empty(),
        "{report:#}"
    );
    assert_eq!(report["defaulted"]["mode"], "read", "{report:#}");
}

#[test]
fn bash_tool_prefix_and_spawn_hook_run_as_in_pi_1_6() {
    let drive = |side: Side, root: &Path| {
        std::fs::create_dir_all(root.join("ws/sub")).unwrap();
        std::fs::create_dir_all(root.join("ws/precious")).unwrap();
        with_mock(script(), |base_url| {
            let mut rpc = Rpc::start_with(
                side,
                root,
                base_url,
                &["bash-hooks.ts"],
                &["--allow-run", "bash", "--allow-read", "."],
            );
            rpc.send(json!({"type": "prompt", "message": "/hooked"}));
            rpc.read_until(|l| notify_starting(l, "bash "), "the bash report");
            let notes = notes(&rpc.finish());
            assert!(
                root.join("ws/precious").is_dir(),
                "the guard refused rm -rf"
            );
            notes
        })
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_eq!(pi, ours);
    // What the comparison must contain: the prefix, a rewrite, the variable, the refusal, the folder.
    let results = &ours[0].1;
    assert_eq!(results[0]["text"], "prefixed", "{results:#}");
    assert_eq!(results[1]["text"], "hello from the hook", "{results:#}");
    assert_eq!(results[2]["text"], "it's \"quoted\" $HOME|", "{results:#}");
    assert!(
        results[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("blocked by the guard")),
        "{results:#}"
    );
    assert_eq!(results[4]["text"], "sub", "{results:#}");
    assert!(
        results[5]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("Working directory does not exist")),
        "{results:#}"
    );
}

#[test]
fn project_trust_resolves_as_in_pi_1_6() {
    let drive = |side: Side, root: &Path| {
        let mut seen = Vec::new();
        // A folder with nothing of its own, one with project settings, the same approved.
        for (protected, pi_args) in [
            (false, &[][..]),
            (true, &[][..]),
            (true, &["--approve"][..]),
        ] {
            let ws = root.join("ws");
            let _ = std::fs::remove_dir_all(&ws);
            std::fs::create_dir_all(ws.join(".pi")).unwrap();
            if protected {
                std::fs::write(ws.join(".pi/settings.json"), "{}").unwrap();
            }
            let trusted = with_mock(script(), |base_url| {
                let mut rpc = Rpc::start_full(
                    side,
                    root,
                    base_url,
                    &["trust.ts"],
                    &[],
                    pi_args,
                    &json!({}),
                );
                rpc.send(json!({"type": "prompt", "message": "/trusted"}));
                rpc.read_until(|l| notify_starting(l, "trust "), "the trust report");
                notes(&rpc.finish())
            });
            seen.push(json!([protected, pi_args, trusted[0].1["trusted"]]));
        }
        seen
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_eq!(pi, ours);
    assert_eq!(
        ours.iter().map(|s| s[2].clone()).collect::<Vec<_>>(),
        [json!(true), json!(false), json!(true)]
    );
}

#[test]
fn the_users_extensions_decide_project_trust_first_as_in_pi_1_6() {
    // (extensions before trust.ts, trust.json before the run); what each side then says of
    // the folder's trust, and what trust.json holds after it.
    let cases: [(&[&str], bool); 4] = [
        (&["trust-undecided.ts", "trust-yes.ts"], false),
        (&["trust-no.ts", "trust-yes.ts"], false),
        (&["trust-undecided.ts"], false),
        // A handler's decision comes before the one saved.
        (&["trust-yes.ts"], true),
    ];
    let drive = |side: Side, root: &Path| {
        let mut seen = Vec::new();
        for (extensions, saved_no) in cases {
            let ws = root.join("ws");
            let _ = std::fs::remove_dir_all(&ws);
            std::fs::create_dir_all(ws.join(".pi")).unwrap();
            std::fs::write(ws.join(".pi/settings.json"), "{}").unwrap();
            let store = root.join("home/agent/trust.json");
            let _ = std::fs::remove_file(&store);
            let ws_key = std::fs::canonicalize(&ws).unwrap();
            if saved_no {
                std::fs::create_dir_all(store.parent().unwrap()).unwrap();
                let saved = json!({ ws_key.to_string_lossy(): false });
                std::fs::write(&store, saved.to_string()).unwrap();
            }
            let mut all = extensions.to_vec();
            all.push("trust.ts");
            let trusted = with_mock(script(), |base_url| {
                let mut rpc = Rpc::start_full(side, root, base_url, &all, &[], &[], &json!({}));
                rpc.send(json!({"type": "prompt", "message": "/trusted"}));
                rpc.read_until(|l| notify_starting(l, "trust "), "the trust report");
                notes(&rpc.finish())
            });
            let kept = std::fs::read_to_string(&store)
                .ok()
                .map(|t| t.replace(&*ws_key.to_string_lossy(), "<ws>"));
            seen.push(json!([extensions, trusted[0].1["trusted"], kept]));
        }
        seen
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_eq!(pi, ours);
    let remembered = json!("{\n  \"<ws>\": true\n}\n");
    assert_eq!(
        ours.iter()
            .map(|s| [s[1].clone(), s[2].clone()])
            .collect::<Vec<_>>(),
        [
            [json!(true), remembered.clone()],
            [json!(false), Value::Null],
            [json!(false), Value::Null],
            [json!(true), remembered],
        ]
    );
}

#[test]
fn a_retried_answer_leaves_the_context_for_good_as_in_pi_1_6() {
    let drive = |side: Side, root: &Path| {
        let script = Script::from_value(json!({"turns": [
            {"httpStatus": 500, "errorMessage": "boom", "headers": {"x-should-retry": "false"}},
            {"text": "Recovered."},
        ]}))
        .unwrap();
        with_mock_server(script, |mock| {
            let retry = json!({"retry": {"maxRetries": 2, "baseDelayMs": 10}});
            let mut rpc = Rpc::start_full(side, root, &mock.base_url(), &[], &[], &[], &retry);
            rpc.send(json!({"type": "prompt", "message": "hello"}));
            rpc.read_until(|l| l["type"] == "agent_settled", "agent_settled");
            rpc.respond(json!({"type": "get_messages"}));
            let lines = rpc.finish();
            // The failed answer's entry, by the order of the entries the client heard of.
            let edits: Vec<Value> = lines
                .iter()
                .filter(|l| l["type"] == "entry_appended")
                .map(|l| json!([l["entry"]["type"], l["entry"]["replacement"]]))
                .collect();
            let context: Vec<Value> = lines
                .iter()
                .find(|l| l["type"] == "response" && l["command"] == "get_messages")
                .map(|l| {
                    l["data"]["messages"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .unwrap_or_default()
                .iter()
                .map(|m| json!([m["role"], m["stopReason"]]))
                .collect();
            let sent: Vec<usize> = mock
                .recorded()
                .iter()
                .filter(|r| r.path.ends_with("/chat/completions"))
                .map(|r| r.body["messages"].as_array().map_or(0, Vec::len))
                .collect();
            json!({ "edits": edits, "context": context, "sent": sent })
        })
    };
    let Some((expected, actual)) = on_both_sides(drive) else {
        return;
    };
    assert_same_as_pi(&expected, &actual);
    assert_eq!(
        actual["edits"],
        json!([["context_edit", null]]),
        "{actual:#}"
    );
}

#[test]
fn node_sqlite_behaves_as_in_node_under_pi_1_6() {
    let drive = |side: Side, root: &Path| {
        command_notes(
            side,
            root,
            "sqlite.ts",
            &["--allow-read", ".", "--allow-write", "."],
            "/sql",
            "sqlite ",
        )
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_same_as_pi(&json!(pi), &json!(ours));
    // What the comparison must contain: rows of every type, a big integer, the file on disk.
    let report = &ours[0].1;
    assert_eq!(
        report["rows"][0]["body"],
        json!({"bytes": [1, 2, 3]}),
        "{report:#}"
    );
    assert_eq!(
        report["bigInts"][0]["big"], "9007199254740993n",
        "{report:#}"
    );
    assert_eq!(report["readOnly"][0]["n"], 4, "{report:#}");
    assert_eq!(report["onDisk"], true, "{report:#}");
}

/// CommonJS files run when first required, as in Node under pi's loader: a cycle that works
/// only in Node's order loads with its partial exports (cssom's pattern, which kept
/// pi-web-access from loading). Where pi's jiti departs from Node (the fixture says how),
/// pichamber is Node.
#[test]
fn commonjs_runs_in_nodes_order_as_under_pi_1_6() {
    let drive =
        |side: Side, root: &Path| command_notes(side, root, "commonjs", &[], "/cjs", "node ");
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_same_as_pi(&json!(pi[0]), &json!(ours[0]));
    // What the comparison must contain: Node's order, the cycle's partial exports.
    let report = &ours[0].1;
    let load_order = [
        "index start",
        "rule start",
        "decl start",
        "parse",
        "decl end",
        "rule end",
        "index end",
    ];
    assert_eq!(report["atLoad"], json!(load_order), "{report:#}");
    assert_eq!(
        report["parsed"],
        json!(["undefined", "function"]),
        "{report:#}"
    );
    // Node's module cache: the late require reaches the same log; a body that threw runs again.
    let node = &ours[1].1;
    let after = [&load_order[..], &["lazy", "throws", "throws"]].concat();
    assert_eq!(node["after"], json!(after), "{node:#}");
    assert_eq!(node["thrown"], json!(["boom", "boom"]), "{node:#}");
}

/// A granted request that fails on the network fails as in Node: `TypeError: fetch failed`
/// whose `cause` carries the code, syscall and address (what extensions branch on).
#[test]
fn fetch_fails_on_the_network_as_in_node_under_pi_1_6() {
    // A port that was free a moment ago: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let command = format!("/fetch-errors {closed}");
    let drive = |side: Side, root: &Path| {
        let grants = ["--allow-net", "nosuch.invalid,127.0.0.1"];
        command_notes(side, root, "fetch-errors.ts", &grants, &command, "fetch ")
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_same_as_pi(&json!(pi), &json!(ours));
    let report = &ours[0].1;
    assert_eq!(report["refused"]["message"], "fetch failed", "{report:#}");
    assert_eq!(
        report["refused"]["cause"]["code"], "ECONNREFUSED",
        "{report:#}"
    );
    assert_eq!(
        report["unresolved"]["cause"]["syscall"], "getaddrinfo",
        "{report:#}"
    );
    assert_eq!(
        report["badPort"]["cause"]["message"], "bad port",
        "{report:#}"
    );
}

/// A tool's returned object as pi 1.6.0 treats it: `isError: true` fails the call (for the
/// model too), other fields stay in `tool_execution_end`'s result, a throw is an error result.
#[test]
fn tool_results_keep_what_the_tool_returned_as_pi_1_6_does() {
    let drive = |side: Side, root: &Path| {
        let script = Script::from_value(json!({"turns": [
            {"toolCalls": [
                {"name": "returns_error", "arguments": {}},
                {"name": "returns_more", "arguments": {}},
                {"name": "throws", "arguments": {}},
            ]},
            {"text": "done"},
        ]}))
        .unwrap();
        std::fs::create_dir_all(root.join("ws")).unwrap();
        with_mock_server(script, |mock| {
            let mut rpc = Rpc::start(side, root, &mock.base_url(), &["tool-results.ts"]);
            rpc.send(json!({"type": "prompt", "message": "hello"}));
            rpc.read_until(|l| l["type"] == "agent_end", "agent_end");
            let lines = rpc.finish();
            let mut ends: Vec<Value> = lines
                .iter()
                .filter(|l| l["type"] == "tool_execution_end")
                .map(|l| json!([l["toolName"], l["isError"], l["result"]]))
                .collect();
            ends.sort_by_key(|e| e[0].to_string());
            let mut messages: Vec<Value> = lines
                .iter()
                .filter(|l| l["type"] == "message_end" && l["message"]["role"] == "toolResult")
                .map(|l| {
                    let m = &l["message"];
                    json!([m["toolName"], m["isError"], m["content"], m["details"]])
                })
                .collect();
            messages.sort_by_key(|e| e[0].to_string());
            json!({ "ends": ends, "messages": messages })
        })
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_same_as_pi(&pi, &ours);
    assert_eq!(ours["ends"][0][0], "returns_error", "{ours:#}");
    assert_eq!(ours["ends"][0][1], true, "{ours:#}");
    assert_eq!(ours["ends"][1][2]["note"], "kept", "{ours:#}");
    assert_eq!(ours["messages"][0][1], true, "{ours:#}");
}

/// node:dns resolves the names the network capability grants, as Node's getaddrinfo does;
/// a name not granted fails with Node's ENOTFOUND, its message naming the flag.
#[test]
fn dns_lookups_resolve_granted_names_as_in_node_under_pi_1_6() {
    let drive = |side: Side, root: &Path| {
        command_notes(
            side,
            root,
            "dns.ts",
            &["--allow-net", "localhost,nosuch.invalid"],
            "/dns",
            "refusal ",
        )
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_same_as_pi(&json!(pi[0]), &json!(ours[0]));
    let report = &ours[0].1;
    assert_eq!(
        report["all"]["value"][0],
        json!({"address": "127.0.0.1", "family": 4}),
        "{report:#}"
    );
    assert_eq!(report["missing"]["code"], "ENOTFOUND", "{report:#}");
    assert_eq!(report["refused"]["code"], "ENOTFOUND", "{report:#}");
    let refusal = ours[1].1["message"].as_str().unwrap_or_default();
    assert!(refusal.contains("--allow-net=refused.invalid"), "{refusal}");
}

/// pi 1.6.0's `resizeImage`, done by the host's codec: the same sizes, type and note as pi's
/// (Photon) for a flat image, the image kept within larger limits, null for bytes that are
/// no image.
#[test]
fn resize_image_scales_as_pi_1_6_does() {
    let wide = image::RgbaImage::from_pixel(3000, 1000, image::Rgba([40, 90, 200, 255]));
    let mut png = Vec::new();
    image::DynamicImage::ImageRgba8(wide)
        .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .unwrap();
    let drive = |side: Side, root: &Path| {
        std::fs::create_dir_all(root.join("ws")).unwrap();
        std::fs::write(root.join("ws/wide.png"), &png).unwrap();
        command_notes(
            side,
            root,
            "resize-image.ts",
            &["--allow-read", "."],
            "/resize",
            "resize ",
        )
    };
    let Some((pi, ours)) = on_both_sides(drive) else {
        return;
    };
    assert_same_as_pi(&json!(pi), &json!(ours));
    let report = &ours[0].1;
    assert_eq!(report["scaled"]["width"], 2000, "{report:#}");
    assert_eq!(report["kept"]["wasResized"], false, "{report:#}");
    assert_eq!(report["narrow"]["width"], 300, "{report:#}");
    assert_eq!(report["notAnImage"], Value::Null, "{report:#}");
}

/// pi 1.6.0's built-in extensions come after the given ones: `get_commands` lists llama.cpp's
/// `/llama` with pi's `sourceInfo`, and `/llama` says it needs pi's terminal UI; an extension's
/// own `/llama` and the built-in's become `/llama:1` and `/llama:2`. (`--no-mcp` on both sides:
/// pichamber does not serve pi's `mcp` built-in yet.) `--no-extensions` and settings.json's
/// `-builtin:llama.cpp` drop it; `-e builtin:llama.cpp` brings it back whatever they say.
#[test]
fn builtin_extensions_come_after_the_given_ones_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    struct Case {
        name: &'static str,
        extension: &'static str,
        pi_args: &'static [&'static str],
        settings: Value,
        prompts: &'static [&'static str],
        listed: bool,
    }
    let case = |name, extension, pi_args, settings, prompts, listed| Case {
        name,
        extension,
        pi_args,
        settings,
        prompts,
        listed,
    };
    let (none, off) = (json!({}), json!({"extensions": ["-builtin:llama.cpp"]}));
    let given: &[&str] = &["--no-extensions", "-e", "builtin:llama.cpp"];
    let cases = [
        case(
            "with",
            "prompts.ts",
            &["--no-mcp"],
            none.clone(),
            &["/llama", "/llama list"],
            true,
        ),
        case(
            "without",
            "prompts.ts",
            &["--no-extensions"],
            none.clone(),
            &[],
            false,
        ),
        case(
            "clash",
            "llama-clash.ts",
            &["--no-mcp"],
            none,
            &["/llama:1", "/llama:2"],
            true,
        ),
        case(
            "settings off",
            "prompts.ts",
            &["--no-mcp"],
            off.clone(),
            &[],
            false,
        ),
        case("given", "prompts.ts", given, off, &["/llama"], true),
    ];
    let dir = tempfile::tempdir().unwrap();
    let drive = |side: Side, root: &Path, case: &Case| {
        with_mock(script(), |base_url| {
            let mut rpc = Rpc::start_command(
                side,
                root,
                base_url,
                &[case.extension],
                &[],
                case.pi_args,
                &case.settings,
            );
            rpc.respond(json!({"type": "get_commands"}));
            for message in case.prompts {
                rpc.send(json!({"type": "prompt", "message": message}));
                rpc.read_until(
                    |l| l["type"] == "response" && l["command"] == "prompt",
                    "the prompt's response",
                );
            }
            let lines = rpc.finish();
            let commands = lines
                .iter()
                .find(|l| l["command"] == "get_commands")
                .map(|l| l["data"]["commands"].clone())
                .unwrap();
            let commands = commands.as_array().unwrap();
            let names: Vec<Value> = commands
                .iter()
                .map(|c| json!([c["name"], c["sourceInfo"]["source"]]))
                .collect();
            let builtins: Vec<&Value> = commands
                .iter()
                .filter(|c| c["sourceInfo"]["source"] == "builtin")
                .collect();
            let notes: Vec<Value> = lines
                .iter()
                .filter(|l| l["method"] == "notify")
                .map(|l| json!([l["notifyType"], l["message"]]))
                .collect();
            json!({ "names": names, "builtins": builtins, "notes": notes })
        })
    };
    for case in &cases {
        let name = case.name;
        let pi = drive(Side::Pi, &dir.path().join(format!("{name}-pi")), case);
        let ours = drive(
            Side::Pichamber,
            &dir.path().join(format!("{name}-ours")),
            case,
        );
        if let Some(difference) = first_difference(&pi, &ours, "") {
            panic!(
                "{name}: pichamber differs from pi 1.6.0 {difference}\npi: {pi:#}\npichamber: {ours:#}"
            );
        }
        let listed = ours["builtins"].as_array().unwrap().len();
        assert_eq!(listed, usize::from(case.listed), "{name}: {ours:#}");
    }
}

/// The MCP servers, model turns and prompts of an MCP scenario, and the extensions loaded
/// (from tests/fixtures/pi-api) with what pichamber grants them.
struct McpCase<'a> {
    mcp: Value,
    turns: Value,
    prompts: &'a [&'a str],
    extensions: &'a [&'a str],
    grants: &'a [&'a str],
}

/// One side of an MCP scenario: pi 1.6.0 (or the pi entry) with `mcp.json` in its agent
/// folder and the mock model answering `turns`; after the startup, `get_commands` and each of
/// `prompts` (a command, a prompt the agent runs to its end, or `wait MS`). What both say is kept:
/// notifications, the tool calls' ends, and per model request the declared tools and the
/// `mcp_servers` section.
fn mcp_scenario(side: Side, root: &Path, case: &McpCase) -> Value {
    let McpCase {
        mcp,
        turns,
        prompts,
        extensions,
        grants,
    } = case;
    let agent = root.join("home/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("mcp.json"), mcp.to_string()).unwrap();
    let script = Script::from_value(json!({ "turns": turns })).unwrap();
    with_mock_server(script, |mock| {
        let base_url = mock.base_url();
        let mut rpc =
            Rpc::start_command(side, root, &base_url, extensions, grants, &[], &json!({}));
        rpc.respond(json!({"type": "get_commands"}));
        for prompt in prompts.iter() {
            if let Some(ms) = prompt.strip_prefix("wait ") {
                std::thread::sleep(Duration::from_millis(ms.parse().unwrap()));
                continue;
            }
            rpc.send(json!({"type": "prompt", "message": prompt}));
            if prompt.starts_with('/') {
                rpc.read_until(
                    |l| l["type"] == "response" && l["command"] == "prompt",
                    "the command's response",
                );
            } else {
                rpc.read_until(|l| l["type"] == "agent_end", "agent_end");
            }
        }
        let lines = rpc.finish();
        let root = root.to_str().unwrap();
        let notes: Vec<Value> = lines
            .iter()
            .filter(|l| l["method"] == "notify")
            .map(|l| normalise(&json!([l["notifyType"], l["message"]]), root))
            .collect();
        let ends: Vec<Value> = lines
            .iter()
            .filter(|l| l["type"] == "tool_execution_end")
            .map(|l| normalise(&json!([l["toolName"], l["result"], l["isError"]]), root))
            .collect();
        let updates: Vec<Value> = lines
            .iter()
            .filter(|l| l["type"] == "tool_execution_update")
            .map(|l| json!([l["toolName"], l["partialResult"]]))
            .collect();
        let commands = lines
            .iter()
            .find(|l| l["command"] == "get_commands")
            .and_then(|l| l["data"]["commands"].as_array().cloned())
            .into_iter()
            .flatten()
            // An extension's own `sourceInfo.path` is its name under pichamber, by design.
            .map(|c| json!([c["name"], c["sourceInfo"]["source"]]))
            .collect::<Vec<_>>();
        let requests: Vec<Value> = mock
            .recorded()
            .iter()
            .filter(|r| r.path.ends_with("/chat/completions"))
            .map(|r| {
                let tools: Vec<&Value> = r.body["tools"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|t| &t["function"])
                    .filter(|f| {
                        f["name"].as_str().is_some_and(|n| {
                            n.starts_with("mcp__")
                                || n == "tool_search"
                                || n.contains("mcp_resource")
                        })
                    })
                    .collect();
                let system = r.body["messages"][0]["content"].to_string();
                let section = system
                    .split_once("<mcp_servers>")
                    .and_then(|(_, rest)| rest.split_once("</mcp_servers>"))
                    .map(|(section, _)| section.to_owned());
                json!({ "tools": tools, "section": section })
            })
            .collect();
        json!({
            "commands": commands, "notes": notes, "ends": ends, "updates": updates,
            "requests": requests,
        })
    })
}

fn assert_mcp_same_as_pi(name: &str, pi: &Value, ours: &Value) {
    if let Some(difference) = first_difference(pi, ours, "") {
        panic!(
            "{name}: pichamber differs from pi 1.6.0 {difference}\npi: {pi:#}\npichamber: {ours:#}"
        );
    }
}

/// `case` on both sides, which must say the same; what pichamber said.
fn mcp_same_on_both_sides(name: &str, case: &McpCase) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let pi = mcp_scenario(Side::Pi, &dir.path().join("pi"), case);
    let ours = mcp_scenario(Side::Pichamber, &dir.path().join("ours"), case);
    assert_mcp_same_as_pi(name, &pi, &ours);
    ours
}

/// The test MCP server (stdio; `--http` for streamable HTTP).
fn echo_server() -> std::path::PathBuf {
    common::repo().join("tests/fixtures/mcp/echo-server.mjs")
}

/// The echo server over streamable HTTP on a free loopback port, ended when dropped.
struct HttpEcho {
    process: std::process::Child,
    port: String,
}

impl HttpEcho {
    fn start() -> Self {
        let mut process = std::process::Command::new("node")
            .arg(echo_server())
            .arg("--http")
            .stdout(Stdio::piped())
            .spawn()
            .expect("node runs the HTTP echo server");
        let mut line = String::new();
        BufReader::new(process.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("listening ")
            .expect("its port")
            .to_owned();
        Self { process, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }
}

impl Drop for HttpEcho {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// The operator's MCP servers under pi 1.6.0's built-in `mcp` extension: broken entries and
/// servers that fail are told once after startup, `/mcp` shows their state and reconnects
/// one, its subcommands answer as pi's do, and a connected server's `direct` tool is declared
/// to the model and called through the agent loop with pi's result and progress updates; a
/// tool the server adds later (it says its tools changed) is registered and called too.
#[test]
fn mcp_servers_connect_and_answer_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let echo = echo_server();
    let mcp = json!({"mcpServers": {
        "echo": {"command": "node", "args": [echo], "exposure": "direct", "description": "Echoes"},
        "bad": {"command": "/nonexistent/cmd", "exposure": "direct"},
        "inv": {"url": "ftp://x"},
        "Bad name!": {"command": "x"},
        // It reads the handshake first, so the client sees the connection close, not a
        // failed write (which pi reports as EPIPE).
        "crash": {"command": "sh", "args": ["-c", "read line; echo boom on stderr >&2; exit 3"], "exposure": "direct"},
        "off": {"command": "node", "enabled": false, "exposure": "direct"},
    }});
    let turns = json!([
        {"toolCalls": [{"name": "mcp__echo__echo", "arguments": {"text": "hi", "progress": 2, "addTool": true}}]},
        {"text": "done"},
        {"toolCalls": [{"name": "mcp__echo__reverse", "arguments": {"text": "abc"}}]},
        {"text": "done"},
    ]);
    let prompts = [
        "/mcp",
        "/mcp reconnect crash",
        "/mcp reconnect nope",
        "/mcp bogus x y",
        "/mcp login",
        "use echo",
        // The server says its tools changed 200 ms after the call; both list them again.
        "wait 600",
        "/mcp",
        "use the new tool",
    ];
    let case = McpCase {
        mcp,
        turns,
        prompts: &prompts,
        extensions: &[],
        grants: &[],
    };
    let ours = mcp_same_on_both_sides("operator servers", &case);
    let status = ours["notes"][1][1].as_str().unwrap();
    assert!(
        status.starts_with("echo: connected, 1 tools (direct)\n"),
        "{status}"
    );
    assert_eq!(ours["ends"][1][1]["content"][0]["text"], "cba", "{ours:#}");
    assert_eq!(
        ours["updates"][1][1]["content"][0]["text"], "step 2 of 2",
        "{ours:#}"
    );
    assert_eq!(
        ours["ends"][0][1]["content"][0]["text"], "echo #1: hi",
        "{ours:#}"
    );
    assert_eq!(
        ours["requests"][0]["tools"][0]["name"], "mcp__echo__echo",
        "{ours:#}"
    );
}

/// `deferred` servers: `tool_search` is activated, the `mcp_servers` section names the
/// server, a search loads the matching tool for the next request and the model then calls it.
#[test]
fn deferred_mcp_tools_are_found_with_tool_search_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let echo = echo_server();
    let mcp = json!({"mcpServers": {
        "echo": {"command": "node", "args": [echo], "exposure": "deferred"},
        "other-echo": {"command": "node", "args": [echo], "exposure": "hidden",
                       "toolExposure": {"ec*": "deferred"}, "description": "Another\nline"},
    }});
    let turns = json!([
        {"toolCalls": [{"name": "tool_search", "arguments": {"query": "other echo", "limit": 1}}]},
        {"toolCalls": [{"name": "mcp__other_echo__echo", "arguments": {"text": "found"}}]},
        {"toolCalls": [{"name": "tool_search", "arguments": {"query": "  "}}]},
        {"text": "done"},
    ]);
    let prompts = ["find echo", "/mcp"];
    let case = McpCase {
        mcp,
        turns,
        prompts: &prompts,
        extensions: &[],
        grants: &[],
    };
    let ours = mcp_same_on_both_sides("deferred servers", &case);
    assert_eq!(
        ours["requests"][0]["tools"][0]["name"], "tool_search",
        "{ours:#}"
    );
    assert_eq!(
        ours["requests"][1]["tools"][1]["name"], "mcp__other_echo__echo",
        "{ours:#}"
    );
    assert!(
        ours["requests"][0]["section"]
            .as_str()
            .unwrap()
            .contains("- mcp__other_echo (tool_search): Another"),
        "{ours:#}"
    );
}

/// A server an extension registers connects at once and its tool is called as pi calls it;
/// unregistered, it goes. Under pichamber it runs as that extension's program: granted
/// `node` (and the server's folder) it runs, and without the grant it fails, saying which.
#[test]
fn an_extensions_mcp_server_runs_under_its_grants_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let echo = echo_server();
    let serve = format!("/serve {}", echo.display());
    // The prompt comes first: pi connects a registered server in the background, and its
    // first prompt waits for the servers whose tools are declared.
    let prompts = [serve.as_str(), "use it", "/mcp", "/unserve", "/mcp"];
    let read = format!("--allow-read={}", echo.parent().unwrap().display());
    let grants = ["--allow-run=node", read.as_str()];
    let case = McpCase {
        mcp: json!({"mcpServers": {}}),
        turns: json!([
            {"toolCalls": [{"name": "mcp__ext_echo__echo", "arguments": {"text": "x"}}]},
            {"text": "done"},
        ]),
        prompts: &prompts,
        extensions: &["mcp-serve.ts"],
        grants: &grants,
    };
    let ours = mcp_same_on_both_sides("registered server", &case);
    assert_eq!(
        ours["notes"][1][1], "ext-echo: connected, 1 tools (direct)",
        "{ours:#}"
    );
    assert_eq!(
        ours["ends"][0][1]["content"][0]["text"], "echo #1: x",
        "{ours:#}"
    );

    let ungranted = McpCase {
        prompts: &prompts[..3],
        grants: &[],
        ..case
    };
    let dir = tempfile::tempdir().unwrap();
    let ours = mcp_scenario(Side::Pichamber, &dir.path().join("ungranted"), &ungranted);
    let status = ours["notes"][2][1].as_str().unwrap();
    assert!(
        status.starts_with("ext-echo: failed (direct)\n    ")
            && status.contains("--allow-run=node"),
        "{ours:#}"
    );
}

/// Streamable HTTP servers: one that answers is connected and its tool called; one that
/// answers 401 needs a sign-in; one that answers 401 to a configured Authorization header
/// failed; one configured with a provider's key (`auth`) gets it. (`/mcp login` differs by
/// design: pichamber does not sign in with OAuth.)
#[test]
fn http_mcp_servers_connect_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // Each side gets its own server, whose call count starts at zero.
    let run = |side: Side, name: &str| {
        let server = HttpEcho::start();
        let url = |path: &str| server.url(path);
        let case = McpCase {
            mcp: json!({"mcpServers": {
                "web": {"url": url("mcp"), "exposure": "direct"},
                "locked": {"url": url("locked"), "exposure": "direct"},
                "keyed": {"url": url("locked"), "exposure": "direct",
                          "headers": {"Authorization": "Bearer ${HOME}"}},
                "provided": {"url": url("keyed"), "exposure": "direct", "auth": {"provider": "mock"}},
            }}),
            turns: json!([
                {"toolCalls": [{"name": "mcp__web__echo", "arguments": {"text": "over http"}}]},
                {"text": "done"},
            ]),
            prompts: &["use it", "/mcp"],
            extensions: &[],
            grants: &[],
        };
        mcp_scenario(side, &dir.path().join(name), &case)
    };
    let pi = servers_tools_sorted(run(Side::Pi, "pi"));
    let ours = servers_tools_sorted(run(Side::Pichamber, "ours"));
    assert_mcp_same_as_pi("HTTP servers", &pi, &ours);
    assert_eq!(
        ours["ends"][0][1]["content"][0]["text"], "echo #1: over http",
        "{ours:#}"
    );
    let status = ours["notes"][1][1].as_str().unwrap();
    assert!(
        status.contains("locked: needs sign-in, run /mcp login locked (direct)")
            && status.contains("provided: connected, 1 tools (direct)"),
        "{status}"
    );
}

/// `scenario` with each request's MCP tools sorted by name where they stand. Servers that
/// connect at once register their tools as each connects, in pi as here, so which server's
/// tools come first is a race on both sides (it failed CI once); everything else still counts.
fn servers_tools_sorted(mut scenario: Value) -> Value {
    for request in scenario["requests"].as_array_mut().unwrap() {
        let tools = request["tools"].as_array_mut().unwrap();
        let is_server_tool = |t: &Value| t["name"].as_str().is_some_and(|n| n.starts_with("mcp__"));
        let places: Vec<usize> = (0..tools.len())
            .filter(|&i| is_server_tool(&tools[i]))
            .collect();
        let mut sorted: Vec<Value> = places.iter().map(|&i| tools[i].take()).collect();
        sorted.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
        for (i, tool) in places.into_iter().zip(sorted) {
            tools[i] = tool;
        }
    }
    scenario
}

/// Servers with resources: pi's three resource tools are registered with the servers'
/// exposure, list resources and templates (every server, or one), read a resource, and fail
/// as pi's do; a tool result's resource link names `read_mcp_resource`.
#[test]
fn mcp_resources_are_listed_and_read_as_in_pi_1_6() {
    if skip_without_pi() {
        return;
    }
    let echo = echo_server();
    let call = |name: &str, arguments: Value| json!({"toolCalls": [{"name": name, "arguments": arguments}]});
    let case = McpCase {
        mcp: json!({"mcpServers": {
            "echo": {"command": "node", "args": [echo, "--resources"], "exposure": "direct"},
        }}),
        turns: json!([
            call("list_mcp_resources", json!({})),
            call("list_mcp_resources", json!({"server": "echo"})),
            call("list_mcp_resource_templates", json!({})),
            call("read_mcp_resource", json!({"server": "echo", "uri": "echo://readme"})),
            call("read_mcp_resource", json!({"server": "echo", "uri": "echo://pair"})),
            call("read_mcp_resource", json!({"server": "echo", "uri": "echo://say/hi%20there"})),
            call("read_mcp_resource", json!({"server": "nope", "uri": "x"})),
            call("read_mcp_resource", json!({"server": "echo", "uri": "echo://missing"})),
            call("list_mcp_resources", json!({"cursor": "c"})),
            call("mcp__echo__echo", json!({"text": "t", "link": true})),
            {"text": "done"},
        ]),
        prompts: &["read the resources"],
        extensions: &[],
        grants: &[],
    };
    let ours = mcp_same_on_both_sides("resources", &case);
    assert_eq!(ours["ends"].as_array().map(Vec::len), Some(10), "{ours:#}");
    let declared: Vec<&Value> = ours["requests"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["name"])
        .collect();
    assert_eq!(
        declared,
        [
            "mcp__echo__echo",
            "list_mcp_resources",
            "list_mcp_resource_templates",
            "read_mcp_resource"
        ],
        "{ours:#}"
    );
    assert_eq!(
        ours["ends"][3][1]["content"][0]["text"], "echo repeats things",
        "{ours:#}"
    );
}

/// What a server an extension registers may reach is the extension's: over HTTP only a host
/// it is granted (`--allow-net`), and its config's values come from its granted environment,
/// never from a shell command. (pichamber alone: pi gives extensions everything.)
#[test]
fn an_extensions_mcp_server_reaches_only_what_the_extension_is_granted() {
    let dir = tempfile::tempdir().unwrap();
    let echo = echo_server();
    let server = HttpEcho::start();
    let status_after = |name: &str, serve: &str, grants: &[&str]| -> String {
        let prompts = [serve, "/mcp"];
        let case = McpCase {
            mcp: json!({"mcpServers": {}}),
            turns: json!([]),
            prompts: &prompts,
            extensions: &["mcp-serve.ts"],
            grants,
        };
        let seen = mcp_scenario(Side::Pichamber, &dir.path().join(name), &case);
        let notes = seen["notes"].as_array().unwrap();
        notes.last().unwrap()[1].as_str().unwrap().to_owned()
    };
    let serve_http = format!("/serve {}", server.url("mcp"));
    let net = format!("--allow-net=127.0.0.1:{}", server.port);
    assert_eq!(
        status_after("granted", &serve_http, &[&net]),
        "ext-echo: connected, 1 tools (direct)"
    );
    let refused = status_after("ungranted", &serve_http, &[]);
    assert!(
        refused.starts_with("ext-echo: failed (direct)")
            && refused.contains("--allow-net=127.0.0.1"),
        "{refused}"
    );
    let read = format!("--allow-read={}", echo.parent().unwrap().display());
    let grants = ["--allow-run=node", read.as_str()];
    let shell = status_after("shell", &format!("/serve {} !id", echo.display()), &grants);
    assert!(shell.contains("may not run a shell command"), "{shell}");
    let home = status_after(
        "env",
        &format!("/serve {} ${{HOME}}", echo.display()),
        &grants,
    );
    assert!(
        home.contains("env \"VALUE\" from environment variable: HOME"),
        "{home}"
    );
    drop(server);

    // The model may call the operator's server's tool; an extension's tool may not.
    let prompts = ["call it"];
    let case = McpCase {
        mcp: json!({"mcpServers": {
            "echo": {"command": "node", "args": [&echo], "exposure": "direct"},
        }}),
        turns: json!([
            {"toolCalls": [{"name": "call_mcp", "arguments": {}}]},
            {"toolCalls": [{"name": "mcp__echo__echo", "arguments": {"text": "direct"}}]},
            {"text": "done"},
        ]),
        prompts: &prompts,
        extensions: &["mcp-call.ts"],
        grants: &[],
    };
    let seen = mcp_scenario(Side::Pichamber, &dir.path().join("nested"), &case);
    let outcome = seen["notes"][0][1].as_str().unwrap();
    assert!(
        outcome.starts_with("outcome {\"isError\":true")
            && outcome.contains("the operator configured"),
        "{seen:#}"
    );
    let last = seen["ends"].as_array().unwrap().last().unwrap();
    assert_eq!(last[1]["content"][0]["text"], "echo #1: direct", "{seen:#}");
}
