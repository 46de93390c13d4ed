//! The session hub: users, their sessions and their event streams. Each session is owned by
//! one task (like `rpc::serve`'s worker): work reaches it through a channel, its events
//! leave through the sink, which folds them into the session's GUI state and appends them to
//! the owner's event log.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};

use super::approval::{AccessRecord, ApprovalError, Decision, PendingApproval};
use super::cluster::{Cluster, Outlet, outlet::LogJournal};
use pichamber_access::Grants;
use pichamber_access::{Access, ApprovalStore, Ceiling, Requests};
use pichamber_artifact::Artifact;
use pichamber_gui::{self as gui, UiState};
use pichamber_model::ModelClient;
use pichamber_runtime::{InstanceOptions, Runtime};
use pichamber_session::events::{DialogAnswer, RUNTIME, UiRequest};
use pichamber_session::state::AgentRequest;
use pichamber_session::store::{SessionStore, SyncPolicy};
use pichamber_session::{
    AgentSettings, DialogResponder, EventSink, Idle, PiVersion, Session, SessionConfig,
    SessionEvent, SessionShared,
};

/// `extension.*` events a user's log keeps for clients that reconnect.
pub const RETAINED_EVENTS: usize = 1000;
/// Sessions one user may have open at once.
pub const MAX_SESSIONS_PER_USER: usize = 64;
/// Events a slow event-stream client may fall behind before it gets fresh snapshots.
const STREAM_BUFFER: usize = 4096;

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// An extension the server offers: an opaque id, never its path.
pub struct CatalogEntry {
    pub id: String,
    pub artifact: Artifact,
    /// What it asks for (its manifest's record; a malformed one counts as nothing).
    pub requests: Requests,
    /// `{id, name, version?, tools, commands}` as `GET /api/pi/extensions` lists it.
    pub info: Value,
}

impl CatalogEntry {
    /// Loads what an extension registers to describe it.
    pub async fn new(path: &std::path::Path, artifact: Artifact) -> anyhow::Result<Self> {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(
            format!("{}\0{}", artifact.manifest.source_hash, path.display()).as_bytes(),
        );
        let id: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let (_, report) = pichamber_session::launch::inspect_extension(&artifact).await?;
        let pick = |list: &Value| -> Vec<Value> {
            list.as_array()
                .into_iter()
                .flatten()
                .map(|t| json!({ "name": t["name"], "description": t["description"] }))
                .collect()
        };
        let mut info = json!({
            "id": id,
            "name": artifact.manifest.name,
            "tools": pick(&report["tools"]),
            "commands": pick(&report["commands"]),
        });
        if let Some(v) = &artifact.manifest.version {
            info["version"] = json!(v);
        }
        let requests =
            Requests::from_manifest(&artifact.manifest.capabilities).unwrap_or_else(|e| {
                tracing::warn!(
                    "{}: its capability requests are malformed and ignored: {e}",
                    artifact.manifest.name
                );
                Requests::default()
            });
        Ok(Self {
            id,
            artifact,
            requests,
            info,
        })
    }
}

/// How sessions are opened (the same for every user).
pub struct Launcher {
    pub cwd: PathBuf,
    pub catalog: Vec<CatalogEntry>,
    pub instance: InstanceOptions,
    pub model: Option<Arc<ModelClient>>,
    pub agent: AgentSettings,
    pub thinking: String,
    /// Session files go to `data_dir/<user>/`; `None`: in memory.
    pub data_dir: Option<PathBuf>,
    pub prompts: Vec<pichamber_session::resources::ResourcePath>,
    pub skills: Vec<pichamber_session::resources::ResourcePath>,
    /// Extension flag values (`--flag`).
    pub flags: Vec<(String, Value)>,
    /// The models `ctx.modelRegistry` lists besides the session's own (pi's models.json).
    pub models: pichamber_model::catalog::Catalog,
    /// pi's effective settings, for `pi.getSettings()`.
    pub settings: Value,
    /// How long a session waits idle before its extensions hibernate (`None`: never).
    pub hibernate_after: Option<std::time::Duration>,
}

pub struct Hub {
    pub launcher: Launcher,
    users: HashMap<String, Arc<User>>,
    /// Set in cluster mode: sessions live on NATS JetStream, not in `data_dir`.
    pub cluster: Option<Arc<Cluster>>,
}

/// Where a request for a session is answered (cluster mode).
pub enum Placement {
    /// It runs here (now).
    Here,
    /// It runs on that node.
    At(String),
    /// The user has no such session.
    Unknown,
    /// It cannot be placed now: why, for a 503.
    Unavailable(String),
}

/// A session that keeps its entries and events on the cluster's store.
struct Placed {
    outlet: Outlet,
    lease: u64,
    resumed: bool,
}

/// One event on a user's stream.
#[derive(Debug)]
pub struct StreamEvent {
    pub id: u64,
    pub session: String,
    pub name: &'static str,
    /// The event as a server-sent-events frame (`id`, `event`, the JSON data with its
    /// `sessionId`): rendered once and shared, however many streams send it.
    pub frame: axum::body::Bytes,
}

/// A server-sent-events frame. `data` is one line: JSON text has no raw line break.
pub fn sse_frame(id: u64, name: &str, data: &str) -> axum::body::Bytes {
    format!("id: {id}\nevent: {name}\ndata: {data}\n\n").into()
}

struct Log {
    next_id: u64,
    retained: VecDeque<Arc<StreamEvent>>,
    /// The id of the newest `extension.*` event that fell out of the window (0: none).
    evicted_through: u64,
}

pub struct User {
    pub name: String,
    /// The extensions (catalog ids) this user may use, in catalog order.
    pub allowed: Vec<String>,
    /// What each allowed extension may reach for this user (by catalog id); one without an
    /// entry gets the launcher's default grants and no prompt.
    access: HashMap<String, Access>,
    /// The approvals this user gave "always".
    pub approvals: ApprovalStore,
    sessions: Mutex<Vec<Arc<SessionHandle>>>,
    log: Mutex<Log>,
    stream: broadcast::Sender<Arc<StreamEvent>>,
    settings: Mutex<Value>,
    settings_file: Option<PathBuf>,
}

/// What a client reconnecting gets first.
pub enum Resume {
    /// Everything missed, in order (it was all in the window).
    Replay(Vec<Arc<StreamEvent>>),
    /// A fresh snapshot for every session: too much was missed (or nothing given).
    Snapshots,
}

impl User {
    fn new(
        name: &str,
        allowed: Vec<String>,
        settings_file: Option<PathBuf>,
        access: HashMap<String, Access>,
        approvals: ApprovalStore,
    ) -> Self {
        let settings = settings_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_else(|| json!({ "triggers": [] }));
        Self {
            name: name.to_owned(),
            allowed,
            access,
            approvals,
            sessions: Mutex::new(Vec::new()),
            log: Mutex::new(Log {
                next_id: 1,
                retained: VecDeque::new(),
                evicted_through: 0,
            }),
            stream: broadcast::channel(STREAM_BUFFER).0,
            settings: Mutex::new(settings),
            settings_file,
        }
    }

    /// The extensions a session's record (`{extensions: [id]}`) names that this user may
    /// still use: what a session reopened or resumed loads.
    fn still_allowed(&self, meta: &Value) -> Vec<String> {
        meta["extensions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str())
            .filter(|e| self.allowed.iter().any(|a| a == e))
            .map(str::to_owned)
            .collect()
    }

    pub fn sessions(&self) -> Vec<Arc<SessionHandle>> {
        self.sessions.lock().unwrap().clone()
    }

    pub fn session(&self, id: &str) -> Option<Arc<SessionHandle>> {
        self.sessions
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.id == id)
            .cloned()
    }

