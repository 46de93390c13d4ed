//! What is compared between pi and pichamber, and what is left out because it legitimately
//! differs between two runs or two implementations. Each normalisation says why.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value, json};

use super::scenario::Record;

/// UI requests that set a piece of UI state rather than report something. Timers (spinners,
/// clocks) repaint them as often as time allows, so how many updates a step makes depends on
/// timing: what is compared is the state they leave (per key) at the end of each step, when
/// it changed.
const UI_STATE: &[&str] = &["setStatus", "setWidget", "setTitle"];

/// Replaces per-side text: the side's temporary folder, the example's (possibly copied)
/// location.
#[derive(Debug, Clone, Default)]
pub struct Paths {
    /// (from, to), applied in order: longest first.
    pub replacements: Vec<(String, String)>,
}

impl Paths {
    pub fn new(mut replacements: Vec<(String, String)>) -> Paths {
        replacements.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        Paths { replacements }
    }

    fn apply(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (from, to) in &self.replacements {
            if !from.is_empty() {
                out = out.replace(from.as_str(), to);
            }
        }
        out
    }
}

/// `value` without what differs legitimately:
/// - `timestamp` fields (wall clock), and the value of pi 1.6.0's `durationMs` and bash's
///   `wall_time_seconds` (how long something took; whether they are there still counts);
/// - the side's temporary folder (`<root>`) and the example's location (`<examples>/NAME`,
///   also when a copy with installed dependencies is loaded);
/// - the `Current date: ...` line pi's system prompt may carry;
/// - wall-clock times inside text (extensions print `Date.now()` values and ISO times):
///   13-digit millisecond times (as text or numbers) and ISO 8601 date-times become
///   `<time>`.
pub fn scrub(value: &Value, paths: &Paths) -> Value {
    static DATE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"\d{4}-\d{2}-\d{2}").unwrap());
    static TIME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"\b1\d{12}\b|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?",
        )
        .unwrap()
    });
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "timestamp")
                .map(|(k, v)| match k.as_str() {
                    "durationMs" | "wall_time_seconds" if v.is_number() => {
                        (k.clone(), json!("<duration>"))
                    }
                    _ => (k.clone(), scrub(v, paths)),
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| scrub(v, paths)).collect()),
        Value::Number(n)
            if n.as_u64()
                .is_some_and(|n| (1_000_000_000_000..2_000_000_000_000).contains(&n)) =>
        {
            json!("<time>")
        }
        Value::String(s) => {
            let s = paths.apply(s);
            let s = TIME.replace_all(&s, "<time>").into_owned();
            if s.contains("Current date") {
                Value::String(DATE.replace_all(&s, "<date>").into_owned())
            } else {
                Value::String(s)
            }
        }
        other => other.clone(),
    }
}

/// Ids are random (UI request ids, session ids) or counters that differ in how many polls a
/// side needed (request ids): within a step, each distinct id becomes `<id:N>` by first
/// appearance, so the same id still matches where it is used again.
fn rename_ids(value: &mut Value, ids: &mut HashMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if (key == "id" || key.ends_with("Id"))
                    && let Value::String(s) = v
                {
                    let next = format!("<id:{}>", ids.len() + 1);
                    *s = ids.entry(s.clone()).or_insert(next).clone();
                } else {
                    rename_ids(v, ids);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| rename_ids(v, ids)),
        _ => {}
    }
}

/// How many streams a step's output is split into: responses, agent events, UI requests,
/// extension errors. pi hands agent events to extensions through an asynchronous queue, so
/// where an extension's UI request or error lands among the agent events depends on timing;
/// each stream's own order is compared.
const STREAMS: usize = 4;

fn stream_of(line: &Value) -> usize {
    match line["type"].as_str().unwrap_or_default() {
        "response" => 0,
        "extension_ui_request" => 2,
        "extension_error" => 3,
        _ => 1,
    }
}

/// One step, normalised: its label and its streams.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalStep {
    pub label: String,
    pub streams: Vec<Vec<Value>>,
}

