//! How pi reads a chat-completions response: each streamed chunk's deltas, usage and
//! finish reason into the AssistantMessage (pi-ai's openai-completions stream loop), and
//! provider errors into the text the OpenAI SDK would have thrown (`APIError.makeMessage`).

use pichamber_pi::PiVersion;
use serde_json::{Value, json};

use super::ModelCost;
use crate::assembler::Assembler;
use crate::usage_value;

/// JavaScript truthiness of a JSON value.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        _ => true,
    }
}

/// `x || 0` for a token count.
fn count(v: &Value) -> u64 {
    v.as_f64()
        .filter(|f| *f > 0.0)
        .map(|f| f as u64)
        .unwrap_or(0)
}

/// pi-ai's `parseChunkUsage`: cached prompt tokens split into cache reads and writes.
/// pi 1.6.0 also reads Kimi's top-level `cached_tokens`, no longer subtracts cache writes from
/// the cached count, and reports reasoning tokens and whether the provider priced the call.
pub(crate) fn parse_usage(raw: &Value, cost: &ModelCost, pi: PiVersion) -> Value {
    let prompt = count(&raw["prompt_tokens"]);
    let details = &raw["prompt_tokens_details"];
    let reported_cached = [
        &details["cached_tokens"],
        &raw["prompt_cache_hit_tokens"],
        if pi.is_1_6() {
            &raw["cached_tokens"]
        } else {
            &Value::Null
        },
    ]
    .into_iter()
    .find(|v| !v.is_null())
    .map(count)
    .unwrap_or(0);
    let cache_write = count(&details["cache_write_tokens"]);
    let cache_read = if cache_write > 0 && !pi.is_1_6() {
        reported_cached.saturating_sub(cache_write)
    } else {
        reported_cached
    };
    let input = prompt.saturating_sub(cache_read + cache_write);
    let output = count(&raw["completion_tokens"]);
    let mut usage = usage_value(input, output, cache_read, cache_write, cost);
    if pi.is_1_6() {
        let reasoning = [
            &raw["completion_tokens_details"]["reasoning_tokens"],
            &raw["reasoning_tokens"],
        ]
        .into_iter()
        .map(count)
        .find(|n| *n > 0)
        .unwrap_or(0);
        // In pi's key order: reasoning before totalTokens.
        let total = usage["totalTokens"].take();
        let cost = usage["cost"].take();
        let map = usage.as_object_mut().expect("usage is an object");
        map.remove("totalTokens");
        map.remove("cost");
        map.insert("reasoning".into(), json!(reasoning));
        map.insert("totalTokens".into(), total);
        map.insert("cost".into(), cost);
        usage["cost"]["totalFromProvider"] = json!(false);
    }
    usage
}

/// A `finish_reason` as pi's `stopReason`, with an error text for the unusual ones.
pub(crate) fn map_finish_reason(reason: &str) -> (&'static str, Option<String>) {
    match reason {
        "stop" | "end" => ("stop", None),
        "length" => ("length", None),
        "function_call" | "tool_calls" => ("toolUse", None),
        other => ("error", Some(format!("Provider finish_reason: {other}"))),
    }
}

/// Applies one parsed `data:` chunk to the message.
pub(crate) fn apply_chunk(asm: &mut Assembler, chunk: &Value, cost: &ModelCost) {
    if !chunk.is_object() {
        return;
    }
    asm.note_response(chunk["id"].as_str(), chunk["model"].as_str());
    if truthy(&chunk["usage"]) {
        asm.set_usage(parse_usage(&chunk["usage"], cost, asm.pi()));
    }
    let Some(choice) = chunk["choices"].as_array().and_then(|c| c.first()) else {
        return;
    };
    if !truthy(&chunk["usage"]) && truthy(&choice["usage"]) {
        asm.set_usage(parse_usage(&choice["usage"], cost, asm.pi()));
    }
    if let Some(reason) = choice["finish_reason"].as_str().filter(|r| !r.is_empty()) {
        let (stop, message) = map_finish_reason(reason);
        asm.set_stop(stop, message, reason);
    }
    let delta = &choice["delta"];
    if !truthy(delta) {
        return;
    }
    if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
        asm.text_delta(text);
    }
    // Endpoints name the reasoning differently; the first non-empty one is used.
    for field in ["reasoning_content", "reasoning", "reasoning_text"] {
        if let Some(thinking) = delta[field].as_str().filter(|t| !t.is_empty()) {
            asm.thinking_delta(field, thinking);
            break;
        }
    }
    if let Some(calls) = delta["tool_calls"].as_array() {
        for call in calls {
            let function = &call["function"];
            asm.tool_call_delta(
                call["index"].as_f64().map(|i| i as i64),
                call["id"].as_str(),
                function["name"].as_str(),
                function["arguments"].as_str(),
            );
        }
    }
    if let Some(details) = delta["reasoning_details"].as_array() {
        for detail in details {
            asm.reasoning_detail(detail);
        }
    }
}

