//! The index of each row's largest value (`shaders/argmax.wgsl`): greedy decoding picks the
//! next token on the GPU and reads back 4 bytes instead of the whole vocabulary's logits.
//!
//! Shapes: `x` `[rows, cols]` (any leading dims), `ids` u32 `[rows]`. Ties go to the lowest
//! index; a row holding NaN or ±∞ gives [`NON_FINITE`].

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, ARGMAX, Variant};

const WG_CAP: u32 = 256;

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

/// Cost: `x` read once, one id written per row; one comparison per element.
pub fn cost(rows: usize, cols: usize, dtype: DType) -> OpCost {
    let n = (rows * cols) as f64;
    OpCost::new(n, n * dtype.size() as f64 + 4.0 * rows as f64)
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
    if rows > max {
        return Err(Error::LimitExceeded {
            what: format!("{name}: {rows} rows"),
            limit: "maxComputeWorkgroupsPerDimension",
            requested: rows as u64,
            allowed: max as u64,
        });
    }
    Launch {
        label: name,
        shader: &ARGMAX,
        entry: "argmax",
        defines: {
            launch::float_dtype(ctx, name, x.dtype())?;
            let wg = launch::workgroup_size_1d(ctx, WG_CAP);
            launch::memoized(name, &(x.dtype(), wg), |&(dtype, wg)| {
                shaders::storage_defines(dtype).u32("WG", wg)
            })
        },
        params: Params::new().u(rows as u32).u(cols as u32),
        buffers: vec![(1, x), (2, ids)],
        workgroups: [rows as u32, 1, 1],
    }
    .run(ctx)
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    vec![(
        &ARGMAX,
        "argmax",
        shaders::storage_defines(dtype).u32("WG", WG_CAP),
    )]
}
