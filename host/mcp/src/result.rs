//! An MCP `CallToolResult` as pi's tool result: text and images for the model (other blocks
//! described in words, long text cut in the middle with the whole saved to a file), and the
//! result itself as `structuredContent`.

use base64::Engine;
use serde_json::{Value, json};

/// Model-facing text past this many bytes is cut in the middle.
const MAX_TEXT_BYTES: usize = 20 * 1024;

/// pi's tool result for `server`'s `tool` answering `result`.
pub fn to_tool_result(server: &str, tool: &str, result: &Value, readable_resources: bool) -> Value {
    let blocks = result["content"].as_array().cloned().unwrap_or_default();
    let mut content: Vec<Value> = if blocks.is_empty() {
        match result.get("structuredContent") {
            Some(s) => vec![text(serde_json::to_string_pretty(s).unwrap_or_default())],
            None => Vec::new(),
        }
    } else {
        blocks
            .iter()
            .map(|b| block_content(server, b, readable_resources))
            .collect()
    };
    let is_error = result["isError"] == json!(true);
    if is_error && joined_text(&content).is_empty() {
        content.push(text(format!("MCP tool {server}/{tool} returned an error")));
    }
    let mut details = json!({ "server": server, "tool": tool });
    if let Some((limited, path)) = limit(&content) {
        content = limited;
        if let Some(path) = path {
            details["fullOutputPath"] = json!(path);
        }
    }
    let mut structured = result.clone();
    if let Some(fields) = structured.as_object_mut() {
        fields.remove("_meta");
    }
    let mut out =
        json!({ "content": content, "details": details, "structuredContent": structured });
    if is_error {
        out["isError"] = json!(true);
    }
    out
}

/// A resource tool's JSON payload as pi's tool result: the JSON as text (cut in the middle
/// when long), the payload itself as `structuredContent`.
pub fn json_result(tool: &str, server: Option<&str>, payload: Value) -> Value {
    let mut content = vec![text(payload.to_string())];
    let mut details = json!({ "server": server.unwrap_or(""), "tool": tool });
    if let Some((limited, path)) = limit(&content) {
        content = limited;
        if let Some(path) = path {
            details["fullOutputPath"] = json!(path);
        }
    }
    json!({ "content": content, "details": details, "structuredContent": payload })
}

/// `read_mcp_resource`'s result: the contents as text and images (each labelled with its
/// URI when there are several), the contents without `_meta` as `structuredContent`.
pub fn read_result(server: &str, uri: &str, contents: &[Value]) -> Value {
    let mut content: Vec<Value> = Vec::new();
    for item in contents {
        if contents.len() > 1 {
            content.push(text(format!("{}:", str_of(item, "uri").unwrap_or(""))));
        }
        content.push(resource_content(item));
    }
    if content.is_empty() {
        content.push(text(format!("Resource {uri} is empty.")));
    }
    let mut details = json!({ "server": server, "tool": "read_mcp_resource" });
    if let Some((limited, path)) = limit(&content) {
        content = limited;
        if let Some(path) = path {
            details["fullOutputPath"] = json!(path);
        }
    }
    let contents: Vec<Value> = contents
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if let Some(fields) = c.as_object_mut() {
                fields.remove("_meta");
            }
            c
        })
        .collect();
    json!({
        "content": content, "details": details,
        "structuredContent": { "server": server, "uri": uri, "contents": contents },
    })
}

fn text(text: impl Into<String>) -> Value {
    json!({ "type": "text", "text": text.into() })
}

fn joined_text(content: &[Value]) -> String {
    content
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value[key].as_str()
}

fn block_content(server: &str, block: &Value, readable_resources: bool) -> Value {
    match str_of(block, "type").unwrap_or("") {
        "text" => text(str_of(block, "text").unwrap_or("")),
        "image" => json!({ "type": "image", "data": block["data"], "mimeType": block["mimeType"] }),
        "audio" => text(format!(
            "[audio {} omitted]",
            str_of(block, "mimeType").unwrap_or("undefined")
        )),
        "resource_link" => {
            let mut details = Vec::new();
            if let Some(m) = str_of(block, "mimeType").filter(|m| !m.is_empty()) {
                details.push(m.to_owned());
            }
            if let Some(size) = block["size"].as_u64() {
                details.push(format_size(size as usize));
            }
            let details = if details.is_empty() {
                String::new()
            } else {
                format!(" ({})", details.join(", "))
            };
            let description = str_of(block, "description")
                .filter(|d| !d.is_empty())
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            let read = if readable_resources {
                format!(". Read it with read_mcp_resource (server \"{server}\")")
            } else {
                String::new()
            };
            let title = str_of(block, "title")
                .or(str_of(block, "name"))
                .unwrap_or("undefined");
            text(format!(
                "[Resource {} \"{title}\"{details}{description}{read}]",
                str_of(block, "uri").unwrap_or("")
            ))
        }
        "resource" => resource_content(&block["resource"]),
        other => text(format!("[unsupported MCP content {other}]")),
    }
}