    /// Appends an event to the log (kept when it is an `extension.*` one) and sends it to
    /// the connected streams.
    pub fn publish(&self, session: &str, name: &'static str, mut data: Value) {
        data["sessionId"] = json!(session);
        let data = data.to_string();
        let mut log = self.log.lock().unwrap();
        let event = Arc::new(StreamEvent {
            id: log.next_id,
            session: session.to_owned(),
            name,
            frame: sse_frame(log.next_id, name, &data),
        });
        log.next_id += 1;
        if name.starts_with("extension.") {
            log.retained.push_back(event.clone());
            while log.retained.len() > RETAINED_EVENTS {
                if let Some(old) = log.retained.pop_front() {
                    log.evicted_through = old.id;
                }
            }
        }
        let _ = self.stream.send(event);
    }

    /// The id of the newest event so far (0: none).
    pub fn head(&self) -> u64 {
        self.log.lock().unwrap().next_id - 1
    }

    /// Subscribes to the stream and says what a client that last saw `last` gets first.
    /// Returns the receiver, the head at the time of subscribing, and the resume plan.
    pub fn connect(
        &self,
        last: Option<u64>,
    ) -> (broadcast::Receiver<Arc<StreamEvent>>, u64, Resume) {
        let log = self.log.lock().unwrap();
        let receiver = self.stream.subscribe();
        let head = log.next_id - 1;
        let resume = match last {
            Some(last) if last <= head && last >= log.evicted_through => Resume::Replay(
                log.retained
                    .iter()
                    .filter(|e| e.id > last)
                    .cloned()
                    .collect(),
            ),
            _ => Resume::Snapshots,
        };
        (receiver, head, resume)
    }

    pub fn settings(&self) -> Value {
        self.settings.lock().unwrap().clone()
    }

    /// Checks and stores the user's ui-settings (command triggers).
    pub fn set_settings(&self, body: &Value) -> Result<Value, String> {
        let triggers = body["triggers"]
            .as_array()
            .ok_or("ui-settings need \"triggers\": an array")?;
        if triggers.len() > 64 {
            return Err("at most 64 triggers".into());
        }
        let mut clean = Vec::new();
        for (i, t) in triggers.iter().enumerate() {
            let command = t["command"].as_str().unwrap_or_default();
            let command = command.strip_prefix('/').unwrap_or(command);
            if !gui::is_command_name(command) {
                return Err(format!(
                    "triggers[{i}].command {command:?} is not a command name"
                ));
            }
            let mut out = json!({ "command": command });
            for field in ["args", "label", "key"] {
                match t.get(field) {
                    None => {}
                    Some(Value::String(s)) => {
                        out[field] = json!(gui::truncate(s, gui::limits::TITLE));
                    }
                    Some(_) => return Err(format!("triggers[{i}].{field} must be a string")),
                }
            }
            clean.push(out);
        }
        let settings = json!({ "triggers": clean });
        if let Some(file) = &self.settings_file {
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            std::fs::write(
                file,
                serde_json::to_vec_pretty(&settings).unwrap_or_default(),
            )
            .map_err(|e| format!("cannot store the settings: {e}"))?;
        }
        *self.settings.lock().unwrap() = settings.clone();
        Ok(settings)
    }
}

/// Work for the task that owns a session.
enum Work {
    Wake,
    Complete {
        command: String,
        prefix: String,
        respond: oneshot::Sender<Result<Option<Value>, String>>,
    },
    /// Restart the extension built from `source_hash` with these grants.
    Regrant {
        source_hash: String,
        grants: Arc<Grants>,
        respond: oneshot::Sender<Result<(), String>>,
    },
    Close,
}

pub struct SessionHandle {
    pub id: String,
    pub created_at: String,
    pub extensions: Vec<String>,
    /// The extensions it was opened with (some may have failed to load).
    pub requested: Vec<String>,
    pub shared: Arc<SessionShared>,
    /// The session file, when there is one.
    pub file: Option<PathBuf>,
    pub ui: Arc<Mutex<UiState>>,
    pub dialogs: Arc<HubDialogs>,
    /// Approval questions not answered yet, one per extension.
    approvals: Mutex<Vec<PendingApproval>>,
    /// What each loaded extension asked for and may do (in catalog order).
    access: Mutex<Vec<AccessRecord>>,
    work: mpsc::UnboundedSender<Work>,
    closed: AtomicBool,
    done: Mutex<Option<oneshot::Receiver<()>>>,
    /// Cluster mode: the session's way out to JetStream, and its lease's revision.
    pub outlet: Option<Outlet>,
    lease: std::sync::atomic::AtomicU64,
}

impl SessionHandle {
    pub fn summary(&self) -> Value {
        let mut out = json!({
            "id": self.id,
            "createdAt": self.created_at,
            "extensions": self.extensions,
        });
        {
            let ui = self.ui.lock().unwrap();
            out["busy"] = json!(ui.busy());
            if let Some(title) = ui.first_prompt() {
                out["title"] = json!(title);
            }
        }
        if self.shared.hibernating.load(Ordering::Relaxed) {
            out["hibernating"] = json!(true);
        }
        let state = self.shared.state.lock().unwrap();
        if let Some(name) = state.store.get_session_name() {
            out["name"] = json!(name);
        }
        out
    }

    /// The snapshot; dialogs an extension stopped waiting for (an AbortSignal) are left out.
    pub fn snapshot(&self) -> Value {
        let snapshot = self.ui.lock().unwrap().snapshot();
        self.completed(snapshot)
    }

    /// Its record in a cluster's registry: what reopens it elsewhere, and what other nodes
    /// list of it (`summary`'s name and title).
    fn record(&self, summary: &Value) -> Value {
        let mut record = json!({ "extensions": self.requested, "createdAt": self.created_at });
        for field in ["name", "title"] {
            if let Some(text) = summary.get(field) {
                record[field] = text.clone();
            }
        }
        record
    }

    /// Publishes an event of this session (through its outlet in cluster mode).
    pub fn publish(&self, user: &User, name: &'static str, data: Value) {
        send_event(user, self.outlet.as_ref(), &self.id, name, data);
    }

    /// Publishes the session's snapshot as an event (taken and numbered under the state's
    /// lock, so the events after it are exactly those it does not cover).
    fn publish_snapshot(&self, user: &User) {
        let ui = self.ui.lock().unwrap();
        let snapshot = self.completed(ui.snapshot());
        self.publish(user, "session.snapshot", json!({ "snapshot": snapshot }));
        drop(ui);
    }

    /// The snapshot, with how many of the session's events it covers (cluster mode).
    pub fn snapshot_counted(&self) -> (Value, u64) {
        let ui = self.ui.lock().unwrap();
        let covered = self.outlet.as_ref().map_or(0, Outlet::events);
        let snapshot = ui.snapshot();
        drop(ui);
        (self.completed(snapshot), covered)
    }

    /// The snapshot, with the id of the user's newest event at the time it was taken.
    pub fn snapshot_at(&self, user: &User) -> (Value, u64) {
        let ui = self.ui.lock().unwrap();
        let head = user.head();
        let snapshot = ui.snapshot();
        drop(ui);
        (self.completed(snapshot), head)
    }

    /// What the GUI state alone does not hold: the open approval questions; and dialogs an
    /// extension stopped waiting for are left out.
    fn completed(&self, mut snapshot: Value) -> Value {
        snapshot["approvals"] = Value::Array(
            self.approvals
                .lock()
                .unwrap()
                .iter()
                .map(PendingApproval::to_json)
                .collect(),
        );
        if let Some(dialogs) = snapshot["dialogs"].as_array_mut() {
            dialogs.retain(|d| {
                self.dialogs
                    .is_waiting(d["id"].as_str().unwrap_or_default())
            });
        }
        snapshot
    }

    /// What each extension asked for and may do, with its open question's items.
    pub fn access_json(&self) -> Vec<Value> {
        let approvals = self.approvals.lock().unwrap();
        self.access
            .lock()
            .unwrap()
            .iter()
            .map(|record| {
                let pending = approvals
                    .iter()
                    .find(|a| a.extension == record.extension)
                    .map_or(&[][..], |a| &a.items[..]);
                record.to_json(pending)
            })
            .collect()
    }

