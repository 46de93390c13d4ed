//! Turns an extension's sources into the module map the guest loads: TypeScript stripped with
//! oxc, every import resolved with oxc_resolver (relative files and node_modules packages), and
//! every import specifier rewritten in the AST to a canonical module id. pi's packages, TypeBox
//! and node builtins resolve to the guest shim's virtual modules. CommonJS files run as Node runs
//! them ([`commonjs`]).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::manifest_entries;
use oxc_allocator::Allocator;
use oxc_ast::ast::{
    Argument, CallExpression, Expression, ImportExpression, ModuleDeclaration, NewExpression,
    Program, StringLiteral, TryStatement,
};
use oxc_ast_visit::{VisitMut, walk_mut};
use oxc_codegen::Codegen;
use oxc_parser::Parser;
use oxc_resolver::{ResolveOptions, Resolver};
use oxc_semantic::SemanticBuilder;
use oxc_span::SourceType;
use oxc_transformer::{HelperLoaderMode, TransformOptions, Transformer};
use pichamber_pi::PiVersion;
use serde::Deserialize;

use crate::commonjs;
use crate::package_scope::PackageScope;

/// The virtual modules the guest shim provides, shared with the shim's build.
const VIRTUAL_MODULES_JSON: &str = include_str!("../../../guest-shim/js/virtual-modules.json");

/// A located build failure: `file:line:col: message`.
#[derive(Debug, Clone)]
pub struct BuildError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.column, self.message
            )
        }
    }
}

impl std::error::Error for BuildError {}

/// One bundled extension.
#[derive(Debug, Clone)]
pub struct Bundle {
    /// Canonical ids of the entry modules: one, or a package's several in pi's load order.
    pub entries: Vec<String>,
    /// Modules in dependency-discovery order, entries first.
    pub modules: Vec<BundledModule>,
    /// The package the entry belongs to, when there is one.
    pub package: Option<PackageInfo>,
    /// Capabilities the extension asks for (package.json `pichamber.capabilities`).
    pub requested_capabilities: serde_json::Value,
    /// A name for the extension: the package name or the entry file's stem.
    pub name: String,
    pub version: Option<String>,
    /// The extension as given (made absolute).
    pub input: PathBuf,
    /// The folder module ids are relative to (`/ext/...`): the package, or the file's folder.
    pub root: PathBuf,
    /// The pi release the extension was written for, by the scope of the pi packages its
    /// modules import or its package.json depends on (see `pichamber_pi`).
    pub pi_version: Option<PiVersion>,
    /// What the build changed that its user should hear of (imports of names a module does
    /// not export, now `undefined`; package files left out).
    pub warnings: Vec<String>,
    /// The package's files the extension may read at run time (package_files).
    pub files: Vec<crate::package_files::PackageFile>,
}

