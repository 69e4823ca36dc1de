//! Crash-safe file replacement. Every file ibfabric writes goes through
//! here, so that a crash, a kill or a full disk leaves either the old file
//! or the complete new one at the target, never a truncated mix: OpenSM
//! loads whatever `opensm-lfts.dump` holds when it restarts.
//!
//! The new content goes to a temporary file next to the target (same
//! directory, so same file system and an atomic rename), is flushed to
//! disk, renamed over the target, and the directory is flushed so that the
//! rename itself survives a power loss. [`stage`] and [`Staged::commit`]
//! split the two halves so that a set of files (one routing) is complete
//! on disk before the first of them replaces its old version.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What was being done when a write failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Looking at the target before writing anything.
    Inspect,
    /// Creating the temporary file next to the target.
    Create,
    /// Producing the content.
    Write,
    /// Flushing the content to disk.
    Sync,
    /// Renaming the temporary file over the target.
    Replace,
    /// Flushing the directory, which makes the rename durable.
    SyncDir,
    /// Removing a file that no longer belongs.
    Remove,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Inspect => "cannot write here",
            Step::Create => "creating a temporary file",
            Step::Write => "writing",
            Step::Sync => "flushing to disk",
            Step::Replace => "replacing the file",
            Step::SyncDir => "flushing the directory (the new file is in place)",
            Step::Remove => "removing",
        })
    }
}

/// A failed write: the target, the step and the cause. Unless the step is
/// [`Step::SyncDir`], the target holds what it held before.
#[derive(Debug, thiserror::Error)]
#[error("{}: {step}: {source}", path.display())]
pub struct WriteError {
    pub path: PathBuf,
    pub step: Step,
    #[source]
    pub source: io::Error,
}

impl WriteError {
    fn new(path: &Path, step: Step, source: io::Error) -> Self {
        Self {
            path: path.to_path_buf(),
            step,
            source,
        }
    }
}

/// How a file is written.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Permission bits of the new file (Unix). `None` keeps those of the
    /// file replaced, or gives a new file the usual `0666 & !umask`.
    pub mode: Option<u32>,
    /// Refuse to replace an existing target (the check and the rename are
    /// one atomic step where the file system has hard links).
    pub keep_existing: bool,
}

/// Content complete and flushed in a temporary file next to its target,
/// waiting for [`Staged::commit`]. Dropped uncommitted (an error elsewhere,
/// a panic), it removes its temporary file and leaves the target alone.
#[must_use = "a staged file replaces nothing until it is committed"]
#[derive(Debug)]
pub struct Staged {
    /// The path as the caller named it (error messages, return value).
    target: PathBuf,
    /// Where the content lands: the target, or the file a symlink at the
    /// target points to (the link stays a link).
    real: PathBuf,
    dir: PathBuf,
    /// `None` once renamed, or when the target is a device or a pipe that
    /// was written in place.
    tmp: Option<PathBuf>,
    keep_existing: bool,
}

/// Writes `path` crash-safely with default [`Options`].
pub fn write_atomic<F>(path: &Path, write: F) -> Result<(), WriteError>
where
    F: FnOnce(&mut BufWriter<File>) -> io::Result<()>,
{
    stage(path, Options::default(), write)?.commit().map(drop)
}

/// Writes `bytes` to `path` crash-safely.
pub fn write_bytes(path: &Path, bytes: &[u8], opts: Options) -> Result<(), WriteError> {
    stage(path, opts, |w| w.write_all(bytes))?
        .commit()
        .map(drop)
}

/// Writes the new content of `path` into a temporary file beside it and
/// flushes it to disk; the target is untouched until [`Staged::commit`].
/// On error nothing is left behind.
pub fn stage<F>(path: &Path, opts: Options, write: F) -> Result<Staged, WriteError>
where
    F: FnOnce(&mut BufWriter<File>) -> io::Result<()>,
{
    let inspect = |e| WriteError::new(path, Step::Inspect, e);
    let existing = match std::fs::metadata(path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(inspect(e)),
    };
    if let Some(m) = &existing {
        if m.is_dir() {
            return Err(inspect(io::Error::new(
                io::ErrorKind::IsADirectory,
                "is a directory",
            )));
        }
        if !m.is_file() {
            // `/dev/stdout`, a pipe: nothing to replace, and no directory
            // to put a temporary file in.
            return stage_in_place(path, write);
        }
    }
    let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let real = if is_link && existing.is_some() {
        std::fs::canonicalize(path).map_err(inspect)?
    } else {
        path.to_path_buf()
    };
    let dir = parent_dir(&real);
    let name = real
        .file_name()
        .ok_or_else(|| inspect(io::Error::new(io::ErrorKind::InvalidInput, "names no file")))?
        .to_string_lossy()
        .into_owned();
    remove_dead_temps(&dir, &name);

    let (file, tmp) = create_temp(&dir, &name, &opts, existing.as_ref())
        .map_err(|e| WriteError::new(path, Step::Create, e))?;
    // From here the guard removes the temporary file on every way out.
    let staged = Staged {
        target: path.to_path_buf(),
        real,
        dir,
        tmp: Some(tmp),
        keep_existing: opts.keep_existing,
    };
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| WriteError::new(path, Step::Write, e))?;
    w.get_ref()
        .sync_all()
        .map_err(|e| WriteError::new(path, Step::Sync, e))?;
    Ok(staged)
}

