//! Element-wise ops: residual and bias add, scale, GELU (erf form), fused bias + GELU.
//!
//! Shapes: `x`, `a` and `out` have the same shape; `b` of a binary op has the shape of `a`'s
//! trailing dims (`[n]` for a residual add on `[n]`, `[cols]` for a bias on `[rows, cols]`)
//! and is broadcast over the leading ones.
//!
//! Cost convention: an add, a multiply and a transcendental function (exp, erf) each count as
//! one FLOP; GELU is 5 (x/√2, erf, 1+, ·x, ·½).

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, ELEMENTWISE, Variant};

const WG_CAP: u32 = 256;

/// Ops with one input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    /// `alpha · x`.
    Scale(f32),
    /// `x/2 · (1 + erf(x/√2))` (Hendrycks & Gimpel, "Gaussian Error Linear Units", 2016).
    Gelu,
}

/// Ops with two inputs, the second broadcast over the first's leading dims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `a + b`.
    Add,
    /// `gelu(a + b)`: a Linear layer's bias followed by GELU, in one pass.
    BiasGelu,
}

impl Unary {
    /// The op's name in profiles and reports.
    pub fn name(self) -> &'static str {
        match self {
            Unary::Scale(_) => "scale",
            Unary::Gelu => "gelu",
        }
    }
    fn entry(self) -> &'static str {
        match self {
            Unary::Scale(_) => "scale",
            Unary::Gelu => "gelu_erf",
        }
    }
    /// Cost over `n` elements of `dtype`: read once, write once.
    pub fn cost(self, n: usize, dtype: DType) -> OpCost {
        let per = match self {
            Unary::Scale(_) => 1.0,
            Unary::Gelu => 5.0,
        };
        ridge_model::ops::elementwise(n, 0, per, dtype.size())
    }
    /// Error bound for input `x` and reference output `want`; see [`error_bound`].
    pub fn error_bound(self, dtype: DType, x: f32, want: f32) -> f64 {
        error_bound(self == Unary::Gelu, dtype, x, want)
    }

    /// f64 reference.
    pub fn reference(self, x: &[f32]) -> Vec<f32> {
        x.iter()
            .map(|&v| match self {
                Unary::Scale(alpha) => (alpha as f64 * v as f64) as f32,
                Unary::Gelu => gelu_f64(v as f64) as f32,
            })
            .collect()
    }
}

impl Binary {
    /// The op's name in profiles and reports.
    pub fn name(self) -> &'static str {
        match self {
            Binary::Add => "add",
            Binary::BiasGelu => "bias_gelu",
        }
    }
    /// Cost over `n` elements of `a` and `nb` of `b`, each read once, `out` written once.
    pub fn cost(self, n: usize, nb: usize, dtype: DType) -> OpCost {
        let per = match self {
            Binary::Add => 1.0,
            Binary::BiasGelu => 6.0,
        };
        ridge_model::ops::elementwise(n, nb, per, dtype.size())
    }
    /// Error bound for the sum `x = a + b` and reference output `want`; see [`error_bound`].
    pub fn error_bound(self, dtype: DType, x: f32, want: f32) -> f64 {
        error_bound(self == Binary::BiasGelu, dtype, x, want)
    }

    /// f64 reference; `b` is broadcast (`b[i % b.len()]`).
    pub fn reference(self, a: &[f32], b: &[f32]) -> Vec<f32> {
        a.iter()
            .enumerate()
            .map(|(i, &v)| {
                let s = v as f64 + b[i % b.len()] as f64;
                match self {
                    Binary::Add => s as f32,
                    Binary::BiasGelu => gelu_f64(s) as f32,
                }
            })
            .collect()
    }
}

/// Error bound of an element-wise result. Adds and scales round once: u·|ref|. GELU's erf
/// is a Chebyshev fit of erfc with fractional error < 1.2e-7 (Numerical Recipes, 3rd ed.,
/// §6.2.2), scaled by |x|/2, evaluated with an f32 exp whose error grows with its argument
/// (Vulkan allows 3 + 2·|x| ulp): 2e-7·(1 + |x|) + 8u·|ref|. Plus the final rounding to the
/// storage type.
pub fn error_bound(gelu: bool, dtype: DType, x: f32, want: f32) -> f64 {
    let w = want.abs() as f64;
    let base = if gelu {
        2e-7 * (1.0 + x.abs() as f64) + 8.0 * crate::check::U32 * w
    } else {
        crate::check::U32 * w
    };
    base + crate::check::storage_rounding(dtype, w)
}

