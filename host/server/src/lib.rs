//! `pichamber serve --config FILE` and `pichamber run EXT` without headless flags: the GUI
//! protocol over HTTP (docs/GUI-API.md). axum routes over the session [`hub`] (one task per
//! session); every `/api/pi/*` route needs a bearer token; events go out as server-sent events;
//! [`config`] reads users, extensions, grants and policy, [`approval`] carries a user's answer to
//! a capability request.
//!
//! Nothing depends on it but the `pichamber` binary.

mod approval;
pub mod cluster;
pub mod config;
pub mod hub;
mod placement;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};
use axum::serve::ListenerExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use hub::{AnswerError, Hub, PromptError, Resume, SessionHandle, StreamEvent, User};

/// Every route the server answers, as the OpenAPI document names them (a test checks the
/// document against this list; the router is built from it).
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/pi/sessions"),
    ("POST", "/api/pi/sessions"),
    ("GET", "/api/pi/sessions/{id}"),
    ("DELETE", "/api/pi/sessions/{id}"),
    ("GET", "/api/pi/sessions/{id}/file"),
    ("POST", "/api/pi/sessions/{id}/prompt"),
    ("POST", "/api/pi/sessions/{id}/abort"),
    ("POST", "/api/pi/sessions/{id}/dialogs/{dialogId}"),
    ("POST", "/api/pi/sessions/{id}/apps/{appId}/command"),
    ("POST", "/api/pi/sessions/{id}/approvals/{extensionId}"),
    ("DELETE", "/api/pi/sessions/{id}/approvals/{extensionId}"),
    ("POST", "/api/pi/sessions/{id}/approvals/{extensionId}/ask"),
    ("GET", "/api/pi/sessions/{id}/extensions"),
    ("GET", "/api/pi/sessions/{id}/commands"),
    ("GET", "/api/pi/sessions/{id}/complete"),
    ("GET", "/api/pi/extensions"),
    ("DELETE", "/api/pi/extensions/{extensionId}/approvals"),
    ("GET", "/api/pi/ui-settings"),
    ("PUT", "/api/pi/ui-settings"),
    ("GET", "/api/pi/events"),
    ("GET", "/api/pi/openapi.json"),
    ("GET", "/"),
    ("GET", "/assets/{path}"),
];

/// The OpenAPI 3.1 document of these routes.
pub const OPENAPI: &str = include_str!("openapi.json");

fn handler(method: &str, path: &str) -> MethodRouter<Arc<Hub>> {
    match (method, path) {
        ("GET", "/api/pi/sessions") => get(list_sessions),
        ("POST", "/api/pi/sessions") => post(create_session),
        ("GET", "/api/pi/sessions/{id}") => get(get_session),
        ("DELETE", "/api/pi/sessions/{id}") => delete(delete_session),
        ("GET", "/api/pi/sessions/{id}/file") => get(session_file),
        ("POST", "/api/pi/sessions/{id}/prompt") => post(prompt),
        ("POST", "/api/pi/sessions/{id}/abort") => post(abort),
        ("POST", "/api/pi/sessions/{id}/dialogs/{dialogId}") => post(answer_dialog),
        ("POST", "/api/pi/sessions/{id}/apps/{appId}/command") => post(app_command),
        ("POST", "/api/pi/sessions/{id}/approvals/{extensionId}") => post(decide_approval),
        ("DELETE", "/api/pi/sessions/{id}/approvals/{extensionId}") => delete(revoke_approvals),
        ("POST", "/api/pi/sessions/{id}/approvals/{extensionId}/ask") => post(ask_again),
        ("GET", "/api/pi/sessions/{id}/extensions") => get(session_extensions),
        ("GET", "/api/pi/sessions/{id}/commands") => get(commands),
        ("GET", "/api/pi/sessions/{id}/complete") => get(complete),
        ("GET", "/api/pi/extensions") => get(extensions),
        ("DELETE", "/api/pi/extensions/{extensionId}/approvals") => delete(forget_approvals),
        ("GET", "/api/pi/ui-settings") => get(get_settings),
        ("PUT", "/api/pi/ui-settings") => put(put_settings),
        ("GET", "/api/pi/events") => get(events),
        ("GET", "/api/pi/openapi.json") => get(openapi),
        ("GET", "/") => get(index),
        ("GET", "/assets/{path}") => get(asset),
        _ => panic!("no handler for {method} {path}"),
    }
}

