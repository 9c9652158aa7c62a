//! Which files make up an AOF: one plain file, or Redis 7.0's multi-part directory read
//! through its manifest (the base, then the incr files in sequence order).
//!
//! The only part of the format layer that looks at the filesystem, and only at names: the
//! files themselves are read by the caller (`Source`), one after the other.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::manifest::{AofInfo, FileKind, Manifest};

/// One file to read, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AofPart {
    /// The file name as the manifest gives it (or the path, for a single file).
    pub name: String,
    pub path: PathBuf,
    /// Base or incr (a single file counts as a base).
    pub kind: FileKind,
    pub seq: i64,
}

/// A parsed manifest and where it is.
#[derive(Debug, Clone)]
pub struct ManifestFile {
    pub path: PathBuf,
    pub text: Vec<u8>,
    pub manifest: Manifest,
    /// The `appendfilename` the manifest belongs to (its name without `.manifest`).
    pub appendfilename: String,
}

/// An AOF ready to be read: its files in load order.
#[derive(Debug, Clone)]
pub struct AofSet {
    /// The AOF directory, for a multi-part AOF.
    pub dir: Option<PathBuf>,
    pub manifest: Option<ManifestFile>,
    /// The base first (if any), then the incr files.
    pub parts: Vec<AofPart>,
}

/// Why an AOF could not be opened.
#[derive(Debug)]
pub enum DirError {
    Io {
        path: PathBuf,
        source: io::Error,
    },
    /// The manifest does not parse: (its path, byte offset and line of the bad line, what).
    Manifest {
        path: PathBuf,
        offset: usize,
        line: usize,
        what: String,
    },
    /// No manifest, or several, in a directory.
    NoManifest {
        dir: PathBuf,
        what: String,
    },
}

impl fmt::Display for DirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            DirError::Manifest { path, offset, line, what } => {
                write!(f, "{}: offset {offset} (line {line}): {what}", path.display())
            }
            DirError::NoManifest { dir, what } => write!(f, "{}: {what}", dir.display()),
        }
    }
}

impl std::error::Error for DirError {}

/// Byte offset where line `line` (1-based) of `text` starts.
pub fn line_offset(text: &[u8], line: usize) -> usize {
    if line <= 1 {
        return 0;
    }
    text.iter().enumerate().filter(|(_, &c)| c == b'\n').nth(line - 2).map_or(text.len(), |(i, _)| i + 1)
}

impl AofSet {
    /// `path` is an AOF file, a manifest, or an AOF directory (holding one manifest).
    pub fn open(path: &Path) -> Result<AofSet, DirError> {
        let io_err = |source| DirError::Io { path: path.to_path_buf(), source };
        let meta = fs::metadata(path).map_err(io_err)?;
        if meta.is_dir() {
            let manifest = find_manifest(path)?;
            return AofSet::from_manifest(&manifest);
        }
        if path.extension().is_some_and(|e| e == "manifest") {
            return AofSet::from_manifest(path);
        }
        let name = path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned());
        Ok(AofSet {
            dir: None,
            manifest: None,
            parts: vec![AofPart { name, path: path.to_path_buf(), kind: FileKind::Base, seq: 1 }],
        })
    }

    /// A multi-part AOF through the manifest at `path`.
    pub fn from_manifest(path: &Path) -> Result<AofSet, DirError> {
        let text = fs::read(path).map_err(|source| DirError::Io { path: path.to_path_buf(), source })?;
        let manifest = Manifest::parse(&text).map_err(|(line, what)| DirError::Manifest {
            path: path.to_path_buf(),
            offset: line_offset(&text, line),
            line,
            what,
        })?;
        let dir = path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let appendfilename = file_name.strip_suffix(".manifest").unwrap_or(&file_name).to_string();
        let part =
            |ai: &AofInfo| AofPart { name: ai.name.clone(), path: dir.join(&ai.name), kind: ai.kind, seq: ai.seq };
        let parts = manifest.base.iter().chain(&manifest.incr).map(part).collect();
        Ok(AofSet {
            dir: Some(dir),
            manifest: Some(ManifestFile { path: path.to_path_buf(), text, manifest, appendfilename }),
            parts,
        })
    }

    /// Parts the manifest names that do not exist.
    pub fn missing(&self) -> Vec<&AofPart> {
        self.parts.iter().filter(|p| !p.path.is_file()).collect()
    }

    /// Files of the directory that look like this AOF's (`<appendfilename>.<seq>.base|incr...`)
    /// but that the manifest does not name, not even as history.
    pub fn extra_files(&self) -> Result<Vec<String>, DirError> {
        let (Some(dir), Some(m)) = (&self.dir, &self.manifest) else { return Ok(Vec::new()) };
        let prefix = format!("{}.", m.appendfilename);
        let named: Vec<&str> = m
            .manifest
            .base
            .iter()
            .chain(&m.manifest.history)
            .chain(&m.manifest.incr)
            .map(|ai| ai.name.as_str())
            .collect();
        let entries = fs::read_dir(dir).map_err(|source| DirError::Io { path: dir.clone(), source })?;
        let mut extra = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| DirError::Io { path: dir.clone(), source })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(&prefix) else { continue };
            if is_part_name(rest) && !named.contains(&name.as_str()) {
                extra.push(name);
            }
        }
        extra.sort();
        Ok(extra)
    }
}

/// `<seq>.base.rdb`, `<seq>.base.aof` or `<seq>.incr.aof`: how Redis names its files.
fn is_part_name(rest: &str) -> bool {
    let Some((seq, suffix)) = rest.split_once('.') else { return false };
    !seq.is_empty() && seq.bytes().all(|c| c.is_ascii_digit()) && matches!(suffix, "base.rdb" | "base.aof" | "incr.aof")
}

/// The manifest of an AOF directory: its one `*.manifest` file (temp manifests aside).
fn find_manifest(dir: &Path) -> Result<PathBuf, DirError> {
    let entries = fs::read_dir(dir).map_err(|source| DirError::Io { path: dir.to_path_buf(), source })?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| DirError::Io { path: dir.to_path_buf(), source })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".manifest") && !name.starts_with("temp-") {
            found.push(entry.path());
        }
    }
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(DirError::NoManifest { dir: dir.to_path_buf(), what: "no *.manifest file in the directory".into() }),
        n => Err(DirError::NoManifest {
            dir: dir.to_path_buf(),
            what: format!("{n} manifests in the directory; name one"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_offsets() {
        let t = b"a\nbc\nd\n";
        assert_eq!(line_offset(t, 1), 0);
        assert_eq!(line_offset(t, 2), 2);
        assert_eq!(line_offset(t, 3), 5);
        assert_eq!(line_offset(t, 9), t.len());
    }

    #[test]
    fn part_names() {
        assert!(is_part_name("12.incr.aof"));
        assert!(is_part_name("1.base.rdb"));
        assert!(!is_part_name("1.incr.aof.bak"));
        assert!(!is_part_name("x.incr.aof"));
    }
}
