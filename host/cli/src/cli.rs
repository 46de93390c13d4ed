//! The `pichamber` command: build, run and inspect isolated pi extensions.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use serde_json::{Value, json};

use pichamber_artifact::Artifact;

/// println! that tolerates a closed stdout (`pichamber inspect x.wasm | head -1`) and
/// keeps extension text from driving the terminal (see [`terminal_safe`]).
macro_rules! say {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), "{}", terminal_safe(&format!($($arg)*)));
    }};
}

/// eprintln! with the same care.
macro_rules! esay {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stderr(), "{}", terminal_safe(&format!($($arg)*)));
    }};
}

/// Text for a terminal: control characters and direction overrides made visible (see
/// `pichamber_session::terminal`), and every continuation line indented, so text cannot pass
/// for a line of its own (a forged "error: ..."). Extension text is untrusted; `--json`
/// output is JSON-escaped already.
fn terminal_safe(text: &str) -> String {
    pichamber_session::terminal::escape(text).replace('\n', "\n  ")
}
use pichamber_access::Grants;
use pichamber_artifact::bundle;
use pichamber_model::models_json::{self, ModelsJson};
use pichamber_model::{ModelClient, OpenAiConfig, OpenAiModel, ScriptedModel};
use pichamber_rpc as rpc;
use pichamber_runtime::{InstanceOptions, InstanceSlots, Runtime};
use pichamber_session::discovery;
use pichamber_session::retry::RetrySettings;
use pichamber_session::store::{SessionStore, SyncPolicy};
use pichamber_session::{
    AgentSettings, DialogResponder, EventSink, NoDialogs, PiVersion, ScriptedAnswers, Session,
    SessionEvent, TerminalDialogs, ToolExecution, UiRequest,
};

#[derive(Parser)]
#[command(
    name = "pichamber",
    version,
    about = "Run pi coding-agent extensions isolated: each one a WASI component under wasmtime, with only the capabilities you grant",
    after_help = "Examples:\n  pichamber build ./my-ext.ts -o my-ext.wasm\n  pichamber run my-ext.wasm --tool greet --args '{\"name\":\"Ada\"}'\n  pichamber run ./my-ext.ts --command \"/deploy staging\" --answer yes\n  pichamber inspect my-ext.wasm"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Bundle an extension (TypeScript or JavaScript, with its npm dependencies) into a component.
    Build(BuildArgs),
    /// Load an extension in a fresh session and run tools, commands and events against it;
    /// with no step (and no --json), serve the web GUI on 127.0.0.1 and print its URL.
    Run(Box<RunArgs>),
    /// Show an extension's manifest and what it registers.
    Inspect(InspectArgs),
    /// Speak pi's RPC protocol on stdin/stdout (docs/rpc.md of pi): a drop-in for
    /// `pi --mode rpc` whose extensions run isolated; with --print or --mode json, pi's
    /// one-shot modes.
    Rpc(Box<RpcArgs>),
    /// Serve a script of canned model turns as an OpenAI-compatible endpoint on loopback, so
    /// pi (through a models.json provider) and pichamber can be driven by the same model.
    /// Prints the base URL; serves until stdin closes.
    MockModel(MockModelArgs),
    /// Write a session file (pi's JSONL, from --session or pi's session folder) as one
    /// self-contained HTML page: no script, no external resource, every text sanitised.
    /// The session file is only read.
    Export(ExportArgs),
    /// Check extensions in CI: run scenario files (YAML or JSON) with a scripted model in a
    /// sandbox and compare tool results, UI requests, entries, files and capability denials
    /// with what the scenarios expect; or audit what an extension asks for and uses.
    Check(pichamber_check::CheckArgs),
    /// Serve the web GUI and its HTTP API to several users: listen address, users and their
    /// bearer tokens, extensions per user or for all, data directory and capability grants
    /// come from a config file (TOML or JSON; see README).
    Serve(ServeArgs),
    /// pi's own command line (`pichamber pi --mode rpc -e EXT ...`; also the binary run
    /// under the name `pi`): a drop-in for programs that spawn pi's RPC mode. pi's options
    /// keep pi's meaning (TUI-only ones are ignored with a note); the session is kept where
    /// pi keeps it; PICHAMBER_PI_ARGS adds pichamber options (grants) to every start.
    Pi(PiArgs),
}

#[derive(Args)]
struct PiArgs {
    /// pi's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

#[derive(Args)]
struct ServeArgs {
    /// The config file (.toml, or JSON).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
}

#[derive(Args)]
struct ExportArgs {
    /// The session file (.jsonl).
    session: PathBuf,
    /// Where to write the page [default: pi-session-<name>.html in the current folder].
    #[arg(short, long, value_name = "FILE.html")]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct MockModelArgs {
    /// The script: {"turns": [...]} as for `run --script`.
    #[arg(long, value_name = "FILE")]
    script: PathBuf,
    /// The model id it answers as.
    #[arg(long, value_name = "ID", default_value = "mock-model")]
    model_id: String,
    /// Require this bearer key.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
}

#[derive(Args)]
struct BuildArgs {
    /// A .ts/.js file, a folder with index.ts, or a package whose package.json lists pi.extensions.
    ext: PathBuf,
    /// Where to write the component [default: <name>.wasm in the current folder].
    #[arg(short, long, value_name = "OUT.wasm")]
    output: Option<PathBuf>,
}

/// What a session is made of: its extensions, directory, grants, limits, model, agent
/// settings and session file. Shared by `run` and `rpc`.
#[derive(Args)]
struct SessionArgs {
    /// The extension(s): a .wasm built by `pichamber build`, or sources (built on the fly).
    /// Several load into one session in the order given, as pi loads several -e options.
    ext: Vec<PathBuf>,
    /// An extension to load (repeatable; same as the positional EXT, as in pi's -e).
    #[arg(short = 'e', long = "extension", value_name = "EXT")]
    extension: Vec<PathBuf>,
    /// The session's working directory (ctx.cwd) [default: the current directory].
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// With no extension given: do not look for extensions where pi finds them
    /// (.pi/extensions, ~/.pi/agent/extensions, settings.json extensions and packages); in
    /// `rpc`, also leave out pi 1.6.0's built-in extensions (/llama, /mcp, tool_search), as
    /// pi does.
    #[arg(long)]
    no_extensions: bool,
    /// In `rpc`: leave out pi 1.6.0's built-in MCP extension (no MCP server connects, no
    /// /mcp), as pi does.
    #[arg(long)]
    no_mcp: bool,
    /// Also load the project's own extensions and settings (.pi/ in --cwd): code that came
    /// with the project, so not loaded unless you say so (--project-trust yes).
    #[arg(long, conflicts_with = "project_trust")]
    trust_project: bool,
    /// Whose word decides whether the project's own extensions and settings load: yes, no,
    /// or pi: as pi 1.6.0 decides headless (the project_trust handlers of the user's and the
    /// given extensions, then the decision saved in trust.json, then settings.json's
    /// defaultProjectTrust; what the pi entry passes) [default: no, a folder with nothing of
    /// its own to load counting as trusted]
    #[arg(long, value_enum, value_name = "yes|no|pi")]
    project_trust: Option<ProjectTrust>,
    /// Do not load skills from pi's folders (~/.pi/agent/skills, ~/.agents/skills, and the
    /// project's with --trust-project); the -e packages' skills still load, as in pi.
    #[arg(long)]
    no_skills: bool,
    /// Do not load prompt templates from pi's folders (~/.pi/agent/prompts, and the
    /// project's with --trust-project); the -e packages' templates still load, as in pi.
    #[arg(long)]
    no_prompt_templates: bool,
    /// Set an extension flag: name=value (value is JSON, or a plain string).
    #[arg(long = "flag", value_name = "NAME=VALUE", value_parser = parse_flag)]
    flags: Vec<(String, Value)>,
    #[command(flatten)]
    limits: LimitArgs,
    #[command(flatten)]
    grants: GrantArgs,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    agent: AgentArgs,
    /// Record the session in this file, in pi's JSONL format; an existing file is resumed
    /// (pi can open it too). Each entry is on disk before it is reported. [default: memory]
    #[arg(long, value_name = "FILE", conflicts_with_all = ["no_session", "continue_session"])]
    session: Option<PathBuf>,
    /// Record a new session in this folder, named as pi names its files
    /// (`<time>_<id>.jsonl`; pi's own folder is ~/.pi/agent/sessions/--<cwd>--).
    #[arg(long, value_name = "DIR")]
    session_dir: Option<PathBuf>,
    /// Resume the most recent session of --session-dir (or of pi's folder for --cwd), or
    /// start one there when it has none (pi's --continue).
    #[arg(short = 'c', long = "continue", conflicts_with = "no_session")]
    continue_session: bool,
    /// Keep the session in memory only (the default; pi's --no-session, for its callers).
    #[arg(long, conflicts_with = "session_dir")]
    no_session: bool,
    /// The pi release to behave as where 0.73.1 and 1.6.0 differ (events, system prompt,
    /// tool wording) [default: the one the extensions import; 1.6.0 when they do not say]
    #[arg(long, value_name = "0.73.1|1.6.0")]
    pi_version: Option<pichamber_session::PiVersion>,
}

/// `--project-trust`: whose word decides whether a folder's own resources load.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProjectTrust {
    Yes,
    No,
    Pi,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    common: SessionArgs,
    /// Send a prompt to the agent and run it to completion (repeatable; "/name args" runs an
    /// extension command as pi does). Needs a model: --script or --model.
    #[arg(short, long, value_name = "TEXT")]
    prompt: Vec<String>,
    /// Call a tool (repeatable; steps run in command-line order).
    #[arg(long, value_name = "NAME")]
    tool: Vec<String>,
    /// JSON arguments for the --tool at the same position [default: {}].
    #[arg(long, value_name = "JSON")]
    args: Vec<String>,
    /// Run a slash command, e.g. "/deploy staging" (repeatable).
    #[arg(long, value_name = "\"/name args\"")]
    command: Vec<String>,
    /// Emit an event to the extension's handlers, e.g. tool_call (repeatable).
    #[arg(long, value_name = "NAME")]
    event: Vec<String>,
    /// JSON body for the --event at the same position (its "type" is added).
    #[arg(long, value_name = "JSON")]
    payload: Vec<String>,
    /// Answer the next dialog (repeatable, in order): an option (or its number) for select,
    /// yes/no for confirm, text for input and editor, a JSON object for a form, <cancel> to cancel.
    #[arg(long, value_name = "VALUE")]
    answer: Vec<String>,
    /// Print every event (UI requests, entries, messages, tool results, errors) as NDJSON.
    #[arg(long)]
    json: bool,
    /// No UI even on a terminal: dialogs resolve to their defaults and ctx.hasUI is false.
    #[arg(long, conflicts_with = "ui")]
    no_ui: bool,
    /// A UI even without --answer or a terminal (ctx.hasUI is true, as in pi's RPC mode;
    /// dialogs with no answer left are cancelled).
    #[arg(long)]
    ui: bool,
}