fn resource_content(resource: &Value) -> Value {
    if let Some(t) = str_of(resource, "text") {
        return text(t);
    }
    let mime = str_of(resource, "mimeType");
    let blob = str_of(resource, "blob").unwrap_or("");
    if mime.is_some_and(|m| m.starts_with("image/")) {
        return json!({ "type": "image", "data": blob, "mimeType": mime });
    }
    let uri = str_of(resource, "uri").unwrap_or("");
    let data = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .unwrap_or_default();
    if mime.is_some_and(is_text_mime) {
        return text(String::from_utf8_lossy(&data));
    }
    let kind = format!(
        "{}, {}",
        mime.unwrap_or("unknown type"),
        format_size(data.len())
    );
    match save_output(&data, extension_of(uri)) {
        Ok(path) => text(format!("[Binary resource {uri} ({kind}) saved to {path}]")),
        Err(e) => text(format!(
            "[Binary resource {uri} ({kind}) could not be saved: {e}]"
        )),
    }
}

fn is_text_mime(mime: &str) -> bool {
    let kind = mime
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    kind.starts_with("text/")
        || kind == "application/json"
        || kind.ends_with("+json")
        || kind.ends_with("+xml")
}

/// The extension a URI's path ends in (up to 8 alphanumerics), else `.bin`.
fn extension_of(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    match path.rsplit_once('.') {
        Some((_, ext))
            if (1..=8).contains(&ext.len()) && ext.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            format!(".{ext}")
        }
        _ => ".bin".into(),
    }
}

/// pi's `formatSize`.
fn format_size(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{:.1}KB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1}MB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// A new file in the temp folder (`pi-mcp-HEX.EXT`, never one that exists), readable only
/// by the user.
fn save_output(data: &[u8], extension: String) -> std::io::Result<String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let hex = &uuid::Uuid::new_v4().simple().to_string()[..16];
    let path = std::env::temp_dir().join(format!("pi-mcp-{hex}{extension}"));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(data)?;
    Ok(path.display().to_string())
}

/// Text past [`MAX_TEXT_BYTES`] as one block with its start and end (the images after it),
/// and where the whole text was saved; `None` when it fits.
fn limit(content: &[Value]) -> Option<(Vec<Value>, Option<String>)> {
    let combined = joined_text(content);
    let bytes = combined.as_bytes();
    if bytes.len() <= MAX_TEXT_BYTES {
        return None;
    }
    let mut head_end = MAX_TEXT_BYTES / 2;
    while !combined.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = bytes.len() - (MAX_TEXT_BYTES - MAX_TEXT_BYTES / 2);
    while !combined.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    let removed = combined[head_end..tail_start].chars().count();
    let lines = combined.split('\n').count() - usize::from(combined.ends_with('\n'));
    let (path, where_) = match save_output(bytes, ".txt".into()) {
        Ok(p) => (
            Some(p.clone()),
            format!("\n\n[Full output: {p} (read it with offset/limit)]"),
        ),
        Err(e) => (None, format!("\n\n[Could not save the full output: {e}]")),
    };
    let text_block = text(format!(
        "Warning: truncated output (original token count: {})\nTotal output lines: {lines}\n\n{}…{removed} chars truncated…{}{where_}",
        bytes.len().div_ceil(4),
        &combined[..head_end],
        &combined[tail_start..]
    ));
    let mut limited = vec![text_block];
    limited.extend(content.iter().filter(|b| b["type"] == "image").cloned());
    Some((limited, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_become_pi_tool_results() {
        let r = to_tool_result(
            "echo",
            "echo",
            &json!({"content": [{"type": "text", "text": "hi"}], "_meta": {"x": 1}}),
            false,
        );
        assert_eq!(
            r,
            json!({"content": [{"type": "text", "text": "hi"}], "details": {"server": "echo", "tool": "echo"},
                   "structuredContent": {"content": [{"type": "text", "text": "hi"}]}})
        );
        let e = to_tool_result("s", "t", &json!({"content": [], "isError": true}), false);
        assert_eq!(e["content"][0]["text"], "MCP tool s/t returned an error");
        assert_eq!(e["isError"], true);
        let s = to_tool_result(
            "s",
            "t",
            &json!({"content": [], "structuredContent": {"a": 1}}),
            false,
        );
        assert_eq!(s["content"][0]["text"], "{\n  \"a\": 1\n}");
        let link = to_tool_result(
            "s",
            "t",
            &json!({"content": [{"type": "resource_link", "uri": "file:///a", "name": "a", "size": 2048, "mimeType": "text/plain"},
                                 {"type": "audio", "mimeType": "audio/wav", "data": ""}, {"type": "odd"}]}),
            true,
        );
        assert_eq!(
            link["content"],
            json!([{"type": "text", "text": "[Resource file:///a \"a\" (text/plain, 2.0KB). Read it with read_mcp_resource (server \"s\")]"},
                   {"type": "text", "text": "[audio audio/wav omitted]"},
                   {"type": "text", "text": "[unsupported MCP content odd]"}])
        );
    }

    #[test]
    fn long_text_keeps_its_start_and_end_and_is_saved_whole() {
        let long = format!("{}\n{}", "a".repeat(15000), "é".repeat(5000));
        let r = to_tool_result(
            "s",
            "t",
            &json!({"content": [{"type": "text", "text": long}]}),
            false,
        );
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("Warning: truncated output (original token count: 6251)\nTotal output lines: 2\n\naaaa"), "{}", &text[..120]);
        assert!(
            text.contains("a…4521 chars truncated…a"),
            "the middle 4,521 a of 15,000 go"
        );
        assert!(text.contains("éé\n\n[Full output: "));
        let path = r["details"]["fullOutputPath"].as_str().unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), long);
        std::fs::remove_file(path).unwrap();
    }
}
