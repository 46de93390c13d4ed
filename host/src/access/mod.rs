//! Who may let an extension reach what: its requests ([`request`]), the operator's policy and
//! grants for one user ([`policy`]), and the approvals a user gave "always" ([`approvals`]).
//! Enforcement is [`crate::capabilities`]'s; this module only decides the grants.

pub mod approvals;
pub mod policy;
pub mod request;

pub use approvals::ApprovalStore;
pub use policy::{Access, Assessment, Ceiling, Refusal};
pub use request::{Item, Kind, Requests};

/// For runs without the GUI (nothing to approve with): what extension `name` requests (its
/// manifest's `capabilities`) that `grants` do not give, and the flags that would, or `None`
/// when everything requested is granted.
pub fn ungranted_note(
    name: &str,
    capabilities: &serde_json::Value,
    grants: &crate::capabilities::Grants,
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
