//! The base system prompt, built the way pi builds its own (core/system-prompt.js): a tools
//! list from the active tools' one-line snippets, guidelines collected from the tools, project
//! context files, the working directory. pichamber has no pi documentation to point at, so
//! that part is left out; extensions see the result in `before_agent_start.systemPrompt` and
//! may replace it.
//!
//! pi 0.73.1 builds one string ending with the date and working directory ([`build`]). pi
//! 1.6.0 builds named sections ([`sections`]): the preamble as it is, every other section
//! wrapped in `<name>` tags, rendered by joining them with blank lines ([`render`]); the
//! transcript carries them in system messages, patched by name when they change.

use serde_json::{Value, json};

/// What the prompt is built from (also handed to extensions as `systemPromptOptions`).
#[derive(Debug, Clone, Default)]
pub struct SystemPromptOptions {
    /// Replaces the built-in opening (`--system-prompt`).
    pub custom_prompt: Option<String>,
    /// Appended after the opening (`--append-system-prompt`).
    pub append: Option<String>,
    pub cwd: String,
    /// Active tool names, in order.
    pub selected_tools: Vec<String>,
    /// One-line description per tool; a tool is listed only when it has one.
    pub tool_snippets: Vec<(String, String)>,
    pub guidelines: Vec<String>,
    /// (path, content) of AGENTS.md-style context files.
    pub context_files: Vec<(String, String)>,
    /// The session's skills, listed for the model when it has the read tool.
    pub skills: Vec<super::resources::Skill>,
    /// pi 1.6.0: each active tool's guidelines, by tool (what `guidelines` flattens).
    pub tool_guidelines: Vec<(String, Vec<String>)>,
    /// pi 1.6.0: rules an extension added for this run (`promptGuidelines`).
    pub extra_guidelines: Vec<String>,
    /// pi 1.6.0: sections an extension added for this run, after pi's own.
    pub sections: Vec<(String, String)>,
}

/// The section names pi 1.6.0 accepts from extensions (and `preamble` is pi's).
fn is_section_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && name != "preamble"
}

impl SystemPromptOptions {
    /// What extensions see (`before_agent_start.systemPromptOptions`), in `pi`'s shape: pi
    /// 1.6.0's has every collection, so handlers can edit them in place.
    pub fn to_json_for(&self, pi: pichamber_pi::PiVersion) -> Value {
        if !pi.is_1_6() {
            return self.to_json();
        }
        let mut out = json!({});
        if let Some(custom) = &self.custom_prompt {
            out["customPrompt"] = json!(custom);
        }
        out["selectedTools"] = json!(self.selected_tools);
        out["hiddenTools"] = json!([]);
        out["toolSnippets"] = Value::Object(
            self.tool_snippets
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect(),
        );
        out["toolGuidelines"] = Value::Object(
            self.tool_guidelines
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect(),
        );
        out["promptGuidelines"] = json!(self.extra_guidelines);
        out["appendSystemPrompt"] = json!(self.append.clone().unwrap_or_default());
        out["sections"] = Value::Object(
            self.sections
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect(),
        );
        out["cwd"] = json!(self.cwd);
        out["contextFiles"] = self.to_json()["contextFiles"].take();
        out["skills"] = self.to_json()["skills"].take();
        out
    }

    /// pi 1.6.0: the options as `before_agent_start` handlers left them (`edited`, their
    /// `systemPromptOptions`): added sections and rules, the appended text and the custom
    /// prompt. A section name pi would refuse is an error, as pi's is. The tool selection is
    /// the caller's (it changes the active tools).
    pub fn with_edits(&self, edited: &Value) -> Result<SystemPromptOptions, String> {
        let mut out = self.clone();
        if let Some(sections) = edited["sections"].as_object() {
            out.sections.clear();
            for (name, text) in sections {
                if !is_section_name(name) {
                    return Err(format!("Invalid system prompt section name: {name}"));
                }
                if let Some(text) = text.as_str() {
                    out.sections.push((name.clone(), text.to_owned()));
                }
            }
        }
        if let Some(rules) = edited["promptGuidelines"].as_array() {
            out.extra_guidelines = rules
                .iter()
                .filter_map(|r| r.as_str().map(str::to_owned))
                .collect();
        }
        if let Some(append) = edited["appendSystemPrompt"].as_str() {
            out.append = Some(append.to_owned()).filter(|a| !a.is_empty());
        }
        if let Some(custom) = edited.get("customPrompt") {
            out.custom_prompt = custom.as_str().map(str::to_owned);
        }
        Ok(out)
    }

