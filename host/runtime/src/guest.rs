//! The guest's exports, whichever WIT version the component was built with: each call takes
//! and returns the newest version's types, and a 0.1.0 component's are converted on the way
//! (`since_v0_1_0`). What 0.1.0 lacks is carried as 0.1.0 carried it.

use serde_json::json;
use wasmtime::Store;

use super::instance::ExtensionState;
use super::latest;
use super::since_v0_1_0 as v0_1;
use super::wit::{
    CommandState, CompletionItem, DispatchResult, LoadContext, ModuleSource, ToolResult,
};

/// The event under which a 0.1.0 guest takes ctx.compact's outcome (its prelude handles it
/// before any handler chain); 0.2.0 has the `compaction-outcome` export.
const COMPACTION_OUTCOME_EVENT: &str = "pichamber:compaction-outcome";

pub enum Guest {
    V0_1(v0_1::Extension),
    Latest(latest::Extension),
}

type Store_<'a> = &'a mut Store<ExtensionState>;

impl Guest {
    pub async fn call_load(
        &self,
        store: Store_<'_>,
        modules: &[ModuleSource],
        entry: &str,
        context: &LoadContext,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_load(store, modules, entry, context)
                    .await
            }
            Self::V0_1(b) => {
                let modules: Vec<_> = modules.iter().map(v0_1::module_source).collect();
                b.pichamber_extension_guest()
                    .call_load(store, &modules, entry, &v0_1::load_context(context))
                    .await
            }
        }
    }

    pub async fn call_dispatch_event(
        &self,
        store: Store_<'_>,
        name: &str,
        event: &String,
        ctx: &String,
    ) -> wasmtime::Result<Result<DispatchResult, String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_dispatch_event(store, name, event, ctx)
                    .await
            }
            Self::V0_1(b) => Ok(b
                .pichamber_extension_guest()
                .call_dispatch_event(store, name, event, ctx)
                .await?
                .map(v0_1::dispatch_result)),
        }
    }

    pub async fn call_prepare_arguments(
        &self,
        store: Store_<'_>,
        tool: &str,
        args: &String,
    ) -> wasmtime::Result<Result<String, String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_prepare_arguments(store, tool, args)
                    .await
            }
            Self::V0_1(b) => {
                b.pichamber_extension_guest()
                    .call_prepare_arguments(store, tool, args)
                    .await
            }
        }
    }

    pub async fn call_execute_tool(
        &self,
        store: Store_<'_>,
        tool: &str,
        call_id: &str,
        params: &String,
        ctx: &String,
    ) -> wasmtime::Result<ToolResult> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_execute_tool(store, tool, call_id, params, ctx)
                    .await
            }
            Self::V0_1(b) => Ok(v0_1::tool_result(
                b.pichamber_extension_guest()
                    .call_execute_tool(store, tool, call_id, params, ctx)
                    .await?,
            )),
        }
    }

    /// A 0.1.0 command never waits: its session actions run when it returns.
    pub async fn call_run_command(
        &self,
        store: Store_<'_>,
        name: &str,
        args: &str,
        ctx: &String,
    ) -> wasmtime::Result<Result<CommandState, String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_run_command(store, name, args, ctx)
                    .await
            }
            Self::V0_1(b) => Ok(b
                .pichamber_extension_guest()
                .call_run_command(store, name, args, ctx)
                .await?
                .map(|()| CommandState::Done)),
        }
    }

    pub async fn call_resume_command(
        &self,
        store: Store_<'_>,
        outcome: Result<String, String>,
    ) -> wasmtime::Result<Result<CommandState, String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_resume_command(store, outcome.as_ref().map_err(String::as_str))
                    .await
            }
            Self::V0_1(_) => Ok(Err("a WIT 0.1.0 command never waits".into())),
        }
    }

    pub async fn call_complete_arguments(
        &self,
        store: Store_<'_>,
        name: &str,
        prefix: &str,
    ) -> wasmtime::Result<Result<Option<Vec<CompletionItem>>, String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_complete_arguments(store, name, prefix)
                    .await
            }
            Self::V0_1(b) => Ok(b
                .pichamber_extension_guest()
                .call_complete_arguments(store, name, prefix)
                .await?
                .map(|items| items.map(|i| i.into_iter().map(v0_1::completion_item).collect()))),
        }
    }

    pub async fn call_deliver_bus_event(
        &self,
        store: Store_<'_>,
        channel: &str,
        data: &String,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_deliver_bus_event(store, channel, data)
                    .await
            }
            Self::V0_1(b) => {
                b.pichamber_extension_guest()
                    .call_deliver_bus_event(store, channel, data)
                    .await
            }
        }
    }

    pub async fn call_compaction_outcome(
        &self,
        store: Store_<'_>,
        callback: u64,
        outcome: Result<String, String>,
        ctx: &String,
    ) -> wasmtime::Result<Result<(), String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_compaction_outcome(
                        store,
                        callback,
                        outcome.as_ref().map_err(String::as_str),
                    )
                    .await
            }
            Self::V0_1(b) => {
                let event = match outcome {
                    Ok(result) => json!({
                        "callback": callback,
                        "result": serde_json::from_str::<serde_json::Value>(&result)?,
                    }),
                    Err(error) => json!({ "callback": callback, "error": error }),
                };
                Ok(b.pichamber_extension_guest()
                    .call_dispatch_event(store, COMPACTION_OUTCOME_EVENT, &event.to_string(), ctx)
                    .await?
                    .map(|_| ()))
            }
        }
    }

    /// A 0.1.0 guest cannot register a virtual model, so it is never asked to route one.
    pub async fn call_route_model(
        &self,
        store: Store_<'_>,
        provider: &str,
        id: &str,
        request: &String,
        ctx: &String,
    ) -> wasmtime::Result<Result<String, String>> {
        match self {
            Self::Latest(b) => {
                b.pichamber_extension_guest()
                    .call_route_model(store, provider, id, request, ctx)
                    .await
            }
            Self::V0_1(_) => Ok(Err(format!(
                "{provider}/{id}: a WIT 0.1.0 extension has no virtual models"
            ))),
        }
    }

    pub async fn call_poll(&self, store: Store_<'_>) -> wasmtime::Result<Option<u64>> {
        match self {
            Self::Latest(b) => b.pichamber_extension_guest().call_poll(store).await,
            Self::V0_1(b) => b.pichamber_extension_guest().call_poll(store).await,
        }
    }

    pub async fn call_shutdown(&self, store: Store_<'_>) -> wasmtime::Result<()> {
        match self {
            Self::Latest(b) => b.pichamber_extension_guest().call_shutdown(store).await,
            Self::V0_1(b) => b.pichamber_extension_guest().call_shutdown(store).await,
        }
    }
}
