//! What an extension asks to reach: `pichamber.capabilities` in its package.json, or one
//! `// pichamber.capabilities: {...}` line in a single-file extension. `build` records it in
//! the manifest, `inspect` shows it, and the GUI offers what is not granted for approval.
//! Asking grants nothing by itself.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many entries of one kind (a request is read by a person before approving).
const MAX_PER_KIND: usize = 32;
const MAX_PATH_LEN: usize = 1024;
const MAX_REASON_LEN: usize = 300;
/// The comment a single-file extension declares its requests with.
pub const INLINE_MARKER: &str = "pichamber.capabilities:";

/// The kinds of capability, in the order they are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Read,
    Write,
    Run,
    Env,
    Net,
    /// A model provider's API key, handed to the extension (`ctx.modelRegistry`).
    #[serde(rename = "modelKey")]
    ModelKey,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Read,
        Kind::Write,
        Kind::Run,
        Kind::Env,
        Kind::Net,
        Kind::ModelKey,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Run => "run",
            Kind::Env => "env",
            Kind::Net => "net",
            Kind::ModelKey => "modelKey",
        }
    }

    /// The CLI flag that grants it.
    pub fn flag(self) -> &'static str {
        match self {
            Kind::Read => "--allow-read",
            Kind::Write => "--allow-write",
            Kind::Run => "--allow-run",
            Kind::Env => "--allow-env",
            Kind::Net => "--allow-net",
            Kind::ModelKey => "--allow-model-key",
        }
    }
}

/// One thing asked for: a directory tree (read, write), a program, a variable or a host, as
/// the extension wrote it (paths relative to the session's working directory).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Item {
    pub kind: Kind,
    pub value: String,
}

impl Item {
    pub fn new(kind: Kind, value: impl Into<String>) -> Self {
        Self {
            kind,
            value: value.into(),
        }
    }

    /// `--allow-run=git`
    pub fn flag(&self) -> String {
        format!("{}={}", self.kind.flag(), self.value)
    }

    /// A path item's directory on the host, lexically resolved against `cwd` (`..` cannot
    /// climb above the root). `None` for the other kinds.
    pub fn path_in(&self, cwd: &Path) -> Option<PathBuf> {
        if !matches!(self.kind, Kind::Read | Kind::Write) {
            return None;
        }
        let mut out = PathBuf::new();
        for part in cwd.join(&self.value).components() {
            match part {
                Component::ParentDir => {
                    out.pop();
                }
                Component::CurDir => {}
                other => out.push(other),
            }
        }
        Some(out)
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind.name(), self.value)
    }
}

