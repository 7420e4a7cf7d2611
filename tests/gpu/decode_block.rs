//! A decode step's fused attention block (`DecodeAttention`: norm, Q/K/V, RoPE, the cache
//! append, attention and the heads' partial O products in one dispatch) against its f64
//! reference, and the products that add the pending partial sums as they read the stream.

use ridge::core::{Context, DType, Error, Result, Tensor};
use ridge::kernels::check::{U32, gamma, storage_rounding};
use ridge::kernels::qmatmul::{self, MatvecShape, QMatmul};
use ridge::kernels::quant::{self, QuantFormat, QuantMatrix};
use ridge::kernels::{DecodeAttention, KvAttention, RopeTable};

use crate::harness::*;
use crate::quant::weights;

/// Whether `ctx` runs the block for (H, nh, nkv, dh) at `pos` (GL adapters with eight storage
/// buffers a stage take the unfused kernels).
fn fits(
    ctx: &Context,
    (hidden, heads, kv_heads, head_dim): (usize, usize, usize, usize),
    pos: usize,
) -> bool {
    DecodeAttention {
        hidden,
        heads,
        kv_heads,
        head_dim,
        pos,
    }
    .fits(ctx)
}

/// Σ |a|·|b| over a row: the magnitude a dot product's rounding is relative to.
fn abs_dot(a: &[f64], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x.abs() * y.abs() as f64).sum()
}

