//! pi 1.6.0's built-in extensions, as far as the host serves them. pi loads them after every
//! other extension unless `--no-extensions` (and 0.73.1 has none), so a session that follows
//! 1.6.0 for a pi client (`rpc`, the pi entry) lists their commands after the extensions'.
//! Served: `llama.cpp`'s `/llama`, which outside pi's terminal UI only says so;
//! `tool-search`'s `tool_search` tool; `mcp`, which connects MCP servers and answers `/mcp`
//! (`mcp_extension`). Not served: `codemode` (README, Status).

use serde_json::Value;

use crate::events::UiRequest;

/// One of pi's built-in extensions.
pub struct Builtin {
    /// Its name as pi gives it (`builtin:NAME` is its commands' `sourceInfo.path`).
    pub name: &'static str,
    pub commands: &'static [BuiltinCommand],
}

pub struct BuiltinCommand {
    pub name: &'static str,
    pub description: &'static str,
    pub run: Run,
}

/// How the host runs a built-in command outside pi's terminal UI.
pub enum Run {
    /// It only shows this (a notification, only with a UI).
    Headless(fn(args: &str) -> UiRequest),
    /// The extension's state answers it (`/mcp`).
    Mcp,
}

pub const MCP: &str = "mcp";
pub const TOOL_SEARCH: &str = "tool-search";

/// In pi's load order.
pub const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "llama.cpp",
        commands: &[BuiltinCommand {
            name: "llama",
            description: "Manage llama.cpp router models",
            run: Run::Headless(|_| UiRequest::Notify {
                message: "/llama is available in interactive mode".into(),
                notify_type: Some("warning".into()),
            }),
        }],
    },
    Builtin {
        name: TOOL_SEARCH,
        commands: &[],
    },
    Builtin {
        name: MCP,
        commands: &[BuiltinCommand {
            name: "mcp",
            description: "Manage MCP servers: sign in, reconnect, enable or disable, and change exposure",
            run: Run::Mcp,
        }],
    },
];

/// pi's `sourceInfo` of a built-in extension's commands.
pub fn source_info(builtin: &Builtin) -> serde_json::Value {
    serde_json::json!({
        "path": format!("builtin:{}", builtin.name), "source": "builtin",
        "scope": "temporary", "origin": "top-level",
    })
}

/// pi 1.6.0's built-in extensions pichamber does not serve yet.
const NOT_SERVED: &[&str] = &["codemode"];

/// The built-ins a pi client's session loads, as pi decides: every one unless `--no-extensions`
/// (`discovery` false) or the `extensions` setting turns it off (`-builtin:NAME`,
/// `!builtin:*`; a project's entry overrides the user's: `settings` is the user's settings.json,
/// then the project's when it is trusted), and those given as `-e builtin:NAME` whatever else
/// says. A name pi does not know, or one pichamber does not serve, is an error saying so.
pub fn enabled(
    given: &[String],
    discovery: bool,
    settings: &[Value],
) -> Result<Vec<&'static str>, String> {
    for name in given {
        if !BUILTINS.iter().any(|b| b.name == name) {
            return Err(if NOT_SERVED.contains(&name.as_str()) {
                format!(
                    "builtin:{name}: pi's built-in {name} extension is not served by pichamber yet"
                )
            } else {
                let known: Vec<String> = BUILTINS
                    .iter()
                    .map(|b| format!("builtin:{}", b.name))
                    .collect();
                format!(
                    "builtin:{name}: no such built-in extension (pichamber serves {})",
                    known.join(", ")
                )
            });
        }
    }
    let entries = |layer: Option<&Value>| -> Vec<String> {
        layer
            .and_then(|s| s["extensions"].as_array())
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str().map(str::to_owned))
            .collect()
    };
    let (user, project) = (entries(settings.first()), entries(settings.get(1)));
    Ok(BUILTINS
        .iter()
        .map(|b| b.name)
        .filter(|name| {
            given.iter().any(|g| g == name)
                || (discovery
                    && override_decision(name, &project)
                        .or_else(|| override_decision(name, &user))
                        .unwrap_or(true))
        })
        .collect())
}

/// What a list of `extensions` entries says of `builtin:NAME`, as pi's `isEnabledByOverrides`
/// reads them (`!glob` excludes, `+path` forces in, `-path` forces out, in that order of
/// strength); `None` when no entry names it.
fn override_decision(name: &str, entries: &[String]) -> Option<bool> {
    let path = format!("builtin:{name}");
    let mut decision = None;
    let matches = |pattern: &str| {
        globset::Glob::new(pattern).is_ok_and(|g| g.compile_matcher().is_match(&path))
    };
    if entries
        .iter()
        .filter_map(|e| e.strip_prefix('!'))
        .any(matches)
    {
        decision = Some(false);
    }
    if entries
        .iter()
        .any(|e| e.strip_prefix('+') == Some(path.as_str()))
    {
        decision = Some(true);
    }
    if entries
        .iter()
        .any(|e| e.strip_prefix('-') == Some(path.as_str()))
    {
        decision = Some(false);
    }
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn settings_and_given_sources_decide_as_pi_decides() {
        let on = |given: &[&str], discovery: bool, settings: &[Value]| {
            let given: Vec<String> = given.iter().map(|g| g.to_string()).collect();
            enabled(&given, discovery, settings)
                .unwrap()
                .contains(&"llama.cpp")
        };
        assert!(on(&[], true, &[]));
        assert!(!on(&[], false, &[]));
        let off = json!({"extensions": ["-builtin:llama.cpp"]});
        assert!(!on(&[], true, std::slice::from_ref(&off)));
        assert!(!on(&[], true, &[json!({"extensions": ["!builtin:*"]})]));
        // `+` brings back what a glob excluded; `-` wins over both.
        assert!(on(
            &[],
            true,
            &[json!({"extensions": ["!builtin:*", "+builtin:llama.cpp"]})]
        ));
        // The project's entry overrides the user's.
        let back = json!({"extensions": ["+builtin:llama.cpp"]});
        assert!(on(&[], true, &[off.clone(), back]));
        // A project entry that does not name it leaves the user's decision.
        assert!(!on(
            &[],
            true,
            &[off.clone(), json!({"extensions": ["./x.ts"]})]
        ));
        // Given with -e: loaded whatever the rest says.
        assert!(on(&["llama.cpp"], false, &[off]));
        assert!(
            enabled(&["codemode".into()], true, &[])
                .unwrap_err()
                .contains("not served by pichamber yet")
        );
        assert!(
            enabled(&["nope".into()], true, &[])
                .unwrap_err()
                .contains("no such built-in extension")
        );
    }
}