    fn with_access<R>(&self, extension: &str, f: impl FnOnce(&mut AccessRecord) -> R) -> Option<R> {
        let mut access = self.access.lock().unwrap();
        access.iter_mut().find(|r| r.extension == extension).map(f)
    }

    /// Restarts an extension of this session with `grants`.
    async fn regrant(&self, source_hash: &str, grants: Grants) -> Result<(), String> {
        let (respond, answer) = oneshot::channel();
        self.work
            .send(Work::Regrant {
                source_hash: source_hash.to_owned(),
                grants: Arc::new(grants),
                respond,
            })
            .map_err(|_| "the session is closed".to_owned())?;
        answer
            .await
            .unwrap_or_else(|_| Err("the session is closed".into()))
    }

    /// The session as pi's JSONL file holds it.
    pub fn jsonl(&self) -> String {
        self.shared.state.lock().unwrap().store.to_jsonl()
    }

    /// What the transcript shows between its entries (`UiState::notes`).
    pub fn notes(&self) -> Vec<Value> {
        self.ui.lock().unwrap().notes()
    }

    /// The current branch's entries as clients see them.
    pub fn transcript(&self) -> Vec<Value> {
        let state = self.shared.state.lock().unwrap();
        state
            .store
            .get_branch(None)
            .into_iter()
            .map(gui::state::transcript_entry)
            .collect()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Sends a prompt (plain text or `/command args`) the way pi's RPC prompt goes:
    /// queued into a streaming run with a streaming behaviour, refused without one.
    pub fn prompt(
        &self,
        user: &Arc<User>,
        text: &str,
        behavior: Option<&str>,
    ) -> Result<(), PromptError> {
        if self.is_closed() {
            return Err(PromptError::Closed);
        }
        // The extension whose command this is, if it is one, and whether it is a message
        // for a run in progress, looked up under one lock.
        let (extension_command, immediate) = {
            let state = self.shared.state.lock().unwrap();
            let command = text
                .strip_prefix('/')
                .and_then(|t| state.command(t.split(' ').next().unwrap_or("")))
                .map(|c| c.extension_name.clone());
            let immediate =
                state.agent.streaming && !state.has_handlers("input") && command.is_none();
            (command, immediate)
        };
        if immediate {
            return self
                .shared
                .queue_user_message(text, &[], behavior)
                .map_err(PromptError::Busy);
        }
        if let Some(extension) = extension_command {
            // Shown before what the command does: events of a session leave in order.
            let mut ui = self.ui.lock().unwrap();
            for out in ui.echo_command(text.trim(), &extension) {
                self.publish(user, out.name, out.data);
            }
        }
        let reporter = Arc::downgrade(user);
        let session = self.id.clone();
        let outlet = self.outlet.clone();
        let ui = self.ui.clone();
        self.shared
            .state
            .lock()
            .unwrap()
            .agent
            .requests
            .push_back(AgentRequest::UserMessage {
                text: text.to_owned(),
                images: Vec::new(),
                deliver_as: behavior.map(str::to_owned),
                source: "rpc",
                commands: true,
                respond: Some(Box::new(move |outcome| {
                    if let (Err(error), Some(user)) = (outcome, reporter.upgrade()) {
                        let refused = SessionEvent::ExtensionError {
                            extension: RUNTIME.into(),
                            event: "prompt".into(),
                            error,
                            stack: None,
                        };
                        let mut ui = ui.lock().unwrap();
                        for out in ui.apply(&refused, now_ms()) {
                            send_event(&user, outlet.as_ref(), &session, out.name, out.data);
                        }
                    }
                })),
            });
        let _ = self.work.send(Work::Wake);
        Ok(())
    }

    pub fn abort(&self) {
        let busy = {
            let state = self.shared.state.lock().unwrap();
            state.agent.streaming || state.agent.compacting
        };
        if busy {
            self.shared.abort.send_replace(true);
        }
        if self.shared.state.lock().unwrap().agent.retrying {
            self.shared.retry_abort.send_replace(true);
        }
    }

    /// A command's argument completions (its getArgumentCompletions).
    pub async fn complete(&self, command: &str, prefix: &str) -> Result<Option<Value>, String> {
        let (respond, answer) = oneshot::channel();
        self.work
            .send(Work::Complete {
                command: command.to_owned(),
                prefix: prefix.to_owned(),
                respond,
            })
            .map_err(|_| "the session is closed".to_owned())?;
        answer
            .await
            .unwrap_or_else(|_| Err("the session is closed".into()))
    }

    pub fn commands(&self) -> Vec<Value> {
        let state = self.shared.state.lock().unwrap();
        state
            .commands_json()
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                let mut out = json!({ "name": c["name"], "source": c["source"] });
                if let Some(d) = c["description"].as_str() {
                    out["description"] = json!(d);
                }
                out
            })
            .collect()
    }

    pub fn has_command(&self, name: &str) -> bool {
        self.shared.state.lock().unwrap().command(name).is_some()
    }

    /// The owner key of the extension whose command users invoke as `name`.
    pub fn command_owner(&self, name: &str) -> Option<String> {
        let state = self.shared.state.lock().unwrap();
        state.command_owner(name).map(str::to_owned)
    }
}

#[derive(Debug)]
pub enum PromptError {
    Busy(String),
    Closed,
}

/// Called with a dialog's id when the extension stops waiting for it without an answer
/// (an AbortSignal), so the clients can close it.
pub type Abandoned = Arc<dyn Fn(&str) + Send + Sync>;

/// Dialogs answered over HTTP: each waits for `POST .../dialogs/:id`.
#[derive(Default)]
pub struct HubDialogs {
    pending: Mutex<HashMap<String, (UiRequest, oneshot::Sender<DialogAnswer>)>>,
    abandoned: std::sync::OnceLock<Abandoned>,
}

/// Reports a dialog whose future was dropped before it was answered.
struct AbandonGuard {
    id: String,
    answered: bool,
    abandoned: Option<Abandoned>,
}

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        if !self.answered
            && let Some(report) = &self.abandoned
        {
            report(&self.id);
        }
    }
}

/// Why a dialog answer was not taken.
#[derive(Debug, PartialEq)]
pub enum AnswerError {
    NotPending,
    Invalid(String, Option<Map<String, Value>>),
}

/// Dialogs waiting at once per session; more are cancelled.
const MAX_PENDING_DIALOGS: usize = 64;

impl HubDialogs {
    /// Who hears of dialogs the extension stopped waiting for.
    pub fn on_abandoned(&self, report: Abandoned) {
        let _ = self.abandoned.set(report);
    }

    pub fn is_waiting(&self, id: &str) -> bool {
        self.pending
            .lock()
            .unwrap()
            .get(id)
            .is_some_and(|(_, waiting)| !waiting.is_closed())
    }

    /// Checks an answer (`{value}`, `{confirmed}`, `{values}`, `{cancelled}`) against its
    /// dialog and hands it to the extension.
    pub fn answer_with(&self, id: &str, body: &Value) -> Result<(), AnswerError> {
        let mut pending = self.pending.lock().unwrap();
        let Some((request, waiting)) = pending.get(id) else {
            return Err(AnswerError::NotPending);
        };
        if waiting.is_closed() {
            pending.remove(id);
            return Err(AnswerError::NotPending);
        }
        let answer = check_answer(request, body)?;
        if let Some((_, waiting)) = pending.remove(id) {
            let _ = waiting.send(answer);
        }
        Ok(())
    }

    /// Cancels every pending dialog (the session is closing).
    pub fn cancel_all(&self) {
        for (_, (_, waiting)) in self.pending.lock().unwrap().drain() {
            let _ = waiting.send(DialogAnswer::cancelled());
        }
    }
}

fn invalid(message: &str) -> AnswerError {
    AnswerError::Invalid(message.to_owned(), None)
}

