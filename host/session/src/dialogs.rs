//! Who answers an extension's blocking dialogs: scripted answers (`--answer`), the terminal,
//! or nobody (no UI: pi's print mode, where dialogs resolve to their defaults).

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::sync::Mutex;

use futures::FutureExt;
use futures::future::BoxFuture;

use super::events::{DialogAnswer, UiRequest};

pub trait DialogResponder: Send + Sync {
    fn answer(&self, id: &str, request: &UiRequest) -> BoxFuture<'static, DialogAnswer>;
}

/// The literal `--answer` value that cancels whichever dialog it reaches.
pub const CANCEL_ANSWER: &str = "<cancel>";

/// Answers dialogs in order from a list (`--answer VALUE`, repeatable).
pub struct ScriptedAnswers {
    answers: Mutex<VecDeque<String>>,
    /// Answers that did not fit their dialog, and dialogs that found no answer left.
    problems: Mutex<Vec<String>>,
}

impl ScriptedAnswers {
    pub fn new(answers: impl IntoIterator<Item = String>) -> Self {
        Self {
            answers: Mutex::new(answers.into_iter().collect()),
            problems: Mutex::new(Vec::new()),
        }
    }
    pub fn remaining(&self) -> usize {
        self.answers.lock().unwrap().len()
    }
    pub fn problems(&self) -> Vec<String> {
        self.problems.lock().unwrap().clone()
    }
    /// Queues more answers after those still left (a check scenario's step adds its own).
    pub fn push(&self, answers: impl IntoIterator<Item = String>) {
        self.answers.lock().unwrap().extend(answers);
    }
    /// The problems so far, leaving none behind.
    pub fn take_problems(&self) -> Vec<String> {
        std::mem::take(&mut *self.problems.lock().unwrap())
    }
    /// Drops the answers no dialog took; returns them.
    pub fn take_remaining(&self) -> Vec<String> {
        self.answers.lock().unwrap().drain(..).collect()
    }
}

/// Interprets one scripted answer for a dialog: an option (or its 1-based number) for select,
/// yes/no for confirm, text for input and editor, a JSON object for a form.
pub fn interpret_answer(answer: &str, request: &UiRequest) -> Result<DialogAnswer, String> {
    if answer == CANCEL_ANSWER {
        return Ok(DialogAnswer::cancelled());
    }
    match request {
        UiRequest::Select { options, .. } => {
            if options.iter().any(|o| o == answer) {
                return Ok(DialogAnswer::Value {
                    value: answer.to_owned(),
                });
            }
            if let Ok(n) = answer.parse::<usize>()
                && (1..=options.len()).contains(&n)
            {
                return Ok(DialogAnswer::Value {
                    value: options[n - 1].clone(),
                });
            }
            Err(format!(
                "'{answer}' is not one of the options {options:?} (give the option text or its number)"
            ))
        }
        UiRequest::Confirm { .. } => match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" | "ok" => Ok(DialogAnswer::Confirmed { confirmed: true }),
            "n" | "no" | "false" | "0" => Ok(DialogAnswer::Confirmed { confirmed: false }),
            _ => Err(format!("'{answer}' is not yes or no")),
        },
        UiRequest::Form { .. } => match serde_json::from_str::<serde_json::Value>(answer) {
            Ok(value @ serde_json::Value::Object(_)) => Ok(DialogAnswer::Value {
                value: value.to_string(),
            }),
            _ => Err(format!("'{answer}' is not a JSON object of form values")),
        },
        _ => Ok(DialogAnswer::Value {
            value: answer.to_owned(),
        }),
    }
}

impl DialogResponder for ScriptedAnswers {
    fn answer(&self, _id: &str, request: &UiRequest) -> BoxFuture<'static, DialogAnswer> {
        let next = self.answers.lock().unwrap().pop_front();
        let title = match request {
            UiRequest::Select { title, .. }
            | UiRequest::Confirm { title, .. }
            | UiRequest::Input { title, .. }
            | UiRequest::Editor { title, .. }
            | UiRequest::Form { title, .. } => title.clone(),
            _ => String::new(),
        };
        let answer = match next {
            Some(answer) => interpret_answer(&answer, request).unwrap_or_else(|e| {
                self.problems.lock().unwrap().push(format!(
                    "--answer for \"{title}\": {e}; the dialog was cancelled"
                ));
                DialogAnswer::cancelled()
            }),
            None => {
                self.problems.lock().unwrap().push(format!(
                    "no --answer left for \"{title}\"; the dialog was cancelled"
                ));
                DialogAnswer::cancelled()
            }
        };
        futures::future::ready(answer).boxed()
    }
}

