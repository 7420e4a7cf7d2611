//! Where a sentence-transformers folder's files come from: a directory on disk (native) or
//! bytes the page has already fetched (the browser). Loading reads through this one trait, so
//! both paths parse, validate and report errors the same way.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::weights::WeightsFile;

/// Every file of a sentence-transformers folder Ridge reads, by relative name; a source
/// that fetches them (the browser) asks for these and leaves out the absent ones, and
/// loading then names any required file that is missing.
pub const MODEL_FILES: [&str; 6] = [
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "tokenizer.json",
    "model.safetensors",
];

/// A model folder's files, by relative `/`-separated name (`config.json`,
/// `1_Pooling/config.json`, …).
pub trait ModelSource {
    /// The path that names `file` in error messages.
    fn path(&self, file: &str) -> PathBuf;

    /// The bytes of `file`, or `None` when the folder has no such file.
    ///
    /// Errors: [`Error::Io`] when it exists but cannot be read.
    fn read(&self, file: &str) -> Result<Option<Vec<u8>>>;

    /// `model.safetensors` (memory-mapped where the source allows it).
    ///
    /// Errors: [`Error::Io`] when missing or unreadable.
    fn weights(&self) -> Result<WeightsFile> {
        let bytes = self.require("model.safetensors")?;
        Ok(WeightsFile::from_bytes(
            &self.path("model.safetensors"),
            bytes,
        ))
    }

    /// The bytes of a file the model cannot do without.
    ///
    /// Errors: [`Error::Io`] (kind `NotFound` when absent).
    fn require(&self, file: &str) -> Result<Vec<u8>> {
        self.read(file)?.ok_or_else(|| Error::Io {
            path: self.path(file),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "file not found"),
        })
    }
}

/// A folder on disk.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Debug)]
pub struct ModelDir(pub PathBuf);

#[cfg(not(target_arch = "wasm32"))]
impl ModelSource for ModelDir {
    fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }

    fn read(&self, file: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(file);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(Error::Io { path, source }),
        }
    }

    fn weights(&self) -> Result<WeightsFile> {
        WeightsFile::open(&self.path("model.safetensors"))
    }
}

/// Files already in memory, e.g. fetched by a web page; `base` names them in errors (a URL
/// or folder name).
#[derive(Clone, Debug, Default)]
pub struct ModelFiles {
    /// What error messages put before each file name.
    pub base: String,
    /// File name → bytes.
    pub files: HashMap<String, Vec<u8>>,
}

impl ModelSource for ModelFiles {
    fn path(&self, file: &str) -> PathBuf {
        Path::new(&self.base).join(file)
    }

    fn read(&self, file: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.files.get(file).cloned())
    }
}