#[derive(Args)]
struct RpcArgs {
    #[command(flatten)]
    common: SessionArgs,
    /// pi's --mode: rpc (JSONL commands on stdin, responses and events on stdout), json (run
    /// the MESSAGEs, write the session header and every event as JSONL, exit) or text (as
    /// --print).
    #[arg(long, value_name = "MODE", default_value = "rpc", value_parser = ["rpc", "json", "text"])]
    mode: String,
    /// pi's --print: run the MESSAGEs, write the final assistant text, exit.
    #[arg(long)]
    print: bool,
    /// With --print or --mode json, after `--`: the prompts, in order. `@path` includes a text
    /// file in the first prompt (as `<file name="...">`) or attaches an image to it; text
    /// piped on stdin comes first, as in pi.
    #[arg(value_name = "MESSAGE", last = true)]
    messages: Vec<String>,
}

#[derive(Args)]
struct ModelArgs {
    /// A scripted model: a JSON file of canned assistant turns (see docs in README).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["model", "base_url"])]
    script: Option<PathBuf>,
    /// The model id. With --base-url: an OpenAI-compatible chat-completions model; otherwise
    /// looked up in models.json (pi's format) under --provider.
    #[arg(long, value_name = "ID")]
    model: Option<String>,
    /// The provider in models.json [default: the first that has --model].
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,
    /// Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1.
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Environment variable holding the API key for --base-url.
    #[arg(long, value_name = "VAR", default_value = "OPENAI_API_KEY")]
    api_key_env: String,
    /// pi's models.json [default: ~/.pi/agent/models.json].
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,
    /// The API key for the model, for this run only (pi's --api-key; --api-key-env keeps it
    /// off the command line).
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Thinking level: off, minimal, low, medium, high, xhigh.
    #[arg(long, value_name = "LEVEL", default_value = "off")]
    thinking: String,
}

#[derive(Args)]
struct AgentArgs {
    /// Leave out pi's built-in tools (read, bash, edit, write, grep, find, ls).
    #[arg(long)]
    no_builtin_tools: bool,
    /// Start with no tool active, built-in or extension (pi's --no-tools).
    #[arg(long, conflicts_with = "tools")]
    no_tools: bool,
    /// The tools the model may use, comma-separated [default: read,bash,edit,write + every
    /// extension tool].
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    tools: Option<Vec<String>>,
    /// Run a turn's tool calls one after another instead of pi's parallel mode.
    #[arg(long)]
    sequential_tools: bool,
    /// Replace the built-in system prompt.
    #[arg(long, value_name = "TEXT")]
    system_prompt: Option<String>,
    /// Append to the system prompt.
    #[arg(long, value_name = "TEXT")]
    append_system_prompt: Option<String>,
}

#[derive(Args)]
struct LimitArgs {
    /// Seconds one call may run guest code before it is stopped (waiting on dialogs does not count).
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    call_timeout: f64,
    /// Seconds one call may take in all, awaiting timers, programs and fetches included (time
    /// awaiting a person's answer to a dialog does not count).
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    call_wall_timeout: f64,
    /// Seconds a program the extension runs may take: the default and the most an extension
    /// may ask for with pi.exec's timeout.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    run_timeout: f64,
    /// Memory limit of each extension instance, in MiB (16 to 4096).
    #[arg(long, value_name = "MIB", default_value_t = 256, value_parser = parse_memory_limit)]
    memory_limit: usize,
}

#[derive(Args)]
struct GrantArgs {
    /// Let the extension read this directory tree (repeatable; comma-separated lists work).
    #[arg(long, value_name = "PATH", value_delimiter = ',', value_parser = parse_grant_folder)]
    allow_read: Vec<PathBuf>,
    /// Let the extension read and write this directory tree.
    #[arg(long, value_name = "PATH", value_delimiter = ',', value_parser = parse_grant_folder)]
    allow_write: Vec<PathBuf>,
    /// Let the extension run this program (a name on PATH; no shell unless you grant sh).
    #[arg(long, value_name = "PROG", value_delimiter = ',')]
    allow_run: Vec<String>,
    /// Let the extension see this environment variable.
    #[arg(long, value_name = "VAR", value_delimiter = ',')]
    allow_env: Vec<String>,
    /// Let the extension's fetch reach this host (`example.com`, `*.example.com`, with an
    /// optional `:port`); nothing else reaches the network.
    #[arg(long, value_name = "HOST", value_delimiter = ',')]
    allow_net: Vec<String>,
    /// Let the extension read this model provider's API key (`ctx.modelRegistry`'s
    /// getApiKeyForProvider); without it, models are still called for the extension.
    #[arg(long, value_name = "PROVIDER", value_delimiter = ',', value_parser = parse_provider)]
    allow_model_key: Vec<String>,
    /// Give the extension the secret in the environment variable NAME by reference: it sees
    /// a placeholder, and its fetch to HOST carries the value (NAME=HOST, repeatable).
    #[arg(long, value_name = "NAME=HOST", value_parser = parse_secret)]
    secret: Vec<pichamber_access::secrets::Secret>,
    /// Grant nothing: the default without any --allow-* flag, said explicitly (refused
    /// together with one).
    #[arg(long, conflicts_with_all = ["allow_read", "allow_write", "allow_run", "allow_env", "allow_net", "allow_model_key", "secret"])]
    deny_all: bool,
    /// With the GUI (`pichamber run EXT` without steps), what an extension requests beyond
    /// these grants is offered for approval in the page; with --no-prompt it is not, and the
    /// extension runs with these grants alone.
    #[arg(long)]
    no_prompt: bool,
    /// Where the kernel cannot confine granted programs to the granted trees (no Landlock),
    /// run them anyway, with your full authority (every file you can read or write, any
    /// network port). Without it they are refused there. Programs are confined wherever the
    /// kernel can, whatever this says.
    #[arg(long)]
    allow_unconfined_run: bool,
}

