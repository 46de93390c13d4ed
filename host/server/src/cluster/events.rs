//! A user's event stream on any node: read from the user's subject of `PICHAMBER_EVENTS`,
//! whichever node ran the session. An event's id is its sequence on the stream, the same on
//! every node, so `Last-Event-ID` resumes anywhere while the stream still holds the events
//! after it (an hour); otherwise, or on a first connection, the client gets a snapshot of each
//! session first (asked of the node running it) and only the events the snapshot does not
//! already cover.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use anyhow::{Context, Result};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Request};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tower::ServiceExt;

use super::outlet::{EVENT_HEADER, NUMBER_HEADER, SESSION_HEADER, events_subject};
use super::{Cluster, EVENT_STREAM, user_key};
use crate::hub::sse_frame;

/// An SSE comment this often keeps an idle stream open through proxies.
const KEEP_ALIVE: std::time::Duration = std::time::Duration::from_secs(15);

/// The stream of `user`'s events for a client that last saw `last`, only of session `only`
/// when given. `authorization` is the client's own header: snapshots are asked for with it.
pub async fn open(
    cluster: &Arc<Cluster>,
    user: &str,
    authorization: &HeaderValue,
    last: Option<u64>,
    only: Option<String>,
) -> Result<impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static> {
    let context = "cannot read the event stream on NATS";
    let mut stream = cluster.js.get_stream(EVENT_STREAM).await.context(context)?;
    let state = stream.info().await.context(context)?.state.clone();
    let resume = last.filter(|l| *l <= state.last_sequence && l + 1 >= state.first_sequence);
    let start = resume.map_or(state.last_sequence + 1, |l| l + 1);
    let consumer = stream
        .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
            filter_subject: events_subject(&user_key(user)),
            deliver_policy: async_nats::jetstream::consumer::DeliverPolicy::ByStartSequence {
                start_sequence: start,
            },
            ..Default::default()
        })
        .await
        .context(context)?;
    let messages = consumer.messages().await.context(context)?;
    // Subscribed first, so nothing after the snapshots is missed.
    let mut initial = Vec::new();
    let mut cutoffs = HashMap::new();
    if resume.is_none() {
        for (id, _) in cluster.sessions_of(user).await? {
            if only.as_ref().is_some_and(|o| *o != id) {
                continue;
            }
            if let Some((snapshot, covered)) = snapshot(cluster, authorization, &id).await {
                cutoffs.insert(id.clone(), covered);
                initial.push(sse_frame(
                    state.last_sequence,
                    "session.snapshot",
                    &json!({ "sessionId": id, "snapshot": snapshot }).to_string(),
                ));
            }
        }
    }
    let wanted = move |message: &async_nats::jetstream::Message| -> Option<Bytes> {
        let headers = message.headers.as_ref()?;
        let session = headers.get(SESSION_HEADER)?.as_str();
        let number: u64 = headers.get(NUMBER_HEADER)?.as_str().parse().ok()?;
        let name = headers.get(EVENT_HEADER)?.as_str();
        if only.as_ref().is_some_and(|o| o != session)
            || cutoffs.get(session).is_some_and(|c| number <= *c)
        {
            return None;
        }
        let id = message.info().ok()?.stream_sequence;
        Some(sse_frame(
            id,
            name,
            std::str::from_utf8(&message.payload).ok()?,
        ))
    };
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    keep_alive.reset();
    let initial = futures::stream::iter(initial.into_iter().map(Ok));
    let live = futures::stream::unfold(
        (messages, keep_alive, wanted),
        |(mut messages, mut keep_alive, wanted)| async move {
            loop {
                let next = tokio::select! {
                    next = messages.next() => next,
                    _ = keep_alive.tick() => {
                        return Some((Ok(Bytes::from_static(b":\n\n")), (messages, keep_alive, wanted)));
                    }
                };
                match next {
                    Some(Ok(message)) => {
                        if let Some(frame) = wanted(&message) {
                            return Some((Ok(frame), (messages, keep_alive, wanted)));
                        }
                    }
                    // NATS went away: the client reconnects (to this node or another) and
                    // resumes from the last id it saw.
                    Some(Err(e)) => {
                        tracing::debug!("an event stream ends: {e}");
                        return None;
                    }
                    None => return None,
                }
            }
        },
    );
    Ok(initial.chain(live))
}

/// The session's snapshot and how many of its events it covers, asked of whichever node runs
/// it (through this node's router, which starts it here when no node does).
async fn snapshot(
    cluster: &Cluster,
    authorization: &HeaderValue,
    id: &str,
) -> Option<(Value, u64)> {
    let router = cluster.router()?;
    let request = Request::get(format!("/api/pi/sessions/{id}"))
        .header("authorization", authorization)
        .body(Body::empty())
        .ok()?;
    let response = router.oneshot(request).await.ok()?;
    if !response.status().is_success() {
        tracing::warn!(
            "no snapshot of session {id} for an event stream: {}",
            response.status()
        );
        return None;
    }
    let covered = response
        .headers()
        .get(super::forward::EVENTS)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let body = axum::body::to_bytes(response.into_body(), 64 << 20)
        .await
        .ok()?;
    let body: Value = serde_json::from_slice(&body).ok()?;
    Some((body["snapshot"].clone(), covered))
}
