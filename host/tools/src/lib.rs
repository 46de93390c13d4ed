//! pi 0.73.1's seven built-in tools (core/tools/*.js) in Rust: read, bash, edit, write, grep,
//! find, ls, with pi's names, descriptions, parameter schemas, prompt snippets and
//! guidelines, result `content`/`details` shapes, truncation limits and messages.
//!
//! What differs from pi is where they act. Every file tool (read, edit, write, grep, find,
//! ls) works inside the session's [`Workspace`]: paths resolve as in pi, and must land inside
//! the root; `..`, absolute paths elsewhere, `~` outside the root and symbolic links pointing
//! out are refused with an error naming the path. grep and find run in-process (the `ignore`,
//! `grep-searcher` and `globset` crates that ripgrep and fd are built from) instead of
//! spawning `rg`/`fd`.
//!
//! **bash is not confined.** It runs `bash -c` as the host user with the workspace root as
//! its working directory and the host's environment: the command can read and write anything
//! that user can. The confinement above is for the model's file tools only. (The bash tool an
//! extension creates runs in the extension's confinement instead: [`ExecOptions::confinement`].)
//!
//! Errors: where pi's tool throws, [`execute`] returns `Err(message)` with pi's text; the
//! caller makes it an error tool result (`content: [{type:"text",text:message}]`,
//! `details: {}`, `isError: true`) as pi's agent loop does.
//!
//! Known differences from pi (everything else is checked against pi itself by
//! tests/builtin_tools.rs):
//! - read: an image pi scales or converts is encoded by the `image` crate, not Photon: the
//!   same sizes, notes and pixels of a PNG, other bytes (image.rs); the macOS NFD filename
//!   fallback is not tried.
//! - edit: fuzzy matching folds the common Unicode compatibility characters instead of full
//!   NFKC (identical for text already in NFKC, such as ASCII).
//! - grep, find: results in sorted order (rg/fd order by thread timing), so which matches a
//!   limit keeps is deterministic.
//! - bash: `/bin/bash` (or `bash` on PATH); pi's `shellPath` setting, `sh` fallback and the
//!   PATH entry for its own bin directory are not reproduced.
//!
//! It knows nothing of sessions or extensions beyond the grants an extension's tool runs with
//! ([`for_extension`]).

mod args;
mod bash;
mod collate;
mod edit;
mod edit_diff;
mod find;
pub mod for_extension;
mod grep;
mod image;
mod line_diff;
mod ls;
mod output;
mod read;
mod truncate;
mod workspace;
mod write;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use pichamber_pi::PiVersion;
use serde_json::{Value, json};
use tokio::sync::watch;

pub use image::{InlineImage, ResizeLimits, ResizedImage, inline_image, resize_image};
pub use workspace::Workspace;

use truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, GREP_MAX_LINE_LENGTH};

/// What the model is told about a tool.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: &'static str,
    pub label: &'static str,
    pub description: String,
    /// JSON Schema of the arguments, as TypeBox builds it for pi.
    pub parameters: Value,
    /// The one-line entry in the system prompt's tool list.
    pub prompt_snippet: Option<String>,
    /// Lines pi adds to the system prompt's guidelines when the tool is active.
    pub prompt_guidelines: Vec<String>,
    /// pi 1.6.0's request for schema-constrained arguments where the provider offers it.
    pub constrained_sampling: Option<Value>,
}

/// All built-in tool names in pi's order.
pub const ALL: &[&str] = &["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The tools pi activates when none are chosen (sdk.js, agent-session.js).
pub const DEFAULT_ACTIVE: &[&str] = &["read", "bash", "edit", "write"];

/// A tool's result. `details` is `Value::Null` where pi leaves it `undefined` (so it is
/// absent once serialised).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutput {
    pub content: Value,
    pub details: Value,
    /// pi 1.6.0's machine-readable result (read: the text, or the image with its note); it
    /// goes to `tool_execution_end` and `tool_result`, never to the model.
    pub structured_content: Option<Value>,
    /// An error result that is not a thrown error (pi 1.6.0's bash when the command fails):
    /// the model sees the content as an error.
    pub is_error: bool,
}

impl ToolOutput {
    pub(crate) fn text(text: impl Into<String>, details: Value) -> Self {
        ToolOutput {
            content: json!([{"type": "text", "text": text.into()}]),
            details,
            structured_content: None,
            is_error: false,
        }
    }
}

