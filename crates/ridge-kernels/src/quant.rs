//! Block-quantized weights (ggml's Q8_0, Q4_0 and Q4_1): the formats, their CPU
//! dequantizers (exactly as ggml's `dequantize_row_*`), reference quantizers (ggml's
//! `quantize_row_*_ref`, for tests and random-weight files), and the packed layout the
//! kernels read on the GPU.
//!
//! Every format stores blocks of 32 weights along a row (ggml's `QK8_0 = QK4_0 = QK4_1 =
//! 32`) with an f16 scale `d` (and, for Q4_1, an f16 minimum `m`):
//!
//! | format | block bytes (ggml) | weight |
//! |---|---|---|
//! | Q8_0 | 2 + 32 (i8 `q`) | `d·q` |
//! | Q4_0 | 2 + 16 (4-bit `q`, two per byte) | `d·(q − 8)` |
//! | Q4_1 | 2 + 2 + 16 | `d·q + m` |
//!
//! In a 4-bit block, byte `j` holds weight `j` in its low nibble and weight `j + 16` in its
//! high nibble (ggml's `block_q4_0`).
//!
//! On the GPU a matrix of `rows × cols` weights is two u32 arrays ([`Packed`]): the quants,
//! row-major, each block's bytes as ggml orders them (8 words a Q8_0 block, 4 a Q4 block),
//! and the scales: for Q8_0 and Q4_0 two blocks' `d` per word (block `b` in half `b % 2` of
//! word `b / 2`, counting blocks row-major), for Q4_1 one word per block holding `d` (low
//! half) and `m` (high half). Splitting the quants from the 2-byte scales keeps every load
//! aligned (a Q8_0 block of 34 bytes is not) at the same byte count as the GGUF file.

use half::f16;
use ridge_core::{Context, DType, Error, Result, Tensor};

/// Weights per block, every format.
pub const BLOCK: usize = 32;

/// A block-quantized weight format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QuantFormat {
    /// 8-bit weights, one f16 scale per block of 32.
    Q8_0,
    /// 4-bit weights around 8, one f16 scale per block of 32.
    Q4_0,
    /// 4-bit weights, an f16 scale and an f16 minimum per block of 32.
    Q4_1,
}

impl QuantFormat {
    /// Every format, in ggml's type-id order.
    pub const ALL: [QuantFormat; 3] = [QuantFormat::Q4_0, QuantFormat::Q4_1, QuantFormat::Q8_0];

    /// ggml's name.
    pub fn name(self) -> &'static str {
        match self {
            QuantFormat::Q8_0 => "Q8_0",
            QuantFormat::Q4_0 => "Q4_0",
            QuantFormat::Q4_1 => "Q4_1",
        }
    }

    /// The format named `name` (ggml's spelling), if Ridge runs it.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Bytes per block in ggml's layout (and on the GPU).
    pub fn block_bytes(self) -> usize {
        match self {
            QuantFormat::Q8_0 => 34,
            QuantFormat::Q4_0 => 18,
            QuantFormat::Q4_1 => 20,
        }
    }

    /// u32 words of quants per block on the GPU.
    pub fn quant_words(self) -> usize {
        match self {
            QuantFormat::Q8_0 => 8,
            QuantFormat::Q4_0 | QuantFormat::Q4_1 => 4,
        }
    }

    /// The index the shaders use (`FORMAT`).
    pub(crate) fn shader_id(self) -> u32 {
        match self {
            QuantFormat::Q8_0 => 0,
            QuantFormat::Q4_0 => 1,
            QuantFormat::Q4_1 => 2,
        }
    }

    /// Bytes of a `rows × cols` matrix in this format.
    pub fn matrix_bytes(self, rows: usize, cols: usize) -> usize {
        rows * cols / BLOCK * self.block_bytes()
    }
}

