//! Mean pooling over each sequence's valid tokens, optionally L2-normalised: the
//! sentence-transformers `Pooling(mean)` + `Normalize` modules in one pass.
//!
//! Shapes: `x` `[batch, seq, hidden]`, `lengths` `[batch]` (u32, tokens that count, from the
//! start; longer than `seq` is clamped), `out` `[batch, hidden]`.

use ridge_core::{Context, DType, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, POOL, Variant};

const WG_CAP: u32 = 256;

/// Mean pooling (and L2 normalisation) of `[batch, seq, hidden]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeanPool {
    /// Sequences.
    pub batch: usize,
    /// Padded sequence length.
    pub seq: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Divide each pooled row by max(‖row‖₂, 1e-12) (PyTorch `F.normalize`).
    pub normalize: bool,
}

impl MeanPool {
    /// Cost upper bound: every token read once (twice with `normalize`), the output written
    /// once; one add per token and element, plus the norm.
    pub fn cost(&self, dtype: DType) -> OpCost {
        ridge_model::ops::mean_pool(
            self.batch,
            self.seq,
            self.hidden,
            self.normalize,
            dtype.size(),
        )
    }

    /// f64 reference.
    pub fn reference(&self, x: &[f32], lengths: &[u32]) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.batch * self.hidden);
        for (b, &len) in lengths.iter().enumerate().take(self.batch) {
            let len = (len as usize).min(self.seq);
            let mut m = vec![0f64; self.hidden];
            for t in 0..len {
                for (h, acc) in m.iter_mut().enumerate() {
                    *acc += x[(b * self.seq + t) * self.hidden + h] as f64;
                }
            }
            m.iter_mut()
                .for_each(|v| *v = if len > 0 { *v / len as f64 } else { 0.0 });
            let scale = if self.normalize {
                1.0 / m.iter().map(|v| v * v).sum::<f64>().sqrt().max(1e-12)
            } else {
                1.0
            };
            out.extend(m.iter().map(|v| (v * scale) as f32));
        }
        out
    }

    /// Error bound against [`MeanPool::reference`]: a sum of up to `seq` terms in f32 (γ_seq
    /// relative to the mean of |x|, here bounded by `x_abs_max`), the norm's sum of `hidden`
    /// squares (γ_hidden), and the final rounding to the storage type.
    pub fn error_bound(&self, dtype: DType, x_abs_max: f32, want: f32) -> f64 {
        let g = crate::check::gamma(self.seq + self.hidden + 4);
        let scale = if self.normalize {
            1.0
        } else {
            x_abs_max as f64
        };
        g * scale.max(want.abs() as f64) * 4.0 + crate::check::storage_rounding(dtype, want as f64)
    }

    /// Pools `x` into `out`.
    ///
    /// Errors: `Error::Shape` for shapes other than those above, `Error::DType` unless
    /// `lengths` is u32 and `x`/`out` share a float dtype; alias and limit errors.
    pub fn run(&self, ctx: &Context, x: &Tensor, lengths: &Tensor, out: &Tensor) -> Result<()> {
        let name = "mean_pool";
        x.expect_shape(name, "x", &[self.batch, self.seq, self.hidden])?;
        lengths.expect_shape(name, "lengths", &[self.batch])?;
        out.expect_shape(name, "out", &[self.batch, self.hidden])?;
        lengths.expect_dtype(name, DType::U32)?;
        launch::same_dtype(name, x.dtype(), &[out])?;
        launch::no_alias(name, out, &[x, lengths])?;
        launch::fits_u32(name, "elements", x.numel())?;
        if self.hidden == 0 {
            return Ok(());
        }
        let wg = launch::workgroup_size_1d(ctx, WG_CAP);
        let defines = launch::dtype_defines(ctx, name, x.dtype())?
            .u32("WG", wg)
            .bool("NORMALIZE", self.normalize);
        Launch {
            label: name,
            shader: &POOL,
            entry: "mean_pool",
            defines,
            params: Params::new()
                .u(self.batch as u32)
                .u(self.seq as u32)
                .u(self.hidden as u32),
            buffers: vec![(1, x), (2, lengths), (3, out)],
            workgroups: ctx.fold_workgroups(name, self.batch as u64)?,
        }
        .run(ctx)
    }
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    [false, true]
        .into_iter()
        .map(|n| {
            (
                &POOL,
                "mean_pool",
                shaders::storage_defines(dtype)
                    .u32("WG", WG_CAP)
                    .bool("NORMALIZE", n),
            )
        })
        .collect()
}