/// What a call knows beyond its arguments.
#[derive(Clone, Debug, Default)]
pub struct ExecOptions {
    /// Whether the session's current model takes image input; `None` when there is no
    /// model (pi then adds no note to an image read).
    pub model_accepts_images: Option<bool>,
    /// The environment bash runs with instead of the host's (an extension's scrubbed one).
    pub env: Option<Vec<(String, String)>>,
    /// The confinement bash runs in (an extension's grants); `None`, the agent's own bash
    /// tool, runs unconfined.
    pub confinement: Option<std::sync::Arc<pichamber_access::sandbox::Confinement>>,
    /// Whose tools' result shapes to follow.
    pub pi: PiVersion,
    /// pi 1.6.0's [`SESSION_ENV`] values for the agent's bash (only those that are known).
    pub session_env: Vec<(String, String)>,
}

/// The variables pi 1.6.0's bash sets to describe the session it runs in (and removes from
/// what it inherits).
pub const SESSION_ENV: [&str; 5] = [
    "PI_SESSION_ID",
    "PI_SESSION_FILE",
    "PI_PROVIDER",
    "PI_MODEL",
    "PI_REASONING_LEVEL",
];

/// The seven tool specs, in pi's order, as `pi`'s release words them.
pub fn builtin_specs(pi: PiVersion) -> Vec<ToolSpec> {
    ALL.iter().filter_map(|name| spec(name, pi)).collect()
}

/// One built-in tool's spec, as `pi`'s release words it.
pub fn spec(name: &str, pi: PiVersion) -> Option<ToolSpec> {
    let mut spec = spec_0_73(name)?;
    if pi.is_1_6() {
        reword_for_1_6(&mut spec);
    }
    Some(spec)
}

/// What pi 1.6.0 changed in the tools' wording and schemas (core/tools/*.js).
fn reword_for_1_6(spec: &mut ToolSpec) {
    let prefer = json!({"type": "json_schema", "strict": "prefer"});
    match spec.name {
        "read" => {
            spec.description = spec
                .description
                .replace("(jpg, png, gif, webp)", "(jpg, png, gif, webp, bmp)");
            spec.constrained_sampling = Some(prefer);
        }
        "bash" => {
            spec.parameters["properties"]["command"]["description"] =
                json!("Shell command to execute");
            spec.prompt_guidelines = vec![
                "You can inspect PI_* environment variables for current model and session details."
                    .into(),
            ];
            spec.constrained_sampling = Some(prefer);
        }
        "edit" => {
            let p = spec.parameters.as_object_mut().expect("edit's schema");
            p.remove("additionalProperties");
            if let Some(items) = spec.parameters["properties"]["edits"]["items"].as_object_mut() {
                items.remove("additionalProperties");
            }
            spec.prompt_guidelines = vec![
                "Use edit for targeted changes. Batch changes to one file in a single call.".into(),
                "Each edits[].oldText must exactly and uniquely match the original file. Keep matches short and non-overlapping; merge nearby changes without including large unchanged regions.".into(),
            ];
            spec.constrained_sampling = Some(prefer);
        }
        "write" => spec.constrained_sampling = Some(prefer),
        "grep" => {
            spec.parameters["properties"]["glob"]["description"] = json!(
                "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"
            );
        }
        "find" => {
            spec.parameters["properties"]["pattern"]["description"] = json!(
                "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g. '*.ts', it matches file names at any depth"
            );
        }
        _ => {}
    }
}

/// pi 1.6.0's `structuredContent` of a built-in tool's result, derived from what the model
/// gets: read's text (or its image with the note), nothing for the other file tools.
fn structured_content(name: &str, output: &ToolOutput) -> Option<Value> {
    if name != "read" {
        return None;
    }
    let blocks = output.content.as_array()?;
    let text = blocks
        .iter()
        .find(|b| b["type"] == "text")
        .and_then(|b| b["text"].as_str());
    match blocks.iter().find(|b| b["type"] == "image") {
        Some(image) => Some(json!({
            "type": "image",
            "data": image["data"],
            "mimeType": image["mimeType"],
            "note": text.unwrap_or_default(),
        })),
        None => text.map(|t| json!(t)),
    }
}

