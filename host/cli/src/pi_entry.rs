//! pi's own command line, for programs that spawn `pi --mode rpc ...`: `pichamber pi ARGS`,
//! or the binary run under the name `pi` (a symlink first on PATH). Its arguments become a
//! `pichamber rpc` command line with pi's meaning (docs/cli.md of pi 1.6.0):
//!
//! - `--mode rpc` serves pi's RPC protocol; `--print` / `--mode text` and `--mode json` run the
//!   prompts given and exit (pi's print mode, also what it picks when stdin or stdout is not
//!   a terminal and no mode is given);
//!
//! - pi's short spellings (`-ne`, `-nbt`, `-t`, `-c`, `-a` ...) become the long options;
//! - `--model provider/id:level` splits into `--provider`, `--model`, `--thinking`;
//! - with no `--model`, the model pi would pick: settings.json's `defaultProvider` /
//!   `defaultModel`, else the first model of models.json (both in pi's agent folder);
//! - the session is kept where pi keeps it (`sessions/--<cwd>--/` in the agent folder) unless
//!   `--no-session`, `--session` or `--session-dir` says otherwise;
//! - options that only shape pi's terminal UI or its own network use are accepted and ignored,
//!   with a note on stderr saying so; anything else pichamber does not do is refused, naming it.
//!
//! The extensions' capabilities are pichamber's to grant: `PICHAMBER_PI_ARGS` holds extra
//! `pichamber rpc` options (`--allow-read . --allow-run git`) for the program that spawns `pi`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Whether the binary was started under pi's name.
pub fn invoked_as_pi(argv0: &std::ffi::OsStr) -> bool {
    Path::new(argv0)
        .file_name()
        .is_some_and(|name| name == "pi" || name == "pi.exe")
}

/// pi options that take a value and mean the same to `pichamber rpc`.
const SAME_WITH_VALUE: &[&str] = &[
    "--provider",
    "--model",
    "--thinking",
    "--system-prompt",
    "--append-system-prompt",
    "--extension",
    "--tools",
    "--session",
    "--session-dir",
    "--api-key",
    "--pi-version",
];
/// pi flags that mean the same to `pichamber rpc`.
const SAME_FLAGS: &[&str] = &[
    "--no-extensions",
    "--no-mcp",
    "--no-skills",
    "--no-prompt-templates",
    "--no-builtin-tools",
    "--no-tools",
    "--no-session",
    "--continue",
];
/// pi options that shape only its terminal UI, its own downloads or its model cycling:
/// nothing to do headless (flag or option with a value).
const IGNORED_FLAGS: &[&str] = &[
    "--no-themes",
    "--verbose",
    "--offline",
    "--no-context-files",
];
const IGNORED_WITH_VALUE: &[&str] = &["--theme", "--use-theme", "--tui-mode", "--models"];

/// pi's short and multi-letter spellings.
fn long_form(arg: &str) -> &str {
    match arg {
        "-e" => "--extension",
        "-t" => "--tools",
        "-c" => "--continue",
        "-a" => "--approve",
        "-na" => "--no-approve",
        "-ne" => "--no-extensions",
        "-ns" => "--no-skills",
        "-np" => "--no-prompt-templates",
        "-nc" => "--no-context-files",
        "-nt" => "--no-tools",
        "-nbt" => "--no-builtin-tools",
        other => other,
    }
}

/// What `pi --version` runs: the pi version whose command line and protocol pichamber speaks
/// (a program checks it against what it needs), with pichamber's own on stderr.
pub const VERSION_COMMAND: &str = "pi-version";

/// What the translation needs from the machine: pi's agent folder, the working folder, and
/// whether stdin and stdout are both terminals.
pub struct Place {
    pub agent_dir: PathBuf,
    pub cwd: PathBuf,
    pub terminal: bool,
}

