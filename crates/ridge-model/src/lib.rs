//! Ridge's analytic performance model. Pure Rust with no GPU dependency, so the CLI, the
//! dashboard and the browser build can all use it.
//!
//! Conventions used everywhere in this crate:
//! - FLOPs count a fused multiply-add as **2** floating-point operations (the convention of
//!   vendor datasheets and of Williams, Waterman & Patterson, "Roofline", CACM 52(4), 2009).
//! - Bytes are the *fewest* bytes an op must move between device memory and the cores: every
//!   input read once, every output written once. Caches can only make the real figure larger.

pub mod calibrate;
pub mod cost;
pub mod decoder;
pub mod hardware;
pub mod ops;
pub mod report;
pub mod roofline;
pub mod sparsity;
pub mod transformer;

pub use cost::OpCost;
pub use hardware::{GpuSpec, Precision};
pub use roofline::{Bound, CeilingSource, Ceilings, Prediction};
pub use transformer::TransformerShape;
