//! Layer norm and RMS norm over the last axis.
//!
//! Shapes: `x` and `y` are `[..., cols]` (all leading dims are rows); `gamma` and `beta` are
//! `[cols]`. RMS norm has no `beta`.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, NORM, Variant};

const WG_CAP: u32 = 256;

/// Which normalisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NormKind {
    /// `(x − mean) / √(var + eps) · γ + β` (Ba, Kiros & Hinton, "Layer Normalization", 2016).
    LayerNorm,
    /// `x / √(mean(x²) + eps) · γ` (Zhang & Sennrich, "Root Mean Square Layer
    /// Normalization", 2019).
    RmsNorm,
}

/// A normalisation over the last axis of a `[rows, cols]` view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Norm {
    /// Layer norm or RMS norm.
    pub kind: NormKind,
    /// Product of all leading dims.
    pub rows: usize,
    /// Length of the normalised axis.
    pub cols: usize,
    /// Added to the variance (or mean square) inside the square root; ≥ 0.
    pub eps: f32,
}

impl Norm {
    /// The op's name in profiles and reports.
    pub fn name(&self) -> &'static str {
        match self.kind {
            NormKind::LayerNorm => "layer_norm",
            NormKind::RmsNorm => "rms_norm",
        }
    }

    /// Cost: x read once, y written once, γ/β read once when affine. FLOPs: layer norm 8 per
    /// element (sum, subtract, square-accumulate twice, subtract, scale, affine), RMS norm 5.
    pub fn cost(&self, dtype: DType, affine: bool) -> OpCost {
        let rms = self.kind == NormKind::RmsNorm;
        ridge_model::ops::norm(self.rows, self.cols, rms, affine, dtype.size())
    }

    /// f64 reference over a row-major `[rows, cols]` `x`.
    pub fn reference(&self, x: &[f32], gamma: Option<&[f32]>, beta: Option<&[f32]>) -> Vec<f32> {
        let mut y = Vec::with_capacity(x.len());
        for row in x.chunks(self.cols.max(1)).take(self.rows) {
            let n = self.cols as f64;
            let (mean, denom) = match self.kind {
                NormKind::LayerNorm => {
                    let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
                    let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
                    (mean, (var + self.eps as f64).sqrt())
                }
                NormKind::RmsNorm => {
                    let ms = row.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n;
                    (0.0, (ms + self.eps as f64).sqrt())
                }
            };
            for (c, &v) in row.iter().enumerate() {
                let mut o = (v as f64 - mean) / denom;
                if let Some(g) = gamma {
                    o *= g[c] as f64;
                }
                if let (Some(b), NormKind::LayerNorm) = (beta, self.kind) {
                    o += b[c] as f64;
                }
                y.push(o as f32);
            }
        }
        y
    }

    /// Per-element error bound against [`Norm::reference`] (`want` its result). The mean and
    /// variance are f32 sums over `cols` terms; with the corrected two-pass algorithm their
    /// relative errors are O(log2(cols)·u) (Chan, Golub & LeVeque 1983, tree summation), and
    /// the normalised value inherits them. The bound is 16·(log2(cols) + 2)·u of the output's
    /// scale (4·|γ| + |β|, at least 1, for |x̂| up to 4), plus the final rounding to the storage
    /// type: 16× headroom over the first-order estimate, and far below the error of
    /// E\[x²\] − E\[x\]² on rows with a large mean.
    pub fn error_bounds(
        &self,
        dtype: DType,
        want: &[f32],
        gamma: Option<&[f32]>,
        beta: Option<&[f32]>,
    ) -> Vec<f64> {
        let log = (self.cols.max(1) as f64).log2() + 2.0;
        (0..want.len())
            .map(|i| {
                let c = i % self.cols.max(1);
                let g = gamma.map_or(1.0, |g| g[c].abs() as f64);
                let b = beta.map_or(0.0, |b| b[c].abs() as f64);
                let scale = (4.0 * g + b).max(1.0);
                16.0 * log * crate::check::U32 * scale
                    + crate::check::storage_rounding(dtype, want[i] as f64)
            })
            .collect()
    }

    /// The norm of `x` into `y`, with `gamma` (and, for layer norm, `beta`) when given.
    ///
    /// Errors: [`Error::Shape`] when `x`'s last dim is not `cols` or its row count is not
    /// `rows`, `y` differs from `x` in shape, or γ/β are not `[cols]`; [`Error::InvalidArgument`]
    /// for a negative or NaN `eps`, γ without β for layer norm, β for RMS norm; dtype and
    /// limit errors as every op.
    pub fn run(
        &self,
        ctx: &Context,
        x: &Tensor,
        gamma: Option<&Tensor>,
        beta: Option<&Tensor>,
        y: &Tensor,
    ) -> Result<()> {
        let name = self.name();
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
        if self.eps.is_nan() || self.eps < 0.0 {
            return Err(Error::invalid(
                name,
                format!("eps must be ≥ 0, got {}", self.eps),
            ));
        }
        y.expect_shape(name, "y", x.shape())?;
        let affine = match (self.kind, gamma, beta) {
            (_, None, None) => None,
            (NormKind::LayerNorm, Some(g), Some(b)) => Some((g, b)),
            (NormKind::RmsNorm, Some(g), None) => Some((g, g)),
            (NormKind::LayerNorm, _, _) => {
                return Err(Error::invalid(
                    name,
                    "layer norm takes both gamma and beta, or neither",
                ));
            }
            (NormKind::RmsNorm, _, Some(_)) => {
                return Err(Error::invalid(name, "RMS norm takes no beta"));
            }
        };
        let mut inputs = vec![x];
        if let Some((g, b)) = affine {
            g.expect_shape(name, "gamma", &[self.cols])?;
            b.expect_shape(name, "beta", &[self.cols])?;
            inputs.extend([g, b]);
        }
        launch::same_dtype(name, x.dtype(), &inputs)?;
        launch::same_dtype(name, x.dtype(), &[y])?;
        launch::no_alias(name, y, &inputs)?;

        let rows = launch::fits_u32(name, "rows", self.rows)?;
        let cols = launch::fits_u32(name, "cols", self.cols)?;
        launch::fits_u32(name, "elements", x.numel())?;
        let wg = crate::rows::workgroup_size(ctx, name, self.rows, self.cols, x.dtype());
        let (g, b) = match affine {
            Some((g, b)) => (g, b),
            None => (ctx.placeholder(), ctx.placeholder()),
        };
        let width = row_width(self.cols, x.dtype(), &[x, y, g, b]);
        let defines = row_defines(
            launch::dtype_defines(ctx, name, x.dtype())?,
            x.dtype(),
            width,
        )
        .u32("WG", wg)
        .bool("AFFINE", affine.is_some());
        let mut buffers = vec![(1, x), (2, g), (4, y)];
        if self.kind == NormKind::LayerNorm {
            buffers.push((3, b));
        }
        Launch {
            label: name,
            shader: &NORM,
            entry: name,
            defines,
            params: Params::new()
                .u(rows)
                .u(cols / width as u32)
                .f(self.eps)
                .u(cols),
            buffers,
            workgroups: ctx.fold_workgroups(name, if cols == 0 { 0 } else { rows as u64 })?,
        }
        .run(ctx)
    }
}