pub fn router(hub: Arc<Hub>) -> Router {
    let mut by_path: BTreeMap<&str, MethodRouter<Arc<Hub>>> = BTreeMap::new();
    for (method, path) in ROUTES {
        let route = handler(method, path);
        let merged = match by_path.remove(path) {
            Some(existing) => existing.merge(route),
            None => route,
        };
        by_path.insert(path, merged);
    }
    let mut router = Router::new();
    for (path, route) in by_path {
        let axum_path = path.replace("/assets/{path}", "/assets/{*path}");
        router = router.route(&axum_path, route);
    }
    router
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "no such route") })
        .layer(axum::middleware::from_fn_with_state(
            hub.clone(),
            placement::route,
        ))
        .with_state(hub)
}

/// Serves until the listener fails, or until Ctrl-C / SIGTERM: then every session's
/// extensions get session_shutdown before it returns (session files stay, for a restart).
pub async fn serve(hub: Arc<Hub>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
    // Events are small writes that must leave at once: without TCP_NODELAY, Nagle's
    // algorithm holds one back until the client's delayed ACK (40 ms on Linux).
    let listener = listener.tap_io(|stream| {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {e}");
        }
    });
    let router = router(hub.clone());
    if let Some(cluster) = &hub.cluster {
        cluster
            .serve_forwarded(router.clone())
            .map_err(std::io::Error::other)?;
        tokio::spawn(hub.clone().keep_leases());
        tokio::spawn(hub.clone().follow_approvals());
    }
    let server = axum::serve(listener, router);
    tokio::select! {
        served = server => served,
        () = stop_requested() => {
            eprintln!("pichamber: stopping; session_shutdown runs for every open session");
            let stopped = hub.stop_all().await;
            eprintln!("pichamber: stopped {stopped} session(s)");
            Ok(())
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn stop_requested() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

// ---------------------------------------------------------------------------------------------

pub struct ApiError {
    status: StatusCode,
    body: Value,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            body: json!({ "error": message.into() }),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

type ApiResult = Result<Response, ApiError>;

fn ok(status: StatusCode, body: Value) -> ApiResult {
    Ok((status, axum::Json(body)).into_response())
}

/// The user a request's bearer token belongs to.
pub struct Auth(Arc<User>);

impl FromRequestParts<Arc<Hub>> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, hub: &Arc<Hub>) -> Result<Self, ApiError> {
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "this needs Authorization: Bearer TOKEN",
            ));
        };
        hub.user(token)
            .map(Auth)
            .ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "unknown token"))
    }
}

fn body_json(body: &Bytes) -> Result<Value, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        )),
        Err(e) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("the body is not JSON: {e}"),
        )),
    }
}

/// The user's session; another user's answers exactly as an unknown one.
fn session_of(user: &User, id: &str) -> Result<Arc<SessionHandle>, ApiError> {
    user.session(id)
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no such session"))
}

async fn list_sessions(State(hub): State<Arc<Hub>>, Auth(user): Auth) -> ApiResult {
    let mut sessions: Vec<Value> = user.sessions().iter().map(|s| s.summary()).collect();
    if let Some(cluster) = &hub.cluster {
        // Those other nodes run, or none does yet, as their records say.
        let all = cluster
            .sessions_of(&user.name)
            .await
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("{e:#}")))?;
        for (id, meta) in all {
            if user.session(&id).is_none() {
                let mut summary = json!({
                    "id": id,
                    "createdAt": meta["createdAt"],
                    "busy": false,
                    "extensions": meta["extensions"],
                });
                for field in ["name", "title"] {
                    if let Some(text) = meta[field].as_str() {
                        summary[field] = json!(text);
                    }
                }
                sessions.push(summary);
            }
        }
        sessions.sort_by(|a, b| a["createdAt"].as_str().cmp(&b["createdAt"].as_str()));
    }
    ok(StatusCode::OK, json!({ "sessions": sessions }))
}

async fn create_session(State(hub): State<Arc<Hub>>, Auth(user): Auth, body: Bytes) -> ApiResult {
    let body = body_json(&body)?;
    let extensions = match body.get("extensions") {
        None => None,
        Some(Value::Array(ids)) => Some(
            ids.iter()
                .map(|id| id.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "\"extensions\" must be an array of ids",
                    )
                })?,
        ),
        // `null` included: leave the field out for the default.
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "\"extensions\" must be an array of ids (leave it out for all the extensions you may use)",
            ));
        }
    };
    let opened = match body.get("import") {
        None => hub.open_session(&user, extensions, None).await,
        Some(Value::String(records)) => {
            hub.import_session(&user, extensions, records.as_bytes())
                .await
        }
        Some(_) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "\"import\" must be the text of a pi session file (JSONL)",
            ));
        }
    };
    let handle = opened.map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e))?;
    ok(StatusCode::CREATED, handle.summary())
}

