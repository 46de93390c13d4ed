//! What each example goes through, and running it on one side.
//!
//! The scenario, the same for both sides:
//! 1. `load`: the startup events (session_start handlers' UI requests, load errors);
//! 2. `get_commands`;
//! 3. `prompt (text)`: "Hello", answered with text (the extension's hooks: input,
//!    before_agent_start, context, turn and message events);
//! 4. `prompt (read)`: a prompt answered with a call of the built-in `read`, then text (the
//!    tool_call / tool_result hooks);
//! 5. one step per extension tool: a prompt answered with a call of it (arguments: a minimal
//!    object valid for its schema, [`minimal_value`]), then text;
//! 6. one step per command: a `prompt` of `/name` with no arguments (any model call it
//!    causes gets the filler answer "OK.");
//! 7. `shutdown`: stdin closed, as an RPC client quits.
//!
//! Tools and commands come from a discovery run of real pi (load, get_commands, the first
//! prompt, whose model request lists the tools), so both sides get the same steps and the
//! same model script.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use pichamber_model::Script;
use pichamber_model::mock_server::{self, MockServer};
use serde_json::{Value, json};

use super::common;
use super::common::oracle::Pi;
use super::rpc::Side;

pub const PROVIDER: &str = "mock";
pub const MODEL: &str = "mock-model";
pub const SYSTEM_PROMPT: &str = "You are a test.";
const HELLO: &str = "Hello";
const HELLO_ANSWER: &str = "Hello! How can I help?";
/// Model answers left for commands that start agent turns of their own.
const FILLERS: usize = 8;

