//! pichamber: run pi coding-agent extensions isolated, each compiled to a WASI component and
//! run under wasmtime behind the `pichamber:extension` WIT interface.
//!
//! - [`bundle`]: extension sources → module map (TypeScript stripped, imports resolved).
//! - [`artifact`]: the `.wasm` file format (guest shim + manifest + modules).
//! - [`runtime`]: wasmtime engine, compile cache, instances, the host side of the WIT.
//! - [`capabilities`]: what an extension may reach outside its sandbox.
//! - [`access`]: what an extension asks for, the operator's policy, and users' approvals.
//! - [`sandbox`]: programs run for an extension confined to its grants (Landlock).
//! - [`session`]: a session's extensions and pi's event semantics across them.
//! - [`source_map`]: runtime error positions mapped back to the extension's sources.
//! - [`tools`]: pi's built-in tools (read, bash, edit, write, grep, find, ls), confined to the
//!   session's workspace.
//! - [`model`]: model providers (OpenAI-compatible, scripted, a mock endpoint).
//! - [`rpc`]: pi's RPC protocol on stdin/stdout (`pichamber rpc`).
//! - [`discovery`]: a pi user's extensions, found where pi finds them.
//! - [`export_html`]: a session as a self-contained HTML page.
//! - [`launch`]: opening sessions and running steps (shared by run, rpc, inspect, check).
//! - [`check`]: `pichamber check`, scenario files for CI and extension audits.
//! - [`cli`]: the `pichamber` command.

pub mod access;
pub mod artifact;
pub mod bundle;
pub mod capabilities;
pub mod check;
pub mod cli;
pub mod discovery;
pub mod export_html;
pub mod gui;
pub mod launch;
pub mod model;
pub mod net;
pub mod rpc;
pub mod runtime;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod source_map;
pub mod tools;
