//! Session lifecycle as pi 0.73.1 runs it (agent-session-runtime.js, agent-session.js):
//! start, new / resume / fork / clone (cancellable through `session_before_switch` /
//! `session_before_fork`), reload, tree navigation, model and thinking-level changes, the
//! session name, and the user's own shell commands (`!cmd`, `!!cmd`).
//!
//! Replacing the session tears the extensions down (`session_shutdown`) and loads them again
//! from their artifacts into fresh instances, as pi rebuilds its runtime: module state does
//! not survive a switch. Events name session files by file name only: the folder is the
//! operator's business and stays out of the sandbox.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Session;
use super::branch_summary::{self, BranchSummaryOptions};
use super::compaction::js_truthy;
use super::events::{RUNTIME, SessionEvent};
use super::messages::{self, now_ms};
use super::models::{RouteReason, Selection};
use super::state::{CommandOwner, ToolSource};
use super::store::{SessionStore, SyncPolicy};

/// Where a fork starts (pi's `position`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForkPosition {
    /// Before a user message: the new session ends at its parent and the text comes back
    /// for editing.
    Before,
    /// At an entry: the new session includes it (pi's clone).
    At,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkOutcome {
    pub cancelled: bool,
    pub selected_text: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TreeOutcome {
    pub cancelled: bool,
    pub editor_text: Option<String>,
    pub summary_entry: Option<Value>,
}

/// Most output kept from a user shell command (pi's 50 KB tail).
const MAX_BASH_OUTPUT: usize = 50 * 1024;

fn file_name(store: &SessionStore) -> Value {
    store
        .get_session_file()
        .and_then(Path::file_name)
        .map(|n| json!(n.to_string_lossy()))
        .unwrap_or(Value::Null)
}

impl Session {
    /// `session_start` for a session that just loaded (reason "startup").
    pub async fn start(&mut self) {
        self.session_started(json!({ "type": "session_start", "reason": "startup" }))
            .await;
    }

    /// `session_start` for a session taken over from another process that ran it before
    /// (reason "resume": serve's cluster mode after its node stopped).
    pub async fn start_resumed(&mut self) {
        self.session_started(json!({ "type": "session_start", "reason": "resume" }))
            .await;
    }

    /// `session_start`, then `resources_discover` as pi follows it ("reload" after a
    /// reload, "startup" otherwise): the prompt templates and skills extensions return are
    /// added to the session's (themes are not used: pichamber has no TUI).
    async fn session_started(&mut self, event: Value) {
        self.record_initial_settings();
        self.shared.state.lock().unwrap().announces_mcp_changes = true;
        let reason = if event["reason"] == "reload" {
            "reload"
        } else {
            "startup"
        };
        let _ = self.emit("session_start", event).await;
        self.start_mcp();
        self.shared
            .state
            .lock()
            .unwrap()
            .resources
            .reset_extensions();
        if self.has_handlers("resources_discover") {
            let discovered = self
                .emit(
                    "resources_discover",
                    json!({ "type": "resources_discover", "cwd": self.shared.cwd, "reason": reason }),
                )
                .await
                .unwrap_or(Value::Null);
            self.add_discovered_resources(&discovered);
        }
    }

    /// Starts pi 1.6.0's built-in MCP extension when the session loads it: after the
    /// extensions' `session_start`, as pi's built-ins load after them.
    fn start_mcp(&mut self) {
        if !self.builtins.contains(&crate::builtins::MCP) {
            return;
        }
        let registered = self.registered_mcp_servers();
        self.mcp = Some(crate::mcp_extension::McpExtension::start(
            self.shared.clone(),
            crate::discovery::agent_dir(),
            registered,
            self.builtins.contains(&crate::builtins::TOOL_SEARCH),
        ));
    }

    /// The MCP servers extensions registered, each with its extension's grants.
    fn registered_mcp_servers(&self) -> Vec<crate::mcp_extension::Registered> {
        let state = self.shared.state.lock().unwrap();
        state
            .mcp_servers
            .iter()
            .map(|s| crate::mcp_extension::Registered {
                name: s.name.clone(),
                config: s.config.clone(),
                extension: s.extension,
                extension_path: crate::port::source_path_of(&state, s.extension),
                // An instance lent to a running call has its grants with it: its server
                // gets none rather than anyone else's.
                grants: Arc::new(
                    self.extensions
                        .get(s.extension)
                        .filter(|slot| !slot.is_lent())
                        .map(|slot| slot.grants().clone())
                        .unwrap_or_default(),
                ),
            })
            .collect()
    }

    /// pi's MCP extension hears `mcp_servers_change` after the extensions: it connects the
    /// servers registered since and drops those unregistered.
    pub(super) async fn sync_mcp(&mut self) {
        if let Some(mcp) = self.mcp.clone() {
            mcp.sync(self.registered_mcp_servers()).await;
        }
    }

    /// Ends the MCP extension's connections (its tools go with the extensions' tools).
    pub(super) async fn stop_mcp(&mut self) {
        if let Some(mcp) = self.mcp.take() {
            mcp.close().await;
        }
    }

    /// A new session records its model and thinking level first, so a resume restores them
    /// (pi's createAgentSession). pi records the thinking level even without a model;
    /// pichamber only when there is one, so a session of extension calls alone holds just
    /// what the extensions appended.
    fn record_initial_settings(&mut self) {
        let Some(model) = self.model.as_ref().map(|m| m.info()) else {
            return;
        };
        let mut state = self.shared.state.lock().unwrap();
        if !state.store.get_entries().is_empty() {
            return;
        }
        let level = state.thinking_level.clone();
        let recorded = state
            .store
            .append_model_change(
                model["provider"].as_str().unwrap_or_default(),
                model["id"].as_str().unwrap_or_default(),
            )
            .and_then(|first| {
                let second = state.store.append_thinking_level_change(&level)?;
                Ok([first, second])
            });
        drop(state);
        // Reported like every entry, once written.
        match recorded {
            Ok(entries) => {
                for entry in entries {
                    self.shared.emit(SessionEvent::Entry { entry });
                }
            }
            Err(e) => self.error(RUNTIME, "session", format!("{e:#}")),
        }
    }

    async fn cancelled_by(&mut self, event: &str, body: Value) -> bool {
        if !self.has_handlers(event) {
            return false;
        }
        let result = self.emit(event, body).await.unwrap_or(Value::Null);
        result["cancel"] == json!(true)
    }

    /// Tears the current session down and continues in `store` with freshly loaded
    /// extensions; `session_start` tells them why.
    async fn replace_store(&mut self, store: SessionStore, reason: &str) {
        let previous = file_name(&self.shared.state.lock().unwrap().store);
        let target = file_name(&store);
        self.stop_extensions(
            json!({ "type": "session_shutdown", "reason": reason, "targetSessionFile": target }),
        )
        .await;
        {
            let mut state = self.shared.state.lock().unwrap();
            let context = store.build_session_context();
            state.store = store;
            let previous = std::mem::take(&mut state.agent);
            state.agent.steering_mode = previous.steering_mode;
            state.agent.follow_up_mode = previous.follow_up_mode;
            state.agent.auto_compaction = previous.auto_compaction;
            state.agent.messages = context.messages;
            state.agent.context_window = state
                .model
                .as_ref()
                .and_then(|m| m["contextWindow"].as_u64());
            state.thinking_level = context.thinking_level;
            state.bus.clear();
        }
        self.reload_extensions().await;
        self.session_started(
            json!({ "type": "session_start", "reason": reason, "previousSessionFile": previous }),
        )
        .await;
    }

    /// `session_shutdown`, then every instance stops and its registrations go.
    async fn stop_extensions(&mut self, event: Value) {
        let _ = self.emit("session_shutdown", event).await;
        self.stop_mcp().await;
        for extension in &mut self.extensions {
            if !extension.is_broken() {
                let _ = extension.shutdown().await;
            }
        }
        // With slots to spare, their slots' reset waits for the session's next pause.
        self.make_ahead_due = true;
        if self.slots_to_spare {
            self.stopped.append(&mut self.extensions);
        } else {
            self.extensions.clear();
        }
        self.origins.clear();
        let mut state = self.shared.state.lock().unwrap();
        // The tools of the built-in extensions the host serves stay (`tool_search`), but not
        // those of the MCP servers, which connect again.
        state.tools.retain(|t| {
            t.source == ToolSource::Builtin
                || (t.source == ToolSource::Host && t.name == crate::tool_search::NAME)
        });
        let builtin: Vec<String> = state.tools.iter().map(|t| t.name.clone()).collect();
        state.active_tools.retain(|n| builtin.contains(n));
        state
            .commands
            .retain(|c| matches!(c.owner, CommandOwner::Builtin(_)));
        state.registrations.clear();
    }

    /// Loads every extension again into a fresh instance, in the original order.
    async fn reload_extensions(&mut self) {
        let artifacts = self.artifacts.clone();
        self.artifacts.clear();
        for (artifact, found) in artifacts {
            let _ = self.load_shared(artifact, found).await;
        }
    }

    /// pi's `/reload`: `session_shutdown` and `session_start` with reason "reload" around a
    /// fresh load of every extension; the session itself stays.
    pub async fn reload(&mut self) {
        self.stop_extensions(json!({ "type": "session_shutdown", "reason": "reload" }))
            .await;
        self.reload_extensions().await;
        self.session_started(json!({ "type": "session_start", "reason": "reload" }))
            .await;
    }

    /// A new, empty session (in the same folder when the current one is a file).
    pub async fn new_session(&mut self) -> Result<bool, String> {
        if self
            .cancelled_by(
                "session_before_switch",
                json!({ "type": "session_before_switch", "reason": "new" }),
            )
            .await
        {
            return Ok(true);
        }
        let store = {
            let state = self.shared.state.lock().unwrap();
            match state.store.get_session_dir() {
                Some(dir) => SessionStore::create(dir, &self.shared.cwd, SyncPolicy::EveryEntry)
                    .map_err(|e| format!("{e:#}"))?,
                None => SessionStore::in_memory(&self.shared.cwd),
            }
        };
        self.replace_store(store, "new").await;
        Ok(false)
    }

    /// Continues in another session file (pi's resume / switch_session).
    pub async fn switch_session(&mut self, path: &Path) -> Result<bool, String> {
        self.switch_to(path, false).await
    }

    /// `same_cwd_only`: for an extension's request, which may reach only this working
    /// directory's sessions (another project's entries are not its to read).
    async fn switch_to(&mut self, path: &Path, same_cwd_only: bool) -> Result<bool, String> {
        let target = path
            .file_name()
            .map(|n| json!(n.to_string_lossy()))
            .unwrap_or(Value::Null);
        if self
            .cancelled_by(
                "session_before_switch",
                json!({ "type": "session_before_switch", "reason": "resume", "targetSessionFile": target }),
            )
            .await
        {
            return Ok(true);
        }
        let shown = path.file_name().unwrap_or_default().to_string_lossy();
        // Errors name the file, not where it is: the folder is the operator's business.
        let (store, report) = SessionStore::open(path, SyncPolicy::EveryEntry).map_err(|e| {
            let folder = path
                .parent()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            let message = format!("{e:#}").replace(&path.display().to_string(), &shown);
            if folder.is_empty() {
                message
            } else {
                message.replace(&folder, "<session folder>")
            }
        })?;
        if same_cwd_only && store.get_cwd() != self.shared.cwd {
            return Err(format!(
                "session {shown} belongs to another working directory; it can only be resumed from there"
            ));
        }
        if !report.is_clean() {
            tracing::warn!("{}: {report}", path.display());
        }
        self.replace_store(store, "resume").await;
        Ok(false)
    }

    /// A new session holding the path to `entry_id` (position Before: up to the user
    /// message's parent, returning its text; At: including the entry).
    pub async fn fork(
        &mut self,
        entry_id: &str,
        position: ForkPosition,
    ) -> Result<ForkOutcome, String> {
        let position_name = match position {
            ForkPosition::Before => "before",
            ForkPosition::At => "at",
        };
        if self
            .cancelled_by(
                "session_before_fork",
                json!({ "type": "session_before_fork", "entryId": entry_id, "position": position_name }),
            )
            .await
        {
            return Ok(ForkOutcome {
                cancelled: true,
                selected_text: None,
            });
        }
        let (store, selected_text) = {
            let state = self.shared.state.lock().unwrap();
            let current = &state.store;
            let entry = current
                .get_entry(entry_id)
                .ok_or("Invalid entry ID for forking")?;
            let (leaf, text) = match position {
                ForkPosition::At => (Some(entry_id.to_owned()), None),
                ForkPosition::Before => {
                    if entry["type"] != "message" || entry["message"]["role"] != "user" {
                        return Err("Invalid entry ID for forking".into());
                    }
                    (
                        entry["parentId"].as_str().map(str::to_owned),
                        Some(messages::user_text(&entry["message"])),
                    )
                }
            };
            let store = match leaf {
                Some(leaf) => current
                    .create_branched_session(&leaf)
                    .map_err(|e| format!("{e:#}"))?,
                None => {
                    let parent = current
                        .get_session_file()
                        .map(|p| p.to_string_lossy().into_owned());
                    match current.get_session_dir() {
                        Some(dir) => SessionStore::create_with_parent(
                            dir,
                            &self.shared.cwd,
                            parent.as_deref(),
                            SyncPolicy::EveryEntry,
                        )
                        .map_err(|e| format!("{e:#}"))?,
                        None => SessionStore::in_memory(&self.shared.cwd),
                    }
                }
            };
            (store, text)
        };
        self.replace_store(store, "fork").await;
        Ok(ForkOutcome {
            cancelled: false,
            selected_text,
        })
    }

    /// A session action a command asked for (`ctx.newSession()` and friends).
    pub(super) async fn session_action(
        &mut self,
        action: &str,
        args: &Value,
    ) -> Result<(), String> {
        match action {
            "newSession" => self.new_session().await.map(drop),
            "reload" => {
                self.reload().await;
                Ok(())
            }
            "fork" => {
                let entry = args["entryId"]
                    .as_str()
                    .ok_or("ctx.fork: entryId is required")?;
                let position = match args["position"].as_str() {
                    Some("at") => ForkPosition::At,
                    _ => ForkPosition::Before,
                };
                self.fork(entry, position).await.map(drop)
            }
            "navigateTree" => self.navigate_as_asked(args).await.map(drop),
            "switchSession" => {
                let path =
                    self.sibling_session(args["sessionPath"].as_str().unwrap_or_default())?;
                self.switch_to(&path, true).await.map(drop)
            }
            other => Err(format!("unknown session action {other}")),
        }
    }

    /// A session action a running command of extension `owner` waits for (see
    /// [`CommandStep`]): carried out now, its events reaching every extension, the caller's own
    /// handlers too; what its promise resolves to (pi's RPC mode: `{cancelled}`), or the
    /// message it rejects with. `ctx.compact` from a command comes this way too: pi starts it
    /// at once, beside the command, which may then await its callbacks.
    ///
    /// [`CommandStep`]: pichamber_runtime::CommandStep
    pub(super) async fn awaited_action(
        &mut self,
        owner: usize,
        action: &str,
        args: &Value,
    ) -> Result<Value, String> {
        match action {
            "navigateTree" => {
                let outcome = self.navigate_as_asked(args).await?;
                Ok(json!({ "cancelled": outcome.cancelled }))
            }
            "compact" => {
                let reply_to = args["callback"].as_u64().map(|id| (owner, id));
                self.compact_for(args["customInstructions"].as_str(), reply_to)
                    .await;
                Ok(Value::Null)
            }
            other => Err(format!("ctx.{other} cannot be awaited here")),
        }
    }

    /// `ctx.navigateTree(targetId, options)` with the options as the extension gave them.
    async fn navigate_as_asked(&mut self, args: &Value) -> Result<TreeOutcome, String> {
        let target = args["targetId"]
            .as_str()
            .ok_or("ctx.navigateTree: targetId is required")?;
        let text = |key: &str| args[key].as_str().map(str::to_owned);
        self.navigate_tree(
            target,
            args["summarize"] == json!(true),
            text("label"),
            text("customInstructions"),
            args["replaceInstructions"].as_bool(),
        )
        .await
    }

    /// An extension may switch only to a session file in the current session's folder: any
    /// other path would let it read files it was never granted.
    fn sibling_session(&self, requested: &str) -> Result<std::path::PathBuf, String> {
        let state = self.shared.state.lock().unwrap();
        let dir = state
            .store
            .get_session_dir()
            .ok_or("ctx.switchSession: this session is not kept in a file")?;
        let name = Path::new(requested)
            .file_name()
            .ok_or("ctx.switchSession: sessionPath names no file")?;
        let candidate = dir.join(name);
        let inside = candidate
            .canonicalize()
            .ok()
            .zip(dir.canonicalize().ok())
            .is_some_and(|(c, d)| c.parent() == Some(d.as_path()));
        let same_folder = Path::new(requested).parent().is_none_or(|p| {
            p.as_os_str().is_empty() || p.canonicalize().ok() == dir.canonicalize().ok()
        });
        if !inside || !same_folder {
            return Err(format!(
                "ctx.switchSession: {} is not a session file in this session's folder",
                name.to_string_lossy()
            ));
        }
        Ok(candidate)
    }

    fn leaf_id(&self) -> Option<String> {
        let state = self.shared.state.lock().unwrap();
        state.store.get_leaf_id().map(str::to_owned)
    }

    /// pi's clone: a fork at the current leaf.
    pub async fn clone_session(&mut self) -> Result<bool, String> {
        let leaf = self
            .leaf_id()
            .ok_or("Cannot clone session: no current entry selected")?;
        Ok(self.fork(&leaf, ForkPosition::At).await?.cancelled)
    }

    /// Moves the leaf to `target_id` (pi's /tree). Extensions may cancel, supply the summary of
    /// the branch being left, or change the instructions and the label
    /// (`session_before_tree`). When `summarize` is set and no extension gave a summary, the
    /// session's model summarises the abandoned entries (see [`branch_summary`]); a summary is
    /// written as a `branch_summary` entry at the new position and takes the label, otherwise
    /// the label goes to the target. Cancelling the summary (the session's abort) cancels the
    /// navigation.
    pub async fn navigate_tree(
        &mut self,
        target_id: &str,
        summarize: bool,
        mut label: Option<String>,
        mut custom_instructions: Option<String>,
        mut replace_instructions: Option<bool>,
    ) -> Result<TreeOutcome, String> {
        let cancelled = TreeOutcome {
            cancelled: true,
            editor_text: None,
            summary_entry: None,
        };
        let old_leaf = self
            .shared
            .state
            .lock()
            .unwrap()
            .store
            .get_leaf_id()
            .map(str::to_owned);
        if old_leaf.as_deref() == Some(target_id) {
            return Ok(TreeOutcome {
                cancelled: false,
                editor_text: None,
                summary_entry: None,
            });
        }
        if summarize && self.model.is_none() {
            return Err(branch_summary::NO_MODEL.into());
        }
        let (target, collected) = {
            let state = self.shared.state.lock().unwrap();
            let target = state
                .store
                .get_entry(target_id)
                .cloned()
                .ok_or_else(|| format!("Entry {target_id} not found"))?;
            let collected =
                branch_summary::collect_entries(&state.store, old_leaf.as_deref(), target_id);
            (target, collected)
        };
        let mut extension_summary: Option<Value> = None;
        if self.has_handlers("session_before_tree") {
            // Options that were not given stay out of the event, as `undefined` does in pi.
            let mut preparation = json!({
                "targetId": target_id, "oldLeafId": old_leaf,
                "commonAncestorId": collected.common_ancestor_id,
                "entriesToSummarize": collected.entries, "userWantsSummary": summarize,
            });
            if let Some(c) = &custom_instructions {
                preparation["customInstructions"] = json!(c);
            }
            if let Some(r) = replace_instructions {
                preparation["replaceInstructions"] = json!(r);
            }
            if let Some(l) = &label {
                preparation["label"] = json!(l);
            }
            let result = self
                .emit(
                    "session_before_tree",
                    json!({ "type": "session_before_tree", "preparation": preparation }),
                )
                .await
                .unwrap_or(Value::Null);
            if result["cancel"] == json!(true) {
                return Ok(cancelled);
            }
            if summarize && js_truthy(&result["summary"]) {
                extension_summary = Some(result["summary"].clone());
            }
            // A key the handler returned overrides, even with null (pi: `!== undefined`).
            if let Some(c) = result.get("customInstructions") {
                custom_instructions = c.as_str().map(str::to_owned);
            }
            if let Some(r) = result.get("replaceInstructions") {
                replace_instructions = Some(js_truthy(r));
            }
            if let Some(l) = result.get("label") {
                label = l.as_str().map(str::to_owned);
            }
        }
        let from_extension = extension_summary.is_some();
        let (summary, details) = match &extension_summary {
            Some(given) => (
                given["summary"].as_str().map(str::to_owned),
                Some(given["details"].clone()).filter(|d| !d.is_null()),
            ),
            None if summarize && !collected.entries.is_empty() => {
                if self.model.is_none() {
                    return Err(branch_summary::NO_MODEL.into());
                }
                let context = self.shared.state.lock().unwrap().agent.messages.clone();
                let model = self.route(RouteReason::Direct, &context).await?.model;
                // Like pi's fresh AbortController: an abort of an earlier run does not count.
                self.shared.abort.send_replace(false);
                let options = BranchSummaryOptions {
                    custom_instructions,
                    replace_instructions: replace_instructions.unwrap_or(false),
                    reserve_tokens: branch_summary::DEFAULT_RESERVE_TOKENS,
                    pi: self.shared.pi,
                };
                let cancel = self.shared.abort.subscribe();
                match branch_summary::summarize_branch(&model, &collected.entries, options, cancel)
                    .await
                {
                    Ok(s) => {
                        let details = s.details();
                        (Some(s.summary), Some(details))
                    }
                    Err(e) if e.is::<branch_summary::Aborted>() => return Ok(cancelled),
                    Err(e) => return Err(e.to_string()),
                }
            }
            None => (None, None),
        };
        // pi tests both for truthiness: an empty summary or label counts as none.
        let summary = summary.filter(|s| !s.is_empty());
        let label = label.filter(|l| !l.is_empty());
        let (new_leaf, editor_text) = match (target["type"].as_str(), &target["message"]["role"]) {
            (Some("message"), role) if role == "user" => (
                target["parentId"].as_str().map(str::to_owned),
                Some(messages::user_text(&target["message"])),
            ),
            (Some("custom_message"), _) => (
                target["parentId"].as_str().map(str::to_owned),
                Some(messages::user_text(&target)),
            ),
            _ => (Some(target_id.to_owned()), None),
        };
        let summary_entry = {
            let mut state = self.shared.state.lock().unwrap();
            let store = &mut state.store;
            let summary_entry = match &summary {
                Some(text) => {
                    let entry = store
                        .branch_with_summary(
                            new_leaf.as_deref(),
                            text,
                            details,
                            Some(from_extension),
                        )
                        .map_err(|e| format!("{e:#}"))?;
                    if let (Some(label), Some(id)) = (&label, entry["id"].as_str()) {
                        store
                            .append_label_change(id, Some(label))
                            .map_err(|e| format!("{e:#}"))?;
                    }
                    Some(entry)
                }
                None => {
                    match &new_leaf {
                        Some(id) => store.branch(id).map_err(|e| format!("{e:#}"))?,
                        None => store.reset_leaf(),
                    }
                    if let Some(label) = &label {
                        store
                            .append_label_change(target_id, Some(label))
                            .map_err(|e| format!("{e:#}"))?;
                    }
                    None
                }
            };
            state.agent.messages = state.store.build_session_context().messages;
            summary_entry
        };
        let new_leaf_id = self.leaf_id();
        let mut event =
            json!({ "type": "session_tree", "newLeafId": new_leaf_id, "oldLeafId": old_leaf });
        if let Some(entry) = &summary_entry {
            event["summaryEntry"] = entry.clone();
            event["fromExtension"] = json!(from_extension);
        }
        let _ = self.emit("session_tree", event).await;
        Ok(TreeOutcome {
            cancelled: false,
            editor_text,
            summary_entry,
        })
    }

    /// Switches the model (`model_select`, recorded as a model_change entry).
    pub async fn set_model(&mut self, model: Selection, source: &str) -> Result<(), String> {
        let info = model.info();
        // pi 0.73.1's level for a model switch: coming from a model without thinking, the
        // default level ("medium"); otherwise the current one. pi 1.6.0's: the settings'
        // defaultThinkingLevel, else the current one. Clamped to the new model below.
        let target_level = {
            let state = self.shared.state.lock().unwrap();
            let default = state.settings["defaultThinkingLevel"].as_str();
            let reasons = state
                .model
                .as_ref()
                .is_some_and(|m| m["reasoning"] == json!(true));
            match default {
                Some(level) if self.shared.pi.is_1_6() => level.to_owned(),
                _ if self.shared.pi.is_1_6() || reasons => state.thinking_level.clone(),
                _ => "medium".to_owned(),
            }
        };
        let previous = {
            let mut state = self.shared.state.lock().unwrap();
            let previous = state.model.replace(info.clone());
            state.agent.context_window = info["contextWindow"].as_u64();
            state
                .store
                .append_model_change(
                    info["provider"].as_str().unwrap_or_default(),
                    info["id"].as_str().unwrap_or_default(),
                )
                .map_err(|e| format!("{e:#}"))?;
            previous
        };
        self.model = Some(model);
        self.change_thinking_level(&target_level).await?;
        let _ = self
            .emit(
                "model_select",
                json!({ "type": "model_select", "model": info, "previousModel": previous, "source": source }),
            )
            .await;
        Ok(())
    }

    /// Changes the thinking level (`thinking_level_select`, recorded as an entry).
    pub async fn change_thinking_level(&mut self, level: &str) -> Result<(), String> {
        let previous = self.shared.state.lock().unwrap().thinking_level.clone();
        self.set_thinking_level(level)?;
        let level = &self.shared.state.lock().unwrap().thinking_level.clone();
        if previous == *level {
            return Ok(());
        }
        self.shared
            .state
            .lock()
            .unwrap()
            .store
            .append_thinking_level_change(level)
            .map_err(|e| format!("{e:#}"))?;
        self.shared.emit(SessionEvent::Agent(
            json!({ "type": "thinking_level_changed", "level": level }),
        ));
        let _ = self
            .emit(
                "thinking_level_select",
                json!({ "type": "thinking_level_select", "level": level, "previousLevel": previous }),
            )
            .await;
        Ok(())
    }

    /// Names the session (a session_info entry; clients get `session_info_changed`).
    pub fn set_session_name(&mut self, name: &str) -> Result<(), String> {
        let name = name.trim();
        if name.is_empty() {
            return Err("Session name cannot be empty".into());
        }
        let entry = self
            .shared
            .state
            .lock()
            .unwrap()
            .store
            .append_session_info(name)
            .map_err(|e| format!("{e:#}"))?;
        self.shared.emit(SessionEvent::Entry { entry });
        self.shared.emit(SessionEvent::Agent(
            json!({ "type": "session_info_changed", "name": name }),
        ));
        Ok(())
    }

    /// The user's own shell command (`!cmd`; `!!cmd` keeps it out of the model's context).
    /// Extensions see `user_bash` first and may answer with a result of their own; otherwise
    /// bash runs in the workspace. The result is recorded as a bashExecution message.
    pub async fn user_bash(
        &mut self,
        command: &str,
        exclude_from_context: bool,
    ) -> Result<Value, String> {
        let mut result = Value::Null;
        if self.has_handlers("user_bash") {
            let answer = self
                .emit(
                    "user_bash",
                    json!({
                        "type": "user_bash", "command": command,
                        "excludeFromContext": exclude_from_context, "cwd": self.shared.cwd,
                    }),
                )
                .await
                .unwrap_or(Value::Null);
            if answer["result"].is_object() {
                result = answer["result"].clone();
            } else if !answer["operations"].is_null() {
                self.error(
                    RUNTIME,
                    "user_bash",
                    "user_bash handlers cannot return operations in pichamber (functions do not cross the sandbox); return a result instead",
                );
            }
        }
        if result.is_null() {
            return self.execute_bash(command, exclude_from_context).await;
        }
        self.record_bash(command, &result, exclude_from_context);
        Ok(result)
    }

    /// Runs a shell command for the user (pi's executeBash, RPC `bash`: no `user_bash`
    /// event) and records it as a bashExecution message.
    pub async fn execute_bash(
        &mut self,
        command: &str,
        exclude_from_context: bool,
    ) -> Result<Value, String> {
        let result = self.run_user_bash(command).await?;
        self.record_bash(command, &result, exclude_from_context);
        Ok(result)
    }

    fn record_bash(&mut self, command: &str, result: &Value, exclude_from_context: bool) {
        let mut message = json!({
            "role": "bashExecution", "command": command,
            "output": result["output"], "exitCode": result["exitCode"],
            "cancelled": result["cancelled"] == json!(true),
            "truncated": result["truncated"] == json!(true),
            "timestamp": now_ms(),
        });
        if exclude_from_context {
            message["excludeFromContext"] = json!(true);
        }
        let entry = {
            let mut state = self.shared.state.lock().unwrap();
            state.agent.messages.push(message.clone());
            state.store.append_message(message)
        };
        match entry {
            Ok(entry) => self.shared.emit(SessionEvent::Entry { entry }),
            Err(e) => self.error(RUNTIME, "session", format!("{e:#}")),
        }
    }

    /// Runs `bash -c` in the session directory, stdout and stderr in one stream as a terminal
    /// shows them. An abort kills it and keeps what it printed so far (pi's result shape:
    /// no exit code when cancelled).
    async fn run_user_bash(&mut self, command: &str) -> Result<Value, String> {
        use tokio::io::AsyncReadExt;
        self.shared.bash_abort.send_replace(false);
        let mut cancel = self.shared.bash_abort.subscribe();
        let (reader, writer) = std::io::pipe().map_err(|e| format!("cannot run bash: {e}"))?;
        let writer_err = writer
            .try_clone()
            .map_err(|e| format!("cannot run bash: {e}"))?;
        let mut child = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(command)
            .current_dir(&self.shared.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(writer_err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot run bash: {e}"))?;
        let mut output = tokio::net::unix::pipe::Receiver::from_owned_fd(reader.into())
            .map_err(|e| format!("cannot read bash's output: {e}"))?;
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 8192];
        let cancelled = loop {
            tokio::select! {
                read = output.read(&mut chunk) => match read {
                    Ok(0) | Err(_) => break false,
                    Ok(n) => {
                        bytes.extend_from_slice(&chunk[..n]);
                        // Keep the tail: pi shows the last 50 KB of a long output.
                        if bytes.len() > 2 * MAX_BASH_OUTPUT {
                            bytes.drain(..bytes.len() - MAX_BASH_OUTPUT);
                        }
                    }
                },
                _ = pichamber_model::cancelled(&mut cancel) => break true,
            }
        };
        let exit_code = if cancelled {
            let _ = child.kill().await;
            None
        } else {
            child.wait().await.map_err(|e| format!("bash: {e}"))?.code()
        };
        let mut text = String::from_utf8_lossy(&bytes).into_owned();
        let truncated = text.len() > MAX_BASH_OUTPUT;
        if truncated {
            let mut cut = text.len() - MAX_BASH_OUTPUT;
            while !text.is_char_boundary(cut) {
                cut += 1;
            }
            text = text[cut..].to_owned();
        }
        let mut result = json!({ "output": text });
        if let Some(code) = exit_code {
            result["exitCode"] = json!(code);
        }
        result["cancelled"] = json!(cancelled);
        result["truncated"] = json!(truncated);
        Ok(result)
    }
}
