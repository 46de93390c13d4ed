//! `pichamber run --prompt` end to end, through the binary: the agent loop with a scripted
//! model (`--script`) or the OpenAI path against the in-process mock endpoint
//! (`pichamber_model::mock_server`), built-in tools in a temporary workspace, pi's event
//! order, extensions hooking the loop, and session files that survive `kill -9` and that real
//! pi 0.73.1 opens (tests/oracle; install it with `npm ci --prefix tests/oracle`).

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pichamber_model::Script;
use pichamber_model::mock_server::{self, MockOptions, MockServer};
use pichamber_session::store::{SessionStore, SyncPolicy};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers

/// What a `pichamber run ... --json` printed.
struct Run {
    ok: bool,
    events: Vec<Value>,
    stderr: String,
}

impl Run {
    /// The `entry` events' entries, in order.
    fn entries(&self) -> Vec<Value> {
        entries_of(&self.events)
    }

    /// Messages of one role, as their `message_end` reported them.
    fn messages(&self, role: &str) -> Vec<&Value> {
        self.events
            .iter()
            .filter(|e| e["type"] == "message_end" && e["message"]["role"] == role)
            .map(|e| &e["message"])
            .collect()
    }

    fn count(&self, kind: &str) -> usize {
        common::of_type(&self.events, kind).len()
    }

    /// The text of every assistant message, in order.
    fn assistant_texts(&self) -> Vec<String> {
        self.messages("assistant")
            .into_iter()
            .map(|m| common::text_of(&m["content"]))
            .collect()
    }

    /// The toolResult message answering call `id`.
    fn tool_result(&self, id: &str) -> &Value {
        self.messages("toolResult")
            .into_iter()
            .find(|m| m["toolCallId"] == id)
            .unwrap_or_else(|| panic!("no toolResult for {id}:\n{}", self.dump()))
    }

    fn dump(&self) -> String {
        let lines: Vec<String> = self.events.iter().map(Value::to_string).collect();
        format!("stdout:\n{}\nstderr:\n{}", lines.join("\n"), self.stderr)
    }
}

fn entries_of(events: &[Value]) -> Vec<Value> {
    common::of_type(events, "entry")
        .into_iter()
        .map(|e| e["entry"].clone())
        .collect()
}

