//! Ridge's wgpu runtime: the [`Context`] (adapter, device, queue, limits, features,
//! fingerprint), [`Tensor`]s, the pipeline cache, the profiler and typed errors.
//!
//! Kernels live in `ridge-kernels`; this crate knows nothing about any op.

pub mod context;
pub mod disk;
pub mod error;
pub mod pipeline;
pub mod pool;
pub mod profiler;
pub mod recorder;
pub mod tensor;
pub mod tuning;

pub use context::{Context, ContextOptions, Fingerprint};
pub use disk::cache_dir;
pub use error::{Error, Result};
pub use pipeline::{CompiledSource, Defines, PipelineCache, RuntimeChecks, ShaderSource};
pub use profiler::{Profile, Span, TimingMethod};
pub use recorder::Dispatch;
pub use tensor::{DType, Element, ReadBack, Tensor};
pub use tuning::{Tuning, VariantParams};
pub use wgpu;
