//! Prompt templates and skills, loaded and used the way pi 0.73.1 does (core/prompt-templates.js,
//! core/skills.js, core/resource-loader.js, agent-session.js):
//!
//! - a prompt template is a `.md` file named after the command it adds (`/name`), with optional
//!   YAML frontmatter (`description`, `argument-hint`); `/name args` becomes its body with `$1`,
//!   `$@`, `$ARGUMENTS`, `${@:N}`, `${@:N:L}` filled in;
//! - a skill is a `SKILL.md` (or a `.md` given directly, or at the top of a skills folder) with
//!   frontmatter `name` and `description`; it adds `/skill:name`, which becomes a `<skill>`
//!   block with the file's body, and it is listed in the system prompt for the model to read;
//! - they come from the `-e` packages (package.json `pi.prompts` / `pi.skills`, or the
//!   `prompts/` and `skills/` folders), from pi's own folders, and from the paths extensions
//!   return from `resources_discover`.
//!
//! Extensions name files by their guest paths (`/ext/...`, where the sandbox mounts their
//! package): those are mapped back into the extension's own package folder and nothing else.
//! Every file read for an extension or a package is checked, after following symlinks, to be
//! inside that folder: an extension cannot make the host read anything outside its package.

use std::path::{Component, Path, PathBuf};
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::{Map, Value, json};

use super::Session;
use super::events::SessionEvent;
use super::state::SessionShared;
use pichamber_artifact::Origin;

const MAX_NAME_LENGTH: usize = 64;
const MAX_DESCRIPTION_LENGTH: usize = 1024;

/// Where a resource came from, as pi records it (its `sourceInfo` without the path).
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub source: String,
    pub scope: String,
    pub origin: String,
    pub base_dir: Option<PathBuf>,
}

impl Metadata {
    /// An extension or package given on the command line (pi's `-e`).
    pub fn given() -> Self {
        Self {
            source: "cli".into(),
            scope: "temporary".into(),
            origin: "top-level".into(),
            base_dir: None,
        }
    }

    /// Found in pi's folders: the project's `.pi/` ("project") or the agent folder ("user").
    pub fn found(scope: &str) -> Self {
        Self {
            source: "auto".into(),
            scope: scope.into(),
            origin: "top-level".into(),
            base_dir: None,
        }
    }

    /// pi's `sourceInfo` of the resource at `path`.
    pub fn source_info(&self, path: &Path) -> Value {
        let mut info = json!({
            "path": path.to_string_lossy(),
            "source": self.source,
            "scope": self.scope,
            "origin": self.origin,
        });
        if let Some(dir) = &self.base_dir {
            info["baseDir"] = json!(dir.to_string_lossy());
        }
        info
    }
}

/// A file or folder to load prompt templates or skills from.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourcePath {
    pub path: PathBuf,
    pub meta: Metadata,
    /// The folder (canonical) every file read through this path must be inside, symlinks
    /// followed; `None` for the operator's own folders.
    pub confine: Option<PathBuf>,
}

/// A problem found while loading (pi's resource diagnostics).
#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    /// "warning" or "collision".
    pub kind: &'static str,
    pub message: String,
    pub path: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PromptTemplate {
    pub name: String,
    /// The frontmatter's description (any YAML value pi would keep), else the first line.
    pub description: Value,
    pub argument_hint: Option<Value>,
    pub content: String,
    pub file_path: PathBuf,
    pub source_info: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub file_path: PathBuf,
    pub base_dir: PathBuf,
    pub source_info: Value,
    pub disable_model_invocation: bool,
}

