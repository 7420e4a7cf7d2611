//! Layout conversions: general permutes of up to 6 dims, tiled 2-D transposes, NCHW ↔ NHWC.
//!
//! `permute(x, perm)` gives `out` with `out.shape[i] = x.shape[perm[i]]` (NumPy's
//! `transpose`, PyTorch's `permute(...).contiguous()`). Before launching, size-1 dims are
//! dropped and runs of dims that stay adjacent are merged; a permute that reduces to a
//! (batched) 2-D transpose — NCHW → NHWC is `[N, C, H·W] → [N, H·W, C]` — runs the tiled
//! kernel, every other one the general kernel.

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, LAYOUT, Variant};

/// Most dims a permute takes.
pub const MAX_DIMS: usize = 6;
const WG_CAP: u32 = 256;

/// Tiling of the batched 2-D transpose (`shaders/layout.wgsl`): `tile` × `tile` elements per
/// workgroup of (`tile` / `width`) × `rows_per_pass` invocations, each making
/// `tile / rows_per_pass` loads of `width` elements, all in flight at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransposeTiling {
    /// Rows and columns of the workgroup's tile.
    pub tile: u32,
    /// Tile rows one pass of the workgroup covers (divides `tile`).
    pub rows_per_pass: u32,
    /// Elements per load and per store, 1 or 4: four consecutive elements of a row as one
    /// vec4 (16 bytes in f32), read along the input's rows and written along the output's.
    /// A transpose whose rows or columns are not multiples of 4, or whose tensors do not
    /// start on a vec4, moves single elements whatever this says
    /// ([`TransposeTiling::width_for`]).
    pub width: u32,
}

impl TransposeTiling {
    /// 32 × 32 tiles, 64 invocations moving four vec4s each (single elements where the
    /// shape does not allow vec4s: then 32 × 8 invocations, four elements each). The fastest
    /// of `benches/transpose.rs`'s tilings on the H200 (run 40, benches/NOTES.md: 3–4 %
    /// over the best single-element tiling).
    pub const DEFAULT: Self = Self {
        tile: 32,
        rows_per_pass: 8,
        width: 4,
    };

    /// The width a transpose of `[batch, rows, cols]` from `x` to `out` runs with: this
    /// tiling's, where rows and columns are multiples of it and both tensors start on a
    /// whole vector; else 1.
    pub fn width_for(&self, rows: usize, cols: usize, x: &Tensor, out: &Tensor) -> u32 {
        let w = self.width as usize;
        let aligned = |t: &Tensor| launch::starts_on_vector(t, w);
        if rows.is_multiple_of(w) && cols.is_multiple_of(w) && aligned(x) && aligned(out) {
            self.width
        } else {
            1
        }
    }

    fn check(&self, ctx: &Context) -> Result<()> {
        if self.tile == 0
            || self.rows_per_pass == 0
            || !self.tile.is_multiple_of(self.rows_per_pass)
            || !(self.width == 1 || self.width == 4)
            || !self.tile.is_multiple_of(self.width)
        {
            return Err(Error::invalid(
                "transpose",
                format!(
                    "{self:?}: rows_per_pass must divide tile, both nonzero; width 1 or 4, \
                     dividing tile"
                ),
            ));
        }
        let t = self.tile;
        let invocations = t / self.width * self.rows_per_pass;
        launch::check_workgroup(ctx, "transpose", invocations, t * (t + 1) * 4)
    }
}

/// NCHW → NHWC.
pub const NCHW_TO_NHWC: [usize; 4] = [0, 2, 3, 1];
/// NHWC → NCHW.
pub const NHWC_TO_NCHW: [usize; 4] = [0, 3, 1, 2];