/// The answer a dialog gets from a client's body, or why the body does not fit it.
pub fn check_answer(request: &UiRequest, body: &Value) -> Result<DialogAnswer, AnswerError> {
    if body["cancelled"] == json!(true) {
        return Ok(DialogAnswer::cancelled());
    }
    match request {
        UiRequest::Confirm { .. } => match body["confirmed"].as_bool() {
            Some(confirmed) => Ok(DialogAnswer::Confirmed { confirmed }),
            None => Err(invalid(
                "a confirm dialog is answered with {\"confirmed\": true|false}",
            )),
        },
        UiRequest::Select { options, .. } => match body["value"].as_str() {
            Some(v) if options.iter().any(|o| o == v) => {
                Ok(DialogAnswer::Value { value: v.into() })
            }
            Some(_) => Err(invalid("the value is not one of the options")),
            None => Err(invalid(
                "a select dialog is answered with {\"value\": option}",
            )),
        },
        UiRequest::Input { .. } | UiRequest::Editor { .. } => match body["value"].as_str() {
            Some(v) if v.chars().count() <= gui::limits::MESSAGE => {
                Ok(DialogAnswer::Value { value: v.into() })
            }
            Some(_) => Err(invalid("the value is too long")),
            None => Err(invalid("this dialog is answered with {\"value\": text}")),
        },
        UiRequest::Form { fields, .. } => {
            let Some(values) = body["values"].as_object() else {
                return Err(invalid(
                    "a form is answered with {\"values\": {fieldId: text}}",
                ));
            };
            let fields = gui::form::normalize_fields(fields);
            match gui::validate_form(&fields, values) {
                Ok(values) => Ok(DialogAnswer::Value {
                    value: Value::Object(values).to_string(),
                }),
                Err(errors) => Err(AnswerError::Invalid(
                    "some fields are not valid".into(),
                    Some(errors),
                )),
            }
        }
        _ => Err(invalid("not a dialog")),
    }
}

impl DialogResponder for HubDialogs {
    fn answer(&self, id: &str, request: &UiRequest) -> BoxFuture<'static, DialogAnswer> {
        let (send, receive) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap();
            pending.retain(|_, (_, waiting)| !waiting.is_closed());
            if pending.len() >= MAX_PENDING_DIALOGS {
                return futures::future::ready(DialogAnswer::cancelled()).boxed();
            }
            pending.insert(id.to_owned(), (request.clone(), send));
        }
        let guard = AbandonGuard {
            id: id.to_owned(),
            answered: false,
            abandoned: self.abandoned.get().cloned(),
        };
        async move {
            // The whole guard moves into the future (not only the field it sets).
            let mut guard = guard;
            let answer = receive.await.unwrap_or_else(|_| DialogAnswer::cancelled());
            guard.answered = true;
            answer
        }
        .boxed()
    }
}

impl Hub {
    pub fn new(launcher: Launcher) -> Self {
        Self {
            launcher,
            users: HashMap::new(),
            cluster: None,
        }
    }

    /// Keeps sessions on the cluster's store from now on.
    pub fn set_cluster(&mut self, cluster: Arc<Cluster>) {
        self.cluster = Some(cluster);
    }