/// One module of the bundle.
#[derive(Debug, Clone)]
pub struct BundledModule {
    /// Canonical id (`/ext/<path in the package>`).
    pub id: String,
    pub code: String,
    /// Source map (JSON) from `code` back to the original file.
    pub map: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct PackageInfo {
    pub name: Option<String>,
    pub version: Option<String>,
    #[serde(rename = "type")]
    pub module_type: Option<String>,
    pub pi: Option<PiField>,
    pub pichamber: Option<serde_json::Value>,
    #[serde(default, rename = "peerDependencies")]
    pub peer_dependencies: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    pub dependencies: BTreeMap<String, serde_json::Value>,
    #[serde(default, rename = "devDependencies")]
    pub dev_dependencies: BTreeMap<String, serde_json::Value>,
}

impl PackageInfo {
    /// The pi releases the package depends on (any kind of dependency says it).
    fn pi_versions(&self) -> impl Iterator<Item = PiVersion> + '_ {
        self.peer_dependencies
            .keys()
            .chain(self.dependencies.keys())
            .chain(self.dev_dependencies.keys())
            .filter_map(|name| PiVersion::of_specifier(name))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct PiField {
    pub extensions: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct VirtualModules {
    aliases: BTreeMap<String, String>,
}

/// node:async_hooks' module in the guest.
const ASYNC_HOOKS_ID: &str = "pichamber:node/async_hooks";

fn virtual_aliases() -> BTreeMap<String, String> {
    serde_json::from_str::<VirtualModules>(VIRTUAL_MODULES_JSON)
        .expect("virtual-modules.json is valid")
        .aliases
}

/// Where the extension's entries are (one, or a package's several) and what its id root is.
struct Layout {
    entries: Vec<PathBuf>,
    root: PathBuf,
    package: Option<PackageInfo>,
    /// The extension is a single file (named after the file, as pi names it), not a package.
    single_file: bool,
}

fn plain_error(file: &Path, message: impl Into<String>) -> BuildError {
    BuildError {
        file: file.display().to_string(),
        line: 0,
        column: 0,
        message: message.into(),
    }
}

fn read_package(dir: &Path) -> Result<Option<PackageInfo>, BuildError> {
    let path = dir.join("package.json");
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| plain_error(&path, e.to_string()))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| BuildError {
            file: path.display().to_string(),
            line: e.line(),
            column: e.column(),
            message: format!("invalid package.json: {e}"),
        })
}

fn locate(input: &Path) -> Result<Layout, BuildError> {
    let input = input
        .canonicalize()
        .map_err(|e| plain_error(input, format!("cannot open the extension: {e}")))?;
    if input.is_file() {
        let is_source = input.extension().and_then(|e| e.to_str()).is_some_and(|e| {
            matches!(
                e,
                "ts" | "tsx" | "mts" | "cts" | "js" | "jsx" | "mjs" | "cjs"
            )
        });
        if !is_source {
            return Err(plain_error(
                &input,
                "not an extension source: expected a .ts or .js file (or a built .wasm for `run` and `inspect`)",
            ));
        }
        let dir = input.parent().unwrap_or(Path::new("/")).to_path_buf();
        // The package a single file belongs to, if any (its nearest package.json).
        let mut package_dir = Some(dir.as_path());
        while let Some(d) = package_dir {
            if d.join("package.json").is_file() {
                let package = read_package(d)?;
                return Ok(Layout {
                    entries: vec![input.clone()],
                    root: d.to_path_buf(),
                    package,
                    single_file: true,
                });
            }
            package_dir = d.parent();
        }
        return Ok(Layout {
            entries: vec![input.clone()],
            root: dir,
            package: None,
            single_file: true,
        });
    }
    let package = read_package(&input)?;
    if let Some(extensions) = package
        .as_ref()
        .and_then(|p| p.pi.as_ref())
        .and_then(|p| p.extensions.clone())
    {
        return package_layout(input, package, &extensions);
    }
    match index_file(&input) {
        Some(entry) => Ok(Layout {
            entries: vec![entry],
            root: input,
            package,
            single_file: false,
        }),
        None => Err(plain_error(
            &input,
            "no extension here: expected index.ts / index.js or a package.json with pi.extensions",
        )),
    }
}

/// A package's extensions as pi finds them in `pi.extensions`: plain entries in order, globs
/// expanded, overrides applied, a folder read as its index file. They all go into one
/// artifact (the package is the isolation unit: SECURITY.md).
fn package_layout(
    input: PathBuf,
    package: Option<PackageInfo>,
    extensions: &[String],
) -> Result<Layout, BuildError> {
    let entries: Vec<&str> = extensions.iter().map(String::as_str).collect();
    let manifest = input.join("package.json");
    if entries.is_empty() {
        return Err(plain_error(&manifest, "pi.extensions is empty"));
    }
    if let Some(missing) = entries
        .iter()
        .filter(|e| !manifest_entries::is_glob(e) && !manifest_entries::is_override(e))
        .find(|e| !manifest_entries::normalize_join(&input, e).exists())
    {
        return Err(plain_error(
            &manifest,
            format!("pi.extensions lists \"{missing}\", which does not exist"),
        ));
    }
    let mut files: Vec<PathBuf> = Vec::new();
    for file in manifest_entries::expand(&input, &entries)
        .into_iter()
        .filter_map(|p| if p.is_dir() { index_file(&p) } else { Some(p) })
        .filter(|p| p.is_file())
    {
        if !files.contains(&file) {
            files.push(file);
        }
    }
    let files = manifest_entries::apply_overrides(files, &entries, &input);
    if files.is_empty() {
        return Err(plain_error(
            &manifest,
            format!(
                "pi.extensions ({}) names no extension file that exists",
                entries.join(", ")
            ),
        ));
    }
    Ok(Layout {
        entries: files,
        root: input,
        package,
        single_file: false,
    })
}

fn index_file(dir: &Path) -> Option<PathBuf> {
    [
        "index.ts",
        "index.mts",
        "index.tsx",
        "index.js",
        "index.mjs",
    ]
    .iter()
    .map(|n| dir.join(n))
    .find(|p| p.is_file())
}

/// Bundles the extension at `input` (a file, a folder with index.ts, or a pi package).
pub fn bundle(input: &Path) -> Result<Bundle, BuildError> {
    // oxc's passes recurse per level of nesting: a stack with room for [`MAX_NESTING`]
    // levels in a debug build too (address space only; the pages used are the ones touched).
    let input = input.to_path_buf();
    std::thread::Builder::new()
        .name("pichamber-bundle".into())
        .stack_size(256 << 20)
        .spawn(move || bundle_here(&input))
        .map_err(|e| plain_error(Path::new("."), format!("cannot start the bundler: {e}")))?
        .join()
        .unwrap_or_else(|_| Err(plain_error(Path::new("."), "the bundler failed")))
}

fn bundle_here(input: &Path) -> Result<Bundle, BuildError> {
    let layout = locate(input)?;
    let aliases = virtual_aliases();
    let resolver = Resolvers::new();

    let mut graph = transform_graph(&layout, &aliases, &resolver, Lowering::None)?;
    // QuickJS resumes an `await` with no hook the guest sees, so AsyncLocalStorage could not
    // carry its store across one: an extension that imports node:async_hooks has its async
    // code lowered to generators, whose every step goes through Promise.prototype.then
    // (guest-shim/js/modules/async-lowering.js).
    if graph.uses_async_hooks {
        graph = transform_graph(&layout, &aliases, &resolver, Lowering::Async)?;
    }
    let Graph {
        entries,
        transformed,
        mut pi_versions,
        done,
        ..
    } = graph;
    let mut modules = assemble(transformed);

    let mut warnings = crate::missing_imports::fill_missing(&mut modules);
    // A single file's folder is not its own: only a package brings its files.
    let files = if layout.single_file {
        Vec::new()
    } else {
        // A code file the bundle did not take is data to the extension when its own code (not
        // its dependencies') names the file, as `new URL("./client/x.js", import.meta.url)` does.
        let own_code: Vec<&str> = modules
            .iter()
            .filter(|m| {
                m.id.starts_with("/ext/")
                    && !m.id.starts_with("/ext/_external/")
                    && !m.id.contains("/node_modules/")
            })
            .map(|m| m.code.as_str())
            .collect();
        let read_as_text = |path: &Path| {
            !done.contains_key(path)
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|name| own_code.iter().any(|code| code.contains(name)))
        };
        let (files, left_out) = crate::package_files::collect(&layout.root, &read_as_text);
        warnings.extend(
            left_out
                .into_iter()
                .map(|f| format!("a package file the extension cannot read at run time: {f}")),
        );
        files
    };

    // A single file is its own extension even inside a package; a package or folder is named
    // after package.json's name.
    let package = if layout.single_file {
        None
    } else {
        layout.package.clone()
    };
    let name = package
        .as_ref()
        .and_then(|p| p.name.clone())
        .or_else(|| {
            (!layout.single_file && layout.entries[0].file_stem().is_some_and(|s| s == "index"))
                .then(|| {
                    layout
                        .root
                        .file_name()
                        .map(|f| f.to_string_lossy().into_owned())
                })
                .flatten()
        })
        .unwrap_or_else(|| {
            // `x/index.ts` is named after its folder (a package's several entries often are).
            let stem = layout.entries[0].file_stem().map(|s| s.to_string_lossy());
            let folder = layout.entries[0].parent().and_then(Path::file_name);
            match (stem, folder) {
                (Some(s), Some(f)) if s == "index" => f.to_string_lossy().into_owned(),
                (Some(s), _) => s.into_owned(),
                _ => "extension".into(),
            }
        });
    let requested_capabilities = requested_capabilities(&layout, package.as_ref())?.to_value();
    // The package of a single file counts too: its dependencies are the file's.
    if let Some(package) = &layout.package {
        pi_versions.extend(package.pi_versions());
    }
    Ok(Bundle {
        pi_version: PiVersion::newest_said(pi_versions),
        entries,
        modules,
        version: package.as_ref().and_then(|p| p.version.clone()),
        package,
        requested_capabilities,
        name,
        input: std::path::absolute(input).unwrap_or_else(|_| input.to_path_buf()),
        root: layout.root.clone(),
        warnings,
        files,
    })
}