/// A side's record, normalised step by step.
pub fn normalise(record: &Record, paths: &Paths) -> Vec<NormalStep> {
    let mut ui_state: BTreeMap<String, Value> = BTreeMap::new();
    let mut reported_state = ui_state.clone();
    let mut out = Vec::new();
    for (label, lines) in &record.steps {
        let mut streams = vec![Vec::new(); STREAMS];
        for line in lines {
            let mut line = scrub(line, paths);
            let kind = line["type"].as_str().unwrap_or_default().to_owned();
            if kind == "extension_ui_request"
                && let Some(method) = line["method"].as_str()
                && UI_STATE.contains(&method)
            {
                // The state as a client would keep it: a status text, a widget's lines and
                // placement, the title.
                let (key, value) = match method {
                    "setStatus" => (
                        format!("status {}", line["statusKey"].as_str().unwrap_or_default()),
                        line["statusText"].clone(),
                    ),
                    "setWidget" => (
                        format!("widget {}", line["widgetKey"].as_str().unwrap_or_default()),
                        json!({ "lines": line["widgetLines"], "placement": line["widgetPlacement"] }),
                    ),
                    _ => ("title".to_owned(), line["title"].clone()),
                };
                if value.is_null() || value.get("lines").is_some_and(Value::is_null) {
                    ui_state.remove(&key);
                } else {
                    ui_state.insert(key, value);
                }
                continue;
            }
            // pichamber names no host files by design: where pi gives an extension command's
            // sourceInfo path (the extension's file) and an extension error's extensionPath
            // (the file), pichamber names the extension; how it was loaded (source, scope,
            // origin) is compared. Templates' and skills' sourceInfo is not: pichamber labels
            // a package's resources by the package, where pi labels them by their folder
            // (noted in issue 15). Command errors (`command:NAME` in pi) are kept.
            if kind == "response"
                && let Some(commands) = line
                    .get_mut("data")
                    .and_then(|d| d.get_mut("commands"))
                    .and_then(Value::as_array_mut)
            {
                for command in commands {
                    if command["source"] != "extension" {
                        command.as_object_mut().map(|c| c.remove("sourceInfo"));
                    } else if let Some(info) = command["sourceInfo"].as_object_mut() {
                        info.remove("path");
                        info.remove("baseDir");
                    }
                }
            }
            // pichamber speaks pi 1.6.0's RPC protocol, which added what became of a prompt
            // (`data.disposition`); 0.73.1's responses have no data, and its clients ignore it.
            if kind == "response"
                && super::scenario::version() == super::common::oracle::Pi::V0_73
                && matches!(
                    line["command"].as_str(),
                    Some("prompt" | "steer" | "follow_up")
                )
                && let Some(map) = line.as_object_mut()
                && map
                    .get("data")
                    .and_then(Value::as_object)
                    .is_some_and(|d| d.len() == 1 && d.contains_key("disposition"))
            {
                map.remove("data");
            }
            if kind == "extension_error"
                && line["extensionPath"]
                    .as_str()
                    .is_some_and(|p| !p.starts_with("command:"))
            {
                line["extensionPath"] = json!("<extension>");
            }
            // pi's assistant message_start carries the message object that streaming goes on
            // filling in, and is printed when pi's event queue gets to it: what it shows of
            // the content, usage and stop reason depends on timing. message_end has them.
            if kind == "message_start"
                && line["message"]["role"] == "assistant"
                && let Some(message) = line["message"].as_object_mut()
            {
                for key in [
                    "content",
                    "usage",
                    "stopReason",
                    "responseId",
                    "errorMessage",
                ] {
                    message.remove(key);
                }
            }
            // The partial message of a message_update is a snapshot pi takes while the
            // stream is still being filled in (pi 1.6.0's top-level usage too: it is read when
            // the event is written); the delta and the finished message_end are compared
            // instead.
            if kind == "message_update"
                && let Some(map) = line.as_object_mut()
            {
                map.remove("message");
                map.remove("usage");
                if let Some(event) = map
                    .get_mut("assistantMessageEvent")
                    .and_then(Value::as_object_mut)
                {
                    event.remove("partial");
                }
            }
            streams[stream_of(&line)].push(line);
        }
        if ui_state != reported_state {
            let state: Map<String, Value> = ui_state
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            streams[2].push(json!({ "type": "<ui state>", "state": state }));
            reported_state = ui_state.clone();
        }
        let mut ids = HashMap::new();
        for stream in &mut streams {
            for line in stream.iter_mut() {
                rename_ids(line, &mut ids);
            }
        }
        out.push(NormalStep {
            label: label.clone(),
            streams,
        });
    }
    out
}

