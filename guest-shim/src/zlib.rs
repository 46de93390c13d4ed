//! node:zlib's one-shot codecs (deflate, inflate, their raw and gzip forms), computed inside
//! the guest with flate2's pure-Rust backend: compression needs no capability. Bytes cross to
//! JavaScript as base64; decompressed output is capped (Node's `maxOutputLength`) so a small
//! bomb cannot fill the instance's memory.

use std::io::{Read, Write};

use base64::Engine as _;
use flate2::Compression;
use flate2::read::{DeflateDecoder, GzDecoder, MultiGzDecoder, ZlibDecoder};
use flate2::write::{DeflateEncoder, GzEncoder, ZlibEncoder};
use serde_json::Value;

use crate::hostcall::Args;

/// The most a decompression may produce unless the call asks for less (Node's default is
/// the largest Buffer; here it is what an instance can afford).
const MAX_OUTPUT: usize = 64 << 20;

/// `zlib(op, base64, {level, maxOutputLength})` → base64, or an error Node-shaped in JS:
/// "code: message".
pub fn call(a: &Args) -> Result<Value, String> {
    let op = a.str(0);
    let input = base64::engine::general_purpose::STANDARD
        .decode(a.str(1))
        .map_err(|e| format!("ERR_INVALID_ARG_TYPE: {e}"))?;
    let options = a.value(2);
    let level = match options.get("level").and_then(Value::as_i64) {
        None | Some(-1) => Compression::default(),
        Some(l @ 0..=9) => Compression::new(l as u32),
        Some(l) => {
            return Err(format!(
                "ERR_OUT_OF_RANGE: The value of \"options.level\" is out of range. It must be >= -1 and <= 9. Received {l}"
            ));
        }
    };
    let most = options
        .get("maxOutputLength")
        .and_then(Value::as_u64)
        .map_or(MAX_OUTPUT, |m| (m as usize).min(MAX_OUTPUT));
    let out = match op.as_str() {
        "deflate" => encode(ZlibEncoder::new(Vec::new(), level), &input),
        "deflateRaw" => encode(DeflateEncoder::new(Vec::new(), level), &input),
        "gzip" => encode(GzEncoder::new(Vec::new(), level), &input),
        "inflate" => decode(ZlibDecoder::new(&input[..]), most),
        "inflateRaw" => decode(DeflateDecoder::new(&input[..]), most),
        // Node's gunzip reads every member of a multi-member file.
        "gunzip" => decode(MultiGzDecoder::new(&input[..]), most),
        // unzip: gzip or zlib, by the header.
        "unzip" if input.starts_with(&[0x1f, 0x8b]) => decode(GzDecoder::new(&input[..]), most),
        "unzip" => decode(ZlibDecoder::new(&input[..]), most),
        other => {
            return Err(format!(
                "ERR_INVALID_ARG_VALUE: unknown zlib operation {other:?}"
            ));
        }
    }?;
    Ok(Value::String(
        base64::engine::general_purpose::STANDARD.encode(out),
    ))
}

fn encode<W: Write + Finish>(mut encoder: W, input: &[u8]) -> Result<Vec<u8>, String> {
    encoder
        .write_all(input)
        .map_err(|e| format!("Z_STREAM_ERROR: {e}"))?;
    encoder.done().map_err(|e| format!("Z_STREAM_ERROR: {e}"))
}

fn decode(decoder: impl Read, most: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    // One byte past the cap tells "too large" from "exactly the cap".
    decoder
        .take(most as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| {
            let message = e.to_string();
            // What zlib says of input that is not what the call expects.
            if message.contains("invalid gzip header") || message.contains("corrupt deflate") {
                "Z_DATA_ERROR: incorrect header check".to_owned()
            } else {
                format!("Z_DATA_ERROR: {message}")
            }
        })?;
    if out.len() > most {
        return Err(format!(
            "ERR_BUFFER_TOO_LARGE: Cannot create a Buffer larger than {most} bytes"
        ));
    }
    Ok(out)
}

/// flate2's encoders each have their own `finish`.
trait Finish {
    fn done(self) -> std::io::Result<Vec<u8>>;
}
impl Finish for ZlibEncoder<Vec<u8>> {
    fn done(self) -> std::io::Result<Vec<u8>> {
        self.finish()
    }
}
impl Finish for DeflateEncoder<Vec<u8>> {
    fn done(self) -> std::io::Result<Vec<u8>> {
        self.finish()
    }
}
impl Finish for GzEncoder<Vec<u8>> {
    fn done(self) -> std::io::Result<Vec<u8>> {
        self.finish()
    }
}
