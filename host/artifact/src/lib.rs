//! Extension sources in, an artifact out: [`bundle`] strips TypeScript and resolves every import
//! with oxc into a module map; this crate's root is the `.wasm` format (the guest-shim
//! component followed by two custom sections, `pichamber-manifest`: name, version, WIT version,
//! source hash, requested capabilities, and `pichamber-modules`: the module map); [`source_map`]
//! maps runtime positions back to the sources. The shim bytes are the same for every extension
//! built by one pichamber, so their compiled code is cached once.
//!
//! It knows nothing of wasmtime, sessions or what the extension does when it runs; from access it
//! takes only the type of the capability requests a manifest carries.

pub mod bundle;
mod commonjs;
pub mod manifest_entries;
mod missing_imports;
pub mod package_files;
mod package_scope;
pub mod source_map;

use std::borrow::Cow;
use std::fs::File;
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bundle::Bundle;

pub const MANIFEST_SECTION: &str = "pichamber-manifest";
pub const MODULES_SECTION: &str = "pichamber-modules";
/// The WIT package version `build` writes (wit/v0.2.0).
pub const WIT_VERSION: &str = "0.2.0";
/// Every WIT version an artifact may have been built with and still load, oldest first (the
/// runtime has an adapter for each older one).
pub const WIT_VERSIONS: [&str; 2] = ["0.1.0", WIT_VERSION];

/// The prebuilt guest shim (QuickJS + the pi prelude), rebuilt by guest-shim/build.sh; the
/// copy build.rs hashed as [`GUEST_SHIM_SHA256`].
pub static GUEST_SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/guest-shim.wasm"));

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub name: String,
    pub version: Option<String>,
    pub wit_version: String,
    /// The entry module (a package's first extension).
    pub entry: String,
    /// A package's extensions, in pi's load order, when it has more than one: they load into
    /// one instance (the package is the isolation unit). Absent in artifacts of one extension.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    /// sha256 of the module map, so a report can say exactly which build ran.
    pub source_hash: String,
    /// sha256 of the component part, so a run finds its compiled code without reading it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_hash: Option<String>,
    pub capabilities: serde_json::Value,
    pub pichamber_version: String,
    pub modules: usize,
    /// The pi release the extension was written for (see `pichamber_pi`); absent when its
    /// imports name none, and in artifacts built before pichamber recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pi_version: Option<pichamber_pi::PiVersion>,
}

