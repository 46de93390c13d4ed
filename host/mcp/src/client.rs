//! One connection to an MCP server (rmcp's client): the handshake and `tools/list` within the
//! server's timeout, tool calls, the tail of a stdio server's stderr for its failure message,
//! and `notifications/message` appended to the agent's `mcp.log` as pi appends them.

// Roots and log messages are deprecated by a protocol version newer than pi's (2025-11-25),
// which speaks them, as pichamber does.
#![allow(deprecated)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use rmcp::ServiceExt;
use rmcp::handler::client::progress::ProgressDispatcher;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientConfig, ClientRequest, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::{ErrorData, RoleClient};
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

/// How much of a stdio server's stderr is kept, and how much of it a failure message shows.
const STDERR_KEPT: usize = 64 * 1024;
const STDERR_SHOWN: usize = 2000;
/// The most tools one server may offer: past it the connection fails rather than flood the
/// session's tool list (and the model's prompt).
const MAX_TOOLS: usize = 1000;
/// How long a call that reported progress waits, after its answer, for reports still on
/// their way.
const PROGRESS_GRACE: Duration = Duration::from_millis(20);

/// How to reach a server.
pub enum Transport {
    /// A started server process (the caller decides how it runs: unconfined for the operator's
    /// servers, confined to an extension's grants for the servers it registers), with its
    /// stdin, stdout and stderr piped.
    Stdio(tokio::process::Child),
    /// Streamable HTTP.
    Http {
        url: String,
        headers: Vec<(String, String)>,
        /// The client to reach it with (an extension's, pinned to its grants); `None`: the
        /// host's own.
        client: Option<reqwest::Client>,
    },
}

pub struct Launch {
    pub server: String,
    pub transport: Transport,
    /// Each request's limit (pi: the config's `timeout` seconds, 60 by default).
    pub timeout: Duration,
    /// The session's folder: the one root the client names.
    pub cwd: PathBuf,
    /// Where the server's log messages go (pi: `AGENT_DIR/mcp.log`).
    pub log: Option<PathBuf>,
}

impl Drop for Connection {
    /// A server that leads its own process group (the operator's, started as pi starts them)
    /// takes the processes it started with it: the group gets SIGTERM, then the server itself
    /// SIGKILL (`kill_on_drop`).
    fn drop(&mut self) {
        let Some(pid) = self.child.as_ref().and_then(|c| c.id()) else {
            return;
        };
        let pid = pid as libc::pid_t;
        // SAFETY: getpgid(2) and kill(2) take plain integers. The child is not reaped yet
        // (only its handle, dropped after this, reaps it), so its pid names it.
        unsafe {
            if libc::getpgid(pid) == pid {
                libc::kill(-pid, libc::SIGTERM);
            }
        }
    }
}

/// What a server lists besides tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    Resources,
    Templates,
}

impl Listing {
    /// The listing's field in a result, and in pi's tool output.
    pub fn key(self) -> &'static str {
        match self {
            Listing::Resources => "resources",
            Listing::Templates => "resourceTemplates",
        }
    }
}

/// Why a connection did not open.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The server answered 401 and no credentials are configured.
    NeedsAuth,
    /// pi's message for it (a first line, then the end of the server's stderr).
    Failed(String),
}

/// An open connection.
pub struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// What `tools/list` returned, as the server sent each tool.
    pub tools: Vec<Value>,
    pub instructions: Option<String>,
    pub has_resources: bool,
    /// Whether the server said it has tools (`tools/list` is asked only then).
    offers_tools: bool,
    timeout: Duration,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Kept so the process ends with the connection (see `Drop`).
    child: Option<tokio::process::Child>,
}

#[derive(Clone)]
struct Handler {
    info: ClientConfig,
    /// Routes `notifications/progress` to the call that asked for it.
    progress: ProgressDispatcher,
    /// Told of `notifications/tools/list_changed`.
    tools_changed: Arc<tokio::sync::Notify>,
    cwd: PathBuf,
    server: String,
    log: Option<PathBuf>,
}

