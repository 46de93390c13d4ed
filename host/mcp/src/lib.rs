//! MCP servers as pi 1.6.0's built-in `mcp` extension runs them: their configs
//! ([`config`]), connections to them ([`client`]), the names their tools get ([`naming`]),
//! and their tool results as pi's ([`result`]). The session decides when to connect and how
//! a server's process may run.

pub mod client;
pub mod config;
pub mod naming;
pub mod result;
