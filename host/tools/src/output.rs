//! Streaming command output with bounded memory (pi's core/tools/output-accumulator.js):
//! bytes are decoded as UTF-8 as they arrive, only a rolling tail is kept for display, and
//! once the output exceeds the limits all of it goes to a temp file whose path pi reports.

use std::io::Write;
use std::path::PathBuf;

use super::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, LineCount, Truncation, truncate_tail};

/// What the output looks like now.
pub(crate) struct Snapshot {
    pub content: String,
    pub truncation: Truncation,
    pub full_output_path: Option<PathBuf>,
}

pub(crate) struct OutputAccumulator {
    max_lines: u64,
    max_bytes: usize,
    max_rolling_bytes: usize,
    temp_prefix: &'static str,
    /// Bytes of a character split across chunks.
    pending: Vec<u8>,
    raw_chunks: Vec<Vec<u8>>,
    tail: String,
    tail_starts_at_line_boundary: bool,
    total_raw_bytes: usize,
    total_decoded_bytes: usize,
    count: LineCount,
    /// Newlines seen.
    completed_lines: usize,
    /// Whether text follows the last newline.
    open_line: bool,
    current_line_bytes: usize,
    finished: bool,
    temp_path: Option<PathBuf>,
    temp_file: Option<std::fs::File>,
}

impl OutputAccumulator {
    pub fn new(temp_prefix: &'static str, count: LineCount) -> Self {
        OutputAccumulator {
            max_lines: DEFAULT_MAX_LINES,
            max_bytes: DEFAULT_MAX_BYTES,
            max_rolling_bytes: DEFAULT_MAX_BYTES * 2,
            temp_prefix,
            pending: Vec::new(),
            raw_chunks: Vec::new(),
            tail: String::new(),
            tail_starts_at_line_boundary: true,
            total_raw_bytes: 0,
            total_decoded_bytes: 0,
            count,
            completed_lines: 0,
            open_line: false,
            current_line_bytes: 0,
            finished: false,
            temp_path: None,
            temp_file: None,
        }
    }