impl rmcp::ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let name = self
            .cwd
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let roots =
            json!({ "roots": [{ "uri": format!("file://{}", self.cwd.display()), "name": name }] });
        serde_json::from_value(roots).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.handle_notification(params).await;
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Some(path) = &self.log {
            append_log(path, &self.server, &params);
        }
    }
}

/// pi's `mcp.log` line: `TIME [SERVER] LEVEL LOGGER: MESSAGE`, the file moved to `.1` past 5 MB.
fn append_log(path: &PathBuf, server: &str, params: &LoggingMessageNotificationParam) {
    use std::io::Write;
    if std::fs::metadata(path).is_ok_and(|m| m.len() > 5 * 1024 * 1024) {
        let _ = std::fs::rename(path, path.with_extension("log.1"));
    }
    let level = serde_json::to_value(params.level)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let message = match &params.data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let logger = params
        .logger
        .as_deref()
        .map(|l| format!(" {l}"))
        .unwrap_or_default();
    let time = humantime::format_rfc3339_millis(std::time::SystemTime::now());
    let line = format!("{time} [{server}] {level}{logger}: {message}\n");
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}

fn client_info() -> ClientConfig {
    serde_json::from_value(json!({
        "protocolVersion": "2025-11-25",
        "capabilities": { "roots": {} },
        "clientInfo": { "name": "pichamber", "version": env!("CARGO_PKG_VERSION") },
    }))
    .expect("a valid initialize request")
}

/// Opens a connection: the handshake, then the server's tools when it offers tools.
pub async fn connect(launch: Launch) -> Result<Connection, Failure> {
    let handler = Handler {
        info: client_info(),
        progress: ProgressDispatcher::new(),
        tools_changed: Default::default(),
        cwd: launch.cwd.clone(),
        server: launch.server.clone(),
        log: launch.log.clone(),
    };
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let timeout = launch.timeout;
    let timed_out = || {
        Failure::Failed(format!(
            "MCP request timed out after {}ms",
            timeout.as_millis()
        ))
    };
    let (service, child) = match launch.transport {
        Transport::Stdio(mut child) => {
            if let Some(mut err) = child.stderr.take() {
                let kept = stderr.clone();
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = err.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let mut kept = kept.lock().unwrap();
                        kept.extend_from_slice(&buf[..n]);
                        let excess = kept.len().saturating_sub(STDERR_KEPT);
                        kept.drain(..excess);
                    }
                });
            }
            let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
                return Err(Failure::Failed("MCP server has no stdio pipes".into()));
            };
            let served = tokio::time::timeout(timeout, handler.serve((stdout, stdin))).await;
            match served {
                Ok(Ok(service)) => (service, Some(child)),
                Ok(Err(e)) => {
                    // Let the stderr reader catch what the server said before it went.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    return Err(Failure::Failed(with_stderr(&handshake_error(&e), &stderr)));
                }
                Err(_) => return Err(timed_out()),
            }
        }
        Transport::Http {
            url,
            headers,
            client,
        } => {
            use rmcp::transport::StreamableHttpClientTransport;
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let authorized = headers
                .iter()
                .any(|(name, _)| name.eq_ignore_ascii_case("authorization"));
            let mut config = StreamableHttpClientTransportConfig::with_uri(url);
            for (name, value) in headers {
                let (Ok(name), Ok(value)) = (
                    reqwest::header::HeaderName::try_from(name.as_str()),
                    reqwest::header::HeaderValue::try_from(value.as_str()),
                ) else {
                    return Err(Failure::Failed(format!(
                        "MCP server header \"{name}\" is not a valid HTTP header"
                    )));
                };
                config.custom_headers.insert(name, value);
            }
            let transport =
                StreamableHttpClientTransport::with_client(client.unwrap_or_default(), config);
            match tokio::time::timeout(timeout, handler.serve(transport)).await {
                Ok(Ok(service)) => (service, None),
                // A 401: pi signs in when no Authorization header was configured, and says
                // the server wants authentication when one was.
                Ok(Err(e)) if e.to_string().contains("Auth required") => {
                    return Err(if authorized {
                        Failure::Failed("MCP server requires authentication".into())
                    } else {
                        Failure::NeedsAuth
                    });
                }
                Ok(Err(e)) => return Err(Failure::Failed(handshake_error(&e))),
                Err(_) => return Err(timed_out()),
            }
        }
    };
    let info = service.peer().peer_info();
    let capabilities = info
        .as_ref()
        .and_then(|i| serde_json::to_value(&i.capabilities).ok())
        .unwrap_or(Value::Null);
    let instructions = info
        .as_ref()
        .and_then(|i| i.instructions.clone())
        .map(|i| i.trim().to_owned())
        .filter(|i| !i.is_empty());
    let mut connection = Connection {
        service,
        tools: Vec::new(),
        offers_tools: capabilities.get("tools").is_some(),
        instructions,
        has_resources: capabilities.get("resources").is_some(),
        timeout,
        stderr,
        child,
    };
    connection.tools = connection.list_tools().await.map_err(Failure::Failed)?;
    Ok(connection)
}

