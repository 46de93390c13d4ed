//! Differential test of the built-in tools: every case runs in pi's own tool definitions
//! (tests/oracle/builtin-tools.mjs, under Node; pi 0.73.1, then pi 1.6.0) and in pichamber's
//! `tools::execute_with` following that release, each on its own copy of the same fixture. The results (`content` and
//! `details`, or the error text, and the first and last partial result) must be equal after replacing each side's root directory
//! with `<ROOT>` and bash's temp-file ids, and the fixture trees must be equal afterwards
//! (edits and writes).
//!
//! Where rg (>= 14) or fd (>= 9) is not on PATH, pi cannot run grep or find as it does with
//! the releases it downloads; those cases are then skipped with a message (`cargo install
//! ripgrep fd-find` provides both). Without real pi (`npm ci --prefix tests/oracle`) the whole test
//! is skipped, except under CI, which installs it. `BUILTIN_TOOLS_SHOW=1` prints pi's result
//! for every case.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use pichamber_tools::{self as tools, Workspace};
use serde_json::{Value, json};

/// A valid 3x2 PNG.
const PNG: &str = "89504e470d0a1a0a0000000d49484452000000030000000208020000001216f14d0000001049444154789c63f8cfc000410c70160041d205fb87f0b9480000000049454e44ae426082";
/// A valid 1x1 GIF.
const GIF: &str =
    "47494638396101000100800000000000ffffff21f90401000000002c00000000010001000002024401003b";
/// A valid 3x2 lossless WebP.
const WEBP: &str = "524946466e000000574542505650384c620000002f02400010cd552022021e4800000000008000000000000000000000000000000000000000000000000000000000000000000400000f240000000000e0fc030000000000000000000000000000000000000000000000000000000000000023520200";
/// A valid 1x1 24-bit BMP (one white pixel).
const BMP: &str = "424d3a000000000000003600000028000000010000000100000001001800000000000400000000000000000000000000000000000000ffffff00";
/// A valid 3x2 JPEG.
const JPEG: &str = "ffd8ffe000104a46494600010200000100010000ffc00011080002000303011100021101031101ffdb00430006040506050406060506070706080a100a0a09090a140e0f0c1017141818171416161a1d251f1a1b231c1616202c20232627292a29191f2d302d283025282928ffdb0043010707070a080a130a0a13281a161a2828282828282828282828282828282828282828282828282828282828282828282828282828282828282828282828282828ffc4001f0000010501010101010100000000000000000102030405060708090a0bffc400b5100002010303020403050504040000017d01020300041105122131410613516107227114328191a1082342b1c11552d1f02433627282090a161718191a25262728292a3435363738393a434445464748494a535455565758595a636465666768696a737475767778797a838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae1e2e3e4e5e6e7e8e9eaf1f2f3f4f5f6f7f8f9faffc4001f0100030101010101010101010000000000000102030405060708090a0bffc400b51100020102040403040705040400010277000102031104052131061241510761711322328108144291a1b1c109233352f0156272d10a162434e125f11718191a262728292a35363738393a434445464748494a535455565758595a636465666768696a737475767778797a82838485868788898a92939495969798999aa2a3a4a5a6a7a8a9aab2b3b4b5b6b7b8b9bac2c3c4c5c6c7c8c9cad2d3d4d5d6d7d8d9dae2e3e4e5e6e7e8e9eaf2f3f4f5f6f7f8f9faffda000c03010002110311003f00f3aaf8d3fa44ffd9";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Which fixture a case starts from.
#[derive(Clone, Copy)]
enum Fixture {
    Plain,
    /// Plain plus a `.git` directory: gitignore rules apply to grep too.
    GitRepo,
    /// Plain plus a directory of 510 files (more than ls lists by default).
    Crowded,
}

