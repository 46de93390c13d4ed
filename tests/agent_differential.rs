//! Differential tests of the agent loop: one scripted mock model (pichamber's
//! `model::mock_server`, a fresh instance per side) serves the same turns to real pi
//! (`pi --mode rpc`, the mock configured as a models.json custom provider) and to
//! `pichamber run --prompt`. Both load the same extensions, led by
//! tests/fixtures/agent-diff/logger.ts, which appends every extension event it receives to
//! $EVENT_LOG. The two logs must be equal after [`normalise`]; a failure names the first
//! diverging event and the JSON path where it differs, and every run prints a per-event
//! summary (matched / differs) to stderr (`--nocapture` shows it).
//!
//! Both sides run with the same workspace, the same `--system-prompt` (pichamber leaves out
//! pi's documentation section from the default prompt by design; a custom prompt is built the
//! same way by both) and no discovered resources (`--no-extensions --no-skills ...` for pi).
//!
//! With AGENT_DIFF_PI_VS_PI set, the second side is another run of real pi instead of
//! pichamber: a check of the harness (what normalise leaves must not vary between runs).
//!
//! With AGENT_DIFF_LOGS=DIR, both raw logs are kept there as <scenario>.{pi,pichamber}.jsonl.
//!
//! Real pi comes from tests/oracle (`npm ci --prefix tests/oracle`); without it these tests
//! fail with a message saying so.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pichamber_model::Script;
use pichamber_model::mock_server::{self, MockServer};
use serde_json::{Value, json};

const PROVIDER: &str = "mock";
const MODEL: &str = "mock-model";
const SYSTEM_PROMPT: &str = "You are a test.";
/// How long one side may take for a whole scenario before the test gives up on it.
const DEADLINE: Duration = Duration::from_secs(120);

fn fixture(name: &str) -> PathBuf {
    common::repo().join("tests/fixtures/agent-diff").join(name)
}

fn pi_bin() -> PathBuf {
    let bin = common::repo().join("tests/oracle/node_modules/.bin/pi");
    assert!(
        bin.exists(),
        "real pi is missing ({}): run `npm ci --prefix tests/oracle`",
        bin.display()
    );
    bin
}

/// One differential case: extensions (after the logger), prompts sent in order, the model's
/// turns, and whether pi's built-in tools are active.
struct Scenario {
    name: &'static str,
    extensions: &'static [&'static str],
    prompts: &'static [&'static str],
    script: Value,
    builtin_tools: bool,
}

impl Scenario {
    fn extension_paths(&self) -> Vec<PathBuf> {
        std::iter::once("logger.ts")
            .chain(self.extensions.iter().copied())
            .map(fixture)
            .collect()
    }
}

/// A mock model server with its own runtime, which keeps serving while the test thread
/// blocks on a child process.
struct Mock {
    server: MockServer,
    _runtime: tokio::runtime::Runtime,
}

fn serve(script: &Value) -> Mock {
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

/// pi's models.json with the mock as a custom OpenAI-compatible provider.
fn write_models_json(dir: &Path, base_url: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("models.json");
    let models = json!({ "providers": { PROVIDER: {
        "baseUrl": base_url,
        "api": "openai-completions",
        "apiKey": "test-key",
        "models": [{ "id": MODEL }],
    }}});
    std::fs::write(&path, serde_json::to_string_pretty(&models).unwrap()).unwrap();
    path
}

/// Lines a child printed, read on a thread so the test can wait with a deadline.
fn line_reader(stream: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn collect_text(stream: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = BufReader::new(stream).read_to_string(&mut text);
        text
    })
}

/// Waits for a child to exit before `deadline`; kills it otherwise.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<std::process::ExitStatus> {
    loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// pi in RPC mode: requests with ids, responses matched by id, and a count of the
/// agent_start / agent_end events it printed on the way.
struct PiRpc {
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    next_id: usize,
    agent_starts: usize,
    agent_ends: usize,
    deadline: Instant,
}

impl PiRpc {
    fn request(&mut self, mut command: Value) -> Value {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        command["id"] = json!(id);
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("write to pi");
        stdin.flush().unwrap();
        loop {
            let event = self.next_event();
            if event["type"] == "response" && event["id"] == json!(id) {
                return event;
            }
        }
    }

