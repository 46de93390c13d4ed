//! `pichamber check`: scenario files that drive extensions in a sandbox with a scripted model
//! and check what they did, for CI; and `--audit`, what an extension asks for and uses.
//!
//! - [`scenario`]: the file format, its JSON Schema and its parsing.
//! - [`runner`]: one scenario run in a fresh session and workspace.
//! - [`expect`]: the checks of a step and of the whole run.
//! - [`report`]: terminal, JSON and JUnit reports.
//!
//! Built on the session crate's launch; nothing depends on it but the `pichamber` binary.

mod expect;
mod report;
mod runner;
mod scenario;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use serde_json::{Value, json};

use report::{BadFile, Report, Usage};

/// Exit code for a scenario file that cannot be used.
pub const EXIT_BAD_FILE: u8 = 2;

#[derive(Args, Debug)]
#[command(
    after_help = "Scenario files are YAML or JSON (schema: docs/check-scenario.schema.json); paths in them are relative to the file. Exit code: 0 when every scenario passes, 1 when a check fails, 2 when a scenario file is bad.\n\nExamples:\n  pichamber check extensions/*/check.yaml\n  pichamber check check.yaml --junit report.xml\n  pichamber check --audit ./ext.ts\n  pichamber check --audit ./ext.ts scenario.yaml"
)]
pub struct CheckArgs {
    /// Scenario files (.yaml, .yml or .json) to run, in order.
    pub scenarios: Vec<PathBuf>,
    /// Print the report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as JUnit XML to this file (for CI test views).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Record actual values for expectations marked `snapshot: true` (in <scenario>.snap.json
    /// beside each scenario) instead of comparing them.
    #[arg(long)]
    pub update: bool,
    /// Print what this extension asks for (capabilities, tools, commands, flags, event hooks,
    /// built-in tools it replaces), loaded with no grants; with scenarios, also what it used
    /// while they ran (tools called, denials, programs refused, files written).
    #[arg(long, value_name = "EXT")]
    pub audit: Option<PathBuf>,
}

/// Text for a terminal: extension text must not drive it.
fn terminal_safe(text: &str) -> String {
    pichamber_session::terminal::escape(text)
}

fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// How a path is named in the report: as given (relative paths stay relative).
fn display(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// Runs the scenarios; returns the report (bad files included).
pub async fn run_scenarios(files: &[PathBuf], update: bool) -> Report {
    let mut report = Report::default();
    for file in files {
        let name = display(file);
        let scenario = match scenario::load(file, &name) {
            Ok(s) => s,
            Err(e) => {
                report.bad_files.push(BadFile {
                    file: name,
                    error: e.to_string(),
                });
                continue;
            }
        };
        let mut snapshots = match expect::Snapshots::for_scenario(file, update) {
            Ok(s) => s,
            Err(e) => {
                report.bad_files.push(BadFile {
                    file: name.clone(),
                    error: format!("{name}: {e}"),
                });
                continue;
            }
        };
        match runner::run(&scenario, file, &name, &mut snapshots).await {
            Ok(r) => {
                if let Err(e) = snapshots.save() {
                    report.bad_files.push(BadFile {
                        file: name.clone(),
                        error: e,
                    });
                }
                report.scenarios.push(r);
            }
            Err(e) => report.bad_files.push(BadFile {
                file: name.clone(),
                error: format!("{name}: {e}"),
            }),
        }
    }
    report
}

/// `pichamber check`.
pub async fn check(args: CheckArgs) -> Result<ExitCode> {
    if args.scenarios.is_empty() && args.audit.is_none() {
        anyhow::bail!(
            "nothing to check: give scenario files (pichamber check check.yaml) or --audit EXT"
        );
    }
    let requested = match &args.audit {
        Some(ext) => {
            let artifact = pichamber_session::launch::load_artifact(ext)?;
            Some(pichamber_session::launch::inspect_extension(&artifact).await?)
        }
        None => None,
    };
    let report = run_scenarios(&args.scenarios, args.update).await;
    if let Some(path) = &args.junit {
        std::fs::write(path, report.to_junit())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut usage = Usage::default();
    for s in &report.scenarios {
        for (all, new) in [
            (&mut usage.tools_called, &s.usage.tools_called),
            (&mut usage.denials, &s.usage.denials),
            (&mut usage.programs_denied, &s.usage.programs_denied),
            (&mut usage.files_written, &s.usage.files_written),
        ] {
            for item in new {
                if !all.contains(item) {
                    all.push(item.clone());
                }
            }
        }
    }
    let ran = !args.scenarios.is_empty();
    if args.json {
        let mut out = if ran { report.to_json() } else { json!({}) };
        if let Some((_, requested)) = &requested {
            out["audit"] = json!({
                "requested": requested,
                "used": if ran { serde_json::to_value(&usage)? } else { Value::Null },
            });
        }
        print(&format!("{}\n", serde_json::to_string_pretty(&out)?));
    } else {
        if let Some((_, requested)) = &requested {
            print(&terminal_safe(&audit_text(
                requested,
                ran.then_some(&usage),
            )));
        }
        if ran {
            print(&terminal_safe(&report.to_text()));
        }
    }
    let load_failed = requested.as_ref().is_some_and(|(loaded, _)| !loaded);
    Ok(if !report.bad_files.is_empty() {
        ExitCode::from(EXIT_BAD_FILE)
    } else if report.passed() < report.scenarios.len() || load_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The audit as text: what the extension asks for, and what it used.
pub fn audit_text(requested: &Value, used: Option<&Usage>) -> String {
    let mut out = String::new();
    let m = &requested["manifest"];
    out.push_str(&format!(
        "audit: {} {}\n  source hash: {}\n",
        m["name"].as_str().unwrap_or("?"),
        m["version"].as_str().unwrap_or("-"),
        m["sourceHash"].as_str().unwrap_or("?")
    ));
    out.push_str("requests (loaded with no grants):\n");
    out.push_str(&format!(
        "  capabilities: {}\n",
        pichamber_access::Requests::describe_manifest(&m["capabilities"])
    ));
    if requested["loaded"] != json!(true) {
        for e in requested["errors"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  LOAD FAILED: {}\n",
                e.as_str().unwrap_or_default()
            ));
        }
    }
    let names = |v: &Value, key: &str, prefix: &str| -> String {
        let items: Vec<String> = v
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| match i {
                Value::String(s) => format!("{prefix}{s}"),
                other => format!("{prefix}{}", other[key].as_str().unwrap_or_default()),
            })
            .collect();
        if items.is_empty() {
            "(none)".into()
        } else {
            items.join(", ")
        }
    };
    out.push_str(&format!(
        "  tools: {}\n",
        names(&requested["tools"], "name", "")
    ));
    out.push_str(&format!(
        "  commands: {}\n",
        names(&requested["commands"], "name", "/")
    ));
    out.push_str(&format!(
        "  flags: {}\n",
        names(&requested["flags"], "name", "--")
    ));
    out.push_str(&format!(
        "  event hooks: {}\n",
        names(&requested["events"], "", "")
    ));
    out.push_str(&format!(
        "  providers: {}\n",
        names(&requested["providers"], "name", "")
    ));
    out.push_str(&format!(
        "  overrides built-in tools: {}\n",
        names(&requested["overridesBuiltinTools"], "", "")
    ));
    let reach: Vec<&str> = requested["otherTools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if reach.is_empty() {
        out.push_str("  other extensions' and built-in tools: no hook reaches them\n");
    } else {
        out.push_str("  other extensions' and built-in tools:\n");
        for line in reach {
            out.push_str(&format!("    {line}\n"));
        }
    }
    if let Some(used) = used {
        let list = |items: &[String]| {
            if items.is_empty() {
                "(none)".to_owned()
            } else {
                items.join(", ")
            }
        };
        out.push_str("used (during the scenarios):\n");
        out.push_str(&format!("  tools called: {}\n", list(&used.tools_called)));
        out.push_str(&format!(
            "  programs refused: {}\n",
            list(&used.programs_denied)
        ));
        out.push_str(&format!("  files written: {}\n", list(&used.files_written)));
        out.push_str(&format!("  denials ({}):\n", used.denials.len()));
        for d in &used.denials {
            out.push_str(&format!("    {d}\n"));
        }
    }
    out
}
