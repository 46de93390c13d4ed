//! CommonJS as Node runs it, inside an ES module graph. A module's body runs when it is first
//! required, not when the graph evaluates it, so require order, cycles and partial exports are
//! Node's (cssom, for one, requires a module "late, due to the mutual dependency").
//!
//! A CommonJS file becomes two modules: its body (`<id>` + [`BODY_SUFFIX`]), which exports a
//! function that runs the body once and returns `module.exports`; and, under the file's own
//! id, a facade for ES importers that runs the body when the graph evaluates it and exports
//! `module.exports` as default plus the names assigned on it. `require` reaches a CommonJS
//! dependency through its body, an ES one through its namespace, a builtin as Node gives it.

use std::collections::HashMap;

use oxc_ast::ast::Program;

/// Appended to a CommonJS file's id to name the module holding its body.
pub const BODY_SUFFIX: &str = "?commonjs";

/// Whether `id` names a CommonJS file's body module (not a file of its own).
pub fn is_body(id: &str) -> bool {
    id.ends_with(BODY_SUFFIX)
}

/// What a bundled module is, as far as `require` cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    EsModule,
    CommonJs,
    Json,
}

/// A module's `require("x")` calls: the specifier and, when it resolved, the target's id.
pub type Requires = Vec<(String, Option<String>)>;

/// The body module and the facade of the CommonJS module `id`, its code generated as `code`.
pub fn wrap(
    id: &str,
    code: &str,
    requires: &Requires,
    export_names: &[String],
    kinds: &HashMap<String, Kind>,
) -> [(String, String); 2] {
    let (filename, dirname) = (json_str(id), json_str(parent(id)));
    // Node forgets a module whose body threw, so a later require runs it again.
    let body = format!(
        "{}var __pichamber_module;\n\
         export function __pichamber_cjs() {{\n\
           if (__pichamber_module === undefined) {{\n\
             const module = __pichamber_module = {{ exports: {{}} }};\n\
             try {{\n\
               (function (exports, require, module, __filename, __dirname) {{\n{code}\n}}).call(module.exports, module.exports, require, module, {filename}, {dirname});\n\
             }} catch (e) {{ __pichamber_module = undefined; throw e; }}\n\
           }}\n\
           return __pichamber_module.exports;\n\
         }}\n",
        require_function(requires, kinds)
    );
    let mut facade = format!(
        "import * as __pichamber_body from {};\n\
         const __pichamber_exports = __pichamber_body.__pichamber_cjs();\n\
         export default __pichamber_exports;\n",
        json_str(&format!("{id}{BODY_SUFFIX}"))
    );
    for name in export_names {
        facade.push_str(&format!(
            "export const {name} = __pichamber_exports.{name};\n"
        ));
    }
    [
        (format!("{id}{BODY_SUFFIX}"), body),
        (id.to_owned(), facade),
    ]
}

/// The static imports of a module's `require`d dependencies (so they are bundled and linked)
/// and the `require` that hands them out, declared as a function so it works from any point
/// of a module graph's evaluation, cycles included.
pub fn require_function(requires: &Requires, kinds: &HashMap<String, Kind>) -> String {
    let mut imports = String::new();
    let mut cases = String::new();
    for (i, (specifier, target)) in requires.iter().enumerate() {
        let Some(id) = target else { continue };
        let dep = format!("__pichamber_dep{i}");
        let (import, value) = match kinds.get(id) {
            Some(Kind::CommonJs) => (
                format!("{id}{BODY_SUFFIX}"),
                format!("{dep}.__pichamber_cjs()"),
            ),
            Some(Kind::Json) => (id.clone(), format!("{dep}.default")),
            // Node's require of a built-in whose exports are a function (assert, events,
            // stream) gives that function, its other exports hanging off it.
            None if id.starts_with("pichamber:") => (
                id.clone(),
                format!("typeof {dep}.default === 'function' ? {dep}.default : {dep}"),
            ),
            _ => (id.clone(), dep.clone()),
        };
        imports.push_str(&format!("import * as {dep} from {};\n", json_str(&import)));
        cases.push_str(&format!("case {}: return {value}; ", json_str(specifier)));
    }
    format!(
        "{imports}function require(s) {{ switch (s) {{ {cases}}} \
         const e = new Error(`Cannot find module '${{s}}'`); e.code = 'MODULE_NOT_FOUND'; throw e; }}\n"
    )
}

fn parent(id: &str) -> &str {
    match id.rfind('/') {
        Some(0) => "/",
        Some(i) => &id[..i],
        None => ".",
    }
}

fn json_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// Names a CommonJS module assigns on `exports` / `module.exports` (what Node's
/// cjs-module-lexer would detect), so ES modules can import them by name.
pub fn export_names(program: &Program<'_>) -> Vec<String> {
    struct Finder(Vec<String>);
    impl<'a> oxc_ast_visit::Visit<'a> for Finder {
        fn visit_assignment_expression(&mut self, it: &oxc_ast::ast::AssignmentExpression<'a>) {
            use oxc_ast::ast::{AssignmentTarget, Expression as E};
            if let AssignmentTarget::StaticMemberExpression(member) = &it.left {
                let object_is_exports = match &member.object {
                    E::Identifier(id) => id.name == "exports",
                    E::StaticMemberExpression(inner) => {
                        matches!(&inner.object, E::Identifier(id) if id.name == "module")
                            && inner.property.name == "exports"
                    }
                    _ => false,
                };
                if object_is_exports {
                    self.0.push(member.property.name.to_string());
                } else if matches!(&member.object, E::Identifier(id) if id.name == "module")
                    && member.property.name == "exports"
                    && let E::ObjectExpression(object) = &it.right
                {
                    for prop in &object.properties {
                        if let oxc_ast::ast::ObjectPropertyKind::ObjectProperty(p) = prop
                            && let Some(name) = p.key.static_name()
                        {
                            self.0.push(name.to_string());
                        }
                    }
                }
            }
            oxc_ast_visit::walk::walk_assignment_expression(self, it);
        }
    }
    let mut finder = Finder(Vec::new());
    oxc_ast_visit::Visit::visit_program(&mut finder, program);
    let mut names: Vec<String> = finder
        .0
        .into_iter()
        .filter(|n| n != "default" && n != "__esModule" && is_identifier(n))
        .collect();
    names.sort();
    names.dedup();
    names
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        && !matches!(
            name,
            "default"
                | "class"
                | "function"
                | "delete"
                | "new"
                | "return"
                | "var"
                | "let"
                | "const"
        )
}