/// Cluster mode: waits until what the session made so far is stored on NATS, before a
/// response shows it.
async fn stored(handle: &SessionHandle) -> Result<(), ApiError> {
    match &handle.outlet {
        Some(outlet) => outlet.flushed().await.map_err(|e| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the session's state cannot be stored on NATS: {e}"),
            )
        }),
        None => Ok(()),
    }
}

/// The session as a pi session file (what `pichamber export` and pi itself read).
async fn session_file(Auth(user): Auth, Path(id): Path<String>) -> ApiResult {
    let handle = session_of(&user, &id)?;
    let jsonl = handle.jsonl();
    stored(&handle).await?;
    let mut response = jsonl.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jsonl; charset=utf-8"),
    );
    if let Ok(disposition) =
        HeaderValue::from_str(&format!("attachment; filename=\"{}.jsonl\"", handle.id))
    {
        headers.insert(header::CONTENT_DISPOSITION, disposition);
    }
    Ok(response)
}

async fn get_session(Auth(user): Auth, Path(id): Path<String>) -> ApiResult {
    let handle = session_of(&user, &id)?;
    let (snapshot, covered) = handle.snapshot_counted();
    stored(&handle).await?;
    let mut response = ok(
        StatusCode::OK,
        json!({
            "session": handle.summary(),
            "transcript": handle.transcript(),
            "notes": handle.notes(),
            "snapshot": snapshot,
        }),
    )?;
    if handle.outlet.is_some() {
        // Cluster mode: an event stream on another node skips the events it covers.
        response
            .headers_mut()
            .insert(cluster::forward::EVENTS, HeaderValue::from(covered));
    }
    Ok(response)
}

async fn delete_session(
    State(hub): State<Arc<Hub>>,
    Auth(user): Auth,
    Path(id): Path<String>,
) -> ApiResult {
    let handle = session_of(&user, &id)?;
    hub.close_session(&user, &handle).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn prompt(Auth(user): Auth, Path(id): Path<String>, body: Bytes) -> ApiResult {
    let handle = session_of(&user, &id)?;
    let body = body_json(&body)?;
    let Some(text) = body["text"].as_str() else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "a prompt needs \"text\"",
        ));
    };
    if text.trim().is_empty() {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the prompt is empty",
        ));
    }
    if text.chars().count() > pichamber_gui::limits::MESSAGE {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the prompt is too long",
        ));
    }
    let behavior = match body.get("streamingBehavior") {
        None => None,
        Some(Value::String(b)) if b == "steer" || b == "followUp" => Some(b.as_str()),
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "\"streamingBehavior\" is \"steer\" or \"followUp\"",
            ));
        }
    };
    send_prompt(&user, &handle, text, behavior)
}

fn send_prompt(
    user: &Arc<User>,
    handle: &SessionHandle,
    text: &str,
    behavior: Option<&str>,
) -> ApiResult {
    match handle.prompt(user, text, behavior) {
        Ok(()) => ok(StatusCode::ACCEPTED, json!({ "accepted": true })),
        Err(PromptError::Busy(e)) => Err(ApiError::new(StatusCode::CONFLICT, e)),
        Err(PromptError::Closed) => Err(ApiError::new(StatusCode::NOT_FOUND, "no such session")),
    }
}

async fn abort(Auth(user): Auth, Path(id): Path<String>) -> ApiResult {
    session_of(&user, &id)?.abort();
    ok(StatusCode::ACCEPTED, json!({ "accepted": true }))
}

async fn answer_dialog(
    Auth(user): Auth,
    Path((id, dialog)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let handle = session_of(&user, &id)?;
    let body = body_json(&body)?;
    match handle.dialogs.answer_with(&dialog, &body) {
        Ok(()) => ok(StatusCode::OK, json!({ "ok": true })),
        Err(AnswerError::NotPending) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no such dialog is pending",
        )),
        Err(AnswerError::Invalid(message, fields)) => {
            let mut body = json!({ "error": message });
            if let Some(fields) = fields {
                body["fields"] = Value::Object(fields);
            }
            Err(ApiError {
                status: StatusCode::BAD_REQUEST,
                body,
            })
        }
    }
}

