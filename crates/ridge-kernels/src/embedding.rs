//! Embedding lookup: `out[t, :] = table[ids[t], :]`.
//!
//! Shapes: `table` `[vocab, hidden]`, `ids` `[...]` (u32, any shape of `n` ids), `out`
//! `[..., hidden]` with the ids' shape followed by `hidden`.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, EMBEDDING, Variant};

const WG_CAP: u32 = 256;

/// Cost: the looked-up rows read once and written once, the ids read once, no FLOPs.
pub fn cost(n: usize, hidden: usize, dtype: DType) -> OpCost {
    ridge_model::ops::embedding(n, hidden, dtype.size())
}

/// Reference gather; an id outside the table gives zeros, as the kernel does.
pub fn reference(table: &[f32], hidden: usize, ids: &[u32]) -> Vec<f32> {
    let vocab = table.len() / hidden.max(1);
    ids.iter()
        .flat_map(|&id| {
            let id = id as usize;
            (0..hidden).map(move |h| {
                if id < vocab {
                    table[id * hidden + h]
                } else {
                    0.0
                }
            })
        })
        .collect()
}

/// Looks up `ids` in `table` into `out`.
///
/// Errors: [`Error::DType`] unless `ids` is u32 and `table`/`out` share a float dtype;
/// [`Error::Shape`] unless `table` is 2-D and `out` is `ids.shape + [hidden]`; alias and limit
/// errors as every op. Ids ≥ vocab give zero rows (check them before upload).
pub fn gather(ctx: &Context, table: &Tensor, ids: &Tensor, out: &Tensor) -> Result<()> {
    let name = "embedding";
    ids.expect_dtype(name, DType::U32)?;
    launch::same_dtype(name, table.dtype(), &[out])?;
    let &[vocab, hidden] = table.shape() else {
        return Err(Error::shape(
            name,
            format!("table {:?} is not [vocab, hidden]", table.shape()),
        ));
    };
    let mut want = ids.shape().to_vec();
    want.push(hidden);
    out.expect_shape(name, "out", &want)?;
    launch::no_alias(name, out, &[table, ids])?;
    let total = launch::fits_u32(name, "elements", out.numel())?;
    let wg = launch::workgroup_size_1d(ctx, WG_CAP);
    Launch {
        label: name,
        shader: &EMBEDDING,
        entry: "gather",
        defines: launch::dtype_defines(ctx, name, table.dtype())?.u32("WG", wg),
        params: Params::new()
            .u(launch::fits_u32(name, "ids", ids.numel())?)
            .u(launch::fits_u32(name, "hidden", hidden)?)
            .u(launch::fits_u32(name, "vocab", vocab)?),
        buffers: vec![(1, table), (2, ids), (3, out)],
        workgroups: ctx.fold_workgroups(name, total.div_ceil(wg) as u64)?,
    }
    .run(ctx)
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    vec![(
        &EMBEDDING,
        "gather",
        shaders::storage_defines(dtype).u32("WG", WG_CAP),
    )]
}
