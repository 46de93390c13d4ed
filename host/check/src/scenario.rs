//! Check scenarios: the file format (YAML or JSON, described by
//! docs/check-scenario.schema.json) and its parsing, with errors that name the file, the line
//! and what was expected.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use pichamber_model::scripted::Turn;

/// The JSON Schema of a scenario file, as published in docs/ (checked against the types).
#[cfg(test)]
const SCHEMA: &str = include_str!("../../../docs/check-scenario.schema.json");

/// One scenario file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// What the scenario checks [default: the file name].
    #[serde(default)]
    pub name: Option<String>,
    /// The extensions, loaded in order: sources or `.wasm`, relative to the scenario file.
    pub extensions: Vec<String>,
    /// What the extensions may reach (nothing by default).
    #[serde(default)]
    pub grants: GrantsSpec,
    /// A folder (relative to the scenario file) copied to a fresh temporary folder, the
    /// session's working directory [default: an empty folder].
    #[serde(default)]
    pub workspace: Option<String>,
    /// Whether the session has a UI (dialogs answered from the steps' `answers`).
    #[serde(default = "yes")]
    pub ui: bool,
    /// Whether pi's built-in tools (read, bash, edit, write, grep, find, ls) are there.
    #[serde(default)]
    pub builtin_tools: bool,
    /// Extension flag values.
    #[serde(default)]
    pub flags: BTreeMap<String, Value>,
    #[serde(default)]
    pub limits: LimitsSpec,
    pub steps: Vec<StepSpec>,
    /// What must hold after the last step.
    #[serde(default)]
    pub expect: FinalExpect,
}

/// A field that is there, even as `null` (absent stays `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn yes() -> bool {
    true
}

/// The grants, as `pichamber run`'s --allow-read/--allow-write/--allow-run/--allow-env/--allow-net.
/// Paths are relative to the workspace copy ("." is the workspace itself).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GrantsSpec {
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    #[serde(default)]
    pub run: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    /// Hosts `fetch` may reach (as --allow-net).
    #[serde(default)]
    pub net: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LimitsSpec {
    /// Seconds one call may run guest code [default: 10].
    #[serde(default)]
    pub call_timeout: Option<f64>,
    /// MiB of memory per instance [default: 256].
    #[serde(default)]
    pub memory_limit: Option<usize>,
}

/// One step: exactly one of `tool`, `command`, `event`, `prompt`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepSpec {
    /// A label for the report [default: the step itself, e.g. "tool greet"].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Call this tool directly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The tool's arguments [default: {}].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// Run this slash command ("/name args"; the slash is optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Emit this event to the extensions' handlers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event: Option<String>,
    /// The event's body (an object; its `type` is added).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Send this prompt to the agent, answered by the scripted model's `turns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The scripted model's turns for this step (as in `pichamber run --script`).
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Answers for the dialogs this step opens, in order (option or number for select,
    /// yes/no for confirm, text for input/editor, an object for a form, "<cancel>").
    #[serde(default)]
    pub answers: Vec<Value>,
    #[serde(default)]
    pub expect: StepExpect,
}

/// What one step must produce.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepExpect {
    /// The result of a `tool` step [default: isError false].
    #[serde(default)]
    pub result: Option<ResultExpect>,
    /// Tool results produced during the step (a prompt's tool calls), in order.
    #[serde(default)]
    pub tool_results: Vec<ResultExpect>,
    /// What an `event` step's handlers returned.
    #[serde(default)]
    pub event_result: Option<Matcher>,
    /// UI requests (notify, setStatus, select, ...), in this order (others may come between):
    /// each is matched by the fields it gives, e.g. {method: notify, message: Hi}.
    #[serde(default)]
    pub ui: Vec<serde_json::Map<String, Value>>,
    /// Entries appended during the step, in this order (others may come between).
    #[serde(default)]
    pub entries: Vec<EntryExpect>,
    /// Extension errors that must happen (regular expressions); any other error fails the step.
    #[serde(default)]
    pub errors: Vec<String>,
    /// Whether the step itself fails (a command or event that throws, a tool result with
    /// isError) [default: false].
    #[serde(default)]
    pub fails: Option<bool>,
}

/// A tool result.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResultExpect {
    /// The tool's name (for `toolResults`).
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub is_error: Option<bool>,
    /// Matched against the content's text (a string in `equals`, `pattern`) or its blocks.
    #[serde(default)]
    pub content: Option<Matcher>,
    #[serde(default)]
    pub details: Option<Matcher>,
}