/// A flat 3000x1000 PNG: past pi's 2000x2000, so both sides scale it (and keep it a PNG).
fn wide_png() -> &'static [u8] {
    static PNG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PNG.get_or_init(|| {
        let image = image::RgbaImage::from_pixel(3000, 1000, image::Rgba([40, 90, 200, 255]));
        let mut out = Vec::new();
        image::DynamicImage::ImageRgba8(image)
            .write_to(&mut std::io::Cursor::new(&mut out), image::ImageFormat::Png)
            .unwrap();
        out
    })
}

fn build_fixture(dir: &Path, fixture: Fixture) {
    let file = |rel: &str, bytes: &[u8]| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    };
    file("notes.txt", b"alpha\nbeta\ngamma\ndelta\n");
    file("crlf.txt", b"one\r\ntwo\r\nthree\r\n");
    file("bom.txt", "\u{FEFF}first\nsecond\n".as_bytes());
    file("empty.txt", b"");
    let many: Vec<String> = (1..=2500).map(|i| format!("line {i}")).collect();
    file("many.txt", many.join("\n").as_bytes());
    let wide: Vec<String> = (0..100)
        .map(|i| format!("{i:03}{}", "x".repeat(997)))
        .collect();
    file("wide.txt", wide.join("\n").as_bytes());
    file("huge-line.txt", "y".repeat(60 * 1024).as_bytes());
    let limit: String = (1..=2000).map(|i| format!("{i}\n")).collect();
    file("lines2000.txt", limit.as_bytes());
    file("invalid.txt", b"ok \xff\xfe bad\nnext\n");
    file(
        "quotes.txt",
        "say \u{201C}hello\u{201D}   \nand \u{2018}bye\u{2019}\nend\n".as_bytes(),
    );
    file("dots.txt", b"a.b\naxb\n");
    file("image.png", &hex(PNG));
    file("image.gif", &hex(GIF));
    file("image.webp", &hex(WEBP));
    file("image.jpg", &hex(JPEG));
    file("image.bmp", &hex(BMP));
    file("image-wide.png", wide_png());
    file("fake.gif", b"GIF is a format\n");
    file("bin.dat", b"match\x00binary\n");
    file(
        "src/app.ts",
        b"export function app() {\n  return util();\n}\n",
    );
    file(
        "src/app.spec.ts",
        b"import { app } from './app';\nexport const t = app();\n",
    );
    file(
        "src/lib/util.ts",
        b"export function util() {\n  return 42;\n}\n",
    );
    file("src/lib/Extra.TS", b"export const extra = 1;\n");
    file("docs/guide.md", b"# Guide\nalpha docs\n");
    file(".env", b"SECRET=1\n");
    file(".hidden/config.json", b"{\"alpha\": true}\n");
    file(".gitignore", b"build/\n*.log\n");
    file("build/out.js", b"console.log('out');\n");
    file("debug.log", b"out of memory\n");
    for name in ["Zeta.md", "_underscore", "a-b", "a_b", "a.b", "\u{E9}clair"] {
        file(&format!("names/{name}"), b"");
    }
    std::fs::create_dir_all(dir.join("empty-dir")).unwrap();
    std::os::unix::fs::symlink("src", dir.join("linkdir")).unwrap();
    std::os::unix::fs::symlink("nowhere", dir.join("dangling")).unwrap();
    file("spaces.txt", b"keep  \nthese\t\nlines\n");
    file(
        "typography.txt",
        "wait\u{2026} a \u{FB01}le\nnext\n".as_bytes(),
    );
    file("ctx.txt", b"hit first\nb\nc\nd\nhit last\n");
    file(".ignore", b"ignored-by-dot-ignore.txt\n");
    file("ignored-by-dot-ignore.txt", b"alpha hidden by .ignore\n");
    match fixture {
        Fixture::Plain => {}
        Fixture::GitRepo => file(".git/HEAD", b"ref: refs/heads/main\n"),
        Fixture::Crowded => {
            for i in 0..510 {
                file(&format!("crowd/f{i:03}.txt"), b"");
            }
        }
    }
}