/// GELU in f64 with libm's erf.
pub fn gelu_f64(x: f64) -> f64 {
    0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

/// `out = op(x)`.
///
/// Errors: dtype or shape mismatch, `out` aliasing `x`, f16 without `shader-f16`, a tensor
/// over the binding limit.
pub fn unary(ctx: &Context, op: Unary, x: &Tensor, out: &Tensor) -> Result<()> {
    let name = op.name();
    launch::same_dtype(name, x.dtype(), &[out])?;
    out.expect_shape(name, "out", x.shape())?;
    launch::no_alias(name, out, &[x])?;
    let alpha = match op {
        Unary::Scale(a) => a,
        Unary::Gelu => 1.0,
    };
    run(ctx, name, op.entry(), x, None, out, alpha)
}

/// `out = op(a, b)` with `b` broadcast over `a`'s leading dims.
///
/// Errors: as [`unary`], and [`Error::Shape`] when `b`'s shape is not a suffix of `a`'s.
pub fn binary(ctx: &Context, op: Binary, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    let name = op.name();
    launch::same_dtype(name, a.dtype(), &[b, out])?;
    out.expect_shape(name, "out", a.shape())?;
    launch::no_alias(name, out, &[a, b])?;
    if !a.shape().ends_with(b.shape()) || (b.numel() == 0 && a.numel() != 0) {
        return Err(Error::shape(
            name,
            format!(
                "b {:?} must match the trailing dims of a {:?}",
                b.shape(),
                a.shape()
            ),
        ));
    }
    run(ctx, name, op.name(), a, Some(b), out, 1.0)
}

fn run(
    ctx: &Context,
    label: &str,
    entry: &'static str,
    a: &Tensor,
    b: Option<&Tensor>,
    out: &Tensor,
    alpha: f32,
) -> Result<()> {
    let n = a.numel();
    let nb = b.map_or(1, |b| b.numel());
    // Four elements per invocation when every array is a whole number of vec4s and every
    // view starts on a vec4 boundary.
    let aligned = |t: &Tensor| launch::starts_on_vector(t, 4);
    let width = if n.is_multiple_of(4)
        && (b.is_none() || nb.is_multiple_of(4))
        && aligned(a)
        && aligned(out)
        && b.is_none_or(aligned)
    {
        4
    } else {
        1
    };
    let n = launch::fits_u32(label, "elements", n / width)?;
    let nb = launch::fits_u32(label, "elements", (nb / width).max(1))?;
    let wg = launch::workgroup_size_1d(ctx, WG_CAP);
    let defines = vector_defines(
        launch::dtype_defines(ctx, label, a.dtype())?,
        a.dtype(),
        width,
    )
    .u32("WG", wg);
    let mut buffers = vec![(1, a), (3, out)];
    if let Some(b) = b {
        buffers.push((2, b));
    }
    Launch {
        label,
        shader: &ELEMENTWISE,
        entry,
        defines,
        params: Params::new().u(n).u(nb).f(alpha),
        buffers,
        workgroups: ctx.fold_workgroups(label, n.div_ceil(wg) as u64)?,
    }
    .run(ctx)
}

/// The GELU include and `V` (one or four elements of `dtype`) with `VF` (as f32) for
/// `width` 1 or 4.
pub(crate) fn vector_defines(
    d: ridge_core::Defines,
    dtype: DType,
    width: usize,
) -> ridge_core::Defines {
    let d = d.block("GELU", shaders::GELU.to_string());
    if width == 4 {
        d.alias("V", &format!("vec4<{}>", dtype.wgsl()))
            .alias("VF", "vec4<f32>")
    } else {
        d.alias("V", dtype.wgsl()).alias("VF", "f32")
    }
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let mut v = Vec::new();
    for width in [1, 4] {
        let d = vector_defines(shaders::storage_defines(dtype), dtype, width).u32("WG", WG_CAP);
        for e in ["add", "scale", "gelu_erf", "bias_gelu"] {
            v.push((&ELEMENTWISE, e, d.clone()));
        }
    }
    v
}
