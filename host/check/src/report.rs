//! A check run's report: terminal text (a failure's expected and actual side by side), JSON
//! and JUnit XML. Nothing in it depends on the machine or the time: temporary paths are
//! replaced, no durations are recorded.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::expect::{Check, denials};
use pichamber_artifact::Artifact;

/// Which build of an extension was checked.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionBuild {
    /// As the scenario names it.
    pub path: String,
    pub name: String,
    pub version: Option<String>,
    /// sha256 of the bundled modules (the manifest's sourceHash).
    pub source_hash: String,
    /// sha256 of the component (the guest shim) it runs in.
    pub component_hash: Option<String>,
}

impl ExtensionBuild {
    pub fn of(path: &str, artifact: &Artifact) -> Self {
        let m = &artifact.manifest;
        Self {
            path: path.to_owned(),
            name: m.name.clone(),
            version: m.version.clone(),
            source_hash: m.source_hash.clone(),
            component_hash: m.component_hash.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub index: usize,
    pub label: String,
    pub checks: Vec<Check>,
}

impl StepReport {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }
}

/// What the extensions actually did during a run (for `--audit`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Tools called (directly or by the model), in order, each once.
    pub tools_called: Vec<String>,
    /// Errors naming an --allow-... grant.
    pub denials: Vec<String>,
    /// Programs it tried to run without the grant.
    pub programs_denied: Vec<String>,
    /// Workspace files created, changed or removed.
    pub files_written: Vec<String>,
}

impl Usage {
    pub fn collect(
        events: &[Value],
        called: Vec<String>,
        before: &BTreeMap<String, String>,
        after: &BTreeMap<String, String>,
    ) -> Self {
        let mut tools_called = Vec::new();
        for t in called {
            if !tools_called.contains(&t) {
                tools_called.push(t);
            }
        }
        let denials = denials(events);
        let re = regex::Regex::new(r"exec of '([^']*)' denied").expect("valid regex");
        let mut programs_denied: Vec<String> = Vec::new();
        for d in &denials {
            for c in re.captures_iter(d) {
                let p = c[1].to_owned();
                if !programs_denied.contains(&p) {
                    programs_denied.push(p);
                }
            }
        }
        let mut files_written = Vec::new();
        for (path, hash) in after {
            match before.get(path) {
                None => files_written.push(format!("{path} (created)")),
                Some(h) if h != hash => files_written.push(format!("{path} (changed)")),
                _ => {}
            }
        }
        for path in before.keys().filter(|p| !after.contains_key(*p)) {
            files_written.push(format!("{path} (removed)"));
        }
        Self {
            tools_called,
            denials,
            programs_denied,
            files_written,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioReport {
    pub file: String,
    pub name: String,
    pub extensions: Vec<ExtensionBuild>,
    pub steps: Vec<StepReport>,
    /// The checks after the last step (files, denials, limits).
    pub checks: Vec<Check>,
    /// Why the scenario could not run (an extension that does not build or load).
    pub error: Option<String>,
    #[serde(skip)]
    pub usage: Usage,
}

impl ScenarioReport {
    pub fn passed(&self) -> bool {
        self.error.is_none()
            && self.steps.iter().all(StepReport::passed)
            && self.checks.iter().all(|c| c.passed)
    }
}

/// A scenario file that could not be read: exit code 2.
#[derive(Debug, Clone, Serialize)]
pub struct BadFile {
    pub file: String,
    pub error: String,
}

#[derive(Debug, Default, Serialize)]
pub struct Report {
    pub scenarios: Vec<ScenarioReport>,
    #[serde(rename = "badFiles")]
    pub bad_files: Vec<BadFile>,
}

impl Report {
    pub fn passed(&self) -> usize {
        self.scenarios.iter().filter(|s| s.passed()).count()
    }

    pub fn to_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(list) = v["scenarios"].as_array_mut() {
            for (s, r) in list.iter_mut().zip(&self.scenarios) {
                s["passed"] = Value::Bool(r.passed());
                if let Some(steps) = s["steps"].as_array_mut() {
                    for (st, sr) in steps.iter_mut().zip(&r.steps) {
                        st["passed"] = Value::Bool(sr.passed());
                    }
                }
            }
        }
        v["summary"] = serde_json::json!({
            "scenarios": self.scenarios.len(),
            "passed": self.passed(),
            "failed": self.scenarios.len() - self.passed(),
            "badFiles": self.bad_files.len(),
        });
        v
    }

    /// The terminal report.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for bad in &self.bad_files {
            out.push_str(&format!("BAD  {}\n", bad.error));
        }
        for s in &self.scenarios {
            out.push_str(&format!(
                "{} {} — {}\n",
                if s.passed() { "PASS" } else { "FAIL" },
                s.file,
                s.name
            ));
            for e in &s.extensions {
                out.push_str(&format!(
                    "  extension {} {} {}\n",
                    e.name,
                    e.version.as_deref().unwrap_or("-"),
                    e.source_hash
                ));
            }
            if let Some(error) = &s.error {
                out.push_str(&format!("  error: {error}\n"));
            }
            for step in &s.steps {
                out.push_str(&format!(
                    "  {} {}. {}\n",
                    if step.passed() { "ok  " } else { "FAIL" },
                    step.index,
                    step.label
                ));
                for c in step.checks.iter().filter(|c| !c.passed) {
                    out.push_str(&side_by_side(c, "        "));
                }
            }
            let failed: Vec<&Check> = s.checks.iter().filter(|c| !c.passed).collect();
            out.push_str(&format!(
                "  {} after the run: {} check(s)\n",
                if failed.is_empty() { "ok  " } else { "FAIL" },
                s.checks.len()
            ));
            for c in failed {
                out.push_str(&side_by_side(c, "        "));
            }
        }
        out.push_str(&format!(
            "\n{} passed, {} failed{}\n",
            self.passed(),
            self.scenarios.len() - self.passed(),
            if self.bad_files.is_empty() {
                String::new()
            } else {
                format!(", {} bad file(s)", self.bad_files.len())
            }
        ));
        out
    }

