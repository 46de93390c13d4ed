//! pi 1.6.0's built-in `mcp` extension, served by the host: at session start it connects the
//! servers of the agent's mcp.json, of a trusted project's `.pi/mcp.json` and those extensions
//! registered, registers their tools (`mcp__SERVER__TOOL`, with the config's exposure), says
//! once what needs attention, lists the servers whose tools are not declared in the
//! `mcp_servers` prompt section, and answers `/mcp`.
//!
//! Where a server's process runs is the capability question: the operator's files run their
//! servers as pi does, a server an extension registered runs as that extension's programs run
//! (its `--allow-run` grant, confined to its grants).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pichamber_access::{Grants, ProgramRequest};
use pichamber_mcp::client::{self, Connection, Failure, Launch, Transport};
use pichamber_mcp::config::{self, Entry, Scope};
use pichamber_mcp::naming;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::events::{SessionEvent, UiRequest};
use crate::state::{Exposure, RegisteredTool, SessionShared, ToolSource};

mod command;
mod launch;
pub mod resources;
mod section;

/// How long the first prompt waits for servers whose tools are declared to the model.
const STARTUP_WAIT: Duration = Duration::from_secs(10);
/// A request's limit when the config sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Past a day a request's limit is no limit; the cap keeps the deadline representable.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
/// The extension name of the tools it registers (pi's `sourceInfo.path` of its commands).
const BUILTIN: &str = "builtin:mcp";
/// The name of the prompt section that lists the servers whose tools are not declared.
pub const SECTION: &str = "mcp_servers";

/// A server an extension registered, with what its process may do.
pub struct Registered {
    pub name: String,
    pub config: Value,
    pub extension: usize,
    pub extension_path: String,
    pub grants: Arc<Grants>,
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    Connecting,
    Connected,
    Failed(String),
    NeedsAuth,
}

struct Server {
    entry: Entry,
    grants: Option<Arc<Grants>>,
    state: Option<State>,
    connection: Option<Arc<Connection>>,
    /// The pi names of its tools now registered.
    tools: Vec<String>,
    /// How many tools it offers.
    offered: usize,
    /// True once the latest connection attempt settled.
    ready: watch::Receiver<bool>,
}

impl Server {
    fn new(entry: Entry, grants: Option<Arc<Grants>>) -> Self {
        Self {
            entry,
            grants,
            state: None,
            connection: None,
            tools: Vec::new(),
            offered: 0,
            ready: watch::channel(true).1,
        }
    }
}

/// The registered servers the files leave in (a file's server of the same namespace wins, as
/// pi's `overridden` lines say), as servers.
fn admit_registered(files: &[Entry], registered: Vec<Registered>) -> (Vec<Server>, Vec<String>) {
    let mut overridden = Vec::new();
    let mut admitted = Vec::new();
    for r in registered {
        let ns = config::namespace(&r.name);
        if let Some(file) = files.iter().find(|e| config::namespace(&e.name) == ns) {
            overridden.push(format!(
                "\"{}\" registered by {} is overridden by \"{}\" in {}",
                r.name, r.extension_path, file.name, file.source
            ));
            continue;
        }
        let entry = Entry {
            name: r.name,
            config: r.config,
            scope: Scope::Extension(r.extension),
            source: r.extension_path,
        };
        admitted.push(Server::new(entry, Some(r.grants)));
    }
    (admitted, overridden)
}

struct Inner {
    servers: Vec<Server>,
    errors: Vec<String>,
    overridden: Vec<String>,
    waited_for_startup: bool,
    warned_unreachable: bool,
    /// The exposure the resource tools were last registered with (none until a server with
    /// resources connected).
    resource_exposure: Option<Exposure>,
    /// Whether pi's built-in tool-search extension is loaded.
    tool_search: bool,
    /// pi tool name to the `SERVER\0TOOL` it was given to, so names stay stable.
    owners: std::collections::HashMap<String, String>,
    closed: bool,
}