impl std::fmt::Display for QuantFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn half_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// Dequantizes ggml blocks (`bytes`, a whole number of blocks) to f32 exactly as ggml's
/// `dequantize_row_q8_0`, `_q4_0` and `_q4_1` do (f32 arithmetic: `q·d`, `(q − 8)·d`,
/// `q·d + m`).
///
/// Errors: [`Error::Shape`] when `bytes` is not a whole number of blocks.
pub fn dequantize(format: QuantFormat, bytes: &[u8]) -> Result<Vec<f32>> {
    let bb = format.block_bytes();
    if !bytes.len().is_multiple_of(bb) {
        return Err(Error::shape(
            "dequantize",
            format!(
                "{} bytes are not whole {format} blocks of {bb}",
                bytes.len()
            ),
        ));
    }
    let mut out = vec![0f32; bytes.len() / bb * BLOCK];
    for (block, y) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(BLOCK)) {
        let d = half_at(block, 0);
        match format {
            QuantFormat::Q8_0 => {
                for (j, &q) in block[2..].iter().enumerate() {
                    y[j] = (q as i8) as f32 * d;
                }
            }
            QuantFormat::Q4_0 => {
                for (j, &q) in block[2..].iter().enumerate() {
                    y[j] = ((q & 0x0F) as i32 - 8) as f32 * d;
                    y[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
                }
            }
            QuantFormat::Q4_1 => {
                let m = half_at(block, 2);
                for (j, &q) in block[4..].iter().enumerate() {
                    y[j] = (q & 0x0F) as f32 * d + m;
                    y[j + 16] = (q >> 4) as f32 * d + m;
                }
            }
        }
    }
    Ok(out)
}

/// Quantizes `values` (a whole number of blocks) as ggml's reference quantizers
/// (`quantize_row_q8_0_ref`, `_q4_0_ref`, `_q4_1_ref`) do; for tests and random-weight
/// model files.
///
/// Errors: [`Error::Shape`] when `values.len()` is not a multiple of 32.
pub fn quantize(format: QuantFormat, values: &[f32]) -> Result<Vec<u8>> {
    if !values.len().is_multiple_of(BLOCK) {
        return Err(Error::shape(
            "quantize",
            format!("{} values are not whole blocks of {BLOCK}", values.len()),
        ));
    }
    let mut out = Vec::with_capacity(values.len() / BLOCK * format.block_bytes());
    for x in values.chunks_exact(BLOCK) {
        match format {
            QuantFormat::Q8_0 => {
                let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend(x.iter().map(|v| (v * id).round() as i8 as u8));
            }
            QuantFormat::Q4_0 => {
                // The value of largest magnitude, with its sign, maps to −8.
                let max = x
                    .iter()
                    .fold(0f32, |a, &v| if v.abs() > a.abs() { v } else { a });
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                let q = |v: f32| ((v * id + 8.5) as i8).min(15) as u8;
                out.extend((0..16).map(|j| q(x[j]) | (q(x[j + 16]) << 4)));
            }
            QuantFormat::Q4_1 => {
                let min = x.iter().copied().fold(f32::INFINITY, f32::min);
                let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let d = (max - min) / 15.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
                let q = |v: f32| (((v - min) * id + 0.5) as i8).min(15) as u8;
                out.extend((0..16).map(|j| q(x[j]) | (q(x[j + 16]) << 4)));
            }
        }
    }
    Ok(out)
}

/// A matrix in the GPU layout (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    /// Quant words, row-major by block.
    pub quants: Vec<u32>,
    /// Scale words.
    pub scales: Vec<u32>,
}

/// Repacks ggml blocks into the GPU layout.
///
/// Errors: [`Error::Shape`] when `bytes` is not a whole number of blocks.
pub fn pack(format: QuantFormat, bytes: &[u8]) -> Result<Packed> {
    let bb = format.block_bytes();
    if !bytes.len().is_multiple_of(bb) {
        return Err(Error::shape(
            "pack",
            format!(
                "{} bytes are not whole {format} blocks of {bb}",
                bytes.len()
            ),
        ));
    }
    let blocks = bytes.len() / bb;
    let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let head = if format == QuantFormat::Q4_1 { 4 } else { 2 };
    let mut quants = Vec::with_capacity(blocks * format.quant_words());
    for block in bytes.chunks_exact(bb) {
        quants.extend(block[head..].chunks_exact(4).map(word));
    }
    let scales = match format {
        QuantFormat::Q4_1 => bytes.chunks_exact(bb).map(word).collect(),
        _ => {
            let d = |i: usize| u16::from_le_bytes([bytes[i * bb], bytes[i * bb + 1]]) as u32;
            (0..blocks.div_ceil(2))
                .map(|w| {
                    let hi = if 2 * w + 1 < blocks { d(2 * w + 1) } else { 0 };
                    d(2 * w) | (hi << 16)
                })
                .collect()
        }
    };
    Ok(Packed { quants, scales })
}

/// A `rows × cols` block-quantized matrix on the GPU (the weight `W` of `y = x·Wᵀ`).
#[derive(Clone, Debug)]
pub struct QuantMatrix {
    /// Its format.
    pub format: QuantFormat,
    /// Rows (`N`, output features).
    pub rows: usize,
    /// Columns (`K`, input features), a multiple of 32.
    pub cols: usize,
    /// Quant words (u32).
    pub quants: Tensor,
    /// Scale words (u32).
    pub scales: Tensor,
    /// Whether every dequantized weight lies within f16's range (|w| ≤ 65504): only then may
    /// a product round them to f16 for the tensor cores ([`crate::qmatmul::QMatmul::on_tensor_cores`]).
    pub fits_f16: bool,
}

