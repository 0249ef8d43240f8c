//! The file-system sink: `<dir>/<ISO-timestamp>_trace_<traceId>.jsonl` (or `.pb`).
//!
//! One file per trace, named at the sink's first sight of the trace like the reference adapter
//! (reference §3.1). Spans of a batch are grouped per trace and each file gets **one** append
//! per batch. Lines are written whole: appends to one file are serialized, and an append that
//! fails part-way (disk full) is cut back, so a reader never sees half a line unless the
//! process dies inside the write; the replay loader skips and reports such a torn tail.
//! The trace id is the only input in the path and is re-checked here as 32 hex characters,
//! so no input can name a file outside the directory.

use std::collections::{HashMap, VecDeque};
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::json::pb::put_varint;
use crate::record::SpanRecord;

/// On-disk format of a recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// One `CleanSpanData` JSON object per line (Tusk's layout). The default.
    #[default]
    Jsonl,
    /// Length-delimited (varint) `tusk.drift.core.v1.Span` messages.
    Proto,
}

impl Format {
    /// The file extension, without the dot.
    pub fn extension(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Proto => "pb",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "jsonl" => Ok(Format::Jsonl),
            "proto" => Ok(Format::Proto),
            other => Err(format!(
                "unknown format {other:?}: expected \"jsonl\" or \"proto\""
            )),
        }
    }
}

/// How many trace → file mappings are remembered. A trace seen again after eviction gets a
/// new file; the replay loader merges files by trace id.
const MAX_TRACKED_TRACES: usize = 100_000;

/// Writes recordings into one directory.
#[derive(Debug)]
pub struct FsSink {
    dir: PathBuf,
    format: Format,
    files: Mutex<TraceFiles>,
}

#[derive(Debug, Default)]
struct TraceFiles {
    paths: HashMap<String, Arc<TraceFile>>,
    order: VecDeque<String>,
}

/// One trace's file. Appends to it are serialized (batches of one trace can be written by two
/// workers at once), so a failed append can be cut back without cutting someone else's lines.
#[derive(Debug)]
struct TraceFile {
    path: PathBuf,
    append: Mutex<()>,
}

impl FsSink {
    /// Creates the directory if needed.
    pub fn new(dir: impl Into<PathBuf>, format: Format) -> io::Result<FsSink> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot create recordings directory {}: {e}", dir.display()),
            )
        })?;
        Ok(FsSink {
            dir,
            format,
            files: Mutex::new(TraceFiles::default()),
        })
    }

    /// The directory written to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The format written.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Appends `records` (in order), one write per trace file. Returns, for each record that
    /// could not be written, its index in `records` and the error.
    pub fn write(&self, records: &[&SpanRecord]) -> Vec<(usize, String)> {
        let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            match groups.iter_mut().find(|(t, _)| *t == r.trace_id) {
                Some((_, v)) => v.push(i),
                None => groups.push((&r.trace_id, vec![i])),
            }
        }
        let mut failed = Vec::new();
        for (trace_id, idx) in groups {
            let mut buf = Vec::with_capacity(idx.iter().map(|&i| records[i].jsonl.len() + 1).sum());
            for &i in &idx {
                match self.format {
                    Format::Jsonl => {
                        buf.extend_from_slice(&records[i].jsonl);
                        buf.push(b'\n');
                    }
                    Format::Proto => {
                        put_varint(&mut buf, records[i].proto.len() as u64);
                        buf.extend_from_slice(&records[i].proto);
                    }
                }
            }
            if let Err(e) = self.append(trace_id, &buf) {
                failed.extend(idx.into_iter().map(|i| (i, e.clone())));
            }
        }
        failed
    }

    fn append(&self, trace_id: &str, bytes: &[u8]) -> Result<(), String> {
        let trace_file = self.path_for(trace_id)?;
        let path = &trace_file.path;
        let _serialized = trace_file.append.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        // A write can stop part-way (ENOSPC, EFBIG, EIO) after some bytes reached the file.
        // Those bytes would be a torn line in the middle of the file, glued to the next
        // append's first line; cut the file back to where this append started instead.
        let start = file
            .metadata()
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?
            .len();
        let mut done = 0;
        while done < bytes.len() {
            match file.write(&bytes[done..]) {
                Ok(0) => {
                    return Err(self.undo(
                        &file,
                        path,
                        start,
                        done,
                        io::ErrorKind::WriteZero.into(),
                    ))
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.undo(&file, path, start, done, e)),
            }
        }
        Ok(())
    }

    /// Removes the `done` bytes a failed append left at the end of `file` (it started at
    /// `start`), and describes the failure.
    fn undo(&self, file: &fs::File, path: &Path, start: u64, done: usize, e: io::Error) -> String {
        if done == 0 {
            return format!("cannot write {}: {e}", path.display());
        }
        match file.set_len(start) {
            Ok(()) => format!(
                "cannot write {}: {e} (the {done} bytes written before the error were removed)",
                path.display()
            ),
            Err(t) => format!(
                "cannot write {}: {e}; {done} bytes of a partial line remain (truncating failed: {t})",
                path.display()
            ),
        }
    }

    fn path_for(&self, trace_id: &str) -> Result<Arc<TraceFile>, String> {
        if trace_id.len() != 32 || !trace_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("refusing trace id {trace_id:?} as a file name"));
        }
        let mut files = self.files.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = files.paths.get(trace_id) {
            return Ok(Arc::clone(f));
        }
        let stamp = humantime::format_rfc3339_millis(SystemTime::now())
            .to_string()
            .replace([':', '.'], "-");
        let path = self.dir.join(format!(
            "{stamp}_trace_{trace_id}.{}",
            self.format.extension()
        ));
        let file = Arc::new(TraceFile {
            path,
            append: Mutex::new(()),
        });
        files.paths.insert(trace_id.to_string(), Arc::clone(&file));
        files.order.push_back(trace_id.to_string());
        if files.order.len() > MAX_TRACKED_TRACES {
            if let Some(old) = files.order.pop_front() {
                files.paths.remove(&old);
            }
        }
        Ok(file)
    }
}
