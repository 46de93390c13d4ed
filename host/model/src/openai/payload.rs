//! The chat-completions request body, field for field and in the order pi-ai's
//! openai-completions provider writes it (`buildParams`, `convertMessages`, `convertTools`),
//! so a payload diff between pi and pichamber shows only real differences.

use serde_json::{Map, Value, json};

use super::OpenAiConfig;
use super::compat::{self, Compat};
use crate::transform::{Target, transform_messages};
use crate::{LlmContext, StreamOptions, js_number};

const THINKING_LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// The levels a model accepts (`getSupportedThinkingLevels`): `thinkingLevelMap` entries set
/// to `null` are unsupported, and `xhigh` needs an explicit entry.
fn supported_levels(config: &OpenAiConfig) -> Vec<&'static str> {
    if !config.reasoning {
        return vec!["off"];
    }
    THINKING_LEVELS
        .into_iter()
        .filter(|level| match config.thinking_level_map.get(*level) {
            Some(Value::Null) => false,
            mapped if *level == "xhigh" => mapped.is_some(),
            _ => true,
        })
        .collect()
}

/// The nearest supported level, preferring higher ones (`clampThinkingLevel`).
pub(crate) fn clamp_thinking_level(config: &OpenAiConfig, level: &str) -> &'static str {
    let available = supported_levels(config);
    let first = available.first().copied().unwrap_or("off");
    let Some(requested) = THINKING_LEVELS.iter().position(|l| *l == level) else {
        return first;
    };
    if available.contains(&THINKING_LEVELS[requested]) {
        return THINKING_LEVELS[requested];
    }
    THINKING_LEVELS[requested..]
        .iter()
        .chain(THINKING_LEVELS[..requested].iter().rev())
        .find(|l| available.contains(l))
        .copied()
        .unwrap_or(first)
}

/// The value sent for a level: the model's `thinkingLevelMap` entry when it is a string.
fn mapped_level(config: &OpenAiConfig, level: &str) -> String {
    config
        .thinking_level_map
        .get(level)
        .and_then(Value::as_str)
        .unwrap_or(level)
        .to_string()
}

/// `JSON.stringify` as JavaScript writes it: integral numbers without a fraction.
pub fn js_stringify(value: &Value) -> String {
    fn normalize(v: &Value) -> Value {
        match v {
            Value::Number(n) if n.is_f64() => js_number(n.as_f64().unwrap_or(0.0)),
            Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
            Value::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), normalize(v))).collect())
            }
            other => other.clone(),
        }
    }
    normalize(value).to_string()
}

fn cache_retention(opts: &StreamOptions) -> String {
    if let Some(r) = &opts.cache_retention {
        return r.clone();
    }
    if std::env::var("PI_CACHE_RETENTION").as_deref() == Ok("long") {
        "long".into()
    } else {
        "short".into()
    }
}

fn has_tool_history(messages: &[Value]) -> bool {
    messages.iter().any(|m| {
        m["role"] == "toolResult"
            || (m["role"] == "assistant"
                && m["content"]
                    .as_array()
                    .is_some_and(|c| c.iter().any(|b| b["type"] == "toolCall")))
    })
}

