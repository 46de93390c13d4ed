//! One side of a corpus run: a process speaking pi's RPC protocol (real `pi --mode rpc` or
//! `pichamber rpc`), driven step by step. A reader thread records every line it prints and
//! answers its dialogs at once, the same way on both sides (see [`dialog_answer`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long one step may take before the side is declared stuck.
const STEP_DEADLINE: Duration = Duration::from_secs(30);
/// A step is over when the side is idle and has printed nothing for this long (extensions'
/// handlers of queued agent events and their timers run after the agent reports idle).
const QUIET: Duration = Duration::from_millis(250);
/// How long to wait for an `agent_end` still owed after the side reports it is idle.
const AGENT_END_GRACE: Duration = Duration::from_secs(3);
/// Dialogs answered within one step; later ones are cancelled, so an extension that keeps
/// asking (a menu loop) ends the same way on both sides.
const MAX_DIALOGS_PER_STEP: usize = 12;
/// Prefix of the ids of the harness's own `get_state` polls, whose responses are not part of
/// what is compared.
const POLL: &str = "poll-";

#[derive(Default)]
struct Inner {
    lines: Vec<Value>,
    closed: bool,
    /// When the last line that is not a poll answer arrived.
    last_event: Option<Instant>,
    dialogs_this_step: usize,
}

struct Shared {
    inner: Mutex<Inner>,
    changed: Condvar,
}

/// A running side.
pub struct Side {
    child: Child,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    shared: Arc<Shared>,
    reader: Option<JoinHandle<()>>,
    stderr: Option<JoinHandle<String>>,
    /// Lines already handed out by [`Side::take`].
    taken: usize,
    next_id: usize,
    /// The side missed a deadline: it is not waited for again (a hung side would otherwise
    /// cost a deadline per remaining step).
    stuck: bool,
}

/// The answer both sides give to a dialog: the first option of a `select`, `true` for a
/// `confirm`, the fixed text "test" for an `input` or `editor`; `None` for fire-and-forget
/// requests (notify, setStatus, ...).
pub fn dialog_answer(request: &Value, asked_before: usize) -> Option<Value> {
    let id = request["id"].clone();
    let method = request["method"].as_str()?;
    if !matches!(method, "select" | "confirm" | "input" | "editor") {
        return None;
    }
    if asked_before >= MAX_DIALOGS_PER_STEP {
        return Some(json!({ "type": "extension_ui_response", "id": id, "cancelled": true }));
    }
    Some(match method {
        "select" => match request["options"].as_array().and_then(|o| o.first()) {
            Some(first) => json!({ "type": "extension_ui_response", "id": id, "value": first }),
            None => json!({ "type": "extension_ui_response", "id": id, "cancelled": true }),
        },
        "confirm" => json!({ "type": "extension_ui_response", "id": id, "confirmed": true }),
        _ => json!({ "type": "extension_ui_response", "id": id, "value": "test" }),
    })
}

fn write_line(stdin: &Mutex<Option<ChildStdin>>, value: &Value) -> bool {
    let mut guard = stdin.lock().unwrap();
    let Some(stdin) = guard.as_mut() else {
        return false;
    };
    writeln!(stdin, "{value}")
        .and_then(|()| stdin.flush())
        .is_ok()
}