struct Case {
    tool: &'static str,
    args: Value,
    fixture: Fixture,
    /// rg and fd print in whatever order their threads finish: compare sorted lines.
    unordered: bool,
}

fn case(tool: &'static str, args: Value) -> Case {
    Case {
        tool,
        args,
        fixture: Fixture::Plain,
        unordered: false,
    }
}

fn unordered(tool: &'static str, args: Value) -> Case {
    Case {
        unordered: true,
        ..case(tool, args)
    }
}

fn cases() -> Vec<Case> {
    vec![
        // read
        case("read", json!({"path": "notes.txt"})),
        case(
            "read",
            json!({"path": "notes.txt", "offset": 2, "limit": 2}),
        ),
        case("read", json!({"path": "notes.txt", "offset": 3})),
        case("read", json!({"path": "notes.txt", "offset": 10})),
        case("read", json!({"path": "notes.txt", "limit": 0})),
        case("read", json!({"path": "many.txt"})),
        case("read", json!({"path": "many.txt", "offset": 2400})),
        case(
            "read",
            json!({"path": "many.txt", "offset": 100, "limit": 3}),
        ),
        case("read", json!({"path": "wide.txt"})),
        case("read", json!({"path": "huge-line.txt"})),
        case("read", json!({"path": "crlf.txt"})),
        case("read", json!({"path": "bom.txt"})),
        case("read", json!({"path": "empty.txt"})),
        case("read", json!({"path": "invalid.txt"})),
        case("read", json!({"path": "image.png"})),
        case("read", json!({"path": "image.gif"})),
        case("read", json!({"path": "image.webp"})),
        case("read", json!({"path": "image.jpg"})),
        case("read", json!({"path": "fake.gif"})),
        case("read", json!({"path": "missing.txt"})),
        case("read", json!({"path": "src"})),
        case("read", json!({"path": "@notes.txt"})),
        case("read", json!({"path": "<ROOT>/notes.txt"})),
        case("read", json!({"path": "linkdir/app.ts"})),
        case("read", json!({"path": "./src/../notes.txt"})),
        case(
            "read",
            json!({"path": "notes.txt", "offset": 0, "limit": 1}),
        ),
        case(
            "read",
            json!({"path": "notes.txt", "offset": 9, "limit": 1}),
        ),
        case(
            "read",
            json!({"path": "notes.txt", "offset": 2, "limit": -1}),
        ),
        case(
            "read",
            json!({"path": "notes.txt", "offset": 1.5, "limit": 2}),
        ),
        case("read", json!({"path": ""})),
        case("read", json!({"path": "dangling"})),
        // bash
        case("bash", json!({"command": "echo hello"})),
        case("bash", json!({"command": "echo err >&2"})),
        case("bash", json!({"command": "printf 'a\\nb'"})),
        case("bash", json!({"command": "exit 3"})),
        case("bash", json!({"command": "echo partial; exit 2"})),
        case("bash", json!({"command": "true"})),
        case("bash", json!({"command": "pwd; ls"})),
        case("bash", json!({"command": "seq 1 3000"})),
        case(
            "bash",
            json!({"command": "head -c 60000 /dev/zero | tr '\\0' a"}),
        ),
        case("bash", json!({"command": "yes abcdefghij | head -c 80000"})),
        case(
            "bash",
            json!({"command": "echo before; sleep 5", "timeout": 1}),
        ),
        // edit
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "BETA"}]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [
                {"oldText": "delta", "newText": "D"},
                {"oldText": "alpha", "newText": "A"}
            ]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "omega", "newText": "x"}]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [
                {"oldText": "alpha", "newText": "x"}, {"oldText": "omega", "newText": "y"}
            ]}),
        ),
        case(
            "edit",
            json!({"path": "many.txt", "edits": [{"oldText": "line 1", "newText": "x"}]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [
                {"oldText": "alpha\nbeta", "newText": "x"}, {"oldText": "beta\ngamma", "newText": "y"}
            ]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "", "newText": "x"}]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [
                {"oldText": "beta", "newText": "x"}, {"oldText": "", "newText": "y"}
            ]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "beta", "newText": "beta"}]}),
        ),
        case("edit", json!({"path": "notes.txt", "edits": []})),
        case(
            "edit",
            json!({"path": "crlf.txt", "edits": [{"oldText": "two\n", "newText": "2\n"}]}),
        ),
        case(
            "edit",
            json!({"path": "bom.txt", "edits": [{"oldText": "first", "newText": "1st"}]}),
        ),
        case(
            "edit",
            json!({"path": "quotes.txt", "edits": [{"oldText": "say \"hello\"", "newText": "say \"hi\""}]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "oldText": "gamma", "newText": "GAMMA"}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": "[{\"oldText\":\"alpha\",\"newText\":\"ALPHA\"}]"}),
        ),
        case(
            "edit",
            json!({"path": "missing.txt", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        case(
            "edit",
            json!({"path": "src", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        case(
            "edit",
            json!({"path": "many.txt", "edits": [
                {"oldText": "line 5\n", "newText": "line five\n"},
                {"oldText": "line 2495\n", "newText": "line 2495 (almost the end)\n"}
            ]}),
        ),
        case(
            "edit",
            json!({"path": "many.txt", "edits": [
                {"oldText": "line 40\n", "newText": "line forty\n"},
                {"oldText": "line 47\n", "newText": "line forty-seven\n"}
            ]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "beta\n", "newText": "beta\ninserted\n"}]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "beta\ngamma\n", "newText": ""}]}),
        ),
        case(
            "edit",
            json!({"path": "notes.txt", "edits": [{"oldText": "delta\n", "newText": "delta"}]}),
        ),
        case(
            "edit",
            json!({"path": "spaces.txt", "edits": [{"oldText": "keep\nthese", "newText": "KEEP\nthese"}]}),
        ),
        case(
            "edit",
            json!({"path": "typography.txt", "edits": [{"oldText": "wait... a file", "newText": "done"}]}),
        ),
        // write
        case(
            "write",
            json!({"path": "crlf-new.txt", "content": "a\r\nb\r\n"}),
        ),
        case(
            "write",
            json!({"path": "new/dir/file.txt", "content": "hello"}),
        ),
        case(
            "write",
            json!({"path": "notes.txt", "content": "replaced\n"}),
        ),
        case(
            "write",
            json!({"path": "u.txt", "content": "h\u{E9}llo \u{1F600}"}),
        ),
        case("write", json!({"path": "src", "content": "x"})),
        case("write", json!({"path": "notes.txt/x.txt", "content": "x"})),
        case("write", json!({"path": "linkdir/new.ts", "content": "x"})),
        case("write", json!({"path": ".", "content": "x"})),
        case("write", json!({"path": "dangling", "content": "via link"})),
        case(
            "edit",
            json!({"path": "dangling", "edits": [{"oldText": "a", "newText": "b"}]}),
        ),
        // ls
        case("ls", json!({})),
        case("ls", json!({"path": "names"})),
        case("ls", json!({"path": "src"})),
        case("ls", json!({"limit": 3})),
        case("ls", json!({"path": "missing"})),
        case("ls", json!({"path": "notes.txt"})),
        case("ls", json!({"path": "empty-dir"})),
        case("ls", json!({"path": "linkdir"})),
        case("ls", json!({"path": "docs", "limit": 0})),
        Case {
            fixture: Fixture::Crowded,
            ..case("ls", json!({"path": "crowd"}))
        },
        // grep
        unordered("grep", json!({"pattern": "alpha"})),
        unordered("grep", json!({"pattern": "ALPHA", "ignoreCase": true})),
        case(
            "grep",
            json!({"pattern": "a.b", "literal": true, "path": "dots.txt"}),
        ),
        case("grep", json!({"pattern": "a.b", "path": "dots.txt"})),
        unordered("grep", json!({"pattern": "export", "glob": "*.ts"})),
        unordered("grep", json!({"pattern": "export", "glob": "src/lib/*"})),
        case(
            "grep",
            json!({"pattern": "beta", "path": "notes.txt", "context": 1}),
        ),
        case(
            "grep",
            json!({"pattern": "line", "path": "many.txt", "limit": 5}),
        ),
        case(
            "grep",
            json!({"pattern": "line 10", "path": "many.txt", "context": 2, "limit": 3}),
        ),
        case(
            "grep",
            json!({"pattern": "x", "path": "wide.txt", "limit": 3}),
        ),
        case("grep", json!({"pattern": "("})),
        case("grep", json!({"pattern": "x", "path": "missing"})),
        case("grep", json!({"pattern": "x", "glob": "["})),
        case(
            "grep",
            json!({"pattern": "beta", "path": "notes.txt", "limit": 0}),
        ),
        case("grep", json!({"pattern": "nomatchzzz"})),
        case("grep", json!({"pattern": "SECRET"})),
        unordered("grep", json!({"pattern": "match"})),
        case("grep", json!({"pattern": "two", "path": "crlf.txt"})),
        case("grep", json!({"pattern": "bad", "path": "invalid.txt"})),
        unordered("grep", json!({"pattern": "out"})),
        Case {
            fixture: Fixture::GitRepo,
            ..unordered("grep", json!({"pattern": "out"}))
        },
        unordered("grep", json!({"pattern": "return", "path": "src"})),
        unordered("grep", json!({"pattern": "alpha", "glob": "!*.md"})),
        unordered("grep", json!({"pattern": "return", "path": "linkdir"})),
        case(
            "grep",
            json!({"pattern": "hit", "path": "ctx.txt", "context": 2}),
        ),
        case(
            "grep",
            json!({"pattern": "three", "path": "crlf.txt", "context": 1}),
        ),
        Case {
            fixture: Fixture::GitRepo,
            ..unordered("grep", json!({"pattern": "refs"}))
        },
        case(
            "grep",
            json!({"pattern": "alpha", "path": "ignored-by-dot-ignore.txt"}),
        ),
        // find
        unordered("find", json!({"pattern": "*.ts"})),
        unordered("find", json!({"pattern": "src/**/*.ts"})),
        unordered("find", json!({"pattern": "lib/*"})),
        case("find", json!({"pattern": "*.md", "path": "docs"})),
        unordered("find", json!({"pattern": "*"})),
        unordered("find", json!({"pattern": "*", "path": "src"})),
        unordered("find", json!({"pattern": "*.TS"})),
        case("find", json!({"pattern": "nomatch*"})),
        case("find", json!({"pattern": "*", "path": "missing"})),
        case("find", json!({"pattern": "*", "path": "notes.txt"})),
        case("find", json!({"pattern": "["})),
        case(
            "find",
            json!({"pattern": "*.md", "path": "docs", "limit": 1}),
        ),
        case(
            "find",
            json!({"pattern": "*.md", "path": "docs", "limit": 0}),
        ),
        unordered("find", json!({"pattern": "lib"})),
        unordered("find", json!({"pattern": ".*"})),
        unordered("find", json!({"pattern": "**"})),
        unordered("find", json!({"pattern": "**/*.md"})),
        unordered("find", json!({"pattern": "*", "path": "linkdir"})),
        Case {
            fixture: Fixture::GitRepo,
            ..unordered("find", json!({"pattern": "HEAD"}))
        },
        Case {
            fixture: Fixture::Crowded,
            ..unordered(
                "find",
                json!({"pattern": "*.txt", "path": "crowd", "limit": 510}),
            )
        },
        // Exactly the line limit, each line ending in a newline (pi 1.6.0 counts no line
        // after the last newline); the same printed by a command.
        case("read", json!({"path": "lines2000.txt"})),
        case("bash", json!({"command": "seq 1 2000"})),
        case("bash", json!({"command": "printf 'a\\nb\\n'; exit 1"})),
        case("read", json!({"path": "image.bmp"})),
        case("read", json!({"path": "image-wide.png"})),
    ]
}

/// Replaces `<ROOT>` in string arguments with `root`.
fn with_root(v: &Value, root: &str) -> Value {
    match v {
        Value::String(s) => Value::String(s.replace("<ROOT>", root)),
        Value::Array(a) => Value::Array(a.iter().map(|x| with_root(x, root)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), with_root(x, root)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Makes one side's result comparable: its root becomes `<ROOT>`, bash temp-file ids go,
/// and for unordered cases the output lines are sorted.
fn normalize(v: &Value, root: &str, unordered: bool) -> Value {
    let temp_id = regex::Regex::new(r"pi-bash-[0-9a-f]{16}\.log").unwrap();
    fn walk(v: &Value, f: &dyn Fn(&str) -> String) -> Value {
        match v {
            Value::String(s) => Value::String(f(s)),
            Value::Array(a) => Value::Array(a.iter().map(|x| walk(x, f)).collect()),
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), walk(x, f))).collect())
            }
            other => other.clone(),
        }
    }
    let mut out = walk(v, &|s| {
        temp_id
            .replace_all(&s.replace(root, "<ROOT>"), "pi-bash-<ID>.log")
            .into_owned()
    });
    // An image is compared by what it shows: pi encodes with Photon, pichamber with the image
    // crate, so a PNG they make carries the same pixels in other bytes; a JPEG one of them
    // re-encoded is compared by size only.
    let scaled = out
        .pointer("/ok/content")
        .and_then(Value::as_array)
        .is_some_and(|blocks| {
            blocks.iter().any(|b| {
                b["text"]
                    .as_str()
                    .is_some_and(|t| t.contains("[Image: original"))
            })
        });
    let mut images: Vec<&mut Value> = Vec::new();
    if let Some(ok) = out.get_mut("ok") {
        let ok = ok.as_object_mut().unwrap();
        for (key, value) in ok.iter_mut() {
            match (key.as_str(), value) {
                ("content", Value::Array(blocks)) => {
                    images.extend(blocks.iter_mut().filter(|b| b["type"] == "image"));
                }
                ("structuredContent", v) if v["type"] == "image" => images.push(v),
                _ => {}
            }
        }
    }
    for block in images {
        use base64::Engine as _;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(block["data"].as_str().unwrap_or_default())
            .unwrap_or_default();
        let shown = match image::load_from_memory(&bytes) {
            Ok(image) if scaled && block["mimeType"] == "image/jpeg" => {
                json!({ "width": image.width(), "height": image.height() })
            }
            Ok(image) => {
                use sha2::Digest as _;
                let pixels = sha2::Sha256::digest(image.to_rgba8().as_raw());
                json!({ "width": image.width(), "height": image.height(), "rgba": format!("{pixels:x}") })
            }
            Err(e) => json!({ "undecodable": e.to_string() }),
        };
        block["data"] = shown;
    }
    // How long a command ran is the machine's, not the tool's.
    if let Some(wall) = out.pointer_mut("/ok/structuredContent/wall_time_seconds") {
        *wall = json!("<seconds>");
    }
    if unordered && let Some(text) = out.pointer_mut("/ok/content/0/text") {
        let s = text.as_str().unwrap_or_default();
        let (body, notice) = match s.find("\n\n[") {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        };
        let mut lines: Vec<&str> = body.lines().collect();
        lines.sort_unstable();
        *text = Value::String(format!("{}{notice}", lines.join("\n")));
    }
    out
}

