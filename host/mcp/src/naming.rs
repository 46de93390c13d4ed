//! Names of MCP tools as models and scripts see them (pi's `createMcpToolName`).

use sha2::{Digest, Sha256};

/// Provider tool names are limited to 64 characters.
const MAX_TOOL_NAME_LENGTH: usize = 64;

/// `mcp__SERVER__TOOL` with everything outside `[A-Za-z0-9_]` as `_`; too long, or `taken`
/// (another tool already has it, or two of this server's tools sanitize to it), it is cut and
/// given 8 hex digits of the SHA-256 of `SERVER\0TOOL`, so it stays the same run after run.
pub fn tool_name(server: &str, tool: &str, taken: impl Fn(&str) -> bool) -> String {
    let name: String = format!("mcp__{server}__{tool}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.len() <= MAX_TOOL_NAME_LENGTH && !taken(&name) {
        return name;
    }
    let digest = Sha256::digest(format!("{server}\0{tool}").as_bytes());
    let hash: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    // Only ASCII is left, so any byte is a character boundary.
    format!(
        "{}_{hash}",
        &name[..name.len().min(MAX_TOOL_NAME_LENGTH - 9)]
    )
}

/// A server's one-line summary for the system prompt: the first line of its `description`,
/// else of the instructions it sent; empty when it has neither.
pub fn server_summary(description: Option<&str>, instructions: Option<&str>) -> String {
    let text = description
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .or(instructions.map(str::trim))
        .unwrap_or("");
    text.split('\n').next().unwrap_or("").trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized_and_long_or_taken_ones_hashed() {
        assert_eq!(tool_name("echo", "echo", |_| false), "mcp__echo__echo");
        assert_eq!(tool_name("my-srv", "a.b", |_| false), "mcp__my_srv__a_b");
        let taken = tool_name("s", "a-b", |n| n == "mcp__s__a_b");
        assert_eq!(taken.len(), "mcp__s__a_b".len() + 9);
        assert!(taken.starts_with("mcp__s__a_b_"), "{taken}");
        let long = tool_name("server", &"x".repeat(80), |_| false);
        assert_eq!(long.len(), 64);
        assert_ne!(long, tool_name("server", &"x".repeat(81), |_| false));
    }
}