    /// Cluster mode: takes each user's "always" approvals from the cluster.
    pub async fn load_shared_approvals(&self) -> anyhow::Result<()> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        for user in self.users.values() {
            if let Some(json) = cluster.approvals_of(&user.name).await?
                && let Err(e) = user.approvals.replace_from_json(&json)
            {
                tracing::warn!("{}'s approvals on NATS are ignored: {e}", user.name);
            }
        }
        Ok(())
    }

    /// Cluster mode: follows the approvals other nodes store, for as long as the server runs.
    pub async fn follow_approvals(self: Arc<Self>) {
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        loop {
            let followed = cluster
                .watch_approvals(|key, json| {
                    for user in self.users.values() {
                        if crate::cluster::user_key(&user.name) == key
                            && let Err(e) = user.approvals.replace_from_json(json)
                        {
                            tracing::warn!("{}'s approvals on NATS are ignored: {e}", user.name);
                        }
                    }
                })
                .await;
            if let Err(e) = followed {
                tracing::debug!("{e:#}");
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Cluster mode: stores the user's approvals for every node after they changed here.
    pub async fn share_approvals(&self, user: &User) -> Result<(), String> {
        match &self.cluster {
            Some(cluster) => cluster
                .share_approvals(&user.name, user.approvals.to_json())
                .await
                .map_err(|e| format!("{e:#}")),
            None => Ok(()),
        }
    }

    /// Every user, for the cluster's lease keeper.
    fn all_users(&self) -> impl Iterator<Item = &Arc<User>> {
        self.users.values()
    }

    /// Adds a user who may use the extensions `allowed` (catalog ids), with what each may
    /// reach (`access`, by catalog id) and the store of their "always" approvals.
    pub fn add_user(
        &mut self,
        name: &str,
        token: &str,
        allowed: Vec<String>,
        access: HashMap<String, Access>,
        approvals: ApprovalStore,
    ) {
        let settings_file = self
            .launcher
            .data_dir
            .as_ref()
            .map(|d| d.join(name).join("ui-settings.json"));
        self.users.insert(
            token.to_owned(),
            Arc::new(User::new(name, allowed, settings_file, access, approvals)),
        );
    }

    /// The user a bearer token belongs to.
    pub fn user(&self, token: &str) -> Option<Arc<User>> {
        use sha2::Digest;
        // Compared as digests, so the time taken says nothing about how much of a token matched.
        let wanted = sha2::Sha256::digest(token.as_bytes());
        self.users
            .iter()
            .find(|(t, _)| sha2::Sha256::digest(t.as_bytes()) == wanted)
            .map(|(_, u)| u.clone())
    }

    pub fn extension_infos(&self, user: &User) -> Vec<Value> {
        self.launcher
            .catalog
            .iter()
            .filter(|e| user.allowed.contains(&e.id))
            .map(|e| {
                let mut info = e.info.clone();
                let mut capabilities = json!({
                    "requested": e.requests.items(),
                    "approved": user.approvals.remembered(&e.artifact.manifest.source_hash),
                });
                if let Some(reason) = &e.requests.reason {
                    capabilities["reason"] = json!(reason);
                }
                info["capabilities"] = capabilities;
                info
            })
            .collect()
    }

    /// Opens a session for `user` with these extensions (catalog ids, in catalog order),
    /// starts it and hands it to its own task. `store`: a session file to use (`run
    /// --session`); otherwise a new file in the user's data folder, or memory.
    pub async fn open_session(
        self: &Arc<Self>,
        user: &Arc<User>,
        extensions: Option<Vec<String>>,
        store: Option<SessionStore>,
    ) -> Result<Arc<SessionHandle>, String> {
        self.open_new(user, extensions, store, Vec::new()).await
    }

    /// Opens a session holding what a pi session file (`records`, its text) holds: a session
    /// moved in from another store (another server, a cluster, pi itself). It gets a new id.
    pub async fn import_session(
        self: &Arc<Self>,
        user: &Arc<User>,
        extensions: Option<Vec<String>>,
        records: &[u8],
    ) -> Result<Arc<SessionHandle>, String> {
        let entries = SessionStore::entries_of(records)
            .map_err(|e| format!("the session to import is not a pi session file: {e:#}"))?;
        self.open_new(user, extensions, None, entries).await
    }

    async fn open_new(
        self: &Arc<Self>,
        user: &Arc<User>,
        extensions: Option<Vec<String>>,
        store: Option<SessionStore>,
        entries: Vec<Value>,
    ) -> Result<Arc<SessionHandle>, String> {
        // Checked before a file or a log is made for it (and again when it opens).
        if user.sessions.lock().unwrap().len() >= MAX_SESSIONS_PER_USER {
            return Err(too_many_sessions());
        }
        let imported = |store: &mut SessionStore| {
            store
                .import_entries(entries)
                .map_err(|e| format!("cannot import the session: {e:#}"))
        };
        let Some(cluster) = self.cluster.clone() else {
            let mut store = match store {
                Some(store) => store,
                None => self.new_store(user)?,
            };
            imported(&mut store)?;
            return self
                .open_session_at(user, extensions, Some(store), None, None)
                .await;
        };
        // A new session's log starts with its header; its lease is this node's from the start.
        let mut outlet = None;
        let cwd = self.launcher.cwd.to_string_lossy().into_owned();
        let store = SessionStore::journaled(&cwd, |id| {
            let made = cluster.outlet(id, &user.name, 0, lost_session(user, id));
            outlet = Some(made.clone());
            Box::new(LogJournal(made))
        })
        .map_err(|e| format!("cannot start the session's log: {e:#}"))?;
        let outlet = outlet.expect("the journal was opened");
        let mut store = store;
        imported(&mut store)?;
        let id = store.get_session_id().to_owned();
        let lease = match cluster.claim(&id).await {
            Ok(Some(lease)) => lease,
            Ok(None) => return Err("a session with this id runs elsewhere".into()),
            Err(e) => return Err(format!("{e:#}")),
        };
        let placed = Placed {
            outlet,
            lease,
            resumed: false,
        };
        let handle = self
            .open_session_at(user, extensions, Some(store), None, Some(placed))
            .await?;
        let meta = handle.record(&handle.summary());
        if let Err(e) = cluster.register(&user.name, &id, &meta).await {
            Self::stop_session(&handle).await;
            return Err(format!("{e:#}"));
        }
        Ok(handle)
    }

    /// A new session's store: a file in the user's data folder, or memory.
    fn new_store(&self, user: &User) -> Result<SessionStore, String> {
        let cwd = self.launcher.cwd.to_string_lossy().into_owned();
        match &self.launcher.data_dir {
            Some(dir) => {
                let id = uuid::Uuid::new_v4();
                let folder = dir.join(&user.name);
                std::fs::create_dir_all(&folder)
                    .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;
                let path = folder.join(format!("{id}.jsonl"));
                Ok(
                    SessionStore::open_or_create(&path, &cwd, SyncPolicy::EveryEntry)
                        .map_err(|e| format!("cannot create the session file: {e:#}"))?
                        .0,
                )
            }
            None => Ok(SessionStore::in_memory(&cwd)),
        }
    }

    /// Where a request for `user`'s session `id` is answered, starting it here (rebuilt from
    /// its log) when no node runs it. `forwarded`: the request was carried here by another
    /// node, so it is not carried on.
    pub async fn place(self: &Arc<Self>, user: &Arc<User>, id: &str, forwarded: bool) -> Placement {
        let Some(cluster) = self.cluster.clone() else {
            return Placement::Here;
        };
        let _one_at_a_time = cluster.placing(id).await;
        if user.session(id).is_some_and(|s| !s.is_closed()) {
            return Placement::Here;
        }
        let unavailable = |e: anyhow::Error| Placement::Unavailable(format!("{e:#}"));
        let meta = match cluster.registered(&user.name, id).await {
            Ok(Some(meta)) => meta,
            Ok(None) => return Placement::Unknown,
            Err(e) => return unavailable(e),
        };
        let lease = match cluster.owner(id).await {
            // Its lease names this node, but it does not run here (this node restarted
            // within the lease): renewed, it is this node's again.
            Ok(Some((node, revision))) if node == cluster.node => {
                match cluster.refresh(id, revision).await {
                    Ok(lease) => lease,
                    Err(e) => return unavailable(e),
                }
            }
            Ok(Some((node, _))) if !forwarded => return Placement::At(node),
            Ok(Some((node, _))) => {
                return Placement::Unavailable(format!(
                    "the session moved to node {node}; try again"
                ));
            }
            Ok(None) => match cluster.claim(id).await {
                Ok(Some(lease)) => lease,
                Ok(None) => match cluster.owner(id).await {
                    Ok(Some((node, _))) if !forwarded => return Placement::At(node),
                    Ok(_) => {
                        return Placement::Unavailable(
                            "the session is being moved; try again".into(),
                        );
                    }
                    Err(e) => return unavailable(e),
                },
                Err(e) => return unavailable(e),
            },
            Err(e) => return unavailable(e),
        };
        match self.resume(&cluster, user, id, &meta, lease).await {
            Ok(_) => Placement::Here,
            Err(e) => {
                tracing::warn!("cannot resume session {id} here: {e}");
                Placement::Unavailable(format!("the session cannot be resumed: {e}"))
            }
        }
    }

    /// Rebuilds a session from its log on JetStream and starts its extensions again
    /// (`session_start` with reason "resume").
    async fn resume(
        self: &Arc<Self>,
        cluster: &Arc<Cluster>,
        user: &Arc<User>,
        id: &str,
        meta: &Value,
        lease: u64,
    ) -> Result<Arc<SessionHandle>, String> {
        let (records, last) = cluster.read_log(id).await.map_err(|e| format!("{e:#}"))?;
        let outlet = cluster.outlet(id, &user.name, last, lost_session(user, id));
        // First on the log, a record of the takeover (readers skip it: it has no id): a node
        // that still thinks it runs the session has its next write refused, since the log's
        // last record is no longer the one it wrote.
        outlet
            .entry(&json!({ "type": "pichamber.owner", "node": cluster.node }).to_string())
            .map_err(|e| format!("{e:#}"))?;
        let store = SessionStore::from_journal(&records, Box::new(LogJournal(outlet.clone())))
            .map_err(|e| format!("{e:#}"))?;
        let extensions = user.still_allowed(meta);
        let placed = Placed {
            outlet,
            lease,
            resumed: true,
        };
        self.open_session_at(
            user,
            Some(extensions),
            Some(store),
            meta["createdAt"].as_str().map(str::to_owned),
            Some(placed),
        )
        .await
    }

    /// Renews the lease of every session running here, every third of the lease; a session
    /// whose lease could not be renewed stops here at once (another node may have it now).
    pub async fn keep_leases(self: Arc<Self>) {
        let Some(cluster) = self.cluster.clone() else {
            return;
        };
        let mut every = tokio::time::interval(cluster.lease / 3);
        loop {
            every.tick().await;
            let running: Vec<Arc<SessionHandle>> = self
                .all_users()
                .flat_map(|u| u.sessions())
                .filter(|s| {
                    !s.is_closed() && s.outlet.as_ref().is_some_and(|o| o.failure().is_none())
                })
                .collect();
            let renewals = running.iter().map(|handle| {
                let cluster = cluster.clone();
                async move {
                    let revision = handle.lease.load(Ordering::SeqCst);
                    let asked = std::time::Instant::now();
                    match cluster.refresh(&handle.id, revision).await {
                        Ok(revision) => {
                            handle.lease.store(revision, Ordering::SeqCst);
                            if let Some(outlet) = &handle.outlet {
                                outlet.renewed(asked, cluster.lease);
                            }
                        }
                        Err(e) => lose(handle, &format!("{e:#}; another node may run it now")),
                    }
                }
            });
            futures::future::join_all(renewals).await;
        }
    }

    /// Reopens the sessions whose files are in the user's data folder (a server restarted):
    /// the newest first, at most the per-user cap; each with the extensions it had (those
    /// the user may still use). Closed sessions were moved to `closed/` and stay closed.
    pub async fn restore_sessions(self: &Arc<Self>) {
        let Some(dir) = &self.launcher.data_dir else {
            return;
        };
        if self.cluster.is_some() {
            // Sessions live on the cluster's store; each starts on the node first asked for it.
            return;
        }
        for user in self.users.values() {
            let Ok(entries) = std::fs::read_dir(dir.join(&user.name)) else {
                continue;
            };
            let mut files: Vec<(SystemTime, PathBuf)> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "jsonl"))
                .map(|p| {
                    (
                        p.metadata()
                            .and_then(|m| m.modified())
                            .unwrap_or(UNIX_EPOCH),
                        p,
                    )
                })
                .collect();
            files.sort();
            files.reverse();
            files.truncate(MAX_SESSIONS_PER_USER);
            files.reverse();
            for (_, path) in files {
                let meta: Value = std::fs::read_to_string(path.with_extension("meta.json"))
                    .ok()
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or(Value::Null);
                let extensions = user.still_allowed(&meta);
                let cwd = self.launcher.cwd.to_string_lossy().into_owned();
                let store = match SessionStore::open_or_create(&path, &cwd, SyncPolicy::EveryEntry)
                {
                    Ok((store, _)) => store,
                    Err(e) => {
                        tracing::warn!("cannot reopen {}: {e:#}", path.display());
                        continue;
                    }
                };
                let created = meta["createdAt"].as_str().map(str::to_owned);
                if let Err(e) = self
                    .open_session_at(user, Some(extensions), Some(store), created, None)
                    .await
                {
                    tracing::warn!("cannot reopen {}: {e}", path.display());
                }
            }
        }
    }

    async fn open_session_at(
        self: &Arc<Self>,
        user: &Arc<User>,
        extensions: Option<Vec<String>>,
        store: Option<SessionStore>,
        created_at: Option<String>,
        placed: Option<Placed>,
    ) -> Result<Arc<SessionHandle>, String> {
        let wanted = match extensions {
            Some(ids) => {
                if let Some(bad) = ids.iter().find(|id| !user.allowed.contains(id)) {
                    return Err(format!("unknown extension {bad:?}"));
                }
                ids
            }
            None => user.allowed.clone(),
        };
        if user.sessions.lock().unwrap().len() >= MAX_SESSIONS_PER_USER {
            return Err(too_many_sessions());
        }
        let launcher = &self.launcher;
        let cwd = launcher.cwd.to_string_lossy().into_owned();
        let store = match store {
            Some(store) => store,
            None => self.new_store(user)?,
        };
        let id = store.get_session_id().to_owned();
        let file = store.get_session_file().map(|p| p.to_path_buf());
        let outlet = placed.as_ref().map(|p| p.outlet.clone());
        let ui = Arc::new(Mutex::new(UiState::new()));
        ui.lock().unwrap().restore(
            &store
                .get_branch(None)
                .into_iter()
                .cloned()
                .collect::<Vec<_>>(),
        );
        let dialogs = Arc::new(HubDialogs::default());
        {
            // A dialog given up (an AbortSignal, or its timeout) is closed for the clients;
            // one answered already is no longer in the state and says nothing.
            let ui = ui.clone();
            let user = Arc::downgrade(user);
            let id = id.clone();
            let outlet = outlet.clone();
            dialogs.on_abandoned(Arc::new(move |dialog: &str| {
                let Some(user) = user.upgrade() else { return };
                let mut ui = ui.lock().unwrap();
                let closed = SessionEvent::ExtensionUiResponse {
                    id: dialog.to_owned(),
                    answer: DialogAnswer::cancelled(),
                };
                for out in ui.apply(&closed, now_ms()) {
                    send_event(&user, outlet.as_ref(), &id, out.name, out.data);
                }
            }));
        }
        let sink: EventSink = {
            let ui = ui.clone();
            let user = Arc::downgrade(user);
            let id = id.clone();
            let outlet = outlet.clone();
            Arc::new(move |event: &SessionEvent| {
                let Some(user) = user.upgrade() else { return };
                // Published under the state's lock: a snapshot and the events after it
                // never overlap or leave a gap.
                let mut ui = ui.lock().unwrap();
                for out in ui.apply(event, now_ms()) {
                    send_event(&user, outlet.as_ref(), &id, out.name, out.data);
                }
            })
        };
        let mut session = Session::new(
            Runtime::global().map_err(|e| format!("{e:#}"))?,
            SessionConfig {
                cwd,
                has_ui: true,
                dialogs: dialogs.clone(),
                sink,
                instance: launcher.instance.clone(),
                flags: launcher.flags.clone(),
                model: launcher.model.clone(),
                catalog: launcher.models.clone(),
                agent: launcher.agent.clone(),
                store: Some(store),
                pi: PiVersion::for_session(
                    launcher
                        .catalog
                        .iter()
                        .filter(|e| wanted.contains(&e.id))
                        .map(|e| e.artifact.manifest.pi_version),
                ),
                mode: "rpc",
                // A served session loads nothing of its folder's own.
                project_trusted: !pichamber_session::trust::needs_trust(&launcher.cwd, None),
                // The page serves the extensions its user chose, not a pi client's built-ins.
                builtin_extensions: Vec::new(),
            },
        );
        session.set_resources(launcher.prompts.clone(), launcher.skills.clone());
        session.set_hibernation(launcher.hibernate_after);
        session.set_settings(launcher.settings.clone());
        session.set_thinking_level(&launcher.thinking)?;
        let mut loaded = Vec::new();
        let mut approvals = Vec::new();
        let mut access_records = Vec::new();
        let default_access = Access {
            grants: (*launcher.instance.grants).clone(),
            ceiling: Ceiling::Grants,
        };
        for entry in launcher.catalog.iter().filter(|e| wanted.contains(&e.id)) {
            let hash = &entry.artifact.manifest.source_hash;
            let access = user.access.get(&entry.id).unwrap_or(&default_access);
            let remembered = user.approvals.remembered(hash);
            let (grants, assessment) = access.assess(&entry.requests, &remembered, &launcher.cwd);
            session.set_extension_grants(hash, Arc::new(grants.clone()));
            if session.load(&entry.artifact).await.is_ok() {
                loaded.push(entry.id.clone());
                let (approved, given) = assessment.granted.iter().cloned().partition(|item| {
                    remembered.contains(item) && !access.grants.covers(item, &launcher.cwd)
                });
                access_records.push(AccessRecord {
                    extension: entry.id.clone(),
                    name: entry.artifact.manifest.name.clone(),
                    source_hash: hash.clone(),
                    reason: entry.requests.reason.clone(),
                    configured: access.grants.clone(),
                    given,
                    approved,
                    declined: Vec::new(),
                    refused: assessment.refused.clone(),
                });
                if !assessment.pending.is_empty() {
                    approvals.push(PendingApproval {
                        extension: entry.id.clone(),
                        name: entry.artifact.manifest.name.clone(),
                        source_hash: hash.clone(),
                        reason: entry.requests.reason.clone(),
                        items: assessment.pending,
                        refused: assessment.refused,
                        grants,
                    });
                }
            }
        }
        let placed_resumed = placed.as_ref().is_some_and(|p| p.resumed);
        if placed_resumed {
            session.start_resumed().await;
        } else {
            session.start().await;
        }
        let (work, queue) = mpsc::unbounded_channel();
        let (done_tx, done_rx) = oneshot::channel();
        let created_at = created_at
            .unwrap_or_else(|| humantime::format_rfc3339_millis(SystemTime::now()).to_string());
        // Beside the session file: what a restarted server reopens it with.
        if let Some(file) = &file
            && self.launcher.data_dir.is_some()
        {
            let meta = json!({ "extensions": wanted, "createdAt": created_at });
            let _ = std::fs::write(file.with_extension("meta.json"), meta.to_string());
        }
        let handle = Arc::new(SessionHandle {
            id: id.clone(),
            created_at,
            file,
            extensions: loaded,
            shared: session.shared.clone(),
            ui,
            dialogs,
            approvals: Mutex::new(approvals),
            access: Mutex::new(access_records),
            work,
            closed: AtomicBool::new(false),
            done: Mutex::new(Some(done_rx)),
            lease: std::sync::atomic::AtomicU64::new(placed.as_ref().map_or(0, |p| p.lease)),
            outlet: placed.map(|p| p.outlet),
            requested: wanted.clone(),
        });
        {
            let mut sessions = user.sessions.lock().unwrap();
            // One of this id still stopping (its lease was lost) gives way to this one.
            sessions.retain(|s| s.id != id);
            sessions.push(handle.clone());
        }
        handle.publish(
            user,
            "session.created",
            json!({ "session": handle.summary() }),
        );
        for approval in handle.approvals.lock().unwrap().iter() {
            handle.publish(
                user,
                "extension.ui",
                json!({ "kind": "approval", "approval": approval.to_json() }),
            );
        }
        if handle.outlet.is_some() && placed_resumed {
            // Clients watching hear that it runs again: whatever it had open on the node that
            // ran it (dialogs, a command half run) is gone, and the snapshot says so.
            handle.publish_snapshot(user);
        }
        tokio::spawn(own_session(
            session,
            queue,
            handle.clone(),
            Arc::downgrade(user),
            done_tx,
            self.cluster.clone(),
        ));
        Ok(handle)
    }

    /// Stops a session's task: pending dialogs are cancelled, a run is aborted, and its
    /// extensions get session_shutdown (waited for up to 30 s).
    async fn stop_session(handle: &Arc<SessionHandle>) {
        handle.closed.store(true, Ordering::SeqCst);
        handle.dialogs.cancel_all();
        handle.abort();
        let _ = handle.work.send(Work::Close);
        let done = handle.done.lock().unwrap().take();
        if let Some(done) = done {
            let _ = tokio::time::timeout(Duration::from_secs(30), done).await;
        }
    }

    /// Closes a session: session_shutdown runs, pending dialogs are cancelled, and its file
    /// is moved aside.
    pub async fn close_session(&self, user: &User, handle: &Arc<SessionHandle>) {
        Self::stop_session(handle).await;
        if let Some(cluster) = &self.cluster
            && let Err(e) = cluster.unregister(&user.name, &handle.id).await
        {
            tracing::warn!("session {} closed here, but: {e:#}", handle.id);
        }
        // A closed session's file is kept, moved aside so a restart does not reopen it.
        if let (Some(file), Some(dir)) = (&handle.file, &self.launcher.data_dir)
            && file.starts_with(dir.join(&user.name))
            && let Some(name) = file.file_name()
        {
            let closed = dir.join(&user.name).join("closed");
            if std::fs::create_dir_all(&closed).is_ok() {
                let _ = std::fs::rename(file, closed.join(name));
                let meta = file.with_extension("meta.json");
                if let Some(meta_name) = meta.file_name() {
                    let _ = std::fs::rename(&meta, closed.join(meta_name));
                }
            }
        }
    }

    /// The user's answer to an approval question: "once" and "always" restart the extension
    /// with the items granted ("always" also remembers them for this build), "deny" leaves
    /// it as it runs. The question closes for every client either way.
    pub async fn decide(
        &self,
        user: &User,
        handle: &Arc<SessionHandle>,
        extension: &str,
        body: &Value,
    ) -> Result<Value, ApprovalError> {
        let decision = Decision::from_body(body).map_err(ApprovalError::Invalid)?;
        let pending = {
            let mut approvals = handle.approvals.lock().unwrap();
            let index = approvals
                .iter()
                .position(|a| a.extension == extension)
                .ok_or(ApprovalError::NotPending)?;
            approvals.remove(index)
        };
        let restore = |pending: PendingApproval| handle.approvals.lock().unwrap().push(pending);
        let mut granted = Vec::new();
        if decision != Decision::Deny {
            if decision == Decision::Always
                && let Err(e) =
                    user.approvals
                        .remember(&pending.source_hash, &pending.name, &pending.items)
            {
                restore(pending);
                return Err(ApprovalError::Failed(e));
            }
            if decision == Decision::Always
                && let Err(e) = self.share_approvals(user).await
            {
                restore(pending);
                return Err(ApprovalError::Failed(e));
            }
            let mut grants = pending.grants.clone();
            for item in &pending.items {
                grants.add(item, &self.launcher.cwd);
            }
            if let Err(e) = handle.regrant(&pending.source_hash, grants).await {
                restore(pending);
                return Err(ApprovalError::Failed(e));
            }
            granted = pending.items.clone();
        }
        handle.with_access(extension, |record| {
            let list = if decision == Decision::Deny {
                &mut record.declined
            } else {
                &mut record.approved
            };
            list.extend(pending.items.iter().cloned());
        });
        handle.publish(
            user,
            "extension.ui",
            json!({ "kind": "approval.closed", "extension": extension, "decision": decision.name() }),
        );
        Ok(json!({ "ok": true, "decision": decision.name(), "granted": granted }))
    }

    /// Asks the user again for what they denied an extension in this session.
    pub fn ask_again(
        &self,
        user: &User,
        handle: &SessionHandle,
        extension: &str,
    ) -> Result<Value, ApprovalError> {
        let mut approvals = handle.approvals.lock().unwrap();
        if approvals.iter().any(|a| a.extension == extension) {
            return Err(ApprovalError::Nothing("its question is open already"));
        }
        let mut access = handle.access.lock().unwrap();
        let record = access
            .iter_mut()
            .find(|r| r.extension == extension)
            .ok_or(ApprovalError::UnknownExtension)?;
        if record.declined.is_empty() {
            return Err(ApprovalError::Nothing(
                "nothing was denied to it in this session",
            ));
        }
        let question = PendingApproval {
            extension: record.extension.clone(),
            name: record.name.clone(),
            source_hash: record.source_hash.clone(),
            reason: record.reason.clone(),
            items: std::mem::take(&mut record.declined),
            refused: Vec::new(),
            grants: record.grants(&self.launcher.cwd),
        };
        let shown = question.to_json();
        approvals.push(question);
        drop((access, approvals));
        handle.publish(
            user,
            "extension.ui",
            json!({ "kind": "approval", "approval": shown }),
        );
        Ok(json!({ "ok": true, "approval": shown }))
    }

    /// Takes back what the user approved for an extension: the session's approvals and the
    /// "always" ones of its build. It restarts with its configured grants, and what was
    /// approved can be asked for again.
    pub async fn revoke(
        &self,
        user: &User,
        handle: &SessionHandle,
        extension: &str,
    ) -> Result<Value, ApprovalError> {
        let (hash, grants, revoked) = handle
            .with_access(extension, |r| {
                (
                    r.source_hash.clone(),
                    r.configured.clone(),
                    r.approved.clone(),
                )
            })
            .ok_or(ApprovalError::UnknownExtension)?;
        if revoked.is_empty() {
            return Err(ApprovalError::Nothing(
                "nothing was approved for it beyond its grants",
            ));
        }
        user.approvals
            .forget(&hash)
            .map_err(ApprovalError::Failed)?;
        self.share_approvals(user)
            .await
            .map_err(ApprovalError::Failed)?;
        handle
            .regrant(&hash, grants.clone())
            .await
            .map_err(ApprovalError::Failed)?;
        handle.with_access(extension, |record| {
            record.approved.retain(|i| !revoked.contains(i));
            record.declined.extend(revoked.iter().cloned());
        });
        // An open question's "until then" grants lose what was revoked too.
        for question in handle.approvals.lock().unwrap().iter_mut() {
            if question.extension == extension {
                question.grants = grants.clone();
            }
        }
        handle.publish(
            user,
            "extension.ui",
            json!({ "kind": "access", "extension": extension }),
        );
        Ok(json!({ "ok": true, "revoked": revoked }))
    }

    /// The server stops: every session's extensions get session_shutdown, all sessions at
    /// once; their files stay where they are, so a restarted server reopens them.
    pub async fn stop_all(&self) -> usize {
        let handles: Vec<Arc<SessionHandle>> =
            self.users.values().flat_map(|u| u.sessions()).collect();
        futures::future::join_all(handles.iter().map(Self::stop_session)).await;
        handles.len()
    }
}

