//! Element-wise ops: residual and bias add, scale, GELU (erf form), fused bias + GELU.
//!
//! Shapes: a unary op's `x` and `out` have the same shape. A binary op's `a` and `b`
//! broadcast as in NumPy (shapes aligned at their last dims; each pair of dims equal, or one
//! of them 1) and `out` has the broadcast shape: `[rows, cols] + [cols]` (a bias),
//! `[rows, cols] + [rows, 1]` (a per-row value), `[r, 1] + [1, c]` (an outer sum).
//! Where `b` is a suffix of `out` = `a` (residual and bias adds) one kernel reads four elements
//! per invocation (`shaders/elementwise.wgsl`); every other broadcast reads by strides
//! (`shaders/broadcast.wgsl`).
//!
//! Cost convention: an add, a multiply and a transcendental function (exp, erf) each count as
//! one FLOP; GELU is 5 (x/√2, erf, 1+, ·x, ·½).

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, BROADCAST, ELEMENTWISE, Variant};

const WG_CAP: u32 = 256;

/// The most dims a strided broadcast runs over, after size-1 dims are dropped and dims
/// contiguous in both operands merged (`shaders/broadcast.wgsl`'s `dims`).
pub const MAX_BROADCAST_RANK: usize = 8;

/// Ops with one input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Unary {
    /// `alpha · x`.
    Scale(f32),
    /// `x/2 · (1 + erf(x/√2))` (Hendrycks & Gimpel, "Gaussian Error Linear Units", 2016).
    Gelu,
}

/// Ops with two inputs, broadcast against each other ([`broadcast_shape`]).
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
    /// Cost of `out` = op(`a`, `b`) over `out` elements, `a` and `b` of `na` and `nb`
    /// elements (fewer where they broadcast): each read once, `out` written once.
    pub fn cost(self, out: usize, na: usize, nb: usize, dtype: DType) -> OpCost {
        let per = match self {
            Binary::Add => 1.0,
            Binary::BiasGelu => 6.0,
        };
        let elements = (na + nb + out) as f64;
        OpCost::new(per * out as f64, elements * dtype.size() as f64)
    }
    /// Error bound for the sum `x = a + b` and reference output `want`; see [`error_bound`].
    pub fn error_bound(self, dtype: DType, x: f32, want: f32) -> f64 {
        error_bound(self == Binary::BiasGelu, dtype, x, want)
    }

    /// f64 reference over `a` of `a_shape` and `b` of `b_shape`, broadcast: the output in
    /// the broadcast shape ([`broadcast_shape`], whose errors it returns).
    pub fn reference(
        self,
        a: &[f32],
        a_shape: &[usize],
        b: &[f32],
        b_shape: &[usize],
    ) -> Result<Vec<f32>> {
        let out = broadcast_shape(self.name(), a_shape, b_shape)?;
        let dims = broadcast_dims(&out, a_shape, b_shape);
        let n: usize = out.iter().product();
        Ok((0..n)
            .map(|i| {
                let (ia, ib) = sources(&dims, i);
                let s = a[ia] as f64 + b[ib] as f64;
                match self {
                    Binary::Add => s as f32,
                    Binary::BiasGelu => gelu_f64(s) as f32,
                }
            })
            .collect())
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

/// `out = op(a, b)`, `a` and `b` broadcast to `out`'s shape ([`broadcast_shape`]).
///
/// Errors: as [`unary`]; [`Error::Shape`] when the shapes do not broadcast or `out` does not
/// have their broadcast shape; [`Error::InvalidArgument`] for a broadcast over more than
/// [`MAX_BROADCAST_RANK`] dims that cannot be merged.
pub fn binary(ctx: &Context, op: Binary, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    let name = op.name();
    launch::same_dtype(name, a.dtype(), &[b, out])?;
    let shape = broadcast_shape(name, a.shape(), b.shape())?;
    out.expect_shape(name, "out", &shape)?;
    launch::no_alias(name, out, &[a, b])?;
    if out.numel() == 0 {
        return Ok(());
    }
    // `b` a suffix of `a` = `out` (leading 1s aside): the vectorised kernel, b[i % nb].
    let b_dims = &b.shape()[b.shape().iter().take_while(|&&d| d == 1).count()..];
    if a.shape() == shape.as_slice() && a.shape().ends_with(b_dims) {
        return run(ctx, name, op.name(), a, Some(b), out, 1.0);
    }
    strided(ctx, op, a, b, out)
}

/// The broadcast shape of `a` and `b` (NumPy's rule: aligned at their last dims, each pair
/// equal or one of them 1, the missing leading dims of the shorter counting as 1).
///
/// Errors: [`Error::Shape`] naming both shapes and the first dim that differs.
pub fn broadcast_shape(op: &str, a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], d: usize| (d + s.len()).checked_sub(rank).map_or(1, |i| s[i]);
    (0..rank)
        .map(|d| match (dim(a, d), dim(b, d)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(Error::shape(
                op,
                format!(
                    "a {a:?} and b {b:?} do not broadcast: dim {d} of the aligned shapes is \
                     {x} against {y} (each pair of dims must be equal or one of them 1)"
                ),
            )),
        })
        .collect()
}

