//! The index of each row's largest value (`shaders/argmax.wgsl`): greedy decoding picks the
//! next token on the GPU and reads back 4 bytes instead of the whole vocabulary's logits.
//!
//! Shapes: `x` `[rows, cols]` (any leading dims), `ids` u32 `[rows]`. Ties go to the lowest
//! index; a row holding NaN or ±∞ gives [`NON_FINITE`].
//!
//! A row of at most [`CHUNK`] values takes one dispatch, a workgroup per row. A longer one (a
//! vocabulary) takes two: a workgroup per chunk of [`CHUNK`] values writes the chunk's best,
//! then one per row merges them ([`dispatches`]). One workgroup walking SmolLM2's 49,152
//! logits took 20 µs on the H200 and Llama-3's 128,256 64 µs on an H100, 4–25× their
//! roofline (benches/NOTES.md run 158, 2026-12-05): the loads of one multiprocessor bound it.

use ridge_core::{Context, DType, Defines, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params, float_dtype};
use crate::shaders::{self, ARGMAX, Variant};

const WG_CAP: u32 = 256;

/// Values a workgroup reduces in a long row's first pass: 16 an invocation at 256 (SmolLM2's
/// vocabulary in 12 workgroups, Llama-3's in 32); a multiple of every workgroup size. A CPU
/// driver pays for each workgroup's tree of barriers and for the second dispatch: on
/// llvmpipe SmolLM2's logits took 0.18 ms in one workgroup, 0.37–0.40 in chunks of 4096 and
/// 0.89 in chunks of 1024 (profiled, both passes; 0.2 % of its decode step).
pub const CHUNK: usize = 4096;

/// The id written for a row that holds NaN or an infinity.
pub const NON_FINITE: u32 = u32::MAX;

/// Reference: the first index of each row's maximum, [`NON_FINITE`] for a row with a
/// non-finite value.
pub fn reference(x: &[f32], cols: usize) -> Vec<u32> {
    x.chunks(cols.max(1))
        .map(|row| {
            if row.iter().any(|v| !v.is_finite()) {
                return NON_FINITE;
            }
            let mut best = 0;
            for (i, v) in row.iter().enumerate() {
                if *v > row[best] {
                    best = i;
                }
            }
            best as u32
        })
        .collect()
}

/// The dispatches an argmax over `[rows, cols]` makes, in order, with their costs: `argmax`
/// (`x` read once, one comparison per element; one id per row written, or for a row longer
/// than [`CHUNK`] one 8-byte partial per chunk), then for long rows `argmax_merge` (the
/// partials read, one id per row written).
pub fn dispatches(rows: usize, cols: usize, dtype: DType) -> Vec<(&'static str, OpCost)> {
    let (n, r) = ((rows * cols) as f64, rows as f64);
    let chunks = chunks(cols) as f64;
    if chunks <= 1.0 {
        return vec![("argmax", OpCost::new(n, n * dtype.size() as f64 + 4.0 * r))];
    }
    let partials = r * chunks;
    vec![
        (
            "argmax",
            OpCost::new(n, n * dtype.size() as f64 + 8.0 * partials),
        ),
        (
            "argmax_merge",
            OpCost::new(partials, 8.0 * partials + 4.0 * r),
        ),
    ]
}

/// Chunks of [`CHUNK`] values a row of `cols` splits into (1: the one-pass kernel).
fn chunks(cols: usize) -> usize {
    cols.div_ceil(CHUNK).max(1)
}

/// Writes the index of each row's maximum of `x` to `ids`.
///
/// Errors: [`Error::Shape`] unless `ids` has one element per row of `x`; dtype errors unless
/// `x` is a float the adapter runs and `ids` is u32; limit errors as every op.
pub fn argmax(ctx: &Context, x: &Tensor, ids: &Tensor) -> Result<()> {
    let name = "argmax";
    ids.expect_dtype(name, DType::U32)?;
    let cols = x.shape().last().copied().unwrap_or(1);
    let rows = x.numel() / cols.max(1);
    if ids.numel() != rows || cols == 0 {
        return Err(Error::shape(
            name,
            format!("ids {:?} for x {:?}", ids.shape(), x.shape()),
        ));
    }
    launch::no_alias(name, ids, &[x])?;
    launch::fits_u32(name, "elements", x.numel())?;
    let max = ctx.limits().max_compute_workgroups_per_dimension as usize;
    let chunks = chunks(cols);
    if rows > max || chunks > max {
        return Err(Error::LimitExceeded {
            what: format!("{name}: {rows} rows of {chunks} chunks"),
            limit: "maxComputeWorkgroupsPerDimension",
            requested: rows.max(chunks) as u64,
            allowed: max as u64,
        });
    }
    float_dtype(ctx, name, x.dtype())?;
    let defines = defines(x.dtype(), launch::workgroup_size_1d(ctx, WG_CAP));
    let params = Params::new().u(rows as u32).u(cols as u32).u(chunks as u32);
    if chunks == 1 {
        return Launch {
            label: name,
            shader: &ARGMAX,
            entry: "argmax",
            defines,
            params,
            buffers: vec![(1, x), (2, ids)],
            workgroups: [rows as u32, 1, 1],
        }
        .run(ctx);
    }
    let partial = Tensor::empty(ctx, &[rows * chunks * 2], DType::U32)?;
    Launch {
        label: name,
        shader: &ARGMAX,
        entry: "argmax_chunks",
        defines: defines.clone(),
        params: params.clone(),
        buffers: vec![(1, x), (3, &partial)],
        workgroups: [chunks as u32, rows as u32, 1],
    }
    .run(ctx)?;
    Launch {
        label: "argmax_merge",
        shader: &ARGMAX,
        entry: "argmax_merge",
        defines,
        params,
        buffers: vec![(2, ids), (3, &partial)],
        workgroups: [rows as u32, 1, 1],
    }
    .run(ctx)
}

/// The shader's defines for storage type `dtype` and workgroups of `wg` (memoized).
fn defines(dtype: DType, wg: u32) -> Defines {
    launch::memoized("argmax", &(dtype, wg), |&(dtype, wg)| {
        shaders::storage_defines(dtype)
            .u32("WG", wg)
            .u32("CHUNK", CHUNK as u32)
    })
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    ["argmax", "argmax_chunks", "argmax_merge"]
        .into_iter()
        .map(|entry| (&ARGMAX, entry, defines(dtype, WG_CAP)))
        .collect()
}