/// The built-in for one session.
#[derive(Clone)]
pub struct McpExtension {
    shared: Arc<SessionShared>,
    agent_dir: PathBuf,
    inner: Arc<Mutex<Inner>>,
    /// True once every startup connection settled.
    started: watch::Receiver<bool>,
}

impl McpExtension {
    /// Reads the configs and starts connecting every enabled server (in the background);
    /// `tool_search` says whether pi's built-in tool-search extension is loaded.
    pub fn start(
        shared: Arc<SessionShared>,
        agent_dir: PathBuf,
        registered: Vec<Registered>,
        tool_search: bool,
    ) -> Self {
        let project = shared.project_trusted.then(|| PathBuf::from(&shared.cwd));
        let loaded = config::load(&agent_dir, project.as_deref());
        let (registered, overridden) = admit_registered(&loaded.servers, registered);
        let servers = loaded
            .servers
            .into_iter()
            .map(|entry| Server::new(entry, None))
            .chain(registered)
            .collect();
        let (started_tx, started) = watch::channel(false);
        let this = Self {
            shared,
            agent_dir,
            inner: Arc::new(Mutex::new(Inner {
                servers,
                errors: loaded.errors,
                overridden,
                waited_for_startup: false,
                warned_unreachable: false,
                resource_exposure: None,
                tool_search,
                owners: Default::default(),
                closed: false,
            })),
            started,
        };
        this.ensure_discovery_active();
        let names: Vec<String> = this
            .inner
            .lock()
            .unwrap()
            .servers
            .iter()
            .filter(|s| s.entry.enabled())
            .map(|s| s.entry.name.clone())
            .collect();
        if names.is_empty() {
            this.report_problems(None);
            let _ = started_tx.send(true);
            return this;
        }
        let attempts: Vec<_> = names.iter().map(|n| this.connect(n)).collect();
        let reporter = this.clone();
        tokio::spawn(async move {
            for mut ready in attempts {
                let _ = ready.wait_for(|done| *done).await;
            }
            if !reporter.inner.lock().unwrap().closed {
                reporter.report_problems(None);
            }
            let _ = started_tx.send(true);
        });
        this
    }

    /// After `mcp_servers_change`: servers unregistered (or registered again with another
    /// config) disconnect and their tools become unreachable; new ones connect, and what
    /// needs attention among them is told.
    pub async fn sync(&self, registered: Vec<Registered>) {
        let (removed, added) = {
            let mut inner = self.inner.lock().unwrap();
            if inner.closed {
                return;
            }
            let files: Vec<Entry> = inner
                .servers
                .iter()
                .filter(|s| !matches!(s.entry.scope, Scope::Extension(_)))
                .map(|s| s.entry.clone())
                .collect();
            let (next, overridden) = admit_registered(&files, registered);
            inner.overridden = overridden;
            let stays = |s: &Server| {
                !matches!(s.entry.scope, Scope::Extension(_))
                    || next
                        .iter()
                        .any(|n| n.entry.name == s.entry.name && n.entry.config == s.entry.config)
            };
            let (kept, removed): (Vec<Server>, Vec<Server>) = std::mem::take(&mut inner.servers)
                .into_iter()
                .partition(stays);
            inner.servers = kept;
            self.sync_resource_tools(&mut inner);
            let added: Vec<String> = next
                .iter()
                .filter(|n| !inner.servers.iter().any(|s| s.entry.name == n.entry.name))
                .filter(|n| n.entry.enabled())
                .map(|n| n.entry.name.clone())
                .collect();
            for server in next {
                if !inner
                    .servers
                    .iter()
                    .any(|s| s.entry.name == server.entry.name)
                {
                    inner.servers.push(server);
                }
            }
            (removed, added)
        };
        {
            let mut state = self.shared.state.lock().unwrap();
            for name in removed.iter().flat_map(|s| &s.tools) {
                if let Some(tool) = state.tools.iter_mut().find(|t| t.name == *name) {
                    tool.exposure = Exposure::Hidden;
                }
                state.active_tools.retain(|t| t != name);
            }
        }
        self.ensure_discovery_active();
        for connection in removed.into_iter().filter_map(|s| s.connection) {
            if let Ok(connection) = Arc::try_unwrap(connection) {
                connection.close().await;
            }
        }
        if added.is_empty() {
            return;
        }
        let attempts: Vec<_> = added.iter().map(|n| self.connect(n)).collect();
        for mut ready in attempts {
            let _ = ready.wait_for(|done| *done).await;
        }
        if !self.inner.lock().unwrap().closed {
            self.report_problems(Some(&added));
        }
    }

