//! Named imports a module lacks become `undefined`, as under pi's loader: jiti compiles ES
//! modules to CommonJS, where such an import is a property read that finds nothing, so only
//! the code using it fails. QuickJS links ES modules strictly and would refuse the whole
//! extension. The build rewrites each such import (warning about it) in the bundled code;
//! modules it cannot see the exports of (an `export *`) are left as they are.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use oxc_allocator::Allocator;
use oxc_parser::Parser;
use oxc_span::SourceType;
use oxc_syntax::module_record::{ExportExportName, ImportImportName, ModuleRecord};

use crate::bundle::BundledModule;

mod generated {
    include!(concat!(env!("OUT_DIR"), "/virtual_sources.rs"));
}

/// What a module exports, as far as can be told without running it.
#[derive(Debug, Clone, Default)]
struct Exports {
    names: HashSet<String>,
    /// It re-exports everything of another module (`export * from`): its names are open.
    open: bool,
}

impl Exports {
    fn of(record: &ModuleRecord<'_>) -> Exports {
        let names = record
            .local_export_entries
            .iter()
            .chain(&record.indirect_export_entries)
            .filter_map(|e| match &e.export_name {
                ExportExportName::Name(n) => Some(n.name.to_string()),
                ExportExportName::Default(_) => Some("default".into()),
                ExportExportName::Null => None,
            })
            .collect();
        Exports {
            names,
            open: !record.star_export_entries.is_empty(),
        }
    }

    fn lacks(&self, name: &str) -> bool {
        !self.open && !self.names.contains(name)
    }
}

fn parse_exports(code: &str) -> Option<Exports> {
    let allocator = Allocator::default();
    let parsed = Parser::new(&allocator, code, SourceType::mjs()).parse();
    (!parsed.panicked).then(|| Exports::of(&parsed.module_record))
}

/// The exports of a virtual module (`pichamber:node/fs`), parsed once per process.
fn virtual_exports(id: &str) -> Option<Exports> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<Exports>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(known) = cache.lock().unwrap().get(id) {
        return known.clone();
    }
    let exports = generated::VIRTUAL_SOURCES
        .iter()
        .find(|(name, _)| *name == id)
        .and_then(|(_, source)| parse_exports(source));
    cache.lock().unwrap().insert(id.to_owned(), exports.clone());
    exports
}

/// One binding an import statement makes.
struct Binding {
    local: String,
    imported: Imported,
}

enum Imported {
    Default,
    Namespace,
    Name(String),
}

/// Rewrites, in every module, the imports naming what their module does not export; returns a
/// warning for each.
pub fn fill_missing(modules: &mut [BundledModule]) -> Vec<String> {
    let bundled: HashMap<String, Option<Exports>> = modules
        .iter()
        .map(|m| (m.id.clone(), parse_exports(&m.code)))
        .collect();
    let exports_of = |id: &str| match bundled.get(id) {
        Some(exports) => exports.clone(),
        None => virtual_exports(id),
    };
    let mut warnings = Vec::new();
    for module in modules.iter_mut() {
        let allocator = Allocator::default();
        let parsed = Parser::new(&allocator, &module.code, SourceType::mjs()).parse();
        if parsed.panicked {
            continue;
        }
        // Statements in source order, each with its bindings.
        let mut statements: Vec<((u32, u32), String, Vec<Binding>)> = Vec::new();
        for entry in &parsed.module_record.import_entries {
            let span = (entry.statement_span.start, entry.statement_span.end);
            let binding = Binding {
                local: entry.local_name.name.to_string(),
                imported: match &entry.import_name {
                    ImportImportName::Default(_) => Imported::Default,
                    ImportImportName::NamespaceObject => Imported::Namespace,
                    ImportImportName::Name(n) => Imported::Name(n.name.to_string()),
                },
            };
            match statements.last_mut() {
                Some((last, _, bindings)) if *last == span => bindings.push(binding),
                _ => statements.push((span, entry.module_request.name.to_string(), vec![binding])),
            }
        }
        let mut edits: Vec<((u32, u32), String)> = Vec::new();
        for (span, source, bindings) in statements {
            let Some(exports) = exports_of(&source) else {
                continue;
            };
            let missing = |b: &Binding| match &b.imported {
                Imported::Default => exports.lacks("default"),
                Imported::Namespace => false,
                Imported::Name(name) => exports.lacks(name),
            };
            if !bindings.iter().any(missing) {
                continue;
            }
            let (absent, kept): (Vec<&Binding>, Vec<&Binding>) =
                bindings.iter().partition(|b| missing(b));
            for b in &absent {
                let name = match &b.imported {
                    Imported::Name(name) => name.as_str(),
                    _ => "default",
                };
                warnings.push(format!(
                    "{}: {source} does not export `{name}`: `{}` is undefined there, as under pi's loader",
                    module.id, b.local
                ));
            }
            let original = &module.code[span.0 as usize..span.1 as usize];
            let mut text = import_statement(&source, &kept);
            for b in &absent {
                text += &format!(" const {} = undefined;", b.local);
            }
            // As many lines as before, so the source map still holds.
            text += &"\n".repeat(original.matches('\n').count());
            edits.push((span, text));
        }
        for ((start, end), text) in edits.into_iter().rev() {
            module
                .code
                .replace_range(start as usize..end as usize, &text);
        }
    }
    warnings
}

