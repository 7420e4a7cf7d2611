//! The hook through which tuning tables reach the kernels. `ridge-tune` implements it; the
//! kernels ask it for a variant and fall back to their own vendor heuristics when it has
//! none (or when what it gives does not fit the adapter).

use std::collections::BTreeMap;

use crate::tensor::DType;

/// Named integer parameters of a kernel variant (e.g. `BM = 128`, `WG = 64`).
pub type VariantParams = BTreeMap<String, u32>;

/// A source of tuned kernel variants.
pub trait Tuning: Send + Sync {
    /// The variant for `op` on a problem of `shape` (the op's own shape convention) and
    /// `dtype`, if known.
    fn variant(&self, op: &str, shape: &[usize], dtype: DType) -> Option<VariantParams>;
}
