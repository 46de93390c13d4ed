//! Which OpenAI chat-completions dialect an endpoint speaks. pi-ai guesses it from the
//! provider name and base URL (`detectCompat`) and lets a model's `compat` object
//! (models.json) override each flag (`getCompat`).

use pichamber_pi::PiVersion;
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compat {
    pub supports_store: bool,
    pub supports_developer_role: bool,
    pub supports_reasoning_effort: bool,
    pub supports_usage_in_streaming: bool,
    /// `max_completion_tokens` or `max_tokens`.
    pub max_tokens_field: String,
    pub requires_tool_result_name: bool,
    pub requires_assistant_after_tool_result: bool,
    pub requires_thinking_as_text: bool,
    pub requires_reasoning_content_on_assistant_messages: bool,
    /// `openai`, `openrouter`, `deepseek`, `zai`, `qwen` or `qwen-chat-template`.
    pub thinking_format: String,
    pub zai_tool_stream: bool,
    pub supports_strict_mode: bool,
    /// `anthropic` or none.
    pub cache_control_format: Option<String>,
    pub send_session_affinity_headers: bool,
    pub supports_long_cache_retention: bool,
}

fn detect(provider: &str, base_url: &str, model_id: &str, pi: PiVersion) -> Compat {
    let url = |s: &str| base_url.contains(s);
    let zai = provider == "zai" || url("api.z.ai");
    let moonshot = provider == "moonshotai" || provider == "moonshotai-cn" || url("api.moonshot.");
    let cf_workers = provider == "cloudflare-workers-ai" || url("api.cloudflare.com");
    let cf_gateway = provider == "cloudflare-ai-gateway" || url("gateway.ai.cloudflare.com");
    let non_standard = provider == "cerebras"
        || url("cerebras.ai")
        || provider == "xai"
        || url("api.x.ai")
        || url("chutes.ai")
        || url("deepseek.com")
        || zai
        || moonshot
        || provider == "opencode"
        || url("opencode.ai")
        || cf_workers
        || cf_gateway;
    let use_max_tokens = url("chutes.ai") || moonshot || cf_gateway;
    let grok = provider == "xai" || url("api.x.ai");
    let deepseek = provider == "deepseek" || url("deepseek.com");
    let thinking_format = if deepseek {
        "deepseek"
    } else if zai {
        "zai"
    } else if provider == "openrouter" || url("openrouter.ai") {
        "openrouter"
    } else {
        "openai"
    };
    // pi 1.6.0 assumes the developer role and strict tool schemas only where it knows them.
    let openai = provider == "openai" || url("api.openai.com");
    Compat {
        supports_store: !non_standard,
        supports_developer_role: if pi.is_1_6() { openai } else { !non_standard },
        supports_reasoning_effort: !grok && !zai && !moonshot && !cf_gateway,
        supports_usage_in_streaming: true,
        max_tokens_field: if use_max_tokens {
            "max_tokens"
        } else {
            "max_completion_tokens"
        }
        .into(),
        requires_tool_result_name: false,
        requires_assistant_after_tool_result: false,
        requires_thinking_as_text: false,
        requires_reasoning_content_on_assistant_messages: deepseek,
        thinking_format: thinking_format.into(),
        zai_tool_stream: false,
        supports_strict_mode: !pi.is_1_6() && !moonshot && !cf_gateway,
        cache_control_format: (provider == "openrouter" && model_id.starts_with("anthropic/"))
            .then(|| "anthropic".to_string()),
        send_session_affinity_headers: false,
        supports_long_cache_retention: !(cf_workers || cf_gateway),
    }
}

/// The detected dialect with the model's explicit `compat` flags applied.
pub(crate) fn resolve(
    provider: &str,
    base_url: &str,
    model_id: &str,
    overrides: &Map<String, Value>,
    pi: PiVersion,
) -> Compat {
    let mut c = detect(provider, base_url, model_id, pi);
    let flag = |name: &str, current: bool| {
        overrides
            .get(name)
            .and_then(Value::as_bool)
            .unwrap_or(current)
    };
    let text = |name: &str, current: &str| {
        overrides
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or(current)
            .to_string()
    };
    c.supports_store = flag("supportsStore", c.supports_store);
    c.supports_developer_role = flag("supportsDeveloperRole", c.supports_developer_role);
    c.supports_reasoning_effort = flag("supportsReasoningEffort", c.supports_reasoning_effort);
    c.supports_usage_in_streaming = flag("supportsUsageInStreaming", c.supports_usage_in_streaming);
    c.max_tokens_field = text("maxTokensField", &c.max_tokens_field);
    c.requires_tool_result_name = flag("requiresToolResultName", c.requires_tool_result_name);
    c.requires_assistant_after_tool_result = flag(
        "requiresAssistantAfterToolResult",
        c.requires_assistant_after_tool_result,
    );
    c.requires_thinking_as_text = flag("requiresThinkingAsText", c.requires_thinking_as_text);
    c.requires_reasoning_content_on_assistant_messages = flag(
        "requiresReasoningContentOnAssistantMessages",
        c.requires_reasoning_content_on_assistant_messages,
    );
    c.thinking_format = text("thinkingFormat", &c.thinking_format);
    c.zai_tool_stream = flag("zaiToolStream", c.zai_tool_stream);
    c.supports_strict_mode = flag("supportsStrictMode", c.supports_strict_mode);
    if let Some(format) = overrides.get("cacheControlFormat").and_then(Value::as_str) {
        c.cache_control_format = Some(format.into());
    }
    c.send_session_affinity_headers = flag(
        "sendSessionAffinityHeaders",
        c.send_session_affinity_headers,
    );
    c.supports_long_cache_retention = flag(
        "supportsLongCacheRetention",
        c.supports_long_cache_retention,
    );
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn custom_endpoints_are_standard_openai() {
        let c = resolve(
            "ollama",
            "http://localhost:11434/v1",
            "llama",
            &Map::new(),
            PiVersion::V0_73,
        );
        assert!(c.supports_strict_mode && c.supports_developer_role);
        assert!(c.supports_store && c.supports_reasoning_effort);
        assert_eq!(c.max_tokens_field, "max_completion_tokens");
        assert_eq!(c.thinking_format, "openai");
        let c = resolve(
            "ollama",
            "http://localhost:11434/v1",
            "llama",
            &Map::new(),
            PiVersion::V1_6,
        );
        assert!(!c.supports_strict_mode && !c.supports_developer_role);
        let c = resolve(
            "openai",
            "https://api.openai.com/v1",
            "gpt",
            &Map::new(),
            PiVersion::V1_6,
        );
        assert!(c.supports_developer_role);
    }

    #[test]
    fn known_hosts_and_overrides() {
        let c = resolve(
            "x",
            "https://api.deepseek.com/v1",
            "d",
            &Map::new(),
            PiVersion::V0_73,
        );
        assert!(!c.supports_store && c.requires_reasoning_content_on_assistant_messages);
        assert_eq!(c.thinking_format, "deepseek");
        let overrides = json!({"supportsDeveloperRole": false, "maxTokensField": "max_tokens"});
        let c = resolve(
            "x",
            "http://h/v1",
            "m",
            overrides.as_object().unwrap(),
            PiVersion::V0_73,
        );
        assert!(!c.supports_developer_role);
        assert_eq!(c.max_tokens_field, "max_tokens");
    }
}