/// A private copy of the pichamber binary cargo built for this test, so another build
/// replacing it mid-run (several worktrees share a target dir) cannot change or break the
/// run. The tests running at once share one copy; it goes when the last of them ends.
pub struct PrivateBinary {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

static PRIVATE: Mutex<Weak<PrivateBinary>> = Mutex::new(Weak::new());

/// The private copy (made on first use); every side started while it is held runs it.
pub fn use_private_binary() -> Arc<PrivateBinary> {
    let mut slot = PRIVATE.lock().unwrap();
    if let Some(existing) = slot.upgrade() {
        return existing;
    }
    let dir = tempfile::tempdir().expect("temp dir for the binary");
    let path = dir.path().join("pichamber");
    std::fs::copy(common::bin(), &path).expect("copy the pichamber binary");
    let binary = Arc::new(PrivateBinary { _dir: dir, path });
    *slot = Arc::downgrade(&binary);
    binary
}

pub fn bin() -> PathBuf {
    match PRIVATE.lock().unwrap().upgrade() {
        Some(binary) => binary.path.clone(),
        None => common::bin(),
    }
}

/// Runs the pichamber binary with the test's compile cache.
pub fn pichamber(args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .args(args)
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .env_remove("PICHAMBER_LOG")
        .output()
        .expect("run pichamber")
}

/// Set by a harness whose extensions are compared with a pi other than the one they were
/// written for: pichamber is then told which pi to follow (`--pi-version`).
static NAME_THE_VERSION: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every pichamber side of this test binary follow [`version`] by name.
#[allow(dead_code)]
pub fn name_the_version() {
    NAME_THE_VERSION.store(true, std::sync::atomic::Ordering::Relaxed);
}

thread_local! {
    /// The pi this thread's scenarios compare with, when a harness picks it per extension.
    static VERSION_HERE: std::cell::Cell<Option<Pi>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with this thread's scenarios comparing with `pi` (the third-party harness
/// compares each package with the pi it was written for).
#[allow(dead_code)]
pub fn with_version<T>(pi: Pi, f: impl FnOnce() -> T) -> T {
    let before = VERSION_HERE.with(|v| v.replace(Some(pi)));
    let out = f();
    VERSION_HERE.with(|v| v.set(before));
    out
}

/// The version of pi the corpus runs: the one [`with_version`] picked, else `CORPUS_PI=1.6.0`
/// for current pi, 0.73.1 otherwise.
pub fn version() -> Pi {
    if let Some(pi) = VERSION_HERE.with(std::cell::Cell::get) {
        return pi;
    }
    match std::env::var("CORPUS_PI").as_deref() {
        Ok("1.6.0") | Ok("1.6") => Pi::V1_6,
        _ => Pi::V0_73,
    }
}

pub fn examples_dir() -> PathBuf {
    version().package().join("examples/extensions")
}

/// Real pi of [`version`]; `None` (with a message) when it is not installed.
pub fn pi_command() -> Option<Command> {
    version().command()
}

/// Every example pi ships: its `.ts` files and folders, by name.
pub fn list_examples() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(examples_dir())
        .expect("pi's examples folder")
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() || p.extension().is_some_and(|e| e == "ts"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Mock model servers of every example share one runtime.
static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
});

fn serve(script: &Value) -> MockServer {
    let script = Script::from_value(script.clone()).expect("valid script");
    RUNTIME
        .block_on(mock_server::start(script))
        .expect("start the mock model server")
}

/// The example as both sides load it: its own path, or for a package with dependencies a
/// copy with them installed (`npm ci`, cached under the target dir by the package's content
/// hash; never inside the repository's node_modules).
pub fn prepare(name: &str) -> Result<PathBuf, String> {
    let source = examples_dir().join(name);
    let manifest = source.join("package.json");
    let Ok(text) = std::fs::read_to_string(&manifest) else {
        return Ok(source);
    };
    let package: Value = serde_json::from_str(&text).map_err(|e| format!("package.json: {e}"))?;
    if package["dependencies"]
        .as_object()
        .is_none_or(|d| d.is_empty())
    {
        return Ok(source);
    }
    let hash = {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(text.as_bytes());
        hasher.update(std::fs::read(source.join("package-lock.json")).unwrap_or_default());
        format!("{:x}", hasher.finalize())[..12].to_owned()
    };
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("corpus-deps");
    let ready = cache.join(format!("{name}-{hash}"));
    if ready.join("node_modules").exists() {
        return Ok(ready);
    }
    let partial = cache.join(format!("{name}-{hash}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    copy_dir(&source, &partial).map_err(|e| format!("copy: {e}"))?;
    let install = if partial.join("package-lock.json").exists() {
        "ci"
    } else {
        "install"
    };
    let out = Command::new("npm")
        .arg(install)
        .args([
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--loglevel=error",
        ])
        .current_dir(&partial)
        .output()
        .map_err(|e| format!("npm: {e}"))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(format!(
            "npm {install} failed: {}",
            first_line(&String::from_utf8_lossy(&out.stderr))
        ));
    }
    let _ = std::fs::remove_dir_all(&ready);
    std::fs::rename(&partial, &ready).map_err(|e| format!("rename: {e}"))?;
    Ok(ready)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

pub fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
        .to_owned()
}

/// A minimal value valid for a JSON schema: `const`, else the first `enum` value, else the
/// first variant of `anyOf` / `oneOf` that is not null; objects get their required
/// properties only, arrays `minItems` items, numbers their `minimum` (or 1), booleans false,
/// strings "notes.txt" for a property named like a path or file (the workspace has one) and
/// "test" otherwise (also a harmless shell command).
pub fn minimal_value(schema: &Value, name: &str) -> Value {
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(variants) = schema[key].as_array() {
            let pick = variants
                .iter()
                .find(|v| v["type"] != "null")
                .or(variants.first());
            if let Some(variant) = pick {
                return minimal_value(variant, name);
            }
        }
    }
    if let Some(first) = schema["allOf"].as_array().and_then(|a| a.first()) {
        return minimal_value(first, name);
    }
    let kind = match &schema["type"] {
        Value::String(t) => t.as_str(),
        Value::Array(types) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null"),
        _ if schema.get("properties").is_some() => "object",
        _ if schema.get("items").is_some() => "array",
        _ => "string",
    };
    match kind {
        "object" => {
            let mut out = serde_json::Map::new();
            for key in schema["required"].as_array().into_iter().flatten() {
                let Some(key) = key.as_str() else { continue };
                let property = &schema["properties"][key];
                out.insert(key.to_owned(), minimal_value(property, key));
            }
            Value::Object(out)
        }
        "array" => {
            let n = schema["minItems"].as_u64().unwrap_or(0) as usize;
            Value::Array(vec![minimal_value(&schema["items"], name); n])
        }
        "integer" | "number" => schema
            .get("minimum")
            .cloned()
            .or_else(|| {
                schema
                    .get("exclusiveMinimum")
                    .map(|m| json!(m.as_f64().unwrap_or(0.0) + 1.0))
            })
            .unwrap_or(json!(1)),
        "boolean" => json!(false),
        "null" => Value::Null,
        _ => {
            let lower = name.to_ascii_lowercase();
            if lower.contains("path") || lower.contains("file") {
                json!("notes.txt")
            } else {
                json!("test")
            }
        }
    }
}

/// What a step does.
#[derive(Debug, Clone)]
pub enum Action {
    /// Wait for the side to finish starting.
    Startup,
    /// Wait for the side to finish starting and to notify this text (tests/thirdparty.rs's
    /// own scenarios; the corpus's never do).
    #[allow(dead_code)]
    StartupUntilNotice(String),
    Request(Value),
    Prompt(String),
}

#[derive(Debug, Clone)]
pub struct Step {
    pub label: String,
    pub action: Action,
}

/// An extension tool the model is scripted to call.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

/// What the discovery run found.
#[derive(Debug, Default, Clone)]
pub struct Discovery {
    pub commands: Vec<String>,
    pub tools: Vec<ToolCall>,
    /// pi could not load the example: the first line it printed about it.
    pub pi_load_error: Option<String>,
}

/// Everything one side printed, step by step, and what it sent the model.
#[derive(Debug, Default)]
pub struct Record {
    pub steps: Vec<(String, Vec<Value>)>,
    /// The model requests (JSON bodies), and for each the index of the step that made it.
    pub requests: Vec<(usize, Value)>,
    pub exit_success: Option<bool>,
    pub stderr: String,
}

/// A side's directories: the workspace (its cwd, with notes.txt) and its home (HOME and
/// PI_CODING_AGENT_DIR, with models.json pointing at the side's mock).
pub struct Place {
    pub workspace: PathBuf,
    pub home: PathBuf,
}

impl Place {
    pub fn new(root: PathBuf, base_url: &str) -> Place {
        let workspace = root.join("workspace");
        let home = root.join("home");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(workspace.join("notes.txt"), "first line\nsecond line\n").unwrap();
        let models = json!({ "providers": { PROVIDER: {
            "baseUrl": base_url,
            "api": "openai-completions",
            "apiKey": "test-key",
            "models": [{ "id": MODEL }],
        }}});
        std::fs::write(
            home.join("models.json"),
            serde_json::to_string_pretty(&models).unwrap(),
        )
        .unwrap();
        Place { workspace, home }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Pi,
    Pichamber,
}

/// What an example needs beyond the common grants, as its user would grant it: a file it
/// watches outside the workspace, a program its tool runs.
/// Packages that load no extension, so nothing says which pi they were written for: their
/// user names the version (`--pi-version`), as pichamber otherwise follows 1.6.0. subagent's
/// folder holds prompt templates beside its code, which makes it a package of templates for
/// pi and for pichamber alike; tests/resources.rs's res-demo has templates and skills only.
const SAYS_NO_VERSION: &[&str] = &["subagent", "res-demo"];

fn extra_grants(example: &str) -> &'static [&'static str] {
    match example {
        "file-trigger.ts" => &["--allow-write", "/tmp"],
        "truncated-tool.ts" => &["--allow-run", "rg"],
        // The MCP servers it starts (tests/thirdparty.rs's echo server runs under node).
        "pi-mcp-adapter" => &["--allow-run", "node"],
        // Its results and run folders are under the system's temporary folder.
        "pi-subagents" => &["--allow-write", "/tmp"],
        // The converter its previews run (not installed here: both sides find no pandoc).
        "pi-markdown-preview" => &["--allow-run", "pandoc"],
        // The search and extraction services it calls (no network here: both sides' requests
        // fail the same way).
        "pi-web-access" => &[
            "--allow-net",
            "mcp.exa.ai,api.exa.ai,api.perplexity.ai,generativelanguage.googleapis.com,r.jina.ai",
        ],
        _ => &[],
    }
}

fn command_for(kind: Kind, exts: &[&Path], place: &Place) -> Command {
    let mut cmd = match kind {
        Kind::Pi => {
            let mut cmd = pi_command().expect("real pi");
            cmd.args([
                "--mode",
                "rpc",
                "--no-session",
                "--no-extensions",
                "--no-skills",
                "--no-prompt-templates",
                "--no-themes",
                "--no-context-files",
            ]);
            cmd
        }
        Kind::Pichamber => {
            let mut cmd = Command::new(bin());
            // Without pi 1.6.0's built-in extensions, as pi's side runs.
            cmd.args(["rpc", "--no-extensions"])
                .arg("--models")
                .arg(place.home.join("models.json"))
                .arg("--cwd")
                .arg(&place.workspace)
                // The grants a user would give an example they trust to do its job: the
                // workspace and pi's agent folder, git and a shell, and where home is.
                .arg("--allow-write")
                .arg(&place.workspace)
                .arg("--allow-write")
                .arg(&place.home)
                .args(["--allow-run", "git,bash,sh"])
                .args(["--allow-env", "HOME,PI_CODING_AGENT_DIR"]);
            let mut name_it = NAME_THE_VERSION.load(std::sync::atomic::Ordering::Relaxed);
            for ext in exts {
                let name = ext.file_name().map(|n| n.to_string_lossy());
                let name = name.as_deref().unwrap_or_default();
                cmd.args(extra_grants(name));
                name_it |= SAYS_NO_VERSION.contains(&name);
            }
            if name_it {
                cmd.args(["--pi-version", version().version()]);
            }
            cmd
        }
    };
    // The same environment on both sides, whatever the machine's: pi's theme picks its
    // colour codes from COLORTERM / TERM / COLORFGBG, and tools print in the locale's
    // language.
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &place.home)
        .env("PI_CODING_AGENT_DIR", &place.home)
        .env("PI_OFFLINE", "1")
        .env("COLORTERM", "truecolor")
        .env("TERM", "xterm-256color")
        .env("LC_ALL", "C");
    if kind == Kind::Pichamber {
        cmd.env("PICHAMBER_CACHE_DIR", common::cache_dir());
    }
    cmd.args(["--provider", PROVIDER, "--model", MODEL])
        .args(["--system-prompt", SYSTEM_PROMPT])
        .current_dir(&place.workspace);
    for ext in exts {
        cmd.arg("-e").arg(ext);
    }
    cmd
}