#[derive(Args)]
struct InspectArgs {
    /// A .wasm built by `pichamber build` (sources work too).
    ext: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn main() -> ExitCode {
    let args = match crate::pi_entry::arguments() {
        Ok(args) => args,
        Err(e) => {
            esay!("pichamber (as pi): {e}");
            return ExitCode::from(2);
        }
    };
    let matches = Cli::command().get_matches_from(args);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PICHAMBER_LOG")
                // rmcp logs a connection's end as an error; /mcp reports it instead.
                .unwrap_or_else(|_| "warn,rmcp=off".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only for a terminal: a log file or a client reading stderr gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_target(false)
        .init();
    // A server runs one task per session on a thread per core, so one session's work does
    // not wait for another's; a headless command is one session, on one thread.
    let serves = match &cli.command {
        Command::Serve(_) => true,
        Command::Run(args) => matches
            .subcommand_matches("run")
            .is_some_and(|m| serves_gui(args, m)),
        _ => false,
    };
    let mut builder = if serves {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    let runtime = builder.enable_all().build().expect("tokio runtime");
    let result = runtime.block_on(async {
        match cli.command {
            Command::Build(args) => build(args),
            Command::Run(args) => {
                let run_matches = matches.subcommand_matches("run").expect("run matches");
                run(*args, run_matches).await
            }
            Command::Inspect(args) => inspect(args).await,
            Command::Rpc(args) => rpc_command(*args).await,
            Command::MockModel(args) => mock_model(args).await,
            Command::Export(args) => export(args),
            Command::Check(args) => pichamber_check::check(args).await,
            Command::Serve(args) => serve_command(args).await,
            // `pichamber pi ARGS` is translated before parsing (pi_entry::arguments).
            Command::Pi(args) => bail!(
                "pi's arguments were not translated: {}",
                args.args.join(" ")
            ),
        }
    });
    // A blocking stdin read (rpc, mock-model) must not hold the process after the work is
    // done (an extension's ctx.shutdown()).
    runtime.shutdown_background();
    match result {
        Ok(code) => code,
        Err(e) => {
            esay!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

use pichamber_session::launch::{SessionSpec, Step, load_artifact};

fn build(args: BuildArgs) -> Result<ExitCode> {
    let bundle = match bundle::bundle(&args.ext) {
        Ok(b) => b,
        Err(e) => {
            esay!("{e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    for warning in &bundle.warnings {
        esay!("warning: {warning}");
    }
    let artifact = Artifact::from_bundle(&bundle);
    let output = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("{}.wasm", file_safe(&bundle.name))));
    let bytes = artifact.to_bytes()?;
    // Write beside the target and rename: a failed build never leaves half a component.
    let tmp = output.with_extension("wasm.partial");
    std::fs::write(&tmp, &bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &output).with_context(|| format!("cannot write {}", output.display()))?;
    let modules = artifact.manifest.modules;
    let files = match bundle.files.len() {
        0 => String::new(),
        1 => ", 1 package file".into(),
        n => format!(", {n} package files"),
    };
    esay!(
        "built {} ({modules} module{}{files}, {} KiB) -> {}",
        artifact.manifest.name,
        if modules == 1 { "" } else { "s" },
        bytes.len() / 1024,
        output.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn file_safe(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches('-').to_string()
}

fn parse_json_arg(flag: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).with_context(|| format!("{flag} {text:?} is not valid JSON"))
}

/// The steps in the order they were given on the command line.
fn ordered_steps(args: &RunArgs, matches: &ArgMatches) -> Result<Vec<Step>> {
    let indices = |id: &str| -> Vec<usize> {
        matches
            .indices_of(id)
            .map(|i| i.collect())
            .unwrap_or_default()
    };
    if args.args.len() > args.tool.len() {
        bail!(
            "--args given {} times but --tool only {} times: each --args belongs to a --tool",
            args.args.len(),
            args.tool.len()
        );
    }
    if args.payload.len() > args.event.len() {
        bail!(
            "--payload given {} times but --event only {} times",
            args.payload.len(),
            args.event.len()
        );
    }
    let mut steps: Vec<(usize, Step)> = Vec::new();
    for (i, (name, at)) in args.tool.iter().zip(indices("tool")).enumerate() {
        let value = match args.args.get(i) {
            Some(text) => parse_json_arg("--args", text)?,
            None => json!({}),
        };
        steps.push((at, Step::Tool(name.clone(), value)));
    }
    for (line, at) in args.command.iter().zip(indices("command")) {
        let line = if line.starts_with('/') {
            line.clone()
        } else {
            format!("/{line}")
        };
        steps.push((at, Step::Command(line)));
    }
    for (i, (name, at)) in args.event.iter().zip(indices("event")).enumerate() {
        let mut body = match args.payload.get(i) {
            Some(text) => parse_json_arg("--payload", text)?,
            None => json!({}),
        };
        let Some(map) = body.as_object_mut() else {
            bail!("--payload for --event {name} must be a JSON object")
        };
        map.insert("type".into(), json!(name));
        steps.push((at, Step::Event(name.clone(), body)));
    }
    for (text, at) in args.prompt.iter().zip(indices("prompt")) {
        steps.push((at, Step::Prompt(text.clone())));
    }
    steps.sort_by_key(|(at, _)| *at);
    Ok(steps.into_iter().map(|(_, s)| s).collect())
}

/// `--flag NAME=VALUE`: the value is JSON, or else a plain string. A bare name is refused
/// rather than guessed at (a typo would otherwise set a flag to `true`).
fn parse_flag(text: &str) -> Result<(String, Value), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!(
            "no value: give NAME=VALUE (--flag {text}=true for a boolean flag)"
        ));
    };
    if name.is_empty() {
        return Err("no flag name: give NAME=VALUE".into());
    }
    let value = serde_json::from_str(value).unwrap_or_else(|_| json!(value));
    Ok((name.to_owned(), value))
}

/// Instance slots an `rpc` process reserves: its sessions' extensions and their workers.
const RPC_INSTANCE_SLOTS: u32 = 1024;

/// The smallest and largest `--memory-limit`, in MiB: below 16 an instance cannot do real
/// work (its start alone takes a few MiB), and a WebAssembly memory cannot grow past 4 GiB.
const MEMORY_LIMIT_MIB: std::ops::RangeInclusive<usize> = 16..=4096;

fn parse_memory_limit(text: &str) -> Result<usize, String> {
    let (min, max) = (MEMORY_LIMIT_MIB.start(), MEMORY_LIMIT_MIB.end());
    match text.parse::<usize>() {
        Ok(mib) if MEMORY_LIMIT_MIB.contains(&mib) => Ok(mib),
        Ok(mib) if mib < *min => Err(format!(
            "{mib} MiB is too little for an extension instance: give {min} to {max} (the default is 256)"
        )),
        Ok(_) => Err(format!(
            "an instance's memory cannot grow past {max} MiB (4 GiB): give {min} to {max}"
        )),
        Err(_) => Err(format!("not a whole number of MiB: give {min} to {max}")),
    }
}

/// Extensions found where pi finds them; what was held back or is missing is said on stderr.
fn discovered_extensions(cwd: &Path, trust_project: bool, report: bool) -> Vec<PathBuf> {
    let agent_dir = discovery::agent_dir();
    let found = discovery::discover(cwd, &agent_dir, trust_project);
    if !report {
        return found.extensions;
    }
    if !found.untrusted.is_empty() {
        esay!(
            "note: {} project extension(s) in {} not loaded; trust the project with --trust-project to load them",
            found.untrusted.len(),
            cwd.join(".pi").display()
        );
    }
    for missing in &found.missing {
        esay!("warning: configured extension not found: {missing}");
    }
    found.extensions
}

/// The session `run` and `rpc` work in: extensions loaded in order, model, agent settings,
/// session file. `None` when every extension failed to load (each failure was reported);
/// with it, how many extensions found where pi looks were skipped as they do not build.
/// `for_pi_client`: pi's RPC and one-shot modes, which bring pi 1.6.0's built-in extensions
/// unless `--no-extensions`.
async fn open_session(
    args: &SessionArgs,
    mode: &'static str,
    for_pi_client: bool,
    has_ui: bool,
    dialogs: Arc<dyn DialogResponder>,
    sink: impl FnOnce(PiVersion) -> EventSink,
) -> Result<(Option<Session>, usize)> {
    let cwd = session_cwd(args)?;
    let trust = decide_project_trust(args, &cwd, mode).await?;
    let r = resolve_session(args, cwd, trust.load)?;
    let (artifacts, found): (Vec<Artifact>, Vec<_>) = r
        .artifacts
        .into_iter()
        .zip(r.found)
        .map(|((_, a), f)| (a, f))
        .unzip();
    let pi = pichamber_session::launch::pi_version_for(&artifacts, args.pi_version);
    // Asking grants nothing without the GUI: say what was asked and how to grant it.
    for artifact in &artifacts {
        if let Some(note) = pichamber_access::ungranted_note(
            &artifact.manifest.name,
            &artifact.manifest.capabilities,
            &r.instance.grants,
            &r.cwd,
        ) {
            esay!("pichamber: {note}");
        }
    }
    let layers = pi_settings(&r.cwd, trust.load);
    let given_builtins: Vec<String> = args
        .ext
        .iter()
        .chain(&args.extension)
        .filter_map(|s| given_builtin(s).map(str::to_owned))
        .collect();
    let builtins = if for_pi_client {
        let mut on =
            pichamber_session::builtins::enabled(&given_builtins, !args.no_extensions, &layers)
                .map_err(anyhow::Error::msg)?;
        if args.no_mcp {
            on.retain(|b| *b != pichamber_session::builtins::MCP);
        }
        on
    } else if let Some(name) = given_builtins.first() {
        bail!("builtin:{name}: pi's built-in extensions come with `pichamber rpc` only");
    } else {
        Vec::new()
    };
    let settings = pichamber_session::settings::merge(&layers);
    let session = pichamber_session::launch::open_session(SessionSpec {
        cwd: r.cwd,
        artifacts,
        prompts: r.prompts,
        skills: r.skills,
        has_ui,
        dialogs,
        sink: sink(pi),
        instance: r.instance,
        flags: r.flags,
        model: r.model,
        catalog: pichamber_model::catalog::Catalog::load(args.model.models.as_deref()),
        agent: r.agent,
        thinking: args.model.thinking.clone(),
        store: r.store,
        active_tools: if args.agent.no_tools {
            Some(Vec::new())
        } else {
            args.agent.tools.clone()
        },
        pi: Some(pi),
        mode,
        found,
        settings,
        project_trusted: trust.trusted,
        builtin_extensions: builtins,
    })
    .await?;
    Ok((session, r.skipped))
}

/// How a folder's trust was decided: whether its own resources load, and what
/// `ctx.isProjectTrusted()` says (pi counts a folder with nothing of its own as trusted).
#[derive(Clone, Copy)]
struct Trust {
    load: bool,
    trusted: bool,
}

/// The folder's trust as `--trust-project` / `--project-trust` say, with no extension asked:
/// `pi` follows pi's rules without its `project_trust` event ([`decide_project_trust`] asks).
fn trust_without_extensions(args: &SessionArgs, cwd: &Path) -> Result<Trust> {
    use pichamber_session::trust;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let needed = trust::needs_trust(cwd, home.as_deref());
    let choice = match (args.trust_project, args.project_trust) {
        (true, _) => Some(ProjectTrust::Yes),
        (false, choice) => choice,
    };
    let trusted = match choice {
        Some(ProjectTrust::Yes) => true,
        Some(ProjectTrust::No) => false,
        None => !needed,
        Some(ProjectTrust::Pi) => {
            let settings = pi_settings(cwd, false).remove(0);
            trust::resolve(
                cwd,
                &discovery::agent_dir(),
                home.as_deref(),
                None,
                &settings,
            )
            .map_err(anyhow::Error::msg)?
        }
    };
    Ok(Trust {
        load: trusted && needed,
        trusted,
    })
}

/// The folder's trust as [`trust_without_extensions`] decides it, except that with
/// `--project-trust pi` and resources that need trust, pi 1.6.0's `project_trust` event goes
/// first: the user's extensions (or the given ones) load on their own, without the project's,
/// and the first that says yes or no decides (saved in trust.json when it asks to be
/// remembered). Their session ends before the real one opens, as pi's bootstrap pass does.
async fn decide_project_trust(args: &SessionArgs, cwd: &Path, mode: &'static str) -> Result<Trust> {
    use pichamber_session::trust;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let asks = args.project_trust == Some(ProjectTrust::Pi)
        && !args.trust_project
        && trust::needs_trust(cwd, home.as_deref());
    if !asks {
        return trust_without_extensions(args, cwd);
    }
    let (entries, _, _) = extension_sources(args, cwd, false, false);
    // One that fails to build or load is reported by the real session's load.
    let (artifacts, found): (Vec<Artifact>, Vec<_>) = entries
        .into_iter()
        .filter_map(|(path, found)| Some((load_artifact(&path).ok()?, found)))
        .unzip();
    if artifacts.is_empty() {
        return trust_without_extensions(args, cwd);
    }
    let warnings = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink: EventSink = {
        let warnings = warnings.clone();
        Arc::new(move |event: &SessionEvent| match event {
            // pi's trust context prints a notice on stderr; its failures become warnings.
            SessionEvent::ExtensionUiRequest {
                request: UiRequest::Notify { message, .. },
                ..
            } => esay!("{message}"),
            SessionEvent::ExtensionError {
                extension,
                event,
                error,
                ..
            } if event == "project_trust" => warnings.lock().unwrap().push(format!(
                "Extension \"{extension}\" project_trust error: {error}"
            )),
            SessionEvent::Log {
                extension,
                level,
                message,
            } => esay!("[{extension}] {level}: {message}"),
            _ => {}
        })
    };
    let pi = pichamber_session::launch::pi_version_for(&artifacts, args.pi_version);
    let vote = match pichamber_session::launch::open_session(SessionSpec {
        cwd: cwd.to_path_buf(),
        artifacts,
        prompts: Vec::new(),
        skills: Vec::new(),
        // Dialogs answer at once in the trust context; a notice is shown (see the sink).
        has_ui: true,
        dialogs: Arc::new(NoDialogs),
        sink,
        instance: instance_options(args),
        flags: args.flags.clone(),
        model: None,
        catalog: pichamber_model::catalog::Catalog::load(args.model.models.as_deref()),
        agent: AgentSettings::default(),
        thinking: args.model.thinking.clone(),
        store: None,
        active_tools: None,
        pi: Some(pi),
        mode,
        found,
        settings: pichamber_session::settings::merge(&pi_settings(cwd, false)),
        project_trusted: false,
        builtin_extensions: Vec::new(),
    })
    .await?
    {
        Some(mut session) => session.project_trust(cwd).await,
        None => None,
    };
    for warning in warnings.lock().unwrap().iter() {
        esay!("Warning: {warning}");
    }
    let Some(vote) = vote else {
        return trust_without_extensions(args, cwd);
    };
    if vote.remember {
        trust::save_decision(&discovery::agent_dir(), cwd, vote.trusted)
            .map_err(anyhow::Error::msg)?;
    }
    Ok(Trust {
        load: vote.trusted,
        trusted: vote.trusted,
    })
}

/// What a session is opened from, resolved from the flags: the extensions found and built
/// (with the path each came from), the model, the limits, the session file.
struct ResolvedSession {
    cwd: PathBuf,
    artifacts: Vec<(PathBuf, Artifact)>,
    /// How each of `artifacts` was found (pi's `sourceInfo` of what it registers).
    found: Vec<pichamber_session::resources::Metadata>,
    /// Extensions found where pi looks that were left out because they do not build (each
    /// was reported on stderr).
    skipped: usize,
    prompts: Vec<pichamber_session::resources::ResourcePath>,
    skills: Vec<pichamber_session::resources::ResourcePath>,
    instance: InstanceOptions,
    flags: Vec<(String, Value)>,
    model: Option<Arc<ModelClient>>,
    agent: AgentSettings,
    store: Option<SessionStore>,
}

/// The limits and grants every extension of the session runs under.
fn instance_options(args: &SessionArgs) -> InstanceOptions {
    InstanceOptions {
        call_timeout: Duration::from_secs_f64(args.limits.call_timeout.max(0.01)),
        call_wall_timeout: Duration::from_secs_f64(args.limits.call_wall_timeout.max(0.01)),
        run_timeout: Duration::from_secs_f64(args.limits.run_timeout.max(0.01)),
        memory_limit: args.limits.memory_limit << 20,
        grants: Arc::new(Grants {
            read: args.grants.allow_read.clone(),
            write: args.grants.allow_write.clone(),
            run: args.grants.allow_run.clone(),
            env: args.grants.allow_env.clone(),
            net: args.grants.allow_net.clone(),
            model_keys: args.grants.allow_model_key.clone(),
            secrets: args.grants.secret.clone(),
            allow_unconfined_run: args.grants.allow_unconfined_run,
        }),
        determinism: None,
    }
}

/// The session's working folder: --cwd, else the current one.
fn session_cwd(args: &SessionArgs) -> Result<PathBuf> {
    Ok(match &args.cwd {
        Some(dir) => dir
            .canonicalize()
            .with_context(|| format!("--cwd {}", dir.display()))?,
        None => std::env::current_dir()?,
    })
}

/// The extension entry points a session loads, each with how it was found, and the prompt
/// templates and skills that come with them: the given ones, else those found where pi
/// finds them (the project's only when `trusted`; what was held back is said on stderr when
/// `report`).
fn extension_sources(
    args: &SessionArgs,
    cwd: &Path,
    trusted: bool,
    report: bool,
) -> (
    Vec<(PathBuf, pichamber_session::resources::Metadata)>,
    Vec<pichamber_session::resources::ResourcePath>,
    Vec<pichamber_session::resources::ResourcePath>,
) {
    let mut sources: Vec<PathBuf> = args
        .ext
        .iter()
        .chain(&args.extension)
        .filter(|s| given_builtin(s).is_none())
        .cloned()
        .collect();
    let given = !args.ext.is_empty() || !args.extension.is_empty();
    let discovered = !given && !args.no_extensions;
    if discovered {
        sources = discovered_extensions(cwd, trusted, report);
    }
    // As pi labels them: given (`-e`), or found in the project's .pi/ or the user's folder.
    let found_as = |source: &Path| {
        use pichamber_session::resources::Metadata;
        match (discovered, source.starts_with(cwd.join(".pi"))) {
            (false, _) => Metadata::given(),
            (true, true) => Metadata::found("project"),
            (true, false) => Metadata::found("user"),
        }
    };
    // A folder given is a pi package: it may bring prompt templates and skills, and its
    // extensions are what its manifest or its extensions/ folder lists (maybe none).
    let (mut prompts, mut skills) = discovery::source_resources(&sources);
    let (user_prompts, user_skills) =
        discovery::user_resources(cwd, &discovery::agent_dir(), trusted);
    if !args.no_prompt_templates {
        prompts.extend(user_prompts);
    }
    if !args.no_skills {
        skills.extend(user_skills);
    }
    let entries: Vec<(PathBuf, _)> = sources
        .iter()
        .flat_map(|s| {
            let found = found_as(s);
            discovery::resolve_source(s)
                .extensions
                .into_iter()
                .map(move |p| (p, found.clone()))
        })
        .collect();
    (entries, prompts, skills)
}

/// `-e builtin:NAME`: one of pi 1.6.0's built-in extensions, by name.
fn given_builtin(source: &Path) -> Option<&str> {
    source.to_str()?.strip_prefix("builtin:")
}

fn resolve_session(args: &SessionArgs, cwd: PathBuf, trusted: bool) -> Result<ResolvedSession> {
    let (entries, prompts, skills) = extension_sources(args, &cwd, trusted, true);
    let mut artifacts = Vec::new();
    let mut found = Vec::new();
    let mut skipped = 0;
    for (path, how) in entries {
        match load_artifact(&path) {
            Ok(artifact) => {
                artifacts.push((path, artifact));
                found.push(how);
            }
            // One given on the command line stops the run; one found where pi looks (a
            // broken file among the user's extensions) is skipped with a note, and the others
            // load, as an extension whose factory throws is reported and the rest go on.
            Err(e) if how.source == "auto" => {
                esay!(
                    "warning: skipped the extension {}, which does not {}: {e:#}",
                    path.display(),
                    if path.extension().is_some_and(|x| x == "wasm") {
                        "load"
                    } else {
                        "build"
                    }
                );
                skipped += 1;
            }
            Err(e) => return Err(e),
        }
    }
    let model = model_from_args(&args.model)?;
    let cwd_text = cwd.to_string_lossy().into_owned();
    let session_dir = || {
        args.session_dir.clone().unwrap_or_else(|| {
            pichamber_session::store::default_session_dir(&discovery::agent_dir(), &cwd_text)
        })
    };
    let resume = match (&args.session, args.continue_session) {
        (Some(path), _) => Some(path.clone()),
        // pi's --continue: the most recent session of the folder, if there is one.
        (None, true) => pichamber_session::store::list_sessions(&session_dir())
            .into_iter()
            .next()
            .map(|s| s.path),
        (None, false) => None,
    };
    let store = match resume {
        Some(path) => {
            let (store, report) =
                SessionStore::open_or_create(&path, &cwd_text, SyncPolicy::EveryEntry)
                    .with_context(|| format!("--session {}", path.display()))?;
            if !report.is_clean() {
                esay!("warning: {}: {report}", path.display());
            }
            Some(store)
        }
        None if args.session_dir.is_some() || args.continue_session => {
            let dir = session_dir();
            Some(
                SessionStore::create(&dir, &cwd_text, SyncPolicy::EveryEntry)
                    .with_context(|| format!("a new session in {}", dir.display()))?,
            )
        }
        None => None,
    };
    let instance = instance_options(args);
    let agent = AgentSettings {
        tool_execution: if args.agent.sequential_tools {
            ToolExecution::Sequential
        } else {
            ToolExecution::Parallel
        },
        builtin_tools: !args.agent.no_builtin_tools,
        system_prompt: args.agent.system_prompt.clone(),
        append_system_prompt: args.agent.append_system_prompt.clone(),
        retry: RetrySettings::from_settings(&pi_settings(&cwd, trusted)),
        ..Default::default()
    };
    Ok(ResolvedSession {
        cwd,
        artifacts,
        found,
        skipped,
        prompts,
        skills,
        instance,
        flags: args.flags.clone(),
        model,
        agent,
        store,
    })
}

fn export(args: ExportArgs) -> Result<ExitCode> {
    let path = pichamber_session::export_html::export_file(&args.session, args.output.as_deref())
        .map_err(anyhow::Error::msg)?;
    println!("{}", path.display());
    Ok(ExitCode::SUCCESS)
}

/// pi's settings.json files that apply to a session in `cwd`: the agent dir's, then the
/// project's (.pi/settings.json) when the project is trusted. Missing or unreadable files
/// count as empty.
fn pi_settings(cwd: &Path, trust_project: bool) -> Vec<Value> {
    let read = |path: PathBuf| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .unwrap_or(Value::Null)
    };
    let mut files = vec![read(
        pichamber_session::discovery::agent_dir().join("settings.json"),
    )];
    if trust_project {
        files.push(read(cwd.join(".pi/settings.json")));
    }
    files
}

/// `--allow-read` / `--allow-write`: a folder that exists (the tree is opened when an
/// extension starts; a path that is not a folder would stop every extension there).
fn parse_grant_folder(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    match std::fs::metadata(&path) {
        Ok(meta) if meta.is_dir() => Ok(path),
        _ if text.is_empty() => Err("no path: give the folder to grant".into()),
        Ok(_) => Err(format!(
            "{text} is a file, and a grant is a folder tree: give the folder that holds it ({})",
            match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.display().to_string(),
                _ => ".".into(),
            }
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(format!(
            "the folder {text} does not exist: grant a folder that exists"
        )),
        Err(e) => Err(format!(
            "cannot open {text} ({e}): give a folder you can read"
        )),
    }
}

fn parse_provider(text: &str) -> Result<String, String> {
    if pichamber_access::is_provider_name(text) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "{text:?} is not a provider name: give the provider as models.json names it (openai, anthropic, google-vertex)"
        ))
    }
}

fn parse_secret(text: &str) -> Result<pichamber_access::secrets::Secret, String> {
    pichamber_access::secrets::Secret::parse(text)
}

/// `run` with no step to run headless (and nothing asking for headless output) serves the GUI.
fn serves_gui(args: &RunArgs, matches: &ArgMatches) -> bool {
    ordered_steps(args, matches).is_ok_and(|steps| steps.is_empty())
        && !args.json
        && !args.no_ui
        && args.answer.is_empty()
}

async fn run(args: RunArgs, matches: &ArgMatches) -> Result<ExitCode> {
    if serves_gui(&args, matches) {
        return run_gui(&args.common).await;
    }
    let steps = ordered_steps(&args, matches)?;
    let common = &args.common;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let asks_on_terminal = args.answer.is_empty() && !args.ui && !args.no_ui && interactive;
    let scripted = Arc::new(ScriptedAnswers::new(args.answer.clone()));
    let (has_ui, dialogs): (bool, Arc<dyn DialogResponder>) = if args.no_ui {
        (false, Arc::new(NoDialogs))
    } else if !args.answer.is_empty() || args.ui {
        (true, scripted.clone())
    } else if interactive {
        (true, Arc::new(TerminalDialogs))
    } else {
        (false, Arc::new(NoDialogs))
    };
    let failed = Arc::new(AtomicBool::new(false));
    let sink = output_sink(args.json, asks_on_terminal, failed.clone());
    let (session, skipped) =
        open_session(common, "rpc", false, has_ui, dialogs, |_| sink.clone()).await?;
    // An extension that was skipped failed to load: the run goes on, and then fails.
    if skipped > 0 {
        failed.store(true, Ordering::Relaxed);
    }
    let Some(mut session) = session else {
        return Ok(ExitCode::FAILURE);
    };
    if session.extension_names().is_empty() && steps.is_empty() {
        bail!(
            "nothing to run: no extension given (pichamber run EXT, or -e EXT), none found where pi looks (.pi/extensions with --trust-project, {}/extensions, settings.json), and no steps (--prompt, --command, --tool, --event)",
            discovery::agent_dir().display()
        );
    }
    session.start().await;
    for step in steps {
        // Work an extension left running (a due timer, an answered dialog) runs between steps.
        settle(&mut session).await;
        if session.shutdown_requested() {
            break;
        }
        let is_prompt = matches!(step, Step::Prompt(_));
        let outcome = pichamber_session::launch::run_step(&mut session, step, &sink).await;
        if outcome.failed {
            failed.store(true, Ordering::Relaxed);
        }
        // A prompt's own error (no model, a busy agent) has no event of its own.
        if let (true, Some(e)) = (is_prompt, &outcome.error) {
            esay!("error: {e}");
        }
    }
    settle(&mut session).await;
    session.shutdown().await;
    // A scripted run that did not go as scripted is a failed run.
    for problem in scripted.problems() {
        esay!("error: {problem}");
        failed.store(true, Ordering::Relaxed);
    }
    if has_ui && scripted.remaining() > 0 && !args.answer.is_empty() {
        esay!(
            "warning: {} --answer value(s) were not used (no dialog asked for them)",
            scripted.remaining()
        );
    }
    Ok(if failed.load(Ordering::Relaxed) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The model prompts go to: a scripted model, an OpenAI-compatible endpoint, or a model from
/// pi's models.json. None without --script / --model: prompts then get a notice.
/// Runs what an extension left that is due, and a timer of Node's least delay
/// (`setTimeout(fn, 0)` waits 1 ms) falling due meanwhile, so work a step queued "at once"
/// runs before the next step; a chain of such timers gets a few rounds, not a spin.
async fn settle(session: &mut Session) {
    for _ in 0..4 {
        match session.poll().await {
            Some(wait) if wait <= Duration::from_millis(1) => tokio::time::sleep(wait).await,
            _ => break,
        }
    }
}

fn model_from_args(args: &ModelArgs) -> Result<Option<Arc<ModelClient>>> {
    if let Some(path) = &args.script {
        let model = ScriptedModel::load(path)?;
        return Ok(Some(Arc::new(ModelClient::Scripted(model))));
    }
    let Some(model_id) = &args.model else {
        if args.base_url.is_some() || args.provider.is_some() {
            bail!("--base-url and --provider need --model ID (the model to call)");
        }
        return Ok(None);
    };
    let config = if let Some(base_url) = &args.base_url {
        let mut config = OpenAiConfig::new(
            args.provider.as_deref().unwrap_or("openai-compatible"),
            model_id,
            base_url,
        );
        config.api_key = std::env::var(&args.api_key_env)
            .ok()
            .filter(|k| !k.is_empty());
        config.api_key_env = vec![args.api_key_env.clone()];
        config
    } else {
        let path = args
            .models
            .clone()
            .unwrap_or_else(models_json::default_path);
        let models = ModelsJson::load(&path)?;
        let provider = match &args.provider {
            Some(p) => p.clone(),
            None => models
                .models()
                .into_iter()
                .find(|m| &m.id == model_id)
                .map(|m| m.provider)
                .with_context(|| {
                    format!(
                        "model {model_id:?} is in no provider of {}; give --base-url URL for an OpenAI-compatible endpoint",
                        path.display()
                    )
                })?,
        };
        models.openai_config(&provider, model_id)?
    };
    let mut config = config;
    if let Some(key) = args.api_key.clone().filter(|k| !k.is_empty()) {
        config.api_key = Some(key);
    }
    Ok(Some(Arc::new(ModelClient::OpenAi(OpenAiModel::new(
        config,
    )?))))
}

/// NDJSON on stdout with `--json`; otherwise a readable transcript (results on stdout,
/// diagnostics on stderr). Any extension error marks the run failed.
fn output_sink(json_output: bool, asks_on_terminal: bool, failed: Arc<AtomicBool>) -> EventSink {
    Arc::new(move |event: &SessionEvent| {
        if matches!(event, SessionEvent::ExtensionError { .. }) {
            failed.store(true, Ordering::Relaxed);
        }
        // A model call that ended in an error fails the run too.
        if let SessionEvent::Agent(e) = event
            && e["type"] == "message_end"
            && e["message"]["stopReason"] == "error"
        {
            failed.store(true, Ordering::Relaxed);
        }
        if json_output {
            let line = serde_json::to_string(event).unwrap_or_default();
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
            return;
        }
        // The terminal prompt already shows the dialog and the typed answer.
        let dialog_traffic = match event {
            SessionEvent::ExtensionUiRequest { request, .. } => request.is_dialog(),
            SessionEvent::ExtensionUiResponse { .. } => true,
            _ => false,
        };
        if !(asks_on_terminal && dialog_traffic) {
            print_event(event);
        }
    })
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or_default().to_owned(),
                Some(other) => format!("[{other}]"),
                None => b.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn print_event(event: &SessionEvent) {
    match event {
        SessionEvent::ExtensionUiRequest { request, .. } => match request {
            UiRequest::Notify {
                message,
                notify_type,
            } => {
                say!("[{}] {message}", notify_type.as_deref().unwrap_or("info"))
            }
            UiRequest::SetStatus { key, text } => {
                say!("status {key}: {}", text.as_deref().unwrap_or("(cleared)"))
            }
            UiRequest::SetWidget { key, lines, .. } => match lines {
                Some(lines) => say!("widget {key}:\n  {}", lines.join("\n  ")),
                None => say!("widget {key}: (cleared)"),
            },
            UiRequest::SetTitle { title } => say!("title: {title}"),
            UiRequest::SetEditorText { text } => {
                say!("editor text: {}", text.as_deref().unwrap_or_default())
            }
            UiRequest::Select { title, options, .. } => say!("? {title} [{}]", options.join(" | ")),
            UiRequest::Confirm { title, message, .. } => say!("? {title}: {message} [yes/no]"),
            UiRequest::Input { title, .. } => say!("? {title}"),
            UiRequest::Editor { title, .. } => say!("? {title} (editor)"),
            UiRequest::Form { title, .. } => say!("? {title} (form)"),
        },
        SessionEvent::ExtensionUiResponse { answer, .. } => {
            say!("  -> {}", serde_json::to_string(answer).unwrap_or_default())
        }
        // Messages are shown by their message_end; the session's own bookkeeping (the model
        // and thinking level it starts with, pi 1.6.0's context edits) not at all; other
        // entries by kind.
        SessionEvent::Entry { entry } | SessionEvent::EntryAppended { entry }
            if matches!(
                entry["type"].as_str(),
                Some(
                    "message"
                        | "custom_message"
                        | "model_change"
                        | "thinking_level_change"
                        | "context_edit"
                )
            ) => {}
        // Cards as the page would show them, in text.
        SessionEvent::Entry { entry } | SessionEvent::EntryAppended { entry }
            if entry["type"] == "custom" && entry["customType"] == pichamber_gui::UI_TYPE =>
        {
            say!("{}", crate::card_text::descriptor(&entry["data"]))
        }
        SessionEvent::Entry { entry } | SessionEvent::EntryAppended { entry } => say!(
            "entry {} {}",
            entry["type"].as_str().unwrap_or_default(),
            entry
                .get("customType")
                .or(entry.get("name"))
                .map(Value::to_string)
                .unwrap_or_default()
        ),
        SessionEvent::Agent(event) => print_agent_event(event),
        SessionEvent::ToolResult {
            tool_name,
            content,
            details,
            is_error,
            ..
        } => {
            say!(
                "{tool_name}{}: {}",
                if *is_error { " (error)" } else { "" },
                content_text(content)
            );
            if !details.is_null() && details != &json!({}) {
                say!("  details: {details}");
            }
        }
        SessionEvent::EventResult { event, result } => say!("{event} -> {result}"),
        SessionEvent::ExtensionError {
            extension,
            event,
            error,
            stack,
        } => match stack {
            Some(stack) => esay!("error: {extension} ({event}): {error}\n{stack}"),
            None => esay!("error: {extension} ({event}): {error}"),
        },
        SessionEvent::Log {
            extension,
            level,
            message,
        } => esay!("[{extension}] {level}: {message}"),
    }
}

/// The readable transcript of a run: what the user, the assistant and the tools said.
fn print_agent_event(event: &Value) {
    match event["type"].as_str().unwrap_or_default() {
        "message_end" => {
            let m = &event["message"];
            match m["role"].as_str().unwrap_or_default() {
                "user" => say!("> {}", content_text(&m["content"])),
                "assistant" => {
                    let text: Vec<&str> = m["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter(|b| b["type"] == "text")
                        .filter_map(|b| b["text"].as_str())
                        .collect();
                    if !text.is_empty() {
                        say!("{}", text.join("\n"));
                    }
                    if let Some(error) = m["errorMessage"].as_str() {
                        esay!("error: model: {error}");
                    }
                }
                "toolResult" => say!(
                    "{}{}: {}",
                    m["toolName"].as_str().unwrap_or_default(),
                    if m["isError"] == json!(true) {
                        " (error)"
                    } else {
                        ""
                    },
                    content_text(&m["content"])
                ),
                "custom"
                    if m["display"] != json!(false)
                        && m["customType"] == pichamber_gui::UI_TYPE =>
                {
                    say!(
                        "{}",
                        crate::card_text::descriptor(&pichamber_gui::card::message_descriptor(m))
                    )
                }
                "custom" if m["display"] != json!(false) => {
                    say!(
                        "[{}] {}",
                        m["customType"].as_str().unwrap_or_default(),
                        content_text(&m["content"])
                    )
                }
                _ => {}
            }
        }
        "tool_execution_start" => say!(
            "-> {} {}",
            event["toolName"].as_str().unwrap_or_default(),
            event["args"]
        ),
        "tool_execution_update" => say!("  … {}", content_text(&event["partialResult"]["content"])),
        _ => {}
    }
}

async fn mock_model(args: MockModelArgs) -> Result<ExitCode> {
    use tokio::io::AsyncReadExt;
    let script = pichamber_model::Script::load(&args.script)?;
    let server = pichamber_model::mock_server::start_with(
        script,
        pichamber_model::mock_server::MockOptions {
            api_key: args.api_key,
            model_id: args.model_id,
        },
    )
    .await?;
    say!("{}", json!({ "baseUrl": server.base_url() }));
    let mut sink = Vec::new();
    let _ = tokio::io::stdin().read_to_end(&mut sink).await;
    esay!(
        "mock-model: served {} request(s), {} turn(s) left",
        server.requests().len(),
        server.turns_left()
    );
    Ok(ExitCode::SUCCESS)
}

/// `pichamber rpc`: pi's RPC protocol on stdin/stdout, or one of its one-shot modes.
async fn rpc_command(args: RpcArgs) -> Result<ExitCode> {
    // A long-lived process opens instances again and again (each new session): reused slots.
    Runtime::use_instance_slots(InstanceSlots::Pooled(RPC_INSTANCE_SLOTS))?;
    let output = Arc::new(rpc::Output::stdout());
    let once = match (args.mode.as_str(), args.print) {
        ("json", _) => Some(rpc::once::OneShot::Json),
        ("text", _) | (_, true) => Some(rpc::once::OneShot::Text),
        _ => None,
    };
    if let Some(mode) = once {
        let sink = |pi| rpc::once::event_sink(mode, output.clone(), pi);
        let dialogs = Arc::new(pichamber_session::NoDialogs);
        let (Some(session), _) =
            open_session(&args.common, mode.ctx_mode(), true, false, dialogs, sink).await?
        else {
            return Ok(ExitCode::FAILURE);
        };
        let prompts = one_shot_prompts(&args.messages, session.shared.pi)?;
        return Ok(ExitCode::from(
            rpc::once::run(session, mode, prompts, output).await,
        ));
    }
    if let Some(first) = args.messages.first() {
        bail!(
            "{first}: RPC mode takes no prompt or @file arguments (send prompts as RPC commands; --print or --mode json run prompts given here)"
        );
    }
    let dialogs = Arc::new(rpc::RpcDialogs::default());
    let sink = |pi| rpc::event_sink(output.clone(), pi);
    let (Some(mut session), _) =
        open_session(&args.common, "rpc", true, true, dialogs.clone(), sink).await?
    else {
        return Ok(ExitCode::FAILURE);
    };
    // One session in RPC_INSTANCE_SLOTS.
    session.set_slots_to_spare(true);
    session.start().await;
    rpc::serve(session, dialogs, output, protocol_input()).await;
    Ok(ExitCode::SUCCESS)
}

/// The RPC protocol's input. A pipe, as clients start `rpc`, is read by the runtime's own
/// poller: tokio's stdin hands every read to its blocking pool, two thread switches per
/// request. Anything else (a file, a terminal) is read through tokio's stdin.
fn protocol_input() -> Box<dyn tokio::io::AsyncRead + Unpin> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        // Refused for what is not a FIFO; for a pipe it sets O_NONBLOCK on our read end.
        if let Ok(pipe) = std::io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd)
        {
            return Box::new(pipe);
        }
    }
    Box::new(tokio::io::stdin())
}

/// The prompts of a one-shot run, as pi builds them: text piped on stdin, then the `@path`
/// files, then the first message make the first prompt, which carries the images among the
/// files; each other message is one more.
fn one_shot_prompts(messages: &[String], pi: PiVersion) -> Result<Vec<(String, Vec<Value>)>> {
    let (files, mut texts): (Vec<&String>, Vec<&String>) =
        messages.iter().partition(|m| m.starts_with('@'));
    let mut first = String::new();
    let mut images = Vec::new();
    if !std::io::stdin().is_terminal() {
        let mut piped = String::new();
        std::io::stdin()
            .read_to_string(&mut piped)
            .context("reading stdin")?;
        first.push_str(piped.trim());
    }
    for file in files {
        let path = std::path::absolute(&file[1..])?;
        let bytes = std::fs::read(&path)
            .map_err(|e| anyhow::anyhow!("Error: File not found: {} ({e})", path.display()))?;
        if bytes.is_empty() {
            continue;
        }
        if let Some(image) = pichamber_tools::inline_image(&bytes, pi) {
            let name = path.display();
            match image.data {
                Some(data) => {
                    images.push(json!({ "type": "image", "mimeType": image.mime, "data": data }));
                    let hints = image.hints.join("\n");
                    first.push_str(&format!("<file name=\"{name}\">{hints}</file>\n"));
                }
                None => {
                    first.push_str(&format!("<file name=\"{name}\">{}</file>\n", image.omitted))
                }
            }
            continue;
        }
        let text = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "Could not read file {}: {e} (@path includes a text file in the first prompt)",
                path.display()
            )
        })?;
        if text.is_empty() {
            continue;
        }
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        first.push_str(&format!(
            "<file name=\"{}\">\n{text}\n</file>\n",
            path.display()
        ));
    }
    if !texts.is_empty() {
        first.push_str(texts.remove(0));
    }
    let mut prompts = Vec::new();
    if !first.is_empty() || !images.is_empty() {
        prompts.push((first, images));
    }
    prompts.extend(texts.into_iter().map(|t| (t.clone(), Vec::new())));
    Ok(prompts)
}

