//! The base system prompt, built the way pi builds its own (core/system-prompt.js): a tools
//! list from the active tools' one-line snippets, guidelines collected from the tools, project
//! context files, then the date and working directory last. pichamber has no pi documentation
//! to point at, so that section is left out; extensions see the result in
//! `before_agent_start.systemPrompt` and may replace it.

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
}

impl SystemPromptOptions {
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
