//! The MCP servers extensions register (pi 1.6.0's `pi.registerMcpServer`): checked as pi
//! checks an `mcpServers` entry of mcp.json, kept per session in registration order, each
//! owned by the extension that registered it, and announced to extensions with
//! `mcp_servers_change`. pi's core only keeps this registry too; connecting the servers is the
//! job of pi's built-in MCP extension, which pichamber does not ship, so pichamber behaves as
//! pi does without it (`--no-extensions`): the servers are listed, never connected.

use serde_json::{Map, Value, json};

/// One registration.
#[derive(Debug, Clone)]
pub struct McpServer {
    pub name: String,
    /// The config with exposure aliases resolved.
    pub config: Value,
    /// The extension (load order) that registered it.
    pub extension: usize,
}

const EXPOSURES: [&str; 4] = ["codemode", "deferred", "direct", "hidden"];

fn exposure_alias(value: &Value) -> Value {
    match value.as_str() {
        Some("codemode-deferred") => json!("codemode"),
        _ => value.clone(),
    }
}

fn is_string_map(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.values().all(Value::is_string))
}

fn is_http_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https")
        && !rest.is_empty()
        && !rest.starts_with('/')
}

/// The config as pi stores it (exposure aliases resolved), or pi's reason it is not one.
pub fn validate(name: &str, raw: &Value) -> Result<Value, String> {
    let name_ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name_ok {
        return Err(format!(
            "invalid server name \"{name}\" (use letters, digits, \"_\" and \"-\")"
        ));
    }
    let Some(fields) = raw.as_object() else {
        return Err(format!("server \"{name}\" must be an object"));
    };
    let mut config: Map<String, Value> = fields.clone();
    if let Some(exposure) = fields.get("exposure") {
        config.insert("exposure".into(), exposure_alias(exposure));
    }
    if let Some(Value::Object(tools)) = fields.get("toolExposure") {
        let resolved = tools
            .iter()
            .map(|(k, v)| (k.clone(), exposure_alias(v)))
            .collect();
        config.insert("toolExposure".into(), Value::Object(resolved));
    }
    let field = |key: &str| config.get(key).filter(|v| !v.is_null());
    let problem = |error: &str| Err(format!("server \"{name}\": {error}"));
    if field("enabled").is_some_and(|v| !v.is_boolean()) {
        return problem("enabled must be a boolean");
    }
    if field("description").is_some_and(|v| !v.is_string()) {
        return problem("description must be a string");
    }
    if field("timeout").is_some_and(|v| !v.as_f64().is_some_and(|t| t > 0.0)) {
        return problem("timeout must be a positive number of seconds");
    }
    let kind = field("type").and_then(Value::as_str);
    if kind == Some("sse") {
        return problem("legacy SSE transport is not supported; use the streamable HTTP URL");
    }
    if let Some(url) = field("url").and_then(Value::as_str)
        && matches!(kind, None | Some("http" | "streamable-http"))
    {
        if !is_http_url(url) {
            return problem("url must be an http or https URL");
        }
        if field("headers").is_some_and(|h| !is_string_map(h)) {
            return problem("headers must map names to strings");
        }
        if field("oauth").is_some_and(|o| !o.is_object()) {
            return problem("oauth must be an object");
        }
        if let Some(auth) = field("auth")
            && auth["provider"].as_str().is_none_or(|p| p.is_empty())
        {
            return problem("auth.provider must be a provider name");
        }
    } else if field("command").is_some_and(Value::is_string) && matches!(kind, None | Some("stdio"))
    {
        let args_ok = field("args").is_none_or(|a| {
            a.as_array()
                .is_some_and(|items| items.iter().all(Value::is_string))
        });
        if !args_ok {
            return problem("args must be an array of strings");
        }
        if field("env").is_some_and(|e| !is_string_map(e)) {
            return problem("env must map names to strings");
        }
        if field("cwd").is_some_and(|c| !c.is_string()) {
            return problem("cwd must be a string");
        }
    } else {
        return Err(format!(
            "server \"{name}\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
        ));
    }
    let listed = EXPOSURES
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let is_exposure = |v: &Value| v.as_str().is_some_and(|e| EXPOSURES.contains(&e));
    if field("exposure").is_some_and(|e| !is_exposure(e)) {
        return problem(&format!("exposure must be one of {listed}"));
    }
    match field("toolExposure") {
        None => {}
        Some(Value::Object(tools)) => {
            if let Some((tool, _)) = tools.iter().find(|(_, v)| !is_exposure(v)) {
                return problem(&format!("toolExposure \"{tool}\" must be one of {listed}"));
            }
        }
        Some(_) => return problem("toolExposure must map tool names to exposures"),
    }
    Ok(Value::Object(config))
}

/// pi's `getMcpServers()` entries; `path` names an extension as pi's `extensionPath` does.
pub fn listing(servers: &[McpServer], path: impl Fn(usize) -> String) -> Value {
    Value::Array(
        servers
            .iter()
            .map(|s| json!({ "name": s.name, "config": s.config, "extensionPath": path(s.extension) }))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_checked_as_pi_checks_them() {
        let ok = validate(
            "docs",
            &json!({"command": "d", "exposure": "codemode-deferred"}),
        );
        assert_eq!(ok.unwrap()["exposure"], "codemode");
        assert!(validate("both", &json!({"command": "x", "url": "https://x"})).is_ok());
        assert!(validate("extra", &json!({"command": "x", "bogus": 1})).is_ok());
        let err = |name: &str, config: Value| validate(name, &config).unwrap_err();
        assert_eq!(
            err("bad name", json!({"command": "x"})),
            "invalid server name \"bad name\" (use letters, digits, \"_\" and \"-\")"
        );
        assert_eq!(
            err("empty", json!({})),
            "server \"empty\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
        );
        assert_eq!(
            err("num", json!({"command": 5})),
            "server \"num\" needs either \"command\" (stdio) or \"url\" (streamable HTTP)"
        );
        assert_eq!(
            err("badexp", json!({"command": "x", "exposure": "loud"})),
            "server \"badexp\": exposure must be one of \"codemode\", \"deferred\", \"direct\", \"hidden\""
        );
        assert_eq!(
            err("u", json!({"url": "ftp://x"})),
            "server \"u\": url must be an http or https URL"
        );
        assert_eq!(
            err("a", json!({"command": "x", "args": [1]})),
            "server \"a\": args must be an array of strings"
        );
    }
}
