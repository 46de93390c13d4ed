//! Who may let an extension reach what: its requests ([`request`]), the operator's policy and
//! grants for one user ([`policy`]), and the approvals a user gave "always" ([`approvals`]).
//! Enforcement is [`crate::capabilities`]'s; this module only decides the grants.

pub mod approvals;
pub mod policy;
pub mod request;

pub use approvals::ApprovalStore;
pub use policy::{Access, Assessment, Ceiling, Refusal};
pub use request::{Item, Kind, Requests};