/// The user answers an approval question (once, always or deny).
async fn decide_approval(
    State(hub): State<Arc<Hub>>,
    Auth(user): Auth,
    Path((id, extension)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    let handle = session_of(&user, &id)?;
    let body = body_json(&body)?;
    approval_answer(hub.decide(&user, &handle, &extension, &body).await)
}

/// The user takes back what they approved for an extension (this session's approvals and
/// the "always" ones of its build); it restarts with its configured grants.
async fn revoke_approvals(
    State(hub): State<Arc<Hub>>,
    Auth(user): Auth,
    Path((id, extension)): Path<(String, String)>,
) -> ApiResult {
    let handle = session_of(&user, &id)?;
    approval_answer(hub.revoke(&user, &handle, &extension).await)
}

/// The user asks to be asked again about what they denied an extension in this session.
async fn ask_again(
    State(hub): State<Arc<Hub>>,
    Auth(user): Auth,
    Path((id, extension)): Path<(String, String)>,
) -> ApiResult {
    let handle = session_of(&user, &id)?;
    approval_answer(hub.ask_again(&user, &handle, &extension))
}

/// What each extension of the session asked for and may do.
async fn session_extensions(Auth(user): Auth, Path(id): Path<String>) -> ApiResult {
    let handle = session_of(&user, &id)?;
    ok(
        StatusCode::OK,
        json!({ "extensions": handle.access_json() }),
    )
}

fn approval_answer(outcome: Result<Value, approval::ApprovalError>) -> ApiResult {
    use approval::ApprovalError;
    match outcome {
        Ok(answer) => ok(StatusCode::OK, answer),
        Err(ApprovalError::NotPending) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "no approval is pending for that extension in this session",
        )),
        Err(ApprovalError::UnknownExtension) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "that extension is not in this session",
        )),
        Err(ApprovalError::Nothing(why)) => Err(ApiError::new(StatusCode::CONFLICT, why)),
        Err(ApprovalError::Invalid(message)) => {
            Err(ApiError::new(StatusCode::BAD_REQUEST, message))
        }
        Err(ApprovalError::Failed(message)) => {
            Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message))
        }
    }
}

/// Forgets the user's "always" approvals for an extension (new sessions ask again).
async fn forget_approvals(
    State(hub): State<Arc<Hub>>,
    Auth(user): Auth,
    Path(extension): Path<String>,
) -> ApiResult {
    let hash = hub
        .launcher
        .catalog
        .iter()
        .find(|e| e.id == extension && user.allowed.contains(&e.id))
        .map(|e| e.artifact.manifest.source_hash.clone())
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "unknown extension"))?;
    let forgot = user
        .approvals
        .forget(&hash)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    hub.share_approvals(&user)
        .await
        .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e))?;
    ok(StatusCode::OK, json!({ "ok": true, "forgot": forgot }))
}

/// An app surface fires a command: its mount token is checked before anything else is
/// looked at, and nothing is sent when it is not this mount's.
async fn app_command(
    Auth(user): Auth,
    Path((id, app)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult {
    use sha2::Digest;
    let handle = session_of(&user, &id)?;
    let body = body_json(&body)?;
    let mount = handle
        .ui
        .lock()
        .unwrap()
        .app_mount(&app)
        .map(|(token, owner)| (token.to_owned(), owner.map(str::to_owned)));
    let Some((expected, owner)) = mount else {
        return Err(ApiError::new(StatusCode::NOT_FOUND, "no such app"));
    };
    let given = body["token"].as_str().unwrap_or_default();
    if sha2::Sha256::digest(given.as_bytes()) != sha2::Sha256::digest(expected.as_bytes()) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "the token is not this app mount's",
        ));
    }
    let command = body["command"].as_str().unwrap_or_default();
    if !pichamber_gui::is_command_name(command) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the command name must match [A-Za-z0-9][A-Za-z0-9:_-]{0,127}",
        ));
    }
    // An app fires only its own extension's commands: another's is as unknown to it as
    // one nobody registered.
    let command_owner = handle.command_owner(command);
    if command_owner.is_none() || command_owner != owner {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("/{command} is not a command of the extension that mounted this app"),
        ));
    }
    let args = match &body["args"] {
        Value::Null => String::new(),
        Value::String(s) if s.chars().count() <= pichamber_gui::limits::MESSAGE => s.clone(),
        _ => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "\"args\" must be a string",
            ));
        }
    };
    let line = if args.is_empty() {
        format!("/{command}")
    } else {
        format!("/{command} {args}")
    };
    send_prompt(&user, &handle, &line, None)
}

