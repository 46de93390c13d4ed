//! Prompt templates and skills against real pi: one package (an extension, a `pi` manifest
//! listing prompts and skills, and skills its extension adds through `resources_discover`)
//! run by `pi --mode rpc -e PKG` and `pichamber rpc -e PKG` through the corpus harness
//! (tests/corpus), comparing what both print and what both send the model: the commands
//! list, template arguments, `/skill:name args`, the input hook before expansion, an extension
//! command shadowing a template, the system prompt's skills section, and steering / follow-up
//! messages expanded like prompts.

mod common;
#[allow(dead_code)]
#[path = "corpus/normalise.rs"]
mod normalise;
#[allow(dead_code)]
#[path = "corpus/rpc.rs"]
mod rpc;
#[allow(dead_code)]
#[path = "corpus/scenario.rs"]
mod scenario;

use std::path::Path;

use normalise::Paths;
use scenario::{Action, Kind, Step};
use serde_json::{Value, json};

const EXTENSION: &str = r#"
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

export default function (pi) {
    pi.registerCommand("shadow", {
        description: "An extension command named like a template",
        handler: async (_args, ctx) => { ctx.ui.notify("command ran", "info"); },
    });
    pi.on("input", (event) => {
        if (event.text.startsWith("/alias ")) {
            return { action: "transform", text: "/greet" + event.text.slice(6) };
        }
        return { action: "continue" };
    });
    pi.on("resources_discover", () => ({
        skillPaths: [join(here, "discovered"), join(here, "more", "lone.md")],
        promptPaths: [join(here, "extra-prompts")],
    }));
}
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn package(dir: &Path) {
    write(&dir.join("index.ts"), EXTENSION);
    write(
        &dir.join("package.json"),
        r#"{ "name": "res-demo", "type": "module",
             "pi": { "extensions": ["./index.ts"], "prompts": ["./prompts"], "skills": ["./skills"] } }"#,
    );
    write(
        &dir.join("prompts/greet.md"),
        "---\ndescription: Greets\nargument-hint: <name> [more]\n---\nHello $1! Second: $2. From two: ${@:2}. Two of them: ${@:1:2}. All: $@ / $ARGUMENTS. Missing: [$5]\n",
    );
    write(
        &dir.join("prompts/plain.md"),
        "\nA template without frontmatter whose first line is long enough to be cut short at sixty\n\nSecond paragraph.\n",
    );
    write(
        &dir.join("prompts/shadow.md"),
        "The template, not the command.\n",
    );
    write(&dir.join("prompts/nested/inner.md"), "Inner template $@\n");
    write(
        &dir.join("skills/helper/SKILL.md"),
        "---\nname: helper\ndescription: Helps with <things> & \"stuff\"\n---\n\n# Helper\n\nSee scripts/run.sh.\n",
    );
    write(
        &dir.join("skills/quiet/SKILL.md"),
        "---\nname: quiet\ndescription: Only on request\ndisable-model-invocation: true\n---\nQuiet body\n",
    );
    write(
        &dir.join("skills/broken/SKILL.md"),
        "---\nname: broken\n---\nno description: not loaded\n",
    );
    write(
        &dir.join("discovered/SKILL.md"),
        "---\ndescription: Added by resources_discover\n---\nDiscovered body\n",
    );
    write(
        &dir.join("more/lone.md"),
        "---\nname: lone\ndescription: A skill file given directly\n---\nLone body\n",
    );
    write(
        &dir.join("extra-prompts/extra.md"),
        "---\ndescription: Extra\n---\nExtra: $ARGUMENTS\n",
    );
}

fn prompt(label: &str, text: &str) -> Step {
    Step {
        label: label.into(),
        action: Action::Prompt(text.into()),
    }
}

fn turn(text: &str) -> Value {
    json!({ "text": text, "usage": { "input": 10, "output": 5 } })
}

