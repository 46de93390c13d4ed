//! OpenAI-compatible chat completions, as pi-ai's `openai-completions` provider speaks it:
//! the payload (`payload`), the request with the OpenAI SDK's retries, and the SSE stream
//! read into pi-ai events (`response`).
//!
//! Like pi (through the OpenAI SDK) a request is retried up to `max_retries` times (default
//! 2) on connection errors, timeouts and statuses 408, 409, 429 and 5xx, honouring
//! `retry-after(-ms)` and `x-should-retry`; errors read as the SDK words them (`"500 boom"`,
//! `"Connection error."`, `"Request timed out."`). The response status and headers are
//! reported only for a successful response, as pi's `onResponse` is.

mod compat;
pub(crate) mod payload;

pub use payload::js_stringify;
pub(crate) mod response;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

use super::assembler::Assembler;
use super::{
    LlmContext, PiVersion, StreamItem, StreamOptions, cancelled, is_cancelled, usage_value,
};

/// Per-million-token prices.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// One OpenAI-compatible model: pi-ai's `Model` fields plus how to reach it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    pub provider: String,
    pub model_id: String,
    /// Display name; pi defaults it to the id.
    pub name: String,
    /// Up to and including the version path, e.g. `http://localhost:11434/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>`; pi refuses to call a provider without one.
    pub api_key: Option<String>,
    /// The environment variables the key is read from (`--api-key-env`, a built-in
    /// provider's `OPENAI_API_KEY` ...), so a missing key can say which one to set.
    pub api_key_env: Vec<String>,
    /// Extra request headers (they override the defaults, `Authorization` included).
    pub headers: Vec<(String, String)>,
    pub reasoning: bool,
    /// pi thinking level → provider value (string) or unsupported (`null`).
    pub thinking_level_map: Map<String, Value>,
    /// `text`, and `image` for vision models.
    pub input: Vec<String>,
    pub cost: ModelCost,
    pub context_window: u64,
    pub max_tokens: u64,
    /// pi's `OpenAICompletionsCompat` overrides, as written in models.json.
    pub compat: Map<String, Value>,
    /// Retries after the first attempt (the OpenAI SDK's `maxRetries`, default 2).
    pub max_retries: u32,
    /// How long to wait for response headers (the SDK's `timeout`, default 10 minutes).
    pub timeout_ms: Option<u64>,
}

impl OpenAiConfig {
    /// A model with pi's defaults for a models.json entry that gives only an id.
    pub fn new(provider: &str, model_id: &str, base_url: &str) -> Self {
        OpenAiConfig {
            provider: provider.into(),
            model_id: model_id.into(),
            name: model_id.into(),
            base_url: base_url.into(),
            api_key: None,
            api_key_env: Vec::new(),
            headers: Vec::new(),
            reasoning: false,
            thinking_level_map: Map::new(),
            input: vec!["text".into()],
            cost: ModelCost::default(),
            context_window: 128_000,
            max_tokens: 16_384,
            compat: Map::new(),
            max_retries: 2,
            timeout_ms: Some(600_000),
        }
    }

    /// The pi-ai `Model` object.
    pub fn info(&self) -> Value {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.model_id));
        m.insert("name".into(), json!(self.name));
        m.insert("api".into(), json!("openai-completions"));
        m.insert("provider".into(), json!(self.provider));
        m.insert("baseUrl".into(), json!(self.base_url));
        m.insert("reasoning".into(), json!(self.reasoning));
        if !self.thinking_level_map.is_empty() {
            m.insert(
                "thinkingLevelMap".into(),
                Value::Object(self.thinking_level_map.clone()),
            );
        }
        m.insert("input".into(), json!(self.input));
        m.insert(
            "cost".into(),
            json!({
                "input": super::js_number(self.cost.input),
                "output": super::js_number(self.cost.output),
                "cacheRead": super::js_number(self.cost.cache_read),
                "cacheWrite": super::js_number(self.cost.cache_write),
            }),
        );
        m.insert("contextWindow".into(), json!(self.context_window));
        m.insert("maxTokens".into(), json!(self.max_tokens));
        if !self.compat.is_empty() {
            m.insert("compat".into(), Value::Object(self.compat.clone()));
        }
        Value::Object(m)
    }

    /// The request body pi would send (pi-ai's `buildParams`).
    pub fn build_payload(&self, ctx: &LlmContext, opts: &StreamOptions) -> Value {
        payload::build(self, ctx, opts)
    }

    pub(crate) fn zero_usage(&self) -> Value {
        usage_value(0, 0, 0, 0, &self.cost)
    }

    /// `baseUrl` + `/chat/completions`, as the SDK joins them.
    pub fn completions_url(&self) -> String {
        format!(
            "{}/chat/completions",
            self.base_url.strip_suffix('/').unwrap_or(&self.base_url)
        )
    }
}

