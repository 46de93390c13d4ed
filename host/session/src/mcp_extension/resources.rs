//! The MCP resource tools of pi 1.6.0's built-in MCP extension (the ones Codex and opencode
//! use): `list_mcp_resources`, `list_mcp_resource_templates` and `read_mcp_resource`, reaching
//! every enabled server that has resources. Listings are JSON; MCP App resources (`ui://`,
//! `profile=mcp-app`) are left out, as are icons and `_meta`.

use std::sync::Arc;

use pichamber_mcp::client::{Connection, Listing};
use pichamber_mcp::result;
use serde_json::{Map, Value, json};

use super::{Inner, McpExtension};
use crate::state::{Exposure, RegisteredTool};

pub const LIST: &str = "list_mcp_resources";
pub const LIST_TEMPLATES: &str = "list_mcp_resource_templates";
pub const READ: &str = "read_mcp_resource";
pub const NAMES: [&str; 3] = [LIST, LIST_TEMPLATES, READ];

/// The three tools with `exposure`, as pi registers them.
pub fn definitions(exposure: Exposure) -> Vec<RegisteredTool> {
    let string = |description: &str| json!({ "type": "string", "description": description });
    let list_parameters = json!({
        "type": "object",
        "properties": {
            "server": string("MCP server name. Omit to list every server with resources."),
            "cursor": string("Opaque cursor from a previous call with the same server; omit for the first page."),
        },
        "additionalProperties": false,
    });
    let read_parameters = json!({
        "type": "object",
        "properties": {
            "server": string("MCP server name exactly as configured. Must match the 'server' field returned by list_mcp_resources."),
            "uri": string("Resource URI to read. Must be one of the URIs returned by list_mcp_resources."),
        },
        "required": ["server", "uri"],
        "additionalProperties": false,
    });
    [
        (
            LIST,
            "Lists resources provided by MCP servers. Resources allow servers to share data that provides context to language models, such as files, database schemas, or application-specific information. Prefer resources over web search when possible.",
            list_parameters.clone(),
        ),
        (
            LIST_TEMPLATES,
            "Lists resource templates provided by MCP servers. Parameterized resource templates allow servers to share data that takes parameters and provides context to language models, such as files, database schemas, or application-specific information. Prefer resource templates over web search when possible.",
            list_parameters,
        ),
        (
            READ,
            "Read a specific resource from an MCP server given the server name and resource URI.",
            read_parameters,
        ),
    ]
    .into_iter()
    .map(|(name, description, parameters)| RegisteredTool {
        annotations: Some(json!({ "readOnlyHint": true })),
        ..RegisteredTool::hosted(
            super::BUILTIN,
            name.into(),
            name.into(),
            description.into(),
            parameters,
            exposure,
        )
    })
    .collect()
}

/// An argument pi reads as a string: absent, blank or trimmed text.
fn string_argument(args: &Value, key: &str) -> Result<Option<String>, String> {
    match &args[key] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
        _ => Err(format!("{key} must be a string")),
    }
}

/// MCP App user interfaces, which only hosts that render them can use.
fn is_app(item: &Value) -> bool {
    let uri = item["uri"]
        .as_str()
        .or(item["uriTemplate"].as_str())
        .unwrap_or("");
    let mime = item["mimeType"].as_str().unwrap_or("").to_ascii_lowercase();
    let app_profile = mime.split(';').skip(1).any(|param| {
        param
            .split_once('=')
            .is_some_and(|(k, v)| k.trim() == "profile" && v.trim().trim_matches('"') == "mcp-app")
    });
    uri.starts_with("ui://") || app_profile
}

