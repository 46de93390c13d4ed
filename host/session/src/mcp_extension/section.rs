//! pi's `mcp_servers` prompt section: the servers whose tools are not declared to the model,
//! how their tools are reached, and a summary of each, within 4,096 characters.

use super::*;

const MAX_SUMMARY_CHARS: usize = 250;
const MAX_SECTION_CHARS: usize = 4096;

impl McpExtension {
    /// pi's `mcp_servers` prompt section: the enabled servers whose tools are not declared.
    pub fn servers_section(&self) -> Option<String> {
        let inner = self.inner.lock().unwrap();
        let mut listed: Vec<&Server> = inner
            .servers
            .iter()
            .filter(|s| {
                s.entry.enabled()
                    && s.entry
                        .configured_exposures()
                        .iter()
                        .any(|e| *e == "codemode" || *e == "deferred")
            })
            .collect();
        if listed.is_empty() {
            return None;
        }
        listed.sort_by(|a, b| a.entry.name.cmp(&b.entry.name));
        let reaches: Vec<&str> = listed
            .iter()
            .map(|s| {
                if s.entry.configured_exposures().contains(&"codemode") {
                    "codemode"
                } else {
                    "tool_search"
                }
            })
            .collect();
        let mut intro = "MCP servers whose tools are not declared to you.".to_owned();
        if reaches.contains(&"codemode") {
            intro.push_str(" Call the tools of `codemode` servers from codemode scripts.");
        }
        if reaches.contains(&"tool_search") {
            intro.push_str(" Load the tools of `tool_search` servers with `tool_search`.");
        }
        let heads: Vec<String> = listed
            .iter()
            .zip(&reaches)
            .map(|(s, r)| format!("- {} ({r})", config::namespace(&s.entry.name)))
            .collect();
        let omitted = |count: usize| -> Vec<String> {
            if count == 0 {
                Vec::new()
            } else {
                vec![format!(
                    "- … {count} more server{}; find their tools with searchTools()",
                    if count == 1 { "" } else { "s" }
                )]
            }
        };
        let size = |kept: usize| -> usize {
            let mut all = vec![intro.clone()];
            all.extend(heads[..kept].iter().cloned());
            all.extend(omitted(listed.len() - kept));
            all.join("\n").chars().count()
        };
        let mut kept = listed.len();
        while kept > 0 && size(kept) > MAX_SECTION_CHARS {
            kept -= 1;
        }
        let per_server = MAX_SECTION_CHARS
            .saturating_sub(size(kept))
            .checked_div(kept)
            .map_or(0, |each| each.saturating_sub(2).min(MAX_SUMMARY_CHARS));
        let mut lines = vec![intro.clone()];
        for (server, head) in listed.iter().zip(&heads).take(kept) {
            let summary = naming::server_summary(
                server.entry.config["description"].as_str(),
                server
                    .connection
                    .as_ref()
                    .and_then(|c| c.instructions.as_deref()),
            );
            let summary = truncate(&summary, per_server);
            lines.push(if summary.is_empty() {
                head.clone()
            } else {
                format!("{head}: {summary}")
            });
        }
        lines.extend(omitted(listed.len() - kept));
        Some(lines.join("\n"))
    }
}

/// At most `max` characters, ending in `…` when cut (pi's `truncate`).
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    if max <= 1 {
        return String::new();
    }
    let head: String = text.chars().take(max - 1).collect();
    format!("{}…", head.trim_end())
}