/// Asks on the terminal (stderr for the question, stdin for the answer).
pub struct TerminalDialogs;

impl DialogResponder for TerminalDialogs {
    fn answer(&self, _id: &str, request: &UiRequest) -> BoxFuture<'static, DialogAnswer> {
        let request = request.clone();
        async move {
            tokio::task::spawn_blocking(move || ask_on_terminal(&request))
                .await
                .unwrap_or_else(|_| DialogAnswer::cancelled())
        }
        .boxed()
    }
}

fn ask_on_terminal(request: &UiRequest) -> DialogAnswer {
    let mut err = std::io::stderr().lock();
    // Every text shown is the extension's: it must not drive the terminal.
    let shown = |text: &str| super::terminal::escape(text);
    let prompt = match request {
        UiRequest::Select { title, options, .. } => {
            let _ = writeln!(err, "? {}", shown(title));
            for (i, o) in options.iter().enumerate() {
                let _ = writeln!(err, "  {}. {}", i + 1, shown(o));
            }
            "choose a number (empty cancels): ".to_string()
        }
        UiRequest::Confirm { title, message, .. } => {
            format!("? {}\n  {}\n  [y/N]: ", shown(title), shown(message))
        }
        UiRequest::Input {
            title, placeholder, ..
        } => {
            format!(
                "? {}{}: ",
                shown(title),
                placeholder
                    .as_deref()
                    .map(|p| format!(" ({})", shown(p)))
                    .unwrap_or_default()
            )
        }
        UiRequest::Editor { title, prefill, .. } => {
            let _ = writeln!(
                err,
                "? {} (end with a line containing only '.'; empty first line cancels)",
                shown(title)
            );
            if let Some(p) = prefill {
                let _ = writeln!(err, "  prefill:\n{}", shown(p));
            }
            String::new()
        }
        UiRequest::Form { title, fields, .. } => {
            format!(
                "? {}\n  fields: {}\n  values as a JSON object: ",
                shown(title),
                shown(&fields.to_string())
            )
        }
        _ => return DialogAnswer::cancelled(),
    };
    let _ = write!(err, "{prompt}");
    let _ = err.flush();
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    if let UiRequest::Editor { .. } = request {
        let mut text = Vec::new();
        for line in lines.by_ref() {
            let Ok(line) = line else { break };
            if line == "." {
                return DialogAnswer::Value {
                    value: text.join("\n"),
                };
            }
            if text.is_empty() && line.is_empty() {
                return DialogAnswer::cancelled();
            }
            text.push(line);
        }
        return DialogAnswer::cancelled();
    }
    let line = match lines.next() {
        Some(Ok(line)) => line.trim().to_owned(),
        _ => return DialogAnswer::cancelled(),
    };
    if line.is_empty() && !matches!(request, UiRequest::Confirm { .. }) {
        return DialogAnswer::cancelled();
    }
    match request {
        UiRequest::Confirm { .. } => DialogAnswer::Confirmed {
            confirmed: matches!(line.to_ascii_lowercase().as_str(), "y" | "yes"),
        },
        _ => interpret_answer(&line, request).unwrap_or_else(|e| {
            let _ = writeln!(std::io::stderr(), "  {}; cancelled", shown(&e));
            DialogAnswer::cancelled()
        }),
    }
}

/// No UI: dialogs resolve to their defaults at once (pi's print mode).
pub struct NoDialogs;

impl DialogResponder for NoDialogs {
    fn answer(&self, _id: &str, _request: &UiRequest) -> BoxFuture<'static, DialogAnswer> {
        futures::future::ready(DialogAnswer::cancelled()).boxed()
    }
}
