//! Expectations checked against what a step (or the whole run) produced. Every check gives
//! its expected and actual value, so a failure can be shown side by side.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};

use super::scenario::{EntryExpect, Matcher, ResultExpect, Scenario, StepSpec};

/// One comparison.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Check {
    /// What was checked, e.g. `result.content` or `files[out.txt].content`.
    pub name: String,
    pub passed: bool,
    pub expected: String,
    pub actual: String,
}

impl Check {
    pub fn new(
        name: impl Into<String>,
        passed: bool,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            passed,
            expected: expected.into(),
            actual: actual.into(),
        }
    }
    pub fn fail(
        name: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        Self::new(name, false, expected, actual)
    }
}

/// Values recorded for expectations marked `snapshot: true`, in `<scenario>.snap.json`
/// beside the scenario, keyed by where the expectation is (e.g. `steps[0].result.details`).
#[derive(Debug, Default)]
pub struct Snapshots {
    pub path: PathBuf,
    values: BTreeMap<String, Value>,
    /// `--update`: record actual values instead of comparing.
    pub update: bool,
    pub changed: bool,
}

impl Snapshots {
    /// The snapshot file of a scenario file (`check.yaml` → `check.snap.json`).
    pub fn for_scenario(file: &Path, update: bool) -> Result<Self, String> {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let path = file.with_file_name(format!("{stem}.snap.json"));
        let values = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("{}: not a snapshot file: {e}", path.display()))?,
            Err(_) => BTreeMap::new(),
        };
        Ok(Self {
            path,
            values,
            update,
            changed: false,
        })
    }

    /// Writes the file when `--update` changed something.
    pub fn save(&self) -> Result<(), String> {
        if !self.changed {
            return Ok(());
        }
        let mut text = serde_json::to_string_pretty(&self.values).map_err(|e| e.to_string())?;
        text.push('\n');
        std::fs::write(&self.path, text).map_err(|e| format!("{}: {e}", self.path.display()))
    }

    fn expected(&mut self, key: &str, actual: &Value) -> Option<Value> {
        if self.update {
            if self.values.get(key) != Some(actual) {
                self.values.insert(key.to_owned(), actual.clone());
                self.changed = true;
            }
            return Some(actual.clone());
        }
        self.values.get(key).cloned()
    }
}