fn parse_ndjson(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// `pichamber run <args> --json` with extra environment variables.
fn run_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = Command::new(common::bin());
    command
        .arg("run")
        .args(args)
        .arg("--json")
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .env_remove("PICHAMBER_LOG")
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    let out = command.output().expect("run pichamber");
    Run {
        ok: out.status.success(),
        events: parse_ndjson(&String::from_utf8_lossy(&out.stdout)),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn run(args: &[&str]) -> Run {
    run_env(args, &[])
}

/// The variable `--api-key-env` names in the OpenAI tests (pi-ai refuses to call without a
/// key, and the tester's own OPENAI_API_KEY must not leak into a test).
const KEY_ENV: &str = "PICHAMBER_AGENT_TEST_KEY";

/// The same, from async tests that serve the mock model on their own runtime. `KEY_ENV` is
/// set to a dummy key unless `env` sets it.
async fn run_async(args: Vec<String>, mut env: Vec<(String, String)>) -> Run {
    if !env.iter().any(|(k, _)| k == KEY_ENV) {
        env.push((KEY_ENV.into(), "sk-mock".into()));
    }
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run_env(&args, &env)
    })
    .await
    .expect("pichamber run task")
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// A temporary folder with a `ws` workspace inside (so "outside the workspace" exists too).
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        Sandbox { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn ws_str(&self) -> String {
        self.ws().to_string_lossy().into_owned()
    }

    /// Writes a model script of `turns` and returns its path.
    fn script(&self, name: &str, turns: Value) -> String {
        let path = self.root().join(name);
        // Checked here so a typo in a test script fails with the script's own error.
        Script::from_value(json!({ "turns": turns.clone() })).expect("valid test script");
        std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn path(&self, rel: &str) -> String {
        self.root().join(rel).to_string_lossy().into_owned()
    }
}

fn fixture(name: &str) -> String {
    common::path(&format!("tests/fixtures/agent/{name}"))
}

fn script_of(turns: Value) -> Script {
    Script::from_value(json!({ "turns": turns })).expect("valid test script")
}

async fn mock(turns: Value) -> MockServer {
    mock_server::start(script_of(turns))
        .await
        .expect("start mock model server")
}

/// The OpenAI messages of a recorded request, each as (role, text of its content).
fn roles_and_texts(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .expect("request has messages")
        .iter()
        .map(|m| {
            let text = match &m["content"] {
                Value::String(s) => s.clone(),
                Value::Array(_) => common::text_of(&m["content"]),
                _ => String::new(),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), text)
        })
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Real pi's oracle folder; fails with how to install it when it is missing.
fn oracle() -> PathBuf {
    let dir = common::repo().join("tests/oracle");
    assert!(
        dir.join("node_modules/@mariozechner/pi-coding-agent")
            .is_dir(),
        "real pi is missing: run `npm ci --prefix tests/oracle` (tests/run.sh does that)"
    );
    dir
}

/// What real pi's SessionManager holds after opening `file` (tests/oracle/session-roundtrip.mjs).
fn pi_reads(file: &Path) -> Value {
    let agent_dir = tempfile::tempdir().unwrap();
    let out = Command::new("node")
        .arg(oracle().join("session-roundtrip.mjs"))
        .arg("read")
        .arg(file)
        .env("PI_CODING_AGENT_DIR", agent_dir.path())
        .output()
        .expect("run node (Node.js >= 20 is required)");
    assert!(
        out.status.success(),
        "pi could not open {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("pi printed {stdout}: {e}"))
}

/// Starts `pichamber run <args> --json`, reads its stdout event by event until `ready` holds
/// for the events so far, then kills it with SIGKILL. Returns every event it printed,
/// including any still in the pipe when it died (those were reported before the kill too).
fn run_and_kill_when(args: &[&str], ready: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut child = Command::new(common::bin())
        .arg("run")
        .args(args)
        .arg("--json")
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .env_remove("PICHAMBER_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pichamber");
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut events = Vec::new();
    let mut line = String::new();
    while !ready(&events) {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            let mut stderr = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut stderr)
                .ok();
            panic!(
                "pichamber ended before the moment to kill it:\n{}\nstderr:\n{stderr}",
                events
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        events.push(serde_json::from_str(line.trim()).expect("NDJSON line"));
    }
    child.kill().expect("SIGKILL pichamber");
    let status = child.wait().unwrap();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    events.extend(parse_ndjson(&rest));
    assert!(!status.success(), "pichamber was not killed: {status}");
    events
}

/// Checks a session file after a crash: our store opens it repairing at most a torn last
/// line, every entry reported before the crash is in it (in order, unchanged, at the start),
/// and real pi opens it with the same entries. Returns the entries as our store read them.
fn check_survivors(file: &Path, reported: &[Value]) -> Vec<Value> {
    assert!(
        !reported.is_empty(),
        "no entry was reported before the kill"
    );
    // pi first, on the file exactly as the crash left it.
    let pi_raw = pi_reads(file);

    let (store, report) = SessionStore::open(file, SyncPolicy::None).expect("open the session");
    assert!(report.skipped_lines.is_empty(), "{report}");
    assert!(report.migrated_from.is_none(), "{report}");
    assert!(!report.initialized, "{report}");
    assert!(!report.added_final_newline, "{report}");
    let entries = store.get_entries().to_vec();
    assert!(
        entries.len() >= reported.len(),
        "{} entries reported, {} in the file",
        reported.len(),
        entries.len()
    );
    for (i, entry) in reported.iter().enumerate() {
        assert_eq!(
            &entries[i], entry,
            "entry {i} differs from what was reported"
        );
    }
    // The entries form one chain from the first to the leaf.
    for pair in entries.windows(2) {
        assert_eq!(pair[1]["parentId"], pair[0]["id"], "broken chain");
    }
    assert_eq!(entries[0]["parentId"], Value::Null);
    assert_eq!(
        store.get_leaf_id(),
        entries.last().and_then(|e| e["id"].as_str())
    );

    // pi sees the same entries, before our repair and after it.
    let pi_repaired = pi_reads(file);
    for (what, pi) in [("as left", &pi_raw), ("repaired", &pi_repaired)] {
        assert_eq!(
            pi["entries"],
            Value::Array(entries.clone()),
            "pi's entries ({what})"
        );
        assert_eq!(
            pi["leafId"],
            json!(store.get_leaf_id()),
            "pi's leaf ({what})"
        );
        assert_eq!(
            pi["context"]["messages"],
            Value::Array(store.build_session_context().messages),
            "pi's LLM context ({what})"
        );
    }
    entries
}

// ---------------------------------------------------------------------------------------------
// Crash durability

/// A script that writes a file, then stalls mid-stream on its second model call (the test
/// kills the run there).
fn stalling_turns() -> Value {
    json!([
        {"text": "Writing the note.",
         "toolCalls": [{"id": "w1", "name": "write", "arguments": {"path": "note.txt", "content": "kept\n"}}]},
        {"text": "This answer never finishes streaming.", "chunks": 8, "delayMs": 60000},
    ])
}

/// The moment to kill a run of [`stalling_turns`]: its second model call is streaming (and
/// stays stalled for a minute).
fn second_answer_streams(events: &[Value]) -> bool {
    events
        .iter()
        .filter(|e| e["type"] == "message_start" && e["message"]["role"] == "assistant")
        .count()
        == 2
}

#[test]
fn entries_reported_before_a_kill_survive_it() {
    let sb = Sandbox::new();
    let script = sb.script("stall.json", stalling_turns());
    let session = sb.path("session.jsonl");
    let events = run_and_kill_when(
        &[
            "--script",
            &script,
            "--cwd",
            &sb.ws_str(),
            "--session",
            &session,
            "--prompt",
            "write a note",
        ],
        second_answer_streams,
    );
    assert_eq!(
        common::of_type(&events, "agent_end").len(),
        0,
        "the run ended before the kill"
    );
    let reported = entries_of(&events);
    let roles: Vec<&str> = reported
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"]["role"].as_str().unwrap_or_default())
        .collect();
    // pi 1.6.0 records the prompt and tools first, as a system message.
    assert_eq!(roles, ["system", "user", "assistant", "toolResult"]);
    let entries = check_survivors(Path::new(&session), &reported);
    assert_eq!(
        entries.len(),
        6,
        "an entry appeared that was never reported"
    );
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("note.txt")).unwrap(),
        "kept\n"
    );
}

#[test]
fn entries_survive_a_kill_while_they_stream_out() {
    // Many quick turns: the kill lands while entries are being written and reported.
    let sb = Sandbox::new();
    let turns: Vec<Value> = (0..150)
        .map(|i| {
            json!({"toolCalls": [{"id": format!("w{i}"), "name": "write",
                   "arguments": {"path": format!("f{i}.txt"), "content": "x".repeat(4000)}}]})
        })
        .collect();
    let script = sb.script("many.json", Value::Array(turns));
    let session = sb.path("session.jsonl");
    let events = run_and_kill_when(
        &[
            "--script",
            &script,
            "--cwd",
            &sb.ws_str(),
            "--session",
            &session,
            "--prompt",
            "write many files",
        ],
        |events| entries_of(events).len() >= 12,
    );
    let reported = entries_of(&events);
    check_survivors(Path::new(&session), &reported);
}

#[test]
fn a_killed_session_resumes_from_its_last_surviving_entry() {
    let sb = Sandbox::new();
    let script = sb.script("stall.json", stalling_turns());
    let session = sb.path("session.jsonl");
    let events = run_and_kill_when(
        &[
            "--script",
            &script,
            "--cwd",
            &sb.ws_str(),
            "--session",
            &session,
            "--prompt",
            "write a note",
        ],
        second_answer_streams,
    );
    let survivors = check_survivors(Path::new(&session), &entries_of(&events));
    let last = survivors.last().unwrap()["id"].clone();

    let resume = sb.script("resume.json", json!([{"text": "Back again."}]));
    let run = run(&[
        "--script",
        &resume,
        "--cwd",
        &sb.ws_str(),
        "--session",
        &session,
        "--prompt",
        "carry on",
    ]);
    assert!(run.ok, "{}", run.dump());
    let new = run.entries();
    assert_eq!(new.len(), 2, "{}", run.dump());
    assert_eq!(new[0]["message"]["role"], "user");
    assert_eq!(
        new[0]["parentId"], last,
        "the resumed run does not chain on"
    );
    assert_eq!(new[1]["parentId"], new[0]["id"]);
    assert_eq!(run.assistant_texts(), ["Back again."]);

    let (store, report) = SessionStore::open(&session, SyncPolicy::None).unwrap();
    assert!(report.is_clean(), "{report}");
    let all: Vec<Value> = store.get_entries().to_vec();
    assert_eq!(all[..survivors.len()], survivors[..]);
    assert_eq!(all[survivors.len()..], new[..]);
    let pi = pi_reads(Path::new(&session));
    assert_eq!(pi["entries"], Value::Array(all.clone()));
    assert_eq!(pi["leafId"], new[1]["id"]);
    // The system message, the first run's three and the resumed run's two.
    assert_eq!(pi["context"]["messages"].as_array().unwrap().len(), 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_killed_during_a_tool_call_resumes_with_the_call_answered() {
    let sb = Sandbox::new();
    // The bash call waits for a flag the test sets after the kill, so the shell the kill
    // orphans ends too (and gives up after a minute in any case).
    let wait = "for i in $(seq 1200); do [ -e ../flag ] && break; sleep 0.05; done; echo finished";
    let script = sb.script(
        "hang.json",
        json!([{"toolCalls": [{"id": "b1", "name": "bash", "arguments": {"command": wait, "timeout": 60}}]}]),
    );
    let session = sb.path("session.jsonl");
    let args = strings(&[
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--session",
        &session,
        "--prompt",
        "run the waiter",
    ]);
    let events = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_and_kill_when(&args, |events| {
            common::of_type(events, "tool_execution_start").len() == 1
        })
    })
    .await
    .unwrap();
    std::fs::write(sb.path("flag"), "").unwrap();
    let survivors = check_survivors(Path::new(&session), &entries_of(&events));
    // The new session's model and thinking level, the system message, the prompt, the
    // assistant's call.
    assert_eq!(survivors.len(), 5, "the bash call finished before the kill");
    assert_eq!(survivors[4]["message"]["content"][0]["type"], "toolCall");

    let server = mock(json!([{"text": "Resumed."}])).await;
    let run = run_async(
        strings(&[
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--cwd",
            &sb.ws_str(),
            "--session",
            &session,
            "--prompt",
            "continue",
        ]),
        vec![],
    )
    .await;
    assert!(run.ok, "{}", run.dump());
    assert_eq!(run.entries()[0]["parentId"], survivors[4]["id"]);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let messages = requests[0]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
    let call_id = &messages[2]["tool_calls"][0]["id"];
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], "bash");
    // pi-ai answers a call left without a result before sending the conversation on.
    assert_eq!(&messages[3]["tool_call_id"], call_id);
    assert_eq!(
        roles_and_texts(&requests[0])[3].1,
        "No result provided",
        "{}",
        requests[0]
    );
    assert_eq!(roles_and_texts(&requests[0])[4].1, "continue");
}

