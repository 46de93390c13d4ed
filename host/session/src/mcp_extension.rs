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

/// How long the first prompt waits for servers whose tools are declared to the model.
const STARTUP_WAIT: Duration = Duration::from_secs(10);
/// A request's limit when the config sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Past a day a request's limit is no limit; the cap keeps the deadline representable.
const LONGEST_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);
pub const SECTION: &str = "mcp_servers";
const MAX_SUMMARY_CHARS: usize = 250;
const MAX_SECTION_CHARS: usize = 4096;
pub const TOOL_SEARCH: &str = "tool_search";
const USAGE: &str =
    "Usage: /mcp, /mcp login [server], /mcp logout [server], /mcp reconnect [server]";

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
                .tool(TOOL_SEARCH)
                .is_some_and(|t| t.source == ToolSource::Host);
        if needs_search && has_search && !state.active_tools.iter().any(|t| t == TOOL_SEARCH) {
            state.active_tools.push(TOOL_SEARCH.into());
        }
        if has_search && state.active_tools.iter().any(|t| t == TOOL_SEARCH) {
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

    /// How `entry`'s server is reached: its process started (as the operator's, or as the
    /// registering extension's program) or its URL with resolved headers.
    async fn launch(&self, entry: &Entry, grants: Option<&Grants>) -> Result<Launch, String> {
        let cfg = &entry.config;
        let name = &entry.name;
        let timeout = cfg["timeout"]
            .as_f64()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .map_or(DEFAULT_TIMEOUT, |t| t.min(LONGEST_TIMEOUT));
        let cwd = PathBuf::from(&self.shared.cwd);
        // An extension's values come from its granted environment, never from a shell: an
        // operator's from the host's, as pi reads them.
        let granted = grants.map(Grants::env_pairs);
        let lookup = |var: &str| match &granted {
            Some(pairs) => pairs.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone()),
            None => std::env::var(var).ok(),
        };
        let resolve = |value: String, description: String| {
            let lookup = &lookup;
            async move {
                if grants.is_some() && value.starts_with('!') {
                    return Err(format!(
                        "{description}: a server an extension registers may not run a shell command (\"!...\") for a value"
                    ));
                }
                config::resolve_value(&value, &description, lookup).await
            }
        };
        let transport = if let Some(url) = cfg["url"].as_str() {
            if !cfg["auth"].is_null() {
                return Err(format!(
                    "pichamber does not send a provider's key to MCP servers (auth) yet; give \"{name}\" an Authorization header in mcp.json instead"
                ));
            }
            let mut headers = Vec::new();
            for (key, value) in cfg["headers"].as_object().into_iter().flatten() {
                let value = value.as_str().unwrap_or_default().to_owned();
                let description = format!("MCP server \"{name}\" header \"{key}\"");
                headers.push((key.clone(), resolve(value, description).await?));
            }
            let client = match grants {
                Some(grants) => {
                    Some(pichamber_access::net::pinned_client(grants, url, &mut headers).await?)
                }
                None => None,
            };
            Transport::Http {
                url: url.to_owned(),
                headers,
                client,
            }
        } else {
            let home = std::env::var("HOME").unwrap_or_default();
            let expand = |s: &str| -> String {
                if s == "~" {
                    home.clone()
                } else if let Some(rest) = s.strip_prefix("~/") {
                    format!("{home}/{rest}")
                } else {
                    s.to_owned()
                }
            };
            let command = expand(cfg["command"].as_str().unwrap_or_default());
            let args: Vec<String> = cfg["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(expand)
                .collect();
            let dir = cwd.join(expand(cfg["cwd"].as_str().unwrap_or(".")));
            let mut env = Vec::new();
            for (key, value) in cfg["env"].as_object().into_iter().flatten() {
                let value = value.as_str().unwrap_or_default().to_owned();
                let description = format!("MCP server \"{name}\" env \"{key}\"");
                env.push((key.clone(), resolve(value, description).await?));
            }
            let child = match grants {
                Some(grants) => grants.spawn_program(
                    &ProgramRequest {
                        command: command.clone(),
                        args,
                        cwd: Some(dir.display().to_string()),
                        timeout_ms: None,
                        env,
                    },
                    &self.shared.cwd,
                )?,
                None => operator_process(&command, &args, &dir, &env)?,
            };
            Transport::Stdio(child)
        };
        Ok(Launch {
            server: name.clone(),
            transport,
            timeout,
            cwd,
            log: Some(self.agent_dir.join("mcp.log")),
        })
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

    /// The enabled servers with resources whose exposure is not `hidden`, with their
    /// connections: what the resource tools reach.
    fn resource_servers(inner: &Inner) -> Vec<(String, Arc<Connection>)> {
        inner
            .servers
            .iter()
            .filter(|s| s.entry.enabled() && s.entry.exposure() != "hidden")
            .filter_map(|s| {
                let connection = s.connection.as_ref().filter(|c| c.has_resources)?;
                Some((s.entry.name.clone(), connection.clone()))
            })
            .collect()
    }

    /// Registers the resource tools with the widest exposure of the servers they reach
    /// (`direct`, then `codemode`, then `deferred`), hidden when none has resources, as pi
    /// does; tools that stop being direct stop being declared.
    fn sync_resource_tools(&self, inner: &mut Inner) {
        let exposures: Vec<String> = Self::resource_servers(inner)
            .iter()
            .filter_map(|(name, _)| inner.servers.iter().find(|s| s.entry.name == *name))
            .map(|s| s.entry.exposure().to_owned())
            .collect();
        let next = ["direct", "codemode", "deferred"]
            .into_iter()
            .find(|e| exposures.iter().any(|x| x == e))
            .map_or(Exposure::Hidden, |e| {
                if e == "direct" {
                    Exposure::Direct
                } else {
                    Exposure::Deferred
                }
            });
        let current = inner.resource_exposure;
        if current == Some(next) || (current.is_none() && next == Exposure::Hidden) {
            return;
        }
        inner.resource_exposure = Some(next);
        let mut state = self.shared.state.lock().unwrap();
        for tool in crate::mcp_resources::definitions(next) {
            state.register_tool(tool);
        }
        if current == Some(Exposure::Direct) {
            state
                .active_tools
                .retain(|t| !crate::mcp_resources::NAMES.contains(&t.as_str()));
        }
    }

    /// Runs one of the resource tools, once every server's connection attempt settled.
    pub async fn resource_tool(&self, tool: &str, args: &Value) -> Result<Value, String> {
        self.wait_for_all().await;
        let servers = Self::resource_servers(&self.inner.lock().unwrap());
        crate::mcp_resources::run(tool, args, servers).await
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
            state.register_tool(RegisteredTool {
                source: ToolSource::Host,
                extension_name: "builtin:mcp".into(),
                name,
                label: format!("{server}/{tool_name}"),
                description,
                parameters,
                prompt_snippet: None,
                prompt_guidelines: Vec::new(),
                has_prepare_arguments: false,
                execution_mode: None,
                constrained_sampling: None,
                exposure,
                default_active: None,
                namespace: Some(namespace.clone()),
                annotations: (!annotations.is_empty()).then_some(Value::Object(annotations)),
                validator: Default::default(),
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

    /// pi's `mcp_servers` prompt section: the enabled servers whose tools are not declared.
    pub fn servers_section(&self) -> Option<String> {
        let inner = self.inner.lock().unwrap();
        let mut listed: Vec<&Server> = inner
            .servers
            .iter()
            .filter(|s| {
                s.entry.enabled()
                    && s.entry
                        .configured_exposures()
                        .iter()
                        .any(|e| *e == "codemode" || *e == "deferred")
            })
            .collect();
        if listed.is_empty() {
            return None;
        }
        listed.sort_by(|a, b| a.entry.name.cmp(&b.entry.name));
        let reaches: Vec<&str> = listed
            .iter()
            .map(|s| {
                if s.entry.configured_exposures().contains(&"codemode") {
                    "codemode"
                } else {
                    "tool_search"
                }
            })
            .collect();
        let mut intro = "MCP servers whose tools are not declared to you.".to_owned();
        if reaches.contains(&"codemode") {
            intro.push_str(" Call the tools of `codemode` servers from codemode scripts.");
        }
        if reaches.contains(&"tool_search") {
            intro.push_str(" Load the tools of `tool_search` servers with `tool_search`.");
        }
        let heads: Vec<String> = listed
            .iter()
            .zip(&reaches)
            .map(|(s, r)| format!("- {} ({r})", config::namespace(&s.entry.name)))
            .collect();
        let omitted = |count: usize| -> Vec<String> {
            if count == 0 {
                Vec::new()
            } else {
                vec![format!(
                    "- … {count} more server{}; find their tools with searchTools()",
                    if count == 1 { "" } else { "s" }
                )]
            }
        };
        let size = |kept: usize| -> usize {
            let mut all = vec![intro.clone()];
            all.extend(heads[..kept].iter().cloned());
            all.extend(omitted(listed.len() - kept));
            all.join("\n").chars().count()
        };
        let mut kept = listed.len();
        while kept > 0 && size(kept) > MAX_SECTION_CHARS {
            kept -= 1;
        }
        let per_server = MAX_SECTION_CHARS
            .saturating_sub(size(kept))
            .checked_div(kept)
            .map_or(0, |each| each.saturating_sub(2).min(MAX_SUMMARY_CHARS));
        let mut lines = vec![intro.clone()];
        for (server, head) in listed.iter().zip(&heads).take(kept) {
            let summary = naming::server_summary(
                server.entry.config["description"].as_str(),
                server
                    .connection
                    .as_ref()
                    .and_then(|c| c.instructions.as_deref()),
            );
            let summary = truncate(&summary, per_server);
            lines.push(if summary.is_empty() {
                head.clone()
            } else {
                format!("{head}: {summary}")
            });
        }
        lines.extend(omitted(listed.len() - kept));
        Some(lines.join("\n"))
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

    /// pi's `/mcp` outside its terminal UI: the servers' status, or a subcommand.
    pub async fn command(&self, args: &str) {
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [] => {
                let mut started = self.started.clone();
                let _ = started.wait_for(|d| *d).await;
                let status = self.status();
                self.notify(status, "info");
            }
            ["reconnect", rest @ ..] if rest.len() <= 1 => {
                self.reconnect(rest.first().copied()).await
            }
            [action @ ("login" | "logout"), rest @ ..] if rest.len() <= 1 => {
                let none = "No enabled MCP server uses OAuth. Only HTTP servers without an Authorization header do.";
                let preferred = |s: &Server| s.state == Some(State::NeedsAuth);
                let eligible = |s: &Server| s.entry.enabled() && uses_oauth(&s.entry);
                let Some(chosen) = self
                    .pick(rest.first().copied(), eligible, preferred, none)
                    .await
                else {
                    return;
                };
                if *action == "logout" {
                    // pichamber keeps no OAuth credentials.
                    self.notify(
                        format!("No stored credentials for MCP server \"{chosen}\"."),
                        "info",
                    );
                } else {
                    self.notify(
                        format!(
                            "pichamber cannot sign in to MCP servers with OAuth yet: give \"{chosen}\" an Authorization header in mcp.json (\"headers\": {{\"Authorization\": \"Bearer ${{TOKEN}}\"}}), then /mcp reconnect {chosen}."
                        ),
                        "error",
                    );
                }
            }
            _ => self.notify(USAGE, "warning"),
        }
    }

    fn has_server(&self, name: &str) -> bool {
        self.inner
            .lock()
            .unwrap()
            .servers
            .iter()
            .any(|s| s.entry.name == name)
    }

    /// The server a subcommand is for, as pi picks it: the one named (if eligible), else the
    /// only eligible one, else the only preferred one, else the user's choice.
    async fn pick(
        &self,
        name: Option<&str>,
        eligible: impl Fn(&Server) -> bool,
        preferred: impl Fn(&Server) -> bool,
        none: &str,
    ) -> Option<String> {
        let (candidates, preferred) = {
            let inner = self.inner.lock().unwrap();
            let eligible: Vec<&Server> = inner.servers.iter().filter(|s| eligible(s)).collect();
            let names = |servers: Vec<&&Server>| -> Vec<String> {
                servers.iter().map(|s| s.entry.name.clone()).collect()
            };
            (
                names(eligible.iter().collect()),
                names(eligible.iter().filter(|s| preferred(s)).collect()),
            )
        };
        match name {
            Some(name) if !self.has_server(name) => {
                self.notify(format!("No MCP server named \"{name}\"."), "error");
                None
            }
            Some(name) if !candidates.iter().any(|c| c == name) => {
                self.notify(none, "error");
                None
            }
            Some(name) => Some(name.to_owned()),
            None if candidates.is_empty() => {
                self.notify(none, "info");
                None
            }
            None if candidates.len() == 1 => Some(candidates[0].clone()),
            None if preferred.len() == 1 => Some(preferred[0].clone()),
            None => self.select("MCP server", candidates).await,
        }
    }

    async fn reconnect(&self, name: Option<&str>) {
        let Some(chosen) = self
            .pick(
                name,
                |s| s.entry.enabled() && s.state.is_some(),
                |s| matches!(s.state, Some(State::Failed(_))),
                "No enabled MCP server to reconnect.",
            )
            .await
        else {
            return;
        };
        let mut ready = self.connect(&chosen);
        let _ = ready.wait_for(|d| *d).await;
        let line = self.status_line(&chosen);
        let state = self
            .inner
            .lock()
            .unwrap()
            .servers
            .iter()
            .find(|s| s.entry.name == chosen)
            .and_then(|s| s.state.clone());
        match state {
            Some(State::Failed(message)) => self.notify(
                format!("MCP server \"{chosen}\" failed to connect: {message}"),
                "error",
            ),
            _ => self.notify(
                format!(
                    "Reconnected to MCP server \"{chosen}\" ({}).",
                    line.unwrap_or_default()
                ),
                "info",
            ),
        }
    }

    async fn select(&self, title: &str, options: Vec<String>) -> Option<String> {
        if !self.shared.has_ui {
            return None;
        }
        let id = uuid::Uuid::new_v4().to_string();
        let request = UiRequest::Select {
            title: title.into(),
            options,
            timeout: None,
        };
        let answer = self.shared.dialogs.answer(&id, &request);
        self.shared.emit(SessionEvent::ExtensionUiRequest {
            id: id.clone(),
            request,
        });
        let answer = answer.await;
        self.shared.emit(SessionEvent::ExtensionUiResponse {
            id,
            answer: answer.clone(),
        });
        match answer {
            crate::events::DialogAnswer::Value { value } => Some(value),
            _ => None,
        }
    }

    /// pi's `describeState` of a server.
    fn status_line(&self, name: &str) -> Option<String> {
        let inner = self.inner.lock().unwrap();
        let server = inner.servers.iter().find(|s| s.entry.name == name)?;
        Some(match &server.state {
            _ if !server.entry.enabled() => "disabled".into(),
            Some(State::Connected) => format!("connected, {} tools", server.offered),
            Some(State::Connecting) => "connecting".into(),
            Some(State::Failed(_)) => "failed".into(),
            Some(State::NeedsAuth) => "needs sign-in".into(),
            None => "starting".into(),
        })
    }

    /// pi's plain `/mcp` status.
    fn status(&self) -> String {
        let inner = self.inner.lock().unwrap();
        if inner.servers.is_empty() && inner.errors.is_empty() && inner.overridden.is_empty() {
            return format!(
                "No MCP servers configured. Add them to {} or .pi/mcp.json.",
                self.agent_dir.join("mcp.json").display()
            );
        }
        let mut lines: Vec<String> = inner
            .servers
            .iter()
            .map(|server| {
                let name = &server.entry.name;
                let exposure = server.entry.exposure();
                if server.state == Some(State::NeedsAuth) {
                    return format!("{name}: needs sign-in, run /mcp login {name} ({exposure})");
                }
                let connected = server.state == Some(State::Connected);
                let tools = if connected {
                    format!(", {} tools", server.offered)
                } else {
                    String::new()
                };
                let state = match &server.state {
                    _ if !server.entry.enabled() => "disabled",
                    Some(State::Connected) => "connected",
                    Some(State::Connecting) => "connecting",
                    Some(State::Failed(_)) => "failed",
                    Some(State::NeedsAuth) => "needs sign-in",
                    None => "starting",
                };
                let error = match &server.state {
                    Some(State::Failed(message)) => {
                        format!(
                            "\n    {}",
                            message.split('\n').collect::<Vec<_>>().join("\n    ")
                        )
                    }
                    _ => String::new(),
                };
                format!("{name}: {state}{tools} ({exposure}){error}")
            })
            .collect();
        lines.extend(inner.errors.iter().map(|e| format!("config error: {e}")));
        lines.extend(inner.overridden.iter().map(|o| format!("overridden: {o}")));
        lines.join("\n")
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

/// Whether pi would sign in to the server with OAuth: an HTTP server with neither an
/// Authorization header nor a provider's key (`auth`).
fn uses_oauth(entry: &Entry) -> bool {
    let has_authorization = entry.config["headers"]
        .as_object()
        .is_some_and(|h| h.keys().any(|k| k.eq_ignore_ascii_case("authorization")));
    entry.config["url"].is_string() && entry.config["auth"].is_null() && !has_authorization
}

/// A server of the operator's mcp.json, started as pi starts it: the host's environment and
/// the config's, in its own process group, ended with the connection.
fn operator_process(
    command: &str,
    args: &[String],
    dir: &Path,
    env: &[(String, String)],
) -> Result<tokio::process::Child, String> {
    tokio::process::Command::new(command)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            // Node's words, which pi shows.
            std::io::ErrorKind::NotFound => format!("spawn {command} ENOENT"),
            std::io::ErrorKind::PermissionDenied => format!("spawn {command} EACCES"),
            _ => format!("spawn {command}: {e}"),
        })
}

/// At most `max` characters, ending in `…` when cut (pi's `truncate`).
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    if max <= 1 {
        return String::new();
    }
    let head: String = text.chars().take(max - 1).collect();
    format!("{}…", head.trim_end())
}
