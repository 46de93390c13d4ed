//! pi's built-in tools run *for an extension* (`createReadTool(cwd).execute(...)` inside its
//! code): with the extension's grants rather than the agent's workspace. The file tools work
//! in `cwd`, which one of its granted trees must cover; bash needs `bash` granted as a program
//! and runs with the scrubbed environment, confined to the grants as a granted program is.

use std::path::Path;

use serde_json::{Value, json};

use super::{ExecOptions, Workspace};
use pichamber_access::Grants;

/// Runs `tool` with `args` (JSON text) in `cwd`; answers the tool's `{ content, details }`,
/// or its error.
pub async fn run(
    grants: &Grants,
    tool: &str,
    args: Value,
    cwd: &Path,
    pi: super::PiVersion,
    on_update: &(dyn Fn(Value) + Send + Sync),
) -> Result<Value, String> {
    grants.check_builtin_tool(tool, cwd)?;
    if !args.is_object() {
        return Err(format!("the built-in {tool} tool got no JSON arguments"));
    }
    let workspace = Workspace::open(cwd).map_err(|e| match tool {
        // pi's words, which an extension may match on.
        "bash" if e.kind() == std::io::ErrorKind::NotFound => format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            cwd.display()
        ),
        _ => format!(
            "the built-in {tool} tool cannot open {}: {e}",
            cwd.display()
        ),
    })?;
    let confinement = match tool {
        "bash" => grants.program_confinement("bash")?,
        _ => None,
    };
    let options = ExecOptions {
        model_accepts_images: None,
        env: Some(grants.program_env(&[])),
        confinement,
        pi,
        ..ExecOptions::default()
    };
    let (_never, cancel) = tokio::sync::watch::channel(false);
    let args = super::prepare_arguments(tool, args);
    let output = super::execute_with(tool, &args, &workspace, &options, cancel, on_update).await?;
    let mut result = json!({ "content": output.content });
    if !output.details.is_null() {
        result["details"] = output.details;
    }
    if let Some(structured) = output.structured_content {
        result["structuredContent"] = structured;
    }
    if output.is_error {
        result["isError"] = json!(true);
    }
    Ok(result)
}
