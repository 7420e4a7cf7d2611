//! GPU tests: every kernel against its f64 reference on every adapter present.

mod harness;

mod attention;
mod core;
mod decode_block;
mod decoder;
mod decoder_ops;
mod elementwise;
mod gemm;
mod layout;
mod minilm;
mod minilm_errors;
mod nn_ops;
mod norm;
mod quant;
mod quant_fused;
mod sample;
mod smollm2;
mod softmax;
mod tuning;