/// pi's words for a handshake that failed.
fn handshake_error(e: &rmcp::service::ClientInitializeError) -> String {
    use rmcp::service::ClientInitializeError as E;
    match e {
        E::ConnectionClosed(_) => "MCP connection closed".into(),
        E::JsonRpcError(data) => data.message.to_string(),
        other => other.to_string(),
    }
}

/// pi's words for a progress notification.
fn progress_text(p: &ProgressNotificationParam) -> String {
    if let Some(message) = &p.message {
        return message.clone();
    }
    let number = |n: f64| {
        if n.fract() == 0.0 && n.abs() < 1e15 {
            format!("{}", n as i64)
        } else {
            n.to_string()
        }
    };
    match p.total {
        Some(total) => format!("Progress {}/{}", number(p.progress), number(total)),
        None => format!("Progress {}", number(p.progress)),
    }
}

fn with_stderr(message: &str, stderr: &Mutex<Vec<u8>>) -> String {
    let kept = stderr.lock().unwrap();
    let text = String::from_utf8_lossy(&kept);
    let text = text.trim_end();
    if text.is_empty() {
        return message.to_owned();
    }
    let start = text
        .char_indices()
        .rev()
        .nth(STDERR_SHOWN - 1)
        .map_or(0, |(i, _)| i);
    format!("{message}\n{}", &text[start..])
}

