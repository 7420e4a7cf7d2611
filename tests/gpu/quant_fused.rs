//! The quantized products' fused prologue and epilogue against the unfused ops: the RMSNorm
//! taken in the product's prologue, RoPE and the KV-cache append in the Q/K/V product's
//! epilogue.

use ridge::core::Error;
use ridge::kernels::qmatmul::{self, MATVEC_MAX_M, MATVEC_ROWS, MatvecShape, QMatmul};
use ridge::kernels::quant::{self, QuantFormat, QuantMatrix};

use crate::harness::*;
use crate::quant::weights;

/// The RMSNorm prologue: `RMSNorm(x)·γ·Wᵀ` in one dispatch against the norm's reference
/// followed by the product's. Bound: the product's on the normalised rows, plus the prologue's
/// own error, relative: its inverse RMS comes from an f32 sum of K squares (γ_K) and a
/// square root (a few u), which scales every term of a row alike.
#[test]
fn rms_norm_prologue_matches_norm_then_product() {
    use ridge::kernels::{Norm, NormKind};
    on_every_adapter("qmatmul_rms_norm", |ctx| {
        let mut seed = 300;
        for dtype in dtypes(ctx) {
            for format in QuantFormat::ALL {
                // K: 3 blocks, and 35 (some of the matrix-vector kernel's lanes sum x² over
                // three blocks, the others over two).
                // Launch shapes of the matrix-vector kernel (wg/tpr/rpt) other than the one
                // Ridge picks for the shape: each sums x² over a different split of K.
                let launch = |wg, tpr, rpt| {
                    Some(MatvecShape {
                        wg,
                        tpr,
                        rpt,
                        words: rpt > 1,
                        int8_x: false,
                    })
                };
                // x rounded to 8 bits after γ, its Σ x² taken before.
                let int8 = |wg, tpr, rpt| {
                    Some(MatvecShape {
                        wg,
                        tpr,
                        rpt,
                        words: false,
                        int8_x: true,
                    })
                };
                for (m, glu, k, n, forced) in [
                    (1, false, 96, 75, None),
                    (1, true, 1120, 134, None),
                    (1, false, 1120, 75, launch(256, 256, 4)),
                    (1, true, 1120, 134, launch(256, 64, 2)),
                    (1, false, 96, 75, launch(128, 32, 1)),
                    (1, false, 1120, 75, int8(256, 64, 4)),
                    (1, true, 96, 134, int8(64, 16, 1)),
                    (3, true, 96, 134, None),
                    (MATVEC_ROWS + 1, false, 1120, 75, None),
                    (40, true, 96, 134, None),
                    (70, false, 96, 75, None),
                    // Enough 64-row tiles for the tiled kernel's tall tile.
                    (131, true, 96, 2 * 43 * 64 + 2, None),
                ] {
                    seed += 1;
                    let bytes = weights(format, n, k, seed, 20.0);
                    let w = QuantMatrix::upload(ctx, format, n, k, &bytes)?;
                    let wf = quant::dequantize(format, &bytes)?;
                    let mag = qmatmul::weight_magnitudes(format, &bytes)?;
                    // Rows of different scales, one with a large mean: the RMS must not care.
                    let mut xs = random(seed + 1, m * k, -2.0, 2.0);
                    for (r, row) in xs.chunks_mut(k).enumerate() {
                        let s = [1.0, 30.0, 0.01][r % 3];
                        row.iter_mut()
                            .for_each(|v| *v = *v * s + if r % 4 == 1 { 5.0 * s } else { 0.0 });
                    }
                    let (x, xv) = upload(ctx, &xs, &[m, k], dtype)?;
                    let (g, gv) = upload(ctx, &random(seed + 2, k, 0.5, 1.5), &[k], dtype)?;
                    let op = QMatmul {
                        glu,
                        rms_norm: true,
                        ..QMatmul::new(m)
                    };
                    let cols = op.out_cols(n);
                    let y = poisoned(ctx, &[m, cols], dtype)?;
                    MatvecShape::forced(forced, || op.run_with_norm(ctx, &x, &g, 1e-5, &w, &y))?;
                    let got = block(y.to_f32(ctx))?;
                    let norm = Norm {
                        kind: NormKind::RmsNorm,
                        rows: m,
                        cols: k,
                        eps: 1e-5,
                    };
                    let xn = norm.reference(&xv, Some(&gv), None);
                    let plain = QMatmul {
                        rms_norm: false,
                        ..op
                    };
                    let want = plain.reference(&xn, &wf, n, k, &[]);
                    let rounding = MatvecShape::forced(forced, || op.rounding(ctx, dtype, &w));
                    let bounds = plain.error_bounds(dtype, rounding, &xn, &mag, n, k, &[], &want);
                    let eps = ridge::kernels::check::gamma(k) + 8.0 * ridge::kernels::check::U32;
                    // Gated outputs are products of two scaled dots: twice the relative error.
                    let rel = if glu { 2.5 * eps } else { eps };
                    assert_close(op.name(), &got, &want, |i| {
                        bounds[i] + rel * want[i].abs() as f64
                    })
                    .map_err(|e| {
                        Error::invalid(
                            "rms prologue",
                            format!("{format} m={m} glu={glu} {dtype} {forced:?}: {e}"),
                        )
                    })?;
                }
            }
        }
        Ok(())
    });
}

