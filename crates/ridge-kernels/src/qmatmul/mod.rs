//! Products with block-quantized weights (`shaders/qmatmul.wgsl`): `y = x·Wᵀ` for a
//! [`QuantMatrix`] `W` `[N, K]` and activations `x` `[M, K]`, the weights dequantized in
//! registers, f32 accumulation; and the lookup of quantized rows (an embedding table).
//!
//! Shapes: `x` `[M, K]` (any leading dims whose product is `M`), `y` `[M, N]`, or `[M, N/2]`
//! with [`QMatmul::glu`]. `x` and `y` share a float storage type (f32, or f16 with
//! `shader-f16`).
//!
//! Three kernels: a matrix-vector product for decode and short prompts (`M ≤`
//! [`MATVEC_MAX_M`]: each weight block read once per [`MATVEC_ROWS`] rows of `x` and
//! dequantized once in registers; the weights' bytes dominate) and a tiled product for
//! longer prompts (64 × 64 tiles, one block of K per step). The tiled kernel computes whole
//! 64-row tiles: a 5-token chat turn through it would cost as much as 64 tokens (lavapipe:
//! 2.5 s against 0.2 s for 4 tokens, before the matrix-vector product took up to 32 rows).
//! With f16 activations on an adapter with cooperative matrices, the tiled product runs on
//! the tensor cores instead ([`QMatmul::on_tensor_cores`]; H200, benches/NOTES.md run 96:
//! the products of a 1024-token prompt 13.6 → 6.2 ms).

use ridge_core::{Context, DType, Result, Tensor};
use ridge_model::OpCost;

use crate::quant::{BLOCK, QuantFormat, QuantMatrix};
use crate::rope::RopeTable;

mod dispatch;
mod gather;
mod matvec;

pub(crate) use dispatch::variants;
pub use gather::{gather_cost, gather_rows};
pub use matvec::{INT8_MIN_BLOCKS, MATVEC_RPT, MATVEC_WIDE_N, MatvecRule, MatvecShape};

/// Rows of `x` up to which the matrix-vector kernel runs; above it, the tiled kernel.
pub const MATVEC_MAX_M: usize = 32;
/// Rows of `x` a matrix-vector workgroup takes at once (one row alone for decode).
pub const MATVEC_ROWS: usize = 8;
/// The tiled kernels' tile of y (SIMT and tensor cores alike): [`TILE`] columns by [`TILE`]
/// rows, or [`TILE_SHORT`] rows where [`TILE`]-row tiles would launch fewer than
/// [`MIN_TILES`] workgroups.
const TILE: usize = 64;
/// Rows of the tiled kernel's short tile.
const TILE_SHORT: usize = 32;
/// Workgroups below which the tiled kernel takes [`TILE_SHORT`]-row tiles: a large GPU's
/// units (the H200 has 132) need more than one workgroup each to hide a load. Measured on
/// the H200 (benches/NOTES.md runs 93–94): SmolLM2's 576-row projections of a 1024-token
/// prompt (144 tiles of 64) 12 % faster with 32-row tiles and prompts of 128–256 tokens
/// 10–12 % faster end to end, but its 960-row Q/K/V product (240 tiles) 66 % slower: the
/// threshold lies between. The tensor-core kernel takes the same rule (runs 113–115): f16
/// prompts of 128 tokens 18 % faster end to end (4.8 → 3.9 ms), 512 tokens 5 %, 1024 tokens
/// 1 %; a threshold of 512 (short tiles for the 240- and 384-tile products too) lost 11 % at
/// 512 tokens.
const MIN_TILES: usize = 192;

/// How a product rounds its operands before its f32 accumulation ([`QMatmul::rounding`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OperandRounding {
    /// Neither: the weights dequantized and `x` read as stored.
    None,
    /// Weights and normalized activations rounded to f16 for the tensor cores.
    TensorCores,
    /// `x` rounded to 8 bits in blocks of 32 ([`MatvecShape::int8_x`]).
    Int8X,
}