/// The `pichamber` command line (without the program name) for pi's `args`, and the notes to
/// print on stderr about what was ignored.
pub fn translate(args: &[String], place: &Place) -> Result<(Vec<String>, Vec<String>), String> {
    let mut out = vec!["rpc".to_owned()];
    let mut notes = Vec::new();
    let mut mode = None;
    let mut print = false;
    let mut model: Option<String> = None;
    let mut provider: Option<String> = None;
    let mut thinking: Option<String> = None;
    let mut session_chosen = false;
    let mut approve: Option<bool> = None;
    let mut messages = Vec::new();
    let mut it = args.iter().peekable();
    while let Some(raw) = it.next() {
        let (name, inline) = match raw.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_owned(), Some(v.to_owned())),
            _ => (long_form(raw).to_owned(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            match inline.clone().or_else(|| it.next().cloned()) {
                Some(v) => Ok(v),
                None => Err(format!("{what} needs a value")),
            }
        };
        match name.as_str() {
            "--mode" => mode = Some(value("--mode")?),
            "--model" => model = Some(value("--model")?),
            "--provider" => provider = Some(value("--provider")?),
            "--thinking" => thinking = Some(value("--thinking")?),
            "--approve" => approve = Some(true),
            "--no-approve" => approve = Some(false),
            "--print" | "-p" => print = true,
            // Everything after `--` is a message, as in pi.
            "--" => {
                messages.extend(it.by_ref().cloned());
                break;
            }
            n if SAME_WITH_VALUE.contains(&n) => {
                let v = value(n)?;
                session_chosen |= n == "--session" || n == "--session-dir";
                out.push(n.to_owned());
                out.push(v);
            }
            n if SAME_FLAGS.contains(&n) => {
                session_chosen |= n == "--no-session" || n == "--continue";
                out.push(n.to_owned());
            }
            n if IGNORED_FLAGS.contains(&n) => {
                notes.push(format!("{n} ignored: it changes nothing headless"));
            }
            n if IGNORED_WITH_VALUE.contains(&n) => {
                let v = value(n)?;
                notes.push(format!(
                    "{n} {v} ignored: it shapes pi's terminal UI or model cycling, which pichamber's RPC mode has none of"
                ));
            }
            "--help" | "-h" => return Ok((vec!["rpc".into(), "--help".into()], notes)),
            "--version" | "-v" => return Ok((vec![VERSION_COMMAND.into()], notes)),
            n if n.starts_with('-') => {
                return Err(format!(
                    "pi option {raw} is not supported by pichamber's pi entry (run `pichamber rpc --help` for what is)"
                ));
            }
            _ => messages.push(raw.clone()),
        }
    }
    // pi's choice of interface: print mode when asked, or when a stream is redirected.
    let mode = match (mode.as_deref(), print) {
        (Some("json"), _) => "json",
        (Some("rpc"), false) => "rpc",
        (Some("rpc"), true) => return Err("--print cannot be combined with --mode rpc".into()),
        (Some("text") | None, true) => "text",
        (Some("text") | None, false) if !place.terminal => "text",
        (Some("text") | None, false) => {
            return Err("pi's terminal UI is not part of pichamber: give --mode rpc, --mode json or --print (or redirect stdin or stdout, which picks print mode as pi does)".into());
        }
        (Some(other), _) => {
            return Err(format!("--mode {other}: pi's modes are rpc, json and text"));
        }
    };
    if mode == "rpc" {
        if let Some(first) = messages.first() {
            return Err(format!(
                "{first}: RPC mode takes no prompt or @file arguments (send prompts as RPC commands)"
            ));
        }
    } else {
        out.push("--mode".into());
        out.push(mode.into());
    }
    // `provider/id:level`, as pi's --model reads it.
    if let Some(m) = model.take() {
        let (m, level) = match m.rsplit_once(':') {
            Some((m, level)) if is_thinking_level(level) => (m.to_owned(), Some(level.to_owned())),
            _ => (m, None),
        };
        let (p, id) = match (provider.is_none(), m.split_once('/')) {
            (true, Some((p, id))) => (Some(p.to_owned()), id.to_owned()),
            _ => (provider.take(), m),
        };
        provider = p;
        model = Some(id);
        thinking = thinking.or(level);
    } else if let Some((p, id)) = default_model(&place.agent_dir) {
        provider = provider.or(Some(p));
        model = Some(id);
    }
    for (flag, v) in [
        ("--provider", provider),
        ("--model", model),
        ("--thinking", thinking),
    ] {
        if let Some(v) = v {
            out.push(flag.into());
            out.push(v);
        }
    }
    // pi 1.6.0's project trust: `rpc` decides it where the extensions load, as pi does
    // (`pichamber_session::trust`; the user's extensions may decide through `project_trust`).
    out.push("--project-trust".into());
    out.push(
        match approve {
            Some(true) => "yes",
            Some(false) => "no",
            None => "pi",
        }
        .into(),
    );
    if !session_chosen {
        let dir = pichamber_session::store::default_session_dir(
            &place.agent_dir,
            &place.cwd.to_string_lossy(),
        );
        out.push("--session-dir".into());
        out.push(dir.to_string_lossy().into_owned());
    }
    if let Ok(extra) = std::env::var("PICHAMBER_PI_ARGS") {
        out.extend(extra.split_whitespace().map(str::to_owned));
    }
    if !messages.is_empty() {
        out.push("--".into());
        out.extend(messages);
    }
    Ok((out, notes))
}

