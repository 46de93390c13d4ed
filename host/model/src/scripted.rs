//! A model that answers from a script of canned assistant turns, for tests and CI checks.
//! The same script can be served over HTTP by [`crate::mock_server`], so real pi and
//! pichamber can be driven by identical model output.
//!
//! # Script format (JSON)
//!
//! ```json
//! {"turns": [
//!   {"thinking": "Let me look.", "text": "Reading it.",
//!    "toolCalls": [{"id": "call_1", "name": "read", "arguments": {"path": "a.txt"}}],
//!    "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0},
//!    "chunks": 3, "delayMs": 0},
//!   {"text": "Done."},
//!   {"stopReason": "error", "errorMessage": "overloaded"}
//! ]}
//! ```
//!
//! One turn is consumed per model call, in order. Every field is optional:
//! - `text`, `thinking`: the answer and its reasoning (streamed as `reasoning_content`, so
//!   pi records the thinking block with `thinkingSignature: "reasoning_content"`).
//! - `toolCalls`: `{id?, name, arguments}`; `arguments` must be an object, `id` defaults to
//!   `call_<turn>_<n>` (both 1-based).
//! - `stopReason`: `stop`, `toolUse`, `length` or `error`; defaults to `toolUse` when there
//!   are tool calls, else `stop`. An `error` turn streams its content and then fails with
//!   `errorMessage` (default `"Scripted error"`); its usage is not reported, as an
//!   interrupted stream's is not.
//! - `usage`: token counts (`input`, `output`, `cacheRead`, `cacheWrite`, default 0).
//! - `chunks`: how many deltas the text, the thinking and each call's arguments are split
//!   into (default 1).
//! - `delayMs`: a pause before each chunk after the first delta (lets a test cancel
//!   mid-stream).
//! - `httpStatus`: the call fails before any stream with this HTTP status (400-599) and an
//!   OpenAI error body whose message is `errorMessage` (default `"Scripted HTTP error"`);
//!   `headers` are its response headers. The client retries it as the OpenAI SDK does
//!   (429, 5xx ... unless `"x-should-retry": "false"`), each retry taking the next turn.
//!
//! When the script is exhausted, a call answers with an error message saying so.
//!
//! A turn is played as the OpenAI chat-completions chunks [`turn_chunks`] produces, read by
//! the same code that reads a real endpoint, so the scripted model's events and messages are
//! what pi records from the mock server serving that turn.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::assembler::Assembler;
use super::openai::response::{api_error_message, apply_chunk, http_error_message};
use super::openai::{OpenAiConfig, payload, retry_delay, should_retry};
use super::{LlmContext, PiVersion, StreamItem, StreamOptions, cancelled, is_cancelled};

/// A script of canned turns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub turns: Vec<Turn>,
}

/// One canned assistant turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Turn {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ScriptToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<ScriptStopReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    json!({})
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScriptUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ScriptStopReason {
    Stop,
    ToolUse,
    Length,
    Error,
}

impl Turn {
    /// A turn that answers `text`.
    pub fn text(text: &str) -> Turn {
        Turn {
            text: Some(text.into()),
            ..Turn::default()
        }
    }

    pub fn stop_reason(&self) -> ScriptStopReason {
        self.stop_reason.unwrap_or(if self.tool_calls.is_empty() {
            ScriptStopReason::Stop
        } else {
            ScriptStopReason::ToolUse
        })
    }
}