/// How a value is checked. Everything given must hold.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Matcher {
    /// Exactly this value (a string is compared with the text of content; `null` is a value).
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub equals: Option<Value>,
    /// The values at these JSON pointers (RFC 6901, e.g. /todos/0/text).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pointer: BTreeMap<String, Value>,
    /// A regular expression that must match the text (or the compact JSON) somewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Compare with the value recorded in the snapshot file (<scenario>.snap.json);
    /// `pichamber check --update` records the actual value there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub snapshot: bool,
}

/// An appended entry.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EntryExpect {
    /// The entry type [default: custom].
    #[serde(default, rename = "type")]
    pub entry_type: Option<String>,
    /// A custom entry's customType.
    #[serde(default)]
    pub custom_type: Option<String>,
    /// A custom entry's data.
    #[serde(default)]
    pub data: Option<Matcher>,
}

/// What must hold after the last step.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FinalExpect {
    /// Files in the workspace, by path relative to it.
    #[serde(default)]
    pub files: Vec<FileExpect>,
    /// Capability denials that must have happened: each text must be part of an error that
    /// names an --allow-... grant (e.g. "--allow-run=touch").
    #[serde(default)]
    pub denials: Vec<String>,
    /// Whether a limit (the call timeout, the memory limit) may be hit [default: false: any
    /// deadline or memory error fails the scenario].
    #[serde(default)]
    pub limits_hit: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileExpect {
    pub path: String,
    /// The file must exist (true) or must not (false).
    #[serde(default)]
    pub exists: Option<bool>,
    /// The file must not exist.
    #[serde(default)]
    pub absent: bool,
    /// Exactly this text.
    #[serde(default)]
    pub content: Option<String>,
    /// A regular expression the text must match.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Compare the text with the snapshot file's (see Matcher.snapshot).
    #[serde(default)]
    pub snapshot: bool,
}

/// A scenario file that cannot be used: where, and what was expected.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    pub file: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "{}:{l}:{c}: {}", self.file, self.message),
            (Some(l), None) => write!(f, "{}:{l}: {}", self.file, self.message),
            _ => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

impl StepSpec {
    /// What the step does, for the report.
    pub fn label(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        if let Some(tool) = &self.tool {
            return format!("tool {tool}");
        }
        if let Some(command) = &self.command {
            return format!("command {}", command_line(command));
        }
        if let Some(event) = &self.event {
            return format!("event {event}");
        }
        if let Some(prompt) = &self.prompt {
            return format!("prompt {prompt:?}");
        }
        "step".into()
    }
}

pub fn command_line(command: &str) -> String {
    if command.starts_with('/') {
        command.to_owned()
    } else {
        format!("/{command}")
    }
}

/// Reads and checks a scenario file. `display` is how the report names it.
pub fn load(path: &Path, display: &str) -> Result<Scenario, ScenarioError> {
    let error = |line, column, message: String| ScenarioError {
        file: display.to_owned(),
        line,
        column,
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(None, None, e.to_string()))?;
    let is_json = path.extension().is_some_and(|e| e == "json");
    let scenario: Scenario = if is_json {
        serde_json::from_str(&text).map_err(|e| {
            error(
                Some(e.line()),
                Some(e.column()),
                strip_position(&e.to_string()),
            )
        })?
    } else {
        serde_norway::from_str(&text).map_err(|e| {
            let location = e.location();
            error(
                location.as_ref().map(|l| l.line()),
                location.as_ref().map(|l| l.column()),
                strip_position(&e.to_string()),
            )
        })?
    };
    validate(&scenario, &text, is_json).map_err(|(line, message)| error(line, None, message))?;
    Ok(scenario)
}

/// Drops the " at line N column M" a parser appends (the report puts it in front).
fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