    fn next_event(&mut self) -> Value {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .expect("pi answered before the deadline");
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            match event["type"].as_str() {
                Some("agent_start") => self.agent_starts += 1,
                Some("agent_end") => self.agent_ends += 1,
                _ => {}
            }
            return event;
        }
    }

    fn state(&mut self) -> Value {
        let response = self.request(json!({ "type": "get_state" }));
        response["data"].clone()
    }

    /// Sends a prompt and returns when pi is idle again with every run's events delivered.
    ///
    /// pi hands agent events to extensions through an asynchronous queue, so `isStreaming`
    /// can turn false before extensions saw `agent_end`; the RPC `agent_end` line is printed
    /// after the extensions handled it, so a run counts as finished only when it is seen.
    fn prompt(&mut self, message: &str) {
        let before = self.state()["messageCount"].as_u64().unwrap_or(0);
        let response = self.request(json!({ "type": "prompt", "message": message }));
        assert_eq!(
            response["success"],
            json!(true),
            "pi refused the prompt {message:?}: {response}"
        );
        let state = loop {
            let state = self.state();
            if state["isStreaming"] == json!(false) && state["pendingMessageCount"] == json!(0) {
                break state;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if state["messageCount"].as_u64().unwrap_or(0) > before {
            while self.agent_ends == 0 || self.agent_ends < self.agent_starts {
                self.next_event();
            }
        }
        self.agent_starts = 0;
        self.agent_ends = 0;
    }
}

fn run_pi(scenario: &Scenario, workspace: &Path, agent_dir: &Path, log: &Path) {
    let mut cmd = Command::new(pi_bin());
    cmd.args([
        "--mode",
        "rpc",
        "--no-session",
        "--no-extensions",
        "--no-skills",
        "--no-prompt-templates",
        "--no-themes",
        "--no-context-files",
        "--provider",
        PROVIDER,
        "--model",
        MODEL,
        "--system-prompt",
        SYSTEM_PROMPT,
    ]);
    if !scenario.builtin_tools {
        cmd.arg("--no-builtin-tools");
    }
    for e in scenario.extension_paths() {
        cmd.arg("-e").arg(e);
    }
    let mut child = cmd
        .current_dir(workspace)
        .env("PI_CODING_AGENT_DIR", agent_dir)
        .env("HOME", agent_dir)
        .env("PI_OFFLINE", "1")
        .env("EVENT_LOG", log)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pi");
    let stderr = collect_text(child.stderr.take().unwrap());
    let deadline = Instant::now() + DEADLINE;
    let mut rpc = PiRpc {
        stdin: child.stdin.take(),
        lines: line_reader(child.stdout.take().unwrap()),
        next_id: 0,
        agent_starts: 0,
        agent_ends: 0,
        deadline,
    };
    rpc.state();
    for prompt in scenario.prompts {
        rpc.prompt(prompt);
    }
    // Closing stdin ends RPC mode the way a client quitting does (session_shutdown "quit").
    drop(rpc.stdin.take());
    let status = wait_until(&mut child, deadline);
    assert!(
        status.is_some_and(|s| s.success()),
        "pi did not exit cleanly ({status:?}):\n{}",
        stderr.join().unwrap_or_default()
    );
}

/// What `pichamber run` reported besides the log: exit status, errors, stderr.
struct PichamberRun {
    success: bool,
    errors: Vec<Value>,
    stderr: String,
}

fn run_pichamber(scenario: &Scenario, workspace: &Path, models: &Path, log: &Path) -> PichamberRun {
    let log_dir = log.parent().unwrap();
    let mut cmd = Command::new(common::bin());
    cmd.arg("run");
    for e in scenario.extension_paths() {
        cmd.arg("-e").arg(e);
    }
    cmd.arg("--models")
        .arg(models)
        .args(["--provider", PROVIDER, "--model", MODEL])
        .args(["--system-prompt", SYSTEM_PROMPT]);
    if !scenario.builtin_tools {
        cmd.arg("--no-builtin-tools");
    }
    for prompt in scenario.prompts {
        cmd.args(["--prompt", prompt]);
    }
    cmd.args(["--json", "--allow-env", "EVENT_LOG", "--allow-write"])
        .arg(log_dir)
        .arg("--cwd")
        .arg(workspace);
    let mut child = cmd
        .env("EVENT_LOG", log)
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .env_remove("PICHAMBER_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pichamber");
    let stdout = collect_text(child.stdout.take().unwrap());
    let stderr = collect_text(child.stderr.take().unwrap());
    let status = wait_until(&mut child, Instant::now() + DEADLINE);
    let errors = stdout
        .join()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "extension_error")
        .collect();
    PichamberRun {
        success: status.is_some_and(|s| s.success()),
        errors,
        stderr: stderr.join().unwrap_or_default(),
    }
}

