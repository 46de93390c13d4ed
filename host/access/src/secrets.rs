//! Secrets by reference (`--secret NAME=HOST`): an extension that needs an API key sees a
//! placeholder in `process.env.NAME` (and so do the programs it runs), never the value. The
//! host puts the value from its own environment into the headers and body of a `fetch` it
//! carries out for the extension, and only when the request goes to a host the secret is
//! granted for; a response that echoes the value gives back the placeholder. So a hostile
//! extension can use the key with its service but cannot read it, log it or send it
//! elsewhere.

use std::sync::OnceLock;

/// One secret: the environment variable holding it and the host pattern (as `--allow-net`
/// takes it) its value may be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub name: String,
    pub host: String,
}

impl Secret {
    /// `NAME=HOST`, as the flag and the serve config write it.
    pub fn parse(text: &str) -> Result<Secret, String> {
        let (name, host) = text.split_once('=').ok_or_else(|| {
            format!("--secret {text:?}: expected NAME=HOST (the variable and the host its value may be sent to)")
        })?;
        let valid_name = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !valid_name {
            return Err(format!(
                "--secret {text:?}: {name:?} is not an environment variable name"
            ));
        }
        if !crate::net::is_host_pattern(host) || host.contains('/') {
            return Err(format!(
                "--secret {text:?}: {host:?} is not a host (example.com, *.example.com, with an optional :port)"
            ));
        }
        Ok(Secret {
            name: name.to_owned(),
            host: host.to_owned(),
        })
    }

    /// What the extension sees instead of the value: the same for the whole process, unknown
    /// before it starts.
    pub fn placeholder(&self) -> String {
        static SALT: OnceLock<String> = OnceLock::new();
        let salt = SALT.get_or_init(|| uuid::Uuid::new_v4().simple().to_string());
        format!("pichamber-secret-{}-{}", self.name, &salt[..16])
    }

    /// The value, from the host's environment.
    pub fn value(&self) -> Option<String> {
        std::env::var(&self.name).ok().filter(|v| !v.is_empty())
    }
}

/// `bytes` with every `from` replaced by `to`.
pub fn replace_bytes(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() || bytes.len() < from.len() {
        return bytes.to_vec();
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_named_variables_bound_to_a_host() {
        assert_eq!(
            Secret::parse("OPENAI_API_KEY=api.openai.com"),
            Ok(Secret {
                name: "OPENAI_API_KEY".into(),
                host: "api.openai.com".into()
            })
        );
        for bad in [
            "KEY",
            "=x.com",
            "1KEY=x.com",
            "A-B=x.com",
            "KEY=http://x.com",
            "KEY=10.0.0.0/8",
        ] {
            assert!(Secret::parse(bad).is_err(), "{bad}");
        }
        let s = Secret::parse("K=x.com").unwrap();
        assert_eq!(s.placeholder(), s.placeholder());
        assert!(s.placeholder().starts_with("pichamber-secret-K-"));
        assert_eq!(replace_bytes(b"a KEY b KEY", b"KEY", b"v"), b"a v b v");
    }
}