/// pi-ai's `buildParams` for one call.
pub(crate) fn build(config: &OpenAiConfig, ctx: &LlmContext, opts: &StreamOptions) -> Value {
    let compat = compat::resolve(
        &config.provider,
        &config.base_url,
        &config.model_id,
        &config.compat,
        opts.pi,
    );
    let retention = cache_retention(opts);
    let long_ok = retention == "long" && compat.supports_long_cache_retention;
    let mut messages = convert_messages(config, ctx, &compat);
    let mut tools = if !ctx.tools.is_empty() {
        Some(convert_tools(&ctx.tools, &compat))
    } else if has_tool_history(&ctx.messages) {
        Some(Vec::new())
    } else {
        None
    };
    if compat.cache_control_format.as_deref() == Some("anthropic") && retention != "none" {
        let mut control = json!({"type": "ephemeral"});
        if long_ok {
            control["ttl"] = json!("1h");
        }
        apply_cache_control(&mut messages, tools.as_mut(), &control);
    }

    let mut p = Map::new();
    p.insert("model".into(), json!(config.model_id));
    p.insert("messages".into(), Value::Array(messages));
    p.insert("stream".into(), json!(true));
    let cache_key = (config.base_url.contains("api.openai.com") && retention != "none") || long_ok;
    if cache_key && let Some(session) = &opts.session_id {
        p.insert("prompt_cache_key".into(), json!(session));
    }
    if long_ok {
        p.insert("prompt_cache_retention".into(), json!("24h"));
    }
    if compat.supports_usage_in_streaming {
        p.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if compat.supports_store {
        p.insert("store".into(), json!(false));
    }
    let max_tokens = opts
        .max_tokens
        .or((config.max_tokens > 0).then(|| config.max_tokens.min(32000)))
        .filter(|n| *n > 0);
    if let Some(n) = max_tokens {
        let field = if compat.max_tokens_field == "max_tokens" {
            "max_tokens"
        } else {
            "max_completion_tokens"
        };
        p.insert(field.into(), json!(n));
    }
    if let Some(t) = opts.temperature {
        p.insert("temperature".into(), js_number(t));
    }
    if let Some(tools) = tools {
        let non_empty = !tools.is_empty();
        p.insert("tools".into(), Value::Array(tools));
        if non_empty && compat.zai_tool_stream {
            p.insert("tool_stream".into(), json!(true));
        }
    }
    if let Some(choice) = &opts.tool_choice {
        p.insert("tool_choice".into(), choice.clone());
    }

    let effort = (opts.thinking_level != "off" && !opts.thinking_level.is_empty())
        .then(|| clamp_thinking_level(config, &opts.thinking_level))
        .filter(|level| *level != "off");
    let reasoning = config.reasoning;
    match compat.thinking_format.as_str() {
        "zai" | "qwen" if reasoning => {
            p.insert("enable_thinking".into(), json!(effort.is_some()));
        }
        "qwen-chat-template" if reasoning => {
            p.insert(
                "chat_template_kwargs".into(),
                json!({"enable_thinking": effort.is_some(), "preserve_thinking": true}),
            );
        }
        "deepseek" if reasoning => {
            let kind = if effort.is_some() {
                "enabled"
            } else {
                "disabled"
            };
            p.insert("thinking".into(), json!({"type": kind}));
            if let Some(level) = effort {
                p.insert(
                    "reasoning_effort".into(),
                    json!(mapped_level(config, level)),
                );
            }
        }
        "openrouter" if reasoning => {
            if let Some(level) = effort {
                p.insert(
                    "reasoning".into(),
                    json!({"effort": mapped_level(config, level)}),
                );
            } else if !matches!(config.thinking_level_map.get("off"), Some(Value::Null)) {
                let off = config
                    .thinking_level_map
                    .get("off")
                    .and_then(Value::as_str)
                    .unwrap_or("none");
                p.insert("reasoning".into(), json!({"effort": off}));
            }
        }
        _ if reasoning && compat.supports_reasoning_effort => {
            if let Some(level) = effort {
                p.insert(
                    "reasoning_effort".into(),
                    json!(mapped_level(config, level)),
                );
            } else if let Some(off) = config.thinking_level_map.get("off").and_then(Value::as_str) {
                p.insert("reasoning_effort".into(), json!(off));
            }
        }
        _ => {}
    }

    if config.base_url.contains("openrouter.ai")
        && let Some(routing) = config.compat.get("openRouterRouting")
    {
        p.insert("provider".into(), routing.clone());
    }
    if config.base_url.contains("ai-gateway.vercel.sh")
        && let Some(routing) = config.compat.get("vercelGatewayRouting")
    {
        let mut gateway = Map::new();
        for key in ["only", "order"] {
            if let Some(v) = routing.get(key).filter(|v| !v.is_null()) {
                gateway.insert(key.into(), v.clone());
            }
        }
        if !gateway.is_empty() {
            p.insert("providerOptions".into(), json!({"gateway": gateway}));
        }
    }
    Value::Object(p)
}

fn convert_tools(tools: &[Value], compat: &Compat) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut function = Map::new();
            for key in ["name", "description", "parameters"] {
                if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
                    function.insert(key.into(), v.clone());
                }
            }
            if compat.supports_strict_mode {
                function.insert("strict".into(), json!(false));
            }
            json!({"type": "function", "function": function})
        })
        .collect()
}