fn read_log(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line {l}: {e}")))
        .collect()
}

/// Events pi's AgentSession hands to extensions through its asynchronous event queue
/// (`_agentEventQueue`): the agent loop does not wait for them. Everything else (input,
/// before_agent_start, context, before_provider_request, after_provider_response, tool_call,
/// tool_result, session events) is awaited inline by the loop. How the two streams
/// interleave in pi depends on I/O timing (pi logs `context` before the user prompt's
/// message_start, and the next turn's `context` before the previous `turn_end`), so each
/// stream's order is compared on its own. An `input` event for a message an extension sent
/// belongs to the queued stream: pi runs it inside the queued handler that sent the message.
const QUEUED_EVENTS: &[&str] = &[
    "agent_start",
    "agent_end",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
];

/// Events of parallel tool calls whose order across calls is not defined (the calls run
/// concurrently); within one call their order is.
const CONCURRENT_EVENTS: &[&str] = &["tool_execution_update", "tool_execution_end", "tool_result"];

fn event_name(e: &Value) -> &str {
    e["event"].as_str().unwrap_or_default()
}

fn is_queued(e: &Value) -> bool {
    QUEUED_EVENTS.contains(&event_name(e))
        || (event_name(e) == "input" && e["source"] == "extension")
}

/// The two event streams of one log, normalised.
#[derive(Debug)]
struct Streams {
    queued: Vec<Value>,
    inline: Vec<Value>,
}

/// Removes what legitimately differs between two runs or two implementations:
///
/// - `timestamp` fields (wall clock), the `Current date: ...` line of system prompts, and the
///   workspace path (`<cwd>`);
/// - `input.source`: pi's RPC mode says "rpc", a `pichamber run --prompt` says "interactive";
///   both are the user's prompt (`<user>`); "extension" is kept;
/// - `message_update.message` and `assistantMessageEvent.partial`: pi shallow-copies the
///   partial message, whose content keeps being filled in while the event waits in the
///   queue, so what pi's extensions see there depends on timing. The delta, the content
///   index and the finished blocks (`content`, `toolCall`) are compared;
/// - ids (`id`, `toolCallId`, `responseId`) become `<id:N>` by first appearance;
/// - within a run of tool_execution_update / tool_execution_end / tool_result events, the
///   order across tool calls (concurrent in parallel mode) is made canonical by a stable sort
///   on the tool call id.
fn normalise(events: &[Value], cwd: &Path) -> Streams {
    let mut queued = Vec::new();
    let mut inline = Vec::new();
    for event in events {
        let mut e = scrub(event, cwd);
        match event_name(&e) {
            "message_update" => {
                let map = e.as_object_mut().unwrap();
                map.remove("message");
                if let Some(ame) = map
                    .get_mut("assistantMessageEvent")
                    .and_then(Value::as_object_mut)
                {
                    ame.remove("partial");
                }
            }
            "input" if e["source"] == "rpc" || e["source"] == "interactive" => {
                e["source"] = json!("<user>");
            }
            _ => {}
        }
        if is_queued(&e) {
            queued.push(e);
        } else {
            inline.push(e);
        }
    }
    order_concurrent(&mut queued);
    order_concurrent(&mut inline);
    let mut ids = HashMap::new();
    for e in queued.iter_mut().chain(inline.iter_mut()) {
        rename_ids(e, &mut ids);
    }
    Streams { queued, inline }
}

/// `value` without `timestamp` fields, with the workspace path and the system prompt's date
/// replaced by placeholders.
fn scrub(value: &Value, cwd: &Path) -> Value {
    static DATE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"Current date: \d{4}-\d{2}-\d{2}").unwrap());
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "timestamp")
                .map(|(k, v)| (k.clone(), scrub(v, cwd)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| scrub(v, cwd)).collect()),
        Value::String(s) => {
            let s = s.replace(cwd.to_string_lossy().as_ref(), "<cwd>");
            Value::String(DATE.replace_all(&s, "Current date: <date>").into_owned())
        }
        other => other.clone(),
    }
}