// ---------------------------------------------------------------------------------------------
// Built-in tools and pi's event order

#[test]
fn builtin_tools_write_read_and_edit_a_workspace_file() {
    let sb = Sandbox::new();
    let script = sb.script(
        "edit.json",
        json!([
            {"toolCalls": [{"id": "w", "name": "write", "arguments": {"path": "src/a.txt", "content": "hello\nworld\n"}}]},
            {"toolCalls": [{"id": "r", "name": "read", "arguments": {"path": "src/a.txt"}}]},
            {"toolCalls": [{"id": "e", "name": "edit", "arguments": {"path": "src/a.txt",
                "edits": [{"oldText": "world", "newText": "there"}]}}]},
            {"text": "All done.", "chunks": 3},
        ]),
    );
    let run = run(&[
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--prompt",
        "make a.txt",
    ]);
    assert!(run.ok, "{}", run.dump());
    assert_eq!(
        std::fs::read_to_string(sb.ws().join("src/a.txt")).unwrap(),
        "hello\nthere\n"
    );
    let write = run.tool_result("w");
    assert_eq!(write["isError"], false);
    // A session of no extension follows pi 1.6.0, whose write reports no size.
    assert_eq!(
        common::text_of(&write["content"]),
        "Successfully wrote to src/a.txt"
    );
    let read = run.tool_result("r");
    assert_eq!(read["isError"], false);
    assert_eq!(common::text_of(&read["content"]), "hello\nworld\n");
    let edit = run.tool_result("e");
    assert_eq!(edit["isError"], false);
    assert_eq!(
        common::text_of(&edit["content"]),
        "Successfully replaced 1 block(s) in src/a.txt."
    );
    assert!(
        edit["details"]["diff"]
            .as_str()
            .unwrap()
            .contains("+2 there"),
        "{edit}"
    );
    assert_eq!(run.assistant_texts().last().unwrap(), "All done.");
    assert_eq!(run.count("turn_start"), 4);
    assert_eq!(run.count("agent_end"), 1);
}