/// pi 0.73.1's spec of one built-in tool.
fn spec_0_73(name: &str) -> Option<ToolSpec> {
    let kb = DEFAULT_MAX_BYTES / 1024;
    let string = |d: &str| json!({"type": "string", "description": d});
    let number = |d: &str| json!({"type": "number", "description": d});
    let boolean = |d: &str| json!({"type": "boolean", "description": d});
    Some(match name {
        "read" => ToolSpec {
            name: "read",
            label: "read",
            description: format!(
                "Read the contents of a file. Supports text files and images (jpg, png, gif, webp). Images are sent as attachments. For text files, output is truncated to {DEFAULT_MAX_LINES} lines or {kb}KB (whichever is hit first). Use offset/limit for large files. When you need the full file, continue with offset until complete."
            ),
            parameters: json!({
                "type": "object",
                "required": ["path"],
                "properties": {
                    "path": string("Path to the file to read (relative or absolute)"),
                    "offset": number("Line number to start reading from (1-indexed)"),
                    "limit": number("Maximum number of lines to read"),
                },
            }),
            prompt_snippet: Some("Read file contents".into()),
            prompt_guidelines: vec!["Use read to examine files instead of cat or sed.".into()],
            constrained_sampling: None,
        },
        "bash" => ToolSpec {
            name: "bash",
            label: "bash",
            description: format!(
                "Execute a bash command in the current working directory. Returns stdout and stderr. Output is truncated to last {DEFAULT_MAX_LINES} lines or {kb}KB (whichever is hit first). If truncated, full output is saved to a temp file. Optionally provide a timeout in seconds."
            ),
            parameters: json!({
                "type": "object",
                "required": ["command"],
                "properties": {
                    "command": string("Bash command to execute"),
                    "timeout": number("Timeout in seconds (optional, no default timeout)"),
                },
            }),
            prompt_snippet: Some("Execute bash commands (ls, grep, find, etc.)".into()),
            prompt_guidelines: vec![],
            constrained_sampling: None,
        },
        "edit" => ToolSpec {
            name: "edit",
            label: "edit",
            description: "Edit a single file using exact text replacement. Every edits[].oldText must match a unique, non-overlapping region of the original file. If two changes affect the same block or nearby lines, merge them into one edit instead of emitting overlapping edits. Do not include large unchanged regions just to connect distant changes.".into(),
            parameters: json!({
                "type": "object",
                "required": ["path", "edits"],
                "properties": {
                    "path": string("Path to the file to edit (relative or absolute)"),
                    "edits": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["oldText", "newText"],
                            "properties": {
                                "oldText": string("Exact text for one targeted replacement. It must be unique in the original file and must not overlap with any other edits[].oldText in the same call."),
                                "newText": string("Replacement text for this targeted edit."),
                            },
                            "additionalProperties": false,
                        },
                        "description": "One or more targeted replacements. Each edit is matched against the original file, not incrementally. Do not include overlapping or nested edits. If two changes touch the same block or nearby lines, merge them into one edit instead.",
                    },
                },
                "additionalProperties": false,
            }),
            prompt_snippet: Some("Make precise file edits with exact text replacement, including multiple disjoint edits in one call".into()),
            prompt_guidelines: vec![
                "Use edit for precise changes (edits[].oldText must match exactly)".into(),
                "When changing multiple separate locations in one file, use one edit call with multiple entries in edits[] instead of multiple edit calls".into(),
                "Each edits[].oldText is matched against the original file, not after earlier edits are applied. Do not emit overlapping or nested edits. Merge nearby changes into one edit.".into(),
                "Keep edits[].oldText as small as possible while still being unique in the file. Do not pad with large unchanged regions.".into(),
            ],
            constrained_sampling: None,
        },
        "write" => ToolSpec {
            name: "write",
            label: "write",
            description: "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.".into(),
            parameters: json!({
                "type": "object",
                "required": ["path", "content"],
                "properties": {
                    "path": string("Path to the file to write (relative or absolute)"),
                    "content": string("Content to write to the file"),
                },
            }),
            prompt_snippet: Some("Create or overwrite files".into()),
            prompt_guidelines: vec!["Use write only for new files or complete rewrites.".into()],
            constrained_sampling: None,
        },
        "grep" => ToolSpec {
            name: "grep",
            label: "grep",
            description: format!(
                "Search file contents for a pattern. Returns matching lines with file paths and line numbers. Respects .gitignore. Output is truncated to {} matches or {kb}KB (whichever is hit first). Long lines are truncated to {GREP_MAX_LINE_LENGTH} chars.",
                grep::DEFAULT_LIMIT
            ),
            parameters: json!({
                "type": "object",
                "required": ["pattern"],
                "properties": {
                    "pattern": string("Search pattern (regex or literal string)"),
                    "path": string("Directory or file to search (default: current directory)"),
                    "glob": string("Filter files by glob pattern, e.g. '*.ts' or '**/*.spec.ts'"),
                    "ignoreCase": boolean("Case-insensitive search (default: false)"),
                    "literal": boolean("Treat pattern as literal string instead of regex (default: false)"),
                    "context": number("Number of lines to show before and after each match (default: 0)"),
                    "limit": number("Maximum number of matches to return (default: 100)"),
                },
            }),
            prompt_snippet: Some("Search file contents for patterns (respects .gitignore)".into()),
            prompt_guidelines: vec![],
            constrained_sampling: None,
        },
        "find" => ToolSpec {
            name: "find",
            label: "find",
            description: format!(
                "Search for files by glob pattern. Returns matching file paths relative to the search directory. Respects .gitignore. Output is truncated to {} results or {kb}KB (whichever is hit first).",
                find::DEFAULT_LIMIT
            ),
            parameters: json!({
                "type": "object",
                "required": ["pattern"],
                "properties": {
                    "pattern": string("Glob pattern to match files, e.g. '*.ts', '**/*.json', or 'src/**/*.spec.ts'"),
                    "path": string("Directory to search in (default: current directory)"),
                    "limit": number("Maximum number of results (default: 1000)"),
                },
            }),
            prompt_snippet: Some("Find files by glob pattern (respects .gitignore)".into()),
            prompt_guidelines: vec![],
            constrained_sampling: None,
        },
        "ls" => ToolSpec {
            name: "ls",
            label: "ls",
            description: format!(
                "List directory contents. Returns entries sorted alphabetically, with '/' suffix for directories. Includes dotfiles. Output is truncated to {} entries or {kb}KB (whichever is hit first).",
                ls::DEFAULT_LIMIT
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": string("Directory to list (default: current directory)"),
                    "limit": number("Maximum number of entries to return (default: 500)"),
                },
            }),
            prompt_snippet: Some("List directory contents".into()),
            prompt_guidelines: vec![],
            constrained_sampling: None,
        },
        _ => return None,
    })
}

