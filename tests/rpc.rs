//! `pichamber rpc` against pi 0.73.1's RPC protocol (docs/rpc.md, modes/rpc/rpc-mode.js):
//!
//! - pi's own `RpcClient` drives pichamber (tests/oracle/rpc-client-drive.mjs);
//! - the same command sequence goes to `pi --mode rpc` and to `pichamber rpc`, each with a
//!   fresh mock model serving the same turns, and the responses must agree field by field
//!   after normalising what legitimately differs (ids, timestamps, paths, ports);
//! - framing (U+2028 / U+2029 inside strings, CRLF, very long lines), the extension UI
//!   sub-protocol, prompts during a run, abort, and how the process ends.
//!
//! Behavioural tests run against both real pi and pichamber where pi behaves the same
//! (`*_pi` / `*_pichamber` pairs), so the assertions themselves are checked against the
//! reference. The differential test prints a per-step summary (matched / differs, with the
//! JSON paths) to stderr; with RPC_DIFF_LOGS=DIR both sides' normalised steps and raw output
//! are kept there; with RPC_DIFF_PI_VS_PI set, both sides are real pi (a check that what the
//! normalisation leaves does not vary between runs).
//!
//! Real pi comes from tests/oracle (`npm ci --prefix tests/oracle`); without it these tests
//! fail with a message saying so.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pichamber_model::Script;
use pichamber_model::mock_server::{self, MockServer};
use serde_json::{Value, json};

const PROVIDER: &str = "mock";
const MODEL: &str = "mock-model";
/// A second model, with reasoning, for set_model / cycle_model / thinking levels.
const REASONER: &str = "mock-reasoner";
const SYSTEM_PROMPT: &str = "You are a test.";
/// How long one agent may take for a whole test before the test gives up on it.
const DEADLINE: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// Harness

fn oracle() -> PathBuf {
    common::repo().join("tests/oracle")
}

fn pi_bin() -> PathBuf {
    let bin = oracle().join("node_modules/.bin/pi");
    assert!(
        bin.exists(),
        "real pi is missing ({}): run `npm ci --prefix tests/oracle`",
        bin.display()
    );
    bin
}

fn fixture(name: &str) -> PathBuf {
    common::repo().join("tests/fixtures/rpc").join(name)
}

/// Which implementation a test talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Pi,
    Pichamber,
}

/// The tests `SCENARIO::pi` and `SCENARIO::pichamber`: the scenario function run against
/// real pi and against pichamber (a module shares the function's name: they live apart).
macro_rules! both_sides {
    ($scenario:ident) => {
        mod $scenario {
            #[test]
            fn pi() {
                super::$scenario(super::Side::Pi);
            }

            #[test]
            fn pichamber() {
                super::$scenario(super::Side::Pichamber);
            }
        }
    };
}

/// A mock model server with its own runtime, which keeps serving while the test thread
/// blocks on a child process.
struct Mock {
    server: MockServer,
    _runtime: tokio::runtime::Runtime,
}

impl Mock {
    fn new(script: &Value) -> Mock {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let script = Script::from_value(script.clone()).expect("valid script");
        let server = runtime
            .block_on(mock_server::start(script))
            .expect("start the mock model server");
        Mock {
            server,
            _runtime: runtime,
        }
    }

    /// The chat-completions request bodies received so far.
    fn requests(&self) -> Vec<Value> {
        self.server.requests()
    }

    /// The text of every user message of one request, in order.
    fn user_texts(request: &Value) -> Vec<String> {
        request["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["role"] == "user")
            .map(|m| match &m["content"] {
                Value::String(s) => s.clone(),
                blocks => blocks
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join(""),
            })
            .collect()
    }
}

/// A temporary home for one agent: its workspace, pi's agent dir (models.json, settings)
/// and a folder for session files.
struct Home {
    _tmp: tempfile::TempDir,
    workspace: PathBuf,
    agent_dir: PathBuf,
    sessions: PathBuf,
    models_json: PathBuf,
}

impl Home {
    fn new(base_url: &str) -> Home {
        let tmp = tempfile::tempdir().expect("temp dir");
        // Canonical, so paths the agents report match the ones normalised away.
        let root = tmp.path().canonicalize().unwrap();
        let workspace = root.join("work");
        let agent_dir = root.join("agent");
        let sessions = root.join("sessions");
        for dir in [&workspace, &agent_dir, &sessions] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let models_json = agent_dir.join("models.json");
        let models = json!({ "providers": { PROVIDER: {
            "baseUrl": base_url,
            "api": "openai-completions",
            "apiKey": "test-key",
            "models": [{ "id": MODEL }, { "id": REASONER, "reasoning": true }],
        }}});
        std::fs::write(&models_json, serde_json::to_string_pretty(&models).unwrap()).unwrap();
        Home {
            _tmp: tmp,
            workspace,
            agent_dir,
            sessions,
            models_json,
        }
    }

    fn session_file(&self) -> PathBuf {
        self.sessions.join("main.jsonl")
    }
}

/// How an agent is started.
struct Launch<'a> {
    extensions: &'a [&'a str],
    model: &'a str,
    /// Record the session in `Home::session_file` (otherwise in memory / `--no-session`).
    session: bool,
    /// What pichamber grants the extensions (`--allow-run=sh`); pi grants everything.
    grants: &'a [&'a str],
}

impl Default for Launch<'_> {
    fn default() -> Self {
        Launch {
            extensions: &[],
            model: MODEL,
            session: false,
            grants: &[],
        }
    }
}

/// The arguments `side` gets after its RPC-mode switch (`--mode rpc` / `rpc`).
fn agent_args(side: Side, home: &Home, launch: &Launch) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut add = |a: &dyn AsRef<std::ffi::OsStr>| args.push(a.as_ref().to_owned());
    match side {
        Side::Pi => {
            for flag in [
                "--no-extensions",
                "--no-skills",
                "--no-prompt-templates",
                "--no-themes",
                "--no-context-files",
                "--offline",
            ] {
                add(&flag);
            }
            if launch.session {
                add(&"--session-dir");
                add(&home.sessions);
                add(&"--session");
                add(&home.session_file());
            } else {
                add(&"--no-session");
            }
        }
        Side::Pichamber => {
            add(&"--models");
            add(&home.models_json);
            add(&"--cwd");
            add(&home.workspace);
            // The pi these tests compare with (tests/oracle), also where no extension says it.
            add(&"--pi-version");
            add(&"0.73.1");
            if launch.session {
                add(&"--session");
                add(&home.session_file());
            }
            for grant in launch.grants {
                add(grant);
            }
        }
    }
    for a in ["--provider", PROVIDER, "--model", launch.model] {
        add(&a);
    }
    add(&"--system-prompt");
    add(&SYSTEM_PROMPT);
    for e in launch.extensions {
        add(&"-e");
        add(&fixture(e));
    }
    args
}

/// The environment both agents run in: nothing from the one running the tests (API keys
/// there would add models), pi's agent dir in `home`.
fn agent_env(cmd: &mut Command, home: &Home) {
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home.agent_dir)
        .env("PI_CODING_AGENT_DIR", &home.agent_dir)
        .env("PI_OFFLINE", "1")
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .current_dir(&home.workspace);
}

/// The command line that starts `side` in RPC mode, without stdio set up.
fn command(side: Side, home: &Home, launch: &Launch) -> Command {
    let mut cmd = match side {
        Side::Pi => {
            let mut cmd = Command::new(pi_bin());
            cmd.args(["--mode", "rpc"]);
            cmd
        }
        Side::Pichamber => {
            let mut cmd = Command::new(common::bin());
            cmd.arg("rpc");
            cmd
        }
    };
    cmd.args(agent_args(side, home, launch));
    agent_env(&mut cmd, home);
    cmd
}

/// One agent in RPC mode: every line it printed (parsed), requests matched by id.
struct Agent {
    side: Side,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Vec<u8>>,
    stderr: Option<std::thread::JoinHandle<String>>,
    /// Everything printed so far, in order.
    out: Vec<Value>,
    next_id: usize,
    deadline: Instant,
}

impl Agent {
    fn start(side: Side, home: &Home, launch: &Launch) -> Agent {
        let mut child = command(side, home, launch)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {side:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let stdin = child.stdin.take();
        Agent {
            side,
            child,
            stdin,
            lines,
            stderr: Some(stderr),
            out: Vec::new(),
            next_id: 0,
            deadline: Instant::now() + DEADLINE,
        }
    }

    /// Writes raw bytes to the agent's stdin.
    fn write_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to the agent");
        stdin.flush().unwrap();
    }

    /// Sends one command line as is (no id added).
    fn send(&mut self, command: &Value) {
        let mut line = serde_json::to_vec(command).unwrap();
        line.push(b'\n');
        self.write_raw(&line);
    }

    /// Sends a command with a fresh id; its response is left to [`Agent::response_to`].
    fn send_with_id(&mut self, mut command: Value) -> String {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        command["id"] = json!(id);
        self.send(&command);
        id
    }

    /// Sends a command with a fresh id and returns its response.
    fn request(&mut self, command: Value) -> Value {
        let shown = command.to_string();
        let id = self.send_with_id(command);
        self.wait_for(&format!("the response to {shown}"), |v| {
            v["type"] == "response" && v["id"] == json!(id)
        })
    }

    /// The response with this id, already printed or still to come (None when the agent
    /// ends first).
    fn response_to(&mut self, id: &str) -> Option<Value> {
        self.response_within(id, DEADLINE)
    }

    /// Like [`Agent::response_to`], giving up after `within` (a liveness bound for responses
    /// that may never come; no timing is asserted).
    fn response_within(&mut self, id: &str, within: Duration) -> Option<Value> {
        let is_it = |v: &Value| v["type"] == "response" && v["id"] == json!(id);
        if let Some(v) = self.out.iter().find(|v| is_it(v)) {
            return Some(v.clone());
        }
        let until = Instant::now() + within;
        loop {
            let v = self.next_before(until)?;
            if is_it(&v) {
                return Some(v);
            }
        }
    }

    /// The next line, or None when `until` passes first (or the agent ends).
    fn next_before(&mut self, until: Instant) -> Option<Value> {
        let left = until
            .min(self.deadline)
            .saturating_duration_since(Instant::now());
        let mut line = self.lines.recv_timeout(left).ok()?;
        Some(self.parse_line(&mut line))
    }

