//! MCP server configs as pi 1.6.0 reads them: an `mcpServers` entry checked as pi checks it,
//! and the agent's mcp.json merged with a trusted project's `.pi/mcp.json`.

use std::path::Path;

use serde_json::{Map, Value, json};

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

/// Where a server's config comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The agent's mcp.json: the operator's, run as pi runs it.
    Global,
    /// A trusted project's `.pi/mcp.json`.
    Project,
    /// `pi.registerMcpServer` of the extension at this index (load order): it runs with that
    /// extension's grants.
    Extension(usize),
}

/// One server of a session.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// Checked by [`validate`]; a project override already merged in.
    pub config: Value,
    pub scope: Scope,
    /// The file it was read from, or the extension's path (pi's `source`).
    pub source: String,
}

impl Entry {
    pub fn enabled(&self) -> bool {
        self.config["enabled"] != json!(false)
    }

    /// The server's exposure: `codemode` unless it says otherwise.
    pub fn exposure(&self) -> &str {
        self.config["exposure"].as_str().unwrap_or("codemode")
    }

    /// The exposures its tools can have, known before it connects.
    pub fn configured_exposures(&self) -> Vec<&str> {
        let mut all = vec![self.exposure()];
        if let Some(tools) = self.config["toolExposure"].as_object() {
            all.extend(tools.values().filter_map(Value::as_str));
        }
        all
    }

    /// A tool's exposure as pi picks it: its own `toolExposure` key, then the first `*`
    /// pattern matching it, then the server's.
    pub fn tool_exposure(&self, tool: &str) -> &str {
        let Some(tools) = self.config["toolExposure"].as_object() else {
            return self.exposure();
        };
        if let Some(e) = tools.get(tool).and_then(Value::as_str) {
            return e;
        }
        tools
            .iter()
            .filter(|(pattern, _)| pattern.contains('*'))
            .find(|(pattern, _)| wildcard_matches(pattern, tool))
            .and_then(|(_, e)| e.as_str())
            .unwrap_or_else(|| self.exposure())
    }
}

/// `*` matches any run of characters; everything else matches itself.
fn wildcard_matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return pattern == name;
    }
    if !name.starts_with(first) || name.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    if !name.ends_with(last) {
        return false;
    }
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// pi's namespace of a server's tools: `mcp__` and its name with `-` as `_`.
pub fn namespace(server: &str) -> String {
    format!("mcp__{}", server.replace('-', "_"))
}

/// What a session's mcp.json files say.
#[derive(Debug, Default)]
pub struct Loaded {
    pub servers: Vec<Entry>,
    /// One line per problem, each naming its file.
    pub errors: Vec<String>,
    pub auto_enable_codemode: Option<bool>,
}

/// The agent's mcp.json, then the project's `.pi/mcp.json` when the project is trusted
/// (`project` is its folder): a project entry replaces the agent's of the same name in its
/// place, and one with neither `command` nor `url` only overrides the agent's `enabled` and
/// exposures. Broken entries are left out, each with a line in `errors`.
pub fn load(agent_dir: &Path, project: Option<&Path>) -> Loaded {
    let mut loaded = Loaded::default();
    let files = std::iter::once((agent_dir.join("mcp.json"), Scope::Global))
        .chain(project.map(|p| (p.join(".pi").join("mcp.json"), Scope::Project)));
    for (path, scope) in files {
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let shown = path.display().to_string();
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let file: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                loaded.errors.push(format!("{shown}: {e}"));
                continue;
            }
        };
        let Some(servers) = file["mcpServers"].as_object().filter(|_| file.is_object()) else {
            loaded.errors.push(format!(
                "{shown}: expected an object with an \"mcpServers\" object"
            ));
            continue;
        };
        match &file["autoEnableCodemode"] {
            Value::Null => {}
            Value::Bool(b) => loaded.auto_enable_codemode = Some(*b),
            _ => loaded
                .errors
                .push(format!("{shown}: autoEnableCodemode must be a boolean")),
        }
        for (name, raw) in servers {
            if let Err(e) = add(&mut loaded.servers, name, raw, &scope, &shown) {
                loaded.errors.push(format!("{shown}: {e}"));
            }
        }
    }
    loaded
}