    /// JUnit XML: a testsuite per scenario file, a testcase per step (and one for the
    /// checks after the run); the extension builds as properties. No timestamps.
    pub fn to_junit(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let failures = self.scenarios.len() - self.passed() + self.bad_files.len();
        out.push_str(&format!(
            "<testsuites name=\"pichamber check\" tests=\"{}\" failures=\"{failures}\">\n",
            self.scenarios.len() + self.bad_files.len()
        ));
        for bad in &self.bad_files {
            out.push_str(&format!(
                "  <testsuite name=\"{}\" tests=\"1\" failures=\"0\" errors=\"1\">\n    <testcase classname=\"{}\" name=\"scenario file\">\n      <error message=\"{}\"/>\n    </testcase>\n  </testsuite>\n",
                xml(&bad.file), xml(&bad.file), xml(&bad.error)
            ));
        }
        for s in &self.scenarios {
            let cases = s.steps.len() + 1;
            let failed = s.steps.iter().filter(|st| !st.passed()).count()
                + usize::from(!s.checks.iter().all(|c| c.passed) || s.error.is_some());
            out.push_str(&format!(
                "  <testsuite name=\"{}\" tests=\"{cases}\" failures=\"{failed}\">\n",
                xml(&format!("{}: {}", s.file, s.name))
            ));
            out.push_str("    <properties>\n");
            for e in &s.extensions {
                out.push_str(&format!(
                    "      <property name=\"{}\" value=\"{}\"/>\n",
                    xml(&format!("extension.{}.sourceHash", e.name)),
                    xml(&e.source_hash)
                ));
            }
            out.push_str("    </properties>\n");
            let case = |out: &mut String, name: &str, checks: &[Check], error: Option<&str>| {
                out.push_str(&format!(
                    "    <testcase classname=\"{}\" name=\"{}\"",
                    xml(&s.file),
                    xml(name)
                ));
                let failed: Vec<&Check> = checks.iter().filter(|c| !c.passed).collect();
                if failed.is_empty() && error.is_none() {
                    out.push_str("/>\n");
                    return;
                }
                out.push_str(">\n");
                let mut text = String::new();
                if let Some(e) = error {
                    text.push_str(e);
                    text.push('\n');
                }
                for c in &failed {
                    text.push_str(&side_by_side(c, ""));
                }
                let message = error
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("{} failed", failed[0].name));
                out.push_str(&format!(
                    "      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
                    xml(&message),
                    xml(&text)
                ));
            };
            for st in &s.steps {
                case(
                    &mut out,
                    &format!("{}. {}", st.index, st.label),
                    &st.checks,
                    None,
                );
            }
            case(&mut out, "after the run", &s.checks, s.error.as_deref());
            out.push_str("  </testsuite>\n");
        }
        out.push_str("</testsuites>\n");
        out
    }
}

fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A failed check: its name, then expected and actual in two columns.
pub fn side_by_side(check: &Check, indent: &str) -> String {
    const MAX: usize = 48;
    let wrap = |text: &str| -> Vec<String> {
        let mut lines = Vec::new();
        for line in text.lines() {
            // Break long lines at a space when there is one, else anywhere.
            let mut rest: Vec<char> = line.chars().collect();
            if rest.is_empty() {
                lines.push(String::new());
            }
            while !rest.is_empty() {
                if rest.len() <= MAX {
                    lines.push(rest.drain(..).collect());
                    break;
                }
                let cut = match rest[..MAX].iter().rposition(|c| *c == ' ') {
                    Some(at) if at > 0 => at + 1,
                    _ => MAX,
                };
                lines.push(rest.drain(..cut).collect::<String>().trim_end().to_owned());
            }
        }
        if lines.is_empty() {
            lines.push(String::new());
        }
        lines
    };
    let expected = wrap(&check.expected);
    let actual = wrap(&check.actual);
    let width = expected
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0)
        .max("expected".len());
    let mut out = format!("{indent}✗ {}\n", check.name);
    out.push_str(&format!("{indent}  {:width$} │ actual\n", "expected"));
    for i in 0..expected.len().max(actual.len()) {
        let e = expected.get(i).map(String::as_str).unwrap_or("");
        let a = actual.get(i).map(String::as_str).unwrap_or("");
        out.push_str(&format!("{indent}  {e:width$} │ {a}\n"));
    }
    out
}