    fn parse_line(&mut self, line: &mut Vec<u8>) -> Value {
        assert_eq!(
            line.pop(),
            Some(b'\n'),
            "{:?}: a line must end in LF",
            self.side
        );
        let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
            panic!(
                "{:?} printed a line that is not JSON ({e}): {}",
                self.side,
                String::from_utf8_lossy(line)
            )
        });
        self.out.push(value.clone());
        value
    }

    /// The next line the agent prints; panics (with the agent's stderr) when it ends or the
    /// deadline passes first. Every line must be one JSON value.
    fn next(&mut self, waiting_for: &str) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(mut line) => self.parse_line(&mut line),
            Err(e) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let stderr = self
                    .stderr
                    .take()
                    .map(|h| h.join().unwrap_or_default())
                    .unwrap_or_default();
                panic!(
                    "{:?} printed nothing more ({e}) while the test waited for {waiting_for}\n\
                     --- last lines:\n{}\n--- stderr:\n{stderr}",
                    self.side,
                    self.tail(12)
                );
            }
        }
    }

    /// Reads lines until one matches; returns it.
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let v = self.next(what);
            if pred(&v) {
                return v;
            }
        }
    }

    /// Waits for an event of a type.
    fn wait_event(&mut self, kind: &str) -> Value {
        self.wait_for(&format!("a {kind} event"), |v| v["type"] == kind)
    }

    /// Waits for an extension UI request of a method.
    fn wait_ui(&mut self, method: &str) -> Value {
        self.wait_for(&format!("an extension_ui_request {method}"), |v| {
            v["type"] == "extension_ui_request" && v["method"] == method
        })
    }

    fn state(&mut self) -> Value {
        let r = self.request(json!({ "type": "get_state" }));
        assert_eq!(r["success"], json!(true), "{:?}: get_state: {r}", self.side);
        r["data"].clone()
    }

    /// Returns once the agent is idle with every run it started finished: the agent_end
    /// events printed match the agent_start events since `mark`, and get_state says it is
    /// not streaming and has nothing queued.
    fn wait_idle(&mut self, mark: usize) {
        loop {
            let starts = self.count_since(mark, "agent_start");
            let ends = self.count_since(mark, "agent_end");
            if starts > 0 && starts == ends {
                let state = self.state();
                if state["isStreaming"] == json!(false) && state["pendingMessageCount"] == json!(0)
                {
                    return;
                }
            }
            self.next("the agent to become idle");
        }
    }

    /// Sends a prompt, checks it was accepted and waits until every run it caused is over.
    fn prompt(&mut self, message: &str) -> Value {
        let mark = self.out.len();
        let r = self.request(json!({ "type": "prompt", "message": message }));
        assert_eq!(
            r["success"],
            json!(true),
            "{:?} refused {message:?}: {r}",
            self.side
        );
        self.wait_idle(mark);
        r
    }

    fn mark(&self) -> usize {
        self.out.len()
    }

    fn count_since(&self, mark: usize, kind: &str) -> usize {
        self.out[mark..]
            .iter()
            .filter(|v| v["type"] == kind)
            .count()
    }

    fn since(&self, mark: usize) -> &[Value] {
        &self.out[mark..]
    }

    /// Waits for an extension's `notify` of `text`, unless it came already after `mark`.
    fn await_notice(&mut self, mark: usize, text: &str) {
        let is_notice = |e: &Value| {
            e["type"] == "extension_ui_request" && e["method"] == "notify" && e["message"] == text
        };
        if !self.since(mark).iter().any(is_notice) {
            self.wait_for(text, is_notice);
        }
    }

    fn tail(&self, n: usize) -> String {
        let from = self.out.len().saturating_sub(n);
        self.out[from..]
            .iter()
            .map(|v| {
                let s = v.to_string();
                if s.len() > 400 {
                    format!("{}…", &s[..s.floor_char_boundary(400)])
                } else {
                    s
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Closes stdin (the client leaving).
    fn close(&mut self) {
        drop(self.stdin.take());
    }

    /// Waits for the process to exit, reading what it prints meanwhile; None when it is
    /// still running at the deadline (it is killed then).
    fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + within;
        loop {
            while let Ok(mut line) = self.lines.try_recv() {
                line.pop();
                if let Ok(v) = serde_json::from_slice(&line) {
                    self.out.push(v);
                }
            }
            if let Some(status) = self.child.try_wait().expect("wait for the agent") {
                // Lines printed just before exiting.
                while let Ok(mut line) = self.lines.recv_timeout(Duration::from_millis(200)) {
                    line.pop();
                    if let Ok(v) = serde_json::from_slice(&line) {
                        self.out.push(v);
                    }
                }
                return Some(status);
            }
            if Instant::now() >= until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// Normalising and comparing

/// Keys whose values are ids that differ between runs, with the kind of id they hold. Each
/// kind is numbered on its own by first appearance (`<session:1>`, `<entry:3>`), so equal
/// ids stay equal (a session id seen again after switch_session) and one id more or less on
/// one side does not shift every later one.
const ID_KEYS: &[(&str, &str)] = &[
    ("sessionId", "session"),
    ("entryId", "entry"),
    ("firstKeptEntryId", "entry"),
    ("parentId", "entry"),
    ("responseId", "response"),
    ("toolCallId", "call"),
    ("id", "call"),
];

/// What one side's output is normalised with: its own paths and the ids seen so far.
struct Normaliser {
    paths: Vec<(String, &'static str)>,
    ids: HashMap<String, String>,
    files: HashMap<String, String>,
}

impl Normaliser {
    fn new(home: &Home, base_url: &str) -> Normaliser {
        let s = |p: &Path| p.to_string_lossy().into_owned();
        Normaliser {
            // Longest first: the sessions folder lies under the temp root, like the others.
            paths: vec![
                (s(&home.sessions), "<sessions>"),
                (s(&home.workspace), "<cwd>"),
                (s(&home.agent_dir), "<agent>"),
                (base_url.to_owned(), "<base-url>"),
            ],
            ids: HashMap::new(),
            files: HashMap::new(),
        }
    }

    /// `value` without timestamps, with ids, paths and session file names replaced by
    /// placeholders.
    fn apply(&mut self, value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = serde_json::Map::new();
                for (k, v) in map {
                    if k == "timestamp" {
                        continue;
                    }
                    let kind = ID_KEYS
                        .iter()
                        .find(|(key, _)| key == k)
                        .map(|(_, kind)| *kind);
                    let v = match (v, kind) {
                        // A model's id is a name, the same on both sides.
                        (Value::String(s), _) if k == "id" && map.contains_key("provider") => {
                            json!(s)
                        }
                        (Value::String(s), Some(kind)) => json!(self.id(kind, s)),
                        _ => self.apply(v),
                    };
                    out.insert(k.clone(), v);
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(|v| self.apply(v)).collect()),
            Value::String(s) => Value::String(self.scrub(s)),
            // JSON does not tell 0 from 0.0; JavaScript prints both as 0.
            Value::Number(n) => match n.as_f64() {
                Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => json!(f as i64),
                _ => value.clone(),
            },
            other => other.clone(),
        }
    }

    fn id(&mut self, kind: &str, raw: &str) -> String {
        let key = format!("{kind}:{raw}");
        let n = self
            .ids
            .keys()
            .filter(|k| k.starts_with(&format!("{kind}:")))
            .count();
        self.ids
            .entry(key)
            .or_insert_with(|| format!("<{kind}:{}>", n + 1))
            .clone()
    }

    fn scrub(&mut self, s: &str) -> String {
        static FILE: std::sync::LazyLock<regex::Regex> =
            std::sync::LazyLock::new(|| regex::Regex::new(r"[^/\s]+\.jsonl").unwrap());
        let mut s = s.to_owned();
        for (path, placeholder) in &self.paths {
            s = s.replace(path.as_str(), placeholder);
        }
        FILE.replace_all(&s, |c: &regex::Captures| {
            let next = format!("<file:{}>", self.files.len() + 1);
            self.files.entry(c[0].to_owned()).or_insert(next).clone()
        })
        .into_owned()
    }
}

/// Every JSON path where `a` and `b` differ, with both values there.
fn differences(a: &Value, b: &Value, path: &str, out: &mut Vec<(String, Value, Value)>) {
    let absent = || json!("<absent>");
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let here = format!("{path}.{k}");
                match y.get(k) {
                    Some(w) => differences(v, w, &here, out),
                    None => out.push((here, v.clone(), absent())),
                }
            }
            for (k, w) in y {
                if !x.contains_key(k) {
                    out.push((format!("{path}.{k}"), absent(), w.clone()));
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                differences(v, w, &format!("{path}[{i}]"), out);
            }
        }
        // Lists of different lengths: what follows their common beginning.
        (Value::Array(x), Value::Array(y)) => {
            let at = x.iter().zip(y).take_while(|(v, w)| v == w).count();
            out.push((
                format!("{path}[{at}..]"),
                Value::Array(x[at..].to_vec()),
                Value::Array(y[at..].to_vec()),
            ));
        }
        _ if a != b => out.push((path.to_owned(), a.clone(), b.clone())),
        _ => {}
    }
}

/// Where two lists (of events, of entries) differ, as runs of items only one side has (or
/// has differently), found by a sequence diff so one extra item does not misalign the rest.
fn list_differences(
    name: &str,
    pi: &[Value],
    ours: &[Value],
    out: &mut Vec<(String, Value, Value)>,
) {
    use similar::{Algorithm, DiffOp, capture_diff_slices};
    let text = |events: &[Value]| events.iter().map(Value::to_string).collect::<Vec<_>>();
    for op in capture_diff_slices(Algorithm::Myers, &text(pi), &text(ours)) {
        let (a, b) = match op {
            DiffOp::Equal { .. } => continue,
            DiffOp::Delete {
                old_index,
                old_len,
                new_index,
            } => (old_index..old_index + old_len, new_index..new_index),
            DiffOp::Insert {
                old_index,
                new_index,
                new_len,
            } => (old_index..old_index, new_index..new_index + new_len),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => (
                old_index..old_index + old_len,
                new_index..new_index + new_len,
            ),
        };
        out.push((
            format!("{name}, pi #{a:?} / pichamber #{b:?}"),
            json!(pi[a].to_vec()),
            json!(ours[b].to_vec()),
        ));
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 400 {
        format!("{}…", text.chars().take(400).collect::<String>())
    } else {
        text
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Differential command responses

/// One step of the command sequence: its response and what else the agent printed for it.
struct Step {
    label: String,
    response: Value,
    events: Vec<Value>,
}

/// What of an event is compared: UI requests whole (without their random id), agent events
/// by type (and role / streaming sub-type), queue updates and errors whole.
fn event_signature(e: &Value) -> Option<Value> {
    let kind = e["type"].as_str().unwrap_or_default();
    match kind {
        "response" => None,
        "extension_ui_request" => {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("id");
            Some(e)
        }
        "message_start" | "message_end" => Some(json!(format!(
            "{kind}:{}",
            e["message"]["role"].as_str().unwrap_or("?")
        ))),
        "message_update" => Some(json!(format!(
            "{kind}:{}",
            e["assistantMessageEvent"]["type"].as_str().unwrap_or("?")
        ))),
        "queue_update" | "extension_error" => Some(e.clone()),
        "compaction_start" | "compaction_end" => {
            Some(json!({ "type": kind, "reason": e["reason"] }))
        }
        _ => Some(json!(kind)),
    }
}

/// Runs commands on one agent and records each step.
struct Recorder<'a> {
    agent: &'a mut Agent,
    steps: Vec<Step>,
}

impl Recorder<'_> {
    fn push(&mut self, label: &str, response: Value, mark: usize) -> Value {
        let mut events: Vec<Value> = self
            .agent
            .since(mark)
            .iter()
            .filter_map(event_signature)
            .collect();
        // pi's RPC mode binds the extensions of a replaced session twice (once from the
        // runtime's rebind callback, once more after new_session / fork / clone /
        // switch_session), so their session_start handlers run twice; a repeated
        // fire-and-forget UI request counts once.
        events.dedup_by(|b, a| a == b && a["type"] == "extension_ui_request");
        self.steps.push(Step {
            label: label.to_owned(),
            response: response.clone(),
            events,
        });
        response
    }

    /// A command and its response.
    fn cmd(&mut self, label: &str, command: Value) -> Value {
        let mark = self.agent.mark();
        let response = self.agent.request(command);
        self.push(label, response, mark)
    }

    /// A prompt, followed until the agent is idle again.
    fn prompt(&mut self, label: &str, message: &str) -> Value {
        let mark = self.agent.mark();
        let response = self.agent.prompt(message);
        self.push(label, response, mark)
    }

    /// A line that gets no id: the response is the next response printed.
    fn raw(&mut self, label: &str, line: &str) -> Value {
        let mark = self.agent.mark();
        self.agent.write_raw(format!("{line}\n").as_bytes());
        let response = self
            .agent
            .wait_for(&format!("the response to {line}"), |v| {
                v["type"] == "response"
            });
        self.push(label, response, mark)
    }
}

/// The model turns the sequence consumes, in order.
fn sequence_script() -> Value {
    json!({ "turns": [
        { "text": "Hi there.", "usage": { "input": 20, "output": 4 } },
        { "text": "Holding.", "toolCalls": [{ "id": "call_hold", "name": "hold", "arguments": {} }],
          "usage": { "input": 30, "output": 6 } },
        { "text": "After the steer.", "usage": { "input": 40, "output": 5 } },
        { "text": "First follow-up done.", "usage": { "input": 50, "output": 5 } },
        { "text": "Second follow-up done.", "usage": { "input": 60, "output": 5 } },
        { "text": "Summary of the talk so far.", "usage": { "input": 70, "output": 8 } },
        { "text": "After compaction.", "usage": { "input": 20, "output": 3 } },
    ]})
}

/// Every command of docs/rpc.md that makes sense headless, in an order where each has
/// something to act on. Returns the steps and export_html's response (a known difference,
/// checked on its own).
fn command_sequence(agent: &mut Agent) -> (Vec<Step>, Value) {
    let mut r = Recorder {
        agent,
        steps: Vec::new(),
    };
    r.cmd("get_state (start)", json!({ "type": "get_state" }));
    r.cmd("get_commands", json!({ "type": "get_commands" }));
    r.cmd(
        "get_available_models",
        json!({ "type": "get_available_models" }),
    );
    r.cmd(
        "get_last_assistant_text (none yet)",
        json!({ "type": "get_last_assistant_text" }),
    );
    r.prompt("prompt", "Say hi");
    r.cmd("get_messages", json!({ "type": "get_messages" }));
    r.cmd(
        "get_last_assistant_text",
        json!({ "type": "get_last_assistant_text" }),
    );

    // A run held by the `hold` tool's dialog: queue while it certainly streams. When each
    // output line is read depends on which response the test waits for, so the run's events
    // are compared as one list (the "held run" step) and these steps compare responses only.
    let run = r.agent.mark();
    let held = r
        .agent
        .request(json!({ "type": "prompt", "message": "Use the hold tool" }));
    r.steps.push(Step {
        label: "prompt (held run)".into(),
        response: held,
        events: Vec::new(),
    });
    let hold = r.agent.wait_ui("confirm");
    for (label, command) in [
        ("steer", json!({ "type": "steer", "message": "Steer one" })),
        (
            "follow_up",
            json!({ "type": "follow_up", "message": "Follow one" }),
        ),
    ] {
        let response = r.agent.request(command);
        r.steps.push(Step {
            label: label.into(),
            response,
            events: Vec::new(),
        });
    }
    // pi answers these at once; they are collected after the run goes on, so an agent that
    // answers late is reported rather than stalling the sequence.
    let busy = r
        .agent
        .send_with_id(json!({ "type": "prompt", "message": "Busy prompt" }));
    let queued = r.agent.send_with_id(
        json!({ "type": "prompt", "message": "Queued prompt", "streamingBehavior": "followUp" }),
    );
    for (label, command) in [
        (
            "steer with an extension command",
            json!({ "type": "steer", "message": "/greet nobody" }),
        ),
        ("get_state (streaming)", json!({ "type": "get_state" })),
    ] {
        let response = r.agent.request(command);
        r.steps.push(Step {
            label: label.into(),
            response,
            events: Vec::new(),
        });
    }
    r.agent
        .send(&json!({ "type": "extension_ui_response", "id": hold["id"], "confirmed": true }));
    for (label, id) in [
        ("prompt while streaming, no streamingBehavior", busy),
        ("prompt while streaming, followUp", queued),
    ] {
        let response = r
            .agent
            .response_within(&id, PROMPT_ANSWER_BOUND)
            .unwrap_or_else(|| json!("<no response>"));
        r.steps.push(Step {
            label: label.into(),
            response,
            events: Vec::new(),
        });
    }
    r.agent.wait_idle(run);
    r.push("held run (all its events)", json!(null), run);
    r.cmd(
        "get_messages (after held run)",
        json!({ "type": "get_messages" }),
    );
    r.cmd("get_session_stats", json!({ "type": "get_session_stats" }));
    let forks = r.cmd("get_fork_messages", json!({ "type": "get_fork_messages" }));

    r.cmd(
        "bash",
        json!({ "type": "bash", "command": "echo from bash; exit 3" }),
    );
    r.cmd("abort_bash (idle)", json!({ "type": "abort_bash" }));
    r.cmd(
        "get_messages (after bash)",
        json!({ "type": "get_messages" }),
    );

    r.cmd(
        "set_thinking_level high (no reasoning)",
        json!({ "type": "set_thinking_level", "level": "high" }),
    );
    r.cmd(
        "cycle_thinking_level (no reasoning)",
        json!({ "type": "cycle_thinking_level" }),
    );
    r.cmd(
        "get_state (thinking, no reasoning)",
        json!({ "type": "get_state" }),
    );
    r.cmd(
        "set_model reasoner",
        json!({ "type": "set_model", "provider": PROVIDER, "modelId": REASONER }),
    );
    r.cmd(
        "get_state (after set_model)",
        json!({ "type": "get_state" }),
    );
    r.cmd(
        "set_thinking_level medium",
        json!({ "type": "set_thinking_level", "level": "medium" }),
    );
    r.cmd(
        "cycle_thinking_level",
        json!({ "type": "cycle_thinking_level" }),
    );
    r.cmd(
        "cycle_thinking_level again",
        json!({ "type": "cycle_thinking_level" }),
    );
    r.cmd("cycle_model", json!({ "type": "cycle_model" }));
    r.cmd(
        "get_state (after cycle_model)",
        json!({ "type": "get_state" }),
    );
    r.cmd(
        "set_model unknown",
        json!({ "type": "set_model", "provider": PROVIDER, "modelId": "nope" }),
    );

    r.cmd(
        "set_steering_mode all",
        json!({ "type": "set_steering_mode", "mode": "all" }),
    );
    r.cmd(
        "set_follow_up_mode all",
        json!({ "type": "set_follow_up_mode", "mode": "all" }),
    );
    r.cmd(
        "set_auto_compaction false",
        json!({ "type": "set_auto_compaction", "enabled": false }),
    );
    r.cmd(
        "set_auto_retry false",
        json!({ "type": "set_auto_retry", "enabled": false }),
    );
    r.cmd("abort_retry (idle)", json!({ "type": "abort_retry" }));
    r.cmd(
        "set_session_name",
        json!({ "type": "set_session_name", "name": "  Named session  " }),
    );
    r.cmd(
        "set_session_name blank",
        json!({ "type": "set_session_name", "name": "   " }),
    );
    r.cmd("get_state (settings)", json!({ "type": "get_state" }));

    r.cmd(
        "compact",
        json!({ "type": "compact", "customInstructions": "Be brief" }),
    );
    r.cmd("abort (idle)", json!({ "type": "abort" }));
    r.cmd(
        "get_messages (after compact)",
        json!({ "type": "get_messages" }),
    );
    r.cmd(
        "get_session_stats (after compact)",
        json!({ "type": "get_session_stats" }),
    );
    r.prompt("prompt (after compact)", "Go on");
    // An extension command runs at once: no agent run.
    r.cmd(
        "prompt an extension command",
        json!({ "type": "prompt", "message": "/greet world" }),
    );

    let second_prompt = forks["data"]["messages"][1]["entryId"].clone();
    let original = r.agent.state()["sessionFile"].clone();
    r.cmd("fork", json!({ "type": "fork", "entryId": second_prompt }));
    r.cmd("get_state (fork)", json!({ "type": "get_state" }));
    r.cmd("get_messages (fork)", json!({ "type": "get_messages" }));
    r.cmd(
        "fork unknown entry",
        json!({ "type": "fork", "entryId": "no-such-entry" }),
    );
    r.cmd(
        "switch_session",
        json!({ "type": "switch_session", "sessionPath": original }),
    );
    r.cmd("get_state (switched back)", json!({ "type": "get_state" }));
    r.cmd(
        "get_messages (switched back)",
        json!({ "type": "get_messages" }),
    );
    r.cmd("clone", json!({ "type": "clone" }));
    r.cmd("get_state (clone)", json!({ "type": "get_state" }));
    r.cmd("get_messages (clone)", json!({ "type": "get_messages" }));
    let export = r
        .agent
        .request(json!({ "type": "export_html", "outputPath": "session.html" }));
    r.cmd("new_session", json!({ "type": "new_session" }));
    r.cmd("get_state (new session)", json!({ "type": "get_state" }));
    r.cmd(
        "get_messages (new session)",
        json!({ "type": "get_messages" }),
    );
    r.cmd(
        "get_session_stats (new session)",
        json!({ "type": "get_session_stats" }),
    );

    r.raw("unknown command", r#"{"id":"u1","type":"frobnicate"}"#);
    r.raw("malformed line", r#"{"type": "get_state""#);
    (r.steps, export)
}

/// One side's run of the sequence, normalised.
struct SequenceRun {
    steps: Vec<Step>,
    export: Value,
    /// The exported file's text (its path resolved against the workspace).
    export_html: String,
    mock_calls: usize,
}

fn run_sequence(side: Side) -> SequenceRun {
    let mock = Mock::new(&sequence_script());
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(
        side,
        &home,
        &Launch {
            extensions: &["commands.ts"],
            session: true,
            ..Launch::default()
        },
    );
    let (mut steps, export) = command_sequence(&mut agent);
    let export_html = export["data"]["path"]
        .as_str()
        .and_then(|p| std::fs::read_to_string(home.workspace.join(p)).ok())
        .unwrap_or_default();
    // What the original session file holds, entry by entry (type, and role for messages).
    let file = std::fs::read_to_string(home.session_file()).unwrap_or_default();
    let entries: Vec<Value> = file
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| match e["message"]["role"].as_str() {
            Some(role) => json!(format!("message:{role}")),
            None => e["type"].clone(),
        })
        .collect();
    steps.push(Step {
        label: "the session file's entries".into(),
        response: json!(entries),
        events: Vec::new(),
    });
    let mut normaliser = Normaliser::new(&home, &mock.server.base_url());
    for step in &mut steps {
        step.response = normalise_response(&step.response, &mut normaliser);
        step.events = step.events.iter().map(|e| normaliser.apply(e)).collect();
    }
    if let Some(dir) = std::env::var_os("RPC_DIFF_LOGS") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let text: String = steps
            .iter()
            .map(|s| {
                format!(
                    "## {}\n{}\nevents: {}\n",
                    s.label,
                    serde_json::to_string_pretty(&s.response).unwrap(),
                    Value::Array(s.events.clone())
                )
            })
            .collect();
        std::fs::write(dir.join(format!("{side:?}.txt")), text).unwrap();
        let raw: Vec<String> = agent.out.iter().map(Value::to_string).collect();
        std::fs::write(dir.join(format!("{side:?}.jsonl")), raw.join("\n")).unwrap();
    }
    agent.close();
    let _ = agent.wait_exit(Duration::from_secs(20));
    SequenceRun {
        steps,
        export,
        export_html,
        mock_calls: mock.requests().len(),
    }
}

/// A response with its data normalised; the request id (which differs with the number of
/// polls a side needed) becomes `<request-id>` where there is one; the JavaScript and Rust
/// JSON parsers' own error texts are left out of parse errors.
fn normalise_response(response: &Value, normaliser: &mut Normaliser) -> Value {
    if !response.is_object() {
        return normaliser.apply(response);
    }
    let mut out = response.clone();
    let map = out.as_object_mut().unwrap();
    if map.contains_key("id") {
        map.insert("id".into(), json!("<request-id>"));
    }
    if let Some(data) = map.get("data").cloned() {
        let mut data = normaliser.apply(&data);
        // A command's sourceInfo path names the extension's file on the host in pi;
        // pichamber names the extension (extensions see this list too, and no host paths) —
        // a difference by design. How it was loaded is compared.
        if let Some(commands) = data.get_mut("commands").and_then(Value::as_array_mut) {
            for command in commands {
                if command["source"] != "extension" {
                    command.as_object_mut().map(|c| c.remove("sourceInfo"));
                } else if let Some(info) = command["sourceInfo"].as_object_mut() {
                    info.remove("path");
                    info.remove("baseDir");
                }
            }
        }
        map.insert("data".into(), data);
    }
    if map.get("command") == Some(&json!("parse"))
        && let Some(Value::String(error)) = map.get_mut("error")
        && let Some(at) = error.find(": ")
    {
        error.truncate(at + 2);
        error.push_str("<parser message>");
    }
    out
}

#[test]
fn command_responses_match_pi() {
    pi_bin();
    let pi = run_sequence(Side::Pi);
    // A check of the harness: pi against itself must match step for step.
    let pi_vs_pi = std::env::var_os("RPC_DIFF_PI_VS_PI").is_some();
    let mut ours = run_sequence(if pi_vs_pi { Side::Pi } else { Side::Pichamber });
    if !pi_vs_pi {
        // pichamber speaks pi 1.6.0's protocol, whose prompt, steer and follow_up responses
        // say what became of the message (`data.disposition`); 0.73.1's have no data.
        let mut dispositions = std::collections::BTreeMap::new();
        for step in &mut ours.steps {
            let responses = match &mut step.response {
                Value::Array(list) => list.iter_mut().collect::<Vec<_>>(),
                one => vec![one],
            };
            for response in responses {
                if let Some(map) = response.as_object_mut()
                    && let Some(data) = map.get("data")
                    && data.as_object().is_some_and(|d| d.len() == 1)
                    && let Some(d) = data["disposition"].as_str()
                {
                    dispositions.insert(step.label.clone(), d.to_owned());
                    map.remove("data");
                }
            }
        }
        for (label, want) in [
            ("prompt", "started"),
            ("prompt an extension command", "handled"),
            ("steer", "queued"),
            ("follow_up", "queued"),
            ("prompt while streaming, followUp", "queued"),
        ] {
            assert_eq!(
                dispositions.get(label).map(String::as_str),
                Some(want),
                "{label}: {dispositions:?}"
            );
        }
    }

    // Both write the page where they say; the pages themselves differ by design (pi's is a
    // script rendering embedded JSON, pichamber's is rendered HTML without script).
    for (run, side) in [(&pi, "pi"), (&ours, "pichamber")] {
        assert_eq!(
            run.export["success"],
            json!(true),
            "{side}'s export_html: {}",
            run.export
        );
        let path = run.export["data"]["path"].as_str().unwrap_or_default();
        assert!(
            path.ends_with("session.html"),
            "{side}'s export_html path: {}",
            run.export
        );
        assert!(
            run.export_html.starts_with("<!DOCTYPE html>"),
            "{side}'s export is not an HTML page: {:.200}",
            run.export_html
        );
    }
    if !pi_vs_pi {
        let page = &ours.export_html;
        for text in [
            "Say hi",
            "Hi there.",
            "Named session",
            "Summary of the talk so far.",
        ] {
            assert!(page.contains(text), "the export lacks {text:?}");
        }
        assert!(!page.contains("<script"), "pichamber's export has a script");
    }

    let labels = |run: &SequenceRun| {
        run.steps
            .iter()
            .map(|s| s.label.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(labels(&pi), labels(&ours), "both sides ran the same steps");
    let mut report = Vec::new();
    let mut first = None;
    for (p, o) in pi.steps.iter().zip(&ours.steps) {
        let mut diffs = Vec::new();
        match (&p.response, &o.response) {
            (Value::Array(a), Value::Array(b)) => list_differences("response", a, b, &mut diffs),
            (a, b) => differences(a, b, "response", &mut diffs),
        }
        list_differences("events", &p.events, &o.events, &mut diffs);
        if diffs.is_empty() {
            report.push(format!("  {:<48} matched", p.label));
            continue;
        }
        report.push(format!("  {:<48} differs", p.label));
        for (path, a, b) in &diffs {
            report.push(format!(
                "      at {path}: pi = {} / pichamber = {}",
                short(a),
                short(b)
            ));
        }
        first.get_or_insert_with(|| {
            format!(
                "first diverging step: {}\n  pi:        {}\n  pichamber: {}\n  pi events:        {}\n  pichamber events: {}",
                p.label,
                short(&p.response),
                short(&o.response),
                short(&json!(p.events)),
                short(&json!(o.events))
            )
        });
    }
    if pi.mock_calls != ours.mock_calls {
        report.push(format!(
            "  model calls made: pi {} / pichamber {}",
            pi.mock_calls, ours.mock_calls
        ));
        first.get_or_insert_with(|| "the number of model calls differs".into());
    }
    let report = report.join("\n");
    eprintln!("command responses, pi vs pichamber:\n{report}");
    if let Some(first) = first {
        panic!("{first}\n\nevery step:\n{report}");
    }
}

// ---------------------------------------------------------------------------------------------
// 1. pi's own RpcClient drives the agent

/// Runs tests/oracle/rpc-client-drive.mjs against `side` and returns what it printed.
fn drive(side: Side) -> Value {
    // Both sides need pi's package: the client comes from it.
    pi_bin();
    let script = json!({ "turns": [
        { "text": "Hi there.", "usage": { "input": 10, "output": 3 } },
        { "text": "A slow answer, in pieces.", "chunks": 4, "delayMs": 700,
          "usage": { "input": 20, "output": 6 } },
        { "text": "Steered reply.", "usage": { "input": 30, "output": 3 } },
        { "text": "Follow-up reply.", "usage": { "input": 40, "output": 3 } },
        { "text": "This answer is cut off long before it ends, by an abort.",
          "chunks": 10, "delayMs": 1500 },
    ]});
    let mock = Mock::new(&script);
    let home = Home::new(&mock.server.base_url());
    let launch = Launch {
        extensions: &["commands.ts"],
        model: REASONER,
        ..Launch::default()
    };
    let cli = match side {
        Side::Pi => oracle().join("node_modules/@mariozechner/pi-coding-agent/dist/cli.js"),
        Side::Pichamber => oracle().join("pichamber-as-pi.mjs"),
    };
    let args: Vec<String> = agent_args(side, &home, &launch)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut cmd = Command::new("node");
    cmd.arg(oracle().join("rpc-client-drive.mjs"));
    agent_env(&mut cmd, &home);
    let out = cmd
        .env("PICHAMBER_BIN", common::bin())
        .env("RPC_DRIVE_CLI", cli)
        .env("RPC_DRIVE_ARGS", serde_json::to_string(&args).unwrap())
        .env("RPC_DRIVE_CWD", &home.workspace)
        .stdin(Stdio::null())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{side:?}: rpc-client-drive.mjs printed no JSON ({e}):\n{stdout}\n--- stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        result.get("error").is_none(),
        "{side:?}: pi's RpcClient failed: {}\n--- agent stderr:\n{}",
        result["error"].as_str().unwrap_or_default(),
        result["stderr"].as_str().unwrap_or_default()
    );
    result
}

/// What pi's RpcClient must get from an agent, whichever it is.
fn check_drive(side: Side, r: &Value) {
    let at_start = &r["stateAtStart"];
    assert_eq!(
        at_start["model"]["id"],
        json!(REASONER),
        "{side:?}: {at_start}"
    );
    assert_eq!(
        at_start["model"]["provider"],
        json!(PROVIDER),
        "{side:?}: {at_start}"
    );
    assert_eq!(at_start["isStreaming"], json!(false), "{side:?}");
    assert_eq!(at_start["messageCount"], json!(0), "{side:?}");

    let types: Vec<&str> = r["promptEventTypes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|t| *t != "message_update")
        .collect();
    assert_eq!(
        types,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_end",
            "turn_end",
            "agent_end"
        ],
        "{side:?}: the events promptAndWait collected"
    );
    assert_eq!(r["lastText"], json!("Hi there."), "{side:?}");
    let roles: Vec<&Value> = r["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["role"])
        .collect();
    assert_eq!(roles, [&json!("user"), &json!("assistant")], "{side:?}");

    assert_eq!(
        r["userTextsAfterSteer"],
        json!(["Say hi", "Take your time", "Steer now", "Then this"]),
        "{side:?}: the steer and the follow-up reach the conversation in order"
    );
    assert_eq!(
        r["assistantTextsAfterSteer"],
        json!([
            "Hi there.",
            "A slow answer, in pieces.",
            "Steered reply.",
            "Follow-up reply."
        ]),
        "{side:?}"
    );

    assert_eq!(r["thinkingLevel"], json!("high"), "{side:?}");
    let stats = &r["stats"];
    assert_eq!(stats["userMessages"], json!(4), "{side:?}: {stats}");
    assert_eq!(stats["assistantMessages"], json!(4), "{side:?}: {stats}");
    assert_eq!(stats["totalMessages"], json!(8), "{side:?}: {stats}");
    assert_eq!(stats["tokens"]["input"], json!(100), "{side:?}: {stats}");
    assert_eq!(stats["tokens"]["output"], json!(15), "{side:?}: {stats}");
    assert_eq!(stats["tokens"]["total"], json!(115), "{side:?}: {stats}");

    let greet = r["commands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "greet")
        .unwrap_or_else(|| panic!("{side:?}: no /greet in {}", r["commands"]));
    assert_eq!(greet["description"], json!("Say hello"), "{side:?}");
    assert_eq!(greet["source"], json!("extension"), "{side:?}");

    let bash = &r["bash"];
    assert_eq!(
        bash["output"].as_str().map(str::trim_end),
        Some("driven"),
        "{side:?}: {bash}"
    );
    assert_eq!(bash["exitCode"], json!(0), "{side:?}: {bash}");
    assert_eq!(bash["cancelled"], json!(false), "{side:?}: {bash}");
    assert_eq!(bash["truncated"], json!(false), "{side:?}: {bash}");

    assert_eq!(
        r["abortedMessage"],
        json!({ "role": "assistant", "stopReason": "aborted" }),
        "{side:?}: abort stops the slow turn"
    );
    assert_eq!(
        r["stateAfterAbort"]["isStreaming"],
        json!(false),
        "{side:?}"
    );

    assert_eq!(r["newSession"], json!({ "cancelled": false }), "{side:?}");
    assert_eq!(r["newSessionChangedId"], json!(true), "{side:?}");
    assert_eq!(r["messageCountAfterNew"], json!(0), "{side:?}");
    assert_eq!(r["lastTextAfterNew"], json!(null), "{side:?}");

    // session_start ran at startup and again for the new session (the fixture reports it).
    let statuses: Vec<&Value> = r["uiRequests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["method"] == "setStatus")
        .map(|u| &u["statusText"])
        .collect();
    assert!(
        statuses.first() == Some(&&json!("started: startup"))
            && statuses.contains(&&json!("started: new")),
        "{side:?}: session_start at startup and for new_session, got {statuses:?}"
    );
}

#[test]
fn pi_rpc_client_drives_pi() {
    check_drive(Side::Pi, &drive(Side::Pi));
}

#[test]
fn pi_rpc_client_drives_pichamber() {
    check_drive(Side::Pichamber, &drive(Side::Pichamber));
}

// ---------------------------------------------------------------------------------------------
// 3. Framing

/// U+2028 and U+2029 are content, not line ends; a CRLF-terminated command works; a line of
/// a megabyte works; every line the agent prints is one JSON value ending in LF (checked by
/// [`Agent::next`] for every line read).
fn framing(side: Side) {
    let separators = "line\u{2028}separator\u{2029}paragraph";
    let long = format!("long:{}:end", "0123456789".repeat(100_000));
    let script = json!({ "turns": [
        { "text": format!("echo {separators}") },
        { "text": "crlf ok" },
        { "text": "long ok" },
    ]});
    let mock = Mock::new(&script);
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(side, &home, &Launch::default());

    let prompt = json!({ "type": "prompt", "message": format!("say {separators}") });
    let line = serde_json::to_string(&prompt).unwrap();
    assert!(
        line.contains('\u{2028}') && line.contains('\u{2029}'),
        "the command line carries the separators unescaped"
    );
    agent.prompt(&format!("say {separators}"));
    let echoed = agent
        .out
        .iter()
        .rev()
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .map(|v| common::text_of(&v["message"]["content"]));
    assert_eq!(
        echoed.as_deref(),
        Some(format!("echo {separators}").as_str()),
        "{side:?}: the separators come back inside one output line"
    );

    let mark = agent.mark();
    agent.write_raw(b"{\"id\":\"crlf\",\"type\":\"prompt\",\"message\":\"crlf prompt\"}\r\n");
    let response = agent
        .response_to("crlf")
        .expect("a response to the CRLF line");
    assert_eq!(response["success"], json!(true), "{side:?}: {response}");
    agent.wait_idle(mark);
    agent.write_raw(b"{\"id\":\"crlf-state\",\"type\":\"get_state\"}\r\n");
    let response = agent
        .response_to("crlf-state")
        .expect("a response to get_state");
    assert_eq!(
        response["data"]["messageCount"],
        json!(4),
        "{side:?}: {response}"
    );

    agent.prompt(&long);

    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{side:?}: one model call per prompt");
    let last_user = |i: usize| Mock::user_texts(&requests[i]).last().cloned();
    assert_eq!(last_user(0), Some(format!("say {separators}")), "{side:?}");
    assert_eq!(
        last_user(1).as_deref(),
        Some("crlf prompt"),
        "{side:?}: the CR is not content"
    );
    assert_eq!(
        last_user(2).as_deref(),
        Some(long.as_str()),
        "{side:?}: the long line whole"
    );
    let messages = agent.request(json!({ "type": "get_messages" }));
    assert_eq!(
        common::text_of(&messages["data"]["messages"][4]["content"]),
        long,
        "{side:?}"
    );
}

both_sides!(framing);

// ---------------------------------------------------------------------------------------------
// 4. The extension UI sub-protocol

/// What tests/fixtures/rpc/dialogs.ts's `/ask` must show a client, in order, without the
/// requests' ids (pi's field names, docs/rpc.md "Extension UI Requests").
fn expected_ui_requests() -> Vec<Value> {
    let got = json!({
        "select": "green", "confirm": true, "input": "<undefined>",
        "editor": "edited\ntext", "timedSelect": "<undefined>", "timedConfirm": false,
    });
    [
        json!({ "method": "setTitle", "title": "rpc dialogs" }),
        json!({ "method": "setStatus", "statusKey": "ask", "statusText": "asking" }),
        json!({ "method": "setWidget", "widgetKey": "ask",
                "widgetLines": ["first line", "second line"], "widgetPlacement": "belowEditor" }),
        json!({ "method": "select", "title": "Pick a colour", "options": ["red", "green", "blue"] }),
        json!({ "method": "confirm", "title": "Sure?", "message": "Really sure?" }),
        json!({ "method": "input", "title": "Your name?", "placeholder": "Ada" }),
        json!({ "method": "editor", "title": "Edit this", "prefill": "line one\nline two" }),
        json!({ "method": "select", "title": "Quick!", "options": ["a", "b"], "timeout": 300 }),
        json!({ "method": "confirm", "title": "Quick confirm", "message": "Yes?", "timeout": 300 }),
        json!({ "method": "set_editor_text", "text": "left for the user" }),
        json!({ "method": "setWidget", "widgetKey": "ask" }),
        json!({ "method": "setStatus", "statusKey": "ask" }),
        json!({ "method": "notify", "message": "no type given" }),
        json!({ "method": "notify", "message": got.to_string(), "notifyType": "warning" }),
    ]
    .into_iter()
    .map(|mut v| {
        v["type"] = json!("extension_ui_request");
        v
    })
    .collect()
}

/// Runs `/ask`, answering its dialogs: a value, a confirmation, a cancellation, an edited
/// text; the two with a timeout are left to expire. An answer for an unknown id and a late
/// answer for an expired dialog are ignored.
fn extension_ui(side: Side) {
    let (_mock, _home, mut agent) = with_extension(side, "dialogs.ts");
    let mark = agent.mark();
    let ask = agent.send_with_id(json!({ "type": "prompt", "message": "/ask" }));
    let answer = |agent: &mut Agent, request: &Value, fields: Value| {
        let mut response = json!({ "type": "extension_ui_response", "id": request["id"] });
        response
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        agent.send(&response);
    };
    let select = agent.wait_ui("select");
    agent.send(&json!({ "type": "extension_ui_response", "id": "no-such-dialog", "value": "red" }));
    answer(&mut agent, &select, json!({ "value": "green" }));
    let confirm = agent.wait_ui("confirm");
    answer(&mut agent, &confirm, json!({ "confirmed": true }));
    let input = agent.wait_ui("input");
    answer(&mut agent, &input, json!({ "cancelled": true }));
    let editor = agent.wait_ui("editor");
    answer(&mut agent, &editor, json!({ "value": "edited\ntext" }));
    // Left unanswered: each resolves to its default when its timeout passes.
    let quick = agent.wait_ui("select");
    agent.wait_for("the final notify", |v| {
        v["type"] == "extension_ui_request" && v["notifyType"] == "warning"
    });
    answer(&mut agent, &quick, json!({ "value": "a" }));
    let response = agent.response_to(&ask).expect("a response to /ask");
    assert_eq!(response["success"], json!(true), "{side:?}: {response}");
    assert_eq!(
        agent.state()["isStreaming"],
        json!(false),
        "{side:?}: still serving"
    );

    let requests: Vec<Value> = agent
        .since(mark)
        .iter()
        .filter(|v| v["type"] == "extension_ui_request")
        .cloned()
        .collect();
    let mut ids: Vec<&str> = requests.iter().filter_map(|r| r["id"].as_str()).collect();
    assert_eq!(
        ids.len(),
        requests.len(),
        "{side:?}: every request has a string id"
    );
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), requests.len(), "{side:?}: ids are unique");
    let without_ids: Vec<Value> = requests
        .into_iter()
        .map(|mut r| {
            r.as_object_mut().unwrap().remove("id");
            r
        })
        .collect();
    let expected = expected_ui_requests();
    for (i, (got, want)) in without_ids.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "{side:?}: UI request #{i}");
    }
    assert_eq!(
        without_ids.len(),
        expected.len(),
        "{side:?}: {without_ids:#?}"
    );
}

both_sides!(extension_ui);

// ---------------------------------------------------------------------------------------------
// 5. Prompts during a run, and abort

/// How long a test waits for a response pi gives at once (a liveness bound, not a timing
/// assertion: it only turns a hang into a failure that says what was missing).
const PROMPT_ANSWER_BOUND: Duration = Duration::from_secs(30);

/// Starts a run held by the `hold` tool's confirm dialog; returns (run mark, dialog request).
fn held_run(agent: &mut Agent) -> (usize, Value) {
    let run = agent.mark();
    let r = agent.request(json!({ "type": "prompt", "message": "Use the hold tool" }));
    assert_eq!(r["success"], json!(true), "{:?}: {r}", agent.side);
    let hold = agent.wait_ui("confirm");
    (run, hold)
}

fn release(agent: &mut Agent, hold: &Value) {
    agent.send(&json!({ "type": "extension_ui_response", "id": hold["id"], "confirmed": true }));
}

fn hold_script() -> Value {
    json!({ "turns": [
        { "toolCalls": [{ "id": "call_hold", "name": "hold", "arguments": {} }] },
        { "text": "Done holding." },
    ]})
}

/// A command that throws is reported as pi reports it: under the command's name, event
/// "command", the message only.
fn failing_command_is_reported(side: Side) {
    let (mock, _home, mut agent) = with_extension(side, "commands.ts");
    let mark = agent.mark();
    let response = agent.request(json!({ "type": "prompt", "message": "/fail" }));
    assert_eq!(response["success"], json!(true), "{side:?}: {response}");
    // Both report the failure before they answer the prompt.
    let error = agent
        .since(mark)
        .iter()
        .find(|e| e["type"] == "extension_error")
        .cloned()
        .unwrap_or_else(|| agent.wait_event("extension_error"));
    assert_eq!(
        error,
        json!({ "type": "extension_error", "extensionPath": "command:fail", "event": "command",
                "error": "the command broke" }),
        "{side:?}"
    );
    assert!(
        mock.requests().is_empty(),
        "{side:?}: a command is not sent to the model"
    );
}

both_sides!(failing_command_is_reported);

/// A program spawned with live stdio keeps running after the command that started it: later
/// commands write to it, and its answers (and its end) reach the extension while the session
/// is idle, as in pi.
fn live_program(side: Side) {
    let mock = Mock::new(&json!({ "turns": [] }));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(
        side,
        &home,
        &Launch {
            extensions: &["live-program.ts"],
            grants: &["--allow-run=sh"],
            ..Launch::default()
        },
    );
    for (command, answer) in [
        ("/serve", None),
        ("/say hello", Some("echo:hello")),
        ("/say world", Some("echo:world")),
        ("/stop", Some("server exited null SIGTERM")),
    ] {
        let mark = agent.mark();
        let response = agent.request(json!({ "type": "prompt", "message": command }));
        assert_eq!(response["success"], json!(true), "{side:?}: {response}");
        if let Some(answer) = answer {
            agent.await_notice(mark, answer);
        }
    }
}

both_sides!(live_program);

/// A session of `side` with `extension` (under tests/fixtures/rpc) and a model that is never
/// asked; the mock and home live as long as the agent is used.
fn with_extension(side: Side, extension: &str) -> (Mock, Home, Agent) {
    let mock = Mock::new(&json!({ "turns": [] }));
    let home = Home::new(&mock.server.base_url());
    let agent = Agent::start(
        side,
        &home,
        &Launch {
            extensions: &[extension],
            ..Launch::default()
        },
    );
    (mock, home, agent)
}

/// Runs `command` in a session with `extension` (under tests/fixtures/rpc) and waits for each
/// of `notices` to be shown, in any order.
fn command_notices(side: Side, extension: &str, command: &str, notices: &[&str]) {
    let (_mock, _home, mut agent) = with_extension(side, extension);
    let mark = agent.mark();
    let response = agent.request(json!({ "type": "prompt", "message": command }));
    assert_eq!(response["success"], json!(true), "{side:?}: {response}");
    for notice in notices {
        agent.await_notice(mark, notice);
    }
}

/// Names an import asks for and its module lacks are undefined, as under pi's loader: the
/// extension loads, and only calling one fails.
fn missing_imports_are_undefined(side: Side) {
    command_notices(
        side,
        "missing-import.ts",
        "/imports",
        &[
            "imports: undefined function helped undefined",
            "call: TypeError",
        ],
    );
}

both_sides!(missing_imports_are_undefined);

/// A command awaits `ctx.navigateTree` (tests/fixtures/rpc/navigate-tree.ts): the navigation
/// runs while it waits, its own session_before_tree and session_tree handlers in between, a
/// handler's cancel resolves `{cancelled: true}` and an unknown entry rejects; the notice lists
/// what happened in order, as real pi has it.
fn navigate_tree_from_a_command(side: Side) {
    command_notices(side, "navigate-tree.ts", "/nav", &[NAVIGATION_ORDER]);
}

const NAVIGATION_ORDER: &str = "order: navigating | before_tree(first from second) | \
    tree(first from second, leaf first) | resolved {\"cancelled\":false} at first | \
    before_tree(second from first) | resolved {\"cancelled\":true} at first | \
    missing: Entry no-such-entry not found";

both_sides!(navigate_tree_from_a_command);

/// A command awaits the outcome of its own `ctx.compact` (tests/fixtures/rpc/compact-await.ts):
/// pi starts the compaction at once, beside the command, so its session_before_compact handler
/// and its callback run while the command waits, and the command goes on with the outcome.
fn command_awaits_its_compaction(side: Side) {
    let mock = Mock::new(&json!({ "turns": [
        { "text": "Hello." },
        { "text": "A summary." },
    ]}));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(
        side,
        &home,
        &Launch {
            extensions: &["compact-await.ts"],
            ..Launch::default()
        },
    );
    agent.prompt("Say hello");
    let mark = agent.mark();
    let response = agent.request(json!({ "type": "prompt", "message": "/squash" }));
    assert_eq!(response["success"], json!(true), "{side:?}: {response}");
    agent.await_notice(mark, "compact: asked | before_compact | complete");
}

both_sides!(command_awaits_its_compaction);

/// A package's extensions reach each other over `pi.events` with what they pass as it is:
/// a reply function crosses and is called synchronously (pichamber loads a package's
/// extensions into one instance: SECURITY.md, the isolation unit).
fn package_extensions_pass_functions(side: Side) {
    let (_mock, _home, mut agent) = with_extension(side, "paired-package");
    for (question, answer) in [
        ("/ask tea", "answer #1 to tea (reply is a function)"),
        ("/ask coffee", "answer #2 to coffee (reply is a function)"),
    ] {
        let mark = agent.mark();
        let response = agent.request(json!({ "type": "prompt", "message": question }));
        assert_eq!(response["success"], json!(true), "{side:?}: {response}");
        agent.await_notice(mark, answer);
    }
}

both_sides!(package_extensions_pass_functions);

/// node:worker_threads (tests/fixtures/rpc/workers.ts): a bundled module worker gets its
/// workerData and echoes messages with their structured-clone types, an uncaught error in it
/// is an `error` then `exit 1`, a script worker ends on its own with 0, terminate gives 1, and
/// a function cannot be posted. The lines are Node's own (the pi side).
fn workers(side: Side) {
    command_notices(
        side,
        "workers.ts",
        "/workers",
        &[
            r#"data: message {"workerData":{"n":2,"when":"1970-01-01T00:00:00.000Z","big":"10n","nothing":"undefined"},"kinds":{"n":"Number","when":"Date","big":"BigInt","nothing":"undefined"},"isMainThread":false}"#,
            r#"echo: message {"echoed":{"text":"hi","tags":{"set":["a","b"]},"bytes":{"bytes":[1,2]}},"kinds":{"text":"String","tags":"Set","bytes":"Uint8Array"}}"#,
            "clone: DataCloneError",
            "boom: error boom from the worker",
            "then: exit 1",
            r#"script: message {"doubled":42,"isMainThread":false}"#,
            "script then: exit 0",
            "terminate: 1",
        ],
    );
}

both_sides!(workers);

/// node:vm (tests/fixtures/rpc/vm.ts): a context's object provides its globals and gets what
/// a script defines, its built-ins are its own, an async script settles in the caller, an
/// error crosses back from the other realm, and this realm's eval. The lines are Node's own.
fn vm_contexts(side: Side) {
    command_notices(
        side,
        "vm.ts",
        "/vm",
        &[
            "sync: 12 y=6",
            "isContext: true false",
            "fresh: undefined,function,false",
            "async: 7",
            "thrown: TypeError: bad input sameRealm=false",
            "syntax: SyntaxError",
            "this: function",
            "compiled: 5",
        ],
    );
}

both_sides!(vm_contexts);

/// Each new session runs the factory again (tests/fixtures/rpc/fresh-sessions.ts): its
/// closure starts afresh and its command is there once. pichamber's sessions (which make the
/// next instance while they wait, `Session::set_slots_to_spare`) are instances of their own:
/// nothing of the module's state carries over.
fn each_new_session_runs_the_factory(side: Side) {
    let (_mock, _home, mut agent) = with_extension(side, "fresh-sessions.ts");
    agent.await_notice(0, "start startup: starts 1");
    for round in 0..3 {
        let mark = agent.mark();
        let response = agent.request(json!({ "type": "new_session" }));
        assert_eq!(response["success"], json!(true), "{side:?}: {response}");
        agent.await_notice(mark, "start new: starts 1");
        let commands = agent.request(json!({ "type": "get_commands" }));
        let runs = commands["data"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["name"] == "runs")
            .count();
        assert_eq!(runs, 1, "{side:?}, round {round}: {commands}");
        if side == Side::Pichamber {
            let mark = agent.mark();
            agent.request(json!({ "type": "prompt", "message": "/runs" }));
            agent.await_notice(mark, "factory runs 1");
        }
    }
}

both_sides!(each_new_session_runs_the_factory);

/// An extension reads its own package's files next to `import.meta.url` (pichamber packages
/// them into the artifact and serves them read-only at `/ext`): contents, a folder's listing,
/// stat, existence, and ENOENT for what the package lacks. The lines are Node's own.
fn package_files(side: Side) {
    command_notices(
        side,
        "package-files",
        "/files",
        &[
            r##"readme: "# Package files\n\nRead at run time.\n""##,
            "prompts: plan.md,review.md",
            "stat: dir=true file=true",
            "exists: false true",
            "version: 1.2.3",
            "missing: ENOENT",
        ],
    );
}

both_sides!(package_files);

/// A prompt without streamingBehavior while a run streams is refused at once with pi's
/// error, and never reaches the model.
fn prompt_during_run_is_refused(side: Side) {
    let mock = Mock::new(&hold_script());
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(
        side,
        &home,
        &Launch {
            extensions: &["commands.ts"],
            ..Launch::default()
        },
    );
    let (run, hold) = held_run(&mut agent);
    let busy = agent.send_with_id(json!({ "type": "prompt", "message": "Busy prompt" }));
    let response = agent.response_within(&busy, PROMPT_ANSWER_BOUND);
    release(&mut agent, &hold);
    let response = response.unwrap_or_else(|| {
        panic!("{side:?} did not answer a prompt sent while a run was in progress (pi refuses it at once)")
    });
    assert_eq!(
        response,
        json!({ "id": busy, "type": "response", "command": "prompt", "success": false,
                "error": "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message." }),
        "{side:?}"
    );
    agent.wait_idle(run);
    let requests = mock.requests();
    assert_eq!(
        requests.len(),
        2,
        "{side:?}: the held run's two model calls only"
    );
    assert!(
        requests
            .iter()
            .all(|r| !Mock::user_texts(r).iter().any(|t| t == "Busy prompt")),
        "{side:?}: the refused prompt reached the model"
    );
}

both_sides!(prompt_during_run_is_refused);

/// A prompt with streamingBehavior "steer" while a run streams is accepted at once and
/// delivered before the next model call.
fn prompt_steers_a_run(side: Side) {
    let mock = Mock::new(&hold_script());
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(
        side,
        &home,
        &Launch {
            extensions: &["commands.ts"],
            ..Launch::default()
        },
    );
    let (run, hold) = held_run(&mut agent);
    let steer = agent.send_with_id(
        json!({ "type": "prompt", "message": "Steered in", "streamingBehavior": "steer" }),
    );
    let response = agent.response_within(&steer, PROMPT_ANSWER_BOUND);
    let pending = agent.state()["pendingMessageCount"].clone();
    release(&mut agent, &hold);
    let response = response.unwrap_or_else(|| {
        panic!("{side:?} did not answer a steering prompt while a run was in progress (pi accepts it at once)")
    });
    assert_eq!(response["success"], json!(true), "{side:?}: {response}");
    assert_eq!(
        pending,
        json!(1),
        "{side:?}: the steer is pending while the run is held"
    );
    agent.wait_idle(run);
    let requests = mock.requests();
    assert_eq!(requests.len(), 2, "{side:?}");
    assert_eq!(
        Mock::user_texts(&requests[0]),
        ["Use the hold tool"],
        "{side:?}"
    );
    let second = &requests[1]["messages"];
    let roles: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user"],
        "{side:?}: the steer follows the tool result in the next call"
    );
    assert_eq!(
        Mock::user_texts(&requests[1]).last().map(String::as_str),
        Some("Steered in"),
        "{side:?}"
    );
}

both_sides!(prompt_steers_a_run);

/// `abort` during a slow model turn ends the run with stopReason "aborted", long before the
/// turn would have ended.
fn abort_stops_a_slow_turn(side: Side) {
    let full = "This answer is cut off long before it ends, by an abort.";
    let mock = Mock::new(&json!({ "turns": [
        { "text": full, "chunks": 10, "delayMs": 1500 },
    ]}));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(side, &home, &Launch::default());
    let run = agent.mark();
    let r = agent.request(json!({ "type": "prompt", "message": "Take your time" }));
    assert_eq!(r["success"], json!(true), "{side:?}: {r}");
    agent.wait_for("the first text delta", |v| {
        v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == "text_delta"
    });
    let r = agent.request(json!({ "type": "abort" }));
    assert_eq!(r["success"], json!(true), "{side:?}: {r}");
    // pi may print agent_end before the abort's response.
    let end = match agent.since(run).iter().find(|v| v["type"] == "agent_end") {
        Some(end) => end.clone(),
        None => agent.wait_event("agent_end"),
    };
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], json!("assistant"), "{side:?}: {last}");
    assert_eq!(last["stopReason"], json!("aborted"), "{side:?}: {last}");
    assert_ne!(
        common::text_of(&last["content"]),
        full,
        "{side:?}: the turn was cut short"
    );
    agent.wait_idle(run);
    let state = agent.state();
    assert_eq!(state["isStreaming"], json!(false), "{side:?}");
}

both_sides!(abort_stops_a_slow_turn);

/// An `abort` while nothing runs does not cancel what comes next (pi resets its abort
/// signal per operation): a manual compaction after it succeeds.
fn abort_while_idle_then_compact(side: Side) {
    let mock = Mock::new(&json!({ "turns": [
        { "text": "Hello.", "usage": { "input": 10, "output": 2 } },
        { "text": "A summary." },
    ]}));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(
        side,
        &home,
        &Launch {
            session: true,
            ..Launch::default()
        },
    );
    agent.prompt("Say hello");
    let r = agent.request(json!({ "type": "abort" }));
    assert_eq!(r["success"], json!(true), "{side:?}: {r}");
    let r = agent.request(json!({ "type": "compact" }));
    assert_eq!(
        r["success"],
        json!(true),
        "{side:?}: compact after an idle abort: {r}"
    );
    assert_eq!(r["data"]["summary"], json!("A summary."), "{side:?}: {r}");
}

both_sides!(abort_while_idle_then_compact);

/// `abort_bash` stops a running `bash` command; its response says it was cancelled and keeps
/// the output so far.
/// The command creates a file before it sleeps, so the abort is sent while it certainly runs.
fn abort_bash_cancels_a_running_command(side: Side) {
    let mock = Mock::new(&json!({ "turns": [] }));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(side, &home, &Launch::default());
    let started = home.workspace.join("started");
    let bash = agent.send_with_id(
        json!({ "type": "bash", "command": "echo early; touch started; sleep 30; echo late" }),
    );
    let until = Instant::now() + DEADLINE;
    while !started.exists() {
        assert!(
            Instant::now() < until,
            "{side:?}: the bash command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = agent.request(json!({ "type": "abort_bash" }));
    assert_eq!(r["success"], json!(true), "{side:?}: {r}");
    let response = agent.response_to(&bash).expect("a response to bash");
    assert_eq!(response["success"], json!(true), "{side:?}: {response}");
    // What ran before the abort is kept; there is no exit code (pi leaves the field out).
    assert_eq!(
        response["data"],
        json!({ "output": "early\n", "cancelled": true, "truncated": false }),
        "{side:?}"
    );
}

both_sides!(abort_bash_cancels_a_running_command);

// ---------------------------------------------------------------------------------------------
// 6. How the process ends

/// pi acts on `ctx.shutdown()` from an extension command once it has handled the next
/// command line (rpc-mode.js checks the request after each command), stdin still open.
#[test]
fn shutdown_from_a_command_pi() {
    let mock = Mock::new(&json!({ "turns": [] }));
    let home = Home::new(&mock.server.base_url());
    let launch = Launch {
        extensions: &["commands.ts"],
        ..Launch::default()
    };
    let mut agent = Agent::start(Side::Pi, &home, &launch);
    // pi answers an extension command's prompt after the handler ran.
    let r = agent.request(json!({ "type": "prompt", "message": "/quit" }));
    assert_eq!(r["success"], json!(true), "{r}");
    agent.send_with_id(json!({ "type": "get_state" }));
    let status = agent.wait_exit(Duration::from_secs(60));
    assert!(agent.stdin.is_some(), "stdin stays open");
    assert!(
        status.is_some_and(|s| s.success()),
        "pi did not exit (cleanly) after ctx.shutdown(): {status:?}\n{}",
        agent.tail(8)
    );
}

/// pichamber acts on `ctx.shutdown()` from an extension command when the command returns,
/// without waiting for more input (stdin stays open).
#[test]
fn shutdown_from_a_command_ends_pichamber() {
    let mock = Mock::new(&json!({ "turns": [] }));
    let home = Home::new(&mock.server.base_url());
    let launch = Launch {
        extensions: &["commands.ts"],
        ..Launch::default()
    };
    let mut agent = Agent::start(Side::Pichamber, &home, &launch);
    agent.state();
    agent.send_with_id(json!({ "type": "prompt", "message": "/quit" }));
    let status = agent.wait_exit(Duration::from_secs(60));
    assert!(agent.stdin.is_some(), "stdin stays open");
    assert!(
        status.is_some_and(|s| s.success()),
        "pichamber did not exit after ctx.shutdown() (stdin open, no further input): {status:?}\n{}",
        agent.tail(8)
    );
}

/// Closing stdin ends pichamber once the work already accepted is done: a prompt sent just
/// before the input ends still runs to completion. (pi exits at once when its input ends,
/// abandoning the run: this is pichamber's own promise, not pi's behaviour.)
#[test]
fn closing_stdin_finishes_work_in_flight() {
    let full = "An answer that takes a while.";
    let mock = Mock::new(&json!({ "turns": [
        { "text": full, "chunks": 3, "delayMs": 500 },
    ]}));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(Side::Pichamber, &home, &Launch::default());
    agent.send(&json!({ "id": "last", "type": "prompt", "message": "One more thing" }));
    agent.close();
    let status = agent.wait_exit(Duration::from_secs(60));
    assert!(
        status.is_some_and(|s| s.success()),
        "pichamber did not exit cleanly after stdin closed: {status:?}\n{}",
        agent.tail(8)
    );
    let response = agent
        .out
        .iter()
        .find(|v| v["type"] == "response" && v["id"] == "last")
        .cloned();
    assert_eq!(
        response.map(|r| r["success"].clone()),
        Some(json!(true)),
        "the prompt sent before stdin closed was answered:\n{}",
        agent.tail(8)
    );
    let end = agent
        .out
        .iter()
        .find(|v| v["type"] == "agent_end")
        .unwrap_or_else(|| panic!("the run finished before exiting:\n{}", agent.tail(8)));
    let last = end["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["stopReason"], json!("stop"), "{last}");
    assert_eq!(common::text_of(&last["content"]), full);
    assert_eq!(mock.requests().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// export_html

/// Without a session file both refuse to export, with pi's words; with one, a directory as
/// outputPath is refused and a relative path lands in the session's directory.
fn export_html_paths(side: Side) {
    let mock = Mock::new(&json!({ "turns": [{ "text": "Hello." }] }));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(side, &home, &Launch::default());
    let r = agent.request(json!({ "type": "export_html" }));
    assert_eq!(
        (r["success"].clone(), r["error"].clone()),
        (
            json!(false),
            json!("Cannot export in-memory session to HTML")
        ),
        "{side:?}: {r}"
    );
    agent.close();
    let _ = agent.wait_exit(Duration::from_secs(20));

    let mut agent = Agent::start(
        side,
        &home,
        &Launch {
            session: true,
            ..Launch::default()
        },
    );
    agent.prompt("Hi");
    let r = agent.request(json!({ "type": "export_html" }));
    assert_eq!(r["success"], json!(true), "{side:?}: {r}");
    let path = r["data"]["path"].as_str().unwrap().to_owned();
    // pi answers with the name it chose (relative to its directory), pichamber with the
    // absolute path; both the same file.
    assert!(path.ends_with("pi-session-main.html"), "{side:?}: {r}");
    assert!(
        home.workspace.join("pi-session-main.html").is_file(),
        "{side:?}"
    );
    std::fs::create_dir(home.workspace.join("a-folder")).unwrap();
    let r = agent.request(json!({ "type": "export_html", "outputPath": "a-folder" }));
    assert_eq!(r["success"], json!(false), "{side:?}: {r}");
    assert!(home.workspace.join("a-folder").is_dir());
    agent.close();
    let _ = agent.wait_exit(Duration::from_secs(20));
}

both_sides!(export_html_paths);

/// Model, user and extension texts are hostile: the page pichamber writes has no script, no
/// event handler and no javascript: link, whatever the session holds, and still shows the
/// text around them.
#[test]
fn export_html_neutralises_hostile_content() {
    let hostile = "Look **here** <script>alert('model')</script>\n\n\
                   <img src=x onerror=\"alert('img')\">\n\n\
                   [click me](javascript:alert('link')) <a href=\"javascript:void(0)\" onclick=\"x()\">a</a>\n\n\
                   <iframe src=\"https://evil.example\"></iframe>";
    let mock = Mock::new(&json!({ "turns": [
        { "thinking": "<script>thinking()</script>", "text": hostile,
          "toolCalls": [{ "id": "call_1", "name": "no_such_tool",
                          "arguments": { "html": "</pre><script>args()</script>" } }] },
        { "text": "Done <svg onload=alert(1)>." },
    ]}));
    let home = Home::new(&mock.server.base_url());
    let mut agent = Agent::start(
        Side::Pichamber,
        &home,
        &Launch {
            session: true,
            ..Launch::default()
        },
    );
    agent.prompt("User says <script>user()</script> and <b onmouseover=alert(1)>hi</b>");
    let r = agent.request(json!({ "type": "export_html", "outputPath": "out/../hostile.html" }));
    assert_eq!(
        r["success"],
        json!(false),
        "a path through a missing folder: {r}"
    );
    let r = agent.request(json!({ "type": "export_html", "outputPath": "hostile.html" }));
    assert_eq!(r["success"], json!(true), "{r}");
    let page = std::fs::read_to_string(home.workspace.join("hostile.html")).unwrap();
    let lower = page.to_lowercase();
    for bad in [
        "<script",
        "onerror",
        "onclick",
        "onload",
        "onmouseover",
        "javascript:",
        "<iframe",
        "<svg",
    ] {
        assert!(!lower.contains(bad), "the export contains {bad:?}:\n{page}");
    }
    for good in [
        "<strong>here</strong>",
        "click me",
        "Tool call: no_such_tool",
        "Done",
        "User says",
        "<b>hi</b>",
        "&lt;script&gt;thinking()&lt;/script&gt;",
        "Content-Security-Policy",
    ] {
        assert!(page.contains(good), "the export lacks {good:?}:\n{page}");
    }
}

// ---------------------------------------------------------------------------------------------
// Automatic retry

/// A scripted HTTP 500 the OpenAI SDK leaves alone (`x-should-retry: false`), so the retry
/// is the agent's.
fn http_500(message: &str) -> Value {
    json!({ "httpStatus": 500, "errorMessage": message, "headers": { "x-should-retry": "false" } })
}

/// What a retry test compares: the lifecycle and retry events in order (message events by
/// role, stop reason and error), leaving out streaming updates.
fn retry_signature(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| {
            let kind = e["type"].as_str()?;
            match kind {
                "auto_retry_start" | "auto_retry_end" => Some(e.clone()),
                "agent_start" | "turn_start" => Some(json!(kind)),
                "agent_end" => Some(json!({ "agent_end": e["messages"].as_array()?.len() })),
                "message_start" | "message_end" | "turn_end" => {
                    let m = &e["message"];
                    let mut s = json!({ "type": kind, "role": m["role"] });
                    if m["role"] == "assistant" && kind != "message_start" {
                        s["stopReason"] = m["stopReason"].clone();
                        if let Some(error) = m.get("errorMessage") {
                            s["errorMessage"] = error.clone();
                        }
                    }
                    Some(s)
                }
                _ => None,
            }
        })
        .collect()
}

/// One retry scenario on `side`: pi's settings.json in the agent dir, a script, a prompt;
/// when a retry is expected, `during` acts on the first auto_retry_start and the run is
/// followed to its auto_retry_end. Returns the event signature after the prompt, the model
/// requests, and the context's messages at the end.
fn retry_run(
    side: Side,
    settings: Value,
    script: Value,
    expect_retry: bool,
    during: impl Fn(&mut Agent),
) -> (Vec<Value>, Vec<Value>, Value) {
    let mock = Mock::new(&script);
    let home = Home::new(&mock.server.base_url());
    std::fs::write(home.agent_dir.join("settings.json"), settings.to_string()).unwrap();
    let mut agent = Agent::start(side, &home, &Launch::default());
    let mark = agent.mark();
    let r = agent.request(json!({ "type": "prompt", "message": "Try it" }));
    assert_eq!(r["success"], json!(true), "{side:?}: {r}");
    if expect_retry {
        agent.wait_event("auto_retry_start");
        let before = agent.mark();
        during(&mut agent);
        // pi prints the end of a cancelled retry before its answer to abort_retry.
        if agent.count_since(before, "auto_retry_end") == 0 {
            agent.wait_event("auto_retry_end");
        }
    }
    agent.wait_idle(mark);
    let messages = agent.request(json!({ "type": "get_messages" }))["data"]["messages"].clone();
    let signature = retry_signature(agent.since(mark));
    agent.close();
    let _ = agent.wait_exit(Duration::from_secs(20));
    (signature, mock.requests(), messages)
}

/// Runs a scenario on both sides; the event sequences and the requests' messages must match.
fn retry_both(
    settings: Value,
    script: Value,
    expect_retry: bool,
    during: impl Fn(&mut Agent) + Copy,
) -> (Vec<Value>, Vec<Value>, Value) {
    let pi = retry_run(
        Side::Pi,
        settings.clone(),
        script.clone(),
        expect_retry,
        during,
    );
    let ours = retry_run(Side::Pichamber, settings, script, expect_retry, during);
    assert_eq!(
        ours.0,
        pi.0,
        "events differ\npi:        {}\npichamber: {}",
        json!(pi.0),
        json!(ours.0)
    );
    let contexts = |requests: &[Value]| -> Vec<Value> {
        requests
            .iter()
            .map(|r| json!(r["messages"].as_array().map(|m| m.len())))
            .collect()
    };
    assert_eq!(contexts(&ours.1), contexts(&pi.1), "model requests differ");
    let roles = |messages: &Value| -> Vec<Value> {
        messages
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| json!([m["role"], m["stopReason"]]))
            .collect()
    };
    assert_eq!(roles(&ours.2), roles(&pi.2), "the final contexts differ");
    ours
}

fn retry_settings(max_retries: u64, base_delay_ms: u64) -> Value {
    json!({ "retry": { "maxRetries": max_retries, "baseDelayMs": base_delay_ms } })
}

/// A transient error is retried after the delay, the failed message leaves the context,
/// and the success ends the series: as pi does.
#[test]
fn auto_retry_recovers_like_pi() {
    pi_bin();
    let script = json!({ "turns": [http_500("boom"), { "text": "Recovered." }] });
    let (events, requests, messages) =
        retry_both(retry_settings(2, 30), script, true, |_: &mut Agent| {});
    let retry: Vec<&Value> = events
        .iter()
        .filter(|e| e.get("success").is_some() || e["type"] == "auto_retry_start")
        .collect();
    assert_eq!(
        retry,
        [
            &json!({ "type": "auto_retry_start", "attempt": 1, "maxAttempts": 2, "delayMs": 30,
                     "errorMessage": "500 boom" }),
            &json!({ "type": "auto_retry_end", "success": true, "attempt": 1 }),
        ]
    );
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["messages"], requests[1]["messages"],
        "the retry sends the context without the failed message"
    );
    let texts: Vec<String> = messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| common::text_of(&m["content"]))
        .collect();
    assert_eq!(texts, ["Try it", "Recovered."]);
}

/// Every attempt failing ends the series with the last error; delays double.
#[test]
fn auto_retry_gives_up_like_pi() {
    pi_bin();
    let script = json!({ "turns": [http_500("one"), http_500("two"), http_500("three")] });
    let (events, requests, _) = retry_both(retry_settings(2, 20), script, true, |_: &mut Agent| {});
    let retry: Vec<Value> = events
        .iter()
        .filter(|e| e["type"] == "auto_retry_start" || e["type"] == "auto_retry_end")
        .cloned()
        .collect();
    assert_eq!(
        retry,
        [
            json!({ "type": "auto_retry_start", "attempt": 1, "maxAttempts": 2, "delayMs": 20,
                    "errorMessage": "500 one" }),
            json!({ "type": "auto_retry_start", "attempt": 2, "maxAttempts": 2, "delayMs": 40,
                    "errorMessage": "500 two" }),
            json!({ "type": "auto_retry_end", "success": false, "attempt": 2,
                    "finalError": "500 three" }),
        ]
    );
    assert_eq!(requests.len(), 3);
}

/// A retry cancelled while it waits (by `command`): no further model call, and the series
/// ends with pi's "Retry cancelled".
fn retry_cancelled_by(command: &str) {
    pi_bin();
    let script = json!({ "turns": [http_500("boom"), { "text": "Not reached." }] });
    let (events, requests, _) = retry_both(
        retry_settings(3, 60_000),
        script,
        true,
        |agent: &mut Agent| {
            let r = agent.request(json!({ "type": command }));
            assert_eq!(r["success"], json!(true), "{r}");
        },
    );
    assert_eq!(
        events.last(),
        Some(
            &json!({ "type": "auto_retry_end", "success": false, "attempt": 1,
                      "finalError": "Retry cancelled" })
        )
    );
    assert_eq!(requests.len(), 1);
}

/// abort_retry during the wait cancels the retry.
#[test]
fn abort_retry_cancels_like_pi() {
    retry_cancelled_by("abort_retry");
}

/// `abort` while waiting to retry cancels the retry too, as pi's abort does.
#[test]
fn abort_cancels_a_retry_like_pi() {
    retry_cancelled_by("abort");
}

/// The provider's own retries (the OpenAI SDK's, within one model call) come first; only
/// when they are used up does the agent retry.
#[test]
fn sdk_retries_come_before_the_agents_like_pi() {
    pi_bin();
    let quick =
        json!({ "httpStatus": 503, "errorMessage": "busy", "headers": { "retry-after-ms": "1" } });
    let script =
        json!({ "turns": [quick.clone(), quick.clone(), quick, { "text": "Recovered." }] });
    let (events, requests, _) = retry_both(retry_settings(1, 10), script, true, |_: &mut Agent| {});
    assert!(events.contains(
        &json!({ "type": "auto_retry_start", "attempt": 1, "maxAttempts": 1,
                                     "delayMs": 10, "errorMessage": "503 busy" })
    ));
    assert_eq!(
        requests.len(),
        4,
        "three SDK attempts, then the agent's retry"
    );
}

/// With retry off in settings.json, an error ends the run; a non-transient error is never
/// retried.
#[test]
fn auto_retry_off_or_not_transient_like_pi() {
    pi_bin();
    let off = json!({ "retry": { "enabled": false, "baseDelayMs": 1 } });
    let script = json!({ "turns": [http_500("boom"), { "text": "Not reached." }] });
    let (events, requests, _) = retry_both(off, script, false, |_: &mut Agent| {});
    assert!(events.iter().all(|e| {
        !e["type"]
            .as_str()
            .unwrap_or_default()
            .starts_with("auto_retry")
    }));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(requests.len(), 1);

    let script = json!({ "turns": [
        { "httpStatus": 400, "errorMessage": "bad request" }, { "text": "Not reached." },
    ]});
    let (events, requests, _) = retry_both(retry_settings(3, 1), script, false, |_: &mut Agent| {});
    assert!(events.iter().all(|e| {
        !e["type"]
            .as_str()
            .unwrap_or_default()
            .starts_with("auto_retry")
    }));
    assert_eq!(requests.len(), 1);
}
