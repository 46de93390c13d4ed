//! The AssistantMessage under construction while a provider streams, and the pi-ai
//! `AssistantMessageEvent`s its changes produce. It follows pi-ai's openai-completions
//! provider: one text block and one thinking block at most, tool calls keyed by stream index
//! or id, blocks ended in content order when the stream ends, and `partial` a snapshot of the
//! message at each event (tool calls carry their `partialArgs`/`streamIndex` scratch fields
//! until they end, as pi's do).

use std::collections::HashMap;

use pichamber_pi::PiVersion;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::partial_json::parse_streaming_json;
use super::{StreamItem, now_ms};

enum Block {
    Text {
        text: String,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
        partial_args: Option<String>,
        stream_index: Option<i64>,
        thought_signature: Option<String>,
    },
}

impl Block {
    fn to_value(&self) -> Value {
        match self {
            Block::Text { text } => json!({"type": "text", "text": text}),
            Block::Thinking {
                thinking,
                signature,
            } => json!({"type": "thinking", "thinking": thinking, "thinkingSignature": signature}),
            Block::ToolCall {
                id,
                name,
                arguments,
                partial_args,
                stream_index,
                thought_signature,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), json!("toolCall"));
                m.insert("id".into(), json!(id));
                m.insert("name".into(), json!(name));
                m.insert("arguments".into(), arguments.clone());
                if let Some(p) = partial_args {
                    m.insert("partialArgs".into(), json!(p));
                }
                if let Some(i) = stream_index {
                    m.insert("streamIndex".into(), json!(i));
                }
                if let Some(s) = thought_signature {
                    m.insert("thoughtSignature".into(), json!(s));
                }
                Value::Object(m)
            }
        }
    }
}

pub(crate) struct Assembler {
    api: String,
    provider: String,
    model: String,
    blocks: Vec<Block>,
    usage: Value,
    stop_reason: String,
    /// The provider's own finish reason (pi 1.6.0 keeps it as `rawStopReason`).
    raw_stop_reason: Option<String>,
    /// pi 1.6.0 times the whole call, from before the request to the last chunk.
    started: std::time::Instant,
    duration_ms: Option<u64>,
    pi: PiVersion,
    timestamp: u64,
    response_id: Option<String>,
    response_model: Option<String>,
    error_message: Option<String>,
    text: Option<usize>,
    thinking: Option<usize>,
    tools_by_index: HashMap<i64, usize>,
    tools_by_id: HashMap<String, usize>,
    tx: UnboundedSender<StreamItem>,
}

impl Assembler {
    pub(crate) fn new(
        api: &str,
        provider: &str,
        model: &str,
        zero_usage: Value,
        tx: UnboundedSender<StreamItem>,
        pi: PiVersion,
    ) -> Self {
        Assembler {
            api: api.into(),
            provider: provider.into(),
            model: model.into(),
            blocks: Vec::new(),
            usage: zero_usage,
            // pi 1.6.0 says a message is unfinished until the provider says why it stopped.
            stop_reason: if pi.is_1_6() { "pending" } else { "stop" }.into(),
            raw_stop_reason: None,
            started: std::time::Instant::now(),
            duration_ms: None,
            pi,
            timestamp: now_ms(),
            response_id: None,
            response_model: None,
            error_message: None,
            text: None,
            thinking: None,
            tools_by_index: HashMap::new(),
            tools_by_id: HashMap::new(),
            tx,
        }
    }

    pub(crate) fn model_id(&self) -> &str {
        &self.model
    }

    pub(crate) fn pi(&self) -> PiVersion {
        self.pi
    }

    /// The AssistantMessage as it stands.
    pub(crate) fn message(&self) -> Value {
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert(
            "content".into(),
            Value::Array(self.blocks.iter().map(Block::to_value).collect()),
        );
        m.insert("api".into(), json!(self.api));
        m.insert("provider".into(), json!(self.provider));
        m.insert("model".into(), json!(self.model));
        m.insert("usage".into(), self.usage.clone());
        m.insert("stopReason".into(), json!(self.stop_reason));
        m.insert("timestamp".into(), json!(self.timestamp));
        if let Some(id) = &self.response_id {
            m.insert("responseId".into(), json!(id));
        }
        if let Some(model) = &self.response_model {
            m.insert("responseModel".into(), json!(model));
        }
        if let Some(raw) = &self.raw_stop_reason {
            m.insert("rawStopReason".into(), json!(raw));
        }
        if let Some(e) = &self.error_message {
            m.insert("errorMessage".into(), json!(e));
        }
        if let Some(ms) = self.duration_ms {
            m.insert("durationMs".into(), json!(ms));
        }
        Value::Object(m)
    }