fn too_many_sessions() -> String {
    format!("a user may have {MAX_SESSIONS_PER_USER} open sessions; close one first")
}

/// An event of session `id`: through its outlet in cluster mode (every node's streams read it
/// back from JetStream), else on the user's own log and stream.
fn send_event(user: &User, outlet: Option<&Outlet>, id: &str, name: &'static str, mut data: Value) {
    match outlet {
        Some(outlet) => {
            data["sessionId"] = json!(id);
            outlet.event(name, data.to_string());
        }
        None => user.publish(id, name, data),
    }
}

/// What a session's outlet calls when it cannot store what the session made: the session
/// stops here (another node may run it now).
fn lost_session(user: &Arc<User>, id: &str) -> Box<dyn Fn(String) + Send + Sync> {
    let user = Arc::downgrade(user);
    let id = id.to_owned();
    Box::new(move |reason| {
        if let Some(handle) = user.upgrade().and_then(|u| u.session(&id)) {
            lose(&handle, &reason);
        }
    })
}

/// Stops a session whose lease or log this node lost: nothing more of it leaves here, and
/// its task ends (the session goes on where its new owner runs it).
fn lose(handle: &Arc<SessionHandle>, reason: &str) {
    if let Some(outlet) = &handle.outlet {
        outlet.fail(reason);
    }
    if handle.closed.swap(true, Ordering::SeqCst) {
        return;
    }
    tracing::warn!("session {} stops on this node: {reason}", handle.id);
    let handle = handle.clone();
    tokio::spawn(async move { Hub::stop_session(&handle).await });
}

