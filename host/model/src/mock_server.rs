//! A local OpenAI chat-completions endpoint that serves a [`Script`]: one turn per
//! `POST /v1/chat/completions`, streamed as real OpenAI streams (a role chunk, `delta`
//! chunks with `content`, `reasoning_content` and indexed `tool_calls` pieces, a chunk with
//! `finish_reason`, a usage chunk, then `data: [DONE]`). `GET /v1/models` lists the model.
//!
//! It records every request, so a test can point real pi (through a models.json custom
//! provider) and pichamber at the same script and compare what each sent.
//!
//! Failures are HTTP errors in OpenAI's shape: 401 for a wrong key (when a key is
//! required) and 400 when the script is exhausted (a status the SDK does not retry); an
//! `error` turn streams its content and then an `error` object; an `httpStatus` turn
//! answers with that status, its `headers` and an OpenAI error body.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};
use tokio::task::JoinHandle;

use super::scripted::{Script, Turn, delayed, exhausted_message, http_error_body, turn_chunks};

/// How the mock behaves besides its script.
#[derive(Debug, Clone)]
pub struct MockOptions {
    /// When set, requests must carry `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    /// The model `GET /v1/models` lists (chunks echo the requested model).
    pub model_id: String,
}

impl Default for MockOptions {
    fn default() -> Self {
        MockOptions {
            api_key: None,
            model_id: "mock-model".into(),
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Lower-case names; repeated headers joined with `", "`.
    pub headers: Map<String, Value>,
    /// The JSON body (a string when it was not JSON, null when empty).
    pub body: Value,
}

struct MockState {
    options: MockOptions,
    turns: Mutex<VecDeque<Turn>>,
    total: usize,
    calls: Mutex<usize>,
    requests: Mutex<Vec<RecordedRequest>>,
}

/// A running mock; it stops when dropped.
pub struct MockServer {
    pub addr: SocketAddr,
    state: Arc<MockState>,
    task: JoinHandle<()>,
}

impl MockServer {
    /// The base URL a client is configured with, `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The bodies of every chat-completions request, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.state
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.method == "POST")
            .map(|r| r.body.clone())
            .collect()
    }

    /// Every request with its method, path and headers.
    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.state.requests.lock().unwrap().clone()
    }

    pub fn turns_left(&self) -> usize {
        self.state.turns.lock().unwrap().len()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a mock on an ephemeral port of 127.0.0.1 with default options.
pub async fn start(script: Script) -> anyhow::Result<MockServer> {
    start_with(script, MockOptions::default()).await
}

pub async fn start_with(script: Script, options: MockOptions) -> anyhow::Result<MockServer> {
    let total = script.turns.len();
    let state = Arc::new(MockState {
        options,
        turns: Mutex::new(script.turns.into()),
        total,
        calls: Mutex::new(0),
        requests: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/v1/models", get(models))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    // Streamed chunks are small writes: without TCP_NODELAY one waits for the client's
    // delayed ACK (40 ms), which the agent-turn benchmark measured.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream| {
        let _ = stream.set_nodelay(true);
    });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!("mock model server stopped: {e}");
        }
    });
    Ok(MockServer { addr, state, task })
}

fn error_response(status: StatusCode, message: &str, kind: &str, code: Value) -> Response {
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": code}});
    (
        status,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn header_record(headers: &HeaderMap) -> Map<String, Value> {
    let mut out: Map<String, Value> = Map::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match out.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                out.insert(name.as_str().into(), Value::String(value));
            }
        }
    }
    out
}

fn record(state: &MockState, method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) {
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
    };
    state.requests.lock().unwrap().push(RecordedRequest {
        method: method.to_string(),
        path: uri.path().to_string(),
        headers: header_record(headers),
        body,
    });
}

fn authorized(state: &MockState, headers: &HeaderMap) -> bool {
    let Some(key) = &state.options.api_key else {
        return true;
    };
    let expected = format!("Bearer {key}");
    headers
        .get("authorization")
        .is_some_and(|v| v.as_bytes() == expected.as_bytes())
}

async fn models(
    State(state): State<Arc<MockState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    record(&state, &method, &uri, &headers, &[]);
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    let body = json!({"object": "list", "data": [{
        "id": state.options.model_id, "object": "model", "created": 0, "owned_by": "pichamber-mock",
    }]});
    ([("content-type", "application/json")], body.to_string()).into_response()
}

fn unauthorized() -> Response {
    error_response(
        StatusCode::UNAUTHORIZED,
        "Incorrect API key provided.",
        "invalid_request_error",
        json!("invalid_api_key"),
    )
}

async fn completions(
    State(state): State<Arc<MockState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&state, &method, &uri, &headers, &body);
    if !authorized(&state, &headers) {
        return unauthorized();
    }
    let call = {
        let mut calls = state.calls.lock().unwrap();
        *calls += 1;
        *calls
    };
    let Some(turn) = state.turns.lock().unwrap().pop_front() else {
        let message = exhausted_message(call, state.total);
        return error_response(
            StatusCode::BAD_REQUEST,
            &message,
            "invalid_request_error",
            Value::Null,
        );
    };
    if let Some(status) = turn.http_status {
        let mut response = Response::builder()
            .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
            .header("content-type", "application/json")
            .header("x-request-id", format!("req_mock_{call}"));
        for (name, value) in &turn.headers {
            response = response.header(name.as_str(), value.as_str());
        }
        return response
            .body(Body::from(http_error_body(&turn)))
            .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let model = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["model"].as_str().map(str::to_string))
        .unwrap_or_else(|| state.options.model_id.clone());
    let chunks = turn_chunks(&turn, call, &model);
    let ends_in_error = chunks.last().is_some_and(|c| !c["error"].is_null());
    let delay = Duration::from_millis(turn.delay_ms.unwrap_or(0));

    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(16);
    tokio::spawn(async move {
        for (index, chunk) in chunks.iter().enumerate() {
            if delayed(index) && !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            if tx
                .send(Ok(Bytes::from(format!("data: {chunk}\n\n"))))
                .await
                .is_err()
            {
                return;
            }
        }
        if !ends_in_error {
            let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
        .header("x-request-id", format!("req_mock_{call}"))
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