    fn notify(&self, message: impl Into<String>, kind: &str) {
        if self.shared.has_ui {
            self.shared.emit(SessionEvent::ExtensionUiRequest {
                id: uuid::Uuid::new_v4().to_string(),
                request: UiRequest::Notify {
                    message: message.into(),
                    notify_type: Some(kind.into()),
                },
            });
        }
    }

    /// pi activates the tool that reaches the servers' tools: `codemode` for `codemode`
    /// exposure (unless mcp.json's `autoEnableCodemode` is false), `tool_search` for
    /// `deferred`; when neither is active it warns that the tools cannot be called.
    /// pichamber does not serve `codemode`, so `codemode` servers are reached only when
    /// `tool_search` is active.
    fn ensure_discovery_active(&self) {
        let (exposures, tool_search): (Vec<String>, bool) = {
            let inner = self.inner.lock().unwrap();
            (
                inner
                    .servers
                    .iter()
                    .filter(|s| s.entry.enabled())
                    .flat_map(|s| {
                        s.entry
                            .configured_exposures()
                            .into_iter()
                            .map(str::to_owned)
                    })
                    .collect(),
                inner.tool_search,
            )
        };
        let needs_codemode = exposures.iter().any(|e| e == "codemode");
        let needs_search = exposures.iter().any(|e| e == "deferred");
        if !needs_codemode && !needs_search {
            return;
        }
        let mut state = self.shared.state.lock().unwrap();
        let has_search = tool_search
            && state
                .tool(crate::tool_search::NAME)
                .is_some_and(|t| t.source == ToolSource::Host);
        if needs_search
            && has_search
            && !state
                .active_tools
                .iter()
                .any(|t| t == crate::tool_search::NAME)
        {
            state.active_tools.push(crate::tool_search::NAME.into());
        }
        if has_search
            && state
                .active_tools
                .iter()
                .any(|t| t == crate::tool_search::NAME)
        {
            return;
        }
        drop(state);
        let mut inner = self.inner.lock().unwrap();
        if std::mem::replace(&mut inner.warned_unreachable, true) {
            return;
        }
        drop(inner);
        self.notify(
            "MCP tools are only reachable from the codemode or tool_search tool, but neither is active; they cannot be called.",
            "warning",
        );
    }

    /// Starts (again) connecting `name`; the receiver turns true once the attempt settled.
    fn connect(&self, name: &str) -> watch::Receiver<bool> {
        let (tx, rx) = watch::channel(false);
        let (entry, grants, old) = {
            let mut inner = self.inner.lock().unwrap();
            let Some(server) = inner.servers.iter_mut().find(|s| s.entry.name == name) else {
                let _ = tx.send(true);
                return rx;
            };
            server.state = Some(State::Connecting);
            server.ready = rx.clone();
            (
                server.entry.clone(),
                server.grants.clone(),
                server.connection.take(),
            )
        };
        let this = self.clone();
        tokio::spawn(async move {
            if let Some(old) = old.and_then(|c| Arc::try_unwrap(c).ok()) {
                old.close().await;
            }
            let outcome = match this.launch(&entry, grants.as_deref()).await {
                Ok(launch) => client::connect(launch).await,
                Err(message) => Err(Failure::Failed(message)),
            };
            this.settle(&entry, outcome);
            let _ = tx.send(true);
        });
        rx
    }