/// The first JSON path where `a` and `b` differ, with both values there.
pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<(String, Value, Value)> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                let here = format!("{path}.{k}");
                match y.get(k) {
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, &here) {
                            return Some(d);
                        }
                    }
                    None => return Some((here, v.clone(), json!("<absent>"))),
                }
            }
            y.iter()
                .find(|(k, _)| !x.contains_key(*k))
                .map(|(k, w)| (format!("{path}.{k}"), json!("<absent>"), w.clone()))
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                if let Some(d) = first_difference(v, w, &format!("{path}[{i}]")) {
                    return Some(d);
                }
            }
            let n = x.len().min(y.len());
            (x.len() != y.len()).then(|| {
                let here = format!("{path}[{n}]");
                match (x.get(n), y.get(n)) {
                    (Some(v), _) => (here, v.clone(), json!("<absent>")),
                    (_, Some(w)) => (here, json!("<absent>"), w.clone()),
                    (None, None) => unreachable!(),
                }
            })
        }
        _ => (a != b).then(|| (path.to_owned(), a.clone(), b.clone())),
    }
}

/// `value` as compact JSON, cut to `max` characters.
pub fn short(value: &Value, max: usize) -> String {
    let text = match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text
    }
}

fn describe(line: &Value) -> String {
    let kind = line["type"].as_str().unwrap_or("?");
    match kind {
        "response" => format!("response to {}", line["command"].as_str().unwrap_or("?")),
        "extension_ui_request" => format!("ui request {}", line["method"].as_str().unwrap_or("?")),
        "<ui state>" => "UI state".to_owned(),
        other => other.to_owned(),
    }
}

/// Where two streams first differ, in words.
fn stream_difference(pi: &[Value], ours: &[Value]) -> Option<String> {
    let at = (0..pi.len().max(ours.len())).find(|&i| pi.get(i) != ours.get(i))?;
    Some(match (pi.get(at), ours.get(at)) {
        (Some(p), Some(o)) => {
            let (path, a, b) = first_difference(p, o, "").expect("they differ");
            format!(
                "{} (#{at}) differs at `{path}`: pi {}, pichamber {}",
                describe(p),
                short(&a, 120),
                short(&b, 120)
            )
        }
        (Some(p), None) => format!(
            "pichamber printed no {} (pi: {})",
            describe(p),
            short(p, 160)
        ),
        (None, Some(o)) => format!(
            "pichamber printed an extra {}: {}",
            describe(o),
            short(o, 160)
        ),
        (None, None) => unreachable!(),
    })
}

fn exits(step: &NormalStep) -> bool {
    step.streams
        .iter()
        .flatten()
        .any(|l| l["type"] == "<exited>")
}

/// When an extension calls `ctx.shutdown()` during a run, pi exits at the next RPC command
/// it handles (here: the harness's next poll, whose timing is arbitrary), abandoning the
/// run; pichamber finishes the run first. When both sides exit within a step, each stream is
/// compared only as far as both got (and the model requests likewise), then the exit.
fn cut_at_exit(a: &mut NormalStep, b: &mut NormalStep) {
    for (x, y) in a.streams.iter_mut().zip(b.streams.iter_mut()) {
        x.retain(|l| l["type"] != "<exited>");
        y.retain(|l| l["type"] != "<exited>");
        let n = x.len().min(y.len());
        x.truncate(n);
        y.truncate(n);
    }
    for step in [a, b] {
        step.streams[1].push(json!({ "type": "<exited>" }));
    }
}