impl Skill {
    /// pi's skill object (as `systemPromptOptions.skills` shows it).
    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "description": self.description,
            "filePath": self.file_path.to_string_lossy(),
            "baseDir": self.base_dir.to_string_lossy(),
            "sourceInfo": self.source_info,
            "disableModelInvocation": self.disable_model_invocation,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Frontmatter

/// A markdown file split into its YAML frontmatter and body (pi's utils/frontmatter.js).
#[derive(Debug, Clone, PartialEq)]
pub struct Frontmatter {
    pub fields: Map<String, Value>,
    pub body: String,
}

/// Splits `content` as pi does: newlines normalised; frontmatter between a leading `---` and
/// the next line starting with `---`; the body after it trimmed (kept as is without one). An
/// invalid YAML block is an error.
pub fn parse_frontmatter(content: &str) -> Result<Frontmatter, String> {
    let normalized = content.replace("\r\n", "\n").replace('\r', "\n");
    let plain = |body: String| Frontmatter {
        fields: Map::new(),
        body,
    };
    if !normalized.starts_with("---") {
        return Ok(plain(normalized));
    }
    let Some(end) = normalized[3..].find("\n---").map(|i| i + 3) else {
        return Ok(plain(normalized));
    };
    let yaml = normalized.get(4..end).unwrap_or("");
    let body = normalized[end + 4..].trim().to_owned();
    if yaml.is_empty() {
        return Ok(plain(body));
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(yaml).map_err(|e| e.to_string())?;
    if docs.len() > 1 {
        return Err(
            "Source contains multiple documents; please use YAML.parseAllDocuments()".into(),
        );
    }
    let fields = match docs.into_iter().next().map(|d| yaml_to_json(&d)) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    Ok(Frontmatter { fields, body })
}

fn yaml_to_json(yaml: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match yaml {
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Yaml::Integer(n) => json!(n),
        Yaml::String(s) => json!(s),
        Yaml::Boolean(b) => json!(b),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::Hash(hash) => Value::Object(
            hash.iter()
                .map(|(k, v)| {
                    let key = match yaml_to_json(k) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

/// JavaScript truthiness of a JSON value.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(_) => true,
    }
}

/// JavaScript's `String(value)`.
fn js_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .map(|v| {
                if v.is_null() {
                    String::new()
                } else {
                    js_string(v)
                }
            })
            .collect::<Vec<_>>()
            .join(","),
        Value::Object(_) => "[object Object]".into(),
        other => other.to_string(),
    }
}

/// Length in UTF-16 code units, as JavaScript counts.
fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

// ---------------------------------------------------------------------------------------------
// Reading files, confined

fn is_inside(path: &Path, confine: Option<&Path>) -> bool {
    match confine {
        None => true,
        Some(root) => path.canonicalize().is_ok_and(|p| p.starts_with(root)),
    }
}

fn read_confined(path: &Path, confine: Option<&Path>) -> std::io::Result<String> {
    if !is_inside(path, confine) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "outside the extension's package",
        ));
    }
    std::fs::read_to_string(path)
}

/// A folder's entries sorted by name (Node's readdir order), with whether each is a file or a
/// folder after following symlinks; broken links and anything outside `confine` are left out.
fn entries(dir: &Path, confine: Option<&Path>) -> Vec<(String, PathBuf, bool, bool)> {
    if !is_inside(dir, confine) {
        return Vec::new();
    }
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = read
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let meta = std::fs::metadata(&path).ok()?;
            if !is_inside(&path, confine) {
                return None;
            }
            Some((
                e.file_name().to_string_lossy().into_owned(),
                path,
                meta.is_file(),
                meta.is_dir(),
            ))
        })
        .collect();
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out
}

// ---------------------------------------------------------------------------------------------
// Prompt templates

fn load_template(path: &Path, from: &ResourcePath) -> Option<PromptTemplate> {
    let text = read_confined(path, from.confine.as_deref()).ok()?;
    let Frontmatter { fields, body } = parse_frontmatter(&text).ok()?;
    let file_name = path.file_name()?.to_string_lossy();
    let name = file_name
        .strip_suffix(".md")
        .unwrap_or(&file_name)
        .to_owned();
    let description = if truthy(fields.get("description")) {
        fields["description"].clone()
    } else {
        match body.split('\n').find(|line| !line.trim().is_empty()) {
            Some(line) => {
                let units: Vec<u16> = line.encode_utf16().collect();
                if units.len() > 60 {
                    json!(format!("{}...", String::from_utf16_lossy(&units[..60])))
                } else {
                    json!(line)
                }
            }
            None => json!(""),
        }
    };
    let argument_hint =
        truthy(fields.get("argument-hint")).then(|| fields["argument-hint"].clone());
    Some(PromptTemplate {
        name,
        description,
        argument_hint,
        content: body,
        file_path: path.to_path_buf(),
        source_info: from.meta.source_info(path),
    })
}

/// Templates from `paths` in order (a folder's `.md` files, not recursing); the first of a
/// name wins and later ones are collisions.
pub fn load_prompt_templates(paths: &[ResourcePath]) -> (Vec<PromptTemplate>, Vec<Diagnostic>) {
    let mut loaded = Vec::new();
    for from in paths {
        let confine = from.confine.as_deref();
        if from.path.is_dir() {
            for (name, path, is_file, _) in entries(&from.path, confine) {
                if is_file && name.ends_with(".md") {
                    loaded.extend(load_template(&path, from));
                }
            }
        } else if from.path.is_file() && from.path.to_string_lossy().ends_with(".md") {
            loaded.extend(load_template(&from.path, from));
        }
    }
    let mut templates: Vec<PromptTemplate> = Vec::new();
    let mut diagnostics = Vec::new();
    for template in loaded {
        if templates.iter().any(|t| t.name == template.name) {
            diagnostics.push(Diagnostic {
                kind: "collision",
                message: format!("name \"/{}\" collision", template.name),
                path: template.file_path,
            });
        } else {
            templates.push(template);
        }
    }
    (templates, diagnostics)
}

// ---------------------------------------------------------------------------------------------
// Skills

fn warning(message: impl Into<String>, path: &Path) -> Diagnostic {
    Diagnostic {
        kind: "warning",
        message: message.into(),
        path: path.to_path_buf(),
    }
}

