//! Runs one scenario: a fresh copy of its workspace, its extensions loaded with its grants
//! into a session opened as `pichamber run` opens one, its steps run one by one with every
//! event recorded, and each step's expectations checked against what it produced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::expect::{self, Check, Snapshots};
use super::report::{ExtensionBuild, ScenarioReport, StepReport, Usage};
use super::scenario::{self, Scenario, StepSpec};
use pichamber_access::Grants;
use pichamber_model::{ModelClient, Script, ScriptedModel};
use pichamber_runtime::Determinism;
use pichamber_runtime::InstanceOptions;
use pichamber_session::launch::{self, SessionSpec, Step};
use pichamber_session::{AgentSettings, EventSink, NoDialogs, ScriptedAnswers, SessionEvent};

/// The guest's clock at the start of every check (2025-01-01T00:00:00Z) and its random seed.
pub const CHECK_DETERMINISM: Determinism = Determinism {
    start_unix_ms: 1_735_689_600_000,
    seed: 0x9e37_79b9_7f4a_7c15,
};

/// What stands for the workspace's temporary path in everything recorded, so a report is
/// the same on every machine.
pub const WORKSPACE_PLACEHOLDER: &str = "<workspace>";

/// Runs a parsed scenario. `file` is the scenario file, `display` how the report names it.
/// An error is a problem of the scenario's set-up (a missing workspace, an unreadable
/// extension path): the scenario file is bad.
pub async fn run(
    scenario: &Scenario,
    file: &Path,
    display: &str,
    snapshots: &mut Snapshots,
) -> Result<ScenarioReport, String> {
    let base = file.parent().unwrap_or(Path::new(".")).to_path_buf();
    let name = scenario.name.clone().unwrap_or_else(|| display.to_owned());
    let mut report = ScenarioReport {
        file: display.to_owned(),
        name,
        extensions: Vec::new(),
        steps: Vec::new(),
        checks: Vec::new(),
        error: None,
        usage: Usage::default(),
    };

    // The workspace: a fresh copy, removed afterwards.
    let workspace = TempDir::new().map_err(|e| format!("cannot make a workspace: {e}"))?;
    if let Some(fixture) = &scenario.workspace {
        let from = scenario::resolve(&base, fixture);
        if !from.is_dir() {
            return Err(format!(
                "workspace {fixture:?}: no such folder beside the scenario"
            ));
        }
        copy_tree(&from, workspace.path())
            .map_err(|e| format!("cannot copy the workspace {fixture:?}: {e}"))?;
    }
    let before = snapshot_tree(workspace.path());
    let ws_text = workspace.path().to_string_lossy().into_owned();

    // The extensions.
    let mut artifacts = Vec::new();
    for ext in &scenario.extensions {
        let path = scenario::resolve(&base, ext);
        if !path.exists() {
            return Err(format!(
                "extension {ext:?}: no such file or folder beside the scenario"
            ));
        }
        match launch::load_artifact(&path) {
            Ok(artifact) => {
                report.extensions.push(ExtensionBuild::of(ext, &artifact));
                artifacts.push(artifact);
            }
            Err(e) => {
                report.error = Some(format!(
                    "extension {ext}: {}",
                    scrub(&format!("{e:#}"), &ws_text)
                ));
                return Ok(report);
            }
        }
    }

    let recorded: Arc<Mutex<Vec<Value>>> = Arc::default();
    let recorder = recorded.clone();
    let ws_for_sink = ws_text.clone();
    let sink: EventSink = Arc::new(move |event: &SessionEvent| {
        let mut value = serde_json::to_value(event).unwrap_or(Value::Null);
        replace_strings(&mut value, &ws_for_sink, WORKSPACE_PLACEHOLDER);
        recorder.lock().unwrap().push(value);
    });

    let turns: Vec<_> = scenario
        .steps
        .iter()
        .flat_map(|s| s.turns.clone())
        .collect();
    let scripted = ScriptedModel::new(Script { turns });
    let model = Arc::new(ModelClient::Scripted(scripted.clone()));
    let answers = Arc::new(ScriptedAnswers::new(Vec::<String>::new()));
    let in_workspace = |paths: &[String]| -> Vec<PathBuf> {
        paths.iter().map(|p| workspace.path().join(p)).collect()
    };
    let defaults = InstanceOptions::default();
    let instance = InstanceOptions {
        call_timeout: scenario
            .limits
            .call_timeout
            .map(|s| Duration::from_secs_f64(s.max(0.01)))
            .unwrap_or(defaults.call_timeout),
        memory_limit: scenario
            .limits
            .memory_limit
            .map(|m| m.max(16) << 20)
            .unwrap_or(defaults.memory_limit),
        grants: Arc::new(Grants {
            read: in_workspace(&scenario.grants.read),
            write: in_workspace(&scenario.grants.write),
            run: scenario.grants.run.clone(),
            env: scenario.grants.env.clone(),
            net: scenario.grants.net.clone(),
            ..Default::default()
        }),
        // Same scenario, same result: the guest's clock starts at a fixed instant and its
        // randomness comes from a fixed seed.
        determinism: Some(CHECK_DETERMINISM),
        ..defaults
    };
    let spec = SessionSpec {
        cwd: workspace.path().to_path_buf(),
        artifacts,
        prompts: vec![],
        skills: vec![],
        has_ui: scenario.ui,
        dialogs: if scenario.ui {
            answers.clone()
        } else {
            Arc::new(NoDialogs)
        },
        sink: sink.clone(),
        instance,
        flags: scenario
            .flags
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        model: Some(model),
        catalog: Default::default(),
        agent: AgentSettings {
            builtin_tools: scenario.builtin_tools,
            ..Default::default()
        },
        thinking: "off".into(),
        store: None,
        active_tools: None,
        pi: None,
        mode: "rpc",
        found: vec![],
        settings: serde_json::json!({}),
        project_trusted: true,
        // A check runs the extension under test alone.
        builtin_extensions: Vec::new(),
    };
    let session = match launch::open_session(spec).await {
        Ok(session) => session,
        Err(e) => {
            report.error = Some(scrub(&format!("{e:#}"), &ws_text));
            return Ok(report);
        }
    };
    let load_events = std::mem::take(&mut *recorded.lock().unwrap());
    let Some(mut session) = session else {
        report.error = Some(format!(
            "no extension loaded: {}",
            errors_in(&load_events).join("; ")
        ));
        return Ok(report);
    };
    session.start().await;
    let mut all_events = load_events;
    let mut turns_before = scripted.turns_left();
    let mut tools_called: Vec<String> = Vec::new();

    for (index, step) in scenario.steps.iter().enumerate() {
        session.poll().await;
        answers.push(step.answers.iter().map(answer_text));
        let start_events = std::mem::take(&mut *recorded.lock().unwrap());
        all_events.extend(start_events.clone());
        let kind = to_step(step);
        if let Step::Tool(name, _) = &kind {
            tools_called.push(name.clone());
        }
        let outcome = launch::run_step(&mut session, kind, &sink).await;
        session.poll().await;
        let events = std::mem::take(&mut *recorded.lock().unwrap());
        all_events.extend(events.clone());
        let mut checks: Vec<Check> = Vec::new();
        // Earlier events (a timer that fired between steps) belong to the step they come in.
        let mut step_events = start_events;
        step_events.extend(events);
        for e in &step_events {
            if e["type"] == "tool_execution_start"
                && let Some(name) = e["toolName"].as_str()
            {
                tools_called.push(name.to_owned());
            }
        }
        let key = format!("steps[{index}]");
        let mut tool = outcome.tool.clone().map(|t| {
            let mut v = json!({"content": t.content, "details": t.details, "isError": t.is_error});
            replace_strings(&mut v, &ws_text, WORKSPACE_PLACEHOLDER);
            v
        });
        expect::check_step(
            step,
            &key,
            &step_events,
            tool.take().as_ref(),
            outcome.failed,
            outcome.error.as_deref().map(|e| scrub(e, &ws_text)),
            snapshots,
            &mut checks,
        );
        // The dialogs and the model went as scripted.
        for problem in answers.take_problems() {
            checks.push(Check::fail(
                "answers",
                "every dialog answered as scripted",
                problem,
            ));
        }
        let unused = answers.take_remaining();
        if !unused.is_empty() {
            checks.push(Check::fail(
                "answers",
                format!("{} answer(s) used", step.answers.len()),
                format!("{} left unused: {unused:?}", unused.len()),
            ));
        }
        let left = scripted.turns_left();
        let used = turns_before - left;
        if used != step.turns.len() {
            checks.push(Check::fail(
                "turns",
                format!("{} scripted turn(s) used", step.turns.len()),
                format!("{used} used"),
            ));
        }
        turns_before = left;
        report.steps.push(StepReport {
            index: index + 1,
            label: step.label(),
            checks,
        });
        if session.shutdown_requested() {
            break;
        }
    }
    session.poll().await;
    session.shutdown().await;
    all_events.extend(std::mem::take(&mut *recorded.lock().unwrap()));

    let after = snapshot_tree(workspace.path());
    expect::check_final(
        scenario,
        workspace.path(),
        &all_events,
        snapshots,
        &mut report.checks,
    );
    report.usage = Usage::collect(&all_events, tools_called, &before, &after);
    Ok(report)
}

