//! Appending to the journal: one line a record, on disk before `append` returns, with
//! one `fdatasync` shared by the steps that append at once (group commit); or written at
//! once and made durable later, by whoever settles it (a run's steps: `settle`).

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Journal, Record};
use crate::error::{Error, Result};

impl Journal {
    /// Appends one record: one `write(2)` of one line on an `O_APPEND` file (mode 0600).
    /// When the file does not end with a newline (a crash tore the last record), the
    /// write starts with one, so the new record is never glued to the torn line.
    /// The record is on disk when this returns (an `fdatasync`): a record that was
    /// reported survives a power cut, not only a crash. Steps that append at once share
    /// one `fdatasync` (see [`Journal::sync_through`]).
    pub fn append(&self, record: &Record) -> Result<()> {
        let seq = self.append_unsettled(record)?;
        self.settle(seq)
    }

    /// Writes one record as [`Journal::append`] does, without waiting for the disk:
    /// returns the append's number, which [`Journal::settle`] makes durable. For a step
    /// that must not hold its thread while the disk syncs (a run starts what needs the
    /// step only once its record is settled).
    pub fn append_unsettled(&self, record: &Record) -> Result<u64> {
        let json = serde_json::to_string(record)
            .map_err(|e| Error::failed(format!("cannot encode a journal record: {e}")))?;
        self.write_line(&json)
    }

    /// Returns once append number `seq` (and every one before it) is on disk: one
    /// `fdatasync` for all that were written since the last one.
    pub fn settle(&self, seq: u64) -> Result<()> {
        let file = self
            .file
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Arc::clone);
        match file {
            Some(f) => self
                .sync_through(&f, seq)
                .map_err(|e| Error::io("append to", &self.path, e)),
            None => Ok(()),
        }
    }

    /// Writes `json` as one line; returns the append's number.
    fn write_line(&self, json: &str) -> Result<u64> {
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            if let Some(dir) = self.path.parent() {
                crate::files::private_dir(dir)?;
            }
            *guard = Some(Arc::new(
                crate::files::open_private_append(&self.path)
                    .map_err(|e| Error::io("open", &self.path, e))?,
            ));
        }
        let Some(f) = guard.as_ref() else {
            return Err(Error::failed("the journal is not open"));
        };
        let mut line = String::with_capacity(json.len() + 2);
        // Another strata (a preview beside an up) may append too, and may have crashed
        // in the middle of a line.
        if !ends_with_newline(&mut f.as_ref()) {
            line.push('\n');
        }
        line.push_str(json);
        line.push('\n');
        f.as_ref()
            .write_all(line.as_bytes())
            .map_err(|e| Error::io("append to", &self.path, e))?;
        let seq = self.written.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(seq)
    }

    /// Returns once append number `seq` is on disk. Group commit: the first caller in
    /// syncs every append written so far; those that waited behind it find theirs
    /// already synced and return without an `fdatasync` of their own.
    fn sync_through(&self, file: &std::fs::File, seq: u64) -> std::io::Result<()> {
        let mut synced = self.synced.lock().unwrap_or_else(|e| e.into_inner());
        if *synced >= seq {
            return Ok(());
        }
        let upto = self.written.load(Ordering::SeqCst);
        file.sync_data()?;
        *synced = upto;
        Ok(())
    }
}

/// Whether the (append-mode) file is empty or ends with `\n`.
fn ends_with_newline(f: &mut &std::fs::File) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(len) = f.seek(SeekFrom::End(0)) else {
        return true;
    };
    if len == 0 || f.seek(SeekFrom::Start(len - 1)).is_err() {
        return true;
    }
    let mut last = [0u8; 1];
    f.read_exact(&mut last).is_err() || last[0] == b'\n'
}
