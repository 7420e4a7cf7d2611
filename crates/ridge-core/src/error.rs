//! Ridge's typed errors. Library code returns these; it never panics on user input.

use crate::tensor::DType;

/// Everything that can go wrong in Ridge's runtime and kernels.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No adapter matched: none exists, or none matches `RIDGE_ADAPTER`.
    #[error(
        "no GPU adapter found{}{}",
        match .wanted { Some(w) => format!(" matching RIDGE_ADAPTER={w:?}"), None => String::new() },
        if .present.is_empty() { String::new() } else { format!(" (present: {})", .present.join("; ")) }
    )]
    NoAdapter {
        /// The selector that matched nothing, if one was given.
        wanted: Option<String>,
        /// Adapters that were present, as `name (backend)`.
        present: Vec<String>,
    },
    /// The adapter refused to create a device.
    #[error("could not create a device on {adapter}: {message}")]
    RequestDevice {
        /// The adapter's name.
        adapter: String,
        /// The driver's message.
        message: String,
    },
    /// A request exceeds one of the adapter's limits.
    #[error("{what}: {limit} exceeded: requested {requested}, the adapter allows {allowed}")]
    LimitExceeded {
        /// What was being done (an op or an allocation).
        what: String,
        /// The limit's name in WebGPU's terms, e.g. `maxStorageBufferBindingSize`.
        limit: &'static str,
        /// The requested value.
        requested: u64,
        /// The adapter's maximum.
        allowed: u64,
    },
    /// An op needs a feature the adapter does not have.
    #[error("{what} needs the adapter feature `{feature}`, which {adapter} does not have")]
    MissingFeature {
        /// What needed it.
        what: String,
        /// The WebGPU feature name, e.g. `shader-f16`.
        feature: &'static str,
        /// The adapter's name.
        adapter: String,
    },
    /// Shapes do not fit the op, or data does not fit the shape.
    #[error("{op}: shape mismatch: {message}")]
    Shape {
        /// The op or call that checked the shape.
        op: String,
        /// What did not fit.
        message: String,
    },
    /// A tensor has the wrong element type.
    #[error("{op}: expected {expected} data, got {got}")]
    DType {
        /// The op or call that checked the dtype.
        op: String,
        /// The dtype it needs.
        expected: DType,
        /// The dtype it got.
        got: DType,
    },
    /// A parameter is out of its valid range (e.g. a negative epsilon).
    #[error("{op}: invalid argument: {message}")]
    InvalidArgument {
        /// The op.
        op: String,
        /// What is wrong.
        message: String,
    },
    /// The device was lost (driver reset, removal, out of memory at the driver).
    #[error("GPU device lost: {0}")]
    DeviceLost(String),
    /// wgpu reported an error that validation before the dispatch did not catch.
    #[error("GPU error: {0}")]
    Gpu(String),
}

/// Ridge's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A shape error for `op`.
    pub fn shape(op: impl Into<String>, message: impl Into<String>) -> Self {
        Error::Shape {
            op: op.into(),
            message: message.into(),
        }
    }

    /// An invalid-argument error for `op`.
    pub fn invalid(op: impl Into<String>, message: impl Into<String>) -> Self {
        Error::InvalidArgument {
            op: op.into(),
            message: message.into(),
        }
    }
}