    fn emit(&self, event: Value) {
        let _ = self.tx.send(StreamItem::Event(event));
    }

    fn emit_indexed(&self, kind: &str, index: usize, extra: Option<(&str, Value)>) {
        let mut e = Map::new();
        e.insert("type".into(), json!(kind));
        e.insert("contentIndex".into(), json!(index));
        if let Some((k, v)) = extra {
            e.insert(k.into(), v);
        }
        e.insert("partial".into(), self.message());
        self.emit(Value::Object(e));
    }

    pub(crate) fn start(&self) {
        self.emit(json!({"type": "start", "partial": self.message()}));
    }

    /// `responseId ||= id`, and the served model when it differs from the requested one.
    pub(crate) fn note_response(&mut self, id: Option<&str>, model: Option<&str>) {
        if self.response_id.as_deref().is_none_or(str::is_empty)
            && let Some(id) = id
        {
            self.response_id = Some(id.to_string());
        }
        if let Some(m) = model
            && !m.is_empty()
            && m != self.model
            && self.response_model.is_none()
        {
            self.response_model = Some(m.to_string());
        }
    }

    pub(crate) fn set_usage(&mut self, usage: Value) {
        self.usage = usage;
    }

    /// `raw` is the provider's finish reason as it came.
    pub(crate) fn set_stop(&mut self, stop_reason: &str, error_message: Option<String>, raw: &str) {
        if self.pi.is_1_6() {
            self.raw_stop_reason = Some(raw.to_owned());
        }
        self.stop_reason = stop_reason.into();
        if error_message.is_some() {
            self.error_message = error_message;
        }
    }

    pub(crate) fn text_delta(&mut self, delta: &str) {
        let index = match self.text {
            Some(i) => i,
            None => {
                self.blocks.push(Block::Text {
                    text: String::new(),
                });
                let i = self.blocks.len() - 1;
                self.text = Some(i);
                self.emit_indexed("text_start", i, None);
                i
            }
        };
        if let Block::Text { text } = &mut self.blocks[index] {
            text.push_str(delta);
        }
        self.emit_indexed("text_delta", index, Some(("delta", json!(delta))));
    }

    /// `field` is the delta field the reasoning came in; pi keeps it as the signature so the
    /// reasoning is replayed under the same field.
    pub(crate) fn thinking_delta(&mut self, field: &str, delta: &str) {
        let index = match self.thinking {
            Some(i) => i,
            None => {
                self.blocks.push(Block::Thinking {
                    thinking: String::new(),
                    signature: field.into(),
                });
                let i = self.blocks.len() - 1;
                self.thinking = Some(i);
                self.emit_indexed("thinking_start", i, None);
                i
            }
        };
        if let Block::Thinking { thinking, .. } = &mut self.blocks[index] {
            thinking.push_str(delta);
        }
        self.emit_indexed("thinking_delta", index, Some(("delta", json!(delta))));
    }

    /// One `tool_calls[]` entry of a chunk.
    pub(crate) fn tool_call_delta(
        &mut self,
        stream_index: Option<i64>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&str>,
    ) {
        let id = id.filter(|s| !s.is_empty());
        let name = name.filter(|s| !s.is_empty());
        let mut found = stream_index.and_then(|i| self.tools_by_index.get(&i).copied());
        if found.is_none() {
            found = id.and_then(|id| self.tools_by_id.get(id).copied());
        }
        let index = match found {
            Some(i) => i,
            None => {
                self.blocks.push(Block::ToolCall {
                    id: id.unwrap_or("").into(),
                    name: name.unwrap_or("").into(),
                    arguments: json!({}),
                    partial_args: Some(String::new()),
                    stream_index,
                    thought_signature: None,
                });
                let i = self.blocks.len() - 1;
                if let Some(si) = stream_index {
                    self.tools_by_index.insert(si, i);
                }
                if let Some(id) = id {
                    self.tools_by_id.insert(id.into(), i);
                }
                self.emit_indexed("toolcall_start", i, None);
                i
            }
        };
        if let Some(id) = id {
            self.tools_by_id.insert(id.into(), index);
        }
        let mut new_index = None;
        let mut delta = "";
        if let Block::ToolCall {
            id: block_id,
            name: block_name,
            arguments: args,
            partial_args,
            stream_index: block_stream_index,
            ..
        } = &mut self.blocks[index]
        {
            if let Some(si) = stream_index
                && block_stream_index.is_none()
            {
                *block_stream_index = Some(si);
                new_index = Some(si);
            }
            if block_id.is_empty()
                && let Some(id) = id
            {
                *block_id = id.into();
            }
            if block_name.is_empty()
                && let Some(name) = name
            {
                *block_name = name.into();
            }
            if let Some(piece) = arguments.filter(|a| !a.is_empty()) {
                delta = piece;
                let buffer = partial_args.get_or_insert_with(String::new);
                buffer.push_str(piece);
                *args = parse_streaming_json(buffer);
            }
        }
        if let Some(si) = new_index {
            self.tools_by_index.insert(si, index);
        }
        self.emit_indexed("toolcall_delta", index, Some(("delta", json!(delta))));
    }