const OVERRIDABLE: [&str; 3] = ["enabled", "exposure", "toolExposure"];

fn add(
    servers: &mut Vec<Entry>,
    name: &str,
    raw: &Value,
    scope: &Scope,
    source: &str,
) -> Result<(), String> {
    let is_override = *scope == Scope::Project
        && raw.is_object()
        && ["command", "url", "type"]
            .iter()
            .all(|k| raw.get(k).is_none());
    let config = if is_override {
        let Some(base) = servers
            .iter()
            .find(|s| s.name == name && s.scope == Scope::Global)
        else {
            return Err(format!(
                "server \"{name}\" needs \"command\" or \"url\", or a global server to override"
            ));
        };
        let fields = raw.as_object().expect("checked above");
        if fields.keys().any(|k| !OVERRIDABLE.contains(&k.as_str())) {
            return Err(format!(
                "server \"{name}\": an override can only set enabled, exposure, toolExposure"
            ));
        }
        let mut merged = base.config.clone();
        for (k, v) in fields {
            merged[k] = v.clone();
        }
        validate(name, &merged)?
    } else {
        if *scope == Scope::Project && raw.get("url").is_some() && raw.get("auth").is_some() {
            return Err(format!(
                "server \"{name}\": auth is only allowed in the global mcp.json"
            ));
        }
        validate(name, raw)?
    };
    let ns = namespace(name);
    if let Some(other) = servers
        .iter()
        .find(|s| s.name != name && namespace(&s.name) == ns)
    {
        return Err(format!(
            "server \"{name}\" conflicts with \"{}\"",
            other.name
        ));
    }
    let entry = Entry {
        name: name.to_owned(),
        config,
        scope: if is_override {
            Scope::Global
        } else {
            scope.clone()
        },
        source: source.to_owned(),
    };
    match servers.iter_mut().find(|s| s.name == name) {
        Some(existing) => {
            // An override keeps the server the agent's file defines (and its source).
            let source = if is_override {
                existing.source.clone()
            } else {
                entry.source.clone()
            };
            *existing = Entry { source, ..entry };
        }
        None => servers.push(entry),
    }
    Ok(())
}