    /// Records how a connection attempt ended, registering the server's tools.
    fn settle(&self, entry: &Entry, outcome: Result<Connection, Failure>) {
        let mut inner = self.inner.lock().unwrap();
        if inner.closed {
            return;
        }
        let Some(index) = inner
            .servers
            .iter()
            .position(|s| s.entry.name == entry.name)
        else {
            return;
        };
        match outcome {
            Ok(connection) => {
                let connection = Arc::new(connection);
                let offered = connection.tools.clone();
                let tools = self.register_tools(&mut inner, index, &connection, &offered);
                let server = &mut inner.servers[index];
                server.tools = tools;
                server.offered = offered.len();
                server.state = Some(State::Connected);
                server.connection = Some(connection.clone());
                self.sync_resource_tools(&mut inner);
                drop(inner);
                self.follow_tool_changes(&entry.name, connection);
            }
            Err(Failure::NeedsAuth) => inner.servers[index].state = Some(State::NeedsAuth),
            Err(Failure::Failed(message)) => {
                inner.servers[index].state = Some(State::Failed(message));
            }
        }
    }

    /// When the server says its tools changed, they are listed again and registered anew
    /// (those it withdrew become unreachable), as long as this connection is the server's.
    fn follow_tool_changes(&self, server: &str, connection: Arc<Connection>) {
        let this = self.clone();
        let server = server.to_owned();
        let changed = connection.tools_changed();
        let connection = Arc::downgrade(&connection);
        tokio::spawn(async move {
            loop {
                changed.notified().await;
                let Some(current) = connection.upgrade() else {
                    return;
                };
                let Ok(offered) = current.list_tools().await else {
                    continue;
                };
                let mut inner = this.inner.lock().unwrap();
                let Some(index) = inner.servers.iter().position(|s| {
                    s.entry.name == server
                        && s.connection
                            .as_ref()
                            .is_some_and(|c| Arc::ptr_eq(c, &current))
                }) else {
                    return;
                };
                let tools = this.register_tools(&mut inner, index, &current, &offered);
                inner.servers[index].tools = tools;
                inner.servers[index].offered = offered.len();
                this.sync_resource_tools(&mut inner);
            }
        });
    }