/// The text of the OpenAI SDK's `APIError` for a status, the body's `error` member and the
/// raw body text, with OpenRouter's `metadata.raw` appended as pi does.
pub(crate) fn api_error_message(
    status: Option<u16>,
    error: Option<&Value>,
    body_text: Option<&str>,
) -> String {
    let msg = match error {
        Some(e) if truthy(&e["message"]) => Some(match &e["message"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        Some(e) if truthy(e) => Some(e.to_string()),
        _ => body_text.filter(|t| !t.is_empty()).map(str::to_string),
    };
    let mut text = match (status, msg) {
        (Some(s), Some(m)) => format!("{s} {m}"),
        (Some(s), None) => format!("{s} status code (no body)"),
        (None, Some(m)) => m,
        (None, None) => "(no status code or body)".into(),
    };
    if let Some(raw) = error.map(|e| &e["metadata"]["raw"]).filter(|r| truthy(r)) {
        text.push('\n');
        match raw {
            Value::String(s) => text.push_str(s),
            other => text.push_str(&other.to_string()),
        }
    }
    text
}

/// The error message for a non-2xx response body, as the SDK builds it: a JSON body's
/// `error` member, or the raw text when the body is not JSON.
pub(crate) fn http_error_message(status: u16, body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(json) => api_error_message(Some(status), json.get("error"), None),
        Err(_) => api_error_message(Some(status), None, Some(body)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_splits_cache_reads_and_writes() {
        let cost = ModelCost {
            input: 1.0,
            output: 2.0,
            cache_read: 0.0,
            cache_write: 0.0,
        };
        let u = parse_usage(
            &json!({"prompt_tokens": 100, "completion_tokens": 7,
                    "prompt_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 10}}),
            &cost,
            PiVersion::V0_73,
        );
        assert_eq!(u["input"], 70);
        assert_eq!(u["cacheRead"], 20);
        assert_eq!(u["cacheWrite"], 10);
        assert_eq!(u["totalTokens"], 107);
        assert!(u.get("reasoning").is_none());
        assert_eq!(u["cost"]["input"], json!(1.0 / 1_000_000.0 * 70.0));
        assert_eq!(u["cost"]["cacheRead"], json!(0));
        // pi 1.6.0: cached tokens are all reads; reasoning tokens are counted (within output).
        let u = parse_usage(
            &json!({"prompt_tokens": 100, "completion_tokens": 7,
                    "completion_tokens_details": {"reasoning_tokens": 4},
                    "prompt_tokens_details": {"cached_tokens": 30, "cache_write_tokens": 10}}),
            &cost,
            PiVersion::V1_6,
        );
        assert_eq!(u["input"], 60);
        assert_eq!(u["cacheRead"], 30);
        assert_eq!(u["reasoning"], 4);
        assert_eq!(u["totalTokens"], 107);
        assert_eq!(u["cost"]["totalFromProvider"], false);
        let keys: Vec<&String> = u.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "input",
                "output",
                "cacheRead",
                "cacheWrite",
                "reasoning",
                "totalTokens",
                "cost"
            ]
        );
        let u = parse_usage(
            &json!({"prompt_tokens": 10, "cached_tokens": 4}),
            &cost,
            PiVersion::V1_6,
        );
        assert_eq!(u["cacheRead"], 4);
    }

    #[test]
    fn error_texts_match_the_sdk() {
        assert_eq!(
            http_error_message(500, r#"{"error":{"message":"boom"}}"#),
            "500 boom"
        );
        assert_eq!(http_error_message(502, "bad gateway"), "502 bad gateway");
        assert_eq!(http_error_message(500, ""), "500 status code (no body)");
        assert_eq!(
            http_error_message(500, r#"{"detail":"x"}"#),
            "500 status code (no body)"
        );
        assert_eq!(
            http_error_message(400, r#"{"error":"nope"}"#),
            r#"400 "nope""#
        );
        assert_eq!(
            api_error_message(
                None,
                Some(&json!({"message": "m", "metadata": {"raw": "upstream"}})),
                None
            ),
            "m\nupstream"
        );
    }

    #[test]
    fn finish_reasons() {
        assert_eq!(map_finish_reason("tool_calls").0, "toolUse");
        assert_eq!(
            map_finish_reason("content_filter"),
            (
                "error",
                Some("Provider finish_reason: content_filter".into())
            )
        );
    }
}