/// The task that owns a session: runs queued prompts, due extension timers, completions,
/// until it is closed or an extension shuts it down.
async fn own_session(
    mut session: Session,
    mut queue: mpsc::UnboundedReceiver<Work>,
    handle: Arc<SessionHandle>,
    user: std::sync::Weak<User>,
    done: oneshot::Sender<()>,
    cluster: Option<Arc<Cluster>>,
) {
    // Cluster mode: the name and title its record on NATS carries (for other nodes' lists).
    let mut recorded = (Value::Null, Value::Null);
    loop {
        // Extension timers due while idle run too, and what their programs sent.
        let item = match session.idle(&mut queue).await {
            Idle::Work(item) => Some(item),
            Idle::Closed => None,
            Idle::Poll => continue,
        };
        match item {
            Some(Work::Wake) => {}
            Some(Work::Complete {
                command,
                prefix,
                respond,
            }) => {
                let _ = respond.send(session.complete_arguments(&command, &prefix).await);
            }
            Some(Work::Regrant {
                source_hash,
                grants,
                respond,
            }) => {
                let _ = respond.send(session.regrant(&source_hash, grants).await);
            }
            Some(Work::Close) | None => break,
        }
        session.run_requests().await;
        if session.shutdown_requested() {
            break;
        }
        if let (Some(cluster), Some(user)) = (&cluster, user.upgrade()) {
            let summary = handle.summary();
            let names = (summary["name"].clone(), summary["title"].clone());
            if names != recorded {
                recorded = names;
                let cluster = cluster.clone();
                let meta = handle.record(&summary);
                let id = handle.id.clone();
                tokio::spawn(async move {
                    if let Err(e) = cluster.register(&user.name, &id, &meta).await {
                        tracing::debug!("session {id}'s record keeps its old title: {e:#}");
                    }
                });
            }
        }
    }
    handle.closed.store(true, Ordering::SeqCst);
    handle.dialogs.cancel_all();
    session.shutdown().await;
    if let Some(user) = user.upgrade() {
        user.sessions
            .lock()
            .unwrap()
            .retain(|s| !Arc::ptr_eq(s, &handle));
        // A session this node lost goes on elsewhere: nothing says it closed.
        let lost = handle
            .outlet
            .as_ref()
            .is_some_and(|o| o.failure().is_some());
        if !lost {
            let closed = handle.ui.lock().unwrap().close_dialogs();
            for event in closed {
                handle.publish(&user, event.name, event.data);
            }
            handle.publish(&user, "session.closed", json!({}));
        }
    }
    let _ = done.send(());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_a_window_of_extension_events() {
        let user = User::new(
            "u",
            vec![],
            None,
            HashMap::new(),
            ApprovalStore::in_memory(),
        );
        for i in 0..1600 {
            let name = if i % 3 == 0 { "agent" } else { "extension.ui" };
            user.publish("s", name, json!({ "n": i }));
        }
        assert_eq!(user.head(), 1600);
        let log = user.log.lock().unwrap();
        assert_eq!(log.retained.len(), RETAINED_EVENTS);
        assert!(log.retained.iter().all(|e| e.name == "extension.ui"));
        let oldest = log.retained.front().unwrap().id;
        assert!(log.evicted_through > 0 && log.evicted_through < oldest);
        drop(log);
        // Inside the window: what was missed; past it, unknown, or none: snapshots.
        let (_, head, resume) = user.connect(Some(1590));
        assert_eq!(head, 1600);
        match resume {
            Resume::Replay(events) => {
                assert!(
                    events
                        .iter()
                        .all(|e| e.id > 1590 && e.name == "extension.ui")
                );
                let expected = (1591..=1600u64).filter(|id| (id - 1) % 3 != 0).count();
                assert_eq!(events.len(), expected);
            }
            Resume::Snapshots => panic!("1590 is inside the window"),
        }
        assert!(matches!(user.connect(Some(10)).2, Resume::Snapshots));
        assert!(matches!(user.connect(Some(99_999)).2, Resume::Snapshots));
        assert!(matches!(user.connect(None).2, Resume::Snapshots));
        assert!(matches!(user.connect(Some(1600)).2, Resume::Replay(ref e) if e.is_empty()));
    }

    #[test]
    fn answers_are_checked_against_their_dialog() {
        let select = UiRequest::Select {
            title: "t".into(),
            options: vec!["a".into(), "b".into()],
            timeout: None,
        };
        assert_eq!(
            check_answer(&select, &json!({ "value": "b" })).unwrap(),
            DialogAnswer::Value { value: "b".into() }
        );
        assert!(check_answer(&select, &json!({ "value": "c" })).is_err());
        assert_eq!(
            check_answer(&select, &json!({ "cancelled": true })).unwrap(),
            DialogAnswer::cancelled()
        );
        let editor = UiRequest::Editor {
            title: "t".into(),
            prefill: None,
            timeout: None,
        };
        assert_eq!(
            check_answer(&editor, &json!({ "value": "" })).unwrap(),
            DialogAnswer::Value { value: "".into() }
        );
        let confirm = UiRequest::Confirm {
            title: "t".into(),
            message: "m".into(),
            timeout: None,
        };
        assert!(check_answer(&confirm, &json!({ "value": "yes" })).is_err());
        let form = UiRequest::Form {
            title: "f".into(),
            fields: json!([{ "id": "n", "type": "number", "max": 3, "required": true }]),
            timeout: None,
        };
        match check_answer(&form, &json!({ "values": { "n": "4" } })) {
            Err(AnswerError::Invalid(_, Some(fields))) => {
                assert_eq!(fields["n"], "must be at most 3")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            check_answer(&form, &json!({ "values": { "n": "2" } })).unwrap(),
            DialogAnswer::Value {
                value: r#"{"n":"2"}"#.into()
            }
        );
    }

    #[tokio::test]
    async fn a_dialog_answer_reaches_the_waiting_extension_once() {
        let dialogs = HubDialogs::default();
        let request = UiRequest::Input {
            title: "t".into(),
            placeholder: None,
            timeout: None,
        };
        let waiting = dialogs.answer("d", &request);
        assert!(dialogs.is_waiting("d"));
        assert_eq!(
            dialogs.answer_with("x", &json!({ "value": "v" })),
            Err(AnswerError::NotPending)
        );
        dialogs.answer_with("d", &json!({ "value": "v" })).unwrap();
        assert_eq!(waiting.await, DialogAnswer::Value { value: "v".into() });
        assert_eq!(
            dialogs.answer_with("d", &json!({ "value": "v" })),
            Err(AnswerError::NotPending)
        );
        // A dialog the extension stopped waiting for is no longer pending, and is reported.
        let reported = Arc::new(Mutex::new(Vec::<String>::new()));
        let into = reported.clone();
        dialogs.on_abandoned(Arc::new(move |id: &str| {
            into.lock().unwrap().push(id.into())
        }));
        drop(dialogs.answer("gone", &request));
        assert!(!dialogs.is_waiting("gone"));
        assert_eq!(*reported.lock().unwrap(), ["gone"]);
        let answered = dialogs.answer("kept", &request);
        dialogs
            .answer_with("kept", &json!({ "value": "x" }))
            .unwrap();
        answered.await;
        assert_eq!(
            *reported.lock().unwrap(),
            ["gone"],
            "an answered dialog is not abandoned"
        );
    }
}
