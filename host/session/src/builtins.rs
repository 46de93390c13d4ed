//! pi 1.6.0's built-in extensions, as far as the host serves them. pi loads them after every
//! other extension unless `--no-extensions` (and 0.73.1 has none), so a session that follows
//! 1.6.0 for a pi client (`rpc`, the pi entry) lists their commands after the extensions'.
//! Served: `llama.cpp`'s `/llama`, which outside pi's terminal UI only says so. Not served
//! yet: `mcp` (connecting MCP servers, `/mcp`), `codemode` and `tool-search` (README, Status).

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
    /// What it shows when run outside pi's terminal UI (a notification, only with a UI).
    pub headless: fn(args: &str) -> UiRequest,
}

/// In pi's load order.
pub const BUILTINS: &[Builtin] = &[Builtin {
    name: "llama.cpp",
    commands: &[BuiltinCommand {
        name: "llama",
        description: "Manage llama.cpp router models",
        headless: |_| UiRequest::Notify {
            message: "/llama is available in interactive mode".into(),
            notify_type: Some("warning".into()),
        },
    }],
}];

/// pi's `sourceInfo` of a built-in extension's commands.
pub fn source_info(builtin: &Builtin) -> serde_json::Value {
    serde_json::json!({
        "path": format!("builtin:{}", builtin.name), "source": "builtin",
        "scope": "temporary", "origin": "top-level",
    })
}
