//! The MCP servers extensions register (pi 1.6.0's `pi.registerMcpServer`): checked as pi
//! checks an `mcpServers` entry of mcp.json ([`pichamber_mcp::config::validate`]), kept per
//! session in registration order, each owned by the extension that registered it, and
//! announced to extensions with `mcp_servers_change`. pi's core only keeps this registry;
//! connecting them is the built-in MCP extension's job (`mcp_extension`).

use serde_json::{Value, json};

/// One registration.
#[derive(Debug, Clone)]
pub struct McpServer {
    pub name: String,
    /// The config with exposure aliases resolved.
    pub config: Value,
    /// The extension (load order) that registered it.
    pub extension: usize,
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