impl QuantMatrix {
    /// Uploads a `rows × cols` matrix given as ggml blocks, row-major.
    ///
    /// Errors: [`Error::Shape`] when `cols` is not a multiple of 32 or `bytes` is not
    /// `rows·cols/32` blocks; [`Error::LimitExceeded`] naming `maxStorageBufferBindingSize`
    /// (or `maxBufferSize`) when the packed quants exceed what the adapter can bind.
    pub fn upload(
        ctx: &Context,
        format: QuantFormat,
        rows: usize,
        cols: usize,
        bytes: &[u8],
    ) -> Result<Self> {
        if !cols.is_multiple_of(BLOCK) || rows == 0 || cols == 0 {
            return Err(Error::shape(
                "quantized matrix",
                format!(
                    "{rows} × {cols}: rows must be positive and columns a positive multiple of \
                     {BLOCK}"
                ),
            ));
        }
        let want = rows
            .checked_mul(cols)
            .map(|n| n / BLOCK * format.block_bytes());
        if want != Some(bytes.len()) {
            return Err(Error::shape(
                "quantized matrix",
                format!(
                    "{} bytes for {rows} × {cols} {format} weights (want {})",
                    bytes.len(),
                    want.map_or("an overflowing count".into(), |w| w.to_string())
                ),
            ));
        }
        // A weight larger than one storage binding cannot be bound at all: say so at load,
        // naming the limit, rather than at the first product.
        ctx.check_binding(
            &format!("a {rows} × {cols} {format} weight"),
            (rows * cols / BLOCK * format.quant_words() * 4) as u64,
        )?;
        let fits_f16 = max_weight(format, bytes) <= 65504.0;
        let packed = pack(format, bytes)?;
        let q = packed.quants.len();
        let s = packed.scales.len();
        Ok(Self {
            format,
            rows,
            cols,
            quants: Tensor::from_slice(ctx, &packed.quants, &[q])?,
            scales: Tensor::from_slice(ctx, &packed.scales, &[s])?,
            fits_f16,
        })
    }

    /// Bytes of the packed weights on the GPU (as in the GGUF file).
    pub fn bytes(&self) -> u64 {
        self.format.matrix_bytes(self.rows, self.cols) as u64
    }

    /// Blocks per row.
    pub fn blocks_per_row(&self) -> usize {
        self.cols / BLOCK
    }

    /// Errors unless the storage type of activations used with it is a float.
    pub(crate) fn check(&self, op: &str) -> Result<()> {
        self.quants.expect_dtype(op, DType::U32)?;
        self.scales.expect_dtype(op, DType::U32)
    }
}

/// The largest magnitude a dequantized weight of these whole ggml blocks can take, from the
/// blocks' scales: 128·|d| (Q8_0: q ∈ [−128, 127]), 8·|d| (Q4_0: q − 8 ∈ [−8, 7]),
/// max(|m|, |15·d + m|) (Q4_1: d·q + m is linear in q ∈ [0, 15]); NaN if a scale is NaN.
pub fn max_weight(format: QuantFormat, bytes: &[u8]) -> f32 {
    let mut max = 0.0f32;
    for b in bytes.chunks_exact(format.block_bytes()) {
        let d = half_at(b, 0);
        let v = match format {
            QuantFormat::Q8_0 => 128.0 * d.abs(),
            QuantFormat::Q4_0 => 8.0 * d.abs(),
            QuantFormat::Q4_1 => {
                let m = half_at(b, 2);
                // f32::max ignores a NaN operand: carry it through by hand.
                if m.is_nan() {
                    return f32::NAN;
                }
                m.abs().max((15.0 * d + m).abs())
            }
        };
        if d.is_nan() || v.is_nan() {
            return f32::NAN;
        }
        max = max.max(v);
    }
    max
}