impl Script {
    /// Reads a script file; errors name the file and the offending field.
    pub fn load(path: &Path) -> anyhow::Result<Script> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read model script {}", path.display()))?;
        Script::from_json_str(&text).with_context(|| format!("model script {}", path.display()))
    }

    pub fn from_json_str(text: &str) -> anyhow::Result<Script> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| anyhow::anyhow!("invalid JSON: {e}"))?;
        Script::from_value(value)
    }

    /// Checks a script given as JSON; errors say where (`turns[1].toolCalls[0]: ...`).
    pub fn from_value(value: Value) -> anyhow::Result<Script> {
        let script = match Script::deserialize(&value) {
            Ok(s) => s,
            Err(e) => bail!("{}", locate_error(&value, e)),
        };
        for (i, turn) in script.turns.iter().enumerate() {
            if turn.chunks == Some(0) {
                bail!("turns[{i}].chunks: must be at least 1");
            }
            if turn.http_status.is_some_and(|s| !(400..=599).contains(&s)) {
                bail!("turns[{i}].httpStatus: must be an error status (400-599)");
            }
            if !turn.headers.is_empty() && turn.http_status.is_none() {
                bail!("turns[{i}].headers: only for an httpStatus turn");
            }
            for (j, call) in turn.tool_calls.iter().enumerate() {
                if !call.arguments.is_object() {
                    bail!("turns[{i}].toolCalls[{j}].arguments: expected an object");
                }
            }
        }
        Ok(script)
    }
}

/// Narrows a deserialisation error down to the innermost part of the script that fails.
fn locate_error(value: &Value, error: serde_json::Error) -> String {
    let Some(turns) = value.get("turns").and_then(Value::as_array) else {
        return error.to_string();
    };
    for (i, turn) in turns.iter().enumerate() {
        let Err(turn_error) = Turn::deserialize(turn) else {
            continue;
        };
        if let Some(calls) = turn.get("toolCalls").and_then(Value::as_array) {
            for (j, call) in calls.iter().enumerate() {
                if let Err(e) = ScriptToolCall::deserialize(call) {
                    return format!("turns[{i}].toolCalls[{j}]: {e}");
                }
            }
        }
        if let Some(usage) = turn.get("usage")
            && let Err(e) = ScriptUsage::deserialize(usage)
        {
            return format!("turns[{i}].usage: {e}");
        }
        return format!("turns[{i}]: {turn_error}");
    }
    error.to_string()
}

/// Splits `text` into at most `n` nearly equal pieces on character boundaries.
fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let n = n.clamp(1, chars.len());
    let (base, extra) = (chars.len() / n, chars.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for k in 0..n {
        let len = base + usize::from(k < extra);
        out.push(chars[at..at + len].iter().collect());
        at += len;
    }
    out
}

