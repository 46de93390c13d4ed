//! The pi releases pichamber follows, and the rule that picks one.
//!
//! pi changed shape between its last release under the `@mariozechner` scope (0.73.1) and the
//! current one under `@earendil-works` (1.6.0): the system prompt became a system message in
//! the transcript, RPC's `message_update` became delta-only, runs end with `agent_settled`,
//! built-in tools were reworded. Where the two differ, a session follows the release its
//! extensions were written for:
//!
//! - an extension that imports a package of one scope was written for that scope's release
//!   (recorded in its artifact's manifest at build time);
//! - a session follows 1.6.0 when any of its extensions does, or when none says (no
//!   extension, or none that imports pi): 0.73.1 only when every extension that says, says so;
//! - `--pi-version` overrides the rule.
//!
//! Every layer that behaves differently takes a [`PiVersion`]; none guesses on its own.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A pi release whose behaviour pichamber reproduces.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum PiVersion {
    /// `@mariozechner/pi-coding-agent` 0.73.1, the last release of the old scope.
    #[serde(rename = "0.73.1")]
    V0_73,
    /// `@earendil-works/pi-coding-agent` 1.6.0, what pi users run today.
    #[default]
    #[serde(rename = "1.6.0")]
    V1_6,
}

impl PiVersion {
    pub const ALL: [PiVersion; 2] = [PiVersion::V0_73, PiVersion::V1_6];

    /// The release number, as pi's `--version` prints it.
    pub fn number(self) -> &'static str {
        match self {
            PiVersion::V0_73 => "0.73.1",
            PiVersion::V1_6 => "1.6.0",
        }
    }

    /// The npm scope of this release's packages.
    pub fn scope(self) -> &'static str {
        match self {
            PiVersion::V0_73 => "@mariozechner",
            PiVersion::V1_6 => "@earendil-works",
        }
    }

    /// The release an import specifier (or a dependency name) points at, when it names one of
    /// pi's packages: `@mariozechner/pi-ai` is 0.73.1, `@earendil-works/pi-tui/x` is 1.6.0.
    pub fn of_specifier(specifier: &str) -> Option<PiVersion> {
        PiVersion::ALL.into_iter().find(|v| {
            specifier
                .strip_prefix(v.scope())
                .and_then(|rest| rest.strip_prefix("/pi-"))
                .is_some_and(|name| !name.is_empty())
        })
    }

    /// What a session of these extensions follows (see the module doc): `written_for` holds
    /// each extension's release, `None` for one that does not say.
    pub fn for_session(written_for: impl IntoIterator<Item = Option<PiVersion>>) -> PiVersion {
        PiVersion::newest_said(written_for.into_iter().flatten()).unwrap_or_default()
    }

    /// The release of an extension whose imports name these releases: the newest one (a
    /// helper library written for 0.73.1 does not make a 1.6.0 extension older), or `None`
    /// when it names none.
    pub fn newest_said(said: impl IntoIterator<Item = PiVersion>) -> Option<PiVersion> {
        said.into_iter().max()
    }

    pub fn is_1_6(self) -> bool {
        self == PiVersion::V1_6
    }
}

impl fmt::Display for PiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.number())
    }
}

impl FromStr for PiVersion {
    type Err = String;

    /// `0.73.1`, `0.73`, `1.6.0`, `1.6` (and a leading `v`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().trim_start_matches('v');
        PiVersion::ALL
            .into_iter()
            .find(|v| v.number() == s || v.number().rsplit_once('.').is_some_and(|(mm, _)| mm == s))
            .ok_or_else(|| {
                format!("unknown pi version '{s}': pichamber follows pi 0.73.1 and 1.6.0")
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_specifier_names_its_release_by_scope() {
        assert_eq!(
            PiVersion::of_specifier("@mariozechner/pi-coding-agent"),
            Some(PiVersion::V0_73)
        );
        assert_eq!(
            PiVersion::of_specifier("@earendil-works/pi-ai/compat"),
            Some(PiVersion::V1_6)
        );
        assert_eq!(PiVersion::of_specifier("@earendil-works/gondolin"), None);
        assert_eq!(PiVersion::of_specifier("typebox"), None);
        assert_eq!(PiVersion::of_specifier("@mariozechner/pi-"), None);
    }

    #[test]
    fn a_session_follows_1_6_unless_every_extension_that_says_is_older() {
        use PiVersion::*;
        assert_eq!(PiVersion::for_session([]), V1_6);
        assert_eq!(PiVersion::for_session([None]), V1_6);
        assert_eq!(PiVersion::for_session([Some(V0_73), None]), V0_73);
        assert_eq!(PiVersion::for_session([Some(V0_73), Some(V1_6)]), V1_6);
        assert_eq!(PiVersion::for_session([Some(V0_73), Some(V0_73)]), V0_73);
    }

    #[test]
    fn versions_parse_from_what_people_type() {
        assert_eq!("0.73.1".parse(), Ok(PiVersion::V0_73));
        assert_eq!("v1.6".parse(), Ok(PiVersion::V1_6));
        assert_eq!("1.6.0".parse(), Ok(PiVersion::V1_6));
        let err = "2".parse::<PiVersion>().unwrap_err();
        assert!(err.contains("0.73.1 and 1.6.0"), "{err}");
    }
}
