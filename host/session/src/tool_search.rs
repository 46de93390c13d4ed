//! pi 1.6.0's built-in `tool_search` tool: a BM25 ranking over the tools that are not
//! declared to the model (`codemode` and `deferred` exposure), which activates the matches so
//! the next model call declares them.

use serde_json::{Value, json};

use crate::state::{Exposure, RegisteredTool, SessionState};

pub const NAME: &str = "tool_search";
const DEFAULT_LIMIT: usize = 8;
const NAME_WEIGHT: f64 = 3.0;
const NAMESPACE_WEIGHT: f64 = 0.5;
const K1: f64 = 1.2;
const B: f64 = 0.75;
const STOP_WORDS: [&str; 21] = [
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of", "on",
    "or", "that", "the", "this", "to", "with",
];

pub const DESCRIPTION: &str = "# Tool discovery\n\nSearches over deferred tool metadata with BM25 and exposes matching tools for the next model call.\n\nSome of the tools, such as tools of MCP servers, may not have been provided to you upfront, and you should use this tool (`tool_search`) to search for the required tools. For MCP tool discovery, always use `tool_search`.";
pub const SNIPPET: &str = "Search for tools that are not loaded yet and load the matches";

/// The tool as pi's built-in registers it: inactive until something activates it.
pub fn definition() -> RegisteredTool {
    RegisteredTool {
        prompt_snippet: Some(SNIPPET.into()),
        default_active: Some(false),
        ..RegisteredTool::hosted(
            "builtin:tool-search",
            NAME.into(),
            NAME.into(),
            DESCRIPTION.into(),
            parameters(),
            Exposure::ModelOnly,
        )
    }
}

fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": { "description": "Search query for deferred tools.", "type": "string" },
            "limit": { "description": "Maximum number of tools to return. Defaults to 8.", "type": "number" },
        },
        "required": ["query"],
    })
}

/// Naive singular form, so `issues` matches `issue`.
fn stem(term: &str) -> String {
    let n = term.len();
    if n > 4 && term.ends_with("ies") {
        return format!("{}y", &term[..n - 3]);
    }
    if n > 4
        && ["ches", "shes", "sses", "xes", "zes"]
            .iter()
            .any(|s| term.ends_with(s))
    {
        return term[..n - 2].to_owned();
    }
    if n > 3 && term.ends_with('s') && !term.ends_with("ss") {
        return term[..n - 1].to_owned();
    }
    term.to_owned()
}

/// Words of `text`: identifiers split at case changes, lower-cased, stop words left out,
/// ASCII words in singular form.
pub fn tokenize(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut spaced = String::with_capacity(text.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        if c.is_ascii_uppercase() {
            let after_lower = prev.is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit());
            let acronym_end = prev.is_some_and(|p| p.is_ascii_uppercase())
                && next.is_some_and(|n| n.is_ascii_lowercase());
            if after_lower || acronym_end {
                spaced.push(' ');
            }
        }
        spaced.push(c);
    }
    let lowered = spaced.to_lowercase();
    lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
        .map(|w| {
            if w.chars().all(|c| c.is_ascii_alphanumeric()) {
                stem(w)
            } else {
                w.to_owned()
            }
        })
        .collect()
}

/// Schema descriptions and property names, recursively (local `$ref`s are not followed).
fn schema_text(schema: &Value, parts: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    if let Some(d) = object.get("description").and_then(Value::as_str) {
        parts.push(d.to_owned());
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            parts.push(name.clone());
            schema_text(property, parts);
        }
    }
    if let Some(items) = object.get("items") {
        schema_text(items, parts);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for variant in object
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            schema_text(variant, parts);
        }
    }
}

struct Document {
    name: String,
    name_terms: Vec<String>,
    local_terms: Vec<String>,
    counts: std::collections::HashMap<String, usize>,
    length: usize,
    namespace_terms: Vec<String>,
}