/// The `data:` payloads an OpenAI endpoint would stream for turn number `number` (1-based)
/// of a call to `model`: a role chunk, reasoning, text and tool-call deltas, then the
/// finish-reason chunk and the usage chunk, or an `error` object for an `error` turn.
pub fn turn_chunks(turn: &Turn, number: usize, model: &str) -> Vec<Value> {
    let id = format!("chatcmpl-scripted-{number}");
    let chunk = |choices: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
               "choices": choices})
    };
    let delta = |delta: Value| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]));
    let pieces = turn.chunks.unwrap_or(1);
    let mut out = vec![delta(json!({"role": "assistant", "content": ""}))];
    for piece in split(turn.thinking.as_deref().unwrap_or(""), pieces) {
        out.push(delta(json!({"reasoning_content": piece})));
    }
    for piece in split(turn.text.as_deref().unwrap_or(""), pieces) {
        out.push(delta(json!({"content": piece})));
    }
    for (index, call) in turn.tool_calls.iter().enumerate() {
        let call_id = call
            .id
            .clone()
            .unwrap_or_else(|| format!("call_{number}_{}", index + 1));
        out.push(delta(json!({"tool_calls": [{
            "index": index, "id": call_id, "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]})));
        let arguments = payload::js_stringify(&call.arguments);
        for piece in split(&arguments, pieces) {
            out.push(delta(json!({"tool_calls": [{
                "index": index, "function": {"arguments": piece},
            }]})));
        }
    }
    let finish = match turn.stop_reason() {
        ScriptStopReason::Error => {
            let message = turn.error_message.as_deref().unwrap_or("Scripted error");
            out.push(json!({"error": {"message": message, "type": "server_error"}}));
            return out;
        }
        ScriptStopReason::Stop => "stop",
        ScriptStopReason::ToolUse => "tool_calls",
        ScriptStopReason::Length => "length",
    };
    out.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    ));
    let u = turn.usage.unwrap_or_default();
    let cached = u.cache_read + u.cache_write;
    let mut details = json!({"cached_tokens": cached});
    if u.cache_write > 0 {
        details["cache_write_tokens"] = json!(u.cache_write);
    }
    let prompt = u.input + cached;
    let mut last = chunk(json!([]));
    last["usage"] = json!({
        "prompt_tokens": prompt,
        "completion_tokens": u.output,
        "total_tokens": prompt + u.output,
        "prompt_tokens_details": details,
    });
    out.push(last);
    out
}

/// The JSON body of an `httpStatus` turn's error response.
pub fn http_error_body(turn: &Turn) -> String {
    let message = turn
        .error_message
        .as_deref()
        .unwrap_or("Scripted HTTP error");
    let kind = if turn.http_status.is_some_and(|s| s < 500) {
        "invalid_request_error"
    } else {
        "server_error"
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}}).to_string()
}

/// Whether chunk `index` of a turn is preceded by the turn's `delayMs` pause (every chunk
/// after the role chunk and the first delta).
pub fn delayed(index: usize) -> bool {
    index >= 2
}

/// The error text when a call finds no turn left.
pub fn exhausted_message(call: usize, turns: usize) -> String {
    format!("Script exhausted: model call {call} has no scripted turn (the script has {turns})")
}

/// A model answering from a [`Script`]; clones share the remaining turns and the record of
/// payloads.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    config: Arc<OpenAiConfig>,
    state: Arc<Mutex<State>>,
}

#[derive(Debug)]
struct State {
    turns: VecDeque<Turn>,
    total: usize,
    calls: usize,
    payloads: Vec<Value>,
}

impl ScriptedModel {
    /// A scripted model named `scripted` (provider `scripted`, api `openai-completions`).
    pub fn new(script: Script) -> Self {
        ScriptedModel::with_config(
            script,
            OpenAiConfig::new("scripted", "scripted", "http://localhost:0"),
        )
    }

    /// A scripted model that presents itself as `config` (its payloads and messages are
    /// those of that model).
    pub fn with_config(script: Script, config: OpenAiConfig) -> Self {
        let total = script.turns.len();
        ScriptedModel {
            config: Arc::new(config),
            state: Arc::new(Mutex::new(State {
                turns: script.turns.into(),
                total,
                calls: 0,
                payloads: Vec::new(),
            })),
        }
    }

    pub fn load(path: &Path) -> anyhow::Result<Self> {
        Ok(ScriptedModel::new(Script::load(path)?))
    }

    pub fn info(&self) -> Value {
        self.config.info()
    }

    /// The OpenAI chat-completions body pi would send to this model.
    pub fn build_payload(&self, ctx: &LlmContext, opts: &StreamOptions) -> Value {
        self.config.build_payload(ctx, opts)
    }

    /// Every payload [`ScriptedModel::stream`] was called with, in order.
    pub fn payloads(&self) -> Vec<Value> {
        self.state.lock().unwrap().payloads.clone()
    }

    pub fn turns_left(&self) -> usize {
        self.state.lock().unwrap().turns.len()
    }

