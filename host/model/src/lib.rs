//! Model providers: what the agent loop calls where pi calls pi-ai's `streamSimple`.
//!
//! The loop builds an [`LlmContext`], asks the model for the provider payload
//! ([`ModelClient::build_payload`], which `before_provider_request` handlers may replace),
//! then runs [`ModelClient::stream`] in a spawned task and reads [`StreamItem`]s: first the
//! HTTP status and headers (for `after_provider_response`), then pi-ai's
//! `AssistantMessageEvent`s (`start`, `text_*`, `thinking_*`, `toolcall_*`, `done`/`error`),
//! each carrying `partial`, the AssistantMessage so far. `stream` returns the final
//! AssistantMessage; like pi, a failure is an assistant message with `stopReason` `"error"`
//! (or `"aborted"` after cancel), never an `Err`.
//!
//! - [`openai`]: OpenAI-compatible chat completions, built and parsed as pi-ai's
//!   `openai-completions` provider does.
//! - [`models_json`]: pi's `models.json` custom providers; [`catalog`]: the models a
//!   session chooses from.
//! - [`scripted`]: canned turns from a script file, for tests and CI.
//! - [`mock_server`]: the same scripts served as an OpenAI chat-completions endpoint.
//!
//! It knows nothing of sessions, extensions or the agent loop that drives it.

mod assembler;
pub mod catalog;
pub mod mock_server;
pub mod models_json;
pub mod openai;
mod partial_json;
pub mod scripted;
mod transform;

pub use pichamber_pi::PiVersion;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, watch};

pub use models_json::ModelsJson;
pub use openai::{ModelCost, OpenAiConfig, OpenAiModel};
pub use scripted::{Script, ScriptedModel};

/// The LLM context of one model call (pi-ai `Context`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmContext {
    pub system_prompt: String,
    /// pi-ai messages: `user`, `assistant` and `toolResult` shapes.
    pub messages: Vec<Value>,
    /// `{name, description, parameters}`.
    pub tools: Vec<Value>,
}

/// The options pi's agent passes to `streamSimple` that change the payload.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamOptions {
    /// `off`, `minimal`, `low`, `medium`, `high` or `xhigh` (clamped to what the model supports).
    pub thinking_level: String,
    /// pi sends the session id for prompt caching (`prompt_cache_key`).
    pub session_id: Option<String>,
    /// Overrides the model's default (`min(maxTokens, 32000)`).
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    /// `none`, `short` or `long`; unset means `short` unless `PI_CACHE_RETENTION=long`.
    pub cache_retention: Option<String>,
    pub tool_choice: Option<Value>,
    /// Whose pi-ai release the request follows.
    pub pi: PiVersion,
}

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            thinking_level: "off".into(),
            session_id: None,
            max_tokens: None,
            temperature: None,
            cache_retention: None,
            tool_choice: None,
            pi: PiVersion::default(),
        }
    }
}

/// What a running [`ModelClient::stream`] reports, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// The provider's HTTP status and headers (lower-case names, sorted), before any event;
    /// only for a successful response, as pi's `onResponse`. The body is read on meanwhile
    /// (events queue up behind this item), so a consumer that handles this item before
    /// reading further sees pi's order.
    Response {
        status: u16,
        headers: Map<String, Value>,
    },
    /// One event as the provider sent it (a chat-completions chunk), before the
    /// `AssistantMessageEvent`s it makes (pi 1.6.0's `onProviderStreamEvent`).
    Provider(Value),
    /// A pi-ai `AssistantMessageEvent`.
    Event(Value),
}

/// A model the agent loop can call. Cloning is cheap and shares state, so a clone can be moved
/// into the task that runs [`ModelClient::stream`].
#[derive(Debug, Clone)]
pub enum ModelClient {
    Scripted(ScriptedModel),
    OpenAi(OpenAiModel),
}

impl ModelClient {
    /// The pi-ai `Model` object (`id`, `name`, `api`, `provider`, `baseUrl`, `reasoning`,
    /// `input`, `cost`, `contextWindow`, `maxTokens`, ...).
    pub fn info(&self) -> Value {
        match self {
            ModelClient::Scripted(m) => m.info(),
            ModelClient::OpenAi(m) => m.info(),
        }
    }

