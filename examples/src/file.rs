//! Files of the `onic` tool: every file it writes appears complete or not at all, and every file
//! it reads whole is read up to a bound.
//!
//! An [`OutputFile`] is written under a temporary name in the directory of its final name
//! (`.NAME.onic-tmp-PID`) and renamed onto that name by [`OutputFile::commit`] once everything is
//! written and synced; dropped without a commit (any error on the way), the temporary file is
//! removed. A full file system therefore leaves the previous file, or none, never a truncated
//! one. A target that exists and is no regular file (`/dev/null`, `/dev/full`, a FIFO) is written
//! in place: there is nothing to rename over.
//!
//! [`check_output`] finds before any work whether an output could be written: its directory
//! accepts new files, and an existing file of that name is one this process may write.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// A file being written; see the module docs.
pub struct OutputFile {
    path: PathBuf,
    /// The temporary name, while the file is not committed (`None`: written in place).
    tmp: Option<PathBuf>,
    file: Option<BufWriter<File>>,
}

/// `PATH: cannot write: <error>`.
fn write_error(path: &Path, e: &io::Error) -> String {
    format!("{}: cannot write: {e}", path.display())
}

/// Whether `path` exists and is something other than a regular file or a directory.
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// The temporary name of `path`'s output, in the same directory.
fn temp_name(path: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".onic-tmp-{}", std::process::id()));
    path.with_file_name(name)
}

impl OutputFile {
    /// Starts writing `path`.
    ///
    /// # Errors
    ///
    /// `PATH: cannot write: <error>` (the temporary file cannot be created).
    pub fn create(path: &Path) -> Result<Self, String> {
        if path.is_dir() {
            return Err(format!("{}: cannot write: is a directory", path.display()));
        }
        let (tmp, file) = if is_special(path) {
            let f = OpenOptions::new().write(true).open(path);
            (None, f.map_err(|e| write_error(path, &e))?)
        } else {
            let tmp = temp_name(path);
            let f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(|e| write_error(path, &e))?;
            (Some(tmp), f)
        };
        Ok(Self {
            path: path.to_path_buf(),
            tmp,
            file: Some(BufWriter::with_capacity(1 << 16, file)),
        })
    }

    /// The final name.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `bytes`.
    ///
    /// # Errors
    ///
    /// `PATH: cannot write: <error>`.
    pub fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        match self.file.as_mut() {
            Some(f) => f.write_all(bytes).map_err(|e| write_error(&self.path, &e)),
            None => Err(format!("{}: cannot write: already closed", self.path.display())),
        }
    }

    /// Flushes and syncs the file and gives it its name.
    ///
    /// # Errors
    ///
    /// `PATH: cannot write: <error>`; the temporary file is removed.
    pub fn commit(mut self) -> Result<(), String> {
        let Some(buffered) = self.file.take() else {
            return Ok(());
        };
        let file = buffered
            .into_inner()
            .map_err(|e| write_error(&self.path, e.error()))?;
        file.sync_all()
            .or_else(|e| {
                // Syncing a device file (e.g. /dev/null) is refused; that is not a write failure.
                if e.kind() == io::ErrorKind::InvalidInput {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|e| write_error(&self.path, &e))?;
        drop(file);
        if let Some(tmp) = &self.tmp {
            std::fs::rename(tmp, &self.path).map_err(|e| write_error(&self.path, &e))?;
            self.tmp = None;
        }
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.file.as_mut() {
            Some(f) => f.write(buf),
            None => Err(io::Error::other("already closed")),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.as_mut().map_or(Ok(()), Write::flush)
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Not committed: the partial file goes.
        drop(self.file.take());
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Finds before any work whether `path` could be written as an [`OutputFile`]: a new file can be
/// created in its directory, and an existing `path` is no directory and opens for writing (it
/// is not changed). `option` names where the path came from.
///
/// # Errors
///
/// `OPTION PATH: ...` saying what is in the way.
pub fn check_output(path: &Path, option: &str) -> Result<(), String> {
    let what = format!("{option} {}", path.display());
    if path.is_dir() {
        return Err(format!("{what}: is a directory, not a file"));
    }
    if path.exists() {
        OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| format!("{what}: exists and cannot be written: {e}"))?;
        if is_special(path) {
            return Ok(());
        }
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    probe_dir(dir).map_err(|e| format!("{what}: {e}"))
}

/// Creates and removes a file in `dir`.
fn probe_dir(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let probe = dir.join(format!(".onic-write-test-{}", std::process::id()));
    match File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        // A file system that refuses new files (procfs, sysfs) says "not found".
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(format!(
            "no file can be created in directory {} (its file system refuses new files: {e})",
            dir.display()
        )),
        Err(e) => Err(format!(
            "no file can be created in directory {}: {e}",
            dir.display()
        )),
    }
}

/// Makes sure `dir` exists (created if missing) and a file can be created in it.
///
/// # Errors
///
/// `OPTION DIR: cannot create ...` or `OPTION DIR: no file can be created ...`.
pub fn writable_dir(dir: &Path, option: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{option} {}: cannot create the directory: {e}", dir.display()))?;
    probe_dir(dir).map_err(|e| format!("{option} {}: {e}", dir.display()))
}

/// Reads all of `path`, refusing it once it passes `limit` bytes: at most `limit + 1` bytes are
/// ever read, also from special files whose size the file system does not know (`/dev/zero`,
/// pipes). `what` names the kind of file for the message.
///
/// # Errors
///
/// `PATH: cannot read: ...` or `PATH: larger than LIMIT bytes, the most WHAT may be`.
pub fn read_bounded(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>, String> {
    let too_big = || {
        format!(
            "{}: larger than {limit} bytes, the most {what} may be",
            path.display()
        )
    };
    let file = File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if meta.is_dir() {
        return Err(format!("{}: cannot read: is a directory", path.display()));
    }
    if meta.len() > limit {
        return Err(too_big());
    }
    let mut data = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut data)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if data.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("onic-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn an_output_appears_only_when_committed() {
        let d = scratch("commit");
        let path = d.join("out.pcap");
        std::fs::write(&path, b"old").unwrap();
        let mut f = OutputFile::create(&path).unwrap();
        f.write_bytes(b"new contents").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        f.commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new contents");
        // Dropped before its commit: the old file stays, no temporary file is left.
        let mut f = OutputFile::create(&path).unwrap();
        f.write_bytes(b"half").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&path).unwrap(), b"new contents");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn reads_stop_at_the_bound() {
        if Path::new("/dev/zero").exists() {
            let e = read_bounded(Path::new("/dev/zero"), 1000, "an object").unwrap_err();
            assert!(e.contains("larger than 1000 bytes"), "{e}");
        }
        let d = scratch("bound");
        let p = d.join("f");
        std::fs::write(&p, [7u8; 10]).unwrap();
        assert_eq!(read_bounded(&p, 10, "x").unwrap().len(), 10);
        assert!(read_bounded(&p, 9, "x").is_err());
        let _ = std::fs::remove_dir_all(&d);
    }
}