/// An extension's requests, validated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requests {
    /// Directory trees to read (relative to the working directory, or absolute).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<String>,
    /// Directory trees to read and write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<String>,
    /// Programs to run, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub run: Vec<String>,
    /// Environment variables to see.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Hosts `fetch` may reach (`example.com`, `*.example.com`, optional `:port`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net: Vec<String>,
    /// Model providers whose API key the extension reads (`openai`).
    #[serde(default, rename = "modelKey", skip_serializing_if = "Vec::is_empty")]
    pub model_key: Vec<String>,
    /// Why, in a sentence shown with the approval prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl Requests {
    /// Parses and checks a `pichamber.capabilities` value.
    pub fn parse(value: &Value) -> Result<Self, String> {
        let requests: Self = serde_json::from_value(value.clone()).map_err(|e| {
            format!("{e} (expected {{ \"read\"?, \"write\"?, \"run\"?, \"env\"?, \"net\"?, \"modelKey\"?: [strings], \"reason\"?: string }})")
        })?;
        requests.check()?;
        Ok(requests)
    }

    /// The requests of a single-file extension: its one `// pichamber.capabilities: {...}`
    /// line, if it has one. Errors carry the 1-based line.
    pub fn from_inline(source: &str) -> Result<Option<Self>, (usize, String)> {
        let mut found: Option<(usize, Self)> = None;
        for (index, line) in source.lines().enumerate() {
            let Some(rest) = line.trim_start().strip_prefix("//") else {
                continue;
            };
            let Some(json) = rest.trim_start().strip_prefix(INLINE_MARKER) else {
                continue;
            };
            let number = index + 1;
            if let Some((first, _)) = &found {
                return Err((
                    number,
                    format!(
                        "a second {INLINE_MARKER} line (the first is line {first}); declare the requests once"
                    ),
                ));
            }
            let value: Value = serde_json::from_str(json.trim()).map_err(|e| {
                (
                    number,
                    format!(
                        "{INLINE_MARKER} is not followed by a JSON object on the same line: {e}"
                    ),
                )
            })?;
            let requests =
                Self::parse(&value).map_err(|e| (number, format!("{INLINE_MARKER} {e}")))?;
            found = Some((number, requests));
        }
        Ok(found.map(|(_, r)| r))
    }

    fn check(&self) -> Result<(), String> {
        for kind in Kind::ALL {
            let values = self.values(kind);
            if values.len() > MAX_PER_KIND {
                return Err(format!(
                    "\"{}\" lists {} entries; at most {MAX_PER_KIND}",
                    kind.name(),
                    values.len()
                ));
            }
            for value in values {
                check_value(kind, value)
                    .map_err(|why| format!("\"{}\": {value:?} {why}", kind.name()))?;
            }
        }
        if let Some(reason) = &self.reason
            && (reason.chars().count() > MAX_REASON_LEN || reason.chars().any(char::is_control))
        {
            return Err(format!(
                "\"reason\" must be one line of at most {MAX_REASON_LEN} characters"
            ));
        }
        Ok(())
    }

    pub fn values(&self, kind: Kind) -> &[String] {
        match kind {
            Kind::Read => &self.read,
            Kind::Write => &self.write,
            Kind::Run => &self.run,
            Kind::Env => &self.env,
            Kind::Net => &self.net,
            Kind::ModelKey => &self.model_key,
        }
    }

    /// Every item, kinds in order, each once.
    pub fn items(&self) -> Vec<Item> {
        let mut items: Vec<Item> = Vec::new();
        for kind in Kind::ALL {
            for value in self.values(kind) {
                let item = Item::new(kind, value.clone());
                if !items.contains(&item) {
                    items.push(item);
                }
            }
        }
        items
    }

    pub fn is_empty(&self) -> bool {
        Kind::ALL.iter().all(|k| self.values(*k).is_empty())
    }

    /// One line for people: `read ., run git — "why"`, or `none`.
    pub fn summary(&self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        let items: Vec<String> = self.items().iter().map(Item::to_string).collect();
        match &self.reason {
            Some(reason) => format!("{} — {reason:?}", items.join(", ")),
            None => items.join(", "),
        }
    }

    /// The flags that grant every request.
    pub fn flags(&self) -> String {
        let flags: Vec<String> = self.items().iter().map(Item::flag).collect();
        flags.join(" ")
    }

    /// The manifest's record described for people (`inspect`, `check --audit`).
    pub fn describe_manifest(value: &Value) -> String {
        match Self::from_manifest(value) {
            Ok(r) if r.is_empty() => "none requested".into(),
            Ok(r) => format!("{} (grant with {})", r.summary(), r.flags()),
            Err(e) => format!("malformed, ignored ({e})"),
        }
    }

    /// For the manifest (an empty request is `{}`).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_else(|_| Value::Object(Default::default()))
    }

    /// The requests a manifest records. A built `.wasm` is untrusted input: a malformed
    /// record counts as no request (asking grants nothing, so nothing is lost but the prompt).
    pub fn from_manifest(value: &Value) -> Result<Self, String> {
        if value.is_null() {
            return Ok(Self::default());
        }
        Self::parse(value)
    }
}

fn check_value(kind: Kind, value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("is empty");
    }
    if value.chars().any(char::is_control) {
        return Err("has control characters");
    }
    match kind {
        Kind::Read | Kind::Write => {
            if value.len() > MAX_PATH_LEN {
                return Err("is too long");
            }
            if value.starts_with('~') {
                return Err(
                    "starts with ~: write a path relative to the working directory, or an absolute one",
                );
            }
        }
        Kind::Run => {
            if value.contains('/') {
                return Err("is a path: name the program (it is looked up on PATH)");
            }
            if value.len() > 64
                || !value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
            {
                return Err("is not a program name (letters, digits, . _ + -)");
            }
        }
        Kind::Env => {
            let mut chars = value.chars();
            let first_ok = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
            if !first_ok
                || value.len() > 128
                || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err("is not an environment variable name");
            }
        }
        Kind::Net => {
            if !crate::net::is_host_pattern(value) {
                return Err("is not a host (example.com, *.example.com, optional :port)");
            }
        }
        Kind::ModelKey => {
            if !is_provider_name(value) {
                return Err("is not a provider name (letters, digits, . _ -)");
            }
        }
    }
    Ok(())
}