/// Every file, directory and link under `dir`, with contents.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(dir).unwrap().display().to_string();
            let kind = entry.file_type().unwrap();
            let what = if kind.is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if kind.is_dir() {
                stack.push(path.clone());
                "dir".into()
            } else {
                String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned()
            };
            out.insert(rel, what);
        }
    }
    out
}

fn oracle_script() -> Option<PathBuf> {
    let repo = common::repo();
    if repo
        .join("tests/oracle/node_modules/@mariozechner/pi-coding-agent")
        .exists()
    {
        return Some(repo.join("tests/oracle/builtin-tools.mjs"));
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "real pi is missing: run `npm ci --prefix tests/oracle` (CI must install it)"
    );
    eprintln!("SKIPPED: real pi not installed (npm ci --prefix tests/oracle)");
    None
}

/// Names, labels, descriptions, parameter schemas (key order included), prompt snippets and
/// guidelines: what the model is told about each tool, in both pi versions.
#[test]
fn specs_match_pi() {
    let Some(script) = oracle_script() else {
        return;
    };
    for version in common::oracle::Pi::ALL {
        let Some(node) = version.command().and(version.node()) else {
            continue;
        };
        let out = Command::new(node)
            .arg(&script)
            .arg("--specs")
            .env("PI_PACKAGE_DIR", version.package())
            .output()
            .expect("run node");
        assert!(
            out.status.success(),
            "oracle {} failed: {}",
            version.version(),
            String::from_utf8_lossy(&out.stderr)
        );
        let pi: Value = serde_json::from_slice(&out.stdout).expect("oracle JSON");
        let ours = our_specs(version.version().parse().unwrap());
        // Compared as text so that key order counts too.
        let pi = pi.as_array().unwrap();
        assert_eq!(pi.len(), ours.len());
        for (p, o) in pi.iter().zip(&ours) {
            assert_eq!(p.to_string(), o.to_string(), "pi {}", version.version());
        }
    }
}