/// Agent events reduced to what the order tests compare: `type`, the message role and the
/// tool call id; runs of message_update folded into one `message_update*`; partial tool
/// output (`tool_execution_update`) and pichamber's `entry` events left out.
fn shape(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let kind = e["type"].as_str().unwrap_or_default();
        let label = match kind {
            "entry" | "tool_execution_update" | "queue_update" => continue,
            "message_update" => "message_update*".to_owned(),
            "message_start" | "message_end" => {
                let m = &e["message"];
                match m["toolCallId"].as_str() {
                    Some(id) => format!("{kind} toolResult {id}"),
                    None => format!("{kind} {}", m["role"].as_str().unwrap_or_default()),
                }
            }
            "tool_execution_start" | "tool_execution_end" => {
                format!("{kind} {}", e["toolCallId"].as_str().unwrap_or_default())
            }
            _ => kind.to_owned(),
        };
        if out.last() != Some(&label) || label != "message_update*" {
            out.push(label);
        }
    }
    out
}

fn two_call_turns() -> Value {
    json!([
        {"text": "Two things at once.", "chunks": 2,
         "toolCalls": [
            {"id": "c1", "name": "read", "arguments": {"path": "a.txt"}},
            {"id": "c2", "name": "bash", "arguments": {"command": "echo from-bash"}},
         ]},
        {"text": "Done."},
    ])
}

#[test]
fn one_turn_emits_pi_events_in_order() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("a.txt"), "alpha\n").unwrap();
    let script = sb.script("two.json", two_call_turns());
    let run = run(&["--script", &script, "--cwd", &sb.ws_str(), "--prompt", "go"]);
    assert!(run.ok, "{}", run.dump());
    let mut got = shape(&run.events);
    // Parallel calls may finish in either order; both end after both started.
    let ends = &mut got[11..13];
    ends.sort();
    // pi 1.6.0's: the prompt and tools are declared in a system message first; the run
    // settles after agent_end.
    let expected = [
        "agent_start",
        "turn_start",
        "message_start system",
        "message_end system",
        "message_start user",
        "message_end user",
        "message_start assistant",
        "message_update*",
        "message_end assistant",
        "tool_execution_start c1",
        "tool_execution_start c2",
        "tool_execution_end c1",
        "tool_execution_end c2",
        "message_start toolResult c1",
        "message_end toolResult c1",
        "message_start toolResult c2",
        "message_end toolResult c2",
        "turn_end",
        "turn_start",
        "message_start assistant",
        "message_update*",
        "message_end assistant",
        "turn_end",
        "agent_end",
        "agent_settled",
    ];
    assert_eq!(got, expected, "{}", run.dump());

    assert_eq!(
        common::text_of(&run.tool_result("c1")["content"]),
        "alpha\n"
    );
    assert_eq!(
        common::text_of(&run.tool_result("c2")["content"]).trim(),
        "from-bash"
    );
    // turn_end carries the turn's assistant message and its results in source order.
    let turn_end = common::of_type(&run.events, "turn_end")[0];
    assert_eq!(
        common::text_of(&turn_end["message"]["content"]),
        "Two things at once."
    );
    let ids: Vec<&str> = turn_end["toolResults"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["c1", "c2"]);
    // agent_end lists every message of the run.
    let roles: Vec<&str> = common::of_type(&run.events, "agent_end")[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "toolResult",
            "toolResult",
            "assistant"
        ]
    );
}