/// Which syntax the build rewrites into older syntax.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lowering {
    None,
    /// Async functions, async generators and `for await`, into generators and helper calls.
    Async,
}

/// Every module the entries reach, transformed.
struct Graph {
    entries: Vec<String>,
    transformed: Vec<(String, TransformedModule)>,
    pi_versions: Vec<PiVersion>,
    /// The files it took.
    done: HashMap<PathBuf, ()>,
    /// Some module imports node:async_hooks.
    uses_async_hooks: bool,
}

fn transform_graph(
    layout: &Layout,
    aliases: &BTreeMap<String, String>,
    resolver: &Resolvers,
    lowering: Lowering,
) -> Result<Graph, BuildError> {
    let mut ids = PackageScope::new(&layout.root);
    let entries: Vec<String> = layout.entries.iter().map(|e| ids.module_id(e)).collect();
    let mut queue: VecDeque<PathBuf> = layout.entries.iter().cloned().collect();
    let mut graph = Graph {
        entries,
        transformed: Vec::new(),
        pi_versions: Vec::new(),
        done: HashMap::new(),
        uses_async_hooks: false,
    };
    while let Some(path) = queue.pop_front() {
        if graph.done.insert(path.clone(), ()).is_some() {
            continue;
        }
        let module = transform_module(&path, layout, aliases, resolver, &mut ids, lowering)?;
        graph.pi_versions.extend(&module.pi_versions);
        graph.uses_async_hooks |= module.uses_async_hooks;
        for dep in &module.dependencies {
            if !graph.done.contains_key(dep) {
                queue.push_back(dep.clone());
            }
        }
        graph.transformed.push((ids.module_id(&path), module));
    }
    Ok(graph)
}

/// The bundled modules, each `require` now pointing at what its target turned out to be.
fn assemble(transformed: Vec<(String, TransformedModule)>) -> Vec<BundledModule> {
    let kinds: HashMap<String, commonjs::Kind> = transformed
        .iter()
        .map(|(id, m)| (id.clone(), m.shape.kind()))
        .collect();
    let mut modules = Vec::with_capacity(transformed.len());
    for (id, module) in transformed {
        let code = match module.shape {
            Shape::EsModule | Shape::Json => module.code,
            // On the first line, so the source map's lines stay where they were.
            Shape::EsModuleWithRequire(requires) => format!(
                "{} {}",
                commonjs::require_function(&requires, &kinds).replace('\n', " "),
                module.code
            ),
            Shape::CommonJs {
                requires,
                export_names,
            } => {
                for (id, code) in
                    commonjs::wrap(&id, &module.code, &requires, &export_names, &kinds)
                {
                    modules.push(BundledModule {
                        id,
                        code,
                        map: None,
                    });
                }
                continue;
            }
        };
        modules.push(BundledModule {
            id,
            code,
            map: module.map,
        });
    }
    modules
}

/// What the extension asks for: package.json's `pichamber.capabilities`, or an entry file's
/// `// pichamber.capabilities: {...}` line (one place, not both; in one entry of a package).
fn requested_capabilities(
    layout: &Layout,
    package: Option<&PackageInfo>,
) -> Result<pichamber_access::Requests, BuildError> {
    use pichamber_access::Requests;
    let declared = package
        .and_then(|p| p.pichamber.as_ref())
        .and_then(|p| p.get("capabilities"));
    let mut inline: Option<(&PathBuf, Requests)> = None;
    for entry in &layout.entries {
        let source = std::fs::read_to_string(entry).unwrap_or_default();
        let found = Requests::from_inline(&source).map_err(|(line, message)| BuildError {
            file: entry.display().to_string(),
            line,
            column: 1,
            message,
        })?;
        match (found, &inline) {
            (Some(_), Some((first, _))) => {
                return Err(plain_error(
                    entry,
                    format!(
                        "capabilities are requested in a comment here and in {}; a package asks once, in package.json (pichamber.capabilities)",
                        first.display()
                    ),
                ));
            }
            (Some(requests), None) => inline = Some((entry, requests)),
            (None, _) => {}
        }
    }
    match (declared, inline) {
        (Some(_), Some((entry, _))) => Err(plain_error(
            entry,
            "capabilities are requested both in package.json (pichamber.capabilities) and in a comment here; keep one",
        )),
        (Some(value), None) => Requests::parse(value).map_err(|e| {
            plain_error(
                &layout.root.join("package.json"),
                format!("pichamber.capabilities: {e}"),
            )
        }),
        (None, inline) => Ok(inline.map(|(_, r)| r).unwrap_or_default()),
    }
}

struct TransformedModule {
    code: String,
    map: Option<String>,
    dependencies: Vec<PathBuf>,
    /// The pi releases its imports name (type-only imports included: they say it too).
    pi_versions: Vec<PiVersion>,
    shape: Shape,
    uses_async_hooks: bool,
}

/// What a transformed module still needs once every module's kind is known: its `require`
/// reaches each dependency as that dependency's kind asks (see [`commonjs`]).
enum Shape {
    EsModule,
    /// An ES module calling a `require` it does not declare.
    EsModuleWithRequire(commonjs::Requires),
    CommonJs {
        requires: commonjs::Requires,
        export_names: Vec<String>,
    },
    Json,
}