/// Output shape of permuting `shape` by `perm`.
///
/// Errors: [`Error::InvalidArgument`] unless `perm` is a permutation of `0..shape.len()`
/// with at most [`MAX_DIMS`] entries.
pub fn permuted_shape(shape: &[usize], perm: &[usize]) -> Result<Vec<usize>> {
    let mut seen = [false; MAX_DIMS];
    let valid = perm.len() == shape.len()
        && perm.len() <= MAX_DIMS
        && perm
            .iter()
            .all(|&p| p < perm.len() && !std::mem::replace(&mut seen[p], true));
    if !valid {
        return Err(Error::invalid(
            "permute",
            format!(
                "{perm:?} is not a permutation of the {} dims of {shape:?} (at most {MAX_DIMS})",
                shape.len()
            ),
        ));
    }
    Ok(perm.iter().map(|&p| shape[p]).collect())
}

/// The smallest equivalent problem: size-1 dims dropped, dims that stay adjacent merged.
/// Returns the reduced input shape and permutation.
pub fn simplify(shape: &[usize], perm: &[usize]) -> (Vec<usize>, Vec<usize>) {
    // Drop size-1 input dims and renumber the rest.
    let kept: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    let renumber = |d: usize| kept.iter().position(|&k| k == d);
    let perm: Vec<usize> = perm.iter().filter_map(|&d| renumber(d)).collect();
    let shape: Vec<usize> = kept.iter().map(|&d| shape[d]).collect();
    // Merge output-adjacent dims that are also input-adjacent, in order.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &d in &perm {
        match groups.last_mut() {
            Some(g) if *g.last().unwrap() + 1 == d => g.push(d),
            _ => groups.push(vec![d]),
        }
    }
    let mut by_input: Vec<&Vec<usize>> = groups.iter().collect();
    by_input.sort_by_key(|g| g[0]);
    let new_shape = by_input
        .iter()
        .map(|g| g.iter().map(|&d| shape[d]).product())
        .collect();
    let new_perm = groups
        .iter()
        .map(|g| by_input.iter().position(|h| h[0] == g[0]).unwrap())
        .collect();
    (new_shape, new_perm)
}

/// Cost of any permute: every element read once and written once, no FLOPs.
pub fn cost(numel: usize, dtype: DType) -> OpCost {
    ridge_model::ops::permute(numel, dtype.size())
}

/// Reference permute (exact: it only moves data).
pub fn reference<T: Copy>(x: &[T], shape: &[usize], perm: &[usize]) -> Vec<T> {
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let in_strides = ridge_core::tensor::contiguous_strides(shape);
    let n: usize = shape.iter().product();
    (0..n)
        .map(|i| {
            let mut rest = i;
            let mut from = 0;
            for d in (0..perm.len()).rev() {
                from += (rest % out_shape[d]) * in_strides[perm[d]];
                rest /= out_shape[d];
            }
            x[from]
        })
        .collect()
}

/// `out = x.permute(perm)`, contiguous.
///
/// Errors: [`Error::InvalidArgument`] for a bad `perm`; [`Error::Shape`] when `out` is not the
/// permuted shape; dtype, alias and limit errors as every op.
pub fn permute(ctx: &Context, x: &Tensor, perm: &[usize], out: &Tensor) -> Result<()> {
    permute_with(ctx, x, perm, out, TransposeTiling::DEFAULT)
}

/// [`permute`], with the transpose kernel's tiling given (for benchmarks and tuning).
///
/// Errors: as [`permute`]; [`Error::InvalidArgument`] for a tiling whose `rows_per_pass`
/// does not divide `tile`; [`Error::LimitExceeded`] when it exceeds the workgroup limits.
pub fn permute_with(
    ctx: &Context,
    x: &Tensor,
    perm: &[usize],
    out: &Tensor,
    tiling: TransposeTiling,
) -> Result<()> {
    let name = "permute";
    let shape = permuted_shape(x.shape(), perm)?;
    out.expect_shape(name, "out", &shape)?;
    launch::same_dtype(name, x.dtype(), &[out])?;
    launch::no_alias(name, out, &[x])?;
    let n = launch::fits_u32(name, "elements", x.numel())?;
    if n == 0 {
        return Ok(());
    }
    let (s, p) = simplify(x.shape(), perm);
    match p.as_slice() {
        [1, 0] => transpose(ctx, x, out, tiling, [1, s[0], s[1]]),
        [0, 2, 1] => transpose(ctx, x, out, tiling, [s[0], s[1], s[2]]),
        _ => general(ctx, x, out, &s, &p, n),
    }
}