    /// An OpenRouter-style `reasoning_details` entry: encrypted reasoning tied to a tool call.
    pub(crate) fn reasoning_detail(&mut self, detail: &Value) {
        let truthy = |v: &Value| match v {
            Value::String(s) => !s.is_empty(),
            Value::Null | Value::Bool(false) => false,
            _ => true,
        };
        if detail["type"] != "reasoning.encrypted" || !truthy(&detail["id"]) {
            return;
        }
        if !truthy(&detail["data"]) {
            return;
        }
        let signature = detail.to_string();
        for block in &mut self.blocks {
            if let Block::ToolCall {
                id,
                thought_signature,
                ..
            } = block
                && detail["id"] == json!(id)
            {
                *thought_signature = Some(signature);
                return;
            }
        }
    }

    fn strip_scratch(&mut self) {
        for block in &mut self.blocks {
            if let Block::ToolCall {
                partial_args,
                stream_index,
                ..
            } = block
            {
                *partial_args = None;
                *stream_index = None;
            }
        }
    }

    /// The stream ended (or was cut by a cancel): end every block in content order, then
    /// finish with `done`, or with `error` when aborted or the provider reported an error stop.
    pub(crate) fn end(mut self, aborted: bool) -> Value {
        for i in 0..self.blocks.len() {
            match &mut self.blocks[i] {
                Block::Text { text } => {
                    let content = json!(text);
                    self.emit_indexed("text_end", i, Some(("content", content)));
                }
                Block::Thinking { thinking, .. } => {
                    let content = json!(thinking);
                    self.emit_indexed("thinking_end", i, Some(("content", content)));
                }
                Block::ToolCall {
                    arguments,
                    partial_args,
                    stream_index,
                    ..
                } => {
                    *arguments = parse_streaming_json(partial_args.as_deref().unwrap_or(""));
                    *partial_args = None;
                    *stream_index = None;
                    let call = self.blocks[i].to_value();
                    self.emit_indexed("toolcall_end", i, Some(("toolCall", call)));
                }
            }
        }
        if aborted {
            return self.fail(true, "Request was aborted".into());
        }
        if self.stop_reason == "pending" {
            return self.fail(false, "Stream ended without finish_reason".into());
        }
        if self.stop_reason == "error" || self.stop_reason == "aborted" {
            let message = self
                .error_message
                .clone()
                .unwrap_or_else(|| "Provider returned an error stop reason".into());
            return self.fail(false, message);
        }
        self.time();
        let message = self.message();
        self.emit(json!({"type": "done", "reason": self.stop_reason, "message": message}));
        message
    }

    /// pi 1.6.0's `durationMs` on the finished message.
    fn time(&mut self) {
        if self.pi.is_1_6() {
            self.duration_ms = Some(self.started.elapsed().as_millis() as u64);
        }
    }

    /// The call failed: the message so far with `stopReason` `error` (or `aborted`) and the
    /// error text, reported as an `error` event.
    pub(crate) fn fail(mut self, aborted: bool, message: String) -> Value {
        self.strip_scratch();
        self.stop_reason = if aborted { "aborted" } else { "error" }.into();
        self.error_message = Some(message);
        self.time();
        let message = self.message();
        self.emit(json!({"type": "error", "reason": self.stop_reason, "error": message}));
        message
    }
}
