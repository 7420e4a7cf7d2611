//! Ridge's kernels. Each op is a module with the same anatomy: a parameter type validated
//! before any dispatch, `cost` (FLOPs with a multiply-add counted as 2, the fewest bytes read
//! and written), an f64 CPU `reference`, and a launcher that records one dispatch (a
//! profiler span named after the op). The WGSL lives in `shaders/` at the workspace root.

pub mod argmax;
pub mod attention;
pub mod bench;
pub mod ceilings;
pub mod check;
pub mod decode_attention;
pub mod elementwise;
pub mod embedding;
pub mod gemm;
pub mod kv_attention;
pub mod launch;
pub mod layout;
pub mod norm;
pub mod pool;
pub mod qmatmul;
pub mod quant;
pub mod rope;
pub mod rows;
pub mod sample;
pub mod shaders;
pub mod softmax;
pub mod suite;
pub mod sweep;

pub use attention::{Attention, HeadLayout, SparseLayout};
pub use decode_attention::DecodeAttention;
pub use elementwise::{Binary, Unary, binary, unary};
pub use gemm::{CoopConfig, Gemm, GemmConfig, GemmKernel};
pub use kv_attention::{KvAttention, KvLoads};
pub use layout::{nchw_to_nhwc, nhwc_to_nchw, permute};
pub use norm::{Norm, NormKind};
pub use pool::MeanPool;
pub use qmatmul::QMatmul;
pub use quant::{QuantFormat, QuantMatrix};
pub use rope::{PairLayout, RopeQkv, RopeTable};
pub use softmax::Softmax;