impl Shape {
    fn kind(&self) -> commonjs::Kind {
        match self {
            Shape::EsModule | Shape::EsModuleWithRequire(_) => commonjs::Kind::EsModule,
            Shape::CommonJs { .. } => commonjs::Kind::CommonJs,
            Shape::Json => commonjs::Kind::Json,
        }
    }
}

fn line_col(source: &str, offset: u32) -> (usize, usize) {
    let before = &source[..(offset as usize).min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map(|i| before.len() - i)
        .unwrap_or(before.len() + 1);
    (line, column)
}

fn display_path(path: &Path, layout: &Layout) -> String {
    // Paths in messages are relative to where the user is, as compilers print them.
    let cwd = std::env::current_dir().ok();
    cwd.as_deref()
        .and_then(|c| path.strip_prefix(c).ok())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| {
            path.strip_prefix(layout.root.parent().unwrap_or(Path::new("/")))
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| path.display().to_string())
        })
}

/// Packages are resolved as Node resolves them: an `import` with the import conditions, a
/// `require` with the require conditions, so a package that ships both builds gives each
/// importer the build meant for it (its ES build has the named exports).
struct Resolvers {
    import: Resolver,
    require: Resolver,
}

impl Resolvers {
    fn new() -> Self {
        let options = |conditions: &[&str]| ResolveOptions {
            extensions: [
                ".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs", ".json",
            ]
            .map(String::from)
            .to_vec(),
            condition_names: conditions.iter().map(|c| (*c).to_owned()).collect(),
            main_fields: ["module", "main"].map(String::from).to_vec(),
            extension_alias: vec![
                (
                    ".js".into(),
                    vec![".ts".into(), ".tsx".into(), ".js".into()],
                ),
                (".mjs".into(), vec![".mts".into(), ".mjs".into()]),
            ],
            ..ResolveOptions::default()
        };
        let import = Resolver::new(options(&["import", "module", "node", "default"]));
        let require = import.clone_with_options(options(&["require", "node", "default"]));
        Self { import, require }
    }
}

fn transform_module(
    path: &Path,
    layout: &Layout,
    aliases: &BTreeMap<String, String>,
    resolver: &Resolvers,
    ids: &mut PackageScope,
    lowering: Lowering,
) -> Result<TransformedModule, BuildError> {
    let shown = display_path(path, layout);
    let source =
        std::fs::read_to_string(path).map_err(|e| plain_error(Path::new(&shown), e.to_string()))?;
    if path.extension().is_some_and(|e| e == "json") {
        let value: serde_json::Value = serde_json::from_str(&source).map_err(|e| BuildError {
            file: shown.clone(),
            line: e.line(),
            column: e.column(),
            message: format!("invalid JSON: {e}"),
        })?;
        return Ok(TransformedModule {
            code: format!("export default {value};\n"),
            map: None,
            dependencies: vec![],
            pi_versions: vec![],
            shape: Shape::Json,
            uses_async_hooks: false,
        });
    }

    let allocator = Allocator::default();
    let source_type = SourceType::from_path(path).unwrap_or_else(|_| SourceType::mjs());
    let source_type = if source_type.is_javascript() && !source_type.is_typescript() {
        source_type.with_module(true)
    } else {
        source_type
    };
    // The parser and every pass after it recurse once per level of nesting: a source nested
    // deeper than any real program is refused before it can overflow the stack.
    if let Err(offset) = check_nesting(&source) {
        let (line, column) = line_col(&source, offset as u32);
        return Err(BuildError {
            file: shown,
            line,
            column,
            message: format!(
                "brackets nest more than {MAX_NESTING} levels deep here; pichamber refuses sources nested this deep"
            ),
        });
    }
    let parsed = Parser::new(&allocator, &source, source_type).parse();
    if let Some(error) = first_error(&parsed.diagnostics, &source, &shown) {
        return Err(error);
    }
    let mut program = parsed.program;
    let has_module_syntax = parsed.module_record.has_module_syntax;
    let pi_versions: Vec<PiVersion> = parsed
        .module_record
        .requested_modules
        .keys()
        .filter_map(|specifier| PiVersion::of_specifier(specifier.as_str()))
        .collect();

    let scoping = SemanticBuilder::new()
        .build(&program)
        .semantic
        .into_scoping();
    // pi loads extensions with jiti, which gives ES modules a `require` too: one calling a
    // `require` it does not declare gets one here (its dependencies imported statically).
    let esm_require =
        has_module_syntax && scoping.root_unresolved_references().contains_key("require");
    let mut options = TransformOptions::default();
    if lowering == Lowering::Async {
        options.env.es2017.async_to_generator = true;
        options.env.es2018.async_generator_functions = true;
        // `babelHelpers.NAME`: a global the guest defines, so any module shape can call it.
        options.helper_loader.mode = HelperLoaderMode::External;
    }
    let transformed =
        Transformer::new(&allocator, path, &options).build_with_scoping(scoping, &mut program);
    if let Some(error) = first_error(&transformed.diagnostics, &source, &shown) {
        return Err(error);
    }

    let is_cjs = !has_module_syntax && looks_commonjs(path, &source, layout);

    let mut rewriter = SpecifierRewriter {
        allocator: &allocator,
        importer: path,
        aliases,
        resolver,
        ids,
        source: &source,
        shown: &shown,
        dependencies: Vec::new(),
        requires: Vec::new(),
        error: None,
        in_cjs: is_cjs || esm_require,
        try_depth: 0,
        optional: HashSet::new(),
        missing: Vec::new(),
        uses_async_hooks: false,
    };
    rewriter.visit_program(&mut program);
    // A require outside try that did not resolve fails the build, unless the module treats
    // that name as optional elsewhere (required, or probed with require.resolve, inside try).
    // An ES module's `require` was no part of Node's contract: one that does not resolve
    // throws MODULE_NOT_FOUND when it runs instead of failing the build.
    let missing = std::mem::take(&mut rewriter.missing);
    for (offset, specifier, message) in missing {
        if is_cjs && !rewriter.optional.contains(&specifier) {
            rewriter.fail(
                offset,
                format!("{message} (a require outside try/catch must resolve)"),
            );
        }
    }
    if let Some(error) = rewriter.error {
        return Err(error);
    }
    let dependencies = rewriter.dependencies;
    let requires = rewriter.requires;
    let uses_async_hooks = rewriter.uses_async_hooks;
    let id = ids.module_id(path);
    let generated = Codegen::new()
        .with_options(oxc_codegen::CodegenOptions {
            source_map_path: Some(PathBuf::from(&id)),
            ..Default::default()
        })
        .build(&program);
    let code = generated.code;
    // A CommonJS wrapper shifts lines; its positions are not mapped.
    let map = (!is_cjs).then(|| {
        generated.map.map(|mut m| {
            m.set_sources([id.as_str()]);
            m.to_json_string()
        })
    });
    let map = map.flatten();

    let shape = if is_cjs {
        Shape::CommonJs {
            requires,
            export_names: commonjs::export_names(&program),
        }
    } else if esm_require {
        Shape::EsModuleWithRequire(requires)
    } else {
        Shape::EsModule
    };
    Ok(TransformedModule {
        code,
        map,
        dependencies,
        pi_versions,
        shape,
        uses_async_hooks,
    })
}