/// What serde cannot say: each step does one thing, with the fields of that thing; patterns
/// compile; pointers are pointers. The line is that of the offending step when it can be found.
fn validate(scenario: &Scenario, text: &str, is_json: bool) -> Result<(), (Option<usize>, String)> {
    if scenario.extensions.is_empty() {
        return Err((
            find_line(text, "extensions"),
            "extensions: expected at least one extension (a source file, folder or .wasm)".into(),
        ));
    }
    let step_lines = step_lines(text, is_json);
    for (i, step) in scenario.steps.iter().enumerate() {
        let line = step_lines.get(i).copied();
        let at = |message: String| (line, format!("steps[{i}]: {message}"));
        let kinds = [
            step.tool.is_some(),
            step.command.is_some(),
            step.event.is_some(),
            step.prompt.is_some(),
        ]
        .iter()
        .filter(|k| **k)
        .count();
        if kinds != 1 {
            return Err(at(format!(
                "expected exactly one of tool, command, event, prompt (found {kinds})"
            )));
        }
        if step.args.is_some() && step.tool.is_none() {
            return Err(at("args belongs to a tool step".into()));
        }
        if let Some(args) = &step.args
            && !args.is_object()
        {
            return Err(at("args: expected an object".into()));
        }
        if step.payload.is_some() && step.event.is_none() {
            return Err(at("payload belongs to an event step".into()));
        }
        if let Some(payload) = &step.payload
            && !payload.is_object()
        {
            return Err(at("payload: expected an object".into()));
        }
        if !step.turns.is_empty() && step.prompt.is_none() && step.command.is_none() {
            return Err(at(
                "turns belong to a prompt step (or a command that starts a turn)".into(),
            ));
        }
        if step.expect.result.is_some() && step.tool.is_none() {
            return Err(at(
                "expect.result belongs to a tool step (use expect.toolResults for a prompt)".into(),
            ));
        }
        if step.expect.event_result.is_some() && step.event.is_none() {
            return Err(at("expect.eventResult belongs to an event step".into()));
        }
        for pattern in &step.expect.errors {
            check_pattern(pattern).map_err(|e| at(format!("expect.errors: {e}")))?;
        }
        let mut matchers: Vec<(&str, &Matcher)> = Vec::new();
        for r in step.expect.result.iter().chain(&step.expect.tool_results) {
            matchers.extend(r.content.iter().map(|m| ("content", m)));
            matchers.extend(r.details.iter().map(|m| ("details", m)));
        }
        matchers.extend(step.expect.event_result.iter().map(|m| ("eventResult", m)));
        for e in &step.expect.entries {
            matchers.extend(e.data.iter().map(|m| ("data", m)));
        }
        for (what, m) in matchers {
            check_matcher(m).map_err(|e| at(format!("{what}: {e}")))?;
        }
        for (j, ui) in step.expect.ui.iter().enumerate() {
            if !ui.contains_key("method") {
                return Err(at(format!(
                    "expect.ui[{j}]: expected a method (notify, setStatus, setWidget, setTitle, set_editor_text, select, confirm, input, editor, form)"
                )));
            }
        }
    }
    for (i, file) in scenario.expect.files.iter().enumerate() {
        let at = |m: String| (find_line(text, "files"), format!("expect.files[{i}]: {m}"));
        if file.absent && file.exists == Some(true) {
            return Err(at("absent and exists: true contradict each other".into()));
        }
        if let Some(p) = &file.pattern {
            check_pattern(p).map_err(at)?;
        }
        if Path::new(&file.path).is_absolute() || file.path.split('/').any(|c| c == "..") {
            return Err(at(format!(
                "path {:?}: expected a path inside the workspace",
                file.path
            )));
        }
    }
    Ok(())
}

fn check_matcher(m: &Matcher) -> Result<(), String> {
    if m.equals.is_none() && m.pointer.is_empty() && m.pattern.is_none() && !m.snapshot {
        return Err("expected one of equals, pointer, pattern, snapshot".into());
    }
    if let Some(p) = &m.pattern {
        check_pattern(p)?;
    }
    for pointer in m.pointer.keys() {
        if !pointer.is_empty() && !pointer.starts_with('/') {
            return Err(format!(
                "pointer {pointer:?}: expected a JSON pointer starting with /"
            ));
        }
    }
    Ok(())
}

fn check_pattern(pattern: &str) -> Result<(), String> {
    regex::Regex::new(pattern)
        .map(|_| ())
        .map_err(|e| format!("pattern {pattern:?} is not a regular expression: {e}"))
}

/// The 1-based line of the first `key:` (YAML) or `"key"` (JSON).
fn find_line(text: &str, key: &str) -> Option<usize> {
    let yaml = format!("{key}:");
    let json = format!("\"{key}\"");
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            t.starts_with(&yaml) || t.starts_with(&json)
        })
        .map(|i| i + 1)
}