/// The RoPE + KV-append epilogue of a Q/K/V product against the product's reference followed
/// by RoPE's: q, and the cache rows it appends (the rest of the caches stays untouched).
#[test]
fn qkv_product_with_rope_in_its_epilogue() {
    use ridge::kernels::qmatmul::RopeAppend;
    use ridge::kernels::{PairLayout, RopeQkv, RopeTable};
    on_every_adapter("qmatmul_rope", |ctx| {
        let mut seed = 500;
        for dtype in dtypes(ctx) {
            for format in QuantFormat::ALL {
                // SmolLM2's heads (9 over 3 of 64) at decode (also with x rounded to 8 bits)
                // and in a prefill past the matrix-vector kernel; a small odd layout (3 over 1
                // of 8).
                let int8 = Some(MatvecShape {
                    wg: 64,
                    tpr: 16,
                    rpt: 1,
                    words: false,
                    int8_x: true,
                });
                for (m, nh, nkv, dh, pos0, norm, forced) in [
                    (1, 9, 3, 64, 37, true, None),
                    (1, 9, 3, 64, 37, true, int8),
                    (5, 3, 1, 8, 0, false, None),
                    (MATVEC_MAX_M + 3, 9, 3, 64, 4, true, None),
                ] {
                    seed += 1;
                    let k = 96;
                    let n = (nh + 2 * nkv) * dh;
                    let bytes = weights(format, n, k, seed, 20.0);
                    let w = QuantMatrix::upload(ctx, format, n, k, &bytes)?;
                    let wf = quant::dequantize(format, &bytes)?;
                    let mag = qmatmul::weight_magnitudes(format, &bytes)?;
                    let (x, xv) = upload(ctx, &random(seed + 1, m * k, -1.0, 1.0), &[m, k], dtype)?;
                    let (g, gv) = upload(ctx, &vec![1.0; k], &[k], dtype)?;
                    let capacity = pos0 + m + 2;
                    let table = RopeTable::new(ctx, capacity, dh, 10_000.0)?;
                    let q = poisoned(ctx, &[m, nh, dh], dtype)?;
                    let kc = poisoned(ctx, &[capacity, nkv, dh], dtype)?;
                    let vc = poisoned(ctx, &[capacity, nkv, dh], dtype)?;
                    let op = QMatmul {
                        rms_norm: norm,
                        rope: true,
                        ..QMatmul::new(m)
                    };
                    let append = RopeAppend {
                        table: &table,
                        k_cache: &kc,
                        v_cache: &vc,
                        heads: nh,
                        kv_heads: nkv,
                        pos0,
                    };
                    MatvecShape::forced(forced, || {
                        op.run_fused(ctx, &x, norm.then_some((&g, 1e-5)), Some(&append), &w, &q)
                    })?;
                    // The reference: (norm), the product, then RoPE on adjacent pairs.
                    let xn = if norm {
                        ridge::kernels::Norm {
                            kind: ridge::kernels::NormKind::RmsNorm,
                            rows: m,
                            cols: k,
                            eps: 1e-5,
                        }
                        .reference(&xv, Some(&gv), None)
                    } else {
                        xv.clone()
                    };
                    let plain = QMatmul::new(m);
                    let qkv = plain.reference(&xn, &wf, n, k, &[]);
                    let rounding = MatvecShape::forced(forced, || op.rounding(ctx, dtype, &w));
                    let bounds = plain.error_bounds(dtype, rounding, &xn, &mag, n, k, &[], &qkv);
                    let rope = RopeQkv {
                        tokens: m,
                        heads: nh,
                        kv_heads: nkv,
                        head_dim: dh,
                        pos0,
                        layout: PairLayout::Adjacent,
                    };
                    let (wq, wk, wv) = rope.reference(&qkv, 10_000.0);
                    // Each output mixes a pair of products: their bounds, rotated, plus RoPE's own.
                    let heads = nh + 2 * nkv;
                    let pair = |t: usize, h: usize, d: usize| {
                        let i = (t * heads + h) * dh + d - d % 2;
                        bounds[i] + bounds[i + 1]
                    };
                    let rel = if norm {
                        ridge::kernels::check::gamma(k) + 8.0 * ridge::kernels::check::U32
                    } else {
                        0.0
                    };
                    let check = |what: &str, got: &[f32], want: &[f32], head0: usize, hn: usize| {
                        assert_close(&format!("{what} {format} m={m} {dtype}"), got, want, |i| {
                            let (t, h, d) = (i / (hn * dh), (i / dh) % hn, i % dh);
                            pair(t, head0 + h, d)
                                + rel * 2.0 * want[i].abs() as f64
                                + RopeQkv::error_bound(
                                    dtype,
                                    qkv[(t * heads + head0 + h) * dh + d - d % 2],
                                    qkv[(t * heads + head0 + h) * dh + d - d % 2 + 1],
                                    want[i],
                                )
                        })
                    };
                    let rows = pos0 * nkv * dh..(pos0 + m) * nkv * dh;
                    check("q", &block(q.to_f32(ctx))?, &wq, 0, nh)?;
                    let kall = block(kc.to_f32(ctx))?;
                    check("k", &kall[rows.clone()], &wk, nh, nkv)?;
                    check(
                        "v",
                        &block(vc.to_f32(ctx))?[rows.clone()],
                        &wv,
                        nh + nkv,
                        nkv,
                    )?;
                    if kall[..rows.start]
                        .iter()
                        .chain(&kall[rows.end..])
                        .any(|v| !v.is_nan())
                    {
                        return Err(Error::invalid(
                            "rope epilogue",
                            "wrote cache rows outside its positions",
                        ));
                    }
                }
            }
        }
        Ok(())
    });
}
