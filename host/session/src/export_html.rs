//! A session as one self-contained HTML page (pi's `export_html` RPC command and `/export`,
//! and `pichamber export`).
//!
//! pi's exporter ships the session as base64 JSON plus a JavaScript renderer; pichamber's
//! page is rendered here, on the host, and needs no script at all: inline CSS, no external
//! resource, and a Content-Security-Policy that forbids scripts and remote loads as a second
//! line of defence.
//!
//! Every text in a session came from the model, a tool or an extension and is treated as
//! hostile: markdown (user and assistant text, summaries, custom messages) is rendered with
//! pulldown-cmark and then sanitised with ammonia (no scripts, no event-handler attributes,
//! links only to http(s)/mailto); everything else (thinking, tool arguments and results,
//! bash output) is escaped text. Images are embedded as `data:` URIs only for raster types
//! with a base64 payload.
//!
//! What is shown: the session header, then the current branch (root to leaf) entry by
//! entry: user, assistant (thinking, text, tool calls, errors), tool results, bash runs,
//! custom messages, compaction and branch summaries, model and thinking-level changes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use pulldown_cmark::{Options, Parser};
use serde_json::Value;

use crate::store::SessionStore;

/// What the page shows besides the session file (pi adds the live agent's system prompt and
/// tools when a running session exports itself).
#[derive(Debug, Clone, Default)]
pub struct ExportExtras {
    pub system_prompt: Option<String>,
    /// `{name, description, parameters}`.
    pub tools: Vec<Value>,
}

/// pi's default file name for a session file's export: `pi-session-<file stem>.html`.
pub fn default_file_name(session_file: &Path) -> String {
    let stem = session_file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "session".into());
    format!("pi-session-{stem}.html")
}

/// Where an export goes: `output` (relative to `cwd`) or the default name in `cwd`. Refuses
/// a directory, a folder that does not exist and the session file itself.
pub fn resolve_output_path(
    cwd: &Path,
    session_file: &Path,
    output: Option<&str>,
) -> Result<PathBuf, String> {
    let output = match output {
        Some(o) if o.trim().is_empty() => {
            return Err("The output path is empty".into());
        }
        Some(o) => o.to_owned(),
        None => default_file_name(session_file),
    };
    let path = cwd.join(&output);
    if path.is_dir() {
        return Err(format!(
            "Cannot export to {}: it is a directory; give a file path for the HTML",
            path.display()
        ));
    }
    let parent = path.parent().unwrap_or(cwd);
    if !parent.is_dir() {
        return Err(format!(
            "Cannot export to {}: the folder {} does not exist",
            path.display(),
            parent.display()
        ));
    }
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same(&path, session_file) {
        return Err(format!(
            "Cannot export to {}: it is the session file itself; choose another path",
            path.display()
        ));
    }
    Ok(path)
}

