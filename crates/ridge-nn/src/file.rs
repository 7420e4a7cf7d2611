//! A model file's bytes: memory-mapped natively, owned in the browser (which fetches them).

use std::path::{Path, PathBuf};

enum Bytes {
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// The bytes of one model file and the path that names it in errors.
pub struct FileBytes {
    path: PathBuf,
    bytes: Bytes,
}

impl FileBytes {
    /// Memory-maps `path` (read-only).
    ///
    /// Errors: [`crate::Error::Io`] when it cannot be opened or mapped.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: &Path) -> crate::Result<Self> {
        let file = std::fs::File::open(path).map_err(crate::error::io(path))?;
        // SAFETY: the mapping is read-only and lives as long as `self`; a model file being
        // rewritten underneath a running process is outside what Ridge defends against.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(crate::error::io(path))?;
        Ok(Self {
            path: path.into(),
            bytes: Bytes::Mapped(map),
        })
    }

    /// Wraps bytes already in memory; `path` names them in errors.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Self {
        Self {
            path: path.into(),
            bytes: Bytes::Owned(bytes),
        }
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            #[cfg(not(target_arch = "wasm32"))]
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    /// The path that names the file in errors.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