/// NCHW → NHWC (`[N, C, H, W]` → `[N, H, W, C]`).
pub fn nchw_to_nhwc(ctx: &Context, x: &Tensor, out: &Tensor) -> Result<()> {
    permute(ctx, x, &NCHW_TO_NHWC, out)
}

/// NHWC → NCHW (`[N, H, W, C]` → `[N, C, H, W]`).
pub fn nhwc_to_nchw(ctx: &Context, x: &Tensor, out: &Tensor) -> Result<()> {
    permute(ctx, x, &NHWC_TO_NCHW, out)
}

fn general(
    ctx: &Context,
    x: &Tensor,
    out: &Tensor,
    shape: &[usize],
    perm: &[usize],
    n: u32,
) -> Result<()> {
    let name = "permute";
    let in_strides = ridge_core::tensor::contiguous_strides(shape);
    let mut out_shape = [1u32; 8];
    let mut strides = [0u32; 8];
    for (i, &p) in perm.iter().enumerate() {
        out_shape[i] = shape[p] as u32;
        strides[i] = in_strides[p] as u32;
    }
    let wg = launch::workgroup_size_1d(ctx, WG_CAP);
    Launch {
        label: name,
        shader: &LAYOUT,
        entry: "permute",
        // The permute moves single elements (VW = 1); the tiling only sizes the unused tile.
        defines: layout_defines(
            launch::dtype_defines(ctx, name, x.dtype())?,
            wg,
            TransposeTiling {
                width: 1,
                ..TransposeTiling::DEFAULT
            },
        ),
        params: Params::new()
            .words(&[n, perm.len().max(1) as u32, 0, 0])
            .words(&out_shape)
            .words(&strides)
            .words(&[0; 8]),
        buffers: vec![(1, x), (2, out)],
        workgroups: ctx.fold_workgroups(name, n.div_ceil(wg) as u64)?,
    }
    .run(ctx)
}

/// `[batch, rows, cols]` → `[batch, cols, rows]`.
fn transpose(
    ctx: &Context,
    x: &Tensor,
    out: &Tensor,
    tiling: TransposeTiling,
    [batch, rows, cols]: [usize; 3],
) -> Result<()> {
    let name = "transpose";
    tiling.check(ctx)?;
    let width = tiling.width_for(rows, cols, x, out);
    let tiles_r = rows.div_ceil(tiling.tile as usize) as u32;
    let tiles_c = cols.div_ceil(tiling.tile as usize) as u32;
    let total = tiles_r as u64 * tiles_c as u64 * batch as u64;
    let wg = launch::workgroup_size_1d(ctx, WG_CAP);
    Launch {
        label: name,
        shader: &LAYOUT,
        entry: "transpose",
        defines: layout_defines(
            launch::dtype_defines(ctx, name, x.dtype())?,
            wg,
            TransposeTiling { width, ..tiling },
        ),
        params: Params::new().words(&[0; 20]).words(&[
            batch as u32,
            rows as u32,
            cols as u32,
            tiles_c,
            tiles_r,
        ]),
        buffers: vec![(1, x), (2, out)],
        workgroups: ctx.fold_workgroups(name, total)?,
    }
    .run(ctx)
}