impl Manifest {
    /// What the guest's `load` is given: the entry module's id, or a package's extensions as
    /// a JSON array of ids (wit/v0.2.0, `guest.load`).
    pub fn load_entry(&self) -> String {
        if self.extensions.is_empty() {
            self.entry.clone()
        } else {
            serde_json::to_string(&self.extensions).expect("ids serialise")
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleEntry {
    pub id: String,
    pub source: String,
    /// Source map back to the original file, for error positions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<String>,
}

/// An artifact's modules, immutable and shared by its clones (every session of an extension
/// starts from a clone of the loaded artifact), with what is derived from them computed once.
#[derive(Debug, Clone, Default)]
pub struct Modules(Arc<ModulesInner>);

#[derive(Debug, Default)]
struct ModulesInner {
    entries: Vec<ModuleEntry>,
    digest: OnceLock<[u8; 32]>,
    source_maps: OnceLock<Arc<source_map::SourceMaps>>,
}

impl Modules {
    /// sha256 of every module's id, source and map, as this process read them: unlike the
    /// manifest's source hash, which the artifact only claims, it names what runs.
    pub fn digest(&self) -> [u8; 32] {
        *self.0.digest.get_or_init(|| {
            let mut hasher = Sha256::new();
            for m in &self.0.entries {
                for part in [
                    m.id.as_str(),
                    m.source.as_str(),
                    m.map.as_deref().unwrap_or(""),
                ] {
                    hasher.update((part.len() as u64).to_le_bytes());
                    hasher.update(part.as_bytes());
                }
            }
            hasher.finalize().into()
        })
    }

    /// The modules' source maps, for error positions.
    pub fn source_maps(&self) -> Arc<source_map::SourceMaps> {
        self.0
            .source_maps
            .get_or_init(|| {
                Arc::new(source_map::SourceMaps::new(
                    self.0
                        .entries
                        .iter()
                        .filter_map(|m| m.map.clone().map(|map| (m.id.clone(), map))),
                ))
            })
            .clone()
    }
}

impl From<Vec<ModuleEntry>> for Modules {
    fn from(entries: Vec<ModuleEntry>) -> Self {
        Self(Arc::new(ModulesInner {
            entries,
            ..Default::default()
        }))
    }
}

impl std::ops::Deref for Modules {
    type Target = [ModuleEntry];
    fn deref(&self) -> &[ModuleEntry] {
        &self.0.entries
    }
}

impl Serialize for Modules {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.entries.serialize(serializer)
    }
}

/// Where an artifact's component code is. A run with a warm compile cache never reads it.
#[derive(Debug, Clone)]
pub enum ComponentCode {
    /// The guest shim compiled into this binary.
    Embedded,
    /// The first `len` bytes of a `.wasm` file.
    File {
        path: PathBuf,
        len: u64,
    },
    Bytes(Vec<u8>),
}

/// A loaded artifact: the component (what wasmtime compiles) and the extension's data.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub code: ComponentCode,
    pub manifest: Manifest,
    pub modules: Modules,
    /// Where the sources were, when the artifact was built from them in this run (a built
    /// `.wasm` does not say): what the extension's `/ext/...` paths mean on the host.
    pub origin: Option<Origin>,
}

/// The host folders behind an extension built from sources.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    /// The extension as given (a file or folder, absolute).
    pub path: PathBuf,
    /// The package folder its modules are `/ext/...` in.
    pub root: PathBuf,
}

/// sha256 of the embedded guest shim, computed when pichamber was built.
pub const GUEST_SHIM_SHA256: &str = env!("GUEST_SHIM_SHA256");

