//! What an extension may reach outside its sandbox, and the enforcement that does not need a
//! wasm runtime: the grants ([`Grants`]: trees, programs, environment variables, hosts), what
//! an extension asks for ([`request`]), the operator's policy and a user's approvals
//! ([`policy`], [`approvals`]), granted programs run confined with Landlock ([`sandbox`]) and
//! `fetch` carried out under the network policy ([`net`]).
//!
//! It owns the rules, not their callers: it knows nothing of artifacts, wasm, sessions or the
//! GUI; the runtime turns grants into a WASI context, the session asks it to run programs.

mod approvals;
mod grants;
pub mod net;
mod policy;
mod request;
pub mod sandbox;
pub mod secrets;

pub use approvals::ApprovalStore;
pub use grants::{EXEC_DEFAULT_TIMEOUT, EXEC_MAX_OUTPUT, Grants, ProgramOutput, ProgramRequest};
pub use policy::{Access, Assessment, Ceiling, Refusal};
pub use request::{Item, Kind, Requests, is_provider_name};

/// For runs without the GUI (nothing to approve with): what extension `name` requests (its
/// manifest's `capabilities`) that `grants` do not give, and the flags that would, or `None`
/// when everything requested is granted.
pub fn ungranted_note(
    name: &str,
    capabilities: &serde_json::Value,
    grants: &crate::Grants,
    cwd: &std::path::Path,
) -> Option<String> {
    let requests = Requests::from_manifest(capabilities).ok()?;
    let missing: Vec<Item> = requests
        .items()
        .into_iter()
        .filter(|item| !grants.covers(item, cwd))
        .collect();
    if missing.is_empty() {
        return None;
    }
    let what: Vec<String> = missing.iter().map(Item::to_string).collect();
    let flags: Vec<String> = missing.iter().map(Item::flag).collect();
    Some(format!(
        "{name} requests {}, not granted: it runs without (grant with {})",
        what.join(", "),
        flags.join(" ")
    ))
}