/// Writes the export of `store` (a session with a file) and returns where it went.
pub fn export_store(
    store: &SessionStore,
    output: Option<&str>,
    extras: &ExportExtras,
) -> Result<PathBuf, String> {
    let Some(file) = store.get_session_file() else {
        return Err("Cannot export in-memory session to HTML".into());
    };
    if !file.exists() {
        return Err("Nothing to export yet - start a conversation first".into());
    }
    let path = resolve_output_path(Path::new(store.get_cwd()), file, output)?;
    let html = render(store, extras);
    std::fs::write(&path, html).map_err(|e| format!("Cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// `pichamber export`: a session file (read, not changed) to HTML at `output` (relative to
/// the current directory), by default `pi-session-<file stem>.html` in the current directory,
/// as pi's `--export` does.
pub fn export_file(input: &Path, output: Option<&Path>) -> Result<PathBuf, String> {
    if !input.is_file() {
        return Err(format!("File not found: {}", input.display()));
    }
    let store = SessionStore::read_only(input).map_err(|e| format!("{e:#}"))?;
    let cwd = std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?;
    let output = output.map(|o| o.to_string_lossy().into_owned());
    let path = resolve_output_path(&cwd, input, output.as_deref())?;
    std::fs::write(&path, render(&store, &ExportExtras::default()))
        .map_err(|e| format!("Cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// The page for `store`.
pub fn render(store: &SessionStore, extras: &ExportExtras) -> String {
    let header = store.get_header();
    let name = store.get_session_name();
    let title = match &name {
        Some(n) => format!("{n} — session {}", store.get_session_id()),
        None => format!("Session {}", store.get_session_id()),
    };
    let mut body = String::new();
    body.push_str("<header class=\"session\">\n");
    let _ = writeln!(body, "<h1>{}</h1>", escape(&title));
    body.push_str("<dl>\n");
    let mut fact = |label: &str, value: &Value| {
        let text = match value {
            Value::Null => return,
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let _ = writeln!(body, "<dt>{}</dt><dd>{}</dd>", label, escape(&text));
    };
    fact("Session", &header["id"]);
    fact("Started", &header["timestamp"]);
    fact("Directory", &header["cwd"]);
    fact("Format version", &header["version"]);
    fact("Forked from", &header["parentSession"]);
    fact(
        "Entries",
        &Value::from(format!(
            "{} ({} on the current branch)",
            store.get_entries().len(),
            store.get_branch(None).len()
        )),
    );
    body.push_str("</dl>\n");
    if let Some(prompt) = &extras.system_prompt {
        let _ = writeln!(
            body,
            "<details class=\"system\"><summary>System prompt</summary><pre>{}</pre></details>",
            escape(prompt)
        );
    }
    if !extras.tools.is_empty() {
        body.push_str("<details class=\"tools\"><summary>Tools</summary><ul>\n");
        for tool in &extras.tools {
            let _ = writeln!(
                body,
                "<li><code>{}</code> {}</li>",
                escape(text_of(&tool["name"])),
                escape(text_of(&tool["description"]))
            );
        }
        body.push_str("</ul></details>\n");
    }
    body.push_str("</header>\n<main>\n");
    for entry in store.get_branch(None) {
        render_entry(&mut body, entry);
    }
    body.push_str("</main>\n");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"pichamber {}\">\n<title>{}</title>\n\
         <style>\n{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        env!("CARGO_PKG_VERSION"),
        escape(&title)
    )
}

/// No script, no remote resource: styles inline, images only as data: URIs.
const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'";

const CSS: &str = r#"
:root { color-scheme: light dark; --fg: #1d1f24; --bg: #f6f6f4; --card: #ffffff; --muted: #6a6f7a;
  --user: #e8f0fe; --tool: #f1f3f5; --error: #fde8e8; --info: #fff8e1; --border: #d9dce1; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e4e6eb; --bg: #17181c; --card: #202228; --muted: #9aa0ab; --user: #1f2a3d;
    --tool: #262830; --error: #3d1f22; --info: #3a3322; --border: #343741; }
}
body { margin: 0; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }
header.session, main { max-width: 60rem; margin: 0 auto; padding: 1rem 1.25rem; }
h1 { font-size: 1.3rem; margin: 0.5rem 0; word-break: break-all; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.1rem 1rem; margin: 0; color: var(--muted); }
dt { font-weight: 600; } dd { margin: 0; word-break: break-all; }
.entry { background: var(--card); border: 1px solid var(--border); border-radius: 8px;
  padding: 0.6rem 0.9rem; margin: 0.7rem 0; overflow-wrap: anywhere; }
.entry > .role { font-size: 0.75rem; text-transform: uppercase; letter-spacing: 0.05em;
  color: var(--muted); margin-bottom: 0.3rem; }
.user { background: var(--user); }
.tool-call, .tool-result, .bash { background: var(--tool); }
.error, .is-error { background: var(--error); }
.compaction, .branch-summary, .custom { background: var(--info); }
.note { color: var(--muted); font-size: 0.85rem; margin: 0.3rem 0.2rem; }
.thinking { color: var(--muted); font-style: italic; white-space: pre-wrap; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--tool); padding: 0.5rem;
  border-radius: 6px; margin: 0.3rem 0; font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.92em; }
img { max-width: 100%; }
details > summary { cursor: pointer; color: var(--muted); }
table { border-collapse: collapse; } td, th { border: 1px solid var(--border); padding: 0.2rem 0.5rem; }
"#;

fn text_of(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// HTML-escapes text for element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut b = ammonia::Builder::default();
    b.url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .add_tag_attributes("input", ["type", "checked", "disabled"])
        .add_tags(["input"]);
    b
});

/// Markdown → sanitised HTML.
pub fn markdown(text: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TASKLISTS);
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, Parser::new_ext(text, options));
    SANITIZER.clean(&html).to_string()
}

/// An image block as an `<img>` with a data: URI, when it is a raster type with base64 data.
fn image(block: &Value) -> String {
    let mime = text_of(&block["mimeType"]);
    let data = text_of(&block["data"]);
    let raster = matches!(
        mime,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "image/bmp"
    );
    let base64 = !data.is_empty()
        && data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    if raster && base64 {
        format!("<img alt=\"image\" src=\"data:{mime};base64,{data}\">")
    } else {
        format!(
            "<p class=\"note\">[image of type {} not shown]</p>",
            escape(mime)
        )
    }
}

/// Content that is a string or text/image blocks: text as markdown.
fn markdown_content(content: &Value) -> String {
    match content {
        Value::String(s) => markdown(s),
        Value::Array(blocks) => {
            let mut out = String::new();
            for block in blocks {
                match text_of(&block["type"]) {
                    "text" => out.push_str(&markdown(text_of(&block["text"]))),
                    "image" => out.push_str(&image(block)),
                    _ => {}
                }
            }
            out
        }
        _ => String::new(),
    }
}

/// Content as preformatted text (tool output), images embedded.
fn plain_content(content: &Value) -> String {
    match content {
        Value::String(s) => format!("<pre>{}</pre>", escape(s)),
        Value::Array(blocks) => {
            let mut out = String::new();
            let mut text = String::new();
            for block in blocks {
                match text_of(&block["type"]) {
                    "text" => text.push_str(text_of(&block["text"])),
                    "image" => out.push_str(&image(block)),
                    _ => {}
                }
            }
            if !text.is_empty() {
                out.insert_str(0, &format!("<pre>{}</pre>", escape(&text)));
            }
            out
        }
        _ => String::new(),
    }
}

fn card(out: &mut String, class: &str, role: &str, inner: &str) {
    let _ = writeln!(
        out,
        "<section class=\"entry {class}\"><div class=\"role\">{}</div>{inner}</section>",
        escape(role)
    );
}

fn note(out: &mut String, text: &str) {
    let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(text));
}

fn render_entry(out: &mut String, entry: &Value) {
    match text_of(&entry["type"]) {
        "message" => render_message(out, &entry["message"]),
        "custom_message" => {
            let hidden = if entry["display"] == Value::Bool(false) {
                " (not displayed in pi)"
            } else {
                ""
            };
            let role = format!("{}{hidden}", text_of(&entry["customType"]));
            card(out, "custom", &role, &markdown_content(&entry["content"]));
        }
        "compaction" => {
            let mut role = "Compaction summary".to_owned();
            if let Some(n) = entry["tokensBefore"].as_u64() {
                let _ = write!(role, " ({n} tokens before)");
            }
            card(
                out,
                "compaction",
                &role,
                &markdown(text_of(&entry["summary"])),
            );
        }
        "branch_summary" => card(
            out,
            "branch-summary",
            "Branch summary",
            &markdown(text_of(&entry["summary"])),
        ),
        "model_change" => note(
            out,
            &format!(
                "Model: {}/{}",
                text_of(&entry["provider"]),
                text_of(&entry["modelId"])
            ),
        ),
        "thinking_level_change" => note(
            out,
            &format!("Thinking level: {}", text_of(&entry["thinkingLevel"])),
        ),
        "session_info" if entry["name"].is_string() => {
            note(out, &format!("Session named: {}", text_of(&entry["name"])))
        }
        // Extension state (custom), labels: not part of the conversation.
        _ => {}
    }
}

fn render_message(out: &mut String, message: &Value) {
    match text_of(&message["role"]) {
        "user" => card(out, "user", "User", &markdown_content(&message["content"])),
        "assistant" => render_assistant(out, message),
        "toolResult" => {
            let error = message["isError"] == Value::Bool(true);
            let role = format!(
                "Tool result: {}{}",
                text_of(&message["toolName"]),
                if error { " (error)" } else { "" }
            );
            let class = if error {
                "tool-result is-error"
            } else {
                "tool-result"
            };
            card(out, class, &role, &plain_content(&message["content"]));
        }
        "bashExecution" => {
            let mut inner = format!(
                "<pre>$ {}</pre><pre>{}</pre>",
                escape(text_of(&message["command"])),
                escape(text_of(&message["output"]))
            );
            if let Some(code) = message["exitCode"].as_i64().filter(|c| *c != 0) {
                let _ = write!(inner, "<p class=\"note\">exit code {code}</p>");
            }
            if message["cancelled"] == Value::Bool(true) {
                inner.push_str("<p class=\"note\">cancelled</p>");
            }
            card(out, "bash", "Bash", &inner);
        }
        "custom" => card(
            out,
            "custom",
            text_of(&message["customType"]),
            &markdown_content(&message["content"]),
        ),
        "compactionSummary" | "branchSummary" => card(
            out,
            "compaction",
            "Summary",
            &markdown(text_of(&message["summary"])),
        ),
        other => note(out, &format!("[a message with role {other:?} not shown]")),
    }
}

fn render_assistant(out: &mut String, message: &Value) {
    let mut inner = String::new();
    for block in message["content"].as_array().into_iter().flatten() {
        match text_of(&block["type"]) {
            "text" => inner.push_str(&markdown(text_of(&block["text"]))),
            "thinking" => {
                let text = text_of(&block["thinking"]);
                if !text.trim().is_empty() {
                    let _ = write!(
                        inner,
                        "<details class=\"thinking-block\"><summary>Thinking</summary><div class=\"thinking\">{}</div></details>",
                        escape(text)
                    );
                }
            }
            "toolCall" => {
                let arguments =
                    serde_json::to_string_pretty(&block["arguments"]).unwrap_or_default();
                let _ = write!(
                    inner,
                    "<div class=\"tool-call\"><div class=\"role\">Tool call: {}</div><pre>{}</pre></div>",
                    escape(text_of(&block["name"])),
                    escape(&arguments)
                );
            }
            _ => {}
        }
    }
    let stop = text_of(&message["stopReason"]);
    if stop == "error" || stop == "aborted" {
        let text = match message["errorMessage"].as_str() {
            Some(e) => format!("{stop}: {e}"),
            None => stop.to_owned(),
        };
        let _ = write!(inner, "<p class=\"note\">{}</p>", escape(&text));
    }
    let model = text_of(&message["model"]);
    let role = if model.is_empty() {
        "Assistant".to_owned()
    } else {
        format!("Assistant ({model})")
    };
    let class = if stop == "error" {
        "assistant error"
    } else {
        "assistant"
    };
    card(out, class, &role, &inner);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markdown_is_rendered_and_sanitised() {
        let html = markdown(
            "**bold** and `code`\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n\n[click](javascript:alert(3)) [ok](https://example.com)",
        );
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(!html.to_lowercase().contains("<script"), "{html}");
        assert!(!html.contains("onerror"), "{html}");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(html.contains("href=\"https://example.com\""), "{html}");
        assert!(
            html.contains("rel=\"noopener noreferrer nofollow\""),
            "{html}"
        );
    }

    #[test]
    fn images_only_as_raster_data() {
        let png = image(&json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}));
        assert!(
            png.contains("src=\"data:image/png;base64,iVBORw0KGgo=\""),
            "{png}"
        );
        let svg = image(&json!({"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz4="}));
        assert!(!svg.contains("<img"), "{svg}");
        let quote =
            image(&json!({"type": "image", "mimeType": "image/png", "data": "\" onerror=\"x"}));
        assert!(
            !quote.contains("<img") && !quote.contains("onerror=\""),
            "{quote}"
        );
    }

    #[test]
    fn output_paths_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path();
        let session = cwd.join("s.jsonl");
        std::fs::write(&session, "{}\n").unwrap();
        assert_eq!(
            resolve_output_path(cwd, &session, None).unwrap(),
            cwd.join("pi-session-s.html")
        );
        assert_eq!(
            resolve_output_path(cwd, &session, Some("out/../x.html")).unwrap_err(),
            format!(
                "Cannot export to {}: the folder {} does not exist",
                cwd.join("out/../x.html").display(),
                cwd.join("out/..").display()
            )
        );
        std::fs::create_dir(cwd.join("d")).unwrap();
        let e = resolve_output_path(cwd, &session, Some("d")).unwrap_err();
        assert!(e.contains("is a directory"), "{e}");
        let e = resolve_output_path(cwd, &session, Some("s.jsonl")).unwrap_err();
        assert!(e.contains("session file itself"), "{e}");
        let abs = cwd.join("d/abs.html");
        assert_eq!(
            resolve_output_path(
                Path::new("/nonexistent"),
                &session,
                Some(abs.to_str().unwrap())
            )
            .unwrap(),
            abs
        );
    }
}