fn normalize_name(name: &str) -> String {
    name.trim()
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The names of the best `limit` matches of `query` among `tools` (name, description,
/// parameters, namespace), as pi's `Bm25Ranker` ranks them.
fn rank(
    query: &str,
    tools: &[(String, String, Value, Option<Value>)],
    limit: usize,
) -> Vec<String> {
    let mut query_terms: Vec<String> = Vec::new();
    for t in tokenize(query) {
        if !query_terms.contains(&t) {
            query_terms.push(t);
        }
    }
    if query_terms.is_empty() || tools.is_empty() || limit == 0 {
        return Vec::new();
    }
    let docs: Vec<Document> = tools
        .iter()
        .map(|(name, description, parameters, namespace)| {
            let mut parts = vec![description.clone()];
            schema_text(parameters, &mut parts);
            let text = parts
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .collect::<Vec<_>>()
                .join(" ");
            let mut counts = std::collections::HashMap::new();
            for term in tokenize(&text) {
                *counts.entry(term).or_insert(0) += 1;
            }
            let namespace_text = namespace.as_ref().map_or(String::new(), |ns| {
                [&ns["name"], &ns["description"], &ns["instructions"]]
                    .iter()
                    .map(|v| v.as_str().unwrap_or(""))
                    .collect::<Vec<_>>()
                    .join(" ")
            });
            let local = name.rsplit("__").next().unwrap_or(name);
            let mut local_terms = tokenize(local);
            local_terms.dedup();
            Document {
                name: name.clone(),
                name_terms: tokenize(name),
                local_terms,
                length: counts.values().sum(),
                counts,
                namespace_terms: tokenize(&namespace_text),
            }
        })
        .collect();
    let n = docs.len() as f64;
    let average = (docs.iter().map(|d| d.length).sum::<usize>() as f64 / n).max(f64::MIN_POSITIVE);
    let average = if average == 0.0 { 1.0 } else { average };
    let idf: Vec<f64> = query_terms
        .iter()
        .map(|term| {
            let frequency = docs
                .iter()
                .filter(|d| {
                    d.name_terms.contains(term)
                        || d.counts.contains_key(term)
                        || d.namespace_terms.contains(term)
                })
                .count() as f64;
            (1.0 + (n - frequency + 0.5) / (frequency + 0.5)).ln()
        })
        .collect();
    let full_name_bonus: f64 = idf.iter().sum();
    let exact_query = normalize_name(query);
    let mut matches: Vec<(usize, f64, usize, bool)> = Vec::new();
    for (index, doc) in docs.iter().enumerate() {
        let norm = K1 * (1.0 - B + B * doc.length as f64 / average);
        let (mut score, mut covered) = (0.0, 0);
        for (term, idf) in query_terms.iter().zip(&idf) {
            let count = *doc.counts.get(term).unwrap_or(&0) as f64;
            let weight = if doc.name_terms.contains(term) {
                NAME_WEIGHT
            } else {
                0.0
            } + if doc.namespace_terms.contains(term) {
                NAMESPACE_WEIGHT
            } else {
                0.0
            } + count * (K1 + 1.0) / (count + norm);
            if weight > 0.0 {
                covered += 1;
            }
            score += idf * weight;
        }
        if score == 0.0 {
            continue;
        }
        if !doc.local_terms.is_empty() && doc.local_terms.iter().all(|t| query_terms.contains(t)) {
            score += full_name_bonus;
        }
        let normalized = normalize_name(&doc.name);
        let exact = normalized == exact_query || normalized.ends_with(&format!("__{exact_query}"));
        matches.push((index, score, covered, exact));
    }
    // Stable, so ties keep the tools' order.
    matches.sort_by(|a, b| {
        b.3.cmp(&a.3)
            .then(b.2.cmp(&a.2))
            .then(b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal))
    });
    matches
        .into_iter()
        .take(limit)
        .map(|(i, ..)| docs[i].name.clone())
        .collect()
}

/// Runs `tool_search`: ranks the searchable tools that are not active and activates the
/// matches. The result pi's tool gives, or its thrown error.
pub fn run(state: &mut SessionState, args: &Value) -> Result<Value, String> {
    let (found, result) = search(state, args)?;
    let mut active = state.active_tools.clone();
    active.extend(found);
    state.set_active(&active, true);
    Ok(result)
}

fn search(state: &SessionState, args: &Value) -> Result<(Vec<String>, Value), String> {
    let query = args["query"].as_str().unwrap_or_default();
    if query.trim().is_empty() {
        return Err("query must not be empty".into());
    }
    let limit = match &args["limit"] {
        Value::Null => DEFAULT_LIMIT,
        v => match v.as_f64() {
            Some(l) if l > 0.0 && l.fract() == 0.0 => l as usize,
            _ => return Err("limit must be a positive integer".into()),
        },
    };
    let candidates: Vec<(String, String, Value, Option<Value>)> = state
        .tools
        .iter()
        .filter(|t| matches!(t.exposure, Exposure::Codemode | Exposure::Deferred))
        .filter(|t| !state.active_tools.contains(&t.name))
        .map(|t| {
            (
                t.name.clone(),
                t.description.clone(),
                t.parameters.clone(),
                t.namespace.clone(),
            )
        })
        .collect();
    let found = rank(query, &candidates, limit);
    let text = if found.is_empty() {
        "No matching tools found.".to_owned()
    } else {
        let lines: Vec<String> = found
            .iter()
            .map(|name| {
                let description = candidates
                    .iter()
                    .find(|c| c.0 == *name)
                    .map_or("", |c| c.1.as_str());
                let first = description
                    .trim()
                    .split('\n')
                    .next()
                    .unwrap_or("")
                    .trim_end_matches('\r');
                format!("- {name}: {first}")
            })
            .collect();
        format!(
            "Loaded {} tool{}. They are available from your next call:\n{}",
            found.len(),
            if found.len() == 1 { "" } else { "s" },
            lines.join("\n")
        )
    };
    let result =
        json!({ "content": [{ "type": "text", "text": text }], "details": { "loaded": found } });
    Ok((found, result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_pi_splits_them() {
        assert_eq!(
            tokenize("getHTTPResponse of the issues"),
            ["get", "http", "response", "issue"]
        );
        assert_eq!(tokenize("mcp__echo__echo"), ["mcp", "echo", "echo"]);
        assert_eq!(tokenize("searches boxes class"), ["search", "box", "class"]);
    }

    #[test]
    fn a_name_match_ranks_first_and_coverage_beats_score() {
        let tool = |name: &str, description: &str| {
            (name.to_owned(), description.to_owned(), json!({}), None)
        };
        let tools = [
            tool("mcp__a__window", "Lists things"),
            tool("mcp__a__shot", "Takes a screenshot of a window"),
            tool("mcp__a__echo", "Echoes its text back"),
        ];
        assert_eq!(
            rank("screenshot window", &tools, 8),
            ["mcp__a__shot", "mcp__a__window"]
        );
        assert_eq!(rank("echo", &tools, 8), ["mcp__a__echo"]);
        assert_eq!(rank("a__window", &tools, 1), ["mcp__a__window"]);
        assert!(rank("nothing here", &tools, 8).is_empty());
    }
}