/// pi's `prepareArguments`, which runs before schema validation: the edit tool accepts
/// `edits` sent as a JSON string and the legacy top-level `oldText`/`newText` pair. Other
/// tools' arguments pass through unchanged.
pub fn prepare_arguments(name: &str, args: Value) -> Value {
    match name {
        "edit" => edit::prepare_arguments(args),
        _ => args,
    }
}

/// Runs built-in tool `name` with pi's semantics. `cancel` turning `true` aborts the call
/// (bash kills its process group). `on_update` receives partial results (bash only, in
/// pi's `tool_execution_update` `partialResult` shape).
pub async fn execute(
    name: &str,
    args: &Value,
    ws: &Workspace,
    cancel: watch::Receiver<bool>,
    on_update: &(dyn Fn(Value) + Send + Sync),
) -> Result<ToolOutput, String> {
    execute_with(name, args, ws, &ExecOptions::default(), cancel, on_update).await
}

/// [`execute`] with what the call knows about the session (the model's image support).
pub async fn execute_with(
    name: &str,
    args: &Value,
    ws: &Workspace,
    options: &ExecOptions,
    cancel: watch::Receiver<bool>,
    on_update: &(dyn Fn(Value) + Send + Sync),
) -> Result<ToolOutput, String> {
    match name {
        "bash" => bash::execute(args, ws, options, cancel, on_update).await,
        "read" | "edit" | "write" | "grep" | "find" | "ls" => {
            let mut output = run_blocking(name, args, ws, options, cancel).await?;
            if options.pi.is_1_6() {
                output.structured_content = structured_content(name, &output);
            }
            Ok(output)
        }
        _ => Err(format!("Tool {name} not found")),
    }
}

const ABORTED: &str = "Operation aborted";