/// Runs `steps` on one side against a fresh mock serving `script`, in `root`.
pub fn run_side(kind: Kind, ext: &Path, root: PathBuf, script: &Value, steps: &[Step]) -> Record {
    run_side_with(kind, &[ext], root, script, steps)
}

/// [`run_side`] with several extensions loaded into the session (`-e` each, in order).
pub fn run_side_with(
    kind: Kind,
    exts: &[&Path],
    root: PathBuf,
    script: &Value,
    steps: &[Step],
) -> Record {
    let mock = serve(script);
    let place = Place::new(root, &mock.base_url());
    let mut record = Record::default();
    let mut side = match Side::spawn(command_for(kind, exts, &place)) {
        Ok(side) => side,
        Err(e) => {
            record.stderr = format!("cannot start: {e}");
            return record;
        }
    };
    let mut made = 0;
    for (index, step) in steps.iter().enumerate() {
        match &step.action {
            Action::Startup => {}
            Action::StartupUntilNotice(text) => side.settle_until(|l| {
                l["type"] == "extension_ui_request"
                    && l["method"] == "notify"
                    && l["message"] == *text
            }),
            Action::Request(command) => {
                side.request(command.clone());
            }
            Action::Prompt(text) => {
                side.request(json!({ "type": "prompt", "message": text }));
            }
        }
        side.settle();
        record.steps.push((step.label.clone(), side.take()));
        let requests = mock.requests();
        record
            .requests
            .extend(requests[made..].iter().map(|r| (index, r.clone())));
        made = requests.len();
    }
    let (last, status, stderr) = side.close();
    record.steps.push(("shutdown".into(), last));
    let requests = mock.requests();
    record
        .requests
        .extend(requests[made..].iter().map(|r| (steps.len(), r.clone())));
    record.exit_success = status;
    record.stderr = stderr;
    record
}

