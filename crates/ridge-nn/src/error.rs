//! Errors of model loading and inference. Each names the file and the problem.

use std::path::PathBuf;

/// What can go wrong loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A configuration file is missing a field or holds an invalid value.
    #[error("{}: {message}", .path.display())]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The model is valid but not something Ridge runs (another architecture, activation,
    /// pooling mode or pipeline module).
    #[error("{}: unsupported: {message}", .path.display())]
    Unsupported {
        /// The file that says so.
        path: PathBuf,
        /// What is unsupported.
        message: String,
    },
    /// The weights file is truncated or corrupt, or lacks a tensor, or one has the wrong
    /// dtype or shape.
    #[error("{}: {message}", .path.display())]
    Weights {
        /// The weights file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A GGUF file is truncated, corrupt or not GGUF (see [`crate::gguf::GgufError`]).
    #[error("{}: {source}", .path.display())]
    Gguf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        source: crate::gguf::GgufError,
    },
    /// The tokenizer could not be loaded or could not encode the text.
    #[error("{}: {message}", .path.display())]
    Tokenizer {
        /// The tokenizer file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The input cannot be processed (e.g. no texts, a batch size of 0).
    #[error("{0}")]
    Input(String),
    /// Obtaining the model files failed.
    #[error("model download: {0}")]
    Fetch(String),
    /// A cached model's files are missing or changed since they were fetched.
    #[error("{0}")]
    CacheChanged(String),
    /// A GPU error from the runtime or a kernel.
    #[error(transparent)]
    Gpu(#[from] ridge_core::Error),
}

/// Result of model loading and inference.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, source }
}