/// How deep `(`, `[`, `{` and template `${` may nest in one source file.
pub const MAX_NESTING: usize = 512;

/// Finds where brackets first nest deeper than [`MAX_NESTING`], reading the source as a
/// tolerant JavaScript lexer: strings, template literals, comments and regular expressions
/// (told from division by the token before them) are skipped, so brackets inside them do not
/// count. An approximation is enough: real code nests a few dozen levels.
fn check_nesting(source: &str) -> Result<(), usize> {
    let bytes = source.as_bytes();
    // Open brackets; `true` for a template's `${`, whose `}` returns to the template.
    let mut stack: Vec<bool> = Vec::new();
    // Whether a `/` here starts a regular expression (no value just before it).
    let mut regex_allowed = true;
    let mut i = 0;
    let skip_string = |i: &mut usize, quote: u8| {
        *i += 1;
        while *i < bytes.len() && bytes[*i] != quote && bytes[*i] != b'\n' {
            *i += if bytes[*i] == b'\\' { 2 } else { 1 };
        }
        *i += 1;
    };
    // Skips template text up to its end (`) or to a `${`; true when it stopped at `${`.
    let skip_template = |i: &mut usize| -> bool {
        while *i < bytes.len() {
            match bytes[*i] {
                b'\\' => *i += 2,
                b'`' => {
                    *i += 1;
                    return false;
                }
                b'$' if bytes.get(*i + 1) == Some(&b'{') => {
                    *i += 2;
                    return true;
                }
                _ => *i += 1,
            }
        }
        false
    };
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'/' if regex_allowed => {
                i += 1;
                let mut class = false;
                while i < bytes.len() && bytes[i] != b'\n' {
                    match bytes[i] {
                        b'\\' => i += 1,
                        b'[' => class = true,
                        b']' => class = false,
                        b'/' if !class => break,
                        _ => {}
                    }
                    i += 1;
                }
                i += 1;
                regex_allowed = false;
                continue;
            }
            b'\'' | b'"' => {
                skip_string(&mut i, c);
                regex_allowed = false;
                continue;
            }
            b'`' => {
                i += 1;
                if skip_template(&mut i) {
                    stack.push(true);
                    regex_allowed = true;
                } else {
                    regex_allowed = false;
                }
            }
            b'(' | b'[' | b'{' => {
                stack.push(false);
                regex_allowed = true;
                i += 1;
            }
            b')' | b']' | b'}' => {
                let template = stack.pop().unwrap_or(false);
                i += 1;
                if c == b'}' && template {
                    if skip_template(&mut i) {
                        stack.push(true);
                        regex_allowed = true;
                        if stack.len() > MAX_NESTING {
                            return Err(i);
                        }
                    } else {
                        regex_allowed = false;
                    }
                    continue;
                }
                regex_allowed = c == b'}';
                continue;
            }
            _ if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$')
                {
                    i += 1;
                }
                // After a value a `/` divides; after these keywords it starts a regex.
                regex_allowed = matches!(
                    &source[start..i],
                    "return"
                        | "typeof"
                        | "instanceof"
                        | "in"
                        | "of"
                        | "new"
                        | "delete"
                        | "void"
                        | "throw"
                        | "case"
                        | "do"
                        | "else"
                        | "yield"
                        | "await"
                );
                continue;
            }
            _ if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            _ => {
                regex_allowed = true;
                i += 1;
                continue;
            }
        }
        if stack.len() > MAX_NESTING {
            return Err(i);
        }
    }
    Ok(())
}

/// The first error among oxc's diagnostics, at its position in `source`.
fn first_error(
    diagnostics: &[oxc_diagnostics::OxcDiagnostic],
    source: &str,
    shown: &str,
) -> Option<BuildError> {
    let error = diagnostics
        .iter()
        .find(|d| d.severity == oxc_diagnostics::Severity::Error)?;
    let offset = error.labels.first().map(|l| l.offset()).unwrap_or(0);
    let (line, column) = line_col(source, offset);
    Some(BuildError {
        file: shown.to_owned(),
        line,
        column,
        message: error.message.to_string(),
    })
}

fn looks_commonjs(path: &Path, source: &str, layout: &Layout) -> bool {
    if path.extension().is_some_and(|e| e == "cjs") {
        return true;
    }
    if path.extension().is_some_and(|e| e == "mjs" || e == "mts") {
        return false;
    }
    // A file of a package with "type": "module" is ESM even without import/export.
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d.join("package.json").is_file() {
            if let Ok(Some(pkg)) = read_package(d)
                && pkg.module_type.as_deref() == Some("module")
            {
                return false;
            }
            break;
        }
        if d == layout.root {
            break;
        }
        dir = d.parent();
    }
    source.contains("require(") || source.contains("exports")
}

