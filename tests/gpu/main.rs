//! GPU tests: every kernel against its f64 reference on every adapter present.

mod harness;

mod gemm;