/// pi's Agent Skills name rules. `Err` is the TypeError pi's check runs into for a name that
/// is not a string.
fn validate_name(name: &Value, parent: &str) -> (Vec<String>, Option<String>) {
    let mut errors = Vec::new();
    if name.as_str() != Some(parent) {
        errors.push(format!(
            "name \"{}\" does not match parent directory \"{parent}\"",
            js_string(name)
        ));
    }
    let Some(text) = name.as_str() else {
        if !js_string(name)
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            || js_string(name).is_empty()
        {
            errors.push(
                "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
                    .into(),
            );
        }
        return (errors, Some("name.startsWith is not a function".into()));
    };
    let length = js_len(text);
    if length > MAX_NAME_LENGTH {
        errors.push(format!(
            "name exceeds {MAX_NAME_LENGTH} characters ({length})"
        ));
    }
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors.push(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)".into(),
        );
    }
    if text.starts_with('-') || text.ends_with('-') {
        errors.push("name must not start or end with a hyphen".into());
    }
    if text.contains("--") {
        errors.push("name must not contain consecutive hyphens".into());
    }
    (errors, None)
}

fn load_skill(path: &Path, from: &ResourcePath) -> (Option<Skill>, Vec<Diagnostic>) {
    let mut diagnostics = Vec::new();
    let fields = match read_confined(path, from.confine.as_deref())
        .map_err(|e| e.to_string())
        .and_then(|text| parse_frontmatter(&text))
    {
        Ok(f) => f.fields,
        Err(message) => {
            diagnostics.push(warning(message, path));
            return (None, diagnostics);
        }
    };
    let skill_dir = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let parent = skill_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let description = fields.get("description");
    match description {
        Some(d) if truthy(Some(d)) => match d.as_str() {
            Some(text) if text.trim().is_empty() => {
                diagnostics.push(warning("description is required", path));
            }
            Some(text) if js_len(text) > MAX_DESCRIPTION_LENGTH => {
                diagnostics.push(warning(
                    format!(
                        "description exceeds {MAX_DESCRIPTION_LENGTH} characters ({})",
                        js_len(text)
                    ),
                    path,
                ));
            }
            Some(_) => {}
            None => {
                diagnostics.push(warning("description.trim is not a function", path));
                return (None, diagnostics);
            }
        },
        _ => diagnostics.push(warning("description is required", path)),
    }
    let name = if truthy(fields.get("name")) {
        fields["name"].clone()
    } else {
        json!(parent)
    };
    let (errors, thrown) = validate_name(&name, &parent);
    diagnostics.extend(errors.into_iter().map(|e| warning(e, path)));
    if let Some(message) = thrown {
        diagnostics.push(warning(message, path));
        return (None, diagnostics);
    }
    let Some(description) = description
        .and_then(Value::as_str)
        .filter(|d| !d.trim().is_empty())
    else {
        return (None, diagnostics);
    };
    let skill = Skill {
        name: name.as_str().unwrap_or_default().to_owned(),
        description: description.to_owned(),
        file_path: path.to_path_buf(),
        base_dir: skill_dir,
        source_info: from.meta.source_info(path),
        disable_model_invocation: fields.get("disable-model-invocation") == Some(&json!(true)),
    };
    (Some(skill), diagnostics)
}

/// pi's walk of a skills folder: a folder with a SKILL.md is one skill (not looked into
/// further); otherwise its subfolders are walked, and at the top its `.md` files are skills too.
fn skills_in_dir(
    dir: &Path,
    from: &ResourcePath,
    top: bool,
    skills: &mut Vec<Skill>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let list = entries(dir, from.confine.as_deref());
    if let Some((_, path, _, _)) = list
        .iter()
        .find(|(name, _, is_file, _)| name == "SKILL.md" && *is_file)
    {
        let (skill, found) = load_skill(path, from);
        skills.extend(skill);
        diagnostics.extend(found);
        return;
    }
    for (name, path, is_file, is_dir) in &list {
        if name.starts_with('.') || name == "node_modules" {
            continue;
        }
        if *is_dir {
            skills_in_dir(path, from, false, skills, diagnostics);
        } else if *is_file && top && name.ends_with(".md") {
            let (skill, found) = load_skill(path, from);
            skills.extend(skill);
            diagnostics.extend(found);
        }
    }
}

/// Skills from `paths` in order; the first of a name wins (later ones are collisions, listed
/// after the other diagnostics), and the same file reached twice counts once.
pub fn load_skills(paths: &[ResourcePath]) -> (Vec<Skill>, Vec<Diagnostic>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut real_paths: Vec<PathBuf> = Vec::new();
    let mut diagnostics = Vec::new();
    let mut collisions = Vec::new();
    for from in paths {
        let mut found = Vec::new();
        let path = &from.path;
        if !path.exists() {
            diagnostics.push(warning("skill path does not exist", path));
            continue;
        }
        if path.is_dir() {
            skills_in_dir(path, from, true, &mut found, &mut diagnostics);
        } else if path.is_file() && path.to_string_lossy().ends_with(".md") {
            let (skill, more) = load_skill(path, from);
            diagnostics.extend(more);
            found.extend(skill);
        } else {
            diagnostics.push(warning("skill path is not a markdown file", path));
        }
        for skill in found {
            let real = skill
                .file_path
                .canonicalize()
                .unwrap_or_else(|_| skill.file_path.clone());
            if real_paths.contains(&real) {
                continue;
            }
            if let Some(winner) = skills.iter().find(|s| s.name == skill.name) {
                collisions.push(Diagnostic {
                    kind: "collision",
                    message: format!("name \"{}\" collision", skill.name),
                    path: skill.file_path.clone(),
                });
                tracing::debug!(
                    "skill {} at {} loses to {}",
                    skill.name,
                    skill.file_path.display(),
                    winner.file_path.display()
                );
            } else {
                real_paths.push(real);
                skills.push(skill);
            }
        }
    }
    diagnostics.extend(collisions);
    (skills, diagnostics)
}

fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

/// The system prompt's skills section (empty when no skill is visible to the model).
pub fn format_skills_for_prompt(skills: &[Skill]) -> String {
    format_skills(
        skills,
        "Use the read tool to load a skill's file when the task matches its description.",
        "When a skill file references a relative path, resolve it against the skill directory (parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.",
    )
}

/// pi 1.6.0's wording, which names the tool that reads files (`read`, `bash`, or none when
/// the reader is hidden).
pub fn format_skills_for_prompt_1_6(skills: &[Skill], reader: &str) -> String {
    let load = match reader {
        "read" => "Use the read tool to load a skill's file when the task matches its description.",
        "bash" => "Use bash to load a skill's file when the task matches its description.",
        _ => "Load a skill's file when the task matches its description.",
    };
    format_skills(
        skills,
        load,
        "Resolve relative paths against the skill's directory (parent of SKILL.md). Use absolute paths in tool calls.",
    )
}

fn format_skills(skills: &[Skill], load: &str, resolve: &str) -> String {
    let visible: Vec<&Skill> = skills
        .iter()
        .filter(|s| !s.disable_model_invocation)
        .collect();
    if visible.is_empty() {
        return String::new();
    }
    let mut lines = vec![
        "\n\nThe following skills provide specialized instructions for specific tasks.".to_owned(),
        load.into(),
        resolve.into(),
        String::new(),
        "<available_skills>".into(),
    ];
    for skill in visible {
        lines.push("  <skill>".into());
        lines.push(format!("    <name>{}</name>", escape_xml(&skill.name)));
        lines.push(format!(
            "    <description>{}</description>",
            escape_xml(&skill.description)
        ));
        lines.push(format!(
            "    <location>{}</location>",
            escape_xml(&skill.file_path.to_string_lossy())
        ));
        lines.push("  </skill>".into());
    }
    lines.push("</available_skills>".into());
    lines.join("\n")
}

// ---------------------------------------------------------------------------------------------
// Expansion

/// pi's argument split: spaces and tabs separate, single or double quotes group.
pub fn parse_command_args(text: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut quote: Option<char> = None;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ' ' || c == '\t' => {
                if !current.is_empty() {
                    args.push(std::mem::take(&mut current));
                }
            }
            None => current.push(c),
        }
    }
    if !current.is_empty() {
        args.push(current);
    }
    args
}

/// What JavaScript's `String.prototype.replace` makes of a replacement string (`$$`, `$&`,
/// `` $` ``, `$'`; the pattern has no groups, so `$1` stays as it is).
fn js_replacement(replacement: &str, haystack: &str, start: usize, end: usize) -> String {
    let mut out = String::new();
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('$') => {
                chars.next();
                out.push('$');
            }
            Some('&') => {
                chars.next();
                out.push_str(&haystack[start..end]);
            }
            Some('`') => {
                chars.next();
                out.push_str(&haystack[..start]);
            }
            Some('\'') => {
                chars.next();
                out.push_str(&haystack[end..]);
            }
            _ => out.push('$'),
        }
    }
    out
}

fn replace_all_js(haystack: &str, pattern: &Regex, replacement: &str) -> String {
    pattern
        .replace_all(haystack, |caps: &Captures| {
            let m = caps.get(0).unwrap();
            js_replacement(replacement, haystack, m.start(), m.end())
        })
        .into_owned()
}

static POSITIONAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\$(\d+)").unwrap());
static SLICE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\$\{@:(\d+)(?::(\d+))?\}").unwrap());
static ARGUMENTS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\$ARGUMENTS").unwrap());
static ALL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\$@").unwrap());

/// JavaScript's `parseInt` of a digit string, saturating.
fn parse_digits(digits: &str) -> usize {
    digits.parse::<usize>().unwrap_or(usize::MAX)
}