fn to_step(step: &StepSpec) -> Step {
    if let Some(tool) = &step.tool {
        return Step::Tool(tool.clone(), step.args.clone().unwrap_or_else(|| json!({})));
    }
    if let Some(command) = &step.command {
        return Step::Command(scenario::command_line(command));
    }
    if let Some(event) = &step.event {
        let mut body = step.payload.clone().unwrap_or_else(|| json!({}));
        if let Some(map) = body.as_object_mut() {
            map.insert("type".into(), json!(event));
        }
        return Step::Event(event.clone(), body);
    }
    Step::Prompt(step.prompt.clone().unwrap_or_default())
}

/// A dialog answer as `--answer` takes it: text as is, yes/no for booleans, JSON otherwise.
fn answer_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        other => other.to_string(),
    }
}

pub fn errors_in(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "extension_error")
        .filter_map(|e| e["error"].as_str().map(str::to_owned))
        .collect()
}

fn scrub(text: &str, workspace: &str) -> String {
    text.replace(workspace, WORKSPACE_PLACEHOLDER)
}

/// Replaces `from` in every string of a JSON value.
pub fn replace_strings(value: &mut Value, from: &str, to: &str) {
    match value {
        Value::String(s) if s.contains(from) => *s = s.replace(from, to),
        Value::Array(items) => items.iter_mut().for_each(|v| replace_strings(v, from, to)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_strings(v, from, to)),
        _ => {}
    }
}

/// A temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> std::io::Result<Self> {
        let path = std::env::temp_dir().join(format!("pichamber-check-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&path)?;
        // The canonical path: what the session's cwd and the grants resolve to.
        Ok(Self(path.canonicalize()?))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Copies a folder's files and subfolders (symbolic links are skipped: a fixture is data).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            std::fs::create_dir_all(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// Every file under `root` (relative path with '/') and its contents' hash.
pub fn snapshot_tree(root: &Path) -> BTreeMap<String, String> {
    use sha2::{Digest, Sha256};
    let mut files = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<String, String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                walk(root, &path, files);
            } else if let Ok(bytes) = std::fs::read(&path) {
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .replace('\\', "/");
                files.insert(rel, pichamber_artifact::hex(&Sha256::digest(&bytes)));
            }
        }
    }
    walk(root, root, &mut files);
    files
}