    /// Plays the next turn; see [`crate::ModelClient::stream`].
    pub async fn stream(
        &self,
        payload: Value,
        items: mpsc::UnboundedSender<StreamItem>,
        mut cancel: watch::Receiver<bool>,
        pi: PiVersion,
    ) -> Value {
        let config = &self.config;
        let mut asm = Assembler::new(
            "openai-completions",
            &config.provider,
            &config.model_id,
            config.zero_usage(),
            items.clone(),
            pi,
        );
        let mut retries_left = config.max_retries;
        let (turn, call) = loop {
            let (turn, call, total) = {
                let mut state = self.state.lock().unwrap();
                state.payloads.push(payload.clone());
                state.calls += 1;
                (state.turns.pop_front(), state.calls, state.total)
            };
            // The order of an HTTP call: a cancel before the request, then a refused request
            // (no turn left, an error status), then the response.
            if is_cancelled(&cancel) {
                return asm.fail(true, "Request was aborted.".into());
            }
            let Some(turn) = turn else {
                return asm.fail(false, exhausted_message(call, total));
            };
            let Some(status) = turn.http_status else {
                break (turn, call);
            };
            let mut headers = reqwest::header::HeaderMap::new();
            for (name, value) in &turn.headers {
                if let (Ok(n), Ok(v)) = (
                    reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                    reqwest::header::HeaderValue::from_str(value),
                ) {
                    headers.insert(n, v);
                }
            }
            if retries_left > 0 && should_retry(status, &headers) {
                let delay = retry_delay(&headers, config.max_retries - retries_left);
                retries_left -= 1;
                tokio::select! {
                    biased;
                    _ = cancelled(&mut cancel) => return asm.fail(true, "Request was aborted.".into()),
                    _ = tokio::time::sleep(delay) => {}
                }
                continue;
            }
            return asm.fail(false, http_error_message(status, &http_error_body(&turn)));
        };
        let _ = items.send(StreamItem::Response {
            status: 200,
            headers: serde_json::Map::new(),
        });
        asm.start();
        let delay = Duration::from_millis(turn.delay_ms.unwrap_or(0));
        let chunks = turn_chunks(&turn, call, asm.model_id());
        for (index, chunk) in chunks.iter().enumerate() {
            if delayed(index) && !delay.is_zero() {
                tokio::select! {
                    biased;
                    _ = cancelled(&mut cancel) => {}
                    _ = tokio::time::sleep(delay) => {}
                }
            }
            if is_cancelled(&cancel) {
                return asm.end(true);
            }
            if !chunk["error"].is_null() {
                return asm.fail(false, api_error_message(None, Some(&chunk["error"]), None));
            }
            apply_chunk(&mut asm, chunk, &config.cost);
        }
        asm.end(is_cancelled(&cancel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_keeps_characters() {
        assert_eq!(split("abcdefg", 3), ["abc", "de", "fg"]);
        assert_eq!(split("héllo", 10).concat(), "héllo");
        assert_eq!(split("ab", 10).len(), 2);
        assert!(split("", 3).is_empty());
    }

    #[test]
    fn errors_name_the_failing_field() {
        let e = Script::from_value(json!({"turns": [{"text": "ok"}, {"txt": "typo"}]}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("turns[1]: unknown field `txt`"), "{e}");
        let e = Script::from_value(json!({"turns": [{"toolCalls": [{"arguments": {}}]}]}))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "turns[0].toolCalls[0]: missing field `name`");
        let e = Script::from_value(json!({"turns": [{"stopReason": "done"}]}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("turns[0]: unknown variant `done`"), "{e}");
        let e = Script::from_value(json!({"turns": [{"usage": {"input": -1}}]}))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("turns[0].usage: invalid value"), "{e}");
        let e =
            Script::from_value(json!({"turns": [{"toolCalls": [{"name": "x", "arguments": 3}]}]}))
                .unwrap_err()
                .to_string();
        assert_eq!(e, "turns[0].toolCalls[0].arguments: expected an object");
        assert!(Script::from_value(json!({"turn": []})).is_err());
    }

    #[test]
    fn stop_reason_defaults() {
        let mut t = Turn::text("x");
        assert_eq!(t.stop_reason(), ScriptStopReason::Stop);
        t.tool_calls.push(ScriptToolCall {
            id: None,
            name: "read".into(),
            arguments: json!({}),
        });
        assert_eq!(t.stop_reason(), ScriptStopReason::ToolUse);
    }
}
