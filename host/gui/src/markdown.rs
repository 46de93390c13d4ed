//! Markdown to HTML that is safe to put in the page (cards' bodies, the model's answers):
//! raw HTML in the source is shown as text, never interpreted; fenced code in a language
//! syntect knows is highlighted with `hl-*` classes (the page's stylesheet colours them); and
//! the result is sanitised (no scripts, no event handlers, no `javascript:` links, no class
//! but the highlighter's).

use std::collections::HashSet;
use std::sync::LazyLock;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use syntect::html::{ClassStyle, ClassedHTMLGenerator};
use syntect::parsing::SyntaxSet;
use syntect::util::LinesWithEndings;

/// Code blocks longer than this are shown plain: highlighting is a regex engine's work per
/// line, and a streamed answer is rendered again on every delta.
const HIGHLIGHT_MAX_BYTES: usize = 16 * 1024;
/// At most this much code is highlighted per rendering, over all its blocks.
const HIGHLIGHT_BUDGET_BYTES: usize = 64 * 1024;

/// The scope atoms the page's stylesheet colours; a span keeps only these classes.
pub const HIGHLIGHT_CLASSES: [&str; 14] = [
    "hl-comment",
    "hl-string",
    "hl-keyword",
    "hl-operator",
    "hl-constant",
    "hl-numeric",
    "hl-entity",
    "hl-function",
    "hl-storage",
    "hl-type",
    "hl-support",
    "hl-variable",
    "hl-tag",
    "hl-invalid",
];

static SYNTAXES: LazyLock<SyntaxSet> = LazyLock::new(SyntaxSet::load_defaults_newlines);

static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut b = ammonia::Builder::default();
    b.link_rel(Some("noopener noreferrer nofollow"))
        .allowed_classes(
            [(
                "span",
                HIGHLIGHT_CLASSES.iter().copied().collect::<HashSet<_>>(),
            )]
            .into_iter()
            .collect(),
        );
    b
});

/// Renders `body` (see the module's doc).
pub fn render(body: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut events = Vec::new();
    let mut code: Option<(String, String)> = None;
    let mut budget = HIGHLIGHT_BUDGET_BYTES;
    for event in Parser::new_ext(body, options) {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let language = info.split_whitespace().next().unwrap_or_default();
                code = Some((language.to_owned(), String::new()));
                events.push(Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))));
            }
            Event::Text(text) if code.is_some() => {
                if let Some((_, buffer)) = code.as_mut() {
                    buffer.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) if code.is_some() => {
                let (language, text) = code.take().unwrap_or_default();
                match highlight(&language, &text, &mut budget) {
                    Some(html) => {
                        // The block's own <pre><code> is kept; its content is the spans.
                        events.push(Event::Html(html.into()));
                    }
                    None => events.push(Event::Text(text.into())),
                }
                events.push(Event::End(TagEnd::CodeBlock));
            }
            Event::Html(html) | Event::InlineHtml(html) => events.push(Event::Text(html)),
            other => events.push(other),
        }
    }
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    SANITIZER.clean(&html).to_string()
}

/// `code` as highlighted spans, when its language is known and it fits the budget.
fn highlight(language: &str, code: &str, budget: &mut usize) -> Option<String> {
    if language.is_empty() || code.len() > HIGHLIGHT_MAX_BYTES || code.len() > *budget {
        return None;
    }
    let syntax = SYNTAXES.find_syntax_by_token(&syntax_token(language))?;
    *budget -= code.len();
    let mut generator = ClassedHTMLGenerator::new_with_class_style(
        syntax,
        &SYNTAXES,
        ClassStyle::SpacedPrefixed { prefix: "hl-" },
    );
    for line in LinesWithEndings::from(code) {
        generator
            .parse_html_for_line_which_includes_newline(line)
            .ok()?;
    }
    Some(generator.finalize())
}

/// The syntax a fence's language names. syntect's default set has no TypeScript: its
/// JavaScript grammar reads most of it well (pi extensions are TypeScript).
fn syntax_token(language: &str) -> String {
    let language = language.to_ascii_lowercase();
    match language.as_str() {
        "ts" | "tsx" | "mts" | "cts" | "typescript" | "jsx" | "mjs" | "cjs" => "js".into(),
        "shell" | "zsh" | "console" | "shellscript" => "sh".into(),
        _ => language,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_html_is_text_and_links_are_safe() {
        let html = render("**Indexed** 12 files");
        assert_eq!(html, "<p><strong>Indexed</strong> 12 files</p>\n");
        let html = render("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)>");
        assert!(
            !html.contains("<script") && !html.contains("<img"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;"), "shown as text: {html}");
        let html = render("[x](javascript:alert(1))");
        assert!(!html.contains("javascript:"), "{html}");
        let html = render("| a |\n| - |\n| b |");
        assert!(html.contains("<table>"), "{html}");
    }

    #[test]
    fn known_languages_are_highlighted_with_the_stylesheets_classes_only() {
        let html = render("```rust\nfn main() { let x = \"hi\"; } // done\n```");
        assert!(html.starts_with("<pre><code"), "{html}");
        assert!(
            html.contains(r#"<span class="hl-keyword">"#) || html.contains("hl-storage"),
            "{html}"
        );
        assert!(html.contains("hl-string"), "{html}");
        assert!(html.contains("hl-comment"), "{html}");
        for fence in ["ts", "TypeScript", "bash", "shell", "python", "json"] {
            let html = render(&format!("```{fence}\nx = \"y\" # 1\n```"));
            assert!(html.contains("hl-"), "{fence} is highlighted: {html}");
        }
        // Scope atoms the stylesheet does not colour (source, rust, ...) are dropped.
        assert!(
            !html.contains("hl-source") && !html.contains("hl-rust"),
            "{html}"
        );
        // The code's text is intact, escaped.
        let text: String = ammonia::Builder::empty().clean(&html).to_string();
        assert!(
            text.contains(r#"fn main() { let x = "hi"; } // done"#),
            "{text}"
        );
    }

    #[test]
    fn unknown_languages_long_code_and_html_in_code_stay_plain_and_escaped() {
        let html = render("```nosuchlang\n<b>x</b>\n```");
        assert_eq!(html, "<pre><code>&lt;b&gt;x&lt;/b&gt;\n</code></pre>\n");
        let long = format!("```rust\n{}\n```", "let a = 1;\n".repeat(2000));
        assert!(!render(&long).contains("hl-"), "past the size cap");
        let html = render("```js\nconst s = \"</code></pre><script>x()</script>\";\n```");
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("hl-string"), "{html}");
    }
}