    pub fn append(&mut self, data: &[u8]) {
        if self.finished {
            return;
        }
        self.total_raw_bytes += data.len();
        let text = self.decode(data, false);
        self.append_decoded(&text);
        if self.temp_file.is_some() || self.should_use_temp_file() {
            self.ensure_temp_file();
            if let Some(f) = &mut self.temp_file {
                let _ = f.write_all(data);
            }
        } else if !data.is_empty() {
            self.raw_chunks.push(data.to_vec());
        }
    }

    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let text = self.decode(&[], true);
        self.append_decoded(&text);
        if self.should_use_temp_file() {
            self.ensure_temp_file();
        }
    }

    pub fn snapshot(&mut self, persist_if_truncated: bool) -> Snapshot {
        let tail = truncate_tail(
            self.snapshot_text(),
            self.max_lines,
            self.max_bytes,
            self.count,
        );
        let truncated =
            self.total_lines() as u64 > self.max_lines || self.total_decoded_bytes > self.max_bytes;
        let truncated_by = if truncated {
            tail.truncated_by
                .or(Some(if self.total_decoded_bytes > self.max_bytes {
                    "bytes"
                } else {
                    "lines"
                }))
        } else {
            None
        };
        let truncation = Truncation {
            truncated,
            truncated_by,
            total_lines: self.total_lines(),
            total_bytes: self.total_decoded_bytes,
            max_lines: self.max_lines,
            max_bytes: self.max_bytes,
            ..tail
        };
        if persist_if_truncated && truncation.truncated {
            self.ensure_temp_file();
        }
        Snapshot {
            content: truncation.content.clone(),
            truncation,
            full_output_path: self.temp_path.clone(),
        }
    }

    /// Closes the temp file (everything written so far stays).
    pub fn close_temp_file(&mut self) {
        if let Some(mut f) = self.temp_file.take() {
            let _ = f.flush();
        }
    }

    /// pi 1.6.0's `readFullOutput`: everything written (after [`Self::finish`] and
    /// [`Self::close_temp_file`]), or, past `max_bytes`, its first and last halves around an
    /// omission marker; and whether it was cut.
    pub fn read_full_output(&self, max_bytes: usize) -> (String, bool) {
        let Some(path) = &self.temp_path else {
            return (
                String::from_utf8_lossy(&self.raw_chunks.concat()).into_owned(),
                false,
            );
        };
        // Only the two ends are read: the whole file may be far larger than memory allows.
        let ends = (|| -> std::io::Result<(Vec<u8>, Vec<u8>, u64)> {
            use std::io::{Read, Seek, SeekFrom};
            let mut file = std::fs::File::open(path)?;
            let size = file.metadata()?.len();
            if size <= max_bytes as u64 {
                let mut all = Vec::new();
                file.read_to_end(&mut all)?;
                return Ok((all, Vec::new(), size));
            }
            let head_len = max_bytes / 2;
            let mut head = vec![0; head_len];
            file.read_exact(&mut head)?;
            let mut tail = vec![0; max_bytes - head_len];
            file.seek(SeekFrom::Start(size - tail.len() as u64))?;
            file.read_exact(&mut tail)?;
            Ok((head, tail, size))
        })();
        let Ok((head, tail, size)) = ends else {
            return (String::new(), false);
        };
        if size <= max_bytes as u64 {
            return (String::from_utf8_lossy(&head).into_owned(), false);
        }
        // Cut at characters: an incomplete sequence at the end of the head is held back, and
        // the tail skips leading continuation bytes.
        let head = match std::str::from_utf8(&head) {
            Err(e) if e.error_len().is_none() => &head[..e.valid_up_to()],
            _ => &head[..],
        };
        let skip = tail.iter().take_while(|b| *b & 0xc0 == 0x80).count();
        let omitted = size - max_bytes as u64;
        let text = format!(
            "{}\n\n[... {omitted} bytes omitted ...]\n\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(&tail[skip..])
        );
        (text, true)
    }

    /// Bytes of the last (unterminated) line.
    pub fn last_line_bytes(&self) -> usize {
        self.current_line_bytes
    }

    /// Streaming UTF-8 decode: invalid sequences become U+FFFD; a sequence cut at the end
    /// of a chunk waits for the next one (or becomes U+FFFD at the end).
    fn decode(&mut self, data: &[u8], last: bool) -> String {
        let mut bytes = std::mem::take(&mut self.pending);
        bytes.extend_from_slice(data);
        let mut out = String::new();
        let mut rest = &bytes[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                        None => {
                            if last {
                                out.push('\u{FFFD}');
                            } else {
                                self.pending = after.to_vec();
                            }
                            break;
                        }
                    }
                }
            }
        }
        out
    }

    fn append_decoded(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.total_decoded_bytes += text.len();
        self.tail.push_str(text);
        if self.tail.len() > self.max_rolling_bytes * 2 {
            self.trim_tail();
        }
        match text.rfind('\n') {
            None => {
                self.current_line_bytes += text.len();
                self.open_line = true;
            }
            Some(last) => {
                self.completed_lines += text.matches('\n').count();
                self.current_line_bytes = text.len() - last - 1;
                self.open_line = last + 1 < text.len();
            }
        }
    }

    /// The lines so far, counted as `count` says.
    fn total_lines(&self) -> usize {
        match self.count {
            LineCount::Split => self.completed_lines + 1,
            LineCount::Terminated => self.completed_lines + usize::from(self.open_line),
        }
    }

    fn trim_tail(&mut self) {
        let len = self.tail.len();
        if len <= self.max_rolling_bytes {
            return;
        }
        let mut start = len - self.max_rolling_bytes;
        while !self.tail.is_char_boundary(start) {
            start += 1;
        }
        if start > 0 {
            self.tail_starts_at_line_boundary = self.tail.as_bytes()[start - 1] == b'\n';
        }
        self.tail.drain(..start);
    }

    fn snapshot_text(&self) -> &str {
        if self.tail_starts_at_line_boundary {
            return &self.tail;
        }
        match self.tail.find('\n') {
            Some(i) => &self.tail[i + 1..],
            None => &self.tail,
        }
    }

    fn should_use_temp_file(&self) -> bool {
        self.total_raw_bytes > self.max_bytes
            || self.total_decoded_bytes > self.max_bytes
            || self.total_lines() as u64 > self.max_lines
    }

    fn ensure_temp_file(&mut self) {
        if self.temp_path.is_some() {
            return;
        }
        let id = uuid::Uuid::new_v4();
        let hex: String = id.as_bytes()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let path = std::env::temp_dir().join(format!("{}-{hex}.log", self.temp_prefix));
        if let Ok(mut f) = std::fs::File::create(&path) {
            for chunk in self.raw_chunks.drain(..) {
                let _ = f.write_all(&chunk);
            }
            self.temp_file = Some(f);
        }
        self.temp_path = Some(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_across_chunks_and_counts_lines() {
        let mut acc = OutputAccumulator::new("pi-test", LineCount::Split);
        let bytes = "héllo\nwörld".as_bytes();
        // Split inside the two-byte é.
        acc.append(&bytes[..2]);
        acc.append(&bytes[2..]);
        acc.append(b"\xff");
        acc.finish();
        let snap = acc.snapshot(false);
        assert_eq!(snap.content, "héllo\nwörld\u{FFFD}");
        assert!(!snap.truncation.truncated);
        assert_eq!(snap.truncation.total_lines, 2);
        assert!(snap.full_output_path.is_none());
    }

    #[test]
    fn the_full_output_keeps_its_two_ends_past_the_cap() {
        let mut acc = OutputAccumulator::new("pi-test", LineCount::Terminated);
        let text = format!(
            "{}é{}",
            "a".repeat(DEFAULT_MAX_BYTES),
            "z".repeat(DEFAULT_MAX_BYTES)
        );
        acc.append(text.as_bytes());
        acc.finish();
        acc.close_temp_file();
        let (small, cut) = acc.read_full_output(1 << 20);
        assert_eq!((small.as_str(), cut), (text.as_str(), false));
        // 9 bytes: 4 of the start, 5 of the end, read without reading what lies between.
        let (ends, cut) = acc.read_full_output(9);
        assert!(cut);
        assert_eq!(
            ends,
            format!(
                "aaaa\n\n[... {} bytes omitted ...]\n\nzzzzz",
                text.len() - 9
            )
        );
        std::fs::remove_file(acc.snapshot(false).full_output_path.unwrap()).unwrap();
    }

    #[test]
    fn long_output_keeps_the_tail_and_spills_to_a_file() {
        let mut acc = OutputAccumulator::new("pi-test", LineCount::Split);
        let all: String = (1..=3000).map(|i| format!("line {i}\n")).collect();
        for chunk in all.as_bytes().chunks(1000) {
            acc.append(chunk);
        }
        acc.finish();
        let snap = acc.snapshot(true);
        let t = &snap.truncation;
        assert!(t.truncated);
        assert_eq!(t.truncated_by, Some("lines"));
        assert_eq!(t.total_lines, 3001);
        assert_eq!(t.output_lines, 2000);
        assert!(snap.content.ends_with("line 3000\n"));
        acc.close_temp_file();
        let path = snap.full_output_path.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), all);
        std::fs::remove_file(path).unwrap();
    }
}
