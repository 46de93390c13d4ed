//! Comparing what real pi and pichamber print: placeholders for what differs by nature (ids,
//! times, durations, each side's folder), then the first place they differ.

use serde_json::{Value, json};

/// Ids, times, durations and the side's folder as placeholders; the context size as whether
/// there is one.
pub fn normalise(value: &Value, root: &str) -> Value {
    static ID: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
    });
    static TIME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d[:-]\d\d[:-]\d\d([.-]\d+)?Z?").unwrap()
    });
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "durationMs" | "timestamp" | "updatedAt" if !v.is_null() => json!("<t>"),
                        "used" if v.is_u64() => json!("<context size>"),
                        _ => normalise(v, root),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalise(v, root)).collect()),
        Value::String(s) => {
            let s = s.replace(root, "<root>");
            let s = ID.replace_all(&s, "<id>");
            Value::String(TIME.replace_all(&s, "<time>").into_owned())
        }
        other => other.clone(),
    }
}

pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .keys()
            .chain(y.keys().filter(|k| !x.contains_key(*k)))
            .find_map(|k| {
                first_difference(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                )
            }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: pi {a}, pichamber {b}")),
    }
}

/// One side's folders under `root` for a run against the mock model at `base_url`: pi's agent
/// folder (`home/agent`, with a models.json naming the mock and settings.json choosing it) and a
/// workspace (`ws`) holding `notes.txt`. Returns (agent folder, workspace).
pub fn mock_model_home(
    root: &std::path::Path,
    base_url: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let (agent, ws) = (root.join("home/agent"), root.join("ws"));
    for dir in [&agent, &ws] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(ws.join("notes.txt"), "first line\nsecond line\n").unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": base_url, "api": "openai-completions", "apiKey": "test-key",
        "models": [{"id": "mock-model"}],
    }}});
    std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
    // quietStartup: pi's startup block lists its install folders and version notices.
    let settings =
        json!({"defaultProvider": "mock", "defaultModel": "mock-model", "quietStartup": true});
    std::fs::write(agent.join("settings.json"), settings.to_string()).unwrap();
    (agent, ws)
}

/// Which side of a comparison with real pi runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Side {
    Pi,
    Pichamber,
}

/// `pi` as `side` runs it in the folders of [`mock_model_home`] (`root`): real pi 1.6.0 under
/// its Node, or pichamber's pi entry, with nothing of the caller's environment but `PATH`.
pub fn pi_command(side: Side, root: &std::path::Path) -> std::process::Command {
    use super::oracle::Pi;
    let mut command = match side {
        Side::Pi => {
            let mut c = std::process::Command::new(Pi::V1_6.node().unwrap());
            c.arg(Pi::V1_6.package().join("dist/cli.js"));
            c
        }
        Side::Pichamber => {
            let mut c = std::process::Command::new(super::bin());
            c.arg("pi");
            c
        }
    };
    command
        .current_dir(root.join("ws"))
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("PI_CODING_AGENT_DIR", root.join("home/agent"))
        .env("PI_OFFLINE", "1")
        .env("PICHAMBER_CACHE_DIR", super::cache_dir());
    command
}