impl Connection {
    /// `tools/call`: the server's `CallToolResult` as it sent it, or why there is none. Each
    /// progress notification goes to `on_progress` as pi words it (its message, else
    /// `Progress N[/TOTAL]`) and restarts the timeout; a call that times out is cancelled.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
        on_progress: &(dyn Fn(String) + Sync),
    ) -> Result<Value, String> {
        let arguments = match arguments {
            Value::Object(map) => map,
            _ => Default::default(),
        };
        let params: CallToolRequestParams =
            serde_json::from_value(json!({ "name": tool, "arguments": arguments }))
                .map_err(|e| e.to_string())?;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let options = PeerRequestOptions::with_timeout(self.timeout).reset_timeout_on_progress();
        let handle = self
            .service
            .peer()
            .send_request_with_option(request, options)
            .await
            .map_err(|e| self.service_error(e))?;
        let mut progress = self
            .service
            .service()
            .progress
            .subscribe(handle.progress_token.clone())
            .await;
        let response = handle.await_response();
        tokio::pin!(response);
        let mut reported = false;
        let result = loop {
            tokio::select! {
                biased;
                Some(p) = progress.next() => {
                    reported = true;
                    on_progress(progress_text(&p));
                }
                result = &mut response => break result,
            }
        };
        // rmcp hands notifications to tasks of their own, so reports a server sent just
        // before its answer may arrive after it: a server that reports progress gets a
        // moment for the rest.
        if reported {
            while let Ok(Some(p)) = tokio::time::timeout(PROGRESS_GRACE, progress.next()).await {
                on_progress(progress_text(&p));
            }
        }
        match result {
            Ok(ServerResult::CallToolResult(result)) => {
                serde_json::to_value(result).map_err(|e| e.to_string())
            }
            Ok(_) => Err("MCP server answered tools/call with something else".into()),
            Err(e) => Err(self.service_error(e)),
        }
    }

    fn service_error(&self, e: rmcp::ServiceError) -> String {
        match e {
            rmcp::ServiceError::McpError(data) => data.message.to_string(),
            rmcp::ServiceError::Timeout { timeout } => {
                format!("MCP request timed out after {}ms", timeout.as_millis())
            }
            e if self.is_closed() => with_stderr(&format!("Connection closed ({e})"), &self.stderr),
            e => e.to_string(),
        }
    }

    /// `tools/list`, every page, within the server's timeout; at most [`MAX_TOOLS`] tools.
    pub async fn list_tools(&self) -> Result<Vec<Value>, String> {
        if !self.offers_tools {
            return Ok(Vec::new());
        }
        let listed = tokio::time::timeout(self.timeout, self.service.peer().list_all_tools()).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => return Err(with_stderr(&e.to_string(), &self.stderr)),
            Err(_) => {
                return Err(format!(
                    "MCP request timed out after {}ms",
                    self.timeout.as_millis()
                ));
            }
        };
        if tools.len() > MAX_TOOLS {
            return Err(format!(
                "MCP server offers {} tools; pichamber takes at most {MAX_TOOLS} from one server",
                tools.len()
            ));
        }
        Ok(tools
            .into_iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .collect())
    }

    /// One page of the server's resources or resource templates (`kind`), from `cursor`: the
    /// items as it sent them and the next page's cursor.
    pub async fn list_page(
        &self,
        kind: Listing,
        cursor: Option<String>,
    ) -> Result<(Vec<Value>, Option<String>), String> {
        let params: Option<rmcp::model::PaginatedRequestParams> = cursor
            .map(|c| serde_json::from_value(json!({ "cursor": c })))
            .transpose()
            .map_err(|e| e.to_string())?;
        let peer = self.service.peer();
        let page = match kind {
            Listing::Resources => self
                .within_timeout(peer.list_resources(params))
                .await
                .and_then(|r| serde_json::to_value(r).map_err(|e| e.to_string())),
            Listing::Templates => self
                .within_timeout(peer.list_resource_templates(params))
                .await
                .and_then(|r| serde_json::to_value(r).map_err(|e| e.to_string())),
        }?;
        let items = page[kind.key()].as_array().cloned().unwrap_or_default();
        Ok((items, page["nextCursor"].as_str().map(str::to_owned)))
    }

    /// Every page of the server's resources or resource templates.
    pub async fn list_all(&self, kind: Listing) -> Result<Vec<Value>, String> {
        let peer = self.service.peer();
        let items = match kind {
            Listing::Resources => self
                .within_timeout(peer.list_all_resources())
                .await
                .and_then(|r| serde_json::to_value(r).map_err(|e| e.to_string())),
            Listing::Templates => self
                .within_timeout(peer.list_all_resource_templates())
                .await
                .and_then(|r| serde_json::to_value(r).map_err(|e| e.to_string())),
        }?;
        Ok(items.as_array().cloned().unwrap_or_default())
    }

    /// `resources/read`: the contents the server sent.
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<Value>, String> {
        let params: rmcp::model::ReadResourceRequestParams =
            serde_json::from_value(json!({ "uri": uri })).map_err(|e| e.to_string())?;
        let result = self
            .within_timeout(self.service.peer().read_resource(params))
            .await?;
        let result = serde_json::to_value(result).map_err(|e| e.to_string())?;
        Ok(result["contents"].as_array().cloned().unwrap_or_default())
    }

    async fn within_timeout<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, rmcp::ServiceError>>,
    ) -> Result<T, String> {
        match tokio::time::timeout(self.timeout, request).await {
            Ok(result) => result.map_err(|e| self.service_error(e)),
            Err(_) => Err(format!(
                "MCP request timed out after {}ms",
                self.timeout.as_millis()
            )),
        }
    }

    /// Notified when the server says its tools changed.
    pub fn tools_changed(&self) -> Arc<tokio::sync::Notify> {
        self.service.service().tools_changed.clone()
    }

    /// Whether the server went away (a stdio server that exited, a dropped transport).
    pub fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }

    /// Ends the connection (the stdio server's process with it).
    pub async fn close(self) {
        self.service.cancellation_token().cancel();
        // The service ends its transport; the process goes when `self` drops.
        tokio::task::yield_now().await;
    }
}