fn rename_ids(value: &mut Value, ids: &mut HashMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if matches!(key.as_str(), "id" | "toolCallId" | "responseId")
                    && let Value::String(s) = v
                {
                    let next = format!("<id:{}>", ids.len() + 1);
                    *s = ids.entry(s.clone()).or_insert(next).clone();
                } else {
                    rename_ids(v, ids);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_ids(v, ids)),
        _ => {}
    }
}

fn order_concurrent(events: &mut [Value]) {
    let mut start = 0;
    while start < events.len() {
        let mut end = start;
        while end < events.len() && CONCURRENT_EVENTS.contains(&event_name(&events[end])) {
            end += 1;
        }
        if end > start {
            events[start..end].sort_by(|a, b| {
                a["toolCallId"]
                    .as_str()
                    .unwrap_or_default()
                    .cmp(b["toolCallId"].as_str().unwrap_or_default())
            });
            start = end;
        } else {
            start += 1;
        }
    }
}

/// The first JSON path where `a` and `b` differ, with both values there.
fn first_difference(a: &Value, b: &Value, path: &str) -> Option<(String, Value, Value)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let here = format!("{path}.{k}");
                match y.get(k) {
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, &here) {
                            return Some(d);
                        }
                    }
                    None => return Some((here, v.clone(), json!("<absent>"))),
                }
            }
            y.iter()
                .find(|(k, _)| !x.contains_key(*k))
                .map(|(k, w)| (format!("{path}.{k}"), json!("<absent>"), w.clone()))
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(v, w, &format!("{path}[{i}]")) {
                    return Some(d);
                }
            }
            (x.len() != y.len()).then(|| (format!("{path}.length"), json!(x.len()), json!(y.len())))
        }
        _ => (a != b).then(|| (path.to_owned(), a.clone(), b.clone())),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 300 {
        format!("{}…", text.chars().take(300).collect::<String>())
    } else {
        text
    }
}

fn names(events: &[Value]) -> String {
    events.iter().map(event_name).collect::<Vec<_>>().join(" ")
}

/// A readable account of the first divergence between pi's and pichamber's stream, if any.
fn diverge(stream: &str, pi: &[Value], ours: &[Value]) -> Option<String> {
    let at = (0..pi.len().max(ours.len())).find(|&i| pi.get(i) != ours.get(i))?;
    let none = json!(null);
    let (p, o) = (pi.get(at).unwrap_or(&none), ours.get(at).unwrap_or(&none));
    let mut text = format!(
        "first divergence in the {stream} events, at #{at}:\n  pi:        {}\n  pichamber: {}\n",
        short(p),
        short(o)
    );
    if event_name(p) == event_name(o)
        && let Some((path, a, b)) = first_difference(p, o, "")
    {
        text += &format!(
            "  at {}: pi = {}, pichamber = {}\n",
            &path,
            short(&a),
            short(&b)
        );
    }
    let from = at.saturating_sub(3);
    text += &format!(
        "  pi sequence from #{from}:        {}\n  pichamber sequence from #{from}: {}\n",
        names(&pi[from.min(pi.len())..]),
        names(&ours[from.min(ours.len())..])
    );
    Some(text)
}

/// Per event name: are pichamber's events of that name, in order, equal to pi's? (Where they
/// sit among other events is what [`diverge`] checks.)
fn summary(pi: &Streams, ours: &Streams) -> String {
    let all: Vec<&Value> = pi.queued.iter().chain(&pi.inline).collect();
    let all_ours: Vec<&Value> = ours.queued.iter().chain(&ours.inline).collect();
    let mut seen: Vec<&str> = Vec::new();
    for e in all.iter().chain(&all_ours) {
        if !seen.contains(&event_name(e)) {
            seen.push(event_name(e));
        }
    }
    let mut lines = Vec::new();
    for name in seen {
        let of = |events: &[&Value]| -> Vec<Value> {
            events
                .iter()
                .filter(|e| event_name(e) == name)
                .map(|e| (*e).clone())
                .collect()
        };
        let (p, o) = (of(&all), of(&all_ours));
        let status = if p == o {
            format!("matched ({}x)", p.len())
        } else if o.is_empty() {
            format!("differs: pi {}x, pichamber never", p.len())
        } else if p.is_empty() {
            format!("differs: pichamber {}x, pi never", o.len())
        } else {
            let at = (0..p.len().max(o.len()))
                .find(|&i| p.get(i) != o.get(i))
                .unwrap_or(0);
            match (p.get(at), o.get(at)) {
                (Some(a), Some(b)) => match first_difference(a, b, "") {
                    Some((path, x, y)) => format!(
                        "differs at #{at} {path}: pi {} / pichamber {}",
                        short(&x),
                        short(&y)
                    ),
                    None => format!("differs at #{at}"),
                },
                _ => format!("differs: pi {}x, pichamber {}x", p.len(), o.len()),
            }
        };
        lines.push(format!("  {name:<24} {status}"));
    }
    lines.join("\n")
}