    /// Registers a connected server's tools as pi's MCP extension does; returns their names.
    fn register_tools(
        &self,
        inner: &mut Inner,
        index: usize,
        connection: &Connection,
        offered: &[Value],
    ) -> Vec<String> {
        let entry = inner.servers[index].entry.clone();
        let server = entry.name.as_str();
        let description = entry.config["description"]
            .as_str()
            .map(str::trim)
            .filter(|d| !d.is_empty());
        let mut namespace = json!({ "name": config::namespace(server), "aliases": [server] });
        if let Some(d) = description {
            namespace["description"] = json!(d);
        }
        if let Some(i) = &connection.instructions {
            namespace["instructions"] = json!(i);
        }
        let tool_names: Vec<&str> = offered.iter().filter_map(|t| t["name"].as_str()).collect();
        let plain: Vec<String> = tool_names
            .iter()
            .map(|t| naming::tool_name(server, t, |_| false))
            .collect();
        let mut current: Vec<String> = Vec::new();
        let mut state = self.shared.state.lock().unwrap();
        for tool in offered {
            let Some(tool_name) = tool["name"].as_str() else {
                continue;
            };
            let owner = format!("{server}\0{tool_name}");
            let name = naming::tool_name(server, tool_name, |candidate| {
                inner.owners.get(candidate).is_some_and(|o| *o != owner)
                    || current.iter().any(|c| c == candidate)
                    || plain.iter().filter(|p| *p == candidate).count() > 1
                    || state
                        .tool(candidate)
                        .is_some_and(|t| t.source != ToolSource::Host)
            });
            inner.owners.insert(name.clone(), owner);
            current.push(name.clone());
            let title = tool["title"]
                .as_str()
                .or(tool["annotations"]["title"].as_str());
            let description = tool["description"]
                .as_str()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .or(title)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("MCP tool {tool_name} from server {server}"));
            let mut parameters = match &tool["inputSchema"] {
                Value::Object(o) => Value::Object(o.clone()),
                _ => json!({}),
            };
            if parameters.get("type").is_none() {
                parameters["type"] = json!("object");
            }
            if parameters.get("properties").is_none() {
                parameters["properties"] = json!({});
            }
            let annotations: serde_json::Map<String, Value> = [
                "readOnlyHint",
                "destructiveHint",
                "idempotentHint",
                "openWorldHint",
            ]
            .iter()
            .filter_map(|h| {
                tool["annotations"][*h]
                    .as_bool()
                    .map(|b| (h.to_string(), json!(b)))
            })
            .collect();
            let exposure = match entry.tool_exposure(tool_name) {
                "direct" => Exposure::Direct,
                "hidden" => Exposure::Hidden,
                _ => Exposure::Deferred,
            };
            let label = format!("{server}/{tool_name}");
            state.register_tool(RegisteredTool {
                namespace: Some(namespace.clone()),
                annotations: (!annotations.is_empty()).then_some(Value::Object(annotations)),
                ..RegisteredTool::hosted(BUILTIN, name, label, description, parameters, exposure)
            });
        }
        // Tools the server no longer offers stay registered, unreachable.
        for gone in inner.servers[index]
            .tools
            .iter()
            .filter(|t| !current.contains(t))
        {
            if let Some(tool) = state.tools.iter_mut().find(|t| t.name == *gone) {
                tool.exposure = Exposure::Hidden;
            }
            state.active_tools.retain(|t| t != gone);
        }
        current
    }

    /// pi's one message, after startup, for every server that needs the user (or only for
    /// the servers named, which connected later).
    fn report_problems(&self, only: Option<&[String]>) {
        let lines: Vec<String> = {
            let inner = self.inner.lock().unwrap();
            let mut lines: Vec<String> = match only {
                Some(_) => Vec::new(),
                None => inner
                    .errors
                    .iter()
                    .map(|e| format!("config: {e}"))
                    .collect(),
            };
            let reported = |s: &&Server| only.is_none_or(|names| names.contains(&s.entry.name));
            for server in inner.servers.iter().filter(reported) {
                match &server.state {
                    Some(State::Failed(message)) => lines.push(format!(
                        "{}: failed: {}",
                        server.entry.name,
                        message.lines().next().unwrap_or_default()
                    )),
                    Some(State::NeedsAuth) => {
                        lines.push(format!("{}: needs sign-in", server.entry.name))
                    }
                    _ => {}
                }
            }
            lines
        };
        if !lines.is_empty() {
            let listed: Vec<String> = lines.iter().map(|l| format!("  {l}")).collect();
            self.notify(
                format!(
                    "MCP servers need attention:\n{}\nRun /mcp to fix.",
                    listed.join("\n")
                ),
                "warning",
            );
        }
    }

    /// The first prompt waits (once, at most 10 s) for the servers whose tools are declared.
    pub async fn wait_for_direct_servers(&self) {
        let waiting: Vec<watch::Receiver<bool>> = {
            let mut inner = self.inner.lock().unwrap();
            if inner.waited_for_startup {
                return;
            }
            inner.waited_for_startup = true;
            inner
                .servers
                .iter()
                .filter(|s| s.entry.enabled() && s.entry.configured_exposures().contains(&"direct"))
                .map(|s| s.ready.clone())
                .collect()
        };
        if waiting.is_empty() {
            return;
        }
        let all = futures::future::join_all(
            waiting
                .into_iter()
                .map(|mut r| async move { r.wait_for(|d| *d).await.map(drop) }),
        );
        if tokio::time::timeout(STARTUP_WAIT, all).await.is_err() {
            self.notify(
                "MCP servers are still connecting; their tools become available once connected.",
                "info",
            );
        }
    }

    /// Waits for the servers' latest connection attempts (`tool_search` reaches them all).
    pub async fn wait_for_all(&self) {
        let waiting: Vec<_> = {
            let inner = self.inner.lock().unwrap();
            inner
                .servers
                .iter()
                .filter(|s| s.entry.enabled())
                .map(|s| s.ready.clone())
                .collect()
        };
        for mut r in waiting {
            let _ = r.wait_for(|d| *d).await;
        }
    }

    /// The server a tool name belongs to, and whether an extension registered it.
    pub fn tool_server(&self, tool: &str) -> Option<(String, Scope)> {
        let inner = self.inner.lock().unwrap();
        let owner = inner.owners.get(tool)?;
        let server = owner.split('\0').next()?;
        let entry = &inner.servers.iter().find(|s| s.entry.name == server)?.entry;
        Some((entry.name.clone(), entry.scope.clone()))
    }

    /// Runs an MCP tool: the result pi's tool gives (an error result when the server said
    /// `isError`), or the error it throws.
    /// `on_update` gets each progress report as pi's partial result.
    pub async fn call(
        &self,
        tool: &str,
        args: Value,
        on_update: &(dyn Fn(Value) + Sync),
    ) -> Result<Value, String> {
        let error = Err;
        let Some(owner) = self.inner.lock().unwrap().owners.get(tool).cloned() else {
            return error(format!("Tool {tool} not found"));
        };
        let (server, mcp_tool) = owner.split_once('\0').unwrap_or((&owner, ""));
        let ready = {
            let inner = self.inner.lock().unwrap();
            inner
                .servers
                .iter()
                .find(|s| s.entry.name == server)
                .map(|s| s.ready.clone())
        };
        if let Some(mut ready) = ready {
            let _ = ready.wait_for(|d| *d).await;
        }
        let connection = {
            let inner = self.inner.lock().unwrap();
            let Some(current) = inner.servers.iter().find(|s| s.entry.name == server) else {
                return error(format!("MCP server \"{server}\" is disabled."));
            };
            if !current.entry.enabled() {
                return error(format!("MCP server \"{server}\" is disabled."));
            }
            let Some(connection) = current.connection.clone() else {
                return error(format!("MCP server \"{server}\" is still starting."));
            };
            if current.entry.tool_exposure(mcp_tool) == "hidden"
                || !current.tools.iter().any(|t| t == tool)
            {
                return error(format!(
                    "MCP tool \"{server}/{mcp_tool}\" is no longer available."
                ));
            }
            connection
        };
        let progress = |text: String| {
            on_update(json!({
                "content": [{ "type": "text", "text": text }],
                "details": { "server": server, "tool": mcp_tool },
            }))
        };
        let result = connection.call_tool(mcp_tool, args, &progress).await?;
        let readable = Self::resource_servers(&self.inner.lock().unwrap())
            .iter()
            .any(|(name, _)| name == server);
        Ok(pichamber_mcp::result::to_tool_result(
            server, mcp_tool, &result, readable,
        ))
    }

    /// Ends every connection (session shutdown, reload, switch).
    pub async fn close(&self) {
        let connections: Vec<Arc<Connection>> = {
            let mut inner = self.inner.lock().unwrap();
            inner.closed = true;
            inner
                .servers
                .iter_mut()
                .filter_map(|s| s.connection.take())
                .collect()
        };
        for connection in connections {
            if let Ok(connection) = Arc::try_unwrap(connection) {
                connection.close().await;
            }
        }
    }
}