#[test]
fn every_message_is_persisted_before_its_message_end() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("a.txt"), "alpha\n").unwrap();
    let script = sb.script("two.json", two_call_turns());
    let session = sb.path("s.jsonl");
    let run = run(&[
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--session",
        &session,
        "--prompt",
        "go",
    ]);
    assert!(run.ok, "{}", run.dump());
    let mut message_ends = 0;
    for (i, e) in run.events.iter().enumerate() {
        if e["type"] != "message_end" {
            continue;
        }
        message_ends += 1;
        let before = &run.events[i - 1];
        assert_eq!(before["type"], "entry", "message_end {i} without its entry");
        assert_eq!(before["entry"]["message"], e["message"]);
    }
    assert_eq!(message_ends, 6);
    let (store, _) = SessionStore::open(&session, SyncPolicy::None).unwrap();
    assert_eq!(store.get_entries(), &run.entries()[..]);
}

#[test]
fn parallel_tool_calls_end_as_they_finish() {
    let sb = Sandbox::new();
    // c1 cannot finish before c2 has written the flag: only parallel execution completes.
    // It then waits a second more, so that on a loaded machine c2's end is not still
    // unobserved when c1 finishes (two finished calls seen at once end in source order).
    let script = sb.script(
        "race.json",
        json!([
            {"toolCalls": [
                {"id": "c1", "name": "bash", "arguments": {
                    "command": "while [ ! -e flag ]; do sleep 0.05; done; sleep 1; echo saw-flag", "timeout": 30}},
                {"id": "c2", "name": "write", "arguments": {"path": "flag", "content": "up"}},
            ]},
            {"text": "Done."},
        ]),
    );
    let run = run(&["--script", &script, "--cwd", &sb.ws_str(), "--prompt", "go"]);
    assert!(run.ok, "{}", run.dump());
    assert_eq!(
        common::text_of(&run.tool_result("c1")["content"]).trim(),
        "saw-flag"
    );
    let got = shape(&run.events);
    let at = |label: &str| got.iter().position(|l| l == label).unwrap();
    assert!(
        at("tool_execution_end c2") < at("tool_execution_end c1"),
        "{got:?}"
    );
    // Results still enter the context in source order.
    assert!(at("message_end toolResult c1") < at("message_end toolResult c2"));
}

#[test]
fn sequential_tools_finish_each_call_before_the_next() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("a.txt"), "alpha\n").unwrap();
    let script = sb.script("two.json", two_call_turns());
    let run = run(&[
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--sequential-tools",
        "--prompt",
        "go",
    ]);
    assert!(run.ok, "{}", run.dump());
    let got = shape(&run.events);
    let from = got
        .iter()
        .position(|l| l == "message_end assistant")
        .unwrap();
    assert_eq!(
        got[from + 1..from + 8],
        [
            "tool_execution_start c1",
            "tool_execution_end c1",
            "message_start toolResult c1",
            "message_end toolResult c1",
            "tool_execution_start c2",
            "tool_execution_end c2",
            "message_start toolResult c2",
        ],
        "{got:?}"
    );
}

#[test]
fn without_builtin_tools_read_is_not_found() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("a.txt"), "secret-ish\n").unwrap();
    let script = sb.script(
        "read.json",
        json!([
            {"toolCalls": [{"id": "r", "name": "read", "arguments": {"path": "a.txt"}}]},
            {"text": "No read."},
        ]),
    );
    let run = run(&[
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--no-builtin-tools",
        "--prompt",
        "read it",
    ]);
    let result = run.tool_result("r");
    assert_eq!(result["isError"], true);
    assert_eq!(common::text_of(&result["content"]), "Tool read not found");
    assert_eq!(run.assistant_texts().last().unwrap(), "No read.");
}

#[test]
fn tools_option_limits_what_the_model_may_call() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("a.txt"), "alpha\n").unwrap();
    let script = sb.script(
        "limited.json",
        json!([
            {"toolCalls": [
                {"id": "r", "name": "read", "arguments": {"path": "a.txt"}},
                {"id": "w", "name": "write", "arguments": {"path": "b.txt", "content": "nope"}},
                {"id": "l", "name": "ls", "arguments": {}},
            ]},
            {"text": "ok"},
        ]),
    );
    let run = run(&[
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--tools",
        "read,ls",
        "--prompt",
        "go",
    ]);
    assert_eq!(run.tool_result("r")["isError"], false);
    let write = run.tool_result("w");
    assert_eq!(write["isError"], true);
    assert_eq!(common::text_of(&write["content"]), "Tool write not found");
    assert!(!sb.ws().join("b.txt").exists(), "write ran anyway");
    // ls is not active by default, but --tools turned it on.
    let ls = run.tool_result("l");
    assert_eq!(ls["isError"], false, "{ls}");
    assert!(common::text_of(&ls["content"]).contains("a.txt"), "{ls}");
}

// ---------------------------------------------------------------------------------------------
// Workspace confinement