/// `y = x·Wᵀ` with a quantized `W`, optionally accumulated into `y` or gated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QMatmul {
    /// Rows of `x` (tokens).
    pub m: usize,
    /// Add the product to `y` instead of overwriting it (a residual connection).
    pub residual: bool,
    /// SwiGLU: `W`'s rows are (gate, up) pairs, `y[:, i] = silu(gate_i)·up_i`
    /// (see [`crate::quant::interleave_rows`]).
    pub glu: bool,
    /// RMSNorm of each row of `x` (with a γ) as it is read: the norm before the product
    /// costs no dispatch of its own. Run with [`QMatmul::run_with_norm`].
    pub rms_norm: bool,
    /// RoPE and the KV-cache append in the epilogue of a Q/K/V product (see [`RopeAppend`]):
    /// no dispatch of their own. Run with [`QMatmul::run_fused`].
    pub rope: bool,
}

/// What a Q/K/V product's RoPE epilogue needs: `W` is `[W_q; W_k; W_v]`, `[(nh + 2·nkv)·dh,
/// K]`, its Q and K rows in llama.cpp's order (RoPE on adjacent pairs). Row `m` of `x` is the
/// token at position `pos0 + m`; Q goes to `y` `[M, nh, dh]`, K and V to the caches
/// `[capacity, nkv, dh]` at that position (as [`crate::RopeQkv`] does as a separate pass).
#[derive(Clone, Copy, Debug)]
pub struct RopeAppend<'a> {
    /// The angles' table ([`RopeTable`]).
    pub table: &'a RopeTable,
    /// The K cache.
    pub k_cache: &'a Tensor,
    /// The V cache.
    pub v_cache: &'a Tensor,
    /// Query heads `nh`.
    pub heads: usize,
    /// Key/value heads `nkv`.
    pub kv_heads: usize,
    /// Position of `x`'s first row.
    pub pos0: usize,
}

/// The matrix-vector products' kinds with `x` rounded to 8 bits ([`QMatmul::kind`]), each
/// beside its float kernel's.
pub const INT8_KINDS: [(&str, &str); 6] = [
    ("qmatvec", "qmatvec_int8"),
    ("qmatvec_swiglu", "qmatvec_swiglu_int8"),
    ("qmatvec_rope", "qmatvec_rope_int8"),
    ("rms_qmatvec", "rms_qmatvec_int8"),
    ("rms_qmatvec_swiglu", "rms_qmatvec_swiglu_int8"),
    ("rms_qmatvec_rope", "rms_qmatvec_rope_int8"),
];

/// The matrix-vector products' kinds over 2 to [`MATVEC_MAX_M`] rows of `x` (a short
/// prompt, [`MATVEC_ROWS`] rows a workgroup: [`QMatmul::kind`]), each beside the one-row
/// kind of the same kernel: the launch shape and the work a weight load feeds differ, so a
/// fit over one-row launches cannot price them (held out 1.2–1.4× on the CPU drivers).
pub const ROWS_KINDS: [(&str, &str); 6] = [
    ("qmatvec", "qmatvec_rows"),
    ("qmatvec_swiglu", "qmatvec_swiglu_rows"),
    ("qmatvec_rope", "qmatvec_rope_rows"),
    ("rms_qmatvec", "rms_qmatvec_rows"),
    ("rms_qmatvec_swiglu", "rms_qmatvec_swiglu_rows"),
    ("rms_qmatvec_rope", "rms_qmatvec_rope_rows"),
];

impl QMatmul {
    /// A plain product over `m` rows.
    pub fn new(m: usize) -> Self {
        Self {
            m,
            residual: false,
            glu: false,
            rms_norm: false,
            rope: false,
        }
    }