fn differential(scenario: Scenario) {
    let pi_bin = pi_bin();
    assert!(pi_bin.exists());
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let workspace = root.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "first line\nsecond line\n").unwrap();
    let logs = root.join("logs");
    std::fs::create_dir_all(&logs).unwrap();

    let pi_mock = serve(&scenario.script);
    let agent_dir = root.join("pi-agent");
    write_models_json(&agent_dir, &pi_mock.server.base_url());
    let pi_log = logs.join("pi.jsonl");
    run_pi(&scenario, &workspace, &agent_dir, &pi_log);

    let our_mock = serve(&scenario.script);
    let our_log = logs.join("pichamber.jsonl");
    let run = if std::env::var_os("AGENT_DIFF_PI_VS_PI").is_some() {
        // Checks the harness: two runs of pi must compare equal.
        let agent_dir = root.join("pi-agent-2");
        write_models_json(&agent_dir, &our_mock.server.base_url());
        run_pi(&scenario, &workspace, &agent_dir, &our_log);
        PichamberRun {
            success: true,
            errors: vec![],
            stderr: String::new(),
        }
    } else {
        let models = write_models_json(&root.join("pichamber-models"), &our_mock.server.base_url());
        run_pichamber(&scenario, &workspace, &models, &our_log)
    };

    if let Some(keep) = std::env::var_os("AGENT_DIFF_LOGS") {
        let keep = PathBuf::from(keep);
        std::fs::create_dir_all(&keep).unwrap();
        for (log, side) in [(&pi_log, "pi"), (&our_log, "pichamber")] {
            let _ = std::fs::copy(log, keep.join(format!("{}.{side}.jsonl", scenario.name)));
        }
    }
    let pi_events = read_log(&pi_log);
    assert!(
        pi_events.iter().any(|e| event_name(e) == "agent_end"),
        "{}: pi ran no agent loop, so the scenario tests nothing:\n{}",
        scenario.name,
        names(&pi_events)
    );
    let pi = normalise(&pi_events, &workspace);
    let ours = normalise(&read_log(&our_log), &workspace);
    let table = summary(&pi, &ours);
    let mut problems: Vec<String> = [
        diverge("queued (agent loop)", &pi.queued, &ours.queued),
        diverge("inline (hook)", &pi.inline, &ours.inline),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !run.success || !run.errors.is_empty() {
        problems.push(format!(
            "pichamber run failed (success: {}); errors: {:#?}\nstderr:\n{}",
            run.success, run.errors, run.stderr
        ));
    }
    // What reached the model, as JSON bodies: pi's and pichamber's requests must be equal.
    let requests = |mock: &Mock| -> Vec<Value> {
        mock.server
            .requests()
            .iter()
            .map(|r| scrub(r, &workspace))
            .collect()
    };
    let (pi_requests, our_requests) = (requests(&pi_mock), requests(&our_mock));
    if let Some((path, a, b)) = first_difference(&json!(pi_requests), &json!(our_requests), "") {
        problems.push(format!(
            "model requests differ at {path}: pi {}, pichamber {}",
            short(&a),
            short(&b)
        ));
    }
    if problems.is_empty() {
        eprintln!(
            "{}: pichamber's extensions saw the events pi's saw:\n{table}",
            scenario.name
        );
    }
    assert!(
        problems.is_empty(),
        "{}: pichamber's extensions saw different events than pi's\n{}\nper event:\n{table}",
        scenario.name,
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Scenarios

/// Two tool calls in one assistant turn, run in pi's default parallel mode: a built-in
/// (`read`) and an extension tool that streams an update. The turn also streams thinking and
/// text in two chunks each.
#[test]
fn parallel_tool_calls() {
    differential(Scenario {
        name: "parallel_tool_calls",
        extensions: &["echo.ts"],
        prompts: &["Read the notes and echo something."],
        script: json!({ "turns": [
            { "thinking": "Two independent calls.", "text": "Doing both.", "toolCalls": [
                { "id": "call_1", "name": "read", "arguments": { "path": "notes.txt" } },
                { "id": "call_2", "name": "echo", "arguments": { "text": "two" } },
            ], "usage": { "input": 20, "output": 8 }, "chunks": 2 },
            { "text": "Both done.", "usage": { "input": 40, "output": 3 } },
        ]}),
        builtin_tools: true,
    });
}

/// A `tool_call` handler blocks the first of two calls; the second runs.
#[test]
fn blocked_tool_call() {
    differential(Scenario {
        name: "blocked_tool_call",
        extensions: &["echo.ts", "gate.ts"],
        prompts: &["Echo two things."],
        script: json!({ "turns": [
            { "toolCalls": [
                { "id": "call_1", "name": "echo", "arguments": { "text": "forbidden" } },
                { "id": "call_2", "name": "echo", "arguments": { "text": "fine" } },
            ]},
            { "text": "One was blocked." },
        ]}),
        builtin_tools: false,
    });
}

/// Two extensions patch the same tool result; the second sees the first's patch.
#[test]
fn tool_result_patch_chain() {
    differential(Scenario {
        name: "tool_result_patch_chain",
        extensions: &["echo.ts", "patch-a.ts", "patch-b.ts"],
        prompts: &["Echo x."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "x" } }] },
            { "text": "Patched." },
        ]}),
        builtin_tools: false,
    });
}