fn text_turn(text: &str) -> Value {
    json!({ "text": text, "usage": { "input": 10, "output": 5 } })
}

fn call_turn(name: &str, arguments: &Value) -> Value {
    json!({ "toolCalls": [{ "name": name, "arguments": arguments }], "usage": { "input": 10, "output": 5 } })
}

fn discovery_steps() -> Vec<Step> {
    vec![
        Step {
            label: "load".into(),
            action: Action::Startup,
        },
        Step {
            label: "get_commands".into(),
            action: Action::Request(json!({ "type": "get_commands" })),
        },
        Step {
            label: "prompt (text)".into(),
            action: Action::Prompt(HELLO.into()),
        },
    ]
}

/// The tools pi offers the model in a request: (name, parameters), with their full entry.
fn offered_tools(request: &Value) -> Vec<(String, Value, Value)> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            (
                t["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                t["function"]["parameters"].clone(),
                t.clone(),
            )
        })
        .collect()
}

/// The tools pi offers with no extension: pi's own built-ins, left out of the tool steps
/// (unless an extension replaces one: then its entry differs and it is called).
pub fn builtin_tools(root: PathBuf) -> Vec<Value> {
    let script = json!({ "turns": [text_turn(HELLO_ANSWER)] });
    let mock = serve(&script);
    let place = Place::new(root, &mock.base_url());
    let cmd = command_for(Kind::Pi, &[], &place);
    let mut side = Side::spawn(cmd).expect("start pi");
    side.settle();
    side.request(json!({ "type": "prompt", "message": HELLO }));
    side.settle();
    drop(side);
    let requests = mock.requests();
    let first = requests.first().expect("pi asked the model");
    offered_tools(first)
        .into_iter()
        .map(|(_, _, t)| t)
        .collect()
}