/// Reorders the rows of two equally shaped ggml matrices so that row `2i` is `a`'s row `i`
/// and row `2i + 1` is `b`'s: the layout of a gated product (`gate` and `up` as one matrix,
/// SwiGLU in the epilogue; see [`crate::qmatmul::QMatmul::glu`]).
///
/// Errors: [`Error::Shape`] when they differ in size or are not whole rows of `row_bytes`.
pub fn interleave_rows(a: &[u8], b: &[u8], row_bytes: usize) -> Result<Vec<u8>> {
    if a.len() != b.len() || row_bytes == 0 || !a.len().is_multiple_of(row_bytes) {
        return Err(Error::shape(
            "interleave_rows",
            format!(
                "{} and {} bytes are not equal whole rows of {row_bytes}",
                a.len(),
                b.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(2 * a.len());
    for (ra, rb) in a.chunks_exact(row_bytes).zip(b.chunks_exact(row_bytes)) {
        out.extend_from_slice(ra);
        out.extend_from_slice(rb);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dequantizes_as_ggml() {
        // Q8_0: d = 0.5, q = −128, −1, 0, 1, 127, …
        let mut b = f16::from_f32(0.5).to_le_bytes().to_vec();
        b.extend([128u8, 255, 0, 1, 127]);
        b.resize(34, 2);
        let y = dequantize(QuantFormat::Q8_0, &b).unwrap();
        assert_eq!(&y[..6], &[-64.0, -0.5, 0.0, 0.5, 63.5, 1.0]);
        // Q4_0: byte 0x9F holds q = 15 (weight 0) and q = 9 (weight 16).
        let mut b = f16::from_f32(2.0).to_le_bytes().to_vec();
        b.push(0x9F);
        b.resize(18, 0x88);
        let y = dequantize(QuantFormat::Q4_0, &b).unwrap();
        assert_eq!((y[0], y[16], y[1]), (14.0, 2.0, 0.0));
        // Q4_1: d = 0.25, m = −1.
        let mut b = f16::from_f32(0.25).to_le_bytes().to_vec();
        b.extend(f16::from_f32(-1.0).to_le_bytes());
        b.push(0x40);
        b.resize(20, 0);
        let y = dequantize(QuantFormat::Q4_1, &b).unwrap();
        assert_eq!((y[0], y[16], y[1]), (-1.0, 0.0, -1.0));
        assert!(dequantize(QuantFormat::Q4_1, &b[..19]).is_err());
    }

    #[test]
    fn quantize_then_dequantize_stays_within_half_a_step() {
        let x: Vec<f32> = (0..256)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
            .collect();
        for f in QuantFormat::ALL {
            let bytes = quantize(f, &x).unwrap();
            assert_eq!(bytes.len(), x.len() / BLOCK * f.block_bytes());
            let y = dequantize(f, &bytes).unwrap();
            for (block, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
                let range = xs.iter().fold(0f32, |a, v| a.max(v.abs()));
                let step = match f {
                    QuantFormat::Q8_0 => range / 127.0,
                    QuantFormat::Q4_0 => range / 8.0,
                    QuantFormat::Q4_1 => 2.0 * range / 15.0,
                };
                for (a, b) in xs.iter().zip(ys) {
                    // Half a step, plus the f16 rounding of d (and m) times the largest q.
                    // Q4_0 maps the value of largest magnitude to −8, so the other side ends
                    // at +7: its extreme is clipped by up to a whole step (as in ggml).
                    let steps = if f == QuantFormat::Q4_0 { 1.0 } else { 0.5 };
                    let slack = steps * step + 16.0 * 1e-3 * range;
                    assert!((a - b).abs() <= slack, "{f} block {block}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn packing_keeps_every_byte() {
        for f in QuantFormat::ALL {
            let x: Vec<f32> = (0..96).map(|i| (i as f32 * 0.37).sin()).collect();
            let bytes = quantize(f, &x).unwrap();
            let p = pack(f, &bytes).unwrap();
            assert_eq!(p.quants.len(), 3 * f.quant_words());
            let scale_bytes = match f {
                QuantFormat::Q4_1 => 4 * 3,
                _ => 2 * 4, // three halves rounded up to two words
            };
            assert_eq!(p.scales.len() * 4, scale_bytes);
            let head = if f == QuantFormat::Q4_1 { 4 } else { 2 };
            let first_quant = u32::from_le_bytes(bytes[head..head + 4].try_into().unwrap());
            assert_eq!(p.quants[0], first_quant);
            assert_eq!(
                p.scales[0] & 0xFFFF,
                u16::from_le_bytes([bytes[0], bytes[1]]) as u32
            );
        }
    }

    #[test]
    fn interleaves_rows() {
        let a = [1u8, 1, 2, 2];
        let b = [3u8, 3, 4, 4];
        assert_eq!(
            interleave_rows(&a, &b, 2).unwrap(),
            vec![1, 1, 3, 3, 2, 2, 4, 4]
        );
        assert!(interleave_rows(&a, &b[..2], 2).is_err());
    }
}