/// `input` transforms one prompt and handles (swallows) the next.
#[test]
fn input_transform() {
    differential(Scenario {
        name: "input_transform",
        extensions: &["transform.ts"],
        prompts: &["?quick what is 2+2", "!noop"],
        script: json!({ "turns": [{ "text": "4." }] }),
        builtin_tools: false,
    });
}

/// Two `before_agent_start` handlers chain the system prompt and each inject a message.
#[test]
fn before_agent_start_chain() {
    differential(Scenario {
        name: "before_agent_start_chain",
        extensions: &["prompt-a.ts", "prompt-b.ts"],
        prompts: &["hello"],
        script: json!({ "turns": [{ "text": "Hi." }] }),
        builtin_tools: false,
    });
}

/// A `context` handler drops older messages before the third model call.
#[test]
fn context_pruning() {
    differential(Scenario {
        name: "context_pruning",
        extensions: &["echo.ts", "prune.ts"],
        prompts: &["Echo twice."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "one" } }] },
            { "toolCalls": [{ "id": "call_2", "name": "echo", "arguments": { "text": "two" } }] },
            { "text": "Done." },
        ]}),
        builtin_tools: false,
    });
}

/// An extension steers the run from a tool_execution_start handler (sendUserMessage with
/// deliverAs "steer"): the message is delivered before the next model call.
#[test]
fn steer_during_streaming() {
    differential(Scenario {
        name: "steer_during_streaming",
        extensions: &["echo.ts", "steer.ts"],
        prompts: &["Echo x."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "x" } }] },
            { "text": "Echoed; the weather is fine." },
        ]}),
        builtin_tools: false,
    });
}

/// An extension queues a follow-up (deliverAs "followUp"): delivered when the agent would
/// stop, as one more turn of the same run.
#[test]
fn follow_up() {
    differential(Scenario {
        name: "follow_up",
        extensions: &["echo.ts", "followup.ts"],
        prompts: &["Echo x."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "x" } }] },
            { "text": "Echoed." },
            { "text": "One more thing, done." },
        ]}),
        builtin_tools: false,
    });
}

/// An extension tool whose execute throws: the error message becomes an error tool result.
#[test]
fn extension_tool_throws() {
    differential(Scenario {
        name: "extension_tool_throws",
        extensions: &["throws.ts"],
        prompts: &["Explode."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "explode", "arguments": {} }] },
            { "text": "It failed." },
        ]}),
        builtin_tools: false,
    });
}

/// Handlers resume from their awaits in pi's order: a microtask one queued runs before the
/// next handler, a timer one waits on holds the chain (a dispatch whose handlers returned at
/// once runs without awaiting them; these must not).
#[test]
fn handler_awaits_in_order() {
    differential(Scenario {
        name: "handler_awaits_in_order",
        extensions: &["echo.ts", "awaits.ts"],
        prompts: &["Echo x."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "x" } }] },
            { "text": "Echoed." },
        ]}),
        builtin_tools: false,
    });
}

