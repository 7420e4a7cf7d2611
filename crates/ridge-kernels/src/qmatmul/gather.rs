//! The lookup of quantized rows (an embedding table), dequantized: the `gather` entry of
//! `shaders/qmatmul.wgsl`.

use ridge_core::{Context, DType, Result, Tensor};
use ridge_model::OpCost;

use super::TILE_SHORT;
use super::dispatch::defines;
use super::matvec::{TPR, WG, lanes};
use crate::launch::{self, Launch, Params};
use crate::quant::{BLOCK, QuantFormat, QuantMatrix};
use crate::shaders::QMATMUL;

/// Looks up rows `ids` of a quantized table (an embedding) and dequantizes them into `out`
/// `[ids…, K]`; an id past the table gives zeros (check ids before upload).
///
/// Errors: [`ridge_core::Error::DType`] unless `ids` is u32 and `out` a float type the
/// adapter runs; [`ridge_core::Error::Shape`] unless `out` is the ids' shape followed by `K`;
/// limit errors as every op.
pub fn gather_rows(ctx: &Context, table: &QuantMatrix, ids: &Tensor, out: &Tensor) -> Result<()> {
    let name = "qembedding";
    table.check(name)?;
    ids.expect_dtype(name, DType::U32)?;
    let mut want = ids.shape().to_vec();
    want.push(table.cols);
    out.expect_shape(name, "out", &want)?;
    launch::no_alias(name, out, &[ids, &table.quants, &table.scales])?;
    let total = launch::fits_u32(name, "elements", out.numel())?;
    Launch {
        label: name,
        shader: &QMATMUL,
        entry: "gather",
        defines: lanes(
            defines(
                launch::dtype_defines(ctx, name, out.dtype())?,
                table.format,
                false,
                false,
                false,
                false,
                0,
            ),
            WG,
            TPR,
            1,
        )
        .u32("MROWS", 1)
        .u32("RPT", 1)
        .bool("WORDS", false)
        .bool("INT8X", false)
        .u32("XB", 1)
        .u32("BM", TILE_SHORT as u32),
        params: Params::new()
            .u(launch::fits_u32(name, "ids", ids.numel())?)
            .u(launch::fits_u32(name, "rows", table.rows)?)
            .u(table.cols as u32)
            .u((table.cols / BLOCK) as u32)
            // eps and the RoPE fields: one parameter struct for every entry.
            .f(0.0)
            .words(&[0; 4]),
        buffers: vec![(2, &table.quants), (3, &table.scales), (4, out), (5, ids)],
        workgroups: ctx.fold_workgroups(name, total.div_ceil(WG) as u64)?,
    }
    .run(ctx)
}

/// Cost of [`gather_rows`]: `n` rows of `k` quantized weights read, `n·k` values written.
pub fn gather_cost(format: QuantFormat, n: usize, k: usize, dtype: DType) -> OpCost {
    let read = (n * k / BLOCK * format.block_bytes()) as f64 + 4.0 * n as f64;
    OpCost::new(n as f64 * k as f64, read + (n * k * dtype.size()) as f64)
}