/// An OpenAI-compatible endpoint; clones share the HTTP client.
#[derive(Debug, Clone)]
pub struct OpenAiModel {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: OpenAiConfig,
    http: reqwest::Client,
}

enum Failure {
    Aborted,
    Error(String),
}

impl OpenAiModel {
    pub fn new(config: OpenAiConfig) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| anyhow::anyhow!("cannot create the HTTP client: {e}"))?;
        Ok(OpenAiModel {
            inner: Arc::new(Inner { config, http }),
        })
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.inner.config
    }

    pub fn info(&self) -> Value {
        self.inner.config.info()
    }

    pub fn build_payload(&self, ctx: &LlmContext, opts: &StreamOptions) -> Value {
        self.inner.config.build_payload(ctx, opts)
    }

    /// Sends `payload` and streams the answer; see [`crate::ModelClient::stream`].
    pub async fn stream(
        &self,
        payload: Value,
        extra_headers: &[(String, String)],
        items: mpsc::UnboundedSender<StreamItem>,
        mut cancel: watch::Receiver<bool>,
        pi: PiVersion,
    ) -> Value {
        let config = &self.inner.config;
        let mut asm = Assembler::new(
            "openai-completions",
            &config.provider,
            &config.model_id,
            config.zero_usage(),
            items.clone(),
            pi,
        );
        let Some(key) = config.api_key.clone().filter(|k| !k.is_empty()) else {
            return asm.fail(
                false,
                format!("No API key for provider: {}", config.provider),
            );
        };
        let response = match self.send(&payload, &key, extra_headers, &mut cancel).await {
            Ok(r) => r,
            Err(Failure::Aborted) => return asm.fail(true, "Request was aborted.".into()),
            Err(Failure::Error(e)) => return asm.fail(is_cancelled(&cancel), e),
        };
        let _ = items.send(StreamItem::Response {
            status: response.status().as_u16(),
            headers: header_record(response.headers()),
        });
        asm.start();

        let mut events = response.bytes_stream().eventsource();
        let mut aborted = false;
        loop {
            let next = tokio::select! {
                biased;
                _ = cancelled(&mut cancel) => { aborted = true; break; }
                next = events.next() => next,
            };
            let event = match next {
                None => break,
                Some(Ok(event)) => event,
                Some(Err(e)) => return asm.fail(is_cancelled(&cancel), format!("{e}")),
            };
            if event.data.is_empty() {
                continue;
            }
            if event.data.starts_with("[DONE]") {
                break;
            }
            let chunk: Value = match serde_json::from_str(&event.data) {
                Ok(v) => v,
                Err(e) => {
                    let message = format!("Could not parse stream chunk as JSON: {e}");
                    return asm.fail(is_cancelled(&cancel), message);
                }
            };
            let _ = items.send(StreamItem::Provider(chunk.clone()));
            let error = &chunk["error"];
            if !error.is_null() && error != &json!(false) && error != &json!("") {
                let message = response::api_error_message(None, Some(error), None);
                return asm.fail(is_cancelled(&cancel), message);
            }
            response::apply_chunk(&mut asm, &chunk, &config.cost);
        }
        asm.end(aborted || is_cancelled(&cancel))
    }

    fn request_headers(&self, key: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("accept", HeaderValue::from_static("application/json"));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "user-agent",
            HeaderValue::from_static(concat!("pichamber/", env!("CARGO_PKG_VERSION"))),
        );
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {key}")) {
            headers.insert("authorization", v);
        }
        for (name, value) in &self.inner.config.headers {
            match (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                (Ok(n), Ok(v)) => {
                    headers.insert(n, v);
                }
                _ => tracing::warn!("skipping invalid model request header {name:?}"),
            }
        }
        headers
    }

    /// The request, retried as the OpenAI SDK retries it.
    async fn send(
        &self,
        payload: &Value,
        key: &str,
        extra_headers: &[(String, String)],
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<reqwest::Response, Failure> {
        let config = &self.inner.config;
        let body = serde_json::to_vec(payload).unwrap_or_default();
        let mut headers = self.request_headers(key);
        // An extension's headers never replace the provider's (its key, its configured ones).
        for (name, value) in extra_headers {
            match (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                (Ok(n), Ok(v)) if !headers.contains_key(&n) => {
                    headers.insert(n, v);
                }
                (Ok(_), Ok(_)) => {}
                _ => tracing::warn!("skipping invalid model request header {name:?}"),
            }
        }
        let url = config.completions_url();
        let mut retries_left = config.max_retries;
        loop {
            let request = self
                .inner
                .http
                .post(&url)
                .headers(headers.clone())
                .body(body.clone())
                .send();
            let timeout = config.timeout_ms.map(Duration::from_millis);
            let attempt = async {
                match timeout {
                    Some(t) => tokio::time::timeout(t, request).await.map_err(|_| true)?,
                    None => request.await,
                }
                .map_err(|_| false)
            };
            let outcome = tokio::select! {
                biased;
                _ = cancelled(cancel) => return Err(Failure::Aborted),
                outcome = attempt => outcome,
            };
            let retry_number = config.max_retries - retries_left;
            let (delay, failure) = match outcome {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if retries_left > 0 && should_retry(status, resp.headers()) {
                        (retry_delay(resp.headers(), retry_number), None)
                    } else {
                        let text = tokio::select! {
                            biased;
                            _ = cancelled(cancel) => return Err(Failure::Aborted),
                            text = resp.text() => text.unwrap_or_default(),
                        };
                        let message = response::http_error_message(status, &text);
                        (Duration::ZERO, Some(message))
                    }
                }
                Err(timed_out) => {
                    let message = if timed_out {
                        "Request timed out."
                    } else {
                        "Connection error."
                    };
                    if retries_left > 0 {
                        (retry_delay(&HeaderMap::new(), retry_number), None)
                    } else {
                        (Duration::ZERO, Some(message.to_string()))
                    }
                }
            };
            if let Some(message) = failure {
                return Err(Failure::Error(message));
            }
            retries_left -= 1;
            tokio::select! {
                biased;
                _ = cancelled(cancel) => return Err(Failure::Aborted),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

pub(crate) fn should_retry(status: u16, headers: &HeaderMap) -> bool {
    match headers.get("x-should-retry").and_then(|v| v.to_str().ok()) {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    matches!(status, 408 | 409 | 429) || status >= 500
}

/// The server's `retry-after-ms`/`retry-after` when under a minute, else exponential backoff
/// from half a second to eight with up to 25% jitter (the SDK's schedule).
pub(crate) fn retry_delay(headers: &HeaderMap, retry_number: u32) -> Duration {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let asked_ms = header("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .or_else(|| {
            header("retry-after").and_then(|v| v.trim().parse::<f64>().ok().map(|s| s * 1000.0))
        });
    if let Some(ms) = asked_ms.filter(|ms| (0.0..60_000.0).contains(ms) && *ms > 0.0) {
        return Duration::from_secs_f64(ms / 1000.0);
    }
    let seconds = (0.5 * 2f64.powi(retry_number as i32)).min(8.0);
    let random = (uuid::Uuid::new_v4().as_u128() % 10_000) as f64 / 10_000.0;
    Duration::from_secs_f64(seconds * (1.0 - random * 0.25))
}

/// Response headers as pi records them: lower-case names in sorted order, repeated headers
/// joined with `", "`.
fn header_record(headers: &HeaderMap) -> Map<String, Value> {
    let mut grouped: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        grouped
            .entry(name.as_str().to_string())
            .or_default()
            .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    grouped
        .into_iter()
        .map(|(k, v)| (k, Value::String(v.join(", "))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_joins_like_the_sdk() {
        let mut c = OpenAiConfig::new("p", "m", "http://h/v1");
        assert_eq!(c.completions_url(), "http://h/v1/chat/completions");
        c.base_url = "http://h/v1/".into();
        assert_eq!(c.completions_url(), "http://h/v1/chat/completions");
    }

    #[test]
    fn retry_rules() {
        let none = HeaderMap::new();
        assert!(should_retry(500, &none) && should_retry(429, &none) && should_retry(408, &none));
        assert!(!should_retry(400, &none) && !should_retry(401, &none));
        let mut no = HeaderMap::new();
        no.insert("x-should-retry", HeaderValue::from_static("false"));
        assert!(!should_retry(503, &no));
        let mut after = HeaderMap::new();
        after.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_delay(&after, 0), Duration::from_millis(250));
        let d = retry_delay(&none, 1);
        assert!(d <= Duration::from_secs(1) && d >= Duration::from_millis(750));
    }
}
