//! The pichamber guest: QuickJS (through the `javy` crate) running one pi extension.
//!
//! Rust here does only what JavaScript cannot: owning the QuickJS runtime, loading modules,
//! driving promises to completion through the host's `wait`, marshalling calls to the WIT
//! imports, and the filesystem (std::fs over WASI, so the host's preopens decide what exists).
//! Everything pi-shaped (`pi`, `ctx`, handler chains, virtual modules) lives in `js/`.

mod bindings {
    wit_bindgen::generate!({
        path: ["../wit/v0.2.0", "wit"],
        world: "pichamber:shim/shim",
        generate_all,
    });
}

mod ahead;
mod engine;
mod fs;
mod heap;
mod hibernation;
mod hostcall;
mod json_value;
mod modules;
mod package_files;
mod programs;
mod random;
mod reuse;
mod sqlite;
mod vm;
mod workers;
mod zlib;

use bindings::exports::pichamber::extension::guest::{
    CommandState, CompletionItem, DispatchResult, Guest, LoadContext, ModuleSource, ToolResult,
};
use bindings::pichamber::extension::types::SessionAction;
use serde_json::{Value, json};

struct Extension;

impl bindings::Guest for Extension {
    fn pre_initialize() -> Result<(), String> {
        engine::pre_initialize()?;
        heap::fill_holes();
        Ok(())
    }

    fn pre_compile(modules: Vec<ModuleSource>) -> Result<(), String> {
        engine::pre_compile(modules)?;
        heap::fill_holes();
        Ok(())
    }

    fn pre_evaluate(
        id: String,
        sessions: bindings::AheadContext,
        watch_globals: bool,
    ) -> Result<(), bindings::AheadRefusal> {
        engine::pre_evaluate(&id, &sessions, watch_globals)?;
        if !watch_globals {
            heap::fill_holes();
        }
        Ok(())
    }

    fn freeze() -> Result<u32, String> {
        hibernation::freeze()
    }

    fn thaw(memory_pages: u32) -> Result<(), String> {
        hibernation::thaw(memory_pages)
    }
}

impl Guest for Extension {
    fn load(modules: Vec<ModuleSource>, entry: String, context: LoadContext) -> Result<(), String> {
        engine::load(modules, &entry, context)
    }

    fn dispatch_event(name: String, event: String, ctx: String) -> Result<DispatchResult, String> {
        let same_ctx = engine::same_dispatch_ctx(&ctx);
        // The prelude keeps what it read of the last context: "" says it is that one again.
        let reply = engine::call_prelude(
            "dispatchEvent",
            &[&name, &event, if same_ctx { "" } else { &ctx }],
        );
        engine::dispatched_ctx(reply.is_ok().then_some(ctx));
        let parts = reply?;
        // No parts: no result, and the event is not wanted back.
        if parts.is_empty() {
            return Ok(DispatchResult {
                chain_result: None,
                event: "null".into(),
            });
        }
        let mut parts = parts.into_iter();
        let chain_result = parts.next().flatten();
        Ok(DispatchResult {
            chain_result,
            event: parts.next().flatten().unwrap_or(event),
        })
    }

    fn prepare_arguments(tool: String, args: String) -> Result<String, String> {
        engine::call_prelude_json("prepareArguments", &[&tool, &args])
    }

    fn execute_tool(tool: String, tool_call_id: String, params: String, ctx: String) -> ToolResult {
        match engine::call_prelude("executeTool", &[&tool, &tool_call_id, &params, &ctx]) {
            Ok(parts) => {
                let mut parts = parts.into_iter();
                let mut next = || parts.next().flatten();
                ToolResult {
                    content: next().unwrap_or_else(|| "[]".into()),
                    details: next(),
                    is_error: next().as_deref() == Some("true"),
                    terminate: next().as_deref() == Some("true"),
                    structured_content: next(),
                    extra: next(),
                }
            }
            Err(message) => ToolResult {
                content: json!([{"type": "text", "text": message}]).to_string(),
                details: None,
                is_error: true,
                terminate: false,
                structured_content: None,
                extra: None,
            },
        }
    }

    fn run_command(name: String, args: String, ctx: String) -> Result<CommandState, String> {
        engine::call_prelude_step("runCommand", &[&name, &args, &ctx], true).map(command_state)
    }

    fn resume_command(outcome: Result<String, String>) -> Result<CommandState, String> {
        engine::call_prelude_step("resumeCommand", &[&outcome_text(outcome)], true)
            .map(command_state)
    }

    fn complete_arguments(
        name: String,
        prefix: String,
    ) -> Result<Option<Vec<CompletionItem>>, String> {
        let out = engine::call_prelude_json("completeArguments", &[&name, &prefix])?;
        let value: Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
        let Some(items) = value.as_array() else {
            return Ok(None);
        };
        Ok(Some(
            items
                .iter()
                .map(|item| CompletionItem {
                    value: str_field(item, "value"),
                    label: item
                        .get("label")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| str_field(item, "value")),
                    description: item
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                })
                .collect(),
        ))
    }

    fn deliver_bus_event(channel: String, data: String) -> Result<(), String> {
        engine::call_prelude("deliverBusEvent", &[&channel, &data]).map(|_| ())
    }

    fn poll() -> Option<u64> {
        engine::poll()
    }

    fn compaction_outcome(callback: u64, outcome: Result<String, String>) -> Result<(), String> {
        let outcome = outcome_text(outcome);
        engine::call_prelude("compactionOutcome", &[&callback.to_string(), &outcome]).map(|_| ())
    }

    fn route_model(
        provider: String,
        id: String,
        request: String,
        ctx: String,
    ) -> Result<String, String> {
        engine::call_prelude_json("routeModel", &[&provider, &id, &request, &ctx])
    }

    fn shutdown() {
        // Nothing to flush: the host drops the instance, which frees all guest memory.
    }
}

/// A host outcome as the prelude reads it: `{"result": JSON}` or `{"error": message}`.
fn outcome_text(outcome: Result<String, String>) -> String {
    match outcome {
        Ok(result) => format!("{{\"result\":{result}}}"),
        Err(error) => json!({ "error": error }).to_string(),
    }
}

fn command_state(step: engine::Step) -> CommandState {
    match step {
        engine::Step::Done(_) => CommandState::Done,
        engine::Step::Waiting { action, args } => {
            CommandState::Waiting(SessionAction { name: action, args })
        }
    }
}

fn str_field(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

bindings::export!(Extension with_types_in bindings);