    /// The op's name in profiles and reports.
    pub fn name(&self) -> &'static str {
        if self.rope {
            return match (self.rms_norm, self.m <= MATVEC_MAX_M) {
                (false, true) => "qmatvec_rope",
                (false, false) => "qmatmul_rope",
                (true, true) => "rms_qmatvec_rope",
                (true, false) => "rms_qmatmul_rope",
            };
        }
        match (self.rms_norm, self.m <= MATVEC_MAX_M, self.glu) {
            (false, true, false) => "qmatvec",
            (false, true, true) => "qmatvec_swiglu",
            (false, false, false) => "qmatmul",
            (false, false, true) => "qmatmul_swiglu",
            (true, true, false) => "rms_qmatvec",
            (true, true, true) => "rms_qmatvec_swiglu",
            (true, false, false) => "rms_qmatmul",
            (true, false, true) => "rms_qmatmul_swiglu",
        }
    }

    /// The kind a launch of this product is swept and priced as
    /// (`ridge_model::calibrate`): its [`QMatmul::name`], but `…_int8` for one row of `x`
    /// rounded to 8 bits (`rounds_x`: [`MatvecShape::int8_x`], [`MatvecShape::rounds_x`]),
    /// a kernel of its own with its own fitted terms ([`INT8_KINDS`]), and `…_rows` for 2 to
    /// [`MATVEC_MAX_M`] rows of `x` ([`ROWS_KINDS`]).
    pub fn kind(&self, rounds_x: bool) -> &'static str {
        let name = self.name();
        let table = match self.m {
            1 if rounds_x => &INT8_KINDS,
            2..=MATVEC_MAX_M => &ROWS_KINDS,
            _ => return name,
        };
        table
            .iter()
            .find(|(plain, _)| *plain == name)
            .map_or(name, |(_, kind)| kind)
    }

    /// Columns of `y` for a weight of `n` rows.
    pub fn out_cols(&self, n: usize) -> usize {
        if self.glu { n / 2 } else { n }
    }

    /// Whether the tiled product runs on cooperative matrices (tensor cores): f16
    /// activations, an adapter with f16 × f16 → f32 16×16×16 cooperative matrices, `M` past
    /// [`MATVEC_MAX_M`], and weights whose dequantized values all fit f16
    /// ([`QuantMatrix::fits_f16`]). There each dequantized weight (and, under RMSNorm, each
    /// normalized activation) is rounded to f16 before an exact product and f32 accumulation
    /// (see [`QMatmul::error_bounds`]); elsewhere the SIMT kernel keeps them in f32.
    pub fn on_tensor_cores(&self, ctx: &Context, dtype: DType, w: &QuantMatrix) -> bool {
        self.m > MATVEC_MAX_M && dtype == DType::F16 && ctx.has_coop_f16() && w.fits_f16
    }

    /// Cost for `W` `[n, k]` in `format`: 2·M·N·K FLOPs (+ M·N for a residual add, + 4 per
    /// gated output for silu and the product); bytes: the packed weights once, `x` once, `y`
    /// written once (and read once for a residual). The RMSNorm prologue adds 3 FLOPs per
    /// element of `x` (square-accumulate, scale, γ) and γ's bytes.
    pub fn cost(&self, format: QuantFormat, n: usize, k: usize, dtype: DType) -> OpCost {
        let product = ridge_model::ops::quantized_matmul(
            self.m,
            n,
            k,
            format.block_bytes() as f64 / BLOCK as f64,
            self.residual,
            self.glu,
            dtype.size(),
        );
        if self.rms_norm {
            product + OpCost::new(3.0 * (self.m * k) as f64, (k * dtype.size()) as f64)
        } else {
            product
        }
    }

    /// The kind one launch is swept and priced as, and its cost, on an adapter whose one-row
    /// launch shapes follow `adapter` ([`MatvecRule`]): for one row of `x`, the kind is `…_int8`
    /// where [`MatvecShape::rule`]'s shape rounds `x` to 8 bits ([`MatvecShape::int8_x`],
    /// [`QMatmul::kind`]); 2 to [`MATVEC_MAX_M`] rows, the matrix-vector kernel's `…_rows`
    /// kinds ([`ROWS_KINDS`]). A matrix-vector launch's cost ([`QMatmul::cost`]) states the
    /// workgroups and invocations it launches, [`MATVEC_ROWS`] rows of `x` a workgroup (a CPU
    /// driver's time follows the invocations, `ridge_model::calibrate`'s `ω`); the tiled
    /// kernel's, the FLOPs of the whole tiles it computes ([`OpCost::with_tiles`]: 37 rows of
    /// x cost what 64 do, as on a CPU driver) and its workgroups, one a tile (what its waves
    /// over the GPU are counted in).
    pub fn kind_and_cost(
        &self,
        format: QuantFormat,
        n: usize,
        k: usize,
        dtype: DType,
        adapter: MatvecRule,
    ) -> (&'static str, OpCost) {
        let cost = self.cost(format, n, k, dtype);
        if self.m > MATVEC_MAX_M {
            // The tiled kernel computes whole tiles of TILE rows of W by `bm` rows of x.
            let bm = self.tile_rows(n);
            let tiles = n.div_ceil(TILE) * self.m.div_ceil(bm);
            let per_product = cost.flops / (self.m * n) as f64;
            let cost = cost
                .with_tiles(tiles, per_product * (bm * TILE) as f64)
                .with_workgroups(tiles);
            return (self.name(), cost);
        }
        let shape = if self.m == 1 {
            let paired = self.glu || self.rope;
            MatvecShape::rule(n, k / BLOCK, format, dtype, paired, adapter)
        } else {
            MatvecShape::rows_rule(adapter)
        };
        let workgroups = shape.workgroups(n) * self.m.div_ceil(self.matvec_rows());
        let cost = cost
            .with_workgroups(workgroups)
            .with_invocations(workgroups * shape.wg as usize);
        (self.kind(shape.int8_x), cost)
    }

    /// Rows of `x` a tiled workgroup takes over `n` rows of W: [`TILE`], or [`TILE_SHORT`]
    /// where that launches fewer than [`MIN_TILES`] workgroups.
    fn tile_rows(&self, n: usize) -> usize {
        if n.div_ceil(TILE) * self.m.div_ceil(TILE) < MIN_TILES {
            TILE_SHORT
        } else {
            TILE
        }
    }

    /// Rows of `x` one matrix-vector workgroup takes.
    fn matvec_rows(&self) -> usize {
        if self.m == 1 { 1 } else { MATVEC_ROWS }
    }

    /// f64 reference with `w` already dequantized (`[n, k]`, by [`crate::quant::dequantize`]);
    /// `y_old` is `y` before the call (read only with `residual`).
    pub fn reference(&self, x: &[f32], w: &[f32], n: usize, k: usize, y_old: &[f32]) -> Vec<f32> {
        let dots: Vec<f64> = (0..self.m)
            .flat_map(|i| {
                (0..n).map(move |j| {
                    (0..k)
                        .map(|c| x[i * k + c] as f64 * w[j * k + c] as f64)
                        .sum::<f64>()
                })
            })
            .collect();
        if self.glu {
            return (0..self.m * n / 2)
                .map(|o| {
                    let (i, j) = (o / (n / 2), o % (n / 2));
                    let (g, u) = (dots[i * n + 2 * j], dots[i * n + 2 * j + 1]);
                    (g / (1.0 + (-g).exp()) * u) as f32
                })
                .collect();
        }
        dots.iter()
            .enumerate()
            .map(|(i, &d)| {
                let old = if self.residual { y_old[i] as f64 } else { 0.0 };
                (d + old) as f32
            })
            .collect()
    }

    /// How a launch of this product rounds its operands before the f32 accumulation (as
    /// [`QMatmul::run`] would launch it on `ctx` now, a [`MatvecShape::forced`] shape
    /// included).
    pub fn rounding(&self, ctx: &Context, dtype: DType, w: &QuantMatrix) -> OperandRounding {
        if self.on_tensor_cores(ctx, dtype, w) {
            return OperandRounding::TensorCores;
        }
        if self.matvec_shape(ctx, dtype, w).int8_x {
            return OperandRounding::Int8X;
        }
        OperandRounding::None
    }

    /// The matrix-vector kernel's launch shape for this product of `W` with `x` in `dtype`:
    /// [`MatvecShape::for_product`]'s (or the [`MatvecShape::forced`] one) for one row of `x`,
    /// [`MatvecShape::rows_for`]'s for up to [`MATVEC_MAX_M`]. SwiGLU and RoPE epilogues
    /// take rows of W in pairs within a workgroup.
    fn matvec_shape(&self, ctx: &Context, dtype: DType, w: &QuantMatrix) -> MatvecShape {
        if self.m == 1 {
            let paired = self.glu || self.rope;
            return MatvecShape::for_product(ctx, w.rows, w.cols / BLOCK, w.format, dtype, paired);
        }
        if self.m > MATVEC_MAX_M {
            // The tiled kernel takes no matrix-vector shape; one fixed variant of its defines.
            return MatvecShape::ROWS;
        }
        MatvecShape::rows_for(ctx)
    }

    /// Per-element error bounds against [`QMatmul::reference`] (`want` its result). A dot
    /// product of K terms in f32 is within γ_{K+2}·Σ|x|·|w| (Higham, Lemma 3.1; +2 for the
    /// block scale's product and the sum of block partials), where `w_magnitude` is the
    /// magnitude of each weight as the kernel forms it (|d·q| + |m| per element:
    /// [`weight_magnitudes`]), plus the ggml dequantization's own rounding of `d·q + m` (u per
    /// weight). A residual adds u·|y_old|; SwiGLU propagates the gate's error through silu
    /// (|silu′| ≤ 1.1) times |up|, the up's through |silu(gate)|, and 4u of rounding (exp, add,
    /// divide, multiply); the final rounding to the storage type is added last. `rounding`
    /// ([`QMatmul::rounding`]): on the tensor cores each term also carries the f16 rounding of
    /// its weight and of its normalized activation, 2u₁₆ (u₁₆ = 2⁻¹¹); with `x` rounded to 8
    /// bits each value of a block moves by at most d/2 (d = max|x| / 127 over the block, round
    /// to nearest; a few ulps more for d's own rounding), so a row gains Σ_blocks d/2·Σ|w|.
    #[allow(clippy::too_many_arguments)]
    pub fn error_bounds(
        &self,
        dtype: DType,
        rounding: OperandRounding,
        x: &[f32],
        w_magnitude: &[f32],
        n: usize,
        k: usize,
        y_old: &[f32],
        want: &[f32],
    ) -> Vec<f64> {
        let u = crate::check::U32;
        let f16_terms = if rounding == OperandRounding::TensorCores {
            2.0 * crate::check::U16
        } else {
            0.0
        };
        let g = crate::check::gamma(k + 2) + u + f16_terms;
        // With x rounded to 8 bits: how far each block's values may move.
        let x_moves: Vec<f64> = if rounding == OperandRounding::Int8X {
            x.chunks(BLOCK)
                .map(|b| {
                    let amax = b.iter().fold(0.0f64, |m, v| m.max(v.abs() as f64));
                    if amax > 1e-30 {
                        amax / 127.0 * (0.5 + 1e-5)
                    } else {
                        amax
                    }
                })
                .collect()
        } else {
            vec![]
        };
        let err: Vec<f64> = (0..self.m * n)
            .map(|o| {
                let (i, j) = (o / n, o % n);
                let mag: f64 = (0..k)
                    .map(|c| (x[i * k + c].abs() * w_magnitude[j * k + c]) as f64)
                    .sum();
                let moved: f64 = x_moves
                    .get(i * k / BLOCK..(i + 1) * k / BLOCK)
                    .unwrap_or(&[])
                    .iter()
                    .zip(w_magnitude[j * k..(j + 1) * k].chunks(BLOCK))
                    .map(|(d, ws)| d * ws.iter().map(|&v| v as f64).sum::<f64>())
                    .sum();
                g * (mag + moved) + moved
            })
            .collect();
        (0..want.len())
            .map(|o| {
                let e = if self.glu {
                    let (i, j) = (o / (n / 2), o % (n / 2));
                    let (ge, ue) = (err[i * n + 2 * j], err[i * n + 2 * j + 1]);
                    // |up| and |gate| are at most their magnitudes (the sums of |terms|).
                    let (up, gate) = (ue / g, ge / g);
                    1.1 * ge * (up + ue) + 1.1 * gate * ue + 4.0 * u * want[o].abs() as f64
                } else {
                    let old = if self.residual {
                        u * y_old[o].abs() as f64
                    } else {
                        0.0
                    };
                    err[o] + old
                };
                e + crate::check::storage_rounding(dtype, want[o] as f64)
            })
            .collect()
    }
}

