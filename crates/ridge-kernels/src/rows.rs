//! Workgroup size of the row-per-workgroup kernels (layer/RMS norm, softmax): from the
//! tuning table when it has an entry, else a vendor heuristic.

use ridge_core::{Context, DType};

use crate::launch;

/// Candidates the autotuner tries (powers of two the adapter allows).
pub fn candidates(ctx: &Context) -> Vec<u32> {
    [32, 64, 128, 256, 512, 1024]
        .into_iter()
        .filter(|&wg| {
            wg <= ctx.limits().max_compute_invocations_per_workgroup
                && wg <= ctx.limits().max_compute_workgroup_size_x
        })
        .collect()
}

/// Whether a table entry's workgroup size `wg` can run on `ctx`: one of the
/// [`candidates`]. The launchers take the heuristic instead of one that cannot.
pub fn fits(ctx: &Context, wg: u32) -> bool {
    candidates(ctx).contains(&wg)
}

/// The heuristic: 32 on CPU drivers (lavapipe runs a 384-wide row 4× faster with 32
/// invocations than with 256: fewer barrier rounds, benches/NOTES.md), else 256 — one
/// invocation per element up to 256 columns — capped by the adapter's limits.
pub fn heuristic(ctx: &Context) -> u32 {
    let cap = if ctx.is_cpu_driver() { 32 } else { 256 };
    launch::workgroup_size_1d(ctx, cap)
}

/// The workgroup size for `op` over `rows × cols` of `dtype`.
pub fn workgroup_size(ctx: &Context, op: &str, rows: usize, cols: usize, dtype: DType) -> u32 {
    ctx.tuned(op, &[rows, cols], dtype)
        .and_then(|p| p.get("WG").copied())
        .filter(|&wg| fits(ctx, wg))
        .unwrap_or_else(|| heuristic(ctx))
}