/// Element-type aliases for rows read one value (`V = T`) or four (`V = vec4<T>`) at a time,
/// and `hsum` and `hmax`, the sum and the maximum of a value's lanes.
pub(crate) fn row_defines(
    d: ridge_core::Defines,
    dtype: DType,
    width: usize,
) -> ridge_core::Defines {
    if width == 4 {
        d.alias("V", &format!("vec4<{}>", dtype.wgsl()))
            .alias("VF", "vec4<f32>")
            .block(
                "LANES",
                "fn hsum(v: VF) -> f32 { return dot(v, VF(1.0)); }
fn hmax(v: VF) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }"
                    .into(),
            )
    } else {
        d.alias("V", dtype.wgsl()).alias("VF", "f32").block(
            "LANES",
            "fn hsum(v: VF) -> f32 { return v; }
fn hmax(v: VF) -> f32 { return v; }"
                .into(),
        )
    }
}

/// 4 when rows of `cols` elements can be read as vec4: the length a multiple of 4 and every
/// tensor's view starting on a vec4 boundary; else 1.
pub(crate) fn row_width(cols: usize, dtype: DType, tensors: &[&Tensor]) -> usize {
    let vec_bytes = 4 * dtype.size() as u64;
    if cols.is_multiple_of(4) && tensors.iter().all(|t| t.offset().is_multiple_of(vec_bytes)) {
        4
    } else {
        1
    }
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for (affine, width) in [(false, 1), (true, 1), (true, 4)] {
        let d = row_defines(shaders::storage_defines(dtype), dtype, width)
            .u32("WG", WG_CAP)
            .bool("AFFINE", affine);
        v.push((&NORM, "layer_norm", d.clone()));
        v.push((&NORM, "rms_norm", d));
    }
    v
}