impl Artifact {
    pub fn from_bundle(bundle: &Bundle) -> Self {
        // The package's files ride with the modules, marked by their id (package_files).
        let modules: Vec<ModuleEntry> = bundle
            .modules
            .iter()
            .map(|m| ModuleEntry {
                id: m.id.clone(),
                source: m.code.clone(),
                map: m.map.clone(),
            })
            .chain(bundle.files.iter().map(|f| ModuleEntry {
                id: format!("{}{}", package_files::FILE_ID_PREFIX, f.path),
                source: f.text.clone(),
                map: None,
            }))
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
            entry: bundle.entries[0].clone(),
            extensions: if bundle.entries.len() > 1 {
                bundle.entries.clone()
            } else {
                Vec::new()
            },
            source_hash: format!("sha256:{}", hex(&Sha256::digest(&modules_json))),
            component_hash: Some(format!("sha256:{GUEST_SHIM_SHA256}")),
            capabilities: bundle.requested_capabilities.clone(),
            pichamber_version: env!("CARGO_PKG_VERSION").into(),
            // Source modules: a CommonJS file's body module is part of that file.
            modules: bundle
                .modules
                .iter()
                .filter(|m| !commonjs::is_body(&m.id))
                .count(),
            pi_version: bundle.pi_version,
        };
        Self {
            code: ComponentCode::Embedded,
            manifest,
            modules: modules.into(),
            origin: Some(Origin {
                path: bundle.input.clone(),
                root: bundle.root.clone(),
            }),
        }
    }

    /// Every file the build bundled, as a reviewer reads it: its path in the package, or for
    /// a dependency found outside the package folder (npm's flat layout, a workspace link)
    /// `<package>/<path in it>` marked so.
    /// The package files the extension reads at run time, by their `/ext/...` path.
    pub fn package_files(&self) -> Vec<String> {
        self.modules
            .iter()
            .filter_map(|m| m.id.strip_prefix(package_files::FILE_ID_PREFIX))
            .map(str::to_owned)
            .collect()
    }

    pub fn bundled_files(&self) -> Vec<String> {
        self.modules
            .iter()
            .filter(|m| {
                !m.id.starts_with(package_files::FILE_ID_PREFIX) && !commonjs::is_body(&m.id)
            })
            .map(|m| {
                let id = m.id.strip_prefix("/ext/").unwrap_or(&m.id);
                match id
                    .strip_prefix("_external/")
                    .and_then(|r| r.split_once('/'))
                {
                    Some((_, path)) => format!("{path} (a dependency outside the package folder)"),
                    None => id.to_owned(),
                }
            })
            .collect()
    }

    /// The component's bytes (reads them from the file when they live there).
    pub fn component_bytes(&self) -> Result<Cow<'static, [u8]>> {
        Ok(match &self.code {
            ComponentCode::Embedded => Cow::Borrowed(GUEST_SHIM),
            ComponentCode::Bytes(b) => Cow::Owned(b.clone()),
            ComponentCode::File { path, len } => {
                let mut bytes = Vec::with_capacity(*len as usize);
                File::open(path)?.take(*len).read_to_end(&mut bytes)?;
                Cow::Owned(bytes)
            }
        })
    }

    /// The component's hash as the manifest records it (checked against the bytes whenever
    /// they are compiled), or computed from the bytes for an artifact without one.
    pub fn component_hash(&self) -> Result<[u8; 32]> {
        if matches!(self.code, ComponentCode::Embedded) {
            return Ok(parse_hash(GUEST_SHIM_SHA256).expect("build.rs writes a valid hash"));
        }
        if let Some(hash) = self
            .manifest
            .component_hash
            .as_deref()
            .and_then(|h| h.strip_prefix("sha256:"))
            .and_then(parse_hash)
        {
            return Ok(hash);
        }
        Ok(Sha256::digest(self.component_bytes()?).into())
    }

    pub fn source_maps(&self) -> Arc<crate::source_map::SourceMaps> {
        self.modules.source_maps()
    }

    /// The `.wasm` file: the component with the two custom sections appended.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = self.component_bytes()?.into_owned();
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
        Ok(out)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let mut artifact = Self::read(&mut Cursor::new(bytes))?;
        if let ComponentCode::File { len, .. } = artifact.code {
            artifact.code = ComponentCode::Bytes(bytes[..len as usize].to_vec());
        }
        Ok(artifact)
    }

    /// Reads a `.wasm` file's manifest and modules; the component stays in the file.
    pub fn from_file(path: &Path) -> Result<Self> {
        let mut file = std::io::BufReader::new(File::open(path)?);
        let mut artifact = Self::read(&mut file)?;
        if let ComponentCode::File { len, .. } = artifact.code {
            artifact.code = ComponentCode::File {
                path: path.to_path_buf(),
                len,
            };
        }
        Ok(artifact)
    }

    /// Walks the top-level sections (seeking over the component's own) and reads the two
    /// pichamber custom sections.
    fn read(input: &mut (impl Read + Seek)) -> Result<Self> {
        let total = input.seek(SeekFrom::End(0))?;
        input.seek(SeekFrom::Start(0))?;
        let mut header = [0u8; 8];
        if total < 8 || input.read_exact(&mut header).is_err() || &header[..4] != b"\0asm" {
            bail!("not a WebAssembly file");
        }
        if header[6..8] != [0x01, 0x00] {
            bail!(
                "a core WebAssembly module, not a component: build extensions with `pichamber build`"
            );
        }
        let mut pos = 8u64;
        let mut code_end = None;
        let mut manifest = None;
        let mut modules = None;
        while pos < total {
            let start = pos;
            let mut id = [0u8; 1];
            input.read_exact(&mut id).context("truncated section")?;
            let (size, n) = read_leb_u32_from(input).context("corrupt section header")?;
            pos += 1 + n as u64;
            let end = pos + u64::from(size);
            if end > total {
                bail!("truncated section");
            }
            if id[0] == 0 {
                let (name_len, n) = read_leb_u32_from(input).context("corrupt custom section")?;
                let mut name = vec![0u8; (name_len as usize).min(64)];
                input
                    .read_exact(&mut name)
                    .context("corrupt custom section")?;
                let payload_start = pos + n as u64 + u64::from(name_len);
                let ours = [MANIFEST_SECTION, MODULES_SECTION]
                    .iter()
                    .any(|s| s.as_bytes() == name.as_slice());
                if ours && payload_start <= end {
                    code_end.get_or_insert(start);
                    input.seek(SeekFrom::Start(payload_start))?;
                    let mut payload = vec![0u8; (end - payload_start) as usize];
                    input.read_exact(&mut payload)?;
                    if name == MANIFEST_SECTION.as_bytes() {
                        manifest = Some(
                            serde_json::from_slice::<Manifest>(&payload)
                                .context("corrupt pichamber manifest")?,
                        );
                    } else {
                        modules = Some(
                            serde_json::from_slice::<Vec<ModuleEntry>>(&payload)
                                .context("corrupt pichamber module map")?,
                        );
                    }
                }
            }
            input.seek(SeekFrom::Start(end))?;
            pos = end;
        }
        let (Some(manifest), Some(modules), Some(code_end)) = (manifest, modules, code_end) else {
            bail!(
                "a WebAssembly component without a pichamber manifest: build it with `pichamber build EXT -o OUT.wasm`"
            );
        };
        if !WIT_VERSIONS.contains(&manifest.wit_version.as_str()) {
            bail!(
                "built for pichamber:extension@{}, which this pichamber does not load (it loads {}): \
                 rebuild it with this pichamber, or run it with the pichamber that built it",
                manifest.wit_version,
                WIT_VERSIONS.map(|v| format!("@{v}")).join(", ")
            );
        }
        Ok(Self {
            code: ComponentCode::File {
                path: PathBuf::new(),
                len: code_end,
            },
            manifest,
            modules: modules.into(),
            origin: None,
        })
    }
}