#[test]
fn tool_calls_cannot_reach_outside_the_workspace() {
    let sb = Sandbox::new();
    let secret = "TOP-SECRET-4711";
    let outside = sb.root().join("outside.txt");
    std::fs::write(&outside, format!("{secret}\n")).unwrap();
    std::os::unix::fs::symlink(&outside, sb.ws().join("link.txt")).unwrap();
    let abs = outside.to_string_lossy().into_owned();
    let script = sb.script(
        "escape.json",
        json!([
            {"toolCalls": [
                {"id": "rel", "name": "read", "arguments": {"path": "../outside.txt"}},
                {"id": "abs", "name": "read", "arguments": {"path": abs}},
                {"id": "link", "name": "read", "arguments": {"path": "link.txt"}},
                {"id": "write", "name": "write", "arguments": {"path": "../escaped.txt", "content": "out"}},
                {"id": "edit", "name": "edit", "arguments": {"path": "../outside.txt",
                    "edits": [{"oldText": secret, "newText": "changed"}]}},
            ]},
            {"text": "Tried."},
        ]),
    );
    let run = run(&[
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--prompt",
        "escape",
    ]);
    for id in ["rel", "abs", "link", "write", "edit"] {
        let result = run.tool_result(id);
        assert_eq!(result["isError"], true, "{id}: {result}");
    }
    // The file was never read: its content appears nowhere (the script itself holds the secret
    // only in the edit call, so look at the results).
    for m in run.messages("toolResult") {
        assert!(!m.to_string().contains(secret), "leaked: {m}");
    }
    assert!(!sb.root().join("escaped.txt").exists());
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        format!("{secret}\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The OpenAI path (mock endpoint)

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_endpoint_answers_with_system_prompt_user_message_and_tools() {
    let server = mock_server::start_with(
        script_of(json!([{"text": "Hello from the mock.", "chunks": 4}])),
        MockOptions {
            api_key: Some("sk-test-agent".into()),
            ..MockOptions::default()
        },
    )
    .await
    .unwrap();
    let sb = Sandbox::new();
    let run = run_async(
        strings(&[
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--cwd",
            &sb.ws_str(),
            "--prompt",
            "hi",
        ]),
        vec![(KEY_ENV.into(), "sk-test-agent".into())],
    )
    .await;
    assert!(run.ok, "{}", run.dump());
    assert_eq!(run.assistant_texts(), ["Hello from the mock."]);
    let assistant = run.messages("assistant")[0];
    assert_eq!(assistant["model"], "m");
    assert_eq!(assistant["stopReason"], "stop");

    let recorded: Vec<_> = server
        .recorded()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(recorded.len(), 1);
    let request = &recorded[0];
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.headers["authorization"], "Bearer sk-test-agent");
    assert_eq!(request.body["model"], "m");
    assert_eq!(request.body["stream"], true);
    let messages = roles_and_texts(&request.body);
    assert_eq!(messages.len(), 2, "{}", request.body);
    assert_eq!(messages[0].0, "system");
    assert!(
        messages[0].1.ends_with(&format!(
            "\n\n<cwd>\n{}\n</cwd>",
            sb.ws().canonicalize().unwrap().display()
        )),
        "{}",
        messages[0].1
    );
    assert_eq!(messages[1], ("user".to_owned(), "hi".to_owned()));
    assert_eq!(tool_names(&request.body), ["read", "bash", "edit", "write"]);
    let read = &request.body["tools"][0]["function"];
    assert_eq!(read["parameters"]["required"], json!(["path"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_request_follows_the_agent_options() {
    let server = mock(json!([{"text": "ok"}])).await;
    let sb = Sandbox::new();
    let run = run_async(
        strings(&[
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--cwd",
            &sb.ws_str(),
            "--tools",
            "read,grep",
            "--system-prompt",
            "You are a test double.",
            "--append-system-prompt",
            "Answer in one word.",
            "--prompt",
            "hi",
        ]),
        vec![],
    )
    .await;
    assert!(run.ok, "{}", run.dump());
    let request = &server.requests()[0];
    assert_eq!(tool_names(request), ["read", "grep"]);
    // pi 1.6.0's shape for a custom prompt: it, the appended text, the directory, each
    // section after the first in its tags.
    let system = &roles_and_texts(request)[0].1;
    assert_eq!(
        system,
        &format!(
            "You are a test double.\n\n<addendum>\nAnswer in one word.\n</addendum>\n\n<cwd>\n{}\n</cwd>",
            sb.ws().canonicalize().unwrap().display()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_api_key_is_a_failed_run_with_the_providers_message() {
    let server = mock_server::start_with(
        script_of(json!([{"text": "never"}])),
        MockOptions {
            api_key: Some("right".into()),
            ..MockOptions::default()
        },
    )
    .await
    .unwrap();
    let run = run_async(
        strings(&[
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--prompt",
            "hi",
        ]),
        vec![(KEY_ENV.into(), "wrong".into())],
    )
    .await;
    assert!(!run.ok, "{}", run.dump());
    let assistant = run.messages("assistant")[0];
    assert_eq!(assistant["stopReason"], "error");
    assert!(
        assistant["errorMessage"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key provided."),
        "{assistant}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_api_key_stops_the_prompt_before_the_run() {
    let server = mock(json!([{"text": "never"}])).await;
    let run = run_async(
        strings(&[
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            "PICHAMBER_AGENT_TEST_UNSET_KEY",
            "--prompt",
            "hi",
        ]),
        vec![],
    )
    .await;
    assert!(!run.ok, "{}", run.dump());
    assert_eq!(run.count("agent_start"), 0, "{}", run.dump());
    // Nothing of the conversation is recorded (only the new session's model and thinking
    // level, which pichamber writes at once where pi waits for the first answer to flush).
    assert!(
        run.entries().iter().all(|e| e["type"] != "message"),
        "{}",
        run.dump()
    );
    assert!(
        run.stderr
            .contains("No API key found for openai-compatible."),
        "{}",
        run.stderr
    );
    assert!(server.requests().is_empty());
}

// ---------------------------------------------------------------------------------------------
// No model

#[test]
fn a_prompt_without_a_model_fails_with_a_notice_while_other_steps_run() {
    let sb = Sandbox::new();
    std::fs::write(sb.ws().join("a.txt"), "alpha\n").unwrap();
    let run = run(&[
        "-e",
        &fixture("steps.ts"),
        "--ui",
        "--cwd",
        &sb.ws_str(),
        "--command",
        "/note before",
        "--prompt",
        "hi",
        "--tool",
        "echo",
        "--args",
        r#"{"text":"after"}"#,
        "--tool",
        "read",
        "--args",
        r#"{"path":"a.txt"}"#,
    ]);
    assert!(!run.ok, "{}", run.dump());
    assert!(
        run.stderr.contains("No model configured.")
            && run.stderr.contains("--model")
            && run.stderr.contains("--script FILE"),
        "{}",
        run.stderr
    );
    assert_eq!(run.count("agent_start"), 0);
    let notes: Vec<_> = common::ui_requests(&run.events)
        .into_iter()
        .filter(|(m, _)| m == "notify")
        .map(|(_, e)| e["message"].clone())
        .collect();
    assert_eq!(notes, [json!("note: before")]);
    let results = common::of_type(&run.events, "tool_result");
    assert_eq!(results.len(), 2, "{}", run.dump());
    assert_eq!(common::text_of(&results[0]["content"]), "echo: after");
    assert_eq!(common::text_of(&results[1]["content"]), "alpha\n");
}

#[test]
fn a_prompt_alone_without_a_model_fails_with_the_notice() {
    let run = run(&["--prompt", "hi"]);
    assert!(!run.ok);
    assert!(
        run.stderr
            .contains("No model configured. Give one with --model"),
        "{}",
        run.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// Sessions across runs

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_file_carries_the_conversation_into_the_next_run() {
    let server = mock(json!([{"text": "First answer."}, {"text": "Second answer."}])).await;
    let sb = Sandbox::new();
    let session = sb.path("conv.jsonl");
    let base = server.base_url();
    let args = |prompt: &str| {
        strings(&[
            "--model",
            "m",
            "--base-url",
            &base,
            "--api-key-env",
            KEY_ENV,
            "--cwd",
            &sb.ws_str(),
            "--session",
            &session,
            "--prompt",
            prompt,
        ])
    };
    let first = run_async(args("first question"), vec![]).await;
    assert!(first.ok, "{}", first.dump());
    let second = run_async(args("second question"), vec![]).await;
    assert!(second.ok, "{}", second.dump());
    assert_eq!(second.assistant_texts(), ["Second answer."]);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let conversation: Vec<(String, String)> =
        roles_and_texts(&requests[1]).into_iter().skip(1).collect();
    let expected: Vec<(String, String)> = [
        ("user", "first question"),
        ("assistant", "First answer."),
        ("user", "second question"),
    ]
    .iter()
    .map(|(r, t)| (r.to_string(), t.to_string()))
    .collect();
    assert_eq!(conversation, expected);
    assert_eq!(
        second.entries()[0]["parentId"],
        first.entries().last().unwrap()["id"]
    );
    // Both runs' entries are one session pi can open.
    let pi = pi_reads(Path::new(&session));
    // The first run's model and thinking level (recorded first, as pi does), its system
    // message, then the four messages of the two runs.
    assert_eq!(pi["entries"].as_array().unwrap().len(), 7);
    let ids: HashSet<&str> = pi["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 7);
}

// ---------------------------------------------------------------------------------------------
// Extensions in the loop

#[test]
fn a_tool_call_gate_blocks_the_models_bash_call() {
    let sb = Sandbox::new();
    let script = sb.script(
        "bash.json",
        json!([
            {"toolCalls": [{"id": "b", "name": "bash", "arguments": {"command": "touch ran.txt"}},
                           {"id": "w", "name": "write", "arguments": {"path": "w.txt", "content": "ok"}}]},
            {"text": "Blocked, fine."},
        ]),
    );
    let run = run(&[
        "-e",
        &fixture("block-bash.ts"),
        "--script",
        &script,
        "--cwd",
        &sb.ws_str(),
        "--prompt",
        "touch it",
    ]);
    assert!(run.ok, "{}", run.dump());
    let bash = run.tool_result("b");
    assert_eq!(bash["isError"], true);
    assert_eq!(
        common::text_of(&bash["content"]),
        "block-bash: the shell is off limits"
    );
    assert!(!sb.ws().join("ran.txt").exists(), "bash ran anyway");
    // Other calls of the same turn are not affected.
    assert_eq!(run.tool_result("w")["isError"], false);
    assert!(sb.ws().join("w.txt").exists());
    // A blocked call still gets its execution events, ending in an error.
    let end = common::of_type(&run.events, "tool_execution_end")
        .into_iter()
        .find(|e| e["toolCallId"] == "b")
        .unwrap();
    assert_eq!(end["isError"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_handler_rewrites_the_prompt_the_model_gets() {
    let server = mock(json!([{"text": "heard"}])).await;
    let run = run_async(
        strings(&[
            "-e",
            &fixture("shout-input.ts"),
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--prompt",
            "hello there",
        ]),
        vec![],
    )
    .await;
    assert!(run.ok, "{}", run.dump());
    let user = roles_and_texts(&server.requests()[0])[1].clone();
    assert_eq!(
        user,
        ("user".into(), "SHOUT(interactive): HELLO THERE".into())
    );
    assert_eq!(
        common::text_of(&run.messages("user")[0]["content"]),
        "SHOUT(interactive): HELLO THERE"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_agent_start_sets_the_system_prompt_the_model_gets() {
    let server = mock(json!([{"text": "ok"}])).await;
    let run = run_async(
        strings(&[
            "-e",
            &fixture("system-prompt.ts"),
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--prompt",
            "who are you",
        ]),
        vec![],
    )
    .await;
    assert!(run.ok, "{}", run.dump());
    let system = roles_and_texts(&server.requests()[0])[0].clone();
    assert_eq!(
        system,
        (
            "system".into(),
            "Fixture system prompt for \"who are you\" (base given: true)".into()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_sent_from_turn_end_runs_in_the_same_agent_run() {
    let server = mock(json!([{"text": "First."}, {"text": "Second."}])).await;
    let run = run_async(
        strings(&[
            "-e",
            &fixture("turn-end-follow-up.ts"),
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--prompt",
            "start",
        ]),
        vec![],
    )
    .await;
    assert!(run.ok, "{}", run.dump());
    assert_eq!(run.count("agent_start"), 1);
    assert_eq!(run.count("turn_start"), 2);
    assert_eq!(run.assistant_texts(), ["First.", "Second."]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let conversation: Vec<(String, String)> =
        roles_and_texts(&requests[1]).into_iter().skip(1).collect();
    assert_eq!(
        conversation,
        [
            ("user".to_owned(), "start".to_owned()),
            ("assistant".to_owned(), "First.".to_owned()),
            ("user".to_owned(), "follow-up from turn_end".to_owned()),
        ]
    );
    let queues: Vec<&Value> = common::of_type(&run.events, "queue_update")
        .into_iter()
        .map(|e| &e["followUp"])
        .collect();
    assert_eq!(queues, [&json!(["follow-up from turn_end"]), &json!([])]);
}

#[test]
fn queue_updates_come_where_pi_emits_them() {
    let sb = Sandbox::new();
    let script = sb.script("two.json", json!([{"text": "First."}, {"text": "Second."}]));
    let run = run(&[
        "-e",
        &fixture("turn-end-follow-up.ts"),
        "--script",
        &script,
        "--prompt",
        "start",
    ]);
    assert!(run.ok, "{}", run.dump());
    let got: Vec<String> = run
        .events
        .iter()
        .filter_map(|e| match e["type"].as_str()? {
            "queue_update" => Some(format!("queue_update {}", e["followUp"])),
            "turn_start" | "turn_end" => Some(e["type"].as_str()?.to_owned()),
            "message_start" if e["message"]["role"] == "user" => Some(format!(
                "user {}",
                common::text_of(&e["message"]["content"])
            )),
            _ => None,
        })
        .collect();
    // The order real pi 0.73.1 prints in `--mode json` for this extension and script.
    assert_eq!(
        got,
        [
            "turn_start",
            "user start",
            r#"queue_update ["follow-up from turn_end"]"#,
            "turn_end",
            "turn_start",
            "queue_update []",
            "user follow-up from turn_end",
            "turn_end",
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_user_message_without_deliver_as_from_agent_end_fails_as_in_pi() {
    let server = mock(json!([{"text": "First."}, {"text": "Second."}])).await;
    let run = run_async(
        strings(&[
            "-e",
            &fixture("agent-end-message.ts"),
            "--model",
            "m",
            "--base-url",
            &server.base_url(),
            "--api-key-env",
            KEY_ENV,
            "--prompt",
            "start",
        ]),
        vec![],
    )
    .await;
    assert_eq!(run.count("agent_start"), 1, "{}", run.dump());
    assert_eq!(server.requests().len(), 1);
    let errors: Vec<&str> = common::of_type(&run.events, "extension_error")
        .into_iter()
        .filter_map(|e| e["error"].as_str())
        .collect();
    assert_eq!(
        errors,
        [
            "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
        ]
    );
}

#[test]
fn send_user_message_from_a_command_starts_a_run() {
    let sb = Sandbox::new();
    let script = sb.script("kick.json", json!([{"text": "Kicked off."}]));
    let run = run(&[
        "-e",
        &fixture("kick.ts"),
        "--script",
        &script,
        "--prompt",
        "/kick now",
    ]);
    assert!(run.ok, "{}", run.dump());
    assert_eq!(run.count("agent_start"), 1);
    let users: Vec<String> = run
        .messages("user")
        .into_iter()
        .map(|m| common::text_of(&m["content"]))
        .collect();
    // The command line itself never reaches the model; the message the command sent does,
    // through the input event with source "extension".
    assert_eq!(users, ["kicked: now"]);
    assert_eq!(run.assistant_texts(), ["Kicked off."]);
    let seen: Vec<Value> = run
        .entries()
        .into_iter()
        .filter(|e| e["type"] == "custom" && e["customType"] == "input-seen")
        .map(|e| e["data"].clone())
        .collect();
    assert_eq!(
        seen,
        [json!({"text": "kicked: now", "source": "extension"})]
    );
}
