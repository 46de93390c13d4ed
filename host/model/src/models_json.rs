//! pi's `models.json` custom providers (docs/models.md), so a user's pi configuration works
//! unchanged: `{"providers": {"<name>": {baseUrl, api, apiKey, headers, authHeader, compat,
//! models: [{id, name, api, baseUrl, reasoning, thinkingLevelMap, input, cost,
//! contextWindow, maxTokens, headers, compat}]}}}`, `//` comments and trailing commas
//! allowed. Only `openai-completions` models can be called.
//!
//! `apiKey` and header values resolve as pi resolves them: `!command` runs the command with
//! `sh -c` and uses its trimmed output, otherwise the value names an environment variable
//! when one is set (and non-empty), else it is the literal value. pi resolves at request
//! time; here it happens when [`ModelsJson::openai_config`] builds the model's config. A
//! built-in provider listed without `apiKey` falls back to its usual environment variable
//! (`OPENAI_API_KEY`, ...) as in pi-ai. pi's `auth.json` (which takes precedence in pi) is
//! not read here.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::openai::{ModelCost, OpenAiConfig};

/// pi-ai's built-in providers: they may list models without `baseUrl`/`apiKey` in pi (which
/// then inherits them); pichamber has no built-in catalogue to inherit from.
const BUILT_IN_PROVIDERS: &[&str] = &[
    "amazon-bedrock",
    "anthropic",
    "google",
    "google-vertex",
    "openai",
    "azure-openai-responses",
    "openai-codex",
    "deepseek",
    "github-copilot",
    "xai",
    "groq",
    "cerebras",
    "openrouter",
    "vercel-ai-gateway",
    "zai",
    "mistral",
    "minimax",
    "minimax-cn",
    "moonshotai",
    "moonshotai-cn",
    "huggingface",
    "fireworks",
    "opencode",
    "opencode-go",
    "kimi-coding",
    "cloudflare-workers-ai",
    "cloudflare-ai-gateway",
    "xiaomi",
    "xiaomi-token-plan-cn",
    "xiaomi-token-plan-ams",
    "xiaomi-token-plan-sgp",
];

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProviderConfig {
    base_url: Option<String>,
    api_key: Option<String>,
    api: Option<String>,
    headers: Option<Map<String, Value>>,
    compat: Option<Map<String, Value>>,
    auth_header: Option<bool>,
    models: Option<Vec<ModelDefinition>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ModelDefinition {
    id: String,
    name: Option<String>,
    api: Option<String>,
    base_url: Option<String>,
    reasoning: Option<bool>,
    thinking_level_map: Option<Map<String, Value>>,
    input: Option<Vec<String>>,
    cost: Option<Cost>,
    context_window: Option<f64>,
    max_tokens: Option<f64>,
    headers: Option<Map<String, Value>>,
    compat: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Cost {
    input: f64,
    output: f64,
    cache_read: f64,
    cache_write: f64,
}

/// A custom model listed in models.json.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEntry {
    pub provider: String,
    pub id: String,
    pub name: String,
    pub api: String,
}

/// A loaded models.json.
#[derive(Debug, Clone)]
pub struct ModelsJson {
    path: PathBuf,
    providers: Vec<(String, ProviderConfig)>,
}

/// `$PI_CODING_AGENT_DIR/models.json`, else `~/.pi/agent/models.json`.
pub fn default_path() -> PathBuf {
    let dir = std::env::var_os("PI_CODING_AGENT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_default();
            Path::new(&home).join(".pi").join("agent")
        });
    dir.join("models.json")
}

/// Removes `//` line comments and trailing commas outside string literals, as pi does before
/// parsing.
fn strip_json_comments(input: &str) -> String {
    let chars: Vec<char> = input.chars().collect();
    let mut no_comments = String::with_capacity(input.len());
    let mut i = 0;
    let mut in_string = false;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            no_comments.push(c);
            if c == '\\' && i + 1 < chars.len() {
                no_comments.push(chars[i + 1]);
                i += 1;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            no_comments.push(c);
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        } else {
            no_comments.push(c);
        }
        i += 1;
    }
    let chars: Vec<char> = no_comments.chars().collect();
    let mut out = String::with_capacity(no_comments.len());
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            out.push(c);
            if c == '\\' && i + 1 < chars.len() {
                out.push(chars[i + 1]);
                i += 1;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}') | Some(']')) {
                out.push(c);
            }
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