/// A listed item tagged with its server, without `_meta` and icons.
fn listed(server: &str, item: &Value) -> Value {
    let mut out = Map::new();
    out.insert("server".into(), json!(server));
    for (k, v) in item.as_object().into_iter().flatten() {
        if k != "_meta" && k != "icons" {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// Runs one of the tools over `servers` (the enabled servers with resources, by name): its
/// result, or the error it throws.
pub async fn run(
    tool: &str,
    args: &Value,
    servers: Vec<(String, Arc<Connection>)>,
) -> Result<Value, String> {
    let find = |name: &str| {
        servers
            .iter()
            .find(|(n, _)| n == name)
            .cloned()
            .ok_or_else(|| {
                let available: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
                let listed = if available.is_empty() {
                    String::new()
                } else {
                    format!(". Servers with resources: {}", available.join(", "))
                };
                format!("MCP server \"{name}\" has no resources{listed}")
            })
    };
    let server = string_argument(args, "server")?;
    if tool == READ {
        let uri = string_argument(args, "uri")?;
        let server = server.ok_or("server must be provided")?;
        let uri = uri.ok_or("uri must be provided")?;
        let (name, connection) = find(&server)?;
        let contents = connection.read_resource(&uri).await?;
        return Ok(result::read_result(&name, &uri, &contents));
    }
    let kind = if tool == LIST {
        Listing::Resources
    } else {
        Listing::Templates
    };
    let cursor = string_argument(args, "cursor")?;
    let payload = match &server {
        Some(server) => {
            let (name, connection) = find(server)?;
            let (items, next) = connection.list_page(kind, cursor).await?;
            let items: Vec<Value> = items
                .iter()
                .filter(|i| !is_app(i))
                .map(|i| listed(&name, i))
                .collect();
            let mut payload = json!({ "server": name, kind.key(): items });
            if let Some(next) = next {
                payload["nextCursor"] = json!(next);
            }
            payload
        }
        None => {
            if cursor.is_some() {
                return Err("cursor can only be used when a server is specified".into());
            }
            let mut sorted = servers.clone();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let listings = futures::future::join_all(
                sorted
                    .iter()
                    .map(|(_, connection)| connection.list_all(kind)),
            )
            .await;
            let (mut items, mut errors) = (Vec::new(), Vec::new());
            for ((name, _), listing) in sorted.iter().zip(listings) {
                match listing {
                    Ok(found) => {
                        items.extend(found.iter().filter(|i| !is_app(i)).map(|i| listed(name, i)))
                    }
                    Err(error) => errors.push(json!({ "server": name, "error": error })),
                }
            }
            let mut payload = json!({ kind.key(): items });
            if !errors.is_empty() {
                payload["errors"] = json!(errors);
            }
            payload
        }
    };
    Ok(result::json_result(tool, server.as_deref(), payload))
}

impl McpExtension {
    /// The enabled servers with resources whose exposure is not `hidden`, with their
    /// connections: what the resource tools reach.
    pub(super) fn resource_servers(inner: &Inner) -> Vec<(String, Arc<Connection>)> {
        inner
            .servers
            .iter()
            .filter(|s| s.entry.enabled() && s.entry.exposure() != "hidden")
            .filter_map(|s| {
                let connection = s.connection.as_ref().filter(|c| c.has_resources)?;
                Some((s.entry.name.clone(), connection.clone()))
            })
            .collect()
    }

    /// Registers the resource tools with the widest exposure of the servers they reach
    /// (`direct`, then `codemode`, then `deferred`), hidden when none has resources, as pi
    /// does; tools that stop being direct stop being declared.
    pub(super) fn sync_resource_tools(&self, inner: &mut Inner) {
        let exposures: Vec<String> = Self::resource_servers(inner)
            .iter()
            .filter_map(|(name, _)| inner.servers.iter().find(|s| s.entry.name == *name))
            .map(|s| s.entry.exposure().to_owned())
            .collect();
        let next = ["direct", "codemode", "deferred"]
            .into_iter()
            .find(|e| exposures.iter().any(|x| x == e))
            .map_or(Exposure::Hidden, |e| {
                if e == "direct" {
                    Exposure::Direct
                } else {
                    Exposure::Deferred
                }
            });
        let current = inner.resource_exposure;
        if current == Some(next) || (current.is_none() && next == Exposure::Hidden) {
            return;
        }
        inner.resource_exposure = Some(next);
        let mut state = self.shared.state.lock().unwrap();
        for tool in crate::mcp_extension::resources::definitions(next) {
            state.register_tool(tool);
        }
        if current == Some(Exposure::Direct) {
            state
                .active_tools
                .retain(|t| !crate::mcp_extension::resources::NAMES.contains(&t.as_str()));
        }
    }

    /// Runs one of the resource tools, once every server's connection attempt settled.
    pub async fn resource_tool(&self, tool: &str, args: &Value) -> Result<Value, String> {
        self.wait_for_all().await;
        let servers = Self::resource_servers(&self.inner.lock().unwrap());
        crate::mcp_extension::resources::run(tool, args, servers).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_resources_are_told_by_uri_or_profile() {
        assert!(is_app(&json!({"uri": "ui://x"})));
        assert!(is_app(
            &json!({"uri": "a", "mimeType": "text/html; profile=\"mcp-app\""})
        ));
        assert!(!is_app(
            &json!({"uri": "file:///a", "mimeType": "text/html"})
        ));
        assert_eq!(
            listed(
                "s",
                &json!({"uri": "a", "_meta": {}, "icons": [], "name": "n"})
            ),
            json!({"server": "s", "uri": "a", "name": "n"})
        );
    }
}