/// `out`'s dims as `[size, a's stride, b's stride]` (stride 0 where the operand broadcasts),
/// size-1 dims dropped and neighbours contiguous in both operands merged: a bias over
/// `[2, 5, 1000]` is one dim of 10,000 over `a` and two for `b`.
fn broadcast_dims(out: &[usize], a: &[usize], b: &[usize]) -> Vec<[usize; 3]> {
    let strides = |s: &[usize]| {
        let pad = out.len() - s.len();
        let mut st = vec![0; out.len()];
        let mut step = 1;
        for d in (0..s.len()).rev() {
            st[pad + d] = if s[d] == 1 { 0 } else { step };
            step *= s[d];
        }
        st
    };
    let (sa, sb) = (strides(a), strides(b));
    let mut dims: Vec<[usize; 3]> = Vec::new();
    for d in 0..out.len() {
        if out[d] == 1 {
            continue;
        }
        let next = [out[d], sa[d], sb[d]];
        match dims.last_mut() {
            // The previous dim steps over exactly this one in both operands.
            Some(prev) if prev[1] == next[1] * next[0] && prev[2] == next[2] * next[0] => {
                *prev = [prev[0] * next[0], next[1], next[2]];
            }
            _ => dims.push(next),
        }
    }
    dims
}

/// The elements of `a` and `b` that output element `i` reads, over `dims`.
fn sources(dims: &[[usize; 3]], i: usize) -> (usize, usize) {
    let mut rest = i;
    let (mut ia, mut ib) = (0, 0);
    for &[size, sa, sb] in dims.iter().rev() {
        ia += (rest % size) * sa;
        ib += (rest % size) * sb;
        rest /= size;
    }
    (ia, ib)
}

/// A binary op over any broadcast, by strides (`shaders/broadcast.wgsl`).
fn strided(ctx: &Context, op: Binary, a: &Tensor, b: &Tensor, out: &Tensor) -> Result<()> {
    let name = op.name();
    let dims = broadcast_dims(out.shape(), a.shape(), b.shape());
    if dims.len() > MAX_BROADCAST_RANK {
        return Err(Error::invalid(
            name,
            format!(
                "a {:?} and b {:?} broadcast over {} dims that cannot be merged; at most \
                 {MAX_BROADCAST_RANK} are supported",
                a.shape(),
                b.shape(),
                dims.len()
            ),
        ));
    }
    let n = launch::fits_u32(name, "elements", out.numel())?;
    let mut params = Params::new().u(n).u(dims.len() as u32).u(0).u(0);
    // Every size and stride is at most an element count checked above.
    for d in 0..MAX_BROADCAST_RANK {
        let [size, sa, sb] = dims.get(d).copied().unwrap_or([1, 0, 0]);
        params = params.words(&[size as u32, sa as u32, sb as u32, 0]);
    }
    let wg = launch::workgroup_size_1d(ctx, WG_CAP);
    let defines =
        vector_defines(launch::dtype_defines(ctx, name, a.dtype())?, a.dtype(), 1).u32("WG", wg);
    Launch {
        label: name,
        shader: &BROADCAST,
        entry: op.name(),
        defines,
        params,
        buffers: vec![(1, a), (2, b), (3, out)],
        workgroups: ctx.fold_workgroups(name, n.div_ceil(wg) as u64)?,
    }
    .run(ctx)
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
    let d = vector_defines(shaders::storage_defines(dtype), dtype, 1).u32("WG", WG_CAP);
    for e in ["add", "bias_gelu"] {
        v.push((&BROADCAST, e, d.clone()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_as_in_numpy() {
        let ok = |a: &[usize], b: &[usize]| broadcast_shape("t", a, b).expect("broadcasts");
        assert_eq!(ok(&[3, 4], &[4]), [3, 4]);
        assert_eq!(ok(&[3, 1], &[1, 4]), [3, 4]);
        assert_eq!(ok(&[4], &[2, 3, 4]), [2, 3, 4]);
        assert_eq!(ok(&[0, 3], &[1, 3]), [0, 3]);
        assert_eq!(ok(&[], &[5]), [5]);
        let err = broadcast_shape("t", &[3, 4], &[3]).expect_err("3 against 4");
        assert!(
            err.to_string()
                .contains("dim 1 of the aligned shapes is 4 against 3"),
            "{err}"
        );
        assert!(broadcast_shape("t", &[0], &[2]).is_err());
    }

    #[test]
    fn dims_merge_where_both_operands_are_contiguous() {
        // A bias over [2, 5, 1000]: a is one run; b repeats every 1000.
        assert_eq!(
            broadcast_dims(&[2, 5, 1000], &[2, 5, 1000], &[1000]),
            [[10, 1000, 0], [1000, 1, 1]]
        );
        // A residual add is one dim; a per-row value keeps two.
        assert_eq!(broadcast_dims(&[3, 4], &[3, 4], &[3, 4]), [[12, 1, 1]]);
        assert_eq!(
            broadcast_dims(&[3, 4], &[3, 4], &[3, 1]),
            [[3, 4, 1], [4, 1, 0]]
        );
        // Size-1 dims vanish; an outer sum is two dims.
        assert_eq!(
            broadcast_dims(&[3, 1, 4], &[3, 1, 1], &[1, 1, 4]),
            [[3, 1, 0], [4, 0, 1]]
        );
        let dims = broadcast_dims(&[2, 3, 4], &[2, 1, 4], &[3, 1]);
        // out[1][2][3] reads a[1][0][3] = 7 and b[2][0] = 2.
        assert_eq!(sources(&dims, 12 + 8 + 3), (7, 2));
    }
}