/// Runs a file tool on the blocking pool. As in pi, an abort answers at once with
/// "Operation aborted"; a mutation already under way still finishes.
async fn run_blocking(
    name: &str,
    args: &Value,
    ws: &Workspace,
    options: &ExecOptions,
    cancel: watch::Receiver<bool>,
) -> Result<ToolOutput, String> {
    if *cancel.borrow() {
        return Err(ABORTED.into());
    }
    let flag = Arc::new(AtomicBool::new(false));
    let (name, args, ws, options, task_flag) = (
        name.to_owned(),
        args.clone(),
        ws.clone(),
        options.clone(),
        flag.clone(),
    );
    // Edits and writes of one file queue behind each other (pi's withFileMutationQueue);
    // an abort while waiting answers at once.
    let target = match name.as_str() {
        "edit" | "write" => args
            .get("path")
            .and_then(Value::as_str)
            .and_then(|p| ws.resolve(p).ok()),
        _ => None,
    };
    let guard = match target {
        Some(r) => tokio::select! {
            guard = ws.lock_file(&r) => Some(guard),
            () = cancelled(cancel.clone()) => return Err(ABORTED.into()),
        },
        None => None,
    };
    let task = tokio::task::spawn_blocking(move || {
        let _guard = guard;
        match name.as_str() {
            "read" => read::run(&args, &ws, &options),
            "edit" => edit::run(&args, &ws, options.pi),
            "write" => write::run(&args, &ws, options.pi),
            "grep" => grep::run(&args, &ws, &task_flag, options.pi),
            "find" => find::run(&args, &ws, &task_flag, options.pi),
            "ls" => ls::run(&args, &ws, options.pi),
            other => Err(format!("Tool {other} not found")),
        }
    });
    tokio::select! {
        joined = task => joined.map_err(|e| format!("Tool failed: {e}"))?,
        () = cancelled(cancel) => {
            flag.store(true, Ordering::Relaxed);
            Err(ABORTED.into())
        }
    }
}

/// Resolves when `cancel` becomes true; never if its sender is gone without cancelling.
pub(crate) async fn cancelled(mut cancel: watch::Receiver<bool>) {
    loop {
        if *cancel.borrow_and_update() {
            return;
        }
        if cancel.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// pi 1.6.0's limit of ls and find: whole, and at least 1 (0 would list nothing).
pub(crate) fn effective_limit(limit: f64, pi: PiVersion) -> f64 {
    if pi.is_1_6() {
        limit.floor().max(1.0)
    } else {
        limit
    }
}

/// A JavaScript number as JSON: integers without a fraction (`100`, not `100.0`).
pub(crate) fn js_json_number(n: f64) -> Value {
    if n == n.trunc() && n.abs() < 9.007_199_254_740_992e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_in_pi_order_with_defaults() {
        let names: Vec<_> = builtin_specs(PiVersion::V0_73)
            .iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ALL);
        assert_eq!(DEFAULT_ACTIVE, ["read", "bash", "edit", "write"]);
        let ls = spec("ls", PiVersion::V0_73).unwrap();
        assert!(ls.parameters.get("required").is_none());
        assert!(spec("nope", PiVersion::V1_6).is_none());
    }

    #[tokio::test]
    async fn unknown_tool_and_abort_before_start() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        let (_tx, rx) = watch::channel(false);
        let err = execute("nope", &json!({}), &ws, rx, &|_| {})
            .await
            .unwrap_err();
        assert_eq!(err, "Tool nope not found");
        let (_tx, rx) = watch::channel(true);
        let err = execute("ls", &json!({}), &ws, rx, &|_| {})
            .await
            .unwrap_err();
        assert_eq!(err, "Operation aborted");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_edits_of_one_file_all_apply() {
        let tmp = tempfile::tempdir().unwrap();
        let tokens: Vec<String> = (0..16).map(|i| format!("token{i:02}")).collect();
        std::fs::write(tmp.path().join("f.txt"), tokens.join("\n")).unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        let calls = tokens.iter().map(|t| {
            let ws = ws.clone();
            let args =
                json!({"path": "f.txt", "edits": [{"oldText": t, "newText": t.to_uppercase()}]});
            tokio::spawn(async move {
                let (_tx, rx) = watch::channel(false);
                execute("edit", &args, &ws, rx, &|_| {}).await
            })
        });
        for call in calls.collect::<Vec<_>>() {
            call.await.unwrap().unwrap();
        }
        let upper: Vec<String> = tokens.iter().map(|t| t.to_uppercase()).collect();
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("f.txt")).unwrap(),
            upper.join("\n")
        );
    }
}
