//! Cluster mode on the HTTP side: a request for a session is answered by the node that runs
//! it: here, carried to its node, or here after this node started it (no node ran it, or its
//! node died and its lease lapsed). Without NATS nothing is written or served as current.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ApiError;
use crate::cluster::forward::{self, FORWARDED, NODE, Unreached};
use crate::hub::{Hub, Placement};

/// The largest request body carried to another node.
const MAX_CARRIED: usize = 4 << 20;

fn unavailable(message: impl Into<String>) -> Response {
    let mut response = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The session a path names (`/api/pi/sessions/{id}...`).
fn session_in(path: &str) -> Option<&str> {
    path.strip_prefix("/api/pi/sessions/")
        .and_then(|rest| rest.split('/').next())
        .filter(|id| !id.is_empty())
}

/// Returns once `node` no longer holds the session's lease.
async fn lease_lapsed(cluster: &crate::cluster::Cluster, id: &str, node: &str) {
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        match cluster.owner(id).await {
            Ok(Some((owner, _))) if owner == node => {}
            Ok(_) => return,
            Err(_) => {} // NATS itself: the request's own outcome tells
        }
    }
}

pub async fn route(State(hub): State<Arc<Hub>>, request: Request, next: Next) -> Response {
    let Some(cluster) = hub.cluster.clone() else {
        return next.run(request).await;
    };
    let path = request.uri().path().to_owned();
    let stored = path.starts_with("/api/pi/sessions") || path == "/api/pi/events";
    if stored && !cluster.connected() {
        return unavailable(
            "the cluster's store (NATS) is unreachable: nothing is written or served as current until it is back",
        );
    }
    let Some(id) = session_in(&path).map(str::to_owned) else {
        return next.run(request).await;
    };
    let user = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .and_then(|token| hub.user(token.trim()));
    let Some(user) = user else {
        return next.run(request).await; // the handler refuses it
    };
    let forwarded = request.headers().contains_key(FORWARDED);
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_CARRIED).await {
        Ok(body) => body,
        Err(_) => {
            return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large")
                .into_response();
        }
    };
    let local = |body: axum::body::Bytes| {
        let mut request = Request::new(Body::from(body));
        *request.method_mut() = parts.method.clone();
        *request.uri_mut() = parts.uri.clone();
        *request.headers_mut() = parts.headers.clone();
        // The matched route's path parameters live there.
        *request.extensions_mut() = parts.extensions.clone();
        request
    };
    // A dead node's lease lapses within the lease; then the session is claimed.
    let deadline = tokio::time::Instant::now() + cluster.lease + Duration::from_secs(3);
    loop {
        match hub.place(&user, &id, forwarded).await {
            Placement::Here => {
                let mut response = next.run(local(body)).await;
                if let Ok(node) = HeaderValue::from_str(&cluster.node) {
                    response.headers_mut().insert(NODE, node);
                }
                return response;
            }
            Placement::Unknown => return next.run(local(body)).await,
            Placement::Unavailable(why) => return unavailable(why),
            Placement::At(node) => {
                let uri = parts
                    .uri
                    .path_and_query()
                    .map_or(path.clone(), |p| p.to_string());
                let carried = forward::carry(
                    &cluster,
                    &node,
                    parts.method.as_str(),
                    &uri,
                    &parts.headers,
                    &body,
                );
                // A node that stopped answering without going away (frozen, partitioned)
                // loses its lease: then the session is placed again.
                let outcome = tokio::select! {
                    outcome = carried => Some(outcome),
                    () = lease_lapsed(&cluster, &id, &node) => None,
                };
                let Some(outcome) = outcome else {
                    tracing::info!("node {node} lost session {id} while a request waited for it");
                    continue;
                };
                match outcome {
                    Ok(response) => return response,
                    Err(Unreached::Gone) if tokio::time::Instant::now() < deadline => {
                        tracing::info!(
                            "node {node} is gone; session {id} moves when its lease lapses"
                        );
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    Err(Unreached::Gone) => {
                        return unavailable(format!(
                            "node {node}, which runs the session, is not answering; try again"
                        ));
                    }
                    Err(Unreached::Failed(e)) => {
                        return unavailable(format!("node {node} did not answer: {e}"));
                    }
                }
            }
        }
    }
}