    pub fn to_json(&self) -> Value {
        // Unset options are left out, as pi leaves them undefined.
        let mut out = json!({
            "cwd": self.cwd,
            "skills": self.skills.iter().map(super::resources::Skill::to_json).collect::<Vec<_>>(),
            "selectedTools": self.selected_tools,
            "toolSnippets": self.tool_snippets.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<String, Value>>(),
            "promptGuidelines": self.guidelines,
            "contextFiles": self.context_files.iter().map(|(p, c)| json!({ "path": p, "content": c })).collect::<Vec<_>>(),
        });
        if let Some(custom) = &self.custom_prompt {
            out["customPrompt"] = json!(custom);
        }
        if let Some(append) = &self.append {
            out["appendSystemPrompt"] = json!(append);
        }
        out
    }
}

fn today() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now[..10].to_owned()
}

pub fn build(options: &SystemPromptOptions) -> String {
    let mut prompt = match &options.custom_prompt {
        Some(custom) => custom.clone(),
        None => default_opening(options),
    };
    if let Some(append) = options.append.as_deref().filter(|a| !a.is_empty()) {
        prompt.push_str("\n\n");
        prompt.push_str(append);
    }
    if !options.context_files.is_empty() {
        prompt.push_str("\n\n# Project Context\n\n");
        prompt.push_str("Project-specific instructions and guidelines:\n\n");
        for (path, content) in &options.context_files {
            prompt.push_str(&format!("## {path}\n\n{content}\n\n"));
        }
    }
    // Skills are for reading: listed only when the model has the read tool.
    if options.selected_tools.iter().any(|t| t == "read") {
        prompt.push_str(&super::resources::format_skills_for_prompt(&options.skills));
    }
    prompt.push_str(&format!("\nCurrent date: {}", today()));
    prompt.push_str(&format!(
        "\nCurrent working directory: {}",
        options.cwd.replace('\\', "/")
    ));
    prompt
}

/// pi 1.6.0's `buildSystemPromptSections`, in its order: preamble, then (without a custom
/// prompt) tools and rules, then addendum, project context, skills, cwd.
pub fn sections(options: &SystemPromptOptions) -> Vec<(String, String)> {
    let tools = &options.selected_tools;
    let has = |name: &str| tools.iter().any(|t| t == name);
    let mut raw: Vec<(&str, String)> = Vec::new();
    match &options.custom_prompt {
        Some(custom) => raw.push(("preamble", custom.clone())),
        None => {
            raw.push(("preamble", "You are a coding assistant running inside pi, a coding agent harness. Help users inspect files, run commands, and modify code.".into()));
            let listed: Vec<String> = tools
                .iter()
                .filter_map(|name| {
                    let (_, snippet) = options.tool_snippets.iter().find(|(n, _)| n == name)?;
                    Some(format!("- {name}: {snippet}"))
                })
                .collect();
            let list = if listed.is_empty() {
                "(none)".to_owned()
            } else {
                listed.join("\n")
            };
            raw.push((
                "tools",
                format!("{list}\n\nAdditional tools may be available."),
            ));
            let mut rules: Vec<String> = Vec::new();
            let mut add = |rule: &str| {
                let rule = rule.trim();
                if !rule.is_empty() && !rules.iter().any(|r| r == rule) {
                    rules.push(rule.to_owned());
                }
            };
            if has("bash") && !has("grep") && !has("find") && !has("ls") {
                add("Use bash for file operations like ls, rg, find");
            }
            for g in options.guidelines.iter().chain(&options.extra_guidelines) {
                add(g);
            }
            add("Be concise in your responses");
            add("Show file paths clearly when working with files");
            let rules: Vec<String> = rules.iter().map(|r| format!("- {r}")).collect();
            raw.push(("rules", rules.join("\n")));
        }
    }
    if let Some(append) = options.append.as_deref().filter(|a| !a.is_empty()) {
        raw.push(("addendum", append.to_owned()));
    }
    if !options.context_files.is_empty() {
        let mut parts = vec!["Project-specific instructions and guidelines:".to_owned()];
        parts.extend(options.context_files.iter().map(|(path, content)| {
            format!("<project_instructions path=\"{path}\">\n{content}\n</project_instructions>")
        }));
        raw.push(("project_context", parts.join("\n\n")));
    }
    let reader = ["read", "bash"].into_iter().find(|t| has(t));
    if let Some(reader) = reader {
        let skills = super::resources::format_skills_for_prompt_1_6(&options.skills, reader);
        let skills = skills.trim();
        if !skills.is_empty() {
            raw.push(("skills", skills.to_owned()));
        }
    }
    raw.push(("cwd", options.cwd.replace('\\', "/")));
    for (name, content) in &options.sections {
        if !content.is_empty() && is_section_name(name) {
            // pi assigns them into its own map: a name pi uses keeps its place.
            match raw.iter_mut().find(|(n, _)| n == name) {
                Some(existing) => existing.1 = content.clone(),
                None => raw.push((name.as_str(), content.clone())),
            }
        }
    }
    raw.into_iter()
        .map(|(name, content)| {
            let text = if name == "preamble" {
                content
            } else {
                format!("<{name}>\n{content}\n</{name}>")
            };
            (name.to_owned(), text)
        })
        .collect()
}