/// The 1-based line where each step starts, read from the YAML (or JSON) events with their
/// positions: the items of the top-level `steps` sequence.
fn step_lines(text: &str, is_json: bool) -> Vec<usize> {
    use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
    use yaml_rust2::scanner::Marker;
    // JSON is YAML, so one reader serves both (tabs aside, which JSON allows and YAML does
    // not in indentation: for JSON with tabs the lines are simply not found).
    let _ = is_json;
    struct Receiver {
        depth: usize,
        /// Top-level mapping: whether the next scalar is a key, and the last key.
        expect_key: bool,
        in_steps: bool,
        steps_depth: usize,
        lines: Vec<usize>,
        top_key: Option<String>,
    }
    impl MarkedEventReceiver for Receiver {
        fn on_event(&mut self, event: Event, mark: Marker) {
            let item_start = |r: &mut Receiver| {
                if r.in_steps && r.depth == r.steps_depth {
                    r.lines.push(mark.line());
                }
            };
            match event {
                Event::MappingStart(..) => {
                    item_start(self);
                    self.depth += 1;
                    if self.depth == 1 {
                        self.expect_key = true;
                    }
                }
                Event::SequenceStart(..) => {
                    item_start(self);
                    self.depth += 1;
                    if self.depth == 2 && self.top_key.as_deref() == Some("steps") {
                        self.in_steps = true;
                        self.steps_depth = 2;
                    }
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    self.depth -= 1;
                    if self.depth == 1 {
                        if self.in_steps {
                            self.in_steps = false;
                        }
                        self.expect_key = true;
                    }
                }
                Event::Scalar(value, ..) => {
                    item_start(self);
                    if self.depth == 1 {
                        if self.expect_key {
                            self.top_key = Some(value);
                        }
                        self.expect_key = !self.expect_key;
                    }
                }
                _ => {}
            }
        }
    }
    let mut receiver = Receiver {
        depth: 0,
        expect_key: false,
        in_steps: false,
        steps_depth: 0,
        lines: Vec::new(),
        top_key: None,
    };
    let mut parser = Parser::new_from_str(text);
    if parser.load(&mut receiver, false).is_err() {
        return Vec::new();
    }
    receiver.lines
}

/// Resolves a path written in a scenario (relative to the scenario's folder).
pub fn resolve(base: &Path, relative: &str) -> PathBuf {
    base.join(relative)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A scenario with every field of every type set: what the Rust types can hold, the
    /// published schema must accept (additionalProperties is false everywhere).
    fn everything() -> Scenario {
        let matcher = Matcher {
            equals: Some(json!("x")),
            pointer: BTreeMap::from([("/a".to_owned(), json!(1))]),
            pattern: Some("x".into()),
            snapshot: true,
        };
        let result = ResultExpect {
            tool: Some("t".into()),
            is_error: Some(false),
            content: Some(matcher.clone()),
            details: Some(matcher.clone()),
        };
        Scenario {
            name: Some("n".into()),
            extensions: vec!["a.ts".into()],
            grants: GrantsSpec {
                read: vec![".".into()],
                write: vec![".".into()],
                run: vec!["git".into()],
                env: vec!["HOME".into()],
                net: vec!["example.com".into()],
            },
            workspace: Some("ws".into()),
            ui: false,
            builtin_tools: true,
            flags: BTreeMap::from([("f".to_owned(), json!(true))]),
            limits: LimitsSpec {
                call_timeout: Some(1.5),
                memory_limit: Some(64),
            },
            steps: vec![StepSpec {
                name: Some("s".into()),
                prompt: Some("p".into()),
                turns: vec![Turn::text("hi")],
                answers: vec![json!("yes"), json!({"a": 1})],
                expect: StepExpect {
                    result: Some(result.clone()),
                    tool_results: vec![result],
                    event_result: Some(matcher.clone()),
                    ui: vec![json!({"method": "notify"}).as_object().unwrap().clone()],
                    entries: vec![EntryExpect {
                        entry_type: Some("custom".into()),
                        custom_type: Some("c".into()),
                        data: Some(matcher),
                    }],
                    errors: vec!["e".into()],
                    fails: Some(true),
                },
                ..StepSpec::default()
            }],
            expect: FinalExpect {
                files: vec![FileExpect {
                    path: "a".into(),
                    exists: Some(true),
                    absent: false,
                    content: Some("c".into()),
                    pattern: Some("p".into()),
                    snapshot: true,
                }],
                denials: vec!["--allow-run=x".into()],
                limits_hit: true,
            },
        }
    }

    #[test]
    fn the_schema_accepts_every_field_of_the_rust_types() {
        let schema: Value = serde_json::from_str(SCHEMA).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let doc = serde_json::to_value(everything()).unwrap();
        let errors: Vec<String> = validator.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}");
        // And the Rust types read back what they wrote.
        let back: Scenario = serde_json::from_value(doc).unwrap();
        assert_eq!(back, everything());
    }

    #[test]
    fn step_lines_are_found_in_yaml_and_json() {
        let yaml = "name: x\nsteps:\n  - tool: a\n    args: {}\n\n  - command: /b\nexpect: {}\n";
        assert_eq!(step_lines(yaml, false), vec![3, 6]);
        let json = "{\n \"steps\": [\n  {\"tool\": \"a\"},\n  {\"command\": \"/b\"}\n ]\n}";
        assert_eq!(step_lines(json, true), vec![3, 4]);
    }
}