/// A config value as pi resolves one (`env` and `headers` values): `!COMMAND` is the trimmed
/// output of a shell command (10 s at most), otherwise `$VAR` and `${VAR}` are replaced by
/// variables of `env` (`$$` and `$!` stand for `$` and `!`). `description` names the value in
/// the error, as pi names it (`MCP server "docs" env "TOKEN"`).
pub async fn resolve_value(
    value: &str,
    description: &str,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<String, String> {
    if let Some(command) = value.strip_prefix('!') {
        let run = tokio::process::Command::new("sh")
            .args(["-c", command])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(std::time::Duration::from_secs(10), run).await;
        return match output {
            Ok(Ok(out)) if out.status.success() => {
                let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if text.is_empty() {
                    Err(format!(
                        "Failed to resolve {description} from shell command: {command}"
                    ))
                } else {
                    Ok(text)
                }
            }
            _ => Err(format!(
                "Failed to resolve {description} from shell command: {command}"
            )),
        };
    }
    let mut out = String::new();
    let mut missing: Vec<String> = Vec::new();
    let mut rest = value;
    let name_len = |s: &str| {
        s.char_indices()
            .take_while(|(i, c)| {
                c.is_ascii_alphabetic() || *c == '_' || (*i > 0 && c.is_ascii_digit())
            })
            .count()
    };
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let mut lookup = |name: &str, out: &mut String| match env(name).filter(|v| !v.is_empty()) {
            Some(v) => out.push_str(&v),
            None => {
                if !missing.iter().any(|m| m == name) {
                    missing.push(name.to_owned());
                }
            }
        };
        if let Some(c @ ('$' | '!')) = after.chars().next() {
            out.push(c);
            rest = &after[1..];
        } else if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) if name_len(&braced[..end]) == end && end > 0 => {
                    lookup(&braced[..end], &mut out);
                    rest = &braced[end + 1..];
                }
                Some(end) => {
                    out.push_str(&rest[at..at + 2 + end + 1]);
                    rest = &braced[end + 1..];
                }
                None => {
                    out.push('$');
                    rest = after;
                }
            }
        } else if name_len(after) > 0 {
            let n = name_len(after);
            lookup(&after[..n], &mut out);
            rest = &after[n..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    match missing.len() {
        0 => Ok(out),
        1 => Err(format!(
            "Failed to resolve {description} from environment variable: {}",
            missing[0]
        )),
        _ => Err(format!(
            "Failed to resolve {description} from environment variables: {}",
            missing.join(", ")
        )),
    }
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

    fn entry(config: Value) -> Entry {
        Entry {
            name: "s".into(),
            config,
            scope: Scope::Global,
            source: "x".into(),
        }
    }

    #[test]
    fn tool_exposure_takes_the_exact_key_then_the_first_pattern() {
        let e = entry(json!({"command": "x", "exposure": "direct",
            "toolExposure": {"ec*": "deferred", "echo": "hidden", "*o": "codemode"}}));
        assert_eq!(e.tool_exposure("echo"), "hidden");
        assert_eq!(e.tool_exposure("eco"), "deferred");
        assert_eq!(e.tool_exposure("foo"), "codemode");
        assert_eq!(e.tool_exposure("bar"), "direct");
        assert_eq!(
            entry(json!({"command": "x"})).tool_exposure("t"),
            "codemode"
        );
    }

    #[test]
    fn project_entries_replace_or_override_the_agents() {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agent");
        let project = dir.path().join("proj");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(project.join(".pi")).unwrap();
        std::fs::write(
            agent.join("mcp.json"),
            r#"{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}, "c-d": {"command": "c"}}}"#,
        )
        .unwrap();
        std::fs::write(
            project.join(".pi/mcp.json"),
            r#"{"mcpServers": {"a": {"exposure": "direct"}, "b": {"command": "b2"}, "c_d": {"command": "x"},
                "z": {"enabled": false}, "a2": {"url": "https://x", "auth": {"provider": "p"}}},
                "autoEnableCodemode": false}"#,
        )
        .unwrap();
        let loaded = load(&agent, Some(&project));
        let names: Vec<_> = loaded.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c-d"]);
        assert_eq!(loaded.servers[0].config["exposure"], "direct");
        assert_eq!(loaded.servers[0].config["command"], "a");
        assert_eq!(loaded.servers[1].config["command"], "b2");
        assert_eq!(loaded.auto_enable_codemode, Some(false));
        let p = project.join(".pi/mcp.json").display().to_string();
        assert_eq!(
            loaded.errors,
            [
                format!("{p}: server \"c_d\" conflicts with \"c-d\""),
                format!(
                    "{p}: server \"z\" needs \"command\" or \"url\", or a global server to override"
                ),
                format!("{p}: server \"a2\": auth is only allowed in the global mcp.json"),
            ]
        );
        assert!(
            load(&agent, None).servers[0]
                .config
                .get("exposure")
                .is_none()
        );
    }

    #[tokio::test]
    async fn values_resolve_as_pi_resolves_them() {
        let env = |name: &str| match name {
            "HOME" => Some("/h".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        let r = |v: &'static str| async move {
            resolve_value(v, "MCP server \"s\" env \"K\"", &env).await
        };
        assert_eq!(r("${HOME}-bar").await.unwrap(), "/h-bar");
        assert_eq!(
            r("$HOME/x $$ $! ${1x} $").await.unwrap(),
            "/h/x $ ! ${1x} $"
        );
        assert_eq!(
            r("$NOPE").await.unwrap_err(),
            "Failed to resolve MCP server \"s\" env \"K\" from environment variable: NOPE"
        );
        assert_eq!(
            r("$EMPTY${NOPE}").await.unwrap_err(),
            "Failed to resolve MCP server \"s\" env \"K\" from environment variables: EMPTY, NOPE"
        );
        assert_eq!(r("!echo ' hi '").await.unwrap(), "hi");
        assert_eq!(
            r("!false").await.unwrap_err(),
            "Failed to resolve MCP server \"s\" env \"K\" from shell command: false"
        );
    }
}