/// Fills a template's placeholders, in pi's order: `$1`…, then `${@:N}` / `${@:N:L}`, then
/// `$ARGUMENTS`, then `$@`. What an argument brings in is not substituted again within the
/// same pass.
pub fn substitute_args(content: &str, args: &[String]) -> String {
    let result = POSITIONAL.replace_all(content, |caps: &Captures| {
        let n = parse_digits(&caps[1]);
        n.checked_sub(1)
            .and_then(|i| args.get(i))
            .cloned()
            .unwrap_or_default()
    });
    let result = SLICE.replace_all(&result, |caps: &Captures| {
        let start = parse_digits(&caps[1]).saturating_sub(1).min(args.len());
        let end = match caps.get(2) {
            Some(length) => start.saturating_add(parse_digits(length.as_str())),
            None => args.len(),
        }
        .min(args.len());
        args[start..end].join(" ")
    });
    let all = args.join(" ");
    let result = replace_all_js(&result, &ARGUMENTS, &all);
    replace_all_js(&result, &ALL, &all)
}

/// `/name args` → the template's content with the arguments filled in; other text as it is.
pub fn expand_prompt_template(text: &str, templates: &[PromptTemplate]) -> String {
    let Some(rest) = text.strip_prefix('/') else {
        return text.to_owned();
    };
    let (name, args) = rest.split_once(' ').unwrap_or((rest, ""));
    match templates.iter().find(|t| t.name == name) {
        Some(template) => substitute_args(&template.content, &parse_command_args(args)),
        None => text.to_owned(),
    }
}

/// A skill's file could not be read while expanding `/skill:name`.
#[derive(Debug, Clone, PartialEq)]
pub struct SkillError {
    pub path: PathBuf,
    pub message: String,
}

// ---------------------------------------------------------------------------------------------
// A session's resources

/// The prompt templates and skills a session has: from the packages and folders it started
/// with, and from what its extensions discovered.
#[derive(Debug, Default)]
pub struct Resources {
    base_prompts: Vec<ResourcePath>,
    base_skills: Vec<ResourcePath>,
    extension_prompts: Vec<ResourcePath>,
    extension_skills: Vec<ResourcePath>,
    pub prompts: Vec<PromptTemplate>,
    pub skills: Vec<Skill>,
    pub diagnostics: Vec<Diagnostic>,
}

fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

/// `paths` after `before`, without any (by canonical path) already there.
fn merge(before: &[ResourcePath], paths: Vec<ResourcePath>) -> Vec<ResourcePath> {
    let mut seen: Vec<PathBuf> = before.iter().map(|p| canonical(&p.path)).collect();
    let mut out = Vec::new();
    for p in paths {
        let key = canonical(&p.path);
        if !seen.contains(&key) {
            seen.push(key);
            out.push(p);
        }
    }
    out
}

impl Resources {
    /// The packages' and folders' templates and skills (extension ones are dropped).
    pub fn set_base(&mut self, prompts: Vec<ResourcePath>, skills: Vec<ResourcePath>) {
        self.base_prompts = merge(&[], prompts);
        self.base_skills = merge(&[], skills);
        self.extension_prompts.clear();
        self.extension_skills.clear();
        self.refresh();
    }

    /// Forgets what extensions discovered (before they are asked again).
    pub fn reset_extensions(&mut self) {
        if self.extension_prompts.is_empty() && self.extension_skills.is_empty() {
            return;
        }
        self.extension_prompts.clear();
        self.extension_skills.clear();
        self.refresh();
    }

    /// Adds paths extensions discovered, after those already known.
    pub fn extend(&mut self, prompts: Vec<ResourcePath>, skills: Vec<ResourcePath>) {
        let known: Vec<ResourcePath> = self
            .base_prompts
            .iter()
            .chain(&self.extension_prompts)
            .cloned()
            .collect();
        self.extension_prompts.extend(merge(&known, prompts));
        let known: Vec<ResourcePath> = self
            .base_skills
            .iter()
            .chain(&self.extension_skills)
            .cloned()
            .collect();
        self.extension_skills.extend(merge(&known, skills));
        self.refresh();
    }

    fn refresh(&mut self) {
        let prompt_paths: Vec<ResourcePath> = self
            .base_prompts
            .iter()
            .chain(&self.extension_prompts)
            .cloned()
            .collect();
        let skill_paths: Vec<ResourcePath> = self
            .base_skills
            .iter()
            .chain(&self.extension_skills)
            .cloned()
            .collect();
        let (prompts, mut diagnostics) = load_prompt_templates(&prompt_paths);
        let (skills, skill_diagnostics) = load_skills(&skill_paths);
        diagnostics.extend(skill_diagnostics);
        for d in &diagnostics {
            tracing::info!("{} ({}): {}", d.path.display(), d.kind, d.message);
        }
        self.prompts = prompts;
        self.skills = skills;
        self.diagnostics = diagnostics;
    }

    /// `get_commands` entries after the extensions' commands: templates, then skills.
    pub fn commands_json(&self) -> Vec<Value> {
        let templates = self.prompts.iter().map(|t| {
            json!({
                "name": t.name, "description": t.description, "source": "prompt",
                "sourceInfo": t.source_info,
            })
        });
        let skills = self.skills.iter().map(|s| {
            json!({
                "name": format!("skill:{}", s.name), "description": s.description,
                "source": "skill", "sourceInfo": s.source_info,
            })
        });
        templates.chain(skills).collect()
    }