/// |d·q| + |m| for every weight of ggml blocks (the magnitudes [`QMatmul::error_bounds`]
/// takes), in the dequantized order.
///
/// Errors: as [`crate::quant::dequantize`].
pub fn weight_magnitudes(format: QuantFormat, bytes: &[u8]) -> Result<Vec<f32>> {
    let w = crate::quant::dequantize(format, bytes)?;
    if format != QuantFormat::Q4_1 {
        return Ok(w.iter().map(|v| v.abs()).collect());
    }
    let bb = format.block_bytes();
    Ok(w.chunks(BLOCK)
        .zip(bytes.chunks(bb))
        .flat_map(|(ws, b)| {
            let m = half::f16::from_le_bytes([b[2], b[3]]).to_f32();
            ws.iter().map(move |v| (v - m).abs() + m.abs())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An adapter whose one-row products round `x` to 8 bits with 48 KiB of workgroup memory.
    const INT8: MatvecRule = MatvecRule {
        int8_storage: Some(49152),
        lane_rows: false,
        prompt_lane_rows: false,
    };

    /// A prompt of up to [`MATVEC_MAX_M`] tokens runs the matrix-vector kernel, a workgroup
    /// to [`MATVEC_ROWS`] rows of x: its kind is that kernel's over rows (`…_rows`) and its
    /// cost states those workgroups (before, a 16-token prompt's products were priced as the
    /// tiled kernel's kind, stating no units).
    #[test]
    fn short_prompts_are_matrix_vector_launches_of_their_rows() {
        let (n, k) = (576, 1536);
        let launch = |m: usize| {
            QMatmul::new(m).kind_and_cost(
                QuantFormat::Q4_1,
                n,
                k,
                DType::F32,
                MatvecRule::default(),
            )
        };
        let (one, decode) = launch(1);
        let (kind, cost) = launch(16);
        assert_eq!((one, kind), ("qmatvec", "qmatvec_rows"));
        let per_pass = MatvecShape::ROWS.workgroups(n);
        assert_eq!(cost.workgroups, (2 * per_pass) as f64);
        assert_eq!(
            cost.invocations,
            cost.workgroups * MatvecShape::ROWS.wg as f64
        );
        assert!(decode.workgroups > 0.0 && decode.invocations > 0.0);
        assert_eq!(launch(17).1.workgroups, (3 * per_pass) as f64);
        // Past 32 rows the tiled kernel: its own kind, priced by its whole tiles' FLOPs
        // (33 rows: two tiles of 32 rows over 9 of 64 columns of W), a workgroup a tile.
        let (kind, cost) = launch(MATVEC_MAX_M + 1);
        assert_eq!((kind, cost.workgroups), ("qmatmul", 18.0));
        let padded = cost.flops * 64.0 / 33.0;
        assert!((cost.tiled_flops - padded).abs() < 1e-6 * padded);
        assert_eq!(launch(128).1.tiled_flops, launch(128).1.flops);
        let fused = QMatmul {
            rms_norm: true,
            glu: true,
            ..QMatmul::new(16)
        };
        let (kind, _) = fused.kind_and_cost(QuantFormat::Q4_1, 2 * n, k, DType::F16, INT8);
        assert_eq!(kind, "rms_qmatvec_swiglu_rows");
        // Rounding x to 8 bits is a one-row launch's alone.
        let wide = QMatmul::new(16).kind_and_cost(QuantFormat::Q4_1, 2048, 8192, DType::F32, INT8);
        assert_eq!(wide.0, "qmatvec_rows");
        assert_eq!(QMatmul::new(1).kind(true), "qmatvec_int8");
        // Mesa's llvmpipe's short prompts: a row of W a lane, 16 lanes a workgroup; another
        // CPU driver's (SwiftShader) the GPU shape.
        let llvmpipe = MatvecRule {
            int8_storage: None,
            lane_rows: true,
            prompt_lane_rows: true,
        };
        let rows = |rule| QMatmul::new(16).kind_and_cost(QuantFormat::Q4_1, n, k, DType::F32, rule);
        let (kind, cost) = rows(llvmpipe);
        assert_eq!(kind, "qmatvec_rows");
        assert_eq!(cost.workgroups, (2 * n.div_ceil(16)) as f64);
        assert_eq!(cost.invocations, 16.0 * cost.workgroups);
        let swiftshader = MatvecRule {
            prompt_lane_rows: false,
            ..llvmpipe
        };
        assert_eq!(rows(swiftshader).1.workgroups, (2 * per_pass) as f64);
    }

    /// The rows loop takes one row of W a lane, on blocks, with x unrounded: other shapes are
    /// refused with several rows of x (one of them once ran and left outputs 0).
    #[test]
    fn rows_launches_take_one_row_of_w_a_lane() {
        assert!(MatvecShape::ROWS.runs_rows(true));
        assert!(MatvecShape::PROMPT_LANE_ROWS.runs_rows(true));
        assert!(MatvecShape::LANE_ROWS.runs(true) && !MatvecShape::LANE_ROWS.runs_rows(false));
        let words = MatvecShape {
            words: true,
            ..MatvecShape::ROWS
        };
        assert!(words.runs(false) && !words.runs_rows(false));
    }
}