/// `import a, { b as c } from "id";` with the bindings kept (`import "id";` with none, so the
/// module still runs in its place).
fn import_statement(source: &str, kept: &[&Binding]) -> String {
    let quoted = serde_json::to_string(source).unwrap_or_default();
    let mut clauses = Vec::new();
    let mut named = Vec::new();
    for b in kept {
        match &b.imported {
            Imported::Default => clauses.insert(0, b.local.clone()),
            Imported::Namespace => clauses.push(format!("* as {}", b.local)),
            Imported::Name(name) if *name == b.local => named.push(name.clone()),
            Imported::Name(name) => {
                let name = if is_identifier_name(name) {
                    name.clone()
                } else {
                    serde_json::to_string(name).unwrap_or_default()
                };
                named.push(format!("{name} as {}", b.local));
            }
        }
    }
    if !named.is_empty() {
        clauses.push(format!("{{ {} }}", named.join(", ")));
    }
    if clauses.is_empty() {
        format!("import {quoted};")
    } else {
        format!("import {} from {quoted};", clauses.join(", "))
    }
}

/// An IdentifierName, which an import specifier may spell bare even when it is a reserved
/// word (`import { class as c }`); unlike bundle.rs's `is_identifier`, which names bindings.
fn is_identifier_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(id: &str, code: &str) -> BundledModule {
        BundledModule {
            id: id.into(),
            code: code.into(),
            map: None,
        }
    }

    #[test]
    fn an_import_the_module_lacks_becomes_undefined_and_the_rest_stay() {
        let mut modules = vec![
            module(
                "/ext/index.js",
                "import d, { helper, gone as alias } from \"/ext/lib.js\";\nimport {\n  nothing\n} from \"/ext/lib.js\";\nimport { basename, notInPath } from \"pichamber:node/path\";\nexport default d;\n",
            ),
            module("/ext/lib.js", "export const helper = 1; export default 2;"),
        ];
        let warnings = fill_missing(&mut modules);
        assert_eq!(
            modules[0].code,
            "import d, { helper } from \"/ext/lib.js\"; const alias = undefined;\nimport \"/ext/lib.js\"; const nothing = undefined;\n\n\nimport { basename } from \"pichamber:node/path\"; const notInPath = undefined;\nexport default d;\n"
        );
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings[0].contains("/ext/lib.js does not export `gone`"));
        assert_eq!(
            modules[1].code,
            "export const helper = 1; export default 2;"
        );
    }

    #[test]
    fn a_module_that_re_exports_everything_is_trusted() {
        let mut modules = vec![
            module("/ext/a.js", "import { maybe } from \"/ext/b.js\";"),
            module("/ext/b.js", "export * from \"/ext/c.js\";"),
            module("/ext/c.js", "export const other = 1;"),
        ];
        assert!(fill_missing(&mut modules).is_empty());
        assert_eq!(modules[0].code, "import { maybe } from \"/ext/b.js\";");
    }
}