fn stage_in_place<F>(path: &Path, write: F) -> Result<Staged, WriteError>
where
    F: FnOnce(&mut BufWriter<File>) -> io::Result<()>,
{
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| WriteError::new(path, Step::Create, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| WriteError::new(path, Step::Write, e))?;
    Ok(Staged {
        target: path.to_path_buf(),
        real: path.to_path_buf(),
        dir: parent_dir(path),
        tmp: None,
        keep_existing: false,
    })
}

impl Staged {
    /// The path the content is for.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the content over the target and flushes the directory.
    /// Returns the target's path. On error the target is as it was (but
    /// for [`Step::SyncDir`]) and the temporary file is gone.
    pub fn commit(mut self) -> Result<PathBuf, WriteError> {
        let Some(tmp) = self.tmp.clone() else {
            return Ok(self.target.clone());
        };
        let replaced = if self.keep_existing {
            link_new(&tmp, &self.real)
        } else {
            std::fs::rename(&tmp, &self.real)
        };
        replaced.map_err(|e| WriteError::new(&self.target, Step::Replace, e))?;
        if self.keep_existing {
            // The target is a second link to the content: the temporary
            // name only has to go. A failure leaves a stray name, not a
            // wrong target.
            let _ = std::fs::remove_file(&tmp);
        }
        self.tmp = None;
        sync_dir(&self.dir).map_err(|e| WriteError::new(&self.target, Step::SyncDir, e))?;
        Ok(self.target.clone())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if let Some(tmp) = self.tmp.take() {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// Removes `path` if it exists and makes the removal durable. Returns
/// whether there was a file.
pub fn remove(path: &Path) -> Result<bool, WriteError> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(WriteError::new(path, Step::Remove, e)),
    }
    sync_dir(&parent_dir(path)).map_err(|e| WriteError::new(path, Step::SyncDir, e))?;
    Ok(true)
}

/// Flushes a directory's entries to disk (Unix); file systems that cannot
/// flush a directory say so with `EINVAL`, which is no failure of ours.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        match File::open(dir).and_then(|d| d.sync_all()) {
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => Ok(()),
            r => r,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `.<name>.tmp-<pid>-<n>`: hidden, next to the target, and naming its
/// writer so that leftovers of a killed one can be told from live ones.
fn temp_prefix(name: &str) -> String {
    format!(".{name}.tmp-")
}

fn create_temp(
    dir: &Path,
    name: &str,
    opts: &Options,
    existing: Option<&std::fs::Metadata>,
) -> io::Result<(File, PathBuf)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!("{}{pid}-{n}", temp_prefix(name)));
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        let exact_mode = {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            match (opts.mode, existing) {
                // Created with its final mode: a private key is never
                // readable by others, not even for a moment.
                (Some(m), _) => {
                    o.mode(m);
                    None
                }
                // Replacing keeps what the operator set on the old file.
                (None, Some(m)) => {
                    o.mode(0o600);
                    Some(m.permissions().mode() & 0o7777)
                }
                (None, None) => {
                    o.mode(0o666);
                    None
                }
            }
        };
        #[cfg(not(unix))]
        let _ = (opts, existing);
        match o.open(&tmp) {
            Ok(f) => {
                #[cfg(unix)]
                if let Some(m) = exact_mode {
                    use std::os::unix::fs::PermissionsExt;
                    if let Err(e) = f.set_permissions(std::fs::Permissions::from_mode(m)) {
                        let _ = std::fs::remove_file(&tmp);
                        return Err(e);
                    }
                }
                return Ok((f, tmp));
            }
            // A leftover of an earlier process with this pid.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Puts `tmp` at `target` unless something is there already: a hard link
/// checks and creates in one step; where the file system has no hard
/// links, a check then a rename.
fn link_new(tmp: &Path, target: &Path) -> io::Result<()> {
    match std::fs::hard_link(tmp, target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
        Err(_) => {
            if std::fs::symlink_metadata(target).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "the file exists",
                ));
            }
            std::fs::rename(tmp, target)
        }
    }
}