    /// `/skill:name args` → the skill's `<skill>` block followed by the arguments; other
    /// text (an unknown skill too) as it is.
    pub fn expand_skill_command(&self, text: &str) -> Result<String, SkillError> {
        let Some(rest) = text.strip_prefix("/skill:") else {
            return Ok(text.to_owned());
        };
        let (name, args) = match rest.split_once(' ') {
            Some((name, args)) => (name, args.trim()),
            None => (rest, ""),
        };
        let Some(skill) = self.skills.iter().find(|s| s.name == name) else {
            return Ok(text.to_owned());
        };
        let confine = self.confine_of(&skill.file_path);
        let body = read_confined(&skill.file_path, confine.as_deref())
            .map_err(|e| e.to_string())
            .and_then(|content| parse_frontmatter(&content))
            .map_err(|message| SkillError {
                path: skill.file_path.clone(),
                message,
            })?
            .body;
        let block = format!(
            "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
            skill.name,
            skill.file_path.display(),
            skill.base_dir.display(),
            body.trim()
        );
        Ok(if args.is_empty() {
            block
        } else {
            format!("{block}\n\n{args}")
        })
    }

    /// The folder a skill's file was confined to when it loaded.
    fn confine_of(&self, file: &Path) -> Option<PathBuf> {
        self.base_skills
            .iter()
            .chain(&self.extension_skills)
            .find(|p| file.starts_with(&p.path))
            .and_then(|p| p.confine.clone())
    }

    /// A user's text as pi sends it to the model: a skill command expanded, then a template.
    pub fn expand(&self, text: &str) -> (String, Option<SkillError>) {
        let (text, error) = match self.expand_skill_command(text) {
            Ok(t) => (t, None),
            Err(e) => (text.to_owned(), Some(e)),
        };
        (expand_prompt_template(&text, &self.prompts), error)
    }
}

// ---------------------------------------------------------------------------------------------
// Guest paths

/// The host file an extension means by `guest` (`/ext/...`, its package as the sandbox shows
/// it), inside `root`; `None` for anything else (another path, a climb out with `..`, the
/// opaque folder of files bundled from outside the package).
pub fn host_path_for_guest(guest: &str, root: &Path) -> Option<PathBuf> {
    let rest = guest.strip_prefix("/ext")?;
    if !(rest.is_empty() || rest.starts_with('/')) {
        return None;
    }
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in Path::new(rest).components() {
        match component {
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::Normal(part) => parts.push(part),
            Component::Prefix(_) => return None,
        }
    }
    if parts.first().is_some_and(|p| *p == "_external") {
        return None;
    }
    Some(
        parts
            .iter()
            .fold(root.to_path_buf(), |p, part| p.join(part)),
    )
}

/// How pi labels what an extension discovered: `extension:<file or folder name>`, based in the
/// folder the extension was loaded from.
fn extension_metadata(origin: Option<&Origin>, name: &str) -> Metadata {
    let (label, base_dir) = match origin {
        Some(origin) => {
            let file = origin
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let label = file
                .strip_suffix(".ts")
                .or_else(|| file.strip_suffix(".js"))
                .unwrap_or(&file)
                .to_owned();
            (label, origin.path.parent().map(Path::to_path_buf))
        }
        None => (name.to_owned(), None),
    };
    Metadata {
        source: format!("extension:{label}"),
        scope: "temporary".into(),
        origin: "top-level".into(),
        base_dir,
    }
}

impl SessionShared {
    /// A user's text with `/skill:name` and `/template` expanded as pi does before it reaches
    /// the model; a skill file that cannot be read is reported and the text left as it is.
    pub fn expand_user_text(&self, text: &str) -> String {
        if !text.starts_with('/') {
            return text.to_owned();
        }
        let (expanded, error) = self.state.lock().unwrap().resources.expand(text);
        if let Some(e) = error {
            self.emit(SessionEvent::ExtensionError {
                extension: e.path.to_string_lossy().into_owned(),
                event: "skill_expansion".into(),
                error: e.message,
                stack: None,
            });
        }
        expanded
    }
}

impl Session {
    /// The templates and skills the session starts with (the `-e` packages' and pi's
    /// folders'), in pi's order.
    pub fn set_resources(&mut self, prompts: Vec<ResourcePath>, skills: Vec<ResourcePath>) {
        self.shared
            .state
            .lock()
            .unwrap()
            .resources
            .set_base(prompts, skills);
    }