async fn commands(Auth(user): Auth, Path(id): Path<String>) -> ApiResult {
    let handle = session_of(&user, &id)?;
    ok(StatusCode::OK, json!({ "commands": handle.commands() }))
}

async fn complete(
    Auth(user): Auth,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let handle = session_of(&user, &id)?;
    let Some(command) = query.get("command") else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "needs ?command=NAME",
        ));
    };
    let command = command.strip_prefix('/').unwrap_or(command);
    if !handle.has_command(command) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("/{command} is not a registered command"),
        ));
    }
    let prefix = query.get("prefix").map(String::as_str).unwrap_or_default();
    match handle.complete(command, prefix).await {
        Ok(items) => ok(StatusCode::OK, json!({ "items": items })),
        Err(e) => Err(ApiError::new(StatusCode::BAD_REQUEST, e)),
    }
}

async fn extensions(State(hub): State<Arc<Hub>>, Auth(user): Auth) -> ApiResult {
    ok(
        StatusCode::OK,
        json!({ "extensions": hub.extension_infos(&user) }),
    )
}

async fn get_settings(Auth(user): Auth) -> ApiResult {
    ok(StatusCode::OK, user.settings())
}

async fn put_settings(Auth(user): Auth, body: Bytes) -> ApiResult {
    let body = body_json(&body)?;
    match user.set_settings(&body) {
        Ok(settings) => ok(StatusCode::OK, settings),
        Err(e) => Err(ApiError::new(StatusCode::BAD_REQUEST, e)),
    }
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

// ---------------------------------------------------------------------------------------------
// The event stream.

/// Bytes a stream writes at once when several events are ready (a slow client catching up
/// gets them in few writes, not one per event).
const STREAM_BATCH_BYTES: usize = 64 << 10;
/// An SSE comment the stream sends this often, so proxies keep an idle stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

struct Stream {
    initial: VecDeque<Bytes>,
    receiver: broadcast::Receiver<Arc<StreamEvent>>,
    /// Events up to this id were sent (or are covered) already.
    head: u64,
    /// Per session: events up to this id are in the snapshot sent for it.
    cutoffs: HashMap<String, u64>,
    user: Arc<User>,
    only: Option<String>,
}

impl Stream {
    fn snapshots(&mut self) {
        for handle in self.user.sessions() {
            if self.only.as_ref().is_some_and(|o| *o != handle.id) {
                continue;
            }
            let (snapshot, at) = handle.snapshot_at(&self.user);
            self.cutoffs.insert(handle.id.clone(), at);
            self.initial.push_back(hub::sse_frame(
                at,
                "session.snapshot",
                &json!({ "sessionId": handle.id, "snapshot": snapshot }).to_string(),
            ));
        }
    }

    fn wanted(&self, event: &StreamEvent) -> bool {
        event.id > self.head
            && self
                .cutoffs
                .get(&event.session)
                .is_none_or(|c| event.id > *c)
            && self.only.as_ref().is_none_or(|o| *o == event.session)
    }

    /// Starts over from fresh snapshots: too much was missed.
    fn lagged(&mut self) {
        self.cutoffs.clear();
        self.snapshots();
    }

    /// `first` and the events already waiting after it, as the frames to write at once (the
    /// shared frame itself when there is one); `None` when none is for this stream.
    fn batch(&mut self, first: Arc<StreamEvent>) -> Option<Bytes> {
        let mut frames: Vec<Bytes> = Vec::new();
        let mut bytes = 0;
        let mut next = Some(first);
        while let Some(event) = next.take() {
            if self.wanted(&event) {
                bytes += event.frame.len();
                frames.push(event.frame.clone());
            }
            if bytes >= STREAM_BATCH_BYTES {
                break;
            }
            next = match self.receiver.try_recv() {
                Ok(event) => Some(event),
                Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    self.lagged();
                    None
                }
                Err(_) => None,
            };
        }
        match frames.len() {
            0 => None,
            1 => frames.pop(),
            _ => Some(frames.concat().into()),
        }
    }
}