/// Removes temporary files that writers of `name` left in `dir` when they
/// were killed: a big fabric's LFT dump runs to gigabytes, and repeated
/// crashes would fill the disk. Only files whose writer process is gone
/// are touched, so a concurrent writer keeps its own. Best effort, and
/// only where `/proc` tells which processes live.
pub(crate) fn remove_dead_temps(dir: &Path, name: &str) {
    if !cfg!(target_os = "linux") || !Path::new("/proc/self").exists() {
        return;
    }
    let prefix = temp_prefix(name);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let file = e.file_name();
        let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let Some(pid) = rest
            .split_once('-')
            .and_then(|(p, n)| n.parse::<u64>().ok().and(p.parse::<u32>().ok()))
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .expect("lists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_failure_mid_write_leaves_the_old_file_and_no_temporary_file() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("opensm-lfts.dump");
        std::fs::write(&p, b"the old tables\n").expect("old");
        let err = write_atomic(&p, |w| {
            w.write_all(&[b'x'; 3 << 20])?;
            Err(io::Error::other("injected"))
        })
        .expect_err("fails");
        assert_eq!(err.step, Step::Write);
        assert_eq!(err.path, p);
        assert!(
            err.to_string()
                .contains("opensm-lfts.dump: writing: injected"),
            "{err}"
        );
        assert_eq!(std::fs::read(&p).expect("reads"), b"the old tables\n");
        assert_eq!(names(d.path()), ["opensm-lfts.dump"]);
    }

    #[test]
    fn a_panic_mid_write_leaves_the_old_file_and_no_temporary_file() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("f");
        std::fs::write(&p, b"old").expect("old");
        let r = std::panic::catch_unwind(|| {
            let _ = write_atomic(&p, |w| {
                w.write_all(b"half")?;
                panic!("writer bug");
            });
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&p).expect("reads"), b"old");
        assert_eq!(names(d.path()), ["f"]);
    }

    #[test]
    fn a_staged_file_replaces_nothing_until_committed() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("f");
        std::fs::write(&p, b"old").expect("old");
        let s = stage(&p, Options::default(), |w| w.write_all(b"new")).expect("stages");
        assert_eq!(std::fs::read(&p).expect("reads"), b"old");
        drop(s);
        assert_eq!(names(d.path()), ["f"]);
        let s = stage(&p, Options::default(), |w| w.write_all(b"new")).expect("stages");
        assert_eq!(s.commit().expect("commits"), p);
        assert_eq!(std::fs::read(&p).expect("reads"), b"new");
        assert_eq!(names(d.path()), ["f"]);
    }

    #[test]
    fn a_directory_at_the_target_is_refused_before_writing() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("path-sl.txt");
        std::fs::create_dir(&p).expect("dir");
        let err = write_atomic(&p, |_| panic!("not called")).expect_err("refused");
        assert_eq!(err.step, Step::Inspect);
        assert_eq!(names(d.path()), ["path-sl.txt"]);
    }

    #[test]
    fn keep_existing_refuses_to_replace() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("key.pem");
        let keep = Options {
            mode: Some(0o600),
            keep_existing: true,
        };
        write_bytes(&p, b"first", keep).expect("new file");
        let err = write_bytes(&p, b"second", keep).expect_err("exists");
        assert_eq!(err.step, Step::Replace);
        assert_eq!(err.source.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&p).expect("reads"), b"first");
        assert_eq!(names(d.path()), ["key.pem"]);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).expect("meta").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[cfg(unix)]
    #[test]
    fn replacing_keeps_the_mode_and_writes_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().expect("tmp");
        let real = d.path().join("real.dump");
        std::fs::write(&real, b"old").expect("old");
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let link = d.path().join("link.dump");
        std::os::unix::fs::symlink(&real, &link).expect("symlink");
        write_bytes(&link, b"new", Options::default()).expect("writes");
        assert!(
            std::fs::symlink_metadata(&link)
                .expect("meta")
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&real).expect("reads"), b"new");
        let mode = std::fs::metadata(&real).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o640);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn leftovers_of_dead_writers_are_removed_and_live_ones_kept() {
        let d = tempfile::tempdir().expect("tmp");
        let p = d.path().join("f");
        // pid_max is at most 2^22 on Linux: this pid is nobody's.
        let dead = d.path().join(".f.tmp-4294967295-0");
        let live = d.path().join(".f.tmp-1-0");
        let other = d.path().join(".g.tmp-4294967295-0");
        for x in [&dead, &live, &other] {
            std::fs::write(x, b"partial").expect("leftover");
        }
        write_bytes(&p, b"new", Options::default()).expect("writes");
        assert_eq!(names(d.path()), [".f.tmp-1-0", ".g.tmp-4294967295-0", "f"]);
    }
}