async fn inspect(args: InspectArgs) -> Result<ExitCode> {
    let artifact = load_artifact(&args.ext)?;
    let (loaded, report) = pichamber_session::launch::inspect_extension(&artifact).await?;
    if args.json {
        say!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_inspection(&report);
    }
    Ok(if loaded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_inspection(report: &Value) {
    let m = &report["manifest"];
    say!(
        "{} {}",
        m["name"].as_str().unwrap_or("?"),
        m["version"].as_str().unwrap_or("")
    );
    say!(
        "  WIT:          pichamber:extension@{}",
        m["witVersion"].as_str().unwrap_or("?")
    );
    say!(
        "  built with:   pichamber {}",
        m["pichamberVersion"].as_str().unwrap_or("?")
    );
    say!(
        "  written for:  {}",
        match m["piVersion"].as_str() {
            Some(v) => format!("pi {v} (by the pi packages it imports)"),
            None => "no pi version said (a session follows pi 1.6.0)".into(),
        }
    );
    say!(
        "  starts from:  {}",
        if report["extensionSnapshot"] == json!(true) {
            "its own snapshot (QuickJS, pichamber's prelude, typebox, pi-tui and its modules compiled)"
        } else if report["preInitialized"] == json!(true) {
            "the guest's snapshot (QuickJS, pichamber's prelude, typebox and pi-tui ready; its own, \
             with its modules compiled, is made when `rpc` or `serve` starts it a second time)"
        } else {
            "nothing: each instance starts QuickJS (a guest from before pre-initialisation, or PICHAMBER_PREINIT=off)"
        }
    );
    say!(
        "  source hash:  {}",
        m["sourceHash"].as_str().unwrap_or("?")
    );
    match m["extensions"].as_array() {
        Some(entries) => say!(
            "  modules:      {} ({} extensions, loaded in this order into one instance: {})",
            m["modules"],
            entries.len(),
            entries
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => say!(
            "  modules:      {} (entry {})",
            m["modules"],
            m["entry"].as_str().unwrap_or("?")
        ),
    }
    say!(
        "  capabilities: {}",
        pichamber_access::Requests::describe_manifest(&m["capabilities"])
    );
    let files = report["files"].as_array().cloned().unwrap_or_default();
    say!("  files:        {} bundled", files.len());
    for file in &files {
        say!("    {}", file.as_str().unwrap_or_default());
    }
    let package_files = report["packageFiles"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !package_files.is_empty() {
        say!(
            "  package files: {} the extension can read (read-only, at these paths)",
            package_files.len()
        );
        for file in &package_files {
            say!("    {}", file.as_str().unwrap_or_default());
        }
    }
    if report["loaded"] != json!(true) {
        for e in report["errors"].as_array().into_iter().flatten() {
            say!("  LOAD FAILED:  {}", e.as_str().unwrap_or_default());
        }
        return;
    }
    let list = |title: &str, items: &Value, f: &dyn Fn(&Value) -> String| {
        let items = items.as_array().cloned().unwrap_or_default();
        say!("{title} ({}):", items.len());
        for item in &items {
            say!("  {}", f(item));
        }
    };
    list("tools", &report["tools"], &|t| {
        format!(
            "{} — {}",
            t["name"].as_str().unwrap_or_default(),
            t["description"].as_str().unwrap_or_default()
        )
    });
    list("commands", &report["commands"], &|c| {
        format!(
            "/{} — {}",
            c["name"].as_str().unwrap_or_default(),
            c["description"].as_str().unwrap_or_default()
        )
    });
    list("events", &report["events"], &|e| {
        e.as_str().unwrap_or_default().to_owned()
    });
    list("flags", &report["flags"], &|f| {
        format!(
            "--{} ({})",
            f["name"].as_str().unwrap_or_default(),
            f["type"].as_str().unwrap_or_default()
        )
    });
    list("shortcuts (inert)", &report["shortcuts"], &|s| {
        s["shortcut"].as_str().unwrap_or_default().to_owned()
    });
    list("message renderers", &report["messageRenderers"], &|r| {
        r.as_str().unwrap_or_default().to_owned()
    });
    list("providers", &report["providers"], &|p| {
        p["name"].as_str().unwrap_or_default().to_owned()
    });
}

/// `pichamber run EXT` with no step: the web GUI on loopback, one user with a random token,
/// one session open with the extensions given.
async fn run_gui(args: &SessionArgs) -> Result<ExitCode> {
    let cwd = session_cwd(args)?;
    let trust = trust_without_extensions(args, &cwd)?;
    let r = resolve_session(args, cwd, trust.load)?;
    if r.artifacts.is_empty() {
        bail!(
            "nothing to run: no extension given (pichamber run EXT, or -e EXT) and none found where pi looks (.pi/extensions with --trust-project, {}/extensions, settings.json)",
            discovery::agent_dir().display()
        );
    }
    let mut catalog = Vec::new();
    for (path, artifact) in r.artifacts {
        catalog.push(pichamber_server::hub::CatalogEntry::new(&path, artifact).await?);
    }
    let allowed: Vec<String> = catalog.iter().map(|e| e.id.clone()).collect();
    // The person at this terminal is the operator: the page may offer whatever an extension
    // requests (unless --no-prompt); "always" is remembered in the local data folder.
    let access: std::collections::HashMap<String, pichamber_access::Access> = catalog
        .iter()
        .map(|e| {
            let access = pichamber_access::Access {
                grants: (*r.instance.grants).clone(),
                ceiling: if args.grants.no_prompt {
                    pichamber_access::Ceiling::Grants
                } else {
                    pichamber_access::Ceiling::Requests
                },
            };
            (e.id.clone(), access)
        })
        .collect();
    let approvals = match pichamber_access::ApprovalStore::local_file() {
        Some(file) => pichamber_access::ApprovalStore::at(file),
        None => pichamber_access::ApprovalStore::in_memory(),
    };
    let settings = pichamber_session::settings::merge(&pi_settings(&r.cwd, trust.load));
    let mut hub = pichamber_server::hub::Hub::new(pichamber_server::hub::Launcher {
        cwd: r.cwd,
        catalog,
        instance: r.instance,
        model: r.model,
        agent: r.agent,
        thinking: args.model.thinking.clone(),
        data_dir: None,
        prompts: r.prompts,
        skills: r.skills,
        flags: r.flags,
        models: pichamber_model::catalog::Catalog::load(args.model.models.as_deref()),
        settings,
        // One person's session: nothing to gain.
        hibernate_after: None,
    });
    let token = pichamber_gui::random_token();
    hub.add_user("local", &token, allowed, access, approvals);
    let hub = Arc::new(hub);
    let user = hub.user(&token).expect("the user just added");
    hub.open_session(&user, None, r.store)
        .await
        .map_err(anyhow::Error::msg)?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    say!("http://127.0.0.1:{port}/#token={token}");
    esay!("pichamber: serving the GUI; open the URL above (Ctrl-C stops)");
    pichamber_server::serve(hub, listener).await?;
    Ok(ExitCode::SUCCESS)
}

/// `pichamber serve --config FILE`: the multi-user server.
async fn serve_command(args: ServeArgs) -> Result<ExitCode> {
    use pichamber_server::config::ServerConfig;
    use pichamber_server::hub::{CatalogEntry, Hub, Launcher};
    let config = ServerConfig::load(&args.config)?;
    let hibernate_after = config.hibernate_after()?;
    Runtime::use_instance_slots(if hibernate_after.is_some() {
        InstanceSlots::PooledHibernating(config.max_instances)
    } else {
        InstanceSlots::Pooled(config.max_instances)
    })?;
    let cwd = match &config.cwd {
        Some(dir) => dir
            .canonicalize()
            .with_context(|| format!("cwd {}", dir.display()))?,
        None => std::env::current_dir()?,
    };
    // Each extension once, in the order the file names them.
    let mut catalog: Vec<CatalogEntry> = Vec::new();
    let mut ids_by_path: std::collections::HashMap<PathBuf, Vec<String>> = Default::default();
    let all_paths = config
        .extensions
        .iter()
        .chain(config.users.iter().flat_map(|u| u.extensions.iter()));
    for path in all_paths {
        if ids_by_path.contains_key(path) {
            continue;
        }
        let mut ids = Vec::new();
        for source in discovery::resolve_source(path).extensions {
            let artifact = load_artifact(&source)?;
            let entry = CatalogEntry::new(&source, artifact).await?;
            ids.push(entry.id.clone());
            catalog.push(entry);
        }
        ids_by_path.insert(path.clone(), ids);
    }
    let model = match &config.model {
        None => None,
        Some(m) => {
            let args = ModelArgs {
                script: m.script.clone(),
                model: m.id.clone(),
                provider: None,
                base_url: m.base_url.clone(),
                api_key_env: m
                    .api_key_env
                    .clone()
                    .unwrap_or_else(|| "OPENAI_API_KEY".into()),
                models: None,
                api_key: None,
                thinking: "off".into(),
            };
            model_from_args(&args)?
        }
    };
    let mut hub = Hub::new(Launcher {
        cwd,
        catalog,
        instance: InstanceOptions::default(),
        model,
        agent: AgentSettings {
            builtin_tools: false,
            ..Default::default()
        },
        thinking: "off".into(),
        data_dir: config.data_dir.clone(),
        prompts: Vec::new(),
        skills: Vec::new(),
        flags: Vec::new(),
        // A server's sessions see its configured model only, and none of the operator's pi
        // settings.
        models: Default::default(),
        settings: json!({}),
        hibernate_after,
    });
    for user in &config.users {
        let mut allowed: Vec<String> = Vec::new();
        let mut access = std::collections::HashMap::new();
        for path in config.extensions.iter().chain(&user.extensions) {
            for id in &ids_by_path[path] {
                if !allowed.contains(id) {
                    allowed.push(id.clone());
                    access.insert(
                        id.clone(),
                        config.access_for(user, path, &hub.launcher.cwd)?,
                    );
                }
            }
        }
        let approvals = match &config.data_dir {
            // A cluster keeps them on NATS, for every node (loaded below).
            _ if config.cluster.is_some() => pichamber_access::ApprovalStore::in_memory(),
            Some(dir) => {
                pichamber_access::ApprovalStore::at(dir.join(&user.name).join("approvals.json"))
            }
            None => pichamber_access::ApprovalStore::in_memory(),
        };
        hub.add_user(&user.name, &user.token, allowed, access, approvals);
    }
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("cannot listen on {}", config.listen))?;
    if let Some(cluster) = &config.cluster {
        hub.set_cluster(pichamber_server::cluster::Cluster::connect(cluster).await?);
        hub.load_shared_approvals().await?;
    }
    let hub = Arc::new(hub);
    hub.restore_sessions().await;
    say!("http://{}/", listener.local_addr()?);
    pichamber_server::serve(hub, listener).await?;
    Ok(ExitCode::SUCCESS)
}
