//! `pichamber.ui` cards as text for `run`'s readable output: the card the web GUI would show
//! (normalised by `pichamber_gui`, so the same limits apply), written as lines: its title,
//! then its content (kv rows as `label: value`, a table in aligned columns, list items, a
//! progress as `label value/max`, badges, code, a markdown body as its text), then its
//! actions. The caller prints the result through the terminal sanitiser, which also indents
//! every line after the first under the title.

use pichamber_gui::card::{self, Descriptor};
use serde_json::Value;

/// A `pichamber.ui` entry's data (or a custom message's descriptor) as text.
pub fn descriptor(data: &Value) -> String {
    match card::normalize_descriptor(data) {
        Descriptor::Card(card) => render(&card),
        Descriptor::Remove(id) => format!("panel {id} removed"),
    }
}

/// A normalised card as text (first line: the title; the rest: its content).
pub fn render(card: &Value) -> String {
    let component = card["component"].as_str().unwrap_or("generic");
    let props = &card["props"];
    let mut title = card["title"]
        .as_str()
        .map(one_line)
        .unwrap_or_else(|| format!("{component} card"));
    if let Some(language) = props["language"].as_str().filter(|_| component == "code") {
        title.push_str(&format!(" ({})", one_line(language)));
    }
    let mut lines = vec![title];
    match component {
        "markdown" => lines.extend(text(&props["body"]).lines().map(str::to_owned)),
        "code" => lines.extend(text(&props["code"]).lines().map(str::to_owned)),
        "kv" => lines.extend(items(&props["rows"]).map(|(label, value)| match value {
            Some(value) => format!("{label}: {value}"),
            None => label,
        })),
        "list" => lines.extend(items(&props["items"]).map(|(label, value)| match value {
            Some(value) => format!("- {label}: {value}"),
            None => format!("- {label}"),
        })),
        "table" => lines.extend(table(props)),
        "progress" => {
            let label = props["label"].as_str().map(one_line);
            let amount = format!("{}/{}", props["value"], props["max"]);
            lines.push(match label {
                Some(label) if !label.is_empty() => format!("{label} {amount}"),
                _ => amount,
            });
        }
        "badges" => lines.push(
            array(&props["items"])
                .iter()
                .map(|b| format!("[{}]", one_line(&text(&b["label"]))))
                .collect::<Vec<_>>()
                .join(" "),
        ),
        // Unknown components and versions: the JSON the GUI would show collapsed.
        _ => lines.push(props["json"].to_string()),
    }
    let actions: Vec<String> = array(&card["actions"])
        .iter()
        .map(|a| {
            let command = match (a["args"].as_str(), &a["promptForArgs"]) {
                (Some(args), _) if !args.is_empty() => format!("/{} {args}", text(&a["command"])),
                // The page asks for the arguments: say what they are.
                (_, Value::Object(ask)) => format!(
                    "/{} <{}>",
                    text(&a["command"]),
                    ask.get("label").and_then(Value::as_str).unwrap_or("args")
                ),
                _ => format!("/{}", text(&a["command"])),
            };
            let disabled = if a["disabled"] == true {
                ", disabled"
            } else {
                ""
            };
            one_line(&format!("{} ({command}{disabled})", text(&a["label"])))
        })
        .collect();
    if !actions.is_empty() {
        lines.push(format!("actions: {}", actions.join(", ")));
    }
    lines.join("\n")
}

/// kv rows and list items: (label, value).
fn items(value: &Value) -> impl Iterator<Item = (String, Option<String>)> + '_ {
    array(value).iter().map(|row| {
        (
            one_line(&text(&row["label"])),
            row.get("value").map(|v| one_line(&text(v))),
        )
    })
}