    /// Whether a request can authenticate (pi refuses a prompt before the run when a
    /// provider has no API key). A scripted model needs none.
    pub fn has_api_key(&self) -> bool {
        match self {
            ModelClient::Scripted(_) => true,
            ModelClient::OpenAi(m) => m.config().api_key.is_some(),
        }
    }

    /// The API key and request headers a request carries (a scripted model has none).
    pub fn credentials(&self) -> (Option<String>, Vec<(String, String)>) {
        match self {
            ModelClient::Scripted(_) => (None, Vec::new()),
            ModelClient::OpenAi(m) => (m.config().api_key.clone(), m.config().headers.clone()),
        }
    }

    /// Why a request cannot authenticate, and what to set: pi's first sentence, then the
    /// environment variable the key is read from (or models.json's `apiKey` when the provider
    /// reads none).
    pub fn missing_api_key(&self) -> String {
        let (provider, vars): (&str, &[String]) = match self {
            ModelClient::Scripted(_) => ("the selected model", &[]),
            ModelClient::OpenAi(m) => (&m.config().provider, &m.config().api_key_env),
        };
        let fix = match vars {
            [] => format!(
                "Give provider {provider} an \"apiKey\" in models.json (the key, or the environment variable holding it)"
            ),
            [var] => format!("Set the environment variable {var} to the key"),
            vars => format!(
                "Set one of the environment variables {} to the key",
                vars.join(", ")
            ),
        };
        format!("No API key found for {provider}. {fix}.")
    }

    /// The request body pi would send for this context.
    pub fn build_payload(&self, ctx: &LlmContext, opts: &StreamOptions) -> Value {
        match self {
            ModelClient::Scripted(m) => m.build_payload(ctx, opts),
            ModelClient::OpenAi(m) => m.build_payload(ctx, opts),
        }
    }

    /// Sends `payload` and streams the answer into `items`; returns the final
    /// AssistantMessage. Setting `cancel` to `true` aborts (`stopReason: "aborted"`). The
    /// message has the fields of `pi`'s pi-ai release.
    pub async fn stream(
        &self,
        payload: Value,
        items: mpsc::UnboundedSender<StreamItem>,
        cancel: watch::Receiver<bool>,
        pi: PiVersion,
    ) -> Value {
        self.stream_with_headers(payload, &[], items, cancel, pi)
            .await
    }

    /// [`ModelClient::stream`] with request headers an extension added
    /// (`before_provider_headers`): added to the provider's own, never replacing one of them.
    pub async fn stream_with_headers(
        &self,
        payload: Value,
        headers: &[(String, String)],
        items: mpsc::UnboundedSender<StreamItem>,
        cancel: watch::Receiver<bool>,
        pi: PiVersion,
    ) -> Value {
        match self {
            ModelClient::Scripted(m) => m.stream(payload, items, cancel, pi).await,
            ModelClient::OpenAi(m) => m.stream(payload, headers, items, cancel, pi).await,
        }
    }
}

/// Resolves once `cancel` is true; never, if its sender is gone without cancelling.
pub async fn cancelled(cancel: &mut watch::Receiver<bool>) {
    if cancel.wait_for(|c| *c).await.is_err() {
        std::future::pending::<()>().await;
    }
}

pub(crate) fn is_cancelled(cancel: &watch::Receiver<bool>) -> bool {
    *cancel.borrow()
}

/// Milliseconds since the epoch, as `Date.now()`.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A number as JavaScript would serialise it: integral values without a fraction.
pub(crate) fn js_number(n: f64) -> Value {
    if n.is_finite() && n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

/// pi-ai `Usage` with its cost computed from per-million-token prices (`calculateCost`).
pub(crate) fn usage_value(
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
    cost: &ModelCost,
) -> Value {
    let c_in = cost.input / 1_000_000.0 * input as f64;
    let c_out = cost.output / 1_000_000.0 * output as f64;
    let c_read = cost.cache_read / 1_000_000.0 * cache_read as f64;
    let c_write = cost.cache_write / 1_000_000.0 * cache_write as f64;
    json!({
        "input": input,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "totalTokens": input + output + cache_read + cache_write,
        "cost": {
            "input": js_number(c_in),
            "output": js_number(c_out),
            "cacheRead": js_number(c_read),
            "cacheWrite": js_number(c_write),
            "total": js_number(c_in + c_out + c_read + c_write),
        },
    })
}