impl Side {
    /// Starts `command` (stdio piped) and its reader threads.
    pub fn spawn(mut command: Command) -> std::io::Result<Side> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = Arc::new(Mutex::new(child.stdin.take()));
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            changed: Condvar::new(),
        });
        let stdout = child.stdout.take().unwrap();
        let reader = {
            let shared = shared.clone();
            let stdin = stdin.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let value = serde_json::from_str::<Value>(&line)
                        .unwrap_or_else(|_| json!({ "type": "<not json>", "line": line }));
                    let answer = if value["type"] == "extension_ui_request" {
                        let mut inner = shared.inner.lock().unwrap();
                        let answer = dialog_answer(&value, inner.dialogs_this_step);
                        if answer.is_some() {
                            inner.dialogs_this_step += 1;
                        }
                        answer
                    } else {
                        None
                    };
                    {
                        let mut inner = shared.inner.lock().unwrap();
                        if !is_poll(&value) {
                            inner.last_event = Some(Instant::now());
                        }
                        inner.lines.push(value);
                    }
                    shared.changed.notify_all();
                    if let Some(answer) = answer {
                        write_line(&stdin, &answer);
                    }
                }
                shared.inner.lock().unwrap().closed = true;
                shared.changed.notify_all();
            })
        };
        let mut err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Ok(Side {
            child,
            stdin,
            shared,
            reader: Some(reader),
            stderr: Some(stderr),
            taken: 0,
            next_id: 0,
            stuck: false,
        })
    }

    fn send(&mut self, mut command: Value, prefix: &str) -> String {
        self.next_id += 1;
        let id = format!("{prefix}{}", self.next_id);
        command["id"] = json!(id);
        write_line(&self.stdin, &command);
        id
    }

    /// Waits until a line satisfies `done` (searching from line `from`), the output ends or
    /// `deadline` passes. Returns the line's index.
    fn wait_for(
        &self,
        from: usize,
        deadline: Instant,
        done: impl Fn(&Value) -> bool,
    ) -> Result<usize, &'static str> {
        let mut inner = self.shared.inner.lock().unwrap();
        let mut seen = from;
        loop {
            if let Some(at) = inner.lines[seen..].iter().position(&done) {
                return Ok(seen + at);
            }
            seen = inner.lines.len();
            if inner.closed {
                return Err("exited");
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("timeout");
            }
            inner = self.shared.changed.wait_timeout(inner, left).unwrap().0;
        }
    }

    fn note(&self, value: Value) {
        self.shared.inner.lock().unwrap().lines.push(value);
    }

    /// Sends a command and waits for its response (recorded with everything else). A side
    /// that exits or hangs instead gets a `<exited>` / `<timeout>` marker in its record.
    pub fn request(&mut self, command: Value) -> Option<Value> {
        self.request_with(command, "c", STEP_DEADLINE)
    }

    fn request_with(&mut self, command: Value, prefix: &str, limit: Duration) -> Option<Value> {
        if self.stuck {
            return None;
        }
        let from = self.shared.inner.lock().unwrap().lines.len();
        let what = command["type"].as_str().unwrap_or_default().to_owned();
        let id = self.send(command, prefix);
        let wanted = json!(id);
        match self.wait_for(from, Instant::now() + limit, |l| {
            l["type"] == "response" && l["id"] == wanted
        }) {
            Ok(at) => Some(self.shared.inner.lock().unwrap().lines[at].clone()),
            Err(why) => {
                self.stuck |= why == "timeout";
                self.note(json!({ "type": format!("<{why}>"), "waitingFor": what }));
                None
            }
        }
    }

    /// Waits until the side is idle: not streaming, nothing queued, every `agent_start`
    /// matched by an `agent_end` (or a grace period over), and nothing but poll answers
    /// printed for [`QUIET`].
    pub fn settle(&mut self) {
        let deadline = Instant::now() + STEP_DEADLINE;
        let mut idle_since: Option<Instant> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.stuck {
                return;
            }
            if left.is_zero() {
                self.stuck = true;
                self.note(json!({ "type": "<timeout>", "waitingFor": "idle" }));
                return;
            }
            let Some(state) = self.request_with(json!({ "type": "get_state" }), POLL, left) else {
                return;
            };
            let idle = state["data"]["isStreaming"] == json!(false)
                && state["data"]["pendingMessageCount"].as_u64().unwrap_or(0) == 0;
            if !idle {
                idle_since = None;
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let since = *idle_since.get_or_insert_with(Instant::now);
            let (balanced, quiet_for) = {
                let inner = self.shared.inner.lock().unwrap();
                let count = |t: &str| {
                    inner.lines[self.taken..]
                        .iter()
                        .filter(|l| l["type"] == t)
                        .count()
                };
                let balanced = count("agent_start") <= count("agent_end");
                (balanced, inner.last_event.map_or(QUIET, |t| t.elapsed()))
            };
            if (balanced || since.elapsed() >= AGENT_END_GRACE) && quiet_for >= QUIET {
                return;
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// [`Side::settle`], again until a line `seen` accepts has arrived in this step (work a
    /// side starts on its own, such as an extension connecting at start-up, ends when it
    /// ends, not after a fixed quiet time).
    pub fn settle_until(&mut self, seen: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + STEP_DEADLINE;
        loop {
            self.settle();
            let found = {
                let inner = self.shared.inner.lock().unwrap();
                inner.lines[self.taken..].iter().any(&seen)
            };
            if found || self.stuck {
                return;
            }
            if Instant::now() >= deadline {
                self.stuck = true;
                self.note(json!({ "type": "<timeout>", "waitingFor": "a line" }));
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything recorded since the previous call, the harness's polls left out; a new
    /// step's dialog count starts at zero.
    pub fn take(&mut self) -> Vec<Value> {
        let mut inner = self.shared.inner.lock().unwrap();
        let lines: Vec<Value> = inner.lines[self.taken..]
            .iter()
            .filter(|l| !is_poll(l))
            .cloned()
            .collect();
        self.taken = inner.lines.len();
        inner.dialogs_this_step = 0;
        lines
    }

    /// Closes stdin (how an RPC client quits), waits for the exit, and returns what was
    /// printed meanwhile, whether it exited successfully, and its stderr.
    pub fn close(mut self) -> (Vec<Value>, Option<bool>, String) {
        drop(self.stdin.lock().unwrap().take());
        let deadline = Instant::now()
            + if self.stuck {
                Duration::ZERO
            } else {
                STEP_DEADLINE
            };
        let status = loop {
            if let Some(status) = self.child.try_wait().ok().flatten() {
                break Some(status.success());
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let stderr = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        (self.take(), status, stderr)
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn is_poll(line: &Value) -> bool {
    line["type"] == "response" && line["id"].as_str().is_some_and(|id| id.starts_with(POLL))
}