/// A notification's handlers (run without a generator while each answers at once) resume
/// from their awaits in pi's order, and are called bare.
#[test]
fn notification_handlers_await_in_order() {
    differential(Scenario {
        name: "notification_handlers_await_in_order",
        extensions: &["echo.ts", "notify-awaits.ts"],
        prompts: &["Echo x."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "x" } }] },
            { "text": "Echoed." },
        ]}),
        builtin_tools: false,
    });
}

/// Each event's handlers get a context of their own: what one left in it (kept, changed,
/// sealed, weakly held) is not seen by the next, as in pi, though pichamber may hand a context
/// no one could tell from a new one to the next dispatch.
#[test]
fn each_event_gets_a_context_of_its_own() {
    differential(Scenario {
        name: "each_event_gets_a_context_of_its_own",
        extensions: &["echo.ts", "fresh-ctx.ts"],
        prompts: &["Echo x."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "x" } }] },
            { "toolCalls": [{ "id": "call_2", "name": "echo", "arguments": { "text": "y" } }] },
            { "text": "Echoed." },
        ]}),
        builtin_tools: false,
    });
}

/// A notification's event changed in place by one extension reaches the next one's handlers
/// (the host asks for it back only when a later extension is subscribed).
#[test]
fn notification_changed_in_place_reaches_the_next_extension() {
    differential(Scenario {
        name: "notification_changed_in_place",
        extensions: &["echo.ts", "mark-turn.ts", "read-mark.ts"],
        prompts: &["Echo x."],
        script: json!({ "turns": [
            { "toolCalls": [{ "id": "call_1", "name": "echo", "arguments": { "text": "x" } }] },
            { "text": "Echoed." },
        ]}),
        builtin_tools: false,
    });
}

// ---------------------------------------------------------------------------------------------
// The comparison itself

/// Runs that differ only in what normalise removes compare equal; a real difference is found
/// and located.
#[test]
fn normaliser_removes_noise_and_keeps_differences() {
    let cwd = Path::new("/tmp/ws");
    let log = |source: &str, ts: u64, response: &str, text: &str| {
        vec![
            json!({ "event": "input", "text": "hi", "source": source }),
            json!({ "event": "turn_start", "turnIndex": 0, "timestamp": ts }),
            json!({ "event": "before_agent_start", "systemPrompt": format!("X\nCurrent date: 2025-0{}-01\nCurrent working directory: /tmp/ws", ts % 9 + 1) }),
            json!({ "event": "message_update", "assistantMessageEvent": { "type": "text_delta", "delta": text, "partial": { "n": ts } }, "message": { "n": ts } }),
            json!({ "event": "message_end", "message": { "role": "assistant", "responseId": response, "timestamp": ts } }),
            json!({ "event": "tool_execution_end", "toolCallId": "b", "isError": false }),
            json!({ "event": "tool_execution_update", "toolCallId": "a" }),
            json!({ "event": "tool_execution_end", "toolCallId": "a", "isError": false }),
        ]
    };
    let pi = normalise(&log("rpc", 1, "r-1", "hi"), cwd);
    let same = normalise(&log("interactive", 2, "r-2", "hi"), cwd);
    assert_eq!(pi.queued, same.queued);
    assert_eq!(pi.inline, same.inline);
    assert_eq!(
        pi.inline[1]["systemPrompt"],
        "X\nCurrent date: <date>\nCurrent working directory: <cwd>"
    );
    // Concurrent tool events are ordered per call, each call's own order kept.
    let order: Vec<(&str, &str)> = pi.queued[3..]
        .iter()
        .map(|e| (event_name(e), e["toolCallId"].as_str().unwrap()))
        .collect();
    assert_eq!(order[0].0, "tool_execution_update");
    assert_eq!(order[1].0, "tool_execution_end");
    assert_eq!(order[0].1, order[1].1);

    let other = normalise(&log("rpc", 1, "r-1", "ho"), cwd);
    let report = diverge("queued", &pi.queued, &other.queued).expect("a difference");
    assert!(report.contains("at #1"), "{report}");
    assert!(report.contains(".assistantMessageEvent.delta"), "{report}");
    assert!(diverge("queued", &pi.queued, &pi.queued[..2]).is_some());
}