/// Discovers an example's commands and tools by running real pi on the first steps.
pub fn discover(ext: &Path, root: PathBuf, builtins: &[Value]) -> Discovery {
    let script = json!({ "turns": [text_turn(HELLO_ANSWER)] });
    let record = run_side(Kind::Pi, ext, root, &script, &discovery_steps());
    let mut found = Discovery::default();
    let all: Vec<&Value> = record.steps.iter().flat_map(|(_, e)| e).collect();
    let load = record.steps.first().map_or(&[][..], |(_, lines)| lines);
    if record.steps.is_empty() || load.iter().any(|e| e["type"] == "<exited>") {
        found.pi_load_error = Some(first_line(&record.stderr));
    }
    for event in &all {
        if event["type"] == "response" && event["command"] == "get_commands" {
            found.commands = event["data"]["commands"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(str::to_owned))
                .collect();
        }
    }
    if let Some((_, request)) = record.requests.first() {
        found.tools = offered_tools(request)
            .into_iter()
            .filter(|(_, _, entry)| !builtins.contains(entry))
            .map(|(name, parameters, _)| ToolCall {
                arguments: minimal_value(&parameters, &name),
                name,
            })
            .collect();
    }
    found
}

/// The full scenario's steps and model script for what discovery found.
pub fn scenario(found: &Discovery) -> (Vec<Step>, Value) {
    let mut steps = discovery_steps();
    let mut turns = vec![text_turn(HELLO_ANSWER)];
    steps.push(Step {
        label: "prompt (read)".into(),
        action: Action::Prompt("Read notes.txt".into()),
    });
    turns.push(call_turn("read", &json!({ "path": "notes.txt" })));
    turns.push(text_turn("The notes have two lines."));
    for tool in &found.tools {
        steps.push(Step {
            label: format!("tool {}", tool.name),
            action: Action::Prompt(format!("Use the tool {}.", tool.name)),
        });
        turns.push(call_turn(&tool.name, &tool.arguments));
        turns.push(text_turn("Done."));
    }
    for command in &found.commands {
        steps.push(Step {
            label: format!("/{command}"),
            action: Action::Prompt(format!("/{command}")),
        });
    }
    turns.extend((0..FILLERS).map(|_| text_turn("OK.")));
    (steps, json!({ "turns": turns }))
}