/// The defines of `shaders/layout.wgsl`: the permute's workgroup size and the transpose's
/// tiling, with its loads, stores to the workgroup tile and writes unrolled (`//@` blocks),
/// one element or one vec4 each.
fn layout_defines(d: ridge_core::Defines, wg: u32, t: TransposeTiling) -> ridge_core::Defines {
    let (mut load, mut stage, mut write) = (String::new(), String::new(), String::new());
    let lanes = ["x", "y", "z", "w"];
    for i in 0..t.tile / t.rows_per_pass {
        load.push_str(&format!(
            "let tr{i} = lid.y + {i}u * ROWS_PER_PASS;\n\
             var vals{i} = VF();\n\
             if in_cols && r0 + tr{i} < p.rows {{ vals{i} = VF(src[(base + (r0 + tr{i}) * p.cols + col) / VW]); }}\n"
        ));
        // Tile element (tile row, tile column) is tile[row * (TILE + 1) + column]; a vec4
        // covers four tile columns (loaded) or four tile rows (written).
        let at = |row: String, col: String| format!("tile[({row}) * (TILE + 1u) + {col}]");
        if t.width == 1 {
            stage.push_str(&format!(
                "{} = vals{i};\n",
                at(format!("tr{i}"), "lid.x".into())
            ));
        } else {
            for (l, lane) in lanes.iter().enumerate() {
                stage.push_str(&format!(
                    "{} = vals{i}.{lane};\n",
                    at(format!("tr{i}"), format!("tx + {l}u"))
                ));
            }
        }
        let value = if t.width == 1 {
            at("lid.x".into(), format!("tr{i}"))
        } else {
            let parts: Vec<String> = (0..4)
                .map(|l| at(format!("tx + {l}u"), format!("tr{i}")))
                .collect();
            format!("VF({})", parts.join(", "))
        };
        write.push_str(&format!(
            "if in_rows && c0 + tr{i} < p.cols {{ \
             dst[(base + (c0 + tr{i}) * p.rows + out_col) / VW] = V({value}); }}\n"
        ));
    }
    let (v, vf) = if t.width == 4 {
        ("vec4<T>", "vec4<f32>")
    } else {
        ("T", "f32")
    };
    d.u32("WG", wg)
        .u32("TILE", t.tile)
        .u32("ROWS_PER_PASS", t.rows_per_pass)
        .u32("VW", t.width)
        .alias("V", v)
        .alias("VF", vf)
        .block("LOAD", load)
        .block("STAGE", stage)
        .block("WRITE", write)
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    let d = |width| {
        layout_defines(
            shaders::storage_defines(dtype),
            WG_CAP,
            TransposeTiling {
                width,
                ..TransposeTiling::DEFAULT
            },
        )
    };
    vec![
        (&LAYOUT, "permute", d(1)),
        (&LAYOUT, "transpose", d(1)),
        (&LAYOUT, "transpose", d(4)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simplify_finds_the_transposes() {
        // NCHW → NHWC is a batched transpose of [N, C, H·W].
        assert_eq!(
            simplify(&[2, 3, 4, 5], &NCHW_TO_NHWC),
            (vec![2, 3, 20], vec![0, 2, 1])
        );
        assert_eq!(
            simplify(&[2, 4, 5, 3], &NHWC_TO_NCHW),
            (vec![2, 20, 3], vec![0, 2, 1])
        );
        // Size-1 dims vanish: [1, C, H, W] → NHWC is a plain 2-D transpose.
        assert_eq!(
            simplify(&[1, 3, 4, 5], &NCHW_TO_NHWC),
            (vec![3, 20], vec![1, 0])
        );
        // Identity collapses to one dim; all-ones to none.
        assert_eq!(simplify(&[2, 3, 4], &[0, 1, 2]), (vec![24], vec![0]));
        assert_eq!(simplify(&[1, 1], &[1, 0]), (vec![], vec![]));
        // A real 3-way permute stays.
        assert_eq!(simplify(&[2, 3, 4], &[2, 0, 1]), (vec![6, 4], vec![1, 0]));
        assert_eq!(simplify(&[2, 3, 4], &[1, 2, 0]), (vec![2, 12], vec![1, 0]));
        assert_eq!(
            simplify(&[2, 3, 4], &[2, 1, 0]),
            (vec![2, 3, 4], vec![2, 1, 0])
        );
    }

    #[test]
    fn reference_matches_hand_computed() {
        let x: Vec<u32> = (0..6).collect(); // [[0,1,2],[3,4,5]]
        assert_eq!(reference(&x, &[2, 3], &[1, 0]), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn bad_permutations_are_refused() {
        assert!(permuted_shape(&[2, 3], &[0, 0]).is_err());
        assert!(permuted_shape(&[2, 3], &[0]).is_err());
        assert!(permuted_shape(&[2, 3], &[0, 2]).is_err());
        assert!(permuted_shape(&[1; 7], &[0, 1, 2, 3, 4, 5, 6]).is_err());
    }
}
