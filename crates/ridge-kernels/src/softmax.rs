//! Softmax over the last axis, with an optional additive mask and a pre-softmax scale.
//!
//! Shapes: `x` and `y` are `[..., cols]`, viewed as `[rows, cols]`; the mask is
//! `[rows / mask_group, cols]` and row `r` uses mask row `r / mask_group`. For attention
//! scores `[batch, heads, queries, keys]` with a `[batch, keys]` padding mask,
//! `mask_group = heads · queries`.
//!
//! Masking: a mask value of `-inf` removes an element; a row whose elements are all removed
//! is all zeros (not NaN, not uniform).

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::norm::{row_defines, row_width};
use crate::shaders::{self, SOFTMAX, Variant};

const WG_CAP: u32 = 256;

/// `y = softmax(scale · x + mask)` over rows of length `cols`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Softmax {
    /// Number of rows (product of all leading dims).
    pub rows: usize,
    /// Row length.
    pub cols: usize,
    /// Multiplies `x` before the mask is added (e.g. 1/√d for attention).
    pub scale: f32,
    /// Rows sharing one mask row; ignored without a mask.
    pub mask_group: usize,
}

impl Softmax {
    /// Plain softmax of a `[rows, cols]` view: scale 1, no mask grouping.
    pub fn new(rows: usize, cols: usize) -> Self {
        Self {
            rows,
            cols,
            scale: 1.0,
            mask_group: 1,
        }
    }

    /// Cost: x read once, y written once, the mask read once. FLOPs: 5 per element (scale,
    /// mask add, subtract max, exp, divide), exp counted as one.
    pub fn cost(&self, dtype: DType, masked: bool) -> OpCost {
        let mask = if masked {
            self.rows / self.mask_group.max(1) * self.cols
        } else {
            0
        };
        ridge_model::ops::softmax(self.rows, self.cols, mask, dtype.size())
    }

    /// f64 reference.
    pub fn reference(&self, x: &[f32], mask: Option<&[f32]>) -> Vec<f32> {
        let mut y = Vec::with_capacity(x.len());
        for (r, row) in x.chunks(self.cols.max(1)).take(self.rows).enumerate() {
            let v: Vec<f64> = row
                .iter()
                .enumerate()
                .map(|(c, &x)| {
                    let m = mask.map_or(0.0, |m| m[(r / self.mask_group) * self.cols + c] as f64);
                    self.scale as f64 * x as f64 + m
                })
                .collect();
            let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                y.extend(std::iter::repeat_n(0.0, row.len()));
                continue;
            }
            let sum: f64 = v.iter().map(|&t| (t - max).exp()).sum();
            y.extend(v.iter().map(|&t| ((t - max).exp() / sum) as f32));
        }
        y
    }

    /// Error bound for an output whose reference value is `want`. Each output is
    /// exp(v − max)/Σ with an f32 sum of `cols` terms (relative error ≤ γ_cols) and an f32
    /// exp: 8·(log2(cols) + 2)·u relative covers a tree-summed denominator and a few-ulp exp;
    /// 1e-7 absolute covers tiny outputs, whose exp error is relative to a larger argument;
    /// plus the final rounding to the storage type.
    pub fn error_bound(&self, dtype: DType, want: f32) -> f64 {
        let rel = 8.0 * ((self.cols.max(1) as f64).log2() + 2.0) * crate::check::U32;
        rel * want.abs() as f64 + 1e-7 + crate::check::storage_rounding(dtype, want as f64)
    }

    /// Softmax of `x` into `y`, masked by `mask` when given.
    ///
    /// Errors: [`Error::Shape`] when `x` is not `[rows, cols]`-shaped, `y` differs, the mask is
    /// not `[rows / mask_group, cols]` or `mask_group` does not divide `rows`; dtype, alias
    /// and limit errors as every op.
    pub fn run(&self, ctx: &Context, x: &Tensor, mask: Option<&Tensor>, y: &Tensor) -> Result<()> {
        let name = "softmax";
        let leading: usize = x.shape().iter().rev().skip(1).product();
        if x.shape().last().copied().unwrap_or(1) != self.cols || leading != self.rows {
            return Err(Error::shape(
                name,
                format!(
                    "x {:?} is not [{} rows, {}]",
                    x.shape(),
                    self.rows,
                    self.cols
                ),
            ));
        }
        y.expect_shape(name, "y", x.shape())?;
        let mut inputs = vec![x];
        if let Some(m) = mask {
            if self.mask_group == 0 || !self.rows.is_multiple_of(self.mask_group) {
                return Err(Error::shape(
                    name,
                    format!(
                        "mask_group {} must divide rows {}",
                        self.mask_group, self.rows
                    ),
                ));
            }
            let want = self.rows / self.mask_group * self.cols;
            if m.numel() != want || m.shape().last().copied().unwrap_or(1) != self.cols {
                return Err(Error::shape(
                    name,
                    format!(
                        "mask {:?} must hold [{}, {}]",
                        m.shape(),
                        self.rows / self.mask_group,
                        self.cols
                    ),
                ));
            }
            inputs.push(m);
        }
        launch::same_dtype(name, x.dtype(), &inputs)?;
        launch::same_dtype(name, x.dtype(), &[y])?;
        launch::no_alias(name, y, &inputs)?;

        let rows = launch::fits_u32(name, "rows", self.rows)?;
        let cols = launch::fits_u32(name, "cols", self.cols)?;
        launch::fits_u32(name, "elements", x.numel())?;
        let wg = crate::rows::workgroup_size(ctx, name, self.rows, self.cols, x.dtype());
        let m = mask.map_or(ctx.placeholder(), |m| m);
        let width = row_width(self.cols, x.dtype(), &[x, y, m]);
        let defines = row_defines(
            launch::dtype_defines(ctx, name, x.dtype())?,
            x.dtype(),
            width,
        )
        .u32("WG", wg)
        .bool("HAS_MASK", mask.is_some());
        Launch {
            label: name,
            shader: &SOFTMAX,
            entry: name,
            defines,
            params: Params::new()
                .u(rows)
                .u(cols / width as u32)
                .u(launch::fits_u32(
                    name,
                    "mask_group",
                    self.mask_group.max(1),
                )?)
                .f(self.scale),
            buffers: vec![(1, x), (2, m), (3, y)],
            workgroups: ctx.fold_workgroups(name, if cols == 0 { 0 } else { rows as u64 })?,
        }
        .run(ctx)
    }
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    [(false, 1), (true, 1), (true, 4)]
        .into_iter()
        .map(|(mask, width)| {
            let d = row_defines(shaders::storage_defines(dtype), dtype, width)
                .u32("WG", WG_CAP)
                .bool("HAS_MASK", mask);
            (&SOFTMAX, "softmax", d)
        })
        .collect()
}
