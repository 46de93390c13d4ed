//! Requests for a session another node runs, carried to that node over NATS request/reply
//! and answered there by the same router: one JSON line (method, path, the headers that
//! matter), then the body; the answer is one JSON line (status, headers), then the body.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Request, Response, StatusCode};
use futures::StreamExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::Cluster;

/// Set on a request carried from another node: it is answered here or refused, never
/// carried on (no request goes round the cluster).
pub const FORWARDED: &str = "x-pichamber-forwarded";
/// Which node answered a session's request.
pub const NODE: &str = "x-pichamber-node";
/// How many of the session's events a snapshot covers (`GET /api/pi/sessions/{id}`).
pub const EVENTS: &str = "x-pichamber-events";

/// Headers a carried request keeps, and those its answer keeps.
const REQUEST_HEADERS: &[&str] = &["authorization", "content-type", "last-event-id"];
const RESPONSE_HEADERS: &[&str] = &[
    "content-type",
    "content-disposition",
    "retry-after",
    NODE,
    EVENTS,
];
/// The longest a request may take on the other node (closing a session waits up to 30 s
/// for its extensions' session_shutdown).
const TIMEOUT: Duration = Duration::from_secs(35);
/// The largest body an answer carries.
const MAX_BODY: usize = 8 << 20;

fn subject(node: &str) -> String {
    format!("pichamber.node.{node}.http")
}

/// Why a request did not reach the node.
#[derive(Debug)]
pub enum Unreached {
    /// Nothing answers for that node: it is gone.
    Gone,
    /// Something else (a timeout, NATS itself).
    Failed(String),
}

fn frame(head: &Value, body: &[u8]) -> Bytes {
    let mut out = head.to_string().into_bytes();
    out.push(b'\n');
    out.extend_from_slice(body);
    out.into()
}

fn unframe(bytes: &[u8]) -> Option<(Value, &[u8])> {
    let end = bytes.iter().position(|&b| b == b'\n')?;
    Some((
        serde_json::from_slice(&bytes[..end]).ok()?,
        &bytes[end + 1..],
    ))
}

fn pick_headers(headers: &axum::http::HeaderMap, names: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for name in names {
        if let Some(value) = headers.get(*name).and_then(|v| v.to_str().ok()) {
            out.insert((*name).to_owned(), json!(value));
        }
    }
    Value::Object(out)
}

/// Carries a request to `node` and hands back its answer.
pub async fn carry(
    cluster: &Cluster,
    node: &str,
    method: &str,
    uri: &str,
    headers: &axum::http::HeaderMap,
    body: &[u8],
) -> Result<Response<Body>, Unreached> {
    let head = json!({
        "method": method,
        "uri": uri,
        "headers": pick_headers(headers, REQUEST_HEADERS),
        "from": cluster.node,
    });
    let request = async_nats::Request::new()
        .payload(frame(&head, body))
        .timeout(Some(TIMEOUT));
    let answer = match cluster.client.send_request(subject(node), request).await {
        Ok(answer) => answer,
        Err(e) if e.kind() == async_nats::client::RequestErrorKind::NoResponders => {
            return Err(Unreached::Gone);
        }
        Err(e) => return Err(Unreached::Failed(e.to_string())),
    };
    let (head, body) = unframe(&answer.payload)
        .ok_or_else(|| Unreached::Failed("the node's answer is malformed".into()))?;
    let status = head["status"]
        .as_u64()
        .and_then(|s| StatusCode::from_u16(s as u16).ok())
        .unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = Response::new(Body::from(body.to_vec()));
    *response.status_mut() = status;
    if let Some(headers) = head["headers"].as_object() {
        for (name, value) in headers {
            if let (Ok(name), Some(Ok(value))) = (
                axum::http::HeaderName::from_bytes(name.as_bytes()),
                value.as_str().map(HeaderValue::from_str),
            ) {
                response.headers_mut().insert(name, value);
            }
        }
    }
    Ok(response)
}

/// Answers the requests other nodes carry here, each on its own task.
pub(super) async fn answer(cluster: Arc<Cluster>) -> Result<()> {
    let mut requests = cluster
        .client
        .subscribe(subject(&cluster.node))
        .await
        .context("cannot subscribe to this node's requests")?;
    while let Some(message) = requests.next().await {
        let Some(reply) = message.reply.clone() else {
            continue;
        };
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let answer = match answer_one(&cluster, &message.payload).await {
                Ok(answer) => answer,
                Err(e) => frame(
                    &json!({ "status": 502, "headers": { "content-type": "application/json" } }),
                    json!({ "error": format!("the request could not be answered here: {e:#}") })
                        .to_string()
                        .as_bytes(),
                ),
            };
            let _ = cluster.client.publish(reply, answer).await;
        });
    }
    Ok(())
}

async fn answer_one(cluster: &Cluster, payload: &[u8]) -> Result<Bytes> {
    let (head, body) = unframe(payload).context("a malformed request")?;
    let router = cluster.router().context("the server is starting")?;
    let mut request = Request::builder()
        .method(head["method"].as_str().unwrap_or("GET"))
        .uri(head["uri"].as_str().unwrap_or("/"));
    if let Some(headers) = head["headers"].as_object() {
        for name in REQUEST_HEADERS {
            if let Some(value) = headers.get(*name).and_then(Value::as_str) {
                request = request.header(*name, value);
            }
        }
    }
    let request = request
        .header(FORWARDED, head["from"].as_str().unwrap_or("?"))
        .body(Body::from(body.to_vec()))?;
    let response = router.oneshot(request).await?;
    let status = response.status().as_u16();
    let headers = pick_headers(response.headers(), RESPONSE_HEADERS);
    let body = axum::body::to_bytes(response.into_body(), MAX_BODY).await?;
    Ok(frame(
        &json!({ "status": status, "headers": headers }),
        &body,
    ))
}