/// How one step's outputs differ, if they do: its output streams first, then the model
/// requests it made.
fn step_difference(
    a: &NormalStep,
    b: &NormalStep,
    requests_a: &[Value],
    requests_b: &[Value],
) -> Option<String> {
    for (x, y) in a.streams.iter().zip(&b.streams) {
        if let Some(d) = stream_difference(x, y) {
            return Some(d);
        }
    }
    if requests_a != requests_b {
        return Some(
            match first_difference(&json!(requests_a), &json!(requests_b), "") {
                Some((path, p, o)) => format!(
                    "model request differs at `{path}`: pi {}, pichamber {}",
                    short(&p, 120),
                    short(&o, 120)
                ),
                None => "model requests differ".to_owned(),
            },
        );
    }
    None
}

/// How pi's and pichamber's runs differ: per step (in order) its label and the first
/// difference within it; the exit status last. Steps are compared independently (ids are
/// renamed per step), so a difference early on does not hide later ones.
pub fn compare(
    pi: &Record,
    pi_paths: &Paths,
    ours: &Record,
    our_paths: &Paths,
) -> Vec<(String, String)> {
    compare_beside_noise(pi, pi_paths, &[], ours, our_paths)
}

/// Stands where two runs of pi itself differ: such a place is not compared.
const VARIES: &str = "<differs from one pi run to the next>";

/// Where two values differ, as a tree the same shape as they are.
enum Noise {
    Same,
    Whole,
    Fields(Vec<(String, Noise)>),
    Items(Vec<Noise>),
}

impl Noise {
    fn between(a: &Value, b: &Value) -> Noise {
        match (a, b) {
            _ if a == b => Noise::Same,
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                if !x.keys().all(|k| y.contains_key(k)) {
                    return Noise::Whole;
                }
                Noise::Fields(
                    x.iter()
                        .map(|(k, v)| (k.clone(), Noise::between(v, &y[k])))
                        .collect(),
                )
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                Noise::Items(x.iter().zip(y).map(|(v, w)| Noise::between(v, w)).collect())
            }
            _ => Noise::Whole,
        }
    }

    /// `value` with each place that varied replaced by [`VARIES`].
    fn cover(&self, value: &mut Value) {
        match (self, value) {
            (Noise::Same, _) => {}
            (Noise::Whole, value) => *value = json!(VARIES),
            (Noise::Fields(fields), Value::Object(object)) => {
                for (key, noise) in fields {
                    if let Some(v) = object.get_mut(key) {
                        noise.cover(v);
                    }
                }
            }
            (Noise::Items(items), Value::Array(array)) => {
                for (noise, v) in items.iter().zip(array.iter_mut()) {
                    noise.cover(v);
                }
            }
            _ => {}
        }
    }
}

/// Covers each step's lines. A step whose line count varied between pi's runs (or a run whose
/// step count did) is covered whole: it becomes the one line [`VARIES`] on both sides.
fn cover_streams(noise: &Noise, streams: &mut [Vec<Value>]) {
    match noise {
        Noise::Same => {}
        Noise::Items(steps) => {
            for (noise, lines) in steps.iter().zip(streams.iter_mut()) {
                let mut value = json!(lines);
                noise.cover(&mut value);
                *lines = match value {
                    Value::Array(covered) => covered,
                    whole => vec![whole],
                };
            }
        }
        _ => {
            for lines in streams.iter_mut() {
                *lines = vec![json!(VARIES)];
            }
        }
    }
}

