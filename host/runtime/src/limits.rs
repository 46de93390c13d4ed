//! Budgets of one extension instance for host calls that amplify: output volume (console lines,
//! UI events, dialogs) per call and per second, and what its registrations keep in host memory
//! (outside `--memory-limit`). What it adds to the session (entries, queued messages, bus
//! payloads) is the session's to count (`pichamber_session`'s port). SECURITY.md lists them all
//! with their defaults.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A count and a byte cap over one window.
#[derive(Debug, Clone, Copy)]
pub struct Cap {
    pub count: usize,
    pub bytes: usize,
}

/// Console lines (`console.*`, after the per-line cut).
pub const LOG_PER_CALL: Cap = Cap {
    count: 10_000,
    bytes: 4 << 20,
};
pub const LOG_PER_SECOND: Cap = Cap {
    count: 5_000,
    bytes: 2 << 20,
};
/// UI events: notify, status, widget, title, editor text.
pub const UI_PER_CALL: Cap = Cap {
    count: 2_000,
    bytes: 4 << 20,
};
pub const UI_PER_SECOND: Cap = Cap {
    count: 1_000,
    bytes: 2 << 20,
};
/// Dialogs opened (select, confirm, input, editor, form) while a client can answer them.
pub const DIALOGS_PER_CALL: Cap = Cap {
    count: 50,
    bytes: usize::MAX,
};
pub const DIALOGS_PER_SECOND: Cap = Cap {
    count: 10,
    bytes: usize::MAX,
};

/// Registrations of one kind (tools, commands, flags, ...) one instance may hold.
pub const MAX_REGISTRATIONS_PER_KIND: usize = 10_000;
/// Bytes all registrations of one instance may hold in host memory.
pub const MAX_REGISTRATION_BYTES: usize = 16 << 20;

fn describe(cap: Cap, unit: &str) -> String {
    if cap.bytes == usize::MAX {
        format!("{} {unit}", cap.count)
    } else if cap.bytes >= 1 << 20 && cap.bytes.is_multiple_of(1 << 20) {
        format!("{} {unit} or {} MiB", cap.count, cap.bytes >> 20)
    } else {
        format!("{} {unit} or {} bytes", cap.count, cap.bytes)
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Used {
    count: usize,
    bytes: usize,
}

impl Used {
    fn fits(&self, cap: Cap, bytes: usize) -> bool {
        self.count < cap.count && self.bytes.saturating_add(bytes) <= cap.bytes
    }
}

/// Why something was not let through, and whether this is the first time in its call and
/// second (so it is reported once, not per line).
#[derive(Debug)]
pub struct Exceeded {
    pub message: String,
    pub report: bool,
}

/// Volume of one kind of output, per call and per one-second window.
#[derive(Debug)]
pub struct Meter {
    /// What is measured, for messages ("console output").
    what: &'static str,
    unit: &'static str,
    per_call: Cap,
    per_second: Cap,
    call: Used,
    window: Used,
    window_start: Instant,
    reported_in_call: bool,
    reported_in_window: bool,
}

impl Meter {
    pub fn new(what: &'static str, unit: &'static str, per_call: Cap, per_second: Cap) -> Self {
        Self {
            what,
            unit,
            per_call,
            per_second,
            call: Used::default(),
            window: Used::default(),
            window_start: Instant::now(),
            reported_in_call: false,
            reported_in_window: false,
        }
    }

    pub fn logs() -> Self {
        Self::new("console output", "lines", LOG_PER_CALL, LOG_PER_SECOND)
    }

    pub fn ui() -> Self {
        Self::new("UI updates", "updates", UI_PER_CALL, UI_PER_SECOND)
    }

    pub fn dialogs() -> Self {
        Self::new("dialogs", "dialogs", DIALOGS_PER_CALL, DIALOGS_PER_SECOND)
    }

    /// A new call starts: its own budget, the rate window goes on.
    pub fn begin_call(&mut self) {
        self.call = Used::default();
        self.reported_in_call = false;
    }

    /// Counts one item of `bytes`, or says which limit it would break.
    pub fn admit(&mut self, bytes: usize) -> Result<(), Exceeded> {
        if self.window_start.elapsed() >= Duration::from_secs(1) {
            self.window = Used::default();
            self.window_start = Instant::now();
            self.reported_in_window = false;
        }
        let limit = if !self.call.fits(self.per_call, bytes) {
            Some(format!(
                "more than {} in one call",
                describe(self.per_call, self.unit)
            ))
        } else if !self.window.fits(self.per_second, bytes) {
            Some(format!(
                "more than {} per second",
                describe(self.per_second, self.unit)
            ))
        } else {
            None
        };
        if let Some(limit) = limit {
            let report = !self.reported_in_call && !self.reported_in_window;
            self.reported_in_call = true;
            self.reported_in_window = true;
            return Err(Exceeded {
                message: format!("{} over its limit: {limit}", self.what),
                report,
            });
        }
        for used in [&mut self.call, &mut self.window] {
            used.count += 1;
            used.bytes = used.bytes.saturating_add(bytes);
        }
        Ok(())
    }
}

/// Kinds of registration, each counted on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Tool,
    Command,
    Flag,
    Event,
    Shortcut,
    MessageRenderer,
    Provider,
    VirtualModel,
    McpServer,
    Status,
    Widget,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Command => "commands",
            Kind::Flag => "flags",
            Kind::Event => "event subscriptions",
            Kind::Shortcut => "shortcuts",
            Kind::MessageRenderer => "message renderers",
            Kind::Provider => "providers",
            Kind::VirtualModel => "virtual models",
            Kind::McpServer => "MCP servers",
            Kind::Status => "statuses",
            Kind::Widget => "widgets",
        }
    }

    /// Kept in the session's UI state rather than the instance's registrations: they outlive
    /// a restart of the instance.
    pub fn is_ui_state(self) -> bool {
        matches!(self, Kind::Status | Kind::Widget)
    }
}