fn round_to(dtype: DType) -> impl Fn(f32) -> f32 {
    move |v| match dtype {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// One case: (H, nh, nkv, dh) at `pos`, W_qkv in `fq` and W_o in `fo`.
#[allow(clippy::too_many_arguments)]
fn block_case(
    ctx: &Context,
    (h, nh, nkv, dh): (usize, usize, usize, usize),
    pos: usize,
    fq: QuantFormat,
    fo: QuantFormat,
    dtype: DType,
    seed: u64,
) -> Result<()> {
    let op = DecodeAttention {
        hidden: h,
        heads: nh,
        kv_heads: nkv,
        head_dim: dh,
        pos,
    };
    let what = format!("{op:?} {fq}/{fo} {dtype}");
    let rows = (nh + 2 * nkv) * dh;
    let (qkv_bytes, o_bytes) = (
        weights(fq, rows, h, seed, 1.0),
        weights(fo, h, h, seed + 1, 1.0),
    );
    let w_qkv = QuantMatrix::upload(ctx, fq, rows, h, &qkv_bytes)?;
    let w_o = QuantMatrix::upload(ctx, fo, h, h, &o_bytes)?;
    let (wq, wo) = (
        quant::dequantize(fq, &qkv_bytes)?,
        quant::dequantize(fo, &o_bytes)?,
    );
    let (wq_mag, wo_mag) = (
        qmatmul::weight_magnitudes(fq, &qkv_bytes)?,
        qmatmul::weight_magnitudes(fo, &o_bytes)?,
    );
    // The stream's row, then its pending rows poisoned: the kernel writes them all.
    let mut stream = random(seed + 2, h, -2.0, 2.0);
    stream.extend(vec![f32::NAN; nh * h]);
    let (resid, sv) = upload(ctx, &stream, &[1 + nh, h], dtype)?;
    // γ keeps the scores moderate (|q·k|/√dh of a few units): peaked softmaxes are the
    // attention tests' trap, this one's the chain of products.
    let (g, gv) = upload(ctx, &random(seed + 3, h, 0.02, 0.12), &[h], dtype)?;
    // The cache: `pos` rows, then poison the kernel must not read (but row `pos`, written).
    let capacity = pos + 3;
    let cached = pos * nkv * dh;
    let mut kvals = random(seed + 4, cached, -1.0, 1.0);
    let mut vvals = random(seed + 5, cached, -1.0, 1.0);
    kvals.extend(vec![f32::NAN; (capacity - pos) * nkv * dh]);
    vvals.extend(vec![f32::NAN; (capacity - pos) * nkv * dh]);
    let (kc, kv) = upload(ctx, &kvals, &[capacity, nkv, dh], dtype)?;
    let (vc, vv) = upload(ctx, &vvals, &[capacity, nkv, dh], dtype)?;
    let base = 100_000.0;
    let table = RopeTable::new(ctx, capacity, dh, base)?;
    op.run(ctx, &resid, &g, 1e-5, &w_qkv, &w_o, &table, &kc, &vc)?;

    let want = op.reference(
        &sv[..h],
        &gv,
        1e-5,
        &wq,
        &wo,
        &kv,
        &vv,
        base,
        round_to(dtype),
    );
    let got = block(resid.to_f32(ctx))?;
    let at = pos * nkv * dh..(pos + 1) * nkv * dh;
    let (k_got, v_got) = (
        block(kc.to_f32(ctx))?[at.clone()].to_vec(),
        block(vc.to_f32(ctx))?[at].to_vec(),
    );
    if got[..h] != sv[..h] {
        return Err(Error::invalid(&what, "the stream's row 0 changed"));
    }
    // K and V rows: a product over H terms of the normalised row (γ_H relative, the norm's
    // inverse RMS a few u more), RoPE's 4u on rotated pairs, the storage rounding.
    let ms = sv[..h].iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / h as f64;
    let xn: Vec<f64> = (0..h)
        .map(|c| sv[c] as f64 / (ms + 1e-5).sqrt() * gv[c] as f64)
        .collect();
    let rel = gamma(h) + 8.0 * U32;
    let row_mag = |n: usize| abs_dot(&xn, &wq_mag[n * h..(n + 1) * h]);
    let kv_bound = |first: usize, i: usize, want: f32| {
        let (g, d) = (i / dh, i % dh);
        let n = first + g * dh + d;
        let pair = if first == nh * dh {
            row_mag(n) + row_mag(n ^ 1)
        } else {
            row_mag(n)
        };
        (rel + 4.0 * U32) * pair + storage_rounding(dtype, want as f64)
    };
    assert_close(&format!("K {what}"), &k_got, &want.k, |i| {
        kv_bound(nh * dh, i, want.k[i])
    })?;
    assert_close(&format!("V {what}"), &v_got, &want.v, |i| {
        kv_bound((nh + nkv) * dh, i, want.v[i])
    })?;
    // The partial products: each head's output o is a convex combination of V rows (|v| ≤
    // v_max) off by the attention's own bound plus what Q's and K's errors move the scores
    // (a score's error δs moves the output by ≤ 2·δs·v_max), then a dot over dh columns.
    let scale = 1.0 / (dh as f64).sqrt();
    let g_size = nh / nkv;
    let mut score_mag: f64 = 0.0;
    for head in 0..nh {
        let q = &want.q[head * dh..(head + 1) * dh];
        for j in 0..=pos {
            let k = &want.k_all[(j * nkv + head / g_size) * dh..][..dh];
            let m: f64 = q.iter().zip(k).map(|(a, b)| (a * b).abs() as f64).sum();
            score_mag = score_mag.max(m * scale);
        }
    }
    let v_max = want.v_all.iter().fold(0f64, |m, v| m.max(v.abs() as f64));
    let attention = KvAttention {
        tokens: 1,
        heads: nh,
        kv_heads: nkv,
        head_dim: dh,
        pos0: pos,
    };
    let o_err = attention.error_bound(DType::F32, false, v_max, score_mag, 0.0)
        + 4.0 * rel * score_mag * v_max;
    assert_close(&format!("parts {what}"), &got[h..], &want.parts, |i| {
        let (head, row) = (i / h, i % h);
        let w = &wo_mag[row * h + head * dh..][..dh];
        let w_sum: f64 = w.iter().map(|v| *v as f64).sum();
        w_sum * (o_err + gamma(dh) * v_max) + storage_rounding(dtype, want.parts[i] as f64)
    })
}

#[test]
fn decode_attention_block_matches_its_reference() {
    use ridge::kernels::decode_attention::{MAX_KEYS, SPAN};
    on_every_adapter("decode_attention", |ctx| {
        let mut seed = 700;
        let dtypes = dtypes(ctx);
        for (d, &dtype) in dtypes.iter().enumerate() {
            // SmolLM2-135M's heads (9 over 3 of 64, H = 576) at the first position, one
            // past a workgroup's keys and the last one pass takes; a group of 3 over one KV
            // head of 32 at positions inside a tile, on its edge and past it.
            let smol = (576, 9, 3, 64);
            let small = (96, 3, 1, 32);
            // Heads of 128 (Llama-3-8B's width; RoPE's pairs fill the workgroup's first 256
            // lanes), and a KV head per query head (G = 1).
            let wide = (256, 2, 1, 128);
            let ungrouped = (128, 2, 2, 64);
            // Heads of 96: 24 quads of dimensions do not divide the workgroup's 256 lanes.
            let uneven = (192, 2, 1, 96);
            for case in [
                (smol, 0, QuantFormat::Q4_1, QuantFormat::Q4_1),
                (smol, 257, QuantFormat::Q4_0, QuantFormat::Q8_0),
                (smol, 511, QuantFormat::Q8_0, QuantFormat::Q4_1),
                (small, 1, QuantFormat::Q4_1, QuantFormat::Q4_0),
                (small, 37, QuantFormat::Q8_0, QuantFormat::Q8_0),
                (small, 255, QuantFormat::Q4_0, QuantFormat::Q4_1),
                (small, 256, QuantFormat::Q4_1, QuantFormat::Q8_0),
                (wide, 3, QuantFormat::Q4_1, QuantFormat::Q4_0),
                (ungrouped, 70, QuantFormat::Q8_0, QuantFormat::Q4_1),
                (uneven, 511, QuantFormat::Q4_0, QuantFormat::Q8_0),
                // Longer contexts in spans of 256 and their merge: the last span one key,
                // a partial span, whole spans, five spans.
                (smol, 512, QuantFormat::Q4_0, QuantFormat::Q4_1),
                (small, 700, QuantFormat::Q8_0, QuantFormat::Q4_0),
                (wide, 767, QuantFormat::Q4_1, QuantFormat::Q8_0),
                (ungrouped, 1024, QuantFormat::Q4_0, QuantFormat::Q8_0),
                // The longest context: 512 spans, every weight slot of the merge.
                (
                    small,
                    MAX_KEYS * SPAN - 1,
                    QuantFormat::Q8_0,
                    QuantFormat::Q4_1,
                ),
            ]
            .into_iter()
            .enumerate()
            {
                seed += 10;
                // Shape and formats are compiled in: on a CPU driver each case of this
                // opt-in block runs in one dtype.
                let (case, (shape, pos, fq, fo)) = case;
                if !fits(ctx, shape, pos) || !in_turn(ctx, case, d, dtypes.len()) {
                    continue;
                }
                block_case(ctx, shape, pos, fq, fo, dtype, seed)?;
            }
        }
        Ok(())
    });
}

/// The products after the block add the pending rows as they read the stream: gate/up with
/// the RMSNorm and SwiGLU over x + Σ parts, down adding its product and the parts into the
/// stream's row. Bound: the product's own over the summed row (its parts summed in f32 as
/// read: (nh + 1)·u relative more), against the plain product's reference; for each way the
/// matrix-vector kernel reads x.
#[test]
fn products_add_the_pending_partial_sums() {
    on_every_adapter("qmatmul_pending", |ctx| {
        let (h, nh, ffn) = (96, 3, 64);
        let mut seed = 800;
        // The adapter's launch, lanes on quant words, and x rounded to 8 bits (the pending
        // rows summed before the rounding): each reads x by a path of its own.
        let shape = |wg, tpr, rpt, words, int8_x| {
            Some(MatvecShape {
                wg,
                tpr,
                rpt,
                words,
                int8_x,
            })
        };
        let shapes = [
            None,
            shape(256, 64, 2, true, false),
            shape(64, 16, 1, false, true),
        ];
        for (dtype, forced) in dtypes(ctx)
            .into_iter()
            .flat_map(|d| shapes.into_iter().map(move |f| (d, f)))
        {
            for format in QuantFormat::ALL {
                seed += 5;
                let stream_vals = random(seed, (1 + nh) * h, -1.0, 1.0);
                let (stream, sv) = upload(ctx, &stream_vals, &[1 + nh, h], dtype)?;
                let summed: Vec<f32> = (0..h)
                    .map(|c| (0..=nh).map(|r| sv[r * h + c] as f64).sum::<f64>() as f32)
                    .collect();
                // Gate/up: RMSNorm of the summed row, SwiGLU.
                let gu_bytes = weights(format, 2 * ffn, h, seed + 1, 1.0);
                let gu = QuantMatrix::upload(ctx, format, 2 * ffn, h, &gu_bytes)?;
                let (g, gv) = upload(ctx, &random(seed + 2, h, 0.5, 1.5), &[h], dtype)?;
                let act = poisoned(ctx, &[1, ffn], dtype)?;
                let op = QMatmul {
                    glu: true,
                    rms_norm: true,
                    ..QMatmul::new(1)
                };
                MatvecShape::forced(forced, || {
                    op.run_with_parts(ctx, &stream, Some((&g, 1e-5)), nh, &gu, &act)
                })?;
                let norm = ridge::kernels::Norm {
                    kind: ridge::kernels::NormKind::RmsNorm,
                    rows: 1,
                    cols: h,
                    eps: 1e-5,
                };
                let xn = norm.reference(&summed, Some(&gv), None);
                let plain = QMatmul {
                    rms_norm: false,
                    ..op
                };
                let wf = quant::dequantize(format, &gu_bytes)?;
                let mag = qmatmul::weight_magnitudes(format, &gu_bytes)?;
                let want = plain.reference(&xn, &wf, 2 * ffn, h, &[]);
                let rounding = MatvecShape::forced(forced, || op.rounding(ctx, dtype, &gu));
                let bounds = plain.error_bounds(dtype, rounding, &xn, &mag, 2 * ffn, h, &[], &want);
                let rel = 2.5 * (gamma(h) + (nh as f64 + 9.0) * U32);
                let got = block(act.to_f32(ctx))?;
                assert_close(
                    &format!("gate/up {format} {dtype} {forced:?}"),
                    &got,
                    &want,
                    |i| bounds[i] + rel * want[i].abs() as f64,
                )?;
                // Down: the stream's row 0 += the parts and the product.
                let (_, av) = upload(ctx, &got, &[1, ffn], dtype)?;
                let (a, _) = upload(ctx, &av, &[1, ffn], dtype)?;
                let d_bytes = weights(format, h, ffn, seed + 3, 1.0);
                let down = QuantMatrix::upload(ctx, format, h, ffn, &d_bytes)?;
                let op = QMatmul {
                    residual: true,
                    ..QMatmul::new(1)
                };
                MatvecShape::forced(forced, || {
                    op.run_with_parts(ctx, &a, None, nh, &down, &stream)
                })?;
                let wf = quant::dequantize(format, &d_bytes)?;
                let mag = qmatmul::weight_magnitudes(format, &d_bytes)?;
                let want = op.reference(&av, &wf, h, ffn, &summed);
                let rounding = MatvecShape::forced(forced, || op.rounding(ctx, dtype, &down));
                let bounds = op.error_bounds(dtype, rounding, &av, &mag, h, ffn, &summed, &want);
                let got = block(stream.to_f32(ctx))?;
                assert_close(
                    &format!("down {format} {dtype} {forced:?}"),
                    &got[..h],
                    &want,
                    |i| bounds[i] + (nh as f64 + 2.0) * U32 * want[i].abs() as f64,
                )?;
                if got[h..] != sv[h..] {
                    return Err(Error::invalid("down", "the pending rows changed"));
                }
            }
        }
        Ok(())
    });
}

/// What the block cannot run is a clear error: a context past its spans or the cache,
/// weights of the wrong shape, a stream without its pending rows.
#[test]
fn decode_attention_refuses_what_it_cannot_run() {
    on_every_adapter("decode_attention_errors", |ctx| {
        let (h, nh, nkv, dh) = (96, 3, 1, 32);
        if !fits(ctx, (h, nh, nkv, dh), 0) {
            return Ok(());
        }
        let f = QuantFormat::Q8_0;
        let w_qkv = QuantMatrix::upload(ctx, f, 5 * dh, h, &weights(f, 5 * dh, h, 1, 1.0))?;
        let w_o = QuantMatrix::upload(ctx, f, h, h, &weights(f, h, h, 2, 1.0))?;
        let g = Tensor::from_slice(ctx, &vec![1.0f32; h], &[h])?;
        let table = RopeTable::new(ctx, 600, dh, 10_000.0)?;
        let kc = Tensor::empty(ctx, &[600, nkv, dh], DType::F32)?;
        let vc = Tensor::empty(ctx, &[600, nkv, dh], DType::F32)?;
        let stream = Tensor::empty(ctx, &[1 + nh, h], DType::F32)?;
        let op = |pos| DecodeAttention {
            hidden: h,
            heads: nh,
            kv_heads: nkv,
            head_dim: dh,
            pos,
        };
        let shape = |e: &Error| matches!(e, Error::Shape { .. });
        expect_err(
            "past the cache",
            op(600).run(ctx, &stream, &g, 1e-5, &w_qkv, &w_o, &table, &kc, &vc),
            shape,
        )?;
        // Past its spans with a cache and table that hold the position: refused by the span
        // limit alone.
        use ridge::kernels::decode_attention::{MAX_KEYS, SPAN};
        let long = MAX_KEYS * SPAN + 1;
        let long_table = RopeTable::new(ctx, long, dh, 10_000.0)?;
        let long_k = Tensor::empty(ctx, &[long, nkv, dh], DType::F32)?;
        let long_v = Tensor::empty(ctx, &[long, nkv, dh], DType::F32)?;
        expect_err(
            "past its spans",
            op(long - 1).run(
                ctx,
                &stream,
                &g,
                1e-5,
                &w_qkv,
                &w_o,
                &long_table,
                &long_k,
                &long_v,
            ),
            shape,
        )?;
        expect_err(
            "W_o for W_qkv",
            op(3).run(ctx, &stream, &g, 1e-5, &w_o, &w_o, &table, &kc, &vc),
            shape,
        )?;
        let row = stream.narrow(0, 1)?;
        expect_err(
            "no pending rows",
            op(3).run(ctx, &row, &g, 1e-5, &w_qkv, &w_o, &table, &kc, &vc),
            shape,
        )?;
        expect_err(
            "NaN eps",
            op(3).run(ctx, &stream, &g, f32::NAN, &w_qkv, &w_o, &table, &kc, &vc),
            |e| matches!(e, Error::InvalidArgument { .. }),
        )
    });
}
