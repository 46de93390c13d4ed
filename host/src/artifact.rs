//! Extension artifacts (`ext.wasm`): the guest-shim component followed by two custom sections,
//! `pichamber-manifest` (JSON: name, version, WIT version, source hash, requested capabilities)
//! and `pichamber-modules` (JSON: the bundled module map). The shim bytes are identical for
//! every extension built by one pichamber version, so the compiled code is cached once.

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bundle::Bundle;

pub const MANIFEST_SECTION: &str = "pichamber-manifest";
pub const MODULES_SECTION: &str = "pichamber-modules";
/// The WIT package version this host speaks (wit/v0.1.0).
pub const WIT_VERSION: &str = "0.1.0";

/// The prebuilt guest shim (QuickJS + the pi prelude), rebuilt by guest-shim/build.sh.
pub static GUEST_SHIM: &[u8] = include_bytes!("../assets/guest-shim.wasm");

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub name: String,
    pub version: Option<String>,
    pub wit_version: String,
    pub entry: String,
    /// sha256 of the module map, so a report can say exactly which build ran.
    pub source_hash: String,
    pub capabilities: serde_json::Value,
    pub pichamber_version: String,
    pub modules: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleEntry {
    pub id: String,
    pub source: String,
    /// Source map back to the original file, for error positions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<String>,
}

/// A loaded artifact: the code part (what wasmtime compiles) and the extension's data.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub component: Vec<u8>,
    pub manifest: Manifest,
    pub modules: Vec<ModuleEntry>,
}

impl Artifact {
    pub fn from_bundle(bundle: &Bundle) -> Self {
        let modules: Vec<ModuleEntry> = bundle
            .modules
            .iter()
            .map(|m| ModuleEntry {
                id: m.id.clone(),
                source: m.code.clone(),
                map: m.map.clone(),
            })
            .collect();
        // The hash covers the code, not the maps: same code, same build.
        let code_only: Vec<(&str, &str)> = modules
            .iter()
            .map(|m| (m.id.as_str(), m.source.as_str()))
            .collect();
        let modules_json = serde_json::to_vec(&code_only).expect("modules serialise");
        let manifest = Manifest {
            name: bundle.name.clone(),
            version: bundle.version.clone(),
            wit_version: WIT_VERSION.into(),
            entry: bundle.entry.clone(),
            source_hash: format!("sha256:{}", hex(&Sha256::digest(&modules_json))),
            capabilities: bundle.requested_capabilities.clone(),
            pichamber_version: env!("CARGO_PKG_VERSION").into(),
            modules: modules.len(),
        };
        Self {
            component: GUEST_SHIM.to_vec(),
            manifest,
            modules,
        }
    }

    /// The `.wasm` file: the component with the two custom sections appended.
    pub fn source_maps(&self) -> crate::source_map::SourceMaps {
        crate::source_map::SourceMaps::new(
            self.modules
                .iter()
                .filter_map(|m| m.map.clone().map(|map| (m.id.clone(), map))),
        )
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = self.component.clone();
        append_custom_section(
            &mut out,
            MANIFEST_SECTION,
            &serde_json::to_vec_pretty(&self.manifest).unwrap(),
        );
        append_custom_section(
            &mut out,
            MODULES_SECTION,
            &serde_json::to_vec(&self.modules).unwrap(),
        );
        out
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
            bail!("not a WebAssembly file");
        }
        if bytes[6..8] != [0x01, 0x00] {
            bail!(
                "a core WebAssembly module, not a component: build extensions with `pichamber build`"
            );
        }
        let mut pos = 8;
        let mut code_end = None;
        let mut manifest = None;
        let mut modules = None;
        while pos < bytes.len() {
            let start = pos;
            let id = bytes[pos];
            pos += 1;
            let (size, n) = read_leb_u32(&bytes[pos..]).context("corrupt section header")?;
            pos += n;
            let end = pos
                .checked_add(size as usize)
                .filter(|e| *e <= bytes.len())
                .ok_or_else(|| anyhow!("truncated section"))?;
            if id == 0 {
                let (name_len, n) =
                    read_leb_u32(&bytes[pos..end]).context("corrupt custom section")?;
                let name_start = pos + n;
                let name_end = name_start + name_len as usize;
                let name = std::str::from_utf8(bytes.get(name_start..name_end).unwrap_or_default())
                    .unwrap_or_default();
                let payload = &bytes[name_end.min(end)..end];
                match name {
                    MANIFEST_SECTION => {
                        code_end.get_or_insert(start);
                        manifest = Some(
                            serde_json::from_slice::<Manifest>(payload)
                                .context("corrupt pichamber manifest")?,
                        );
                    }
                    MODULES_SECTION => {
                        code_end.get_or_insert(start);
                        modules = Some(
                            serde_json::from_slice::<Vec<ModuleEntry>>(payload)
                                .context("corrupt pichamber module map")?,
                        );
                    }
                    _ => {}
                }
            }
            pos = end;
        }
        let (Some(manifest), Some(modules), Some(code_end)) = (manifest, modules, code_end) else {
            bail!(
                "a WebAssembly component without a pichamber manifest: build it with `pichamber build EXT -o OUT.wasm`"
            );
        };
        if manifest.wit_version != WIT_VERSION {
            bail!(
                "built for pichamber:extension@{} but this pichamber speaks @{WIT_VERSION}; rebuild it with this pichamber",
                manifest.wit_version
            );
        }
        Ok(Self {
            component: bytes[..code_end].to_vec(),
            manifest,
            modules,
        })
    }
}

fn append_custom_section(out: &mut Vec<u8>, name: &str, payload: &[u8]) {
    let mut content = Vec::new();
    write_leb_u32(&mut content, name.len() as u32);
    content.extend_from_slice(name.as_bytes());
    content.extend_from_slice(payload);
    out.push(0);
    write_leb_u32(out, content.len() as u32);
    out.extend_from_slice(&content);
}

fn write_leb_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn read_leb_u32(bytes: &[u8]) -> Option<(u32, usize)> {
    let mut result = 0u32;
    for (i, byte) in bytes.iter().take(5).enumerate() {
        result |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_round_trip_and_code_part_is_the_shim() {
        let bundle = Bundle {
            entry: "/ext/index.ts".into(),
            modules: vec![crate::bundle::BundledModule {
                id: "/ext/index.ts".into(),
                code: "export default () => {}".into(),
                map: None,
            }],
            package: None,
            requested_capabilities: serde_json::json!({"read": ["/data"]}),
            name: "demo".into(),
            version: Some("1.2.3".into()),
        };
        let artifact = Artifact::from_bundle(&bundle);
        let back = Artifact::from_bytes(&artifact.to_bytes()).unwrap();
        assert_eq!(back.manifest, artifact.manifest);
        assert_eq!(back.modules[0].source, "export default () => {}");
        assert_eq!(back.component, GUEST_SHIM);
    }

    #[test]
    fn rejects_files_that_are_not_extensions() {
        assert!(
            Artifact::from_bytes(b"hello")
                .unwrap_err()
                .to_string()
                .contains("not a WebAssembly")
        );
        let err = Artifact::from_bytes(GUEST_SHIM).unwrap_err().to_string();
        assert!(err.contains("without a pichamber manifest"), "{err}");
    }
}