/// A value for the report: strings as they are, everything else as JSON.
pub fn show(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// The text of a tool result's content (text blocks joined by newlines).
pub fn content_text(content: &Value) -> String {
    pichamber_session::messages::content_text(content)
}

/// Checks `actual` against a matcher. `text` is the value's text when it has one (content).
fn check_matcher(
    name: &str,
    key: &str,
    m: &Matcher,
    actual: &Value,
    text: Option<&str>,
    snapshots: &mut Snapshots,
    checks: &mut Vec<Check>,
) {
    let as_text = || match text {
        Some(t) => t.to_owned(),
        None => match actual {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        },
    };
    let compare = |expected: &Value| -> (bool, String) {
        match (expected, text) {
            (Value::String(e), Some(t)) => (e == t, t.to_owned()),
            _ => (expected == actual, show(actual)),
        }
    };
    if m.snapshot {
        let recorded_value = match text {
            Some(t) => json!(t),
            None => actual.clone(),
        };
        match snapshots.expected(key, &recorded_value) {
            Some(expected) => {
                let (ok, shown) = compare(&expected);
                checks.push(Check::new(
                    format!("{name} (snapshot)"),
                    ok,
                    show(&expected),
                    shown,
                ));
            }
            None => checks.push(Check::fail(
                format!("{name} (snapshot)"),
                format!(
                    "no snapshot yet: run with --update to record it in {}",
                    file_name(&snapshots.path)
                ),
                show(&recorded_value),
            )),
        }
    }
    if let Some(expected) = &m.equals {
        let (ok, shown) = compare(expected);
        checks.push(Check::new(name, ok, show(expected), shown));
    }
    for (pointer, expected) in &m.pointer {
        let found = actual.pointer(pointer);
        checks.push(Check::new(
            format!("{name}{pointer}"),
            found == Some(expected),
            show(expected),
            found
                .map(show)
                .unwrap_or_else(|| "(nothing at this pointer)".into()),
        ));
    }
    if let Some(pattern) = &m.pattern {
        let haystack = as_text();
        let ok = regex::Regex::new(pattern).is_ok_and(|re| re.is_match(&haystack));
        checks.push(Check::new(
            format!("{name} pattern"),
            ok,
            format!("/{pattern}/"),
            haystack,
        ));
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A tool result as `{toolName, content, details, isError}`.
fn tool_results(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e["type"].as_str() {
            Some("tool_execution_end") => Some(json!({
                "toolName": e["toolName"],
                "content": e["result"]["content"],
                "details": e["result"].get("details").cloned().unwrap_or(Value::Null),
                "isError": e["isError"],
            })),
            Some("tool_result") => Some(json!({
                "toolName": e["toolName"],
                "content": e["content"],
                "details": e["details"],
                "isError": e["isError"],
            })),
            _ => None,
        })
        .collect()
}

fn check_result(
    name: &str,
    key: &str,
    expect: &ResultExpect,
    default_is_error: bool,
    actual: &Value,
    snapshots: &mut Snapshots,
    checks: &mut Vec<Check>,
) {
    if let Some(tool) = &expect.tool {
        let got = actual["toolName"].as_str().unwrap_or_default();
        checks.push(Check::new(
            format!("{name}.tool"),
            got == tool,
            tool.clone(),
            got,
        ));
    }
    let is_error = expect.is_error.unwrap_or(default_is_error);
    let got = actual["isError"] == json!(true);
    checks.push(Check::new(
        format!("{name}.isError"),
        got == is_error,
        is_error.to_string(),
        format!(
            "{got}{}",
            if got {
                format!(": {}", content_text(&actual["content"]))
            } else {
                String::new()
            }
        ),
    ));
    if let Some(m) = &expect.content {
        let text = content_text(&actual["content"]);
        check_matcher(
            &format!("{name}.content"),
            &format!("{key}.content"),
            m,
            &actual["content"],
            Some(&text),
            snapshots,
            checks,
        );
    }
    if let Some(m) = &expect.details {
        check_matcher(
            &format!("{name}.details"),
            &format!("{key}.details"),
            m,
            &actual["details"],
            None,
            snapshots,
            checks,
        );
    }
}

/// Whether `actual` has every field of `expected` with the same value.
fn has_fields(actual: &Value, expected: &serde_json::Map<String, Value>) -> bool {
    expected.iter().all(|(k, v)| actual.get(k) == Some(v))
}

fn entry_matches(entry: &Value, e: &EntryExpect) -> bool {
    let entry_type = e.entry_type.as_deref().unwrap_or("custom");
    entry["type"] == json!(entry_type)
        && e.custom_type
            .as_ref()
            .is_none_or(|c| entry["customType"] == json!(c))
}

/// Extension errors (and a model's error) among events.
fn errors(events: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for e in events {
        if e["type"] == "extension_error" {
            out.push(format!(
                "{} ({}): {}",
                e["extensionPath"].as_str().unwrap_or_default(),
                e["event"].as_str().unwrap_or_default(),
                e["error"].as_str().unwrap_or_default()
            ));
        }
        if e["type"] == "message_end" && e["message"]["stopReason"] == "error" {
            out.push(format!(
                "model: {}",
                e["message"]["errorMessage"].as_str().unwrap_or("error")
            ));
        }
    }
    out
}

/// Checks one step's expectations against its events and outcome.
#[allow(clippy::too_many_arguments)]
pub fn check_step(
    step: &StepSpec,
    key: &str,
    events: &[Value],
    tool: Option<&Value>,
    failed: bool,
    error: Option<String>,
    snapshots: &mut Snapshots,
    checks: &mut Vec<Check>,
) {
    let expect = &step.expect;
    // Errors: the expected ones happen, no other does.
    let errors = errors(events);
    let patterns: Vec<regex::Regex> = expect
        .errors
        .iter()
        .filter_map(|p| regex::Regex::new(p).ok())
        .collect();
    for (pattern, re) in expect.errors.iter().zip(&patterns) {
        let ok = errors.iter().any(|e| re.is_match(e));
        checks.push(Check::new(
            "errors",
            ok,
            format!("an error matching /{pattern}/"),
            if errors.is_empty() {
                "no error".into()
            } else {
                errors.join("\n")
            },
        ));
    }
    for e in &errors {
        if !patterns.iter().any(|re| re.is_match(e)) {
            checks.push(Check::fail("errors", "no extension error", e.clone()));
        }
    }

    if let Some(tool) = tool {
        let default_is_error = expect.fails.unwrap_or(false);
        let result = expect.result.clone().unwrap_or_default();
        check_result(
            "result",
            &format!("{key}.result"),
            &result,
            default_is_error,
            tool,
            snapshots,
            checks,
        );
    } else {
        // A failed command/event/prompt: expected only when `fails` or `errors` says so.
        let should_fail = expect.fails.unwrap_or(false);
        if expect.fails.is_some() || (failed && expect.errors.is_empty()) {
            checks.push(Check::new(
                "fails",
                failed == should_fail,
                should_fail.to_string(),
                match (&error, failed) {
                    (Some(e), true) => format!("true: {e}"),
                    (None, true) => "true".into(),
                    _ => "false".into(),
                },
            ));
        }
    }

    if !expect.tool_results.is_empty() {
        let results = tool_results(events);
        for (i, expected) in expect.tool_results.iter().enumerate() {
            let name = format!("toolResults[{i}]");
            match results.get(i) {
                Some(actual) => check_result(
                    &name,
                    &format!("{key}.{name}"),
                    expected,
                    false,
                    actual,
                    snapshots,
                    checks,
                ),
                None => checks.push(Check::fail(
                    name,
                    format!(
                        "a result of {}",
                        expected.tool.as_deref().unwrap_or("a tool")
                    ),
                    format!("{} tool result(s) in all", results.len()),
                )),
            }
        }
    }

    if let Some(m) = &expect.event_result {
        let result = events
            .iter()
            .rev()
            .find(|e| e["type"] == "event_result")
            .map(|e| e["result"].clone())
            .unwrap_or(Value::Null);
        check_matcher(
            "eventResult",
            &format!("{key}.eventResult"),
            m,
            &result,
            None,
            snapshots,
            checks,
        );
    }

    if !expect.ui.is_empty() {
        let requests: Vec<Value> = events
            .iter()
            .filter(|e| e["type"] == "extension_ui_request")
            .map(|e| {
                let mut r = e.clone();
                if let Some(map) = r.as_object_mut() {
                    map.remove("type");
                    map.remove("id");
                }
                r
            })
            .collect();
        let mut from = 0;
        for (i, expected) in expect.ui.iter().enumerate() {
            let found = requests[from..]
                .iter()
                .position(|r| has_fields(r, expected));
            let ok = found.is_some();
            if let Some(at) = found {
                from += at + 1;
            }
            checks.push(Check::new(
                format!("ui[{i}]"),
                ok,
                show(&Value::Object(expected.clone())),
                if ok {
                    show(&requests[from - 1])
                } else {
                    format!(
                        "no such request{} among:\n{}",
                        if i > 0 { " after the previous one" } else { "" },
                        requests
                            .iter()
                            .map(|r| r.to_string())
                            .collect::<Vec<_>>()
                            .join("\n")
                    )
                },
            ));
        }
    }

    if !expect.entries.is_empty() {
        let entries: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "entry")
            .map(|e| &e["entry"])
            .collect();
        let mut from = 0;
        for (i, expected) in expect.entries.iter().enumerate() {
            let name = format!("entries[{i}]");
            match entries[from..]
                .iter()
                .position(|e| entry_matches(e, expected))
            {
                Some(at) => {
                    let entry = entries[from + at];
                    from += at + 1;
                    checks.push(Check::new(
                        format!("{name}.customType"),
                        true,
                        expected.custom_type.clone().unwrap_or_default(),
                        entry["customType"].as_str().unwrap_or_default(),
                    ));
                    if let Some(m) = &expected.data {
                        check_matcher(
                            &format!("{name}.data"),
                            &format!("{key}.{name}.data"),
                            m,
                            &entry["data"],
                            None,
                            snapshots,
                            checks,
                        );
                    }
                }
                None => checks.push(Check::fail(
                    name,
                    format!(
                        "a {} entry{}",
                        expected.entry_type.as_deref().unwrap_or("custom"),
                        expected
                            .custom_type
                            .as_ref()
                            .map(|c| format!(" of customType {c}"))
                            .unwrap_or_default()
                    ),
                    format!(
                        "entries appended: {}",
                        entries
                            .iter()
                            .map(|e| format!(
                                "{}{}",
                                e["type"].as_str().unwrap_or_default(),
                                e["customType"]
                                    .as_str()
                                    .map(|c| format!(" {c}"))
                                    .unwrap_or_default()
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
            }
        }
    }
}

/// Every string in the events (where denials and limit errors are told).
fn strings(events: &[Value]) -> Vec<String> {
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            Value::Object(map) => map.values().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    for e in events {
        walk(e, &mut out);
    }
    out
}

/// The capability denials told in the events: each distinct text naming an --allow-... grant.
pub fn denials(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in strings(events) {
        for line in s.lines() {
            if line.contains("--allow-") {
                let line = line.trim().to_owned();
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

/// The limit errors told in the events (call timeout, memory, stack).
pub fn limit_hits(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in strings(events) {
        for line in s.lines() {
            if line.contains("--call-timeout")
                || line.contains("--memory-limit")
                || line.contains("ran out of stack")
            {
                let line = line.trim().to_owned();
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

/// The scenario's final expectations: files, denials, limits.
pub fn check_final(
    scenario: &Scenario,
    workspace: &Path,
    events: &[Value],
    snapshots: &mut Snapshots,
    checks: &mut Vec<Check>,
) {
    let expect = &scenario.expect;
    for file in &expect.files {
        let name = format!("files[{}]", file.path);
        let path = workspace.join(&file.path);
        let exists = path.is_file();
        let must_exist = if file.absent {
            Some(false)
        } else {
            file.exists.or(
                (file.content.is_some() || file.pattern.is_some() || file.snapshot).then_some(true),
            )
        };
        if let Some(must) = must_exist {
            checks.push(Check::new(
                format!("{name}.exists"),
                exists == must,
                must.to_string(),
                exists.to_string(),
            ));
        }
        if !exists {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_else(|_| "(not UTF-8 text)".into());
        let m = Matcher {
            equals: file.content.clone().map(Value::String),
            pointer: BTreeMap::new(),
            pattern: file.pattern.clone(),
            snapshot: file.snapshot,
        };
        check_matcher(
            &format!("{name}.content"),
            &name,
            &m,
            &Value::String(text.clone()),
            Some(&text),
            snapshots,
            checks,
        );
    }
    let told = denials(events);
    for expected in &expect.denials {
        let ok = told.iter().any(|d| d.contains(expected.as_str()));
        checks.push(Check::new(
            "denials",
            ok,
            format!("a denial mentioning {expected:?}"),
            if told.is_empty() {
                "no denial".into()
            } else {
                told.join("\n")
            },
        ));
    }
    if !expect.limits_hit {
        let hits = limit_hits(events);
        checks.push(Check::new(
            "limits",
            hits.is_empty(),
            "no limit hit",
            if hits.is_empty() {
                "no limit hit".into()
            } else {
                hits.join("\n")
            },
        ));
    }
}