/// The environment variables pi-ai reads a built-in provider's key from when none is
/// configured (`getEnvApiKey`); the first one set wins.
fn env_key_vars(provider: &str) -> &'static [&'static str] {
    match provider {
        "github-copilot" => &["COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"],
        "anthropic" => &["ANTHROPIC_OAUTH_TOKEN", "ANTHROPIC_API_KEY"],
        "openai" => &["OPENAI_API_KEY"],
        "azure-openai-responses" => &["AZURE_OPENAI_API_KEY"],
        "deepseek" => &["DEEPSEEK_API_KEY"],
        "google" => &["GEMINI_API_KEY"],
        "google-vertex" => &["GOOGLE_CLOUD_API_KEY"],
        "groq" => &["GROQ_API_KEY"],
        "cerebras" => &["CEREBRAS_API_KEY"],
        "xai" => &["XAI_API_KEY"],
        "openrouter" => &["OPENROUTER_API_KEY"],
        "vercel-ai-gateway" => &["AI_GATEWAY_API_KEY"],
        "zai" => &["ZAI_API_KEY"],
        "mistral" => &["MISTRAL_API_KEY"],
        "minimax" => &["MINIMAX_API_KEY"],
        "minimax-cn" => &["MINIMAX_CN_API_KEY"],
        "moonshotai" | "moonshotai-cn" => &["MOONSHOT_API_KEY"],
        "huggingface" => &["HF_TOKEN"],
        "fireworks" => &["FIREWORKS_API_KEY"],
        "opencode" | "opencode-go" => &["OPENCODE_API_KEY"],
        "kimi-coding" => &["KIMI_API_KEY"],
        "cloudflare-workers-ai" | "cloudflare-ai-gateway" => &["CLOUDFLARE_API_KEY"],
        "xiaomi" => &["XIAOMI_API_KEY"],
        "xiaomi-token-plan-cn" => &["XIAOMI_TOKEN_PLAN_CN_API_KEY"],
        "xiaomi-token-plan-ams" => &["XIAOMI_TOKEN_PLAN_AMS_API_KEY"],
        "xiaomi-token-plan-sgp" => &["XIAOMI_TOKEN_PLAN_SGP_API_KEY"],
        _ => &[],
    }
}

/// A built-in provider's key from its environment variable, as pi-ai's `getEnvApiKey`.
pub fn env_api_key(provider: &str) -> Option<String> {
    env_key_vars(provider)
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
}

/// pi's `resolveConfigValue`: `!command` output, an environment variable, or the literal.
pub fn resolve_config_value(value: &str) -> Option<String> {
    if let Some(command) = value.strip_prefix('!') {
        let output = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        if !output.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
        return (!text.is_empty()).then_some(text);
    }
    match std::env::var(value) {
        Ok(v) if !v.is_empty() => Some(v),
        _ => Some(value.to_string()),
    }
}

fn resolve_or_fail(value: &str, description: &str) -> anyhow::Result<String> {
    match resolve_config_value(value) {
        Some(v) => Ok(v),
        None => match value.strip_prefix('!') {
            Some(command) => {
                bail!("Failed to resolve {description} from shell command: {command}")
            }
            None => bail!("Failed to resolve {description}"),
        },
    }
}

fn resolve_headers(
    headers: &Map<String, Value>,
    description: &str,
    out: &mut Vec<(String, String)>,
) -> anyhow::Result<()> {
    for (name, value) in headers {
        let Some(value) = value.as_str() else {
            bail!("{description} header \"{name}\": expected a string");
        };
        let resolved = resolve_or_fail(value, &format!("{description} header \"{name}\""))?;
        out.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        out.push((name.clone(), resolved));
    }
    Ok(())
}

/// pi's `mergeCompat`: model flags over provider flags, routing objects merged key by key.
fn merge_compat(
    base: Option<&Map<String, Value>>,
    over: Option<&Map<String, Value>>,
) -> Map<String, Value> {
    let mut merged = base.cloned().unwrap_or_default();
    let Some(over) = over else {
        return merged;
    };
    for (k, v) in over {
        merged.insert(k.clone(), v.clone());
    }
    for key in ["openRouterRouting", "vercelGatewayRouting"] {
        let b = base.and_then(|b| b.get(key)).and_then(Value::as_object);
        let o = over.get(key).and_then(Value::as_object);
        if b.is_some() || o.is_some() {
            let mut routing = b.cloned().unwrap_or_default();
            routing.extend(o.cloned().unwrap_or_default());
            merged.insert(key.into(), Value::Object(routing));
        }
    }
    merged
}