async fn events(
    State(hub): State<Arc<Hub>>,
    Auth(user): Auth,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let only = query.get("session").cloned();
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(cluster) = &hub.cluster {
        if let Some(id) = &only {
            let known = cluster
                .registered(&user.name, id)
                .await
                .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("{e:#}")))?;
            if known.is_none() {
                return Err(ApiError::new(StatusCode::NOT_FOUND, "no such session"));
            }
        }
        let authorization = headers
            .get(header::AUTHORIZATION)
            .cloned()
            .unwrap_or(HeaderValue::from_static(""));
        let body = cluster::events::open(cluster, &user.name, &authorization, last, only)
            .await
            .map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, format!("{e:#}")))?;
        return Ok(event_stream_response(axum::body::Body::from_stream(body)));
    }
    if let Some(id) = &only {
        session_of(&user, id)?;
    }
    let (receiver, head, resume) = user.connect(last);
    let mut stream = Stream {
        initial: VecDeque::new(),
        receiver,
        head,
        cutoffs: HashMap::new(),
        user,
        only,
    };
    match resume {
        Resume::Replay(missed) => {
            for event in missed {
                if stream.only.as_ref().is_none_or(|o| *o == event.session) {
                    stream.initial.push_back(event.frame.clone());
                }
            }
        }
        Resume::Snapshots => stream.snapshots(),
    }
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    keep_alive.reset();
    let body = futures::stream::unfold(
        (stream, keep_alive),
        |(mut stream, mut keep_alive)| async move {
            loop {
                if let Some(frame) = stream.initial.pop_front() {
                    return Some((Ok::<_, Infallible>(frame), (stream, keep_alive)));
                }
                let received = tokio::select! {
                    received = stream.receiver.recv() => received,
                    _ = keep_alive.tick() => {
                        return Some((Ok(Bytes::from_static(b":\n\n")), (stream, keep_alive)));
                    }
                };
                match received {
                    Ok(event) => {
                        if let Some(frames) = stream.batch(event) {
                            return Some((Ok(frames), (stream, keep_alive)));
                        }
                    }
                    // Fell behind: start over from fresh snapshots.
                    Err(broadcast::error::RecvError::Lagged(_)) => stream.lagged(),
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    );
    Ok(event_stream_response(axum::body::Body::from_stream(body)))
}

fn event_stream_response(body: axum::body::Body) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

// ---------------------------------------------------------------------------------------------
// The page: files of host/assets/web, embedded at build time.

include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

const PLACEHOLDER: &str = "<!doctype html><html><head><meta charset=\"utf-8\"><title>PiChamber</title></head>\
<body><h1>PiChamber</h1><p>The web page is not built into this binary yet. The API is at \
<code>/api/pi/</code> (see <a href=\"/api/pi/openapi.json\">openapi.json</a>).</p></body></html>";

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

fn page_file(path: &str, bytes: &'static [u8]) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type(path)),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        bytes,
    )
        .into_response()
}

fn web_asset(path: &str) -> Option<&'static [u8]> {
    WEB_ASSETS
        .iter()
        .find(|(name, _)| *name == path)
        .map(|(_, bytes)| *bytes)
}

async fn index() -> Response {
    match web_asset("index.html") {
        Some(bytes) => page_file("index.html", bytes),
        None => page_file("index.html", PLACEHOLDER.as_bytes()),
    }
}

async fn asset(Path(path): Path<String>) -> Response {
    let found = web_asset(&path)
        .map(|b| (path.clone(), b))
        .or_else(|| web_asset(&format!("assets/{path}")).map(|b| (path.clone(), b)));
    match found {
        Some((name, bytes)) => page_file(&name, bytes),
        None => ApiError::new(StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_openapi_document_lists_exactly_the_routes() {
        let doc: Value = serde_json::from_str(OPENAPI).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let mut documented = Vec::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                    documented.push((method.to_uppercase(), path.clone()));
                }
            }
        }
        let mut routes: Vec<(String, String)> = ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        documented.sort();
        routes.sort();
        assert_eq!(documented, routes);
        // The router is built from ROUTES: every entry has a handler.
        for (method, path) in ROUTES {
            let _ = handler(method, path);
        }
    }

    #[test]
    fn content_types_are_known() {
        assert_eq!(content_type("a/b.js"), "text/javascript; charset=utf-8");
        assert_eq!(content_type("x"), "application/octet-stream");
    }
}