struct SpecifierRewriter<'a, 'b> {
    allocator: &'a Allocator,
    importer: &'b Path,
    aliases: &'b BTreeMap<String, String>,
    resolver: &'b Resolvers,
    ids: &'b mut PackageScope,
    source: &'b str,
    shown: &'b str,
    dependencies: Vec<PathBuf>,
    /// `require("x")` calls of a CommonJS module: specifier and, when it resolved, its target.
    requires: commonjs::Requires,
    error: Option<BuildError>,
    in_cjs: bool,
    /// How many `try` blocks the visitor is inside: a `require` there may be optional.
    try_depth: usize,
    /// Specifiers this module requires or probes (`require.resolve`) inside `try`.
    optional: HashSet<String>,
    /// Requires outside `try` that did not resolve: offset, specifier, why.
    missing: Vec<(u32, String, String)>,
    uses_async_hooks: bool,
}

/// Why a specifier did not give a module.
enum Unresolved {
    /// Nothing answers to it (no such file or package, a builtin pichamber lacks): an
    /// optional `require` inside `try` tolerates it, as Node does at run time.
    Missing(String),
    /// It names a file the build may not read (see [`PackageScope`]): never tolerated.
    Refused(String),
}

impl<'a> SpecifierRewriter<'a, '_> {
    /// Resolves one specifier to a canonical id (and records file dependencies); `required`:
    /// it is a `require`'s.
    fn resolve(&mut self, specifier: &str, required: bool) -> Result<String, Unresolved> {
        if let Some(id) = self.aliases.get(specifier) {
            self.uses_async_hooks |= id == ASYNC_HOOKS_ID;
            return Ok(id.clone());
        }
        if let Some(builtin) = specifier.strip_prefix("node:") {
            return Err(Unresolved::Missing(format!(
                "node:{builtin} is not available inside a pichamber extension (available: {})",
                self.aliases
                    .keys()
                    .filter(|k| k.starts_with("node:"))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        for prefix in ["@mariozechner/", "@earendil-works/"] {
            if specifier.starts_with(prefix) {
                return Err(Unresolved::Missing(format!(
                    "'{specifier}' is not provided by pichamber; import the package root instead"
                )));
            }
        }
        let dir = self.importer.parent().unwrap_or(Path::new("/"));
        // An import of a package that ships only a `require` build still loads under pi's
        // jiti: the require conditions are the import's fallback.
        let resolved = if required {
            self.resolver.require.resolve(dir, specifier)
        } else {
            self.resolver
                .import
                .resolve(dir, specifier)
                .or_else(|e| self.resolver.require.resolve(dir, specifier).map_err(|_| e))
        };
        match resolved {
            Ok(resolution) => {
                self.ids
                    .admit(self.importer, specifier, resolution.path())
                    .map_err(Unresolved::Refused)?;
                let path = resolution.full_path();
                let id = self.ids.module_id(&path);
                self.dependencies.push(path);
                Ok(id)
            }
            Err(e) => Err(Unresolved::Missing(format!(
                "cannot resolve '{specifier}': {e}"
            ))),
        }
    }

    fn rewrite(&mut self, literal: &mut StringLiteral<'a>) {
        if self.error.is_some() {
            return;
        }
        match self.resolve(literal.value.as_str(), false) {
            Ok(id) => {
                let id: &'a str = self.allocator.alloc_str(&id);
                literal.value = id.into();
                literal.raw = None;
            }
            Err(Unresolved::Missing(message) | Unresolved::Refused(message)) => {
                self.fail(literal.span.start, message);
            }
        }
    }

    fn fail(&mut self, offset: u32, message: String) {
        if self.error.is_none() {
            let (line, column) = line_col(self.source, offset);
            self.error = Some(BuildError {
                file: self.shown.to_owned(),
                line,
                column,
                message,
            });
        }
    }
}

impl<'a> VisitMut<'a> for SpecifierRewriter<'a, '_> {
    fn visit_program(&mut self, program: &mut Program<'a>) {
        for statement in program.body.iter_mut() {
            if let Some(decl) = statement.as_module_declaration_mut() {
                match decl {
                    ModuleDeclaration::ImportDeclaration(d) => self.rewrite(&mut d.source),
                    ModuleDeclaration::ExportAllDeclaration(d) => self.rewrite(&mut d.source),
                    ModuleDeclaration::ExportFromDeclaration(d) => self.rewrite(&mut d.source),
                    _ => {}
                }
            }
        }
        walk_mut::walk_program(self, program);
    }

    fn visit_import_expression(&mut self, it: &mut ImportExpression<'a>) {
        if let Expression::StringLiteral(literal) = &mut it.source {
            self.rewrite(literal);
        }
        walk_mut::walk_import_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &mut CallExpression<'a>) {
        let is_require = matches!(&it.callee, Expression::Identifier(id) if id.name == "require");
        if is_require
            && self.in_cjs
            && it.arguments.len() == 1
            && let Some(Argument::StringLiteral(literal)) = it.arguments.first()
        {
            let (specifier, offset) = (literal.value.to_string(), literal.span.start);
            if !self.requires.iter().any(|(s, _)| *s == specifier) {
                if self.try_depth > 0 {
                    self.optional.insert(specifier.clone());
                }
                let target = match self.resolve(&specifier, true) {
                    Ok(id) => Some(id),
                    // An optional dependency (`try { require("x") } catch {}`) throws
                    // MODULE_NOT_FOUND when it runs, as in Node.
                    Err(Unresolved::Missing(_)) if self.try_depth > 0 => None,
                    Err(Unresolved::Missing(message)) => {
                        self.missing.push((offset, specifier.clone(), message));
                        None
                    }
                    Err(Unresolved::Refused(message)) => {
                        self.fail(offset, message);
                        None
                    }
                };
                self.requires.push((specifier, target));
            }
        }
        // `try { require.resolve("x") } catch {}`: the module probes for x, so x is optional.
        if self.in_cjs
            && self.try_depth > 0
            && let Expression::StaticMemberExpression(member) = &it.callee
            && matches!(&member.object, Expression::Identifier(id) if id.name == "require")
            && member.property.name == "resolve"
            && let Some(Argument::StringLiteral(literal)) = it.arguments.first()
        {
            self.optional.insert(literal.value.to_string());
        }
        walk_mut::walk_call_expression(self, it);
    }

    /// `new Worker(new URL("./worker.mjs", import.meta.url))`: the worker's file is part of
    /// the extension, bundled like an import, and named by its id (node:worker_threads starts
    /// it by that id).
    fn visit_new_expression(&mut self, it: &mut NewExpression<'a>) {
        let is_worker = match &it.callee {
            Expression::Identifier(id) => id.name == "Worker",
            Expression::StaticMemberExpression(member) => member.property.name == "Worker",
            _ => false,
        };
        if is_worker
            && let Some(Argument::NewExpression(url)) = it.arguments.first_mut()
            && matches!(&url.callee, Expression::Identifier(id) if id.name == "URL")
            && url.arguments.len() == 2
            && matches!(&url.arguments[1], Argument::StaticMemberExpression(m)
                if m.property.name == "url" && matches!(&m.object, Expression::ImportMeta(_)))
            && let Some(Argument::StringLiteral(literal)) = url.arguments.first_mut()
            && literal.value.starts_with('.')
        {
            self.rewrite(literal);
        }
        walk_mut::walk_new_expression(self, it);
    }

    fn visit_try_statement(&mut self, it: &mut TryStatement<'a>) {
        self.try_depth += 1;
        self.visit_block_statement(&mut it.block);
        self.try_depth -= 1;
        if let Some(handler) = &mut it.handler {
            self.visit_catch_clause(handler);
        }
        if let Some(finalizer) = &mut it.finalizer {
            self.visit_block_statement(finalizer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nesting_is_counted_outside_strings_comments_templates_and_regexes() {
        let deep = |n: usize| format!("x = {}1{};", "[".repeat(n), "]".repeat(n));
        assert_eq!(check_nesting(&deep(MAX_NESTING)), Ok(()));
        assert!(check_nesting(&deep(MAX_NESTING + 1)).is_err());
        let braces = "{".repeat(MAX_NESTING + 10);
        for quiet in [
            format!("'{braces}'"),
            format!("\"{braces}\""),
            format!("// {braces}\n"),
            format!("/* {braces} */"),
            format!("`{braces}`"),
            format!("const r = /{braces}/;"),
            format!("x = a / b; y = /[{braces}]/g;"),
        ] {
            assert_eq!(check_nesting(&quiet), Ok(()), "{quiet}");
        }
        // Template substitutions nest like brackets.
        let nested = format!(
            "{}x{}",
            "`${".repeat(MAX_NESTING + 1),
            "}`".repeat(MAX_NESTING + 1)
        );
        assert!(check_nesting(&nested).is_err());
        assert_eq!(
            check_nesting("a = `x${ {b: [1]} }y${c}`; d = e / f / g;"),
            Ok(())
        );
    }
}

#[cfg(test)]
mod pi_version_tests {
    use super::*;

    fn written_for(files: &[(&str, &str)]) -> Option<PiVersion> {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        bundle(&dir.path().join("index.ts")).unwrap().pi_version
    }

    #[test]
    fn an_extension_is_written_for_the_scope_it_imports_even_only_types_from() {
        let old = "import type { ExtensionAPI } from \"@mariozechner/pi-coding-agent\";\nexport default (pi: ExtensionAPI) => {};\n";
        assert_eq!(written_for(&[("index.ts", old)]), Some(PiVersion::V0_73));
        let new = "import { Type } from \"@earendil-works/pi-ai\";\nexport default () => Type;\n";
        assert_eq!(written_for(&[("index.ts", new)]), Some(PiVersion::V1_6));
        assert_eq!(
            written_for(&[("index.ts", "export default () => {};\n")]),
            None
        );
        // A package says it by its dependencies; the newest named wins.
        let package =
            r#"{"name": "x", "peerDependencies": {"@earendil-works/pi-coding-agent": "*"}}"#;
        assert_eq!(
            written_for(&[("index.ts", old), ("package.json", package)]),
            Some(PiVersion::V1_6)
        );
    }
}

#[cfg(test)]
mod resolution_tests {
    use super::*;

    /// `index.ts` among `files` (written to a folder of their own), bundled.
    pub(super) fn bundle_of(files: &[(&str, &str)]) -> Bundle {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        bundle(&dir.path().join("index.ts")).unwrap_or_else(|e| panic!("{e:?}"))
    }

    /// The ids of what bundling `index.ts` among `files` took in.
    fn bundled(files: &[(&str, &str)]) -> Vec<String> {
        bundle_of(files).modules.into_iter().map(|m| m.id).collect()
    }

    const DUAL: &str = r#"{"name": "dual", "exports": {".": {
        "require": {"default": "./index.cjs"}, "import": {"default": "./index.mjs"}}}}"#;

    #[test]
    fn an_import_takes_a_dual_packages_es_build_and_a_require_its_commonjs_build() {
        let files = [
            ("package.json", r#"{"name": "x", "type": "module"}"#),
            ("node_modules/dual/package.json", DUAL),
            (
                "node_modules/dual/index.cjs",
                "exports.format = () => 'cjs';\n",
            ),
            (
                "node_modules/dual/index.mjs",
                "export const format = () => 'esm';\n",
            ),
        ];
        let imported = bundled(
            &[
                files.as_slice(),
                &[(
                    "index.ts",
                    "import { format } from 'dual';\nexport default () => format;\n",
                )],
            ]
            .concat(),
        );
        assert!(
            imported.iter().any(|id| id.ends_with("dual/index.mjs")),
            "{imported:?}"
        );
        assert!(
            !imported.iter().any(|id| id.ends_with("dual/index.cjs")),
            "{imported:?}"
        );
        let required = bundled(
            &[
                files.as_slice(),
                &[(
                    "index.ts",
                    "const { format } = require('dual');\nexport default () => format;\n",
                )],
            ]
            .concat(),
        );
        assert!(
            required.iter().any(|id| id.ends_with("dual/index.cjs")),
            "{required:?}"
        );
    }

    #[test]
    fn an_es_modules_require_gets_its_dependencies_and_a_missing_one_fails_only_when_called() {
        let ids = bundled(&[
            ("helper.cjs", "module.exports = { v: 1 };\n"),
            (
                "index.ts",
                "import { join } from 'node:path';\nconst h = require('./helper.cjs');\nexport default () => [join, h, require('nope')];\n",
            ),
        ]);
        assert!(ids.iter().any(|id| id.ends_with("/helper.cjs")), "{ids:?}");
        // A module that declares its own `require` is left alone.
        let own = bundled(&[(
            "index.ts",
            "import { createRequire } from 'node:module';\nconst require = createRequire(import.meta.url);\nexport default () => require('nope');\n",
        )]);
        assert_eq!(own.len(), 1, "{own:?}");
    }

    #[test]
    fn an_import_of_a_package_with_only_a_require_build_still_resolves() {
        let ids = bundled(&[
            (
                "node_modules/old/package.json",
                r#"{"name": "old", "exports": {"require": "./main.js"}}"#,
            ),
            ("node_modules/old/main.js", "module.exports = { v: 1 };\n"),
            (
                "index.ts",
                "import old from 'old';\nexport default () => old;\n",
            ),
        ]);
        assert!(ids.iter().any(|id| id.ends_with("old/main.js")), "{ids:?}");
    }

    fn package(files: &[(&str, &str)]) -> (tempfile::TempDir, Result<Bundle, BuildError>) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let built = bundle(dir.path());
        (dir, built)
    }

    #[test]
    fn a_packages_extensions_build_into_one_bundle_in_pis_order() {
        let manifest = r#"{"name": "trio", "pi": {"extensions": ["./z.ts", "./extensions/*.ts", "!**/old.ts"]}}"#;
        let top = "import { shared } from \"./lib/shared.ts\";\nexport default () => shared;\n";
        let ext = "import { shared } from \"../lib/shared.ts\";\nexport default () => shared;\n";
        let (_dir, built) = package(&[
            ("package.json", manifest),
            ("z.ts", top),
            ("extensions/b.ts", ext),
            ("extensions/a.ts", ext),
            ("extensions/old.ts", ext),
            ("lib/shared.ts", "export const shared = 1;\n"),
        ]);
        let built = built.unwrap();
        assert_eq!(
            built.entries,
            ["/ext/z.ts", "/ext/extensions/a.ts", "/ext/extensions/b.ts"]
        );
        assert_eq!(built.name, "trio");
        // What the extensions share is one module of the bundle.
        let ids: Vec<&str> = built.modules.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(
            ids.iter().filter(|id| **id == "/ext/lib/shared.ts").count(),
            1
        );
        assert!(!ids.contains(&"/ext/extensions/old.ts"));
    }

    #[test]
    fn a_package_entry_that_is_missing_or_asks_twice_fails_the_build_and_says_where() {
        let (_dir, built) = package(&[
            (
                "package.json",
                r#"{"pi": {"extensions": ["./a.ts", "./gone.ts"]}}"#,
            ),
            ("a.ts", "export default () => {};\n"),
        ]);
        let error = built.unwrap_err();
        assert!(error.file.ends_with("package.json"), "{error}");
        assert!(
            error
                .message
                .contains("\"./gone.ts\", which does not exist"),
            "{error}"
        );

        let asks = "// pichamber.capabilities: {\"read\": [\"/data\"]}\nexport default () => {};\n";
        let (_dir, built) = package(&[
            (
                "package.json",
                r#"{"pi": {"extensions": ["./a.ts", "./b.ts"]}}"#,
            ),
            ("a.ts", asks),
            ("b.ts", asks),
        ]);
        let error = built.unwrap_err();
        assert!(error.file.ends_with("b.ts"), "{error}");
        assert!(error.message.contains("a package asks once"), "{error}");
    }

    #[test]
    fn a_workers_module_named_by_url_is_bundled_and_named_by_its_id() {
        let (_dir, built) = package(&[
            (
                "index.ts",
                "import { Worker } from \"node:worker_threads\";\n\
                 export default () => new Worker(new URL(\"./work/w.ts\", import.meta.url));\n",
            ),
            (
                "work/w.ts",
                "import { parentPort } from \"node:worker_threads\";\nparentPort?.postMessage(1);\n",
            ),
        ]);
        let built = built.unwrap();
        let ids: Vec<&str> = built.modules.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["/ext/index.ts", "/ext/work/w.ts"]);
        assert!(
            built.modules[0]
                .code
                .contains("new URL(\"/ext/work/w.ts\", import.meta.url)"),
            "{}",
            built.modules[0].code
        );
    }
}

#[cfg(test)]
mod lowering_tests {
    /// Each module's code after bundling `index.ts` among `files`.
    fn codes(files: &[(&str, &str)]) -> Vec<String> {
        super::resolution_tests::bundle_of(files)
            .modules
            .into_iter()
            .map(|m| m.code)
            .collect()
    }

    const ASYNC_CODE: &str = "export async function f() { await 1; }\nexport async function* g() { for await (const x of []) yield x; }\n";

    #[test]
    fn async_code_is_lowered_in_every_module_once_one_imports_async_hooks() {
        // Without node:async_hooks anywhere, QuickJS runs async code natively.
        let plain = codes(&[
            ("lib.ts", ASYNC_CODE),
            (
                "index.ts",
                "import { f } from './lib.ts';\nexport default () => f;\n",
            ),
        ]);
        assert!(
            plain.iter().all(|c| !c.contains("babelHelpers")),
            "{plain:?}"
        );
        assert!(
            plain.iter().any(|c| c.contains("async function f")),
            "{plain:?}"
        );
        // A dependency importing it (here a CommonJS one, by require) lowers the entry's
        // async code too: the store must survive every await between run() and getStore().
        let lowered = codes(&[
            ("lib.ts", ASYNC_CODE),
            (
                "store.cjs",
                "const { AsyncLocalStorage } = require('node:async_hooks');\nmodule.exports = new AsyncLocalStorage();\nmodule.exports.later = async () => { await 0; };\n",
            ),
            (
                "index.ts",
                "import { f, g } from './lib.ts';\nimport store from './store.cjs';\nexport default async () => { await f(); return [g, store]; };\n",
            ),
        ]);
        let all = lowered.join("\n");
        assert!(!all.contains("async "), "{all}");
        assert!(!all.contains("await "), "{all}");
        for helper in ["asyncToGenerator", "wrapAsyncGenerator", "asyncIterator"] {
            assert!(
                all.contains(&format!("babelHelpers.{helper}(")),
                "{helper}: {all}"
            );
        }
    }
}