/// A model provider's name as pi's models.json keys them (`openai`, `google-vertex`).
pub fn is_provider_name(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_are_checked_and_listed_in_order() {
        let r = Requests::parse(&json!({
            "modelKey": ["openai"], "net": ["api.github.com"], "run": ["git", "git"], "read": ["."], "reason": "git status cards"
        }))
        .unwrap();
        let items: Vec<String> = r.items().iter().map(Item::to_string).collect();
        assert_eq!(
            items,
            ["read .", "run git", "net api.github.com", "modelKey openai"]
        );
        assert!(r.flags().ends_with("--allow-model-key=openai"));
        assert!(Requests::parse(&json!({ "modelKey": ["open ai"] })).is_err());
        assert_eq!(r.items()[1].flag(), "--allow-run=git");
        assert_eq!(
            r.to_value(),
            json!({ "read": ["."], "run": ["git", "git"], "net": ["api.github.com"], "modelKey": ["openai"], "reason": "git status cards" })
        );
        assert_eq!(Requests::parse(&json!({})).unwrap().to_value(), json!({}));
    }

    #[test]
    fn bad_requests_say_what_is_wrong() {
        let cases = [
            (json!({ "exec": ["git"] }), "unknown field `exec`"),
            (json!({ "run": ["/bin/sh"] }), "is a path"),
            (json!({ "run": ["git; rm"] }), "not a program name"),
            (json!({ "env": ["A-B"] }), "not an environment variable"),
            (json!({ "net": ["http://x.com/"] }), "is not a host"),
            (json!({ "read": ["~/.ssh"] }), "starts with ~"),
            (json!({ "read": ["a\nb"] }), "control characters"),
            (json!({ "run": "git" }), "expected"),
            (json!({ "reason": "x".repeat(400) }), "at most 300"),
        ];
        for (value, expected) in cases {
            let err = Requests::parse(&value).unwrap_err();
            assert!(err.contains(expected), "{value}: {err}");
        }
        let many: Vec<String> = (0..40).map(|i| format!("d{i}")).collect();
        assert!(
            Requests::parse(&json!({ "read": many }))
                .unwrap_err()
                .contains("at most 32")
        );
    }

    #[test]
    fn a_single_file_declares_its_requests_in_one_comment_line() {
        let source = "import x from 'y';\n  // pichamber.capabilities: {\"run\": [\"git\"]}\nexport default function () {}\n";
        let r = Requests::from_inline(source).unwrap().unwrap();
        assert_eq!(r.run, ["git"]);
        assert_eq!(Requests::from_inline("// nothing here").unwrap(), None);
        let (line, err) =
            Requests::from_inline("\n// pichamber.capabilities: {\"run\": [\"a/b\"]}").unwrap_err();
        assert_eq!(line, 2);
        assert!(err.contains("is a path"), "{err}");
        let (line, err) =
            Requests::from_inline("// pichamber.capabilities: {}\n// pichamber.capabilities: {}")
                .unwrap_err();
        assert_eq!(line, 2);
        assert!(err.contains("second"), "{err}");
        let (_, err) = Requests::from_inline("// pichamber.capabilities: {run: 1").unwrap_err();
        assert!(err.contains("JSON object"), "{err}");
    }

    #[test]
    fn path_items_resolve_against_the_working_directory() {
        let cwd = Path::new("/work/project");
        assert_eq!(
            Item::new(Kind::Read, ".").path_in(cwd).unwrap(),
            Path::new("/work/project")
        );
        assert_eq!(
            Item::new(Kind::Write, "../../../../etc")
                .path_in(cwd)
                .unwrap(),
            Path::new("/etc")
        );
        assert_eq!(
            Item::new(Kind::Read, "/usr/share/dict")
                .path_in(cwd)
                .unwrap(),
            Path::new("/usr/share/dict")
        );
        assert_eq!(Item::new(Kind::Run, "git").path_in(cwd), None);
    }
}