/// Header, a rule, then the rows, each column as wide as its widest cell (counted after the
/// sanitiser has made control characters visible, so the columns line up as printed).
fn table(props: &Value) -> Vec<String> {
    let cells = |row: &Value| -> Vec<String> {
        array(row)
            .iter()
            .map(|c| pichamber_session::terminal::escape(&one_line(&text(c))))
            .collect()
    };
    let header = cells(&props["columns"]);
    let rows: Vec<Vec<String>> = array(&props["rows"]).iter().map(cells).collect();
    let count = rows.iter().map(Vec::len).chain([header.len()]).max();
    let mut widths = vec![0; count.unwrap_or(0)];
    for row in rows.iter().chain([&header]) {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |row: &[String]| {
        let padded: Vec<String> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let cell = row.get(i).map(String::as_str).unwrap_or("");
                format!("{cell}{}", " ".repeat(w - cell.chars().count()))
            })
            .collect();
        padded.join("  ").trim_end().to_owned()
    };
    let mut out = Vec::new();
    if !header.is_empty() {
        out.push(line(&header));
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        out.push(rule.join("  "));
    }
    out.extend(rows.iter().map(|r| line(r)));
    out
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Text that must stay on its line (a title, a label, a cell): line breaks and tabs become
/// spaces.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n', '\t'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn show(data: Value) -> String {
        descriptor(&data)
    }

    #[test]
    fn each_component_reads_as_text() {
        assert_eq!(
            show(json!({ "title": "About", "component": "markdown",
                "props": { "body": "**Bold** text\n\n- one" },
                "actions": [{ "label": "Open", "command": "open", "args": "README.md" }] })),
            "About\n**Bold** text\n\n- one\nactions: Open (/open README.md)"
        );
        assert_eq!(
            show(json!({ "title": "Summary", "component": "kv",
                "props": { "rows": [{ "label": "Files", "value": 12, "tone": "info" }, "Plain"] } })),
            "Summary\nFiles: 12\nPlain"
        );
        assert_eq!(
            show(json!({ "component": "list",
                "props": { "items": [{ "label": "src/", "value": "42 files" }, { "label": "tests/" }] } })),
            "list card\n- src/: 42 files\n- tests/"
        );
        assert_eq!(
            show(
                json!({ "title": "Folders", "component": "list", "props": { "items": [] },
                "actions": [{ "label": "Open…", "command": "open", "promptForArgs": { "label": "Folder" } },
                            { "label": "Any", "command": "any", "promptForArgs": true }] })
            ),
            "Folders\nactions: Open… (/open <Folder>), Any (/any <args>)"
        );
        assert_eq!(
            show(json!({ "title": "Files", "component": "table",
                "props": { "columns": ["File", "Status"], "rows": [["a.ts", "done"], ["long-name.ts", "running"], ["c"]] } })),
            "Files\nFile          Status\n------------  -------\na.ts          done\nlong-name.ts  running\nc"
        );
        assert_eq!(
            show(json!({ "title": "Build", "component": "progress",
                "props": { "label": "Linking", "value": 60, "max": 100 } })),
            "Build\nLinking 60/100"
        );
        assert_eq!(
            show(json!({ "title": "Checks", "component": "badges",
                "props": { "items": [{ "label": "passing", "tone": "success" }, "3 skipped"] },
                "actions": [{ "label": "Re-run", "command": "/checks", "disabled": true }] })),
            "Checks\n[passing] [3 skipped]\nactions: Re-run (/checks, disabled)"
        );
        assert_eq!(
            show(json!({ "title": "Snippet", "component": "code",
                "props": { "language": "ts", "code": "let a = 1;\nlet b = 2;" } })),
            "Snippet (ts)\nlet a = 1;\nlet b = 2;"
        );
        assert_eq!(
            show(json!({ "id": "build", "removed": true })),
            "panel build removed"
        );
        assert_eq!(
            show(json!({ "title": "Odd", "component": "chart", "props": { "x": 1 } })),
            "Odd\n{\"title\":\"Odd\",\"component\":\"chart\",\"props\":{\"x\":1}}"
        );
    }

    #[test]
    fn a_cell_cannot_break_its_row_and_columns_line_up_as_printed() {
        assert_eq!(
            show(json!({ "title": "T\nforged", "component": "table",
                "props": { "columns": ["a", "b"], "rows": [["x\ny", "\u{1b}[2J"], ["1", "2"]] } })),
            "T forged\na    b\n---  ---------\nx y  \\u{1b}[2J\n1    2"
        );
    }
}