/// What one instance's registrations hold in host memory, by kind and key.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    sizes: HashMap<(Kind, String), usize>,
    counts: HashMap<Kind, usize>,
    bytes: usize,
}

impl Registry {
    /// Records (or resizes) the registration `key` of `kind`, or refuses it when the
    /// instance would hold too many of the kind or too many bytes in all.
    pub fn admit(&mut self, kind: Kind, key: &str, bytes: usize) -> Result<(), String> {
        let previous = self.sizes.get(&(kind, key.to_owned())).copied();
        let count = self.counts.get(&kind).copied().unwrap_or(0);
        if previous.is_none() && count >= MAX_REGISTRATIONS_PER_KIND {
            return Err(format!(
                "this extension already holds {MAX_REGISTRATIONS_PER_KIND} {} (the per-extension limit)",
                kind.plural()
            ));
        }
        let total = self.bytes - previous.unwrap_or(0) + bytes;
        if total > MAX_REGISTRATION_BYTES {
            return Err(format!(
                "this extension's registrations would hold {total} bytes; the per-extension limit is {MAX_REGISTRATION_BYTES} ({} MiB)",
                MAX_REGISTRATION_BYTES >> 20
            ));
        }
        self.sizes.insert((kind, key.to_owned()), bytes);
        if previous.is_none() {
            *self.counts.entry(kind).or_default() += 1;
        }
        self.bytes = total;
        Ok(())
    }

    /// Forgets the registration `key` of `kind` (unregistered, cleared).
    pub fn release(&mut self, kind: Kind, key: &str) {
        if let Some(bytes) = self.sizes.remove(&(kind, key.to_owned())) {
            self.bytes -= bytes;
            if let Some(count) = self.counts.get_mut(&kind) {
                *count -= 1;
            }
        }
    }

    /// Only the UI state (statuses, widgets), which a restarted instance inherits.
    pub fn ui_state_only(&self) -> Registry {
        let mut kept = Registry::default();
        for ((kind, key), bytes) in &self.sizes {
            if kind.is_ui_state() {
                // Each fitted before, so they fit together.
                let _ = kept.admit(*kind, key, *bytes);
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meter_admits_up_to_its_per_call_cap_and_reports_once() {
        let mut meter = Meter::new(
            "console output",
            "lines",
            Cap {
                count: 3,
                bytes: 100,
            },
            Cap {
                count: 1000,
                bytes: 1000,
            },
        );
        for _ in 0..3 {
            meter.admit(10).unwrap();
        }
        let first = meter.admit(10).unwrap_err();
        assert!(first.report);
        assert_eq!(
            first.message,
            "console output over its limit: more than 3 lines or 100 bytes in one call"
        );
        assert!(!meter.admit(10).unwrap_err().report);
        // A new call has its own budget.
        meter.begin_call();
        meter.admit(10).unwrap();
        // Bytes count too.
        assert!(meter.admit(95).is_err());
    }

    #[test]
    fn a_meter_caps_the_rate_across_calls() {
        let mut meter = Meter::new(
            "dialogs",
            "dialogs",
            Cap {
                count: 10,
                bytes: usize::MAX,
            },
            Cap {
                count: 2,
                bytes: usize::MAX,
            },
        );
        meter.admit(0).unwrap();
        meter.begin_call();
        meter.admit(0).unwrap();
        meter.begin_call();
        let refused = meter.admit(0).unwrap_err();
        assert_eq!(
            refused.message,
            "dialogs over its limit: more than 2 dialogs per second"
        );
        assert!(refused.report);
        // Reported once per window, even across calls.
        meter.begin_call();
        assert!(!meter.admit(0).unwrap_err().report);
    }

    #[test]
    fn the_registry_counts_per_kind_and_bytes_in_all() {
        let mut registry = Registry::default();
        registry.admit(Kind::Tool, "a", 10).unwrap();
        // Replacing resizes, it does not add.
        registry.admit(Kind::Tool, "a", 20).unwrap();
        assert_eq!(registry.bytes, 20);
        assert_eq!(registry.counts[&Kind::Tool], 1);
        let error = registry
            .admit(Kind::Tool, "big", MAX_REGISTRATION_BYTES)
            .unwrap_err();
        assert!(error.contains("per-extension limit"), "{error}");
        registry.release(Kind::Tool, "a");
        registry
            .admit(Kind::Tool, "big", MAX_REGISTRATION_BYTES)
            .unwrap();
        registry.release(Kind::Tool, "big");
        for i in 0..MAX_REGISTRATIONS_PER_KIND {
            registry.admit(Kind::Event, &format!("e{i}"), 1).unwrap();
        }
        let error = registry.admit(Kind::Event, "one-more", 1).unwrap_err();
        assert!(error.contains("10000 event subscriptions"), "{error}");
        // Other kinds have their own count.
        registry.admit(Kind::Status, "s", 1).unwrap();
        let kept = registry.ui_state_only();
        assert_eq!(kept.bytes, 1);
        assert!(!kept.counts.contains_key(&Kind::Event));
    }
}