fn is_thinking_level(s: &str) -> bool {
    ["off", "minimal", "low", "medium", "high", "xhigh", "max"].contains(&s)
}

/// The model pi starts with when none is given: settings.json's `defaultProvider` and
/// `defaultModel`, else the first model models.json lists.
fn default_model(agent_dir: &Path) -> Option<(String, String)> {
    let read = |name: &str| read_json(&agent_dir.join(name));
    let settings = read("settings.json");
    if let (Some(p), Some(m)) = (
        settings["defaultProvider"].as_str(),
        settings["defaultModel"].as_str(),
    ) {
        return Some((p.to_owned(), m.to_owned()));
    }
    let models = read("models.json");
    models["providers"].as_object()?.iter().find_map(|(p, v)| {
        let id = v["models"].as_array()?.first()?["id"].as_str()?;
        Some((p.clone(), id.to_owned()))
    })
}

/// A JSON file, or null when it is missing or not JSON.
fn read_json(path: &Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

/// The arguments to parse: pi's translated when the binary runs as `pi` or as `pichamber pi`,
/// as they came otherwise.
pub fn arguments() -> Result<Vec<OsString>, String> {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let program = args.first().cloned().unwrap_or_else(|| "pichamber".into());
    let pi_args: Vec<OsString> = if invoked_as_pi(&program) {
        args.split_off(1)
    } else if args.get(1).is_some_and(|a| a == "pi") {
        args.split_off(2)
    } else {
        return Ok(args);
    };
    let pi_args: Vec<String> = pi_args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|a| format!("argument {a:?} is not UTF-8"))
        })
        .collect::<Result<_, _>>()?;
    use std::io::IsTerminal;
    let place = Place {
        agent_dir: pichamber_session::discovery::agent_dir(),
        cwd: std::env::current_dir().map_err(|e| format!("the working folder: {e}"))?,
        terminal: std::io::stdin().is_terminal() && std::io::stdout().is_terminal(),
    };
    let (translated, notes) = translate(&pi_args, &place)?;
    for note in notes {
        eprintln!("pichamber: {note}");
    }
    if translated == [VERSION_COMMAND] {
        println!("{}", pichamber_session::PiVersion::default().number());
        eprintln!(
            "(pichamber {}, speaking pi {}'s command line and RPC protocol)",
            env!("CARGO_PKG_VERSION"),
            pichamber_session::PiVersion::default().number()
        );
        std::process::exit(0);
    }
    Ok(std::iter::once(OsString::from("pichamber"))
        .chain(translated.into_iter().map(OsString::from))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(dir: &Path) -> Place {
        Place {
            agent_dir: dir.to_path_buf(),
            cwd: "/work/project".into(),
            terminal: true,
        }
    }

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pi_rpc_arguments_become_pichamber_rpc_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (args, notes) = translate(
            &strings(&[
                "--mode",
                "rpc",
                "-ne",
                "-e",
                "x.ts",
                "--no-themes",
                "--model",
                "mock/m1:high",
                "-t",
                "read,bash",
                "--no-session",
            ]),
            &place(dir.path()),
        )
        .unwrap();
        assert_eq!(
            args,
            strings(&[
                "rpc",
                "--no-extensions",
                "--extension",
                "x.ts",
                "--tools",
                "read,bash",
                "--no-session",
                "--provider",
                "mock",
                "--model",
                "m1",
                "--thinking",
                "high",
                "--project-trust",
                "pi",
            ])
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("--no-themes ignored"));
    }

    #[test]
    fn without_a_model_or_session_it_chooses_as_pi_does() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("models.json"),
            r#"{"providers": {"local": {"models": [{"id": "first"}, {"id": "second"}]}}}"#,
        )
        .unwrap();
        let (args, _) = translate(&strings(&["--mode", "rpc"]), &place(dir.path())).unwrap();
        let sessions = dir.path().join("sessions/--work-project--");
        assert_eq!(
            args,
            strings(&[
                "rpc",
                "--provider",
                "local",
                "--model",
                "first",
                "--project-trust",
                "pi",
                "--session-dir",
                &sessions.to_string_lossy(),
            ])
        );
        std::fs::write(
            dir.path().join("settings.json"),
            r#"{"defaultProvider": "other", "defaultModel": "m"}"#,
        )
        .unwrap();
        let (args, _) = translate(&strings(&["--mode", "rpc"]), &place(dir.path())).unwrap();
        assert_eq!(
            args[1..5],
            strings(&["--provider", "other", "--model", "m"])
        );
    }

    #[test]
    fn what_pichamber_cannot_do_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let refuse = |args: &[&str]| translate(&strings(args), &place(dir.path())).unwrap_err();
        assert!(refuse(&[]).contains("give --mode rpc"));
        assert!(refuse(&["--mode", "tui"]).contains("pi's modes are rpc, json and text"));
        assert!(refuse(&["--mode", "rpc", "-p"]).contains("--print cannot be combined"));
        assert!(refuse(&["--mode", "text"]).contains("terminal UI is not part of pichamber"));
        assert!(refuse(&["--mode", "rpc", "--fork", "x"]).contains("pi option --fork"));
        assert!(refuse(&["--mode", "rpc", "hello"]).contains("takes no prompt"));
        assert!(refuse(&["--mode", "rpc", "--model"]).contains("--model needs a value"));
    }

    #[test]
    fn print_and_json_modes_run_the_messages_given() {
        let dir = tempfile::tempdir().unwrap();
        let at = |args: &[&str], terminal: bool| {
            let place = Place {
                terminal,
                ..place(dir.path())
            };
            let (args, _) = translate(&strings(args), &place).unwrap();
            args.into_iter()
                .filter(|a| a != "--session-dir" && !a.contains("sessions/"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            at(&["-p", "hello", "@a.txt", "--", "-x"], true),
            strings(&[
                "rpc",
                "--mode",
                "text",
                "--project-trust",
                "pi",
                "--",
                "hello",
                "@a.txt",
                "-x"
            ])
        );
        assert_eq!(
            at(&["--mode", "json", "hi"], true),
            strings(&["rpc", "--mode", "json", "--project-trust", "pi", "--", "hi"])
        );
        // No mode and a redirected stream: print mode, as pi picks it.
        assert_eq!(
            at(&["hi"], false),
            strings(&["rpc", "--mode", "text", "--project-trust", "pi", "--", "hi"])
        );
    }

    #[test]
    fn pis_approval_options_say_who_decides_the_projects_trust() {
        let dir = tempfile::tempdir().unwrap();
        let trust = |args: &[&str]| {
            let mut all = strings(&["--mode", "rpc", "--no-session"]);
            all.extend(strings(args));
            let (out, _) = translate(&all, &place(dir.path())).unwrap();
            let at = out.iter().position(|a| a == "--project-trust").unwrap();
            out[at + 1].clone()
        };
        assert_eq!(trust(&[]), "pi", "pi's own rules, project_trust first");
        assert_eq!(trust(&["-a"]), "yes");
        assert_eq!(trust(&["--approve"]), "yes");
        assert_eq!(trust(&["-na"]), "no");
    }

    #[test]
    fn the_binary_answers_to_pis_name() {
        assert!(invoked_as_pi("/usr/local/bin/pi".as_ref()));
        assert!(!invoked_as_pi("pichamber".as_ref()));
        assert!(!invoked_as_pi("pip".as_ref()));
    }
}