impl ModelsJson {
    /// Loads and checks a models.json; errors name the file.
    pub fn load(path: &Path) -> anyhow::Result<ModelsJson> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        ModelsJson::parse(&text, path)
            .with_context(|| format!("Failed to load models.json\n\nFile: {}", path.display()))
    }

    fn parse(text: &str, path: &Path) -> anyhow::Result<ModelsJson> {
        let value: Value = serde_json::from_str(&strip_json_comments(text))
            .map_err(|e| anyhow::anyhow!("invalid JSON: {e}"))?;
        let Some(providers) = value.get("providers").and_then(Value::as_object) else {
            bail!("providers: expected an object of providers");
        };
        let mut parsed = Vec::new();
        for (name, config) in providers {
            let provider: ProviderConfig = match ProviderConfig::deserialize(config) {
                Ok(p) => p,
                Err(e) => {
                    let detail = config
                        .get("models")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .enumerate()
                        .find_map(|(i, m)| {
                            ModelDefinition::deserialize(m)
                                .err()
                                .map(|e| format!("providers.{name}.models.{i}: {e}"))
                        });
                    bail!(
                        "{}",
                        detail.unwrap_or_else(|| format!("providers.{name}: {e}"))
                    );
                }
            };
            validate(name, &provider)?;
            parsed.push((name.clone(), provider));
        }
        Ok(ModelsJson {
            path: path.to_path_buf(),
            providers: parsed,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every custom model with a known API, in file order.
    pub fn models(&self) -> Vec<ModelEntry> {
        let mut out = Vec::new();
        for (provider, config) in &self.providers {
            for model in config.models.iter().flatten() {
                let Some(api) = model.api.as_ref().or(config.api.as_ref()) else {
                    continue;
                };
                out.push(ModelEntry {
                    provider: provider.clone(),
                    id: model.id.clone(),
                    name: model.name.clone().unwrap_or_else(|| model.id.clone()),
                    api: api.clone(),
                });
            }
        }
        out
    }

    /// The callable configuration of `provider`/`model_id`, with its API key and headers
    /// resolved.
    pub fn openai_config(&self, provider: &str, model_id: &str) -> anyhow::Result<OpenAiConfig> {
        let Some((_, config)) = self.providers.iter().find(|(name, _)| name == provider) else {
            bail!("provider \"{provider}\" is not in {}", self.path.display());
        };
        let Some(model) = config.models.iter().flatten().find(|m| m.id == model_id) else {
            bail!(
                "model \"{model_id}\" of provider \"{provider}\" is not in {}",
                self.path.display()
            );
        };
        let api = model.api.as_ref().or(config.api.as_ref());
        if api.map(String::as_str) != Some("openai-completions") {
            bail!(
                "model {provider}/{model_id} uses api {}; pichamber can call only \"openai-completions\"",
                api.map(|a| format!("\"{a}\""))
                    .unwrap_or_else(|| "(none)".into())
            );
        }
        let Some(base_url) = model.base_url.as_ref().or(config.base_url.as_ref()) else {
            bail!("Provider {provider}: \"baseUrl\" is required when defining custom models.");
        };
        let mut c = OpenAiConfig::new(provider, model_id, base_url);
        c.name = model.name.clone().unwrap_or_else(|| model_id.to_string());
        c.reasoning = model.reasoning.unwrap_or(false);
        c.thinking_level_map = model.thinking_level_map.clone().unwrap_or_default();
        if let Some(input) = &model.input {
            c.input = input.clone();
        }
        if let Some(cost) = model.cost {
            c.cost = ModelCost {
                input: cost.input,
                output: cost.output,
                cache_read: cost.cache_read,
                cache_write: cost.cache_write,
            };
        }
        if let Some(w) = model.context_window {
            c.context_window = w as u64;
        }
        if let Some(m) = model.max_tokens {
            c.max_tokens = m as u64;
        }
        c.compat = merge_compat(config.compat.as_ref(), model.compat.as_ref());
        c.api_key = match &config.api_key {
            Some(key) => Some(resolve_or_fail(
                key,
                &format!("API key for provider \"{provider}\""),
            )?),
            None => {
                c.api_key_env = env_key_vars(provider)
                    .iter()
                    .map(|v| v.to_string())
                    .collect();
                env_api_key(provider)
            }
        };
        let mut headers = Vec::new();
        if let Some(h) = &config.headers {
            resolve_headers(h, &format!("provider \"{provider}\""), &mut headers)?;
        }
        if let Some(h) = &model.headers {
            resolve_headers(h, &format!("model \"{provider}/{model_id}\""), &mut headers)?;
        }
        if config.auth_header == Some(true) {
            let Some(key) = &c.api_key else {
                bail!("No API key found for \"{provider}\"");
            };
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("authorization"));
            headers.push(("Authorization".into(), format!("Bearer {key}")));
        }
        c.headers = headers;
        Ok(c)
    }
}

/// pi's `validateConfig` checks.
fn validate(name: &str, p: &ProviderConfig) -> anyhow::Result<()> {
    let built_in = BUILT_IN_PROVIDERS.contains(&name);
    let models = p.models.as_deref().unwrap_or_default();
    if models.is_empty() {
        if p.base_url.is_none() && p.headers.is_none() && p.compat.is_none() {
            bail!(
                "Provider {name}: must specify \"baseUrl\", \"headers\", \"compat\", \"modelOverrides\", or \"models\"."
            );
        }
    } else if !built_in {
        if p.base_url.is_none() {
            bail!("Provider {name}: \"baseUrl\" is required when defining custom models.");
        }
        if p.api_key.is_none() {
            bail!("Provider {name}: \"apiKey\" is required when defining custom models.");
        }
    }
    for m in models {
        if p.api.is_none() && m.api.is_none() && !built_in {
            bail!(
                "Provider {name}, model {}: no \"api\" specified. Set at provider or model level.",
                m.id
            );
        }
        if m.id.is_empty() {
            bail!("Provider {name}: model missing \"id\"");
        }
        if m.context_window.is_some_and(|w| w <= 0.0) {
            bail!("Provider {name}, model {}: invalid contextWindow", m.id);
        }
        if m.max_tokens.is_some_and(|t| t <= 0.0) {
            bail!("Provider {name}, model {}: invalid maxTokens", m.id);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<ModelsJson> {
        ModelsJson::parse(text, Path::new("/x/models.json"))
    }

    #[test]
    fn minimal_provider_gets_pi_defaults() {
        let m = parse(
            r#"{
              // local models
              "providers": {"ollama": {"baseUrl": "http://localhost:11434/v1",
                "api": "openai-completions", "apiKey": "ollama",
                "models": [{"id": "llama3.1:8b"},]}}}"#,
        )
        .unwrap();
        assert_eq!(m.models().len(), 1);
        let c = m.openai_config("ollama", "llama3.1:8b").unwrap();
        assert_eq!(c.base_url, "http://localhost:11434/v1");
        assert_eq!(c.api_key.as_deref(), Some("ollama"));
        assert_eq!(c.name, "llama3.1:8b");
        assert_eq!((c.context_window, c.max_tokens), (128_000, 16_384));
        assert_eq!(c.input, ["text"]);
        assert!(!c.reasoning);
    }

    #[test]
    fn values_resolve_from_commands_env_and_literals() {
        assert_eq!(
            resolve_config_value("!echo  secret ").as_deref(),
            Some("secret")
        );
        assert_eq!(resolve_config_value("!false"), None);
        assert_eq!(
            resolve_config_value("PICHAMBER_SURELY_UNSET_VAR").as_deref(),
            Some("PICHAMBER_SURELY_UNSET_VAR")
        );
        let home = std::env::var("HOME").unwrap();
        assert_eq!(resolve_config_value("HOME"), Some(home));
    }

    #[test]
    fn headers_auth_header_and_compat_merge() {
        let m = parse(
            r#"{"providers": {"p": {"baseUrl": "http://h/v1", "api": "openai-completions",
                "apiKey": "k", "authHeader": true, "headers": {"x-a": "1"},
                "compat": {"supportsStore": false, "openRouterRouting": {"only": ["a"]}},
                "models": [{"id": "m", "headers": {"x-b": "2"},
                            "compat": {"supportsDeveloperRole": false,
                                       "openRouterRouting": {"order": ["b"]}}}]}}}"#,
        )
        .unwrap();
        let c = m.openai_config("p", "m").unwrap();
        assert_eq!(
            c.headers,
            [
                ("x-a".to_string(), "1".to_string()),
                ("x-b".to_string(), "2".to_string()),
                ("Authorization".to_string(), "Bearer k".to_string())
            ]
        );
        assert_eq!(c.compat["supportsStore"], false);
        assert_eq!(c.compat["supportsDeveloperRole"], false);
        assert_eq!(
            c.compat["openRouterRouting"],
            serde_json::json!({"only": ["a"], "order": ["b"]})
        );
    }

    #[test]
    fn errors_are_pis() {
        let e = parse(r#"{"providers": {"p": {"api": "openai-completions", "apiKey": "k", "models": [{"id": "m"}]}}}"#)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "Provider p: \"baseUrl\" is required when defining custom models."
        );
        let e = parse(
            r#"{"providers": {"p": {"baseUrl": "u", "apiKey": "k", "models": [{"id": "m"}]}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("no \"api\" specified"), "{e}");
        let e = parse(
            r#"{"providers": {"p": {"baseUrl": "u", "apiKey": "k", "models": [{"name": "m"}]}}}"#,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "providers.p.models.0: missing field `id`");
        let m = parse(r#"{"providers": {"a": {"baseUrl": "u", "apiKey": "k", "api": "anthropic-messages", "models": [{"id": "c"}]}}}"#)
            .unwrap();
        let e = m.openai_config("a", "c").unwrap_err().to_string();
        assert!(e.contains("can call only \"openai-completions\""), "{e}");
    }
}