/// [`compare`], leaving out what further runs of pi (`pi_again`) show pi itself varies from
/// run to run (names drawn at random, ids made from the clock): there both sides are covered
/// before they are compared. What pichamber's side lacks or has extra still counts.
pub fn compare_beside_noise(
    pi: &Record,
    pi_paths: &Paths,
    pi_again: &[(&Record, &Paths)],
    ours: &Record,
    our_paths: &Paths,
) -> Vec<(String, String)> {
    let (a, b) = (normalise(pi, pi_paths), normalise(ours, our_paths));
    let agains: Vec<_> = pi_again
        .iter()
        .map(|&(record, paths)| (normalise(record, paths), record, paths))
        .collect();
    let requests = |record: &Record, paths: &Paths, step: usize| -> Vec<Value> {
        record
            .requests
            .iter()
            .filter(|(s, _)| *s == step)
            .map(|(_, r)| scrub(r, paths))
            .collect()
    };
    let mut out = Vec::new();
    for (index, step) in a.iter().enumerate() {
        let Some(other) = b.get(index) else {
            out.push((
                step.label.clone(),
                "pichamber's run ended before this step".to_owned(),
            ));
            continue;
        };
        let (mut x, mut y) = (step.clone(), other.clone());
        let (mut rx, mut ry) = (
            requests(pi, pi_paths, index),
            requests(ours, our_paths, index),
        );
        if exits(&x) && exits(&y) {
            cut_at_exit(&mut x, &mut y);
            let n = rx.len().min(ry.len());
            rx.truncate(n);
            ry.truncate(n);
        }
        for (again, record, paths) in &agains {
            let Some(z) = again.get(index) else { continue };
            let noise = Noise::between(&json!(step.streams), &json!(z.streams));
            cover_streams(&noise, &mut x.streams);
            cover_streams(&noise, &mut y.streams);
            let noise = Noise::between(
                &json!(requests(pi, pi_paths, index)),
                &json!(requests(record, paths, index)),
            );
            for requests in [&mut rx, &mut ry] {
                let mut value = json!(requests);
                noise.cover(&mut value);
                *requests = serde_json::from_value(value).expect("requests stay an array");
            }
        }
        if let Some(d) = step_difference(&x, &y, &rx, &ry) {
            out.push((step.label.clone(), d));
        }
    }
    if pi.exit_success != ours.exit_success {
        let word = |s: Option<bool>| match s {
            Some(true) => "exits successfully",
            Some(false) => "exits with an error",
            None => "does not exit",
        };
        out.push((
            "exit".to_owned(),
            format!(
                "pi {}, pichamber {}",
                word(pi.exit_success),
                word(ours.exit_success)
            ),
        ));
    }
    out
}

#[cfg(test)]
mod noise_tests {
    use super::*;

    #[test]
    fn only_what_varies_between_pi_runs_is_covered() {
        let first = json!({"name": "CedarHarbor", "n": 1, "list": [1, 2], "grew": [1]});
        let second = json!({"name": "RapidQuartz", "n": 1, "list": [1, 3], "grew": [1, 2]});
        let noise = Noise::between(&first, &second);
        let mut ours = json!({"name": "BrightQuartz", "n": 2, "list": [9, 9], "grew": [5]});
        noise.cover(&mut ours);
        assert_eq!(
            ours,
            json!({"name": VARIES, "n": 2, "list": [9, VARIES], "grew": VARIES})
        );
    }

    /// pi's two runs printed a different number of lines in one step (a run that failed on
    /// the network sooner, say): that step is covered whole, the others line by line.
    #[test]
    fn a_step_whose_line_count_varies_is_covered_whole() {
        let first = json!([[{"a": 1}], [{"b": 1}, {"c": 1}]]);
        let second = json!([[{"a": 2}], [{"b": 1}]]);
        let noise = Noise::between(&first, &second);
        let mut ours = vec![vec![json!({"a": 3})], vec![json!({"b": 5})]];
        cover_streams(&noise, &mut ours);
        assert_eq!(ours, vec![vec![json!({"a": VARIES})], vec![json!(VARIES)]]);
        // Runs with different step counts cover every step.
        let noise = Noise::between(&json!([[1]]), &json!([[1], [2]]));
        let mut ours = vec![vec![json!(1)], vec![json!(2)]];
        cover_streams(&noise, &mut ours);
        assert_eq!(ours, vec![vec![json!(VARIES)], vec![json!(VARIES)]]);
    }
}