fn our_specs(pi: tools::PiVersion) -> Vec<Value> {
    tools::builtin_specs(pi)
        .into_iter()
        .map(|s| {
            json!({
                "name": s.name,
                "label": s.label,
                "description": s.description,
                "parameters": s.parameters,
                "promptSnippet": s.prompt_snippet,
                "promptGuidelines": s.prompt_guidelines,
            })
        })
        .collect()
}

/// Cases where pi 1.6.0's tools still behave differently from pichamber's in a session that
/// follows 1.6.0, and why. A listed case that matches again fails the test (the list stays
/// true), as does an unlisted one that differs.
const KNOWN_DIFFERENCES_1_6: &[(usize, &str)] = &[];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_tools_match_pi() {
    let Some(script) = oracle_script() else {
        return;
    };
    for version in common::oracle::Pi::ALL {
        if version.command().is_none() {
            continue;
        }
        compare_with(&script, version).await;
    }
}

async fn compare_with(script: &Path, version: common::oracle::Pi) {
    let cases = cases();
    let tmp = tempfile::tempdir().unwrap();
    let dirs: Vec<(PathBuf, PathBuf)> = cases
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (pi, rs) = (
                tmp.path().join(format!("pi{i:03}")),
                tmp.path().join(format!("rs{i:03}")),
            );
            build_fixture(&pi, c.fixture);
            build_fixture(&rs, c.fixture);
            (pi, rs)
        })
        .collect();

    let input: Vec<Value> = cases
        .iter()
        .zip(&dirs)
        .map(|(c, (pi, _))| json!({"tool": c.tool, "args": c.args, "cwd": pi}))
        .collect();
    let input_file = tmp.path().join("cases.json");
    std::fs::write(&input_file, serde_json::to_vec(&input).unwrap()).unwrap();
    let out = Command::new(version.node().unwrap())
        .arg(script)
        .arg(&input_file)
        .env("PI_PACKAGE_DIR", version.package())
        .current_dir(tmp.path())
        .output()
        .expect("run node");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let oracle: Value = serde_json::from_slice(&out.stdout).expect("oracle JSON");
    for (tool, available) in oracle["tools"].as_object().unwrap() {
        if available != true {
            let (name, version) = if tool == "rg" { ("rg", 14) } else { ("fd", 9) };
            eprintln!(
                "SKIPPED: {name} >= {version} is not on PATH, so pi cannot run its {} cases here",
                if tool == "rg" { "grep" } else { "find" }
            );
        }
    }

    let mut mismatches = Vec::new();
    let mut compared = 0;
    for (i, (c, (pi_dir, rs_dir))) in cases.iter().zip(&dirs).enumerate() {
        let expected = &oracle["results"][i];
        if expected.get("skipped").is_some() {
            continue;
        }
        let rs_root = rs_dir.to_str().unwrap();
        let args = tools::prepare_arguments(c.tool, with_root(&c.args, rs_root));
        let ws = Workspace::open(rs_dir).unwrap();
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let updates = std::sync::Mutex::new(Vec::new());
        let options = tools::ExecOptions {
            pi: version.version().parse().unwrap(),
            ..Default::default()
        };
        let on_update = |u| updates.lock().unwrap().push(u);
        let result = tools::execute_with(c.tool, &args, &ws, &options, rx, &on_update).await;
        let updates = updates.into_inner().unwrap();
        let ends = match (updates.first(), updates.last()) {
            (Some(first), Some(last)) => json!([first, last]),
            _ => json!([]),
        };
        let actual = match result {
            Ok(o) => {
                let mut ok = json!({"content": o.content, "details": o.details});
                if o.is_error {
                    ok["isError"] = json!(true);
                }
                if let Some(structured) = o.structured_content {
                    ok["structuredContent"] = structured;
                }
                json!({"ok": ok, "updates": ends})
            }
            Err(e) => json!({"error": e, "updates": ends}),
        };
        let expected = normalize(expected, pi_dir.to_str().unwrap(), c.unordered);
        let actual = normalize(&actual, rs_root, c.unordered);
        compared += 1;
        if std::env::var_os("BUILTIN_TOOLS_SHOW").is_some() {
            eprintln!("case {i} {} {}\n  pi: {}", c.tool, c.args, short(&expected));
        }
        let known = version == common::oracle::Pi::V1_6
            && KNOWN_DIFFERENCES_1_6.iter().any(|(k, _)| *k == i);
        let (pi_tree, rs_tree) = (tree(pi_dir), tree(rs_dir));
        if known {
            if expected == actual && pi_tree == rs_tree {
                mismatches.push(format!(
                    "case {i} {} {}: matches pi {} now; remove it from KNOWN_DIFFERENCES_1_6",
                    c.tool,
                    c.args,
                    version.version()
                ));
            }
            continue;
        }
        if expected != actual {
            mismatches.push(format!(
                "case {i} {} {}:\n  pi:        {}\n  pichamber: {}",
                c.tool,
                c.args,
                short(&expected),
                short(&actual)
            ));
        }
        if pi_tree != rs_tree {
            mismatches.push(format!(
                "case {i} {} {}: the files differ afterwards\n  pi:        {:?}\n  pichamber: {:?}",
                c.tool,
                c.args,
                diff_keys(&pi_tree, &rs_tree),
                diff_keys(&rs_tree, &pi_tree)
            ));
        }
    }
    eprintln!(
        "compared {compared} of {} cases with pi {}",
        cases.len(),
        version.version()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches with pi {}:\n{}",
        mismatches.len(),
        version.version(),
        mismatches.join("\n\n")
    );
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 1500 {
        format!("{}…", &s[..s.floor_char_boundary(1500)])
    } else {
        s
    }
}

fn diff_keys(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<(String, String)> {
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.chars().take(200).collect()))
        .collect()
}