fn text_blocks(content: &Value) -> impl Iterator<Item = &str> {
    content
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap_or_default())
}

fn image_url(block: &Value) -> Value {
    let url = format!(
        "data:{};base64,{}",
        block["mimeType"].as_str().unwrap_or_default(),
        block["data"].as_str().unwrap_or_default()
    );
    json!({"type": "image_url", "image_url": {"url": url}})
}

/// pi-ai's `convertMessages`: the system prompt, then the transformed conversation in chat
/// completions form.
pub(crate) fn convert_messages(
    config: &OpenAiConfig,
    ctx: &LlmContext,
    compat: &Compat,
) -> Vec<Value> {
    let provider = config.provider.clone();
    let normalize = move |id: &str| -> String {
        if let Some((call_id, _)) = id.split_once('|') {
            return call_id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .take(40)
                .collect();
        }
        if provider == "openai" {
            return id.chars().take(40).collect();
        }
        id.to_string()
    };
    let supports_images = config.input.iter().any(|i| i == "image");
    let target = Target {
        api: "openai-completions",
        provider: &config.provider,
        model_id: &config.model_id,
        supports_images,
    };
    let messages = transform_messages(&ctx.messages, &target, &normalize);

    let mut out = Vec::new();
    if !ctx.system_prompt.is_empty() {
        let role = if config.reasoning && compat.supports_developer_role {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": ctx.system_prompt}));
    }
    let mut last_role: Option<&str> = None;
    let mut i = 0;
    while i < messages.len() {
        let msg = &messages[i];
        let role = msg["role"].as_str().unwrap_or_default();
        if compat.requires_assistant_after_tool_result
            && last_role == Some("toolResult")
            && role == "user"
        {
            out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
        }
        match role {
            "user" => {
                if let Some(text) = msg["content"].as_str() {
                    out.push(json!({"role": "user", "content": text}));
                } else {
                    let content: Vec<Value> = msg["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|item| {
                            if item["type"] == "text" {
                                json!({"type": "text", "text": item["text"]})
                            } else {
                                image_url(item)
                            }
                        })
                        .collect();
                    if content.is_empty() {
                        i += 1;
                        continue;
                    }
                    out.push(json!({"role": "user", "content": content}));
                }
            }
            "assistant" => {
                // An assistant turn with nothing to send is skipped and does not count as
                // the last role.
                let Some(converted) = convert_assistant(config, compat, msg) else {
                    i += 1;
                    continue;
                };
                out.push(converted);
            }
            "toolResult" => {
                let mut images = Vec::new();
                let mut j = i;
                while j < messages.len() && messages[j]["role"] == "toolResult" {
                    let result = &messages[j];
                    let text = text_blocks(&result["content"])
                        .collect::<Vec<_>>()
                        .join("\n");
                    let content = if text.is_empty() {
                        "(see attached image)".to_string()
                    } else {
                        text
                    };
                    let mut m = Map::new();
                    m.insert("role".into(), json!("tool"));
                    m.insert("content".into(), json!(content));
                    m.insert("tool_call_id".into(), result["toolCallId"].clone());
                    if compat.requires_tool_result_name
                        && result["toolName"].as_str().is_some_and(|n| !n.is_empty())
                    {
                        m.insert("name".into(), result["toolName"].clone());
                    }
                    out.push(Value::Object(m));
                    if supports_images {
                        images.extend(
                            result["content"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter(|b| b["type"] == "image")
                                .map(image_url),
                        );
                    }
                    j += 1;
                }
                i = j;
                if images.is_empty() {
                    last_role = Some("toolResult");
                } else {
                    if compat.requires_assistant_after_tool_result {
                        out.push(json!({"role": "assistant", "content": "I have processed the tool results."}));
                    }
                    let mut content = vec![
                        json!({"type": "text", "text": "Attached image(s) from tool result:"}),
                    ];
                    content.extend(images);
                    out.push(json!({"role": "user", "content": content}));
                    last_role = Some("user");
                }
                continue;
            }
            _ => {}
        }
        last_role = Some(match role {
            "user" => "user",
            "assistant" => "assistant",
            _ => "other",
        });
        i += 1;
    }
    out
}

fn convert_assistant(config: &OpenAiConfig, compat: &Compat, msg: &Value) -> Option<Value> {
    let blocks = msg["content"].as_array().cloned().unwrap_or_default();
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert(
        "content".into(),
        if compat.requires_assistant_after_tool_result {
            json!("")
        } else {
            Value::Null
        },
    );
    let text_parts: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .filter(|t| !t.trim().is_empty())
        .collect();
    let text = text_parts.concat();
    let thinking: Vec<&Value> = blocks
        .iter()
        .filter(|b| b["type"] == "thinking")
        .filter(|b| !b["thinking"].as_str().unwrap_or_default().trim().is_empty())
        .collect();
    let thinking_text = |sep: &str| {
        thinking
            .iter()
            .map(|b| b["thinking"].as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(sep)
    };
    if !thinking.is_empty() {
        if compat.requires_thinking_as_text {
            let mut content = vec![json!({"type": "text", "text": thinking_text("\n\n")})];
            content.extend(
                text_parts
                    .iter()
                    .map(|t| json!({"type": "text", "text": t})),
            );
            m.insert("content".into(), Value::Array(content));
        } else {
            if !text.is_empty() {
                m.insert("content".into(), json!(text));
            }
            if let Some(signature) = thinking[0]["thinkingSignature"]
                .as_str()
                .filter(|s| !s.is_empty())
            {
                m.insert(signature.into(), json!(thinking_text("\n")));
            }
        }
    } else if !text.is_empty() {
        m.insert("content".into(), json!(text));
    }
    let calls: Vec<&Value> = blocks.iter().filter(|b| b["type"] == "toolCall").collect();
    if !calls.is_empty() {
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|c| {
                json!({
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": js_stringify(&c["arguments"])},
                })
            })
            .collect();
        m.insert("tool_calls".into(), Value::Array(tool_calls));
        let details: Vec<Value> = calls
            .iter()
            .filter_map(|c| c["thoughtSignature"].as_str().filter(|s| !s.is_empty()))
            .filter_map(|s| serde_json::from_str::<Value>(s).ok())
            .filter(|v| match v {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            })
            .collect();
        if !details.is_empty() {
            m.insert("reasoning_details".into(), Value::Array(details));
        }
    }
    if compat.requires_reasoning_content_on_assistant_messages
        && config.reasoning
        && !m.contains_key("reasoning_content")
    {
        m.insert("reasoning_content".into(), json!(""));
    }
    let has_content = match &m["content"] {
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        _ => false,
    };
    (has_content || m.contains_key("tool_calls")).then_some(Value::Object(m))
}

fn add_cache_control(message: &mut Value, control: &Value) -> bool {
    match &mut message["content"] {
        Value::String(s) if !s.is_empty() => {
            let text = std::mem::take(s);
            message["content"] = json!([{"type": "text", "text": text, "cache_control": control}]);
            true
        }
        Value::Array(parts) => {
            for part in parts.iter_mut().rev() {
                if part["type"] == "text" {
                    part["cache_control"] = control.clone();
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// Anthropic-style prompt caching through an OpenAI-compatible endpoint: markers on the
/// system prompt, the last tool and the last user/assistant text.
fn apply_cache_control(messages: &mut [Value], tools: Option<&mut Vec<Value>>, control: &Value) {
    if let Some(system) = messages
        .iter_mut()
        .find(|m| m["role"] == "system" || m["role"] == "developer")
    {
        add_cache_control(system, control);
    }
    if let Some(last) = tools.and_then(|t| t.last_mut()) {
        last["cache_control"] = control.clone();
    }
    for message in messages.iter_mut().rev() {
        if (message["role"] == "user" || message["role"] == "assistant")
            && add_cache_control(message, control)
        {
            return;
        }
    }
}