    /// Takes in what `resources_discover` returned: each extension's paths, mapped from its
    /// guest view into its own package. Paths it could not mean there are left out (a
    /// warning in the log).
    pub(super) fn add_discovered_resources(&mut self, discovered: &Value) {
        let mut found: [Vec<ResourcePath>; 2] = Default::default();
        for (slot, key) in ["promptPaths", "skillPaths"].iter().enumerate() {
            for entry in discovered[key].as_array().into_iter().flatten() {
                let index = entry["extension"].as_u64().unwrap_or(u64::MAX) as usize;
                let Some(name) = self.extensions.get(index).map(|e| e.name.clone()) else {
                    continue;
                };
                let origin = self.origins.get(index).cloned().flatten();
                let guest = match &entry["path"] {
                    Value::String(s) => s.clone(),
                    _ => continue,
                };
                let host = origin.as_ref().and_then(|o| {
                    let path = host_path_for_guest(&guest, &o.root)?;
                    Some((path, canonical(&o.root)))
                });
                let Some((path, root)) = host else {
                    tracing::warn!(
                        "{name}: resources_discover path {guest:?} is not in the extension's package; left out"
                    );
                    continue;
                };
                found[slot].push(ResourcePath {
                    path,
                    meta: extension_metadata(origin.as_ref(), &name),
                    confine: Some(root),
                });
            }
        }
        let [prompts, skills] = found;
        if prompts.is_empty() && skills.is_empty() {
            return;
        }
        self.shared
            .state
            .lock()
            .unwrap()
            .resources
            .extend(prompts, skills);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn local(path: &Path, confine: Option<&Path>) -> ResourcePath {
        ResourcePath {
            path: path.to_path_buf(),
            meta: Metadata {
                source: "local".into(),
                scope: "temporary".into(),
                origin: "top-level".into(),
                base_dir: None,
            },
            confine: confine.map(|c| c.canonicalize().unwrap()),
        }
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn frontmatter_is_split_as_pi_splits_it() {
        let f = parse_frontmatter("---\r\ndescription: Hi there\nn: 3\n---\n\n  Body\n\n").unwrap();
        assert_eq!(f.fields["description"], json!("Hi there"));
        assert_eq!(f.fields["n"], json!(3));
        assert_eq!(f.body, "Body");
        // Without frontmatter the body is kept untrimmed; an unterminated block is body too.
        assert_eq!(parse_frontmatter("  text\n").unwrap().body, "  text\n");
        assert_eq!(
            parse_frontmatter("---\nx: 1\n").unwrap().body,
            "---\nx: 1\n"
        );
        assert!(parse_frontmatter("---\nx: [1\n---\nbody").is_err());
    }

    #[test]
    fn arguments_split_on_blanks_and_group_in_quotes() {
        assert_eq!(
            parse_command_args("a  \"b c\" 'd \"e' f\tg"),
            args(&["a", "b c", "d \"e", "f", "g"])
        );
        assert_eq!(parse_command_args("  "), Vec::<String>::new());
        assert_eq!(parse_command_args("x\"y z\"w"), args(&["xy zw"]));
    }

    #[test]
    fn placeholders_are_filled_in_pis_order() {
        let a = args(&["one", "two", "three"]);
        assert_eq!(substitute_args("$1-$2-$4-$0", &a), "one-two--");
        assert_eq!(
            substitute_args("${@:2}|${@:1:2}|${@:0}|${@:9}", &a),
            "two three|one two|one two three|"
        );
        assert_eq!(
            substitute_args("$@ / $ARGUMENTS", &a),
            "one two three / one two three"
        );
        // What an argument brings in is not substituted again.
        assert_eq!(substitute_args("$1 $2", &args(&["$2", "x"])), "$2 x");
        // ...except as JavaScript reads a replacement string for $@ / $ARGUMENTS.
        assert_eq!(substitute_args("[$@]", &args(&["a$$b", "$&"])), "[a$b $@]");
    }

    #[test]
    fn templates_load_with_descriptions_and_collide_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            &root.join("a/greet.md"),
            "---\ndescription: Say hi\nargument-hint: <who>\n---\nHi $1!",
        );
        write(
            &root.join("a/long.md"),
            &format!("\n\n{}\nmore", "x".repeat(70)),
        );
        write(&root.join("a/notes.txt"), "not a template");
        write(
            &root.join("a/sub/deep.md"),
            "not loaded: folders are not walked",
        );
        write(&root.join("b/greet.md"), "second");
        let (templates, diagnostics) = load_prompt_templates(&[
            local(&root.join("a"), None),
            local(&root.join("b/greet.md"), None),
        ]);
        let names: Vec<&str> = templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["greet", "long"]);
        assert_eq!(templates[0].description, json!("Say hi"));
        assert_eq!(templates[0].argument_hint, Some(json!("<who>")));
        assert_eq!(
            templates[1].description,
            json!(format!("{}...", "x".repeat(60)))
        );
        assert_eq!(diagnostics.len(), 1);
        assert_eq!(diagnostics[0].message, "name \"/greet\" collision");
        assert_eq!(
            expand_prompt_template("/greet Bob and", &templates),
            "Hi Bob!"
        );
        assert_eq!(expand_prompt_template("/other x", &templates), "/other x");
        assert_eq!(expand_prompt_template("greet", &templates), "greet");
    }

    #[test]
    fn skills_follow_pis_rules_and_diagnostics() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        write(
            &root.join("good/SKILL.md"),
            "---\nname: good\ndescription: Does good things\n---\n# Good",
        );
        write(
            &root.join("good/nested/SKILL.md"),
            "---\ndescription: hidden below a skill\n---\n",
        );
        write(
            &root.join("Bad_Name/SKILL.md"),
            "---\ndescription: odd name\n---\n",
        );
        write(&root.join("nodesc/SKILL.md"), "---\nname: nodesc\n---\n");
        write(
            &root.join("top.md"),
            "---\ndescription: a top-level file\ndisable-model-invocation: true\n---\n",
        );
        write(
            &root.join("node_modules/x/SKILL.md"),
            "---\ndescription: dependency\n---\n",
        );
        write(
            &root.join(".hidden/SKILL.md"),
            "---\ndescription: hidden\n---\n",
        );
        let (skills, diagnostics) = load_skills(&[
            local(&root, None),
            local(&dir.path().join("missing"), None),
            local(&root.join("good/SKILL.md"), None),
        ]);
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["Bad_Name", "good", "skills"]);
        assert!(skills[2].disable_model_invocation);
        let messages: Vec<String> = diagnostics.iter().map(|d| d.message.clone()).collect();
        assert_eq!(
            messages,
            [
                "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)",
                "description is required",
                "skill path does not exist",
            ]
        );
        // Only visible skills reach the system prompt, escaped.
        let section = format_skills_for_prompt(&skills);
        assert!(
            section.contains("<name>good</name>\n    <description>Does good things</description>")
        );
        assert!(!section.contains("top.md"));
        assert_eq!(format_skills_for_prompt(&[]), "");
    }

    #[test]
    fn skill_commands_expand_into_a_skill_block() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("demo/SKILL.md");
        write(
            &file,
            "---\nname: demo\ndescription: A demo\n---\n\n# Demo\n\nUse it.\n",
        );
        let mut resources = Resources::default();
        resources.set_base(Vec::new(), vec![local(&file, None)]);
        let block = format!(
            "<skill name=\"demo\" location=\"{}\">\nReferences are relative to {}.\n\n# Demo\n\nUse it.\n</skill>",
            file.display(),
            file.parent().unwrap().display()
        );
        assert_eq!(
            resources.expand_skill_command("/skill:demo").unwrap(),
            block
        );
        assert_eq!(
            resources
                .expand_skill_command("/skill:demo   do this  ")
                .unwrap(),
            format!("{block}\n\ndo this")
        );
        assert_eq!(
            resources.expand_skill_command("/skill:nope x").unwrap(),
            "/skill:nope x"
        );
        std::fs::remove_file(&file).unwrap();
        let error = resources.expand_skill_command("/skill:demo").unwrap_err();
        assert_eq!(error.path, file);
        let commands = resources.commands_json();
        assert_eq!(commands[0]["name"], "skill:demo");
        assert_eq!(commands[0]["source"], "skill");
    }

    #[test]
    fn guest_paths_map_into_the_package_only() {
        let root = Path::new("/pkg/root");
        assert_eq!(
            host_path_for_guest("/ext/SKILL.md", root),
            Some(root.join("SKILL.md"))
        );
        assert_eq!(
            host_path_for_guest("/ext/a/../b/./c.md", root),
            Some(root.join("b/c.md"))
        );
        assert_eq!(host_path_for_guest("/ext", root), Some(root.to_path_buf()));
        assert_eq!(host_path_for_guest("/ext/../etc/passwd", root), None);
        assert_eq!(host_path_for_guest("/ext/a/../../x", root), None);
        assert_eq!(host_path_for_guest("/extra/x.md", root), None);
        assert_eq!(host_path_for_guest("/etc/passwd", root), None);
        assert_eq!(host_path_for_guest("prompts/x.md", root), None);
        assert_eq!(host_path_for_guest("/ext/_external/0/x.md", root), None);
    }

    #[cfg(unix)]
    #[test]
    fn a_symlink_out_of_the_package_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("package");
        let outside = dir.path().join("secret");
        write(
            &outside.join("leak.md"),
            "---\ndescription: secret\n---\nsecret text",
        );
        write(
            &outside.join("SKILL.md"),
            "---\nname: secret\ndescription: secret\n---\n",
        );
        write(&package.join("prompts/ok.md"), "fine");
        std::os::unix::fs::symlink(outside.join("leak.md"), package.join("prompts/leak.md"))
            .unwrap();
        std::os::unix::fs::symlink(&outside, package.join("skills")).unwrap();
        let (templates, _) =
            load_prompt_templates(&[local(&package.join("prompts"), Some(&package))]);
        assert_eq!(
            templates
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>(),
            ["ok"]
        );
        let (skills, _) = load_skills(&[local(&package.join("skills"), Some(&package))]);
        assert!(skills.is_empty());
        let (skills, _) = load_skills(&[local(&package.join("skills/SKILL.md"), Some(&package))]);
        assert!(skills.is_empty());
        // Unconfined (the operator's own folders) the same links are followed.
        let (skills, _) = load_skills(&[local(&package.join("skills"), None)]);
        assert_eq!(skills.len(), 1);
    }
}
