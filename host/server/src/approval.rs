//! The approval prompt of the GUI: what an extension of a session asked for that its grants
//! do not give but the operator's policy allows, until the user answers approve once (this
//! session), always (remembered for this build of the extension) or deny.

use serde_json::{Value, json};

use pichamber_access::Grants;
use pichamber_access::{Item, Refusal};

/// One extension's open question in one session.
#[derive(Debug, Clone)]
pub struct PendingApproval {
    /// The catalog id clients know the extension by (never a path).
    pub extension: String,
    pub name: String,
    pub source_hash: String,
    pub reason: Option<String>,
    /// What the user is asked to approve.
    pub items: Vec<Item>,
    /// Requested too, but not for the user to give (outside the policy, or missing).
    pub refused: Vec<Refusal>,
    /// The grants it runs with until then.
    pub grants: Grants,
}

impl PendingApproval {
    /// As clients see it (`snapshot.approvals[]`, the `approval` event).
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "extension": self.extension,
            "name": self.name,
            "items": self.items,
            "refused": refusals_json(&self.refused),
        });
        if let Some(reason) = &self.reason {
            out["reason"] = json!(reason);
        }
        out
    }
}

/// Where one extension of a session stands: what it asked for and what it may do, for the
/// extensions panel (grant, revoke, ask again).
#[derive(Debug, Clone)]
pub struct AccessRecord {
    pub extension: String,
    pub name: String,
    pub source_hash: String,
    pub reason: Option<String>,
    /// The grants the user has for it without any approval (what a revoke returns to).
    pub configured: Grants,
    /// Requested items the configured grants give.
    pub given: Vec<Item>,
    /// Requested items approved: "always" earlier, or in this session.
    pub approved: Vec<Item>,
    /// Requested items denied in this session: they can be asked again.
    pub declined: Vec<Item>,
    pub refused: Vec<Refusal>,
}

impl AccessRecord {
    /// What it runs with: the configured grants and the approved items.
    pub fn grants(&self, cwd: &std::path::Path) -> Grants {
        let mut grants = self.configured.clone();
        for item in &self.approved {
            grants.add(item, cwd);
        }
        grants
    }

    /// As `GET /api/pi/sessions/:id/extensions` lists it (`pending`: the open question's items).
    pub fn to_json(&self, pending: &[Item]) -> Value {
        let mut out = json!({
            "extension": self.extension,
            "name": self.name,
            "given": self.given,
            "approved": self.approved,
            "pending": pending,
            "declined": self.declined,
            "refused": refusals_json(&self.refused),
        });
        if let Some(reason) = &self.reason {
            out["reason"] = json!(reason);
        }
        out
    }
}

fn refusals_json(refused: &[Refusal]) -> Value {
    refused
        .iter()
        .map(|r| json!({ "kind": r.item.kind, "value": r.item.value, "why": r.why }))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Once,
    Always,
    Deny,
}

impl Decision {
    /// `{ "decision": "once" | "always" | "deny" }`
    pub fn from_body(body: &Value) -> Result<Self, String> {
        match body["decision"].as_str() {
            Some("once") => Ok(Self::Once),
            Some("always") => Ok(Self::Always),
            Some("deny") => Ok(Self::Deny),
            _ => Err(r#"expected { "decision": "once" | "always" | "deny" }"#.into()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Once => "once",
            Self::Always => "always",
            Self::Deny => "deny",
        }
    }
}

#[derive(Debug)]
pub enum ApprovalError {
    /// No question is open for that extension in that session.
    NotPending,
    Invalid(String),
    /// Saving "always" or restarting the extension failed.
    Failed(String),
    /// The session has no such extension.
    UnknownExtension,
    /// Nothing to ask again or to revoke.
    Nothing(&'static str),
}