fn parse_hash(hex_text: &str) -> Option<[u8; 32]> {
    if hex_text.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex_text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn read_leb_u32_from(input: &mut impl Read) -> Option<(u32, usize)> {
    let mut result = 0u32;
    for i in 0..5 {
        let mut byte = [0u8; 1];
        input.read_exact(&mut byte).ok()?;
        result |= u32::from(byte[0] & 0x7f) << (7 * i);
        if byte[0] & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
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

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_round_trip_and_code_part_is_the_shim() {
        let bundle = Bundle {
            pi_version: None,
            entries: vec!["/ext/index.ts".into()],
            modules: vec![crate::bundle::BundledModule {
                id: "/ext/index.ts".into(),
                code: "export default () => {}".into(),
                map: None,
            }],
            package: None,
            requested_capabilities: serde_json::json!({"read": ["/data"]}),
            name: "demo".into(),
            version: Some("1.2.3".into()),
            input: "/src/demo".into(),
            root: "/src/demo".into(),
            warnings: Vec::new(),
            files: Vec::new(),
        };
        let artifact = Artifact::from_bundle(&bundle);
        let back = Artifact::from_bytes(&artifact.to_bytes().unwrap()).unwrap();
        assert_eq!(back.manifest, artifact.manifest);
        assert_eq!(back.modules[0].source, "export default () => {}");
        assert_eq!(&*back.component_bytes().unwrap(), GUEST_SHIM);
        assert_eq!(
            back.component_hash().unwrap(),
            <[u8; 32]>::from(Sha256::digest(GUEST_SHIM))
        );
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
