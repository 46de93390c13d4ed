//! A client of a server-sent-events stream (`GET /api/pi/events`), for the server and cluster
//! tests.

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

/// One server-sent event.
#[derive(Debug, Clone)]
pub struct Sse {
    pub id: u64,
    pub name: String,
    pub data: Value,
}

pub struct Events {
    stream:
        std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<axum::body::Bytes>> + Send>>,
    buffer: String,
}

impl Events {
    /// Sends the request for a stream; it must be answered 200 with an event stream.
    pub async fn open(request: reqwest::RequestBuilder) -> Self {
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        Self {
            stream: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        }
    }

    pub async fn next(&mut self) -> Sse {
        // Keep-alive comments do not count: the event itself must come within 30 s.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut name, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    }
                }
                if name.is_empty() {
                    continue; // a keep-alive comment
                }
                return Sse {
                    id: id.expect("every event has an id"),
                    name,
                    data: serde_json::from_str(&data).unwrap(),
                };
            }
            let chunk = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .expect("an event within 30 s")
                .expect("the stream goes on")
                .unwrap();
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Reads until an event matches; returns it and what came before.
    pub async fn until(&mut self, what: &str, check: impl Fn(&Sse) -> bool) -> (Sse, Vec<Sse>) {
        let mut before = Vec::new();
        for _ in 0..5000 {
            let event = self.next().await;
            if check(&event) {
                return (event, before);
            }
            before.push(event);
        }
        panic!("no {what} in 5000 events");
    }
}