/// pi-ai's `getSystemMessageText` of a system message's sections: the non-empty ones joined
/// by blank lines.
pub fn render<'a>(sections: impl IntoIterator<Item = &'a str>) -> String {
    sections
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn default_opening(options: &SystemPromptOptions) -> String {
    let tools = &options.selected_tools;
    let has = |name: &str| tools.iter().any(|t| t == name);
    let listed: Vec<String> = tools
        .iter()
        .filter_map(|name| {
            options
                .tool_snippets
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, snippet)| format!("- {name}: {snippet}"))
        })
        .collect();
    let tools_list = if listed.is_empty() {
        "(none)".to_owned()
    } else {
        listed.join("\n")
    };

    let mut guidelines: Vec<String> = Vec::new();
    let mut add = |g: &str| {
        let g = g.trim();
        if !g.is_empty() && !guidelines.iter().any(|x| x == g) {
            guidelines.push(g.to_owned());
        }
    };
    let explorers = has("grep") || has("find") || has("ls");
    if has("bash") && !explorers {
        add("Use bash for file operations like ls, rg, find");
    } else if has("bash") && explorers {
        add(
            "Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)",
        );
    }
    for g in &options.guidelines {
        add(g);
    }
    add("Be concise in your responses");
    add("Show file paths clearly when working with files");
    let guidelines: Vec<String> = guidelines.iter().map(|g| format!("- {g}")).collect();

    format!(
        "You are an expert coding assistant operating inside pi, a coding agent harness (here run by pichamber, which isolates its extensions). You help users by reading files, executing commands, editing code, and writing new files.\n\nAvailable tools:\n{tools_list}\n\nIn addition to the tools above, you may have access to other custom tools depending on the project.\n\nGuidelines:\n{}",
        guidelines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_tools_with_snippets_and_ends_with_date_and_cwd() {
        let options = SystemPromptOptions {
            cwd: "/work".into(),
            selected_tools: vec!["read".into(), "bash".into(), "secret".into()],
            tool_snippets: vec![
                ("read".into(), "Read files".into()),
                ("bash".into(), "Run commands".into()),
            ],
            guidelines: vec!["  Use read  ".into(), "Be concise in your responses".into()],
            context_files: vec![("AGENTS.md".into(), "rules".into())],
            ..Default::default()
        };
        let prompt = build(&options);
        assert!(prompt.contains("Available tools:\n- read: Read files\n- bash: Run commands\n\n"));
        assert!(!prompt.contains("secret"));
        assert!(prompt.contains(
            "- Use bash for file operations like ls, rg, find\n- Use read\n- Be concise in your responses\n- Show file paths"
        ));
        assert!(prompt.contains("## AGENTS.md\n\nrules"));
        assert!(prompt.ends_with("\nCurrent working directory: /work"));
    }

    #[test]
    fn pi_1_6_builds_tagged_sections_and_renders_them_with_blank_lines() {
        let options = SystemPromptOptions {
            cwd: "C:\\work".into(),
            selected_tools: vec!["read".into(), "bash".into()],
            tool_snippets: vec![("read".into(), "Read files".into())],
            guidelines: vec!["Use read".into()],
            append: Some("Extra.".into()),
            ..Default::default()
        };
        let s = sections(&options);
        let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["preamble", "tools", "rules", "addendum", "cwd"]);
        assert_eq!(
            s[1].1,
            "<tools>\n- read: Read files\n\nAdditional tools may be available.\n</tools>"
        );
        assert!(s[2].1.starts_with(
            "<rules>\n- Use bash for file operations like ls, rg, find\n- Use read\n"
        ));
        assert_eq!(s[4].1, "<cwd>\nC:/work\n</cwd>");
        let custom = SystemPromptOptions {
            custom_prompt: Some("You are a test.".into()),
            cwd: "/w".into(),
            ..Default::default()
        };
        let s = sections(&custom);
        assert_eq!(
            render(s.iter().map(|(_, t)| t.as_str())),
            "You are a test.\n\n<cwd>\n/w\n</cwd>"
        );
    }

    #[test]
    fn a_custom_prompt_replaces_the_opening() {
        let options = SystemPromptOptions {
            custom_prompt: Some("Be a pirate.".into()),
            append: Some("Arr.".into()),
            cwd: "/w".into(),
            ..Default::default()
        };
        let prompt = build(&options);
        assert!(prompt.starts_with("Be a pirate.\n\nArr.\nCurrent date: "));
    }
}