#[test]
fn templates_and_skills_reach_the_model_as_in_pi() {
    if scenario::pi_command().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ext = root.join("res-demo");
    package(&ext);
    let steps = vec![
        Step {
            label: "load".into(),
            action: Action::Startup,
        },
        Step {
            label: "get_commands".into(),
            action: Action::Request(json!({ "type": "get_commands" })),
        },
        prompt(
            "template with arguments",
            "/greet Bob \"big world\" 'x y' z",
        ),
        prompt("template without arguments", "/plain"),
        prompt("nested template", "/inner a b"),
        prompt("discovered template", "/extra one two"),
        prompt("skill with arguments", "/skill:helper   please do it  "),
        prompt("skill without arguments", "/skill:quiet"),
        prompt("discovered skill", "/skill:discovered go"),
        prompt("skill file given directly", "/skill:lone"),
        prompt("unknown skill", "/skill:nope x"),
        prompt("unknown template", "/nope x"),
        prompt("input hook before expansion", "/alias Ann Lee"),
        prompt("command before template", "/shadow"),
        prompt("not at the start", "please /greet Bob"),
    ];
    let turns: Vec<Value> = (0..24).map(|i| turn(&format!("Answer {i}."))).collect();
    let script = json!({ "turns": turns });
    let paths = |side: &Path| {
        Paths::new(vec![
            (side.to_string_lossy().into_owned(), "<root>".into()),
            (ext.to_string_lossy().into_owned(), "<ext>".into()),
        ])
    };
    let pi_root = root.join("side1");
    let pi = scenario::run_side(Kind::Pi, &ext, pi_root.clone(), &script, &steps);
    let our_root = root.join("side2");
    let ours = scenario::run_side(Kind::Pichamber, &ext, our_root.clone(), &script, &steps);

    // The run must have exercised what it is about, on pi's side too.
    let all = |record: &scenario::Record| {
        serde_json::to_string(&record.requests.iter().map(|(_, r)| r).collect::<Vec<_>>()).unwrap()
    };
    let sent = all(&pi);
    for expected in [
        "Hello Bob! Second: big world. From two: big world x y z.",
        "<skill name=\\\"helper\\\"",
        "please do it",
        "Discovered body",
        "Hello Ann! Second: Lee.",
        "<name>helper</name>",
        "Helps with &lt;things&gt; &amp; &quot;stuff&quot;",
        "Extra: one two",
        "Inner template a b",
    ] {
        assert!(sent.contains(expected), "pi sent no {expected:?}: {sent}");
    }
    assert!(!sent.contains("<name>quiet</name>"), "{sent}");
    assert!(all(&ours).contains("<name>helper</name>"));

    let differences = normalise::compare(&pi, &paths(&pi_root), &ours, &paths(&our_root));
    assert!(
        differences.is_empty(),
        "pichamber differs from pi:\n{}\n(pichamber's stderr: {})",
        differences
            .iter()
            .map(|(label, d)| format!("- {label}: {d}"))
            .collect::<Vec<_>>()
            .join("\n"),
        ours.stderr
    );
}

/// An extension names files by its guest paths; whatever it returns, the host reads nothing
/// outside its package: not a climb out with `..`, not the host path of a folder beside it,
/// not a symlink inside the package pointing out, not a relative path.
#[cfg(unix)]
#[test]
fn resources_discover_cannot_reach_outside_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ext = root.join("pkg");
    let outside = root.join("outside");
    write(
        &outside.join("secret/SKILL.md"),
        "---\nname: secret\ndescription: must not load\n---\nsecret\n",
    );
    write(
        &outside.join("prompts/leak.md"),
        "---\ndescription: must not load\n---\nleak\n",
    );
    write(
        &outside.join("lone.md"),
        "---\nname: lone\ndescription: must not load\n---\n",
    );
    std::fs::create_dir_all(&ext).unwrap();
    std::os::unix::fs::symlink(&outside, ext.join("link")).unwrap();
    write(
        &ext.join("mine/ok.md"),
        "---\ndescription: mine\n---\nmine\n",
    );
    write(
        &ext.join("index.ts"),
        &format!(
            r#"
import {{ dirname, join }} from "node:path";
import {{ fileURLToPath }} from "node:url";
const here = dirname(fileURLToPath(import.meta.url));
export default function (pi) {{
    pi.on("resources_discover", () => ({{
        skillPaths: [join(here, "..", "outside"), {outside:?}, "../outside", join(here, "link"),
                     join(here, "link", "lone.md"), "/ext/../outside", "/etc"],
        promptPaths: [join(here, "..", "outside", "prompts"), join(here, "link", "prompts"),
                      {prompts:?}, join(here, "mine")],
    }}));
}}
"#,
            outside = outside.to_string_lossy(),
            prompts = outside.join("prompts").to_string_lossy(),
        ),
    );
    let steps = vec![
        Step {
            label: "load".into(),
            action: Action::Startup,
        },
        Step {
            label: "get_commands".into(),
            action: Action::Request(json!({ "type": "get_commands" })),
        },
        prompt("leak", "/leak"),
    ];
    let script = json!({ "turns": [turn("One."), turn("Two.")] });
    let ours = scenario::run_side(Kind::Pichamber, &ext, root.join("side"), &script, &steps);
    let commands: Vec<String> = ours.steps[1]
        .1
        .iter()
        .filter(|l| l["command"] == "get_commands")
        .flat_map(|l| {
            l["data"]["commands"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    // The extension's own folder works; nothing else was read.
    assert_eq!(commands, ["ok"], "{:?}", ours.steps[1].1);
    let sent = serde_json::to_string(&ours.requests).unwrap();
    assert!(
        sent.contains("\"/leak\""),
        "the unknown template went as it is: {sent}"
    );
    assert!(!sent.contains("must not load"), "{sent}");
}
