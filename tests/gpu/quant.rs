//! Products with block-quantized weights (Q8_0, Q4_0, Q4_1) and quantized row lookup against
//! the f64 reference on ggml's dequantized weights.

use ridge::core::{Context, DType, Error, Result, Tensor};
use ridge::kernels::qmatmul::{self, MATVEC_MAX_M, MATVEC_ROWS, MatvecShape, QMatmul};
use ridge::kernels::quant::{self, QuantFormat, QuantMatrix};

use crate::harness::*;

/// Random ggml blocks for an `n × k` matrix: values quantized by ggml's reference quantizer,
/// with rows of very different scales (a row ×`big`, one ×0.001) and one row of a constant
/// (every Q4_1 weight its minimum, d = 0).
pub(crate) fn weights(format: QuantFormat, n: usize, k: usize, seed: u64, big: f32) -> Vec<u8> {
    let mut v = random(seed, n * k, -1.0, 1.0);
    for (r, row) in v.chunks_mut(k).enumerate() {
        let s = match r % 7 {
            3 => big,
            5 => 0.001,
            _ => 1.0,
        };
        row.iter_mut().for_each(|x| *x *= s);
        if r % 11 == 10 {
            row.iter_mut().for_each(|x| *x = 0.75);
        }
    }
    quant::quantize(format, &v).expect("whole blocks")
}

#[allow(clippy::too_many_arguments)]
fn check(
    ctx: &Context,
    format: QuantFormat,
    op: QMatmul,
    n: usize,
    k: usize,
    dtype: DType,
    seed: u64,
) -> Result<()> {
    // f16 outputs stop at 65504: gated products of ×1000 rows would overflow.
    let big = if dtype == DType::F16 { 20.0 } else { 1000.0 };
    let bytes = weights(format, n, k, seed, big);
    let w = QuantMatrix::upload(ctx, format, n, k, &bytes)?;
    let wf = quant::dequantize(format, &bytes)?;
    let mag = qmatmul::weight_magnitudes(format, &bytes)?;
    let (x, xv) = upload(
        ctx,
        &random(seed + 1, op.m * k, -2.0, 2.0),
        &[op.m, k],
        dtype,
    )?;
    let cols = op.out_cols(n);
    let (y, y_old) = if op.residual {
        upload(
            ctx,
            &random(seed + 2, op.m * cols, -3.0, 3.0),
            &[op.m, cols],
            dtype,
        )?
    } else {
        (poisoned(ctx, &[op.m, cols], dtype)?, vec![])
    };
    op.run(ctx, &x, &w, &y)?;
    let got = block(y.to_f32(ctx))?;
    let want = op.reference(&xv, &wf, n, k, &y_old);
    let bounds = op.error_bounds(
        dtype,
        op.rounding(ctx, dtype, &w),
        &xv,
        &mag,
        n,
        k,
        &y_old,
        &want,
    );
    assert_close(op.name(), &got, &want, |i| bounds[i]).map_err(|e| {
        Error::invalid(
            "qmatmul",
            format!("{format} {op:?} n={n} k={k} {dtype}: {e}"),
        )
    })
}

#[test]
fn every_format_both_kernels_odd_shapes() {
    on_every_adapter("qmatmul_shapes", |ctx| {
        let mut seed = 10;
        for dtype in dtypes(ctx) {
            for format in QuantFormat::ALL {
                // M: 1 (decode), a part of the matrix-vector kernel's row group, one past a
                // group, its largest, one past it (tiled), a prime past a tile; N: 1, primes, a
                // non-multiple of the 64-wide tile; K: one block, 18 blocks (SmolLM2's width),
                // an odd block count.
                for (m, n, k) in [
                    (1, 1, 32),
                    (1, 97, 576),
                    // Past MATVEC_WIDE_N rows: four rows of W an invocation, a ragged last
                    // workgroup.
                    (1, ridge::kernels::qmatmul::MATVEC_WIDE_N + 3, 64),
                    // Wide enough for x rounded to 8 bits, on GPUs (see the bounds' rounding).
                    (1, ridge::kernels::qmatmul::MATVEC_WIDE_N + 3, 2048),
                    (1, 131, 2048),
                    (3, 130, 96),
                    (MATVEC_ROWS + 1, 67, 160),
                    (MATVEC_MAX_M, 50, 64),
                    (MATVEC_MAX_M + 1, 67, 160),
                    (67, 131, 224),
                    // 3 × 87 tiles of 64: enough workgroups for 64-row tiles (fewer take 32).
                    (131, 86 * 64 + 7, 64),
                ] {
                    seed += 1;
                    check(ctx, format, QMatmul::new(m), n, k, dtype, seed)?;
                }
            }
        }
        Ok(())
    });
}

/// Blocks holding every code of their format: every byte −128..=127 (Q8_0; ggml's quantizer
/// never writes −128, a GGUF from elsewhere may) or every nibble 0..=15 in both halves of a
/// byte (Q4), with d = 0.5 (and m = −2 for Q4_1), so that every weight is exact in f16.
fn every_code(format: QuantFormat, n: usize, k: usize) -> Vec<u8> {
    let half = |v: f32| half::f16::from_f32(v).to_le_bytes();
    let mut out = Vec::new();
    for block in 0..n * k / 32 {
        out.extend_from_slice(&half(0.5));
        if format == QuantFormat::Q4_1 {
            out.extend_from_slice(&half(-2.0));
        }
        match format {
            QuantFormat::Q8_0 => out.extend((0..32).map(|i| (block * 32 + i) as u8)),
            _ => {
                let code = |i: usize| ((block + i) % 16) | (((block + 3 * i) % 16) << 4);
                out.extend((0..16).map(|i| code(i) as u8))
            }
        }
    }
    out
}

/// Each weight read back exactly through one-hot rows of x (y[m, n] = W[n, j_m]), by every
/// kernel: a row of x at a time, row groups of the matrix-vector kernel, and tiles (on the
/// tensor cores where the adapter has them). The integer codes reach floats by bit tricks
/// (shaders/qmatmul.wgsl), which must be exact for every code, not only for a quantizer's.
#[test]
fn every_quant_code_decodes_exactly() {
    on_every_adapter("qmatmul_codes", |ctx| {
        let (n, k) = (24, 64);
        for dtype in dtypes(ctx) {
            for format in QuantFormat::ALL {
                let bytes = every_code(format, n, k);
                let w = QuantMatrix::upload(ctx, format, n, k, &bytes)?;
                let wf = quant::dequantize(format, &bytes)?;
                let words = Some(MatvecShape {
                    wg: 256,
                    tpr: 64,
                    rpt: 4,
                    words: true,
                    int8_x: false,
                });
                for (m, columns, shape) in [
                    (1, vec![0, 17, 63], None),
                    (1, vec![5, 40], words),
                    (MATVEC_MAX_M, vec![0, 32], None),
                    (k, vec![0], None),
                ] {
                    for j0 in columns {
                        // Row r of x is one-hot at column (j0 + r) % k.
                        let col = |r: usize| (j0 + r) % k;
                        let mut xv = vec![0.0; m * k];
                        (0..m).for_each(|r| xv[r * k + col(r)] = 1.0);
                        let (x, _) = upload(ctx, &xv, &[m, k], dtype)?;
                        let y = poisoned(ctx, &[m, n], dtype)?;
                        MatvecShape::forced(shape, || QMatmul::new(m).run(ctx, &x, &w, &y))?;
                        let got = block(y.to_f32(ctx))?;
                        for (i, &g) in got.iter().enumerate() {
                            let want = wf[(i % n) * k + col(i / n)];
                            if g != want {
                                return Err(Error::invalid(
                                    "qmatmul",
                                    format!(
                                        "{format} {dtype} M={m} {shape:?}: y[{}, {}] = {g}, the \
                                         weight is {want}",
                                        i / n,
                                        i % n
                                    ),
                                ));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn every_matvec_launch_shape() {
    // The launch shapes Ridge chooses among for one row of x (invocations a workgroup /
    // sharing a row of W / rows of W an invocation, lanes on words, x rounded to 8 bits), each
    // on K of 1, 7 and 37 blocks (fewer blocks than lanes, a ragged last stride; with x
    // rounded, fewer blocks than invocations and more) and N of 1, 13 and 261 (ragged last
    // workgroups), plain, with the residual and gated (normed: the RMSNorm test).
    on_every_adapter("qmatvec_launch_shapes", |ctx| {
        let mut seed = 300;
        let shapes = [
            (64, 16, 1, false, false),
            (64, 16, 4, true, false),
            (256, 256, 4, false, false),
            (256, 64, 2, true, false),
            (256, 64, 4, true, false),
            (128, 32, 1, false, false),
            (256, 64, 4, false, true),
            (64, 16, 1, false, true),
            (32, 4, 2, false, true),
        ];
        for (wg, tpr, rpt, words, int8_x) in shapes {
            let shape = Some(MatvecShape {
                wg,
                tpr,
                rpt,
                words,
                int8_x,
            });
            for format in QuantFormat::ALL {
                for (n, k) in [(1, 32), (13, 224), (261, 1184)] {
                    seed += 1;
                    let dtype = dtypes(ctx)[seed as usize % dtypes(ctx).len()];
                    let ops = [
                        QMatmul::new(1),
                        QMatmul {
                            residual: true,
                            ..QMatmul::new(1)
                        },
                        QMatmul {
                            glu: true,
                            ..QMatmul::new(1)
                        },
                    ];
                    for op in ops {
                        let n = if op.glu { 2 * n } else { n };
                        MatvecShape::forced(shape, || check(ctx, format, op, n, k, dtype, seed))
                            .map_err(|e| {
                                Error::invalid(
                                    "qmatvec",
                                    format!(
                                        "launch {wg}/{tpr}/{rpt} words {words} int8 x \
                                         {int8_x}: {e}"
                                    ),
                                )
                            })?;
                    }
                }
            }
        }
        // One row a workgroup cannot pair a gate with its up row: refused, not miscomputed.
        let bytes = weights(QuantFormat::Q4_0, 8, 64, 1, 1.0);
        let w = QuantMatrix::upload(ctx, QuantFormat::Q4_0, 8, 64, &bytes)?;
        let x = Tensor::empty(ctx, &[1, 64], DType::F32)?;
        let y = Tensor::empty(ctx, &[1, 4], DType::F32)?;
        let glu = QMatmul {
            glu: true,
            ..QMatmul::new(1)
        };
        let one_row = Some(MatvecShape {
            wg: 64,
            tpr: 64,
            rpt: 1,
            words: false,
            int8_x: false,
        });
        let refused = MatvecShape::forced(one_row, || glu.run(ctx, &x, &w, &y));
        expect_err("unpaired rows", refused, |e| {
            matches!(e, Error::InvalidArgument { .. })
        })?;
        Ok(())
    });
}

/// The launches of 2 to 32 rows of x (short prompts, 8 rows of x a workgroup) on every
/// adapter: 16 lanes a row of W (`MatvecShape::ROWS`, the GPUs') and a row of W a lane
/// (`MatvecShape::PROMPT_LANE_ROWS`, the CPU drivers'), on M of 2, 9 (a ragged second group)
/// and 32, N of 13 and 261 (ragged last workgroups), K of 7 and 37 blocks, plain, with the
/// residual and gated. Then a shape the rows loop does not take (several rows of W a lane:
/// the kernel once skipped a lane's further rows and left their outputs 0) is refused with an
/// error, not run.
#[test]
fn every_rows_launch_shape() {
    on_every_adapter("qmatvec_rows_shapes", |ctx| {
        let mut seed = 700;
        for shape in [MatvecShape::ROWS, MatvecShape::PROMPT_LANE_ROWS] {
            for format in QuantFormat::ALL {
                for (m, n, k) in [(2, 13, 224), (9, 261, 1184), (32, 13, 1184)] {
                    seed += 1;
                    let dtype = dtypes(ctx)[seed as usize % dtypes(ctx).len()];
                    let ops = [
                        QMatmul::new(m),
                        QMatmul {
                            residual: true,
                            ..QMatmul::new(m)
                        },
                        QMatmul {
                            glu: true,
                            ..QMatmul::new(m)
                        },
                    ];
                    for op in ops {
                        let n = if op.glu { 2 * n } else { n };
                        // Gated sums of 37 blocks pass f16's 65504 on `check`'s weights (the
                        // one-row test gates f16 on fewer blocks).
                        let dtype = if op.glu { DType::F32 } else { dtype };
                        MatvecShape::forced_rows(Some(shape), || {
                            check(ctx, format, op, n, k, dtype, seed)
                        })
                        .map_err(|e| {
                            Error::invalid("qmatvec_rows", format!("{shape:?} M={m}: {e}"))
                        })?;
                    }
                }
            }
        }
        for shape in [
            MatvecShape::LANE_ROWS,
            MatvecShape {
                words: true,
                ..MatvecShape::ROWS
            },
        ] {
            let refused = MatvecShape::forced_rows(Some(shape), || {
                check(
                    ctx,
                    QuantFormat::Q4_1,
                    QMatmul::new(2),
                    13,
                    224,
                    DType::F32,
                    1,
                )
            });
            match refused {
                Err(Error::InvalidArgument { ref message, .. })
                    if message.contains("rows of x") => {}
                other => {
                    return Err(Error::invalid(
                        "qmatvec_rows",
                        format!("{shape:?} over 2 rows of x was not refused: {other:?}"),
                    ));
                }
            }
        }
        Ok(())
    });
}

/// x rounded to 8 bits (ggml's Q8_0 rounding, integer dot products) against the exact product,
/// on blocks that trap a rounding: all zeros, one spike among small values (they round to 0),
/// values too small for 127 / max|x|, a block of equal values, negative maxima; every format,
/// both launch widths, f32 and f16.
#[test]
fn int8_activations_within_their_bound() {
    on_every_adapter("qmatvec_int8_x", |ctx| {
        let mut seed = 900;
        let k = 7 * 32;
        let mut xs = random(17, k, -1.0, 1.0);
        xs[32..64].iter_mut().for_each(|v| *v = 0.0);
        xs[64..96].iter_mut().for_each(|v| *v *= 0.01);
        xs[70] = 1000.0;
        xs[96..128].iter_mut().for_each(|v| *v *= 1e-32);
        xs[128..160].iter_mut().for_each(|v| *v = -0.375);
        xs[160..192].iter_mut().for_each(|v| *v = -v.abs() * 3.0);
        for dtype in dtypes(ctx) {
            for format in QuantFormat::ALL {
                for (wg, tpr, rpt, n) in [(64, 16, 1, 45), (256, 64, 4, 4099)] {
                    seed += 1;
                    let shape = Some(MatvecShape {
                        wg,
                        tpr,
                        rpt,
                        words: false,
                        int8_x: true,
                    });
                    let bytes = weights(format, n, k, seed, 20.0);
                    let w = QuantMatrix::upload(ctx, format, n, k, &bytes)?;
                    let wf = quant::dequantize(format, &bytes)?;
                    let mag = qmatmul::weight_magnitudes(format, &bytes)?;
                    let (x, xv) = upload(ctx, &xs, &[1, k], dtype)?;
                    let y = poisoned(ctx, &[1, n], dtype)?;
                    let op = QMatmul::new(1);
                    let rounding = MatvecShape::forced(shape, || {
                        op.run(ctx, &x, &w, &y)?;
                        Ok::<_, Error>(op.rounding(ctx, dtype, &w))
                    })?;
                    if rounding != qmatmul::OperandRounding::Int8X {
                        return Err(Error::invalid("int8 x", format!("rounding {rounding:?}")));
                    }
                    let got = block(y.to_f32(ctx))?;
                    let want = op.reference(&xv, &wf, n, k, &[]);
                    let bounds = op.error_bounds(dtype, rounding, &xv, &mag, n, k, &[], &want);
                    assert_close("int8 x", &got, &want, |i| bounds[i]).map_err(|e| {
                        Error::invalid("int8 x", format!("{format} {wg}/{tpr}/{rpt} {dtype}: {e}"))
                    })?;
                }
            }
        }
        Ok(())
    });
}

#[test]
fn residual_and_swiglu_epilogues() {
    on_every_adapter("qmatmul_epilogues", |ctx| {
        let mut seed = 100;
        for dtype in dtypes(ctx) {
            for format in QuantFormat::ALL {
                for m in [1, 3, MATVEC_ROWS + 3, 70] {
                    seed += 1;
                    let residual = QMatmul {
                        residual: true,
                        ..QMatmul::new(m)
                    };
                    check(ctx, format, residual, 75, 64, dtype, seed)?;
                    let glu = QMatmul {
                        glu: true,
                        ..QMatmul::new(m)
                    };
                    check(ctx, format, glu, 134, 96, dtype, seed)?;
                    if m == 1 {
                        let wide = ridge::kernels::qmatmul::MATVEC_WIDE_N;
                        check(ctx, format, residual, wide + 5, 32, dtype, seed)?;
                        check(ctx, format, glu, wide + 6, 32, dtype, seed)?;
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn gathered_rows_are_the_dequantized_rows() {
    on_every_adapter("qembedding", |ctx| {
        for dtype in dtypes(ctx) {
            for format in QuantFormat::ALL {
                let (n, k) = (37, 96);
                let bytes = weights(format, n, k, 7, 1000.0);
                let table = QuantMatrix::upload(ctx, format, n, k, &bytes)?;
                let wf = &quant::dequantize(format, &bytes)?;
                let ids = [3u32, 0, 36, 3, 500];
                let idt = Tensor::from_slice(ctx, &ids, &[5])?;
                let out = poisoned(ctx, &[5, k], dtype)?;
                qmatmul::gather_rows(ctx, &table, &idt, &out)?;
                let got = block(out.to_f32(ctx))?;
                let want: Vec<f32> = ids
                    .iter()
                    .flat_map(|&id| {
                        let id = id as usize;
                        (0..k).map(move |c| if id < n { wf[id * k + c] } else { 0.0 })
                    })
                    .collect();
                // q·d + m may be fused into one rounding where ggml rounds twice: one ulp.
                assert_close("qembedding", &got, &want, |i| {
                    2.0 * ridge::kernels::check::storage_rounding(dtype, want[i] as f64)
                        + ridge::kernels::check::U32 * want[i].abs() as f64
                })?;
            }
        }
        Ok(())
    });
}

#[test]
fn bad_shapes_are_refused() {
    on_every_adapter("qmatmul_errors", |ctx| {
        let bytes = weights(QuantFormat::Q4_0, 4, 64, 1, 1000.0);
        let w = QuantMatrix::upload(ctx, QuantFormat::Q4_0, 4, 64, &bytes)?;
        let shape = |e: &Error| matches!(e, Error::Shape { .. });
        expect_err(
            "cols not whole blocks",
            QuantMatrix::upload(ctx, QuantFormat::Q4_0, 2, 48, &bytes[..54]),
            shape,
        )?;
        expect_err(
            "bytes of another size",
            QuantMatrix::upload(ctx, QuantFormat::Q4_0, 4, 64, &bytes[..36]),
            shape,
        )?;
        let x = Tensor::empty(ctx, &[2, 32], DType::F32)?;
        let y = Tensor::empty(ctx, &[2, 4], DType::F32)?;
        expect_err("K mismatch", QMatmul::new(2).run(ctx, &x, &w, &y), shape)?;
        let x = Tensor::empty(ctx, &[2, 64], DType::F32)?;
        expect_err("M mismatch", QMatmul::new(3).run(ctx, &x, &w, &y), shape)?;
        let glu = QMatmul {
            glu: true,
            ..QMatmul::new(2)
        };
        expect_err("gated y of N columns", glu.run(ctx, &x, &w, &y), shape)?;
        let invalid = |e: &Error| matches!(e, Error::InvalidArgument { .. });
        let rope = QMatmul {
            rope: true,
            ..QMatmul::new(2)
        };
        expect_err("RoPE without its table", rope.run(ctx, &x, &w, &y), invalid)?;
        let normed = QMatmul {
            rms_norm: true,
            ..QMatmul::new(2)
        };
        expect_err("a norm without γ", normed.run(ctx, &x, &w, &y), invalid)?;
        let yh = Tensor::empty(ctx, &[2, 4], DType::U32)?;
        expect_err("u32 output", QMatmul::new(2).run(ctx, &x, &w, &yh), |e| {
            matches!(e, Error::DType { .. })
        })?;
        Ok(())
    });
}

/// A weight larger than the adapter's storage binding is refused at upload, naming the limit.
#[test]
fn a_weight_past_the_binding_limit_is_refused_at_upload() {
    on_every_adapter_with(
        "qmatmul_binding_limit",
        |a| with_limits(a, |l| l.max_storage_buffer_binding_size = 1 << 16),
        |ctx| {
            let bytes = weights(QuantFormat::Q8_0, 512, 256, 3, 1.0);
            expect_err(
                "a 128 KiB Q8_0 weight against a 64 KiB binding",
                QuantMatrix::upload(ctx, QuantFormat::Q8_0, 512, 256, &bytes),
                |e| matches!(e, Error::LimitExceeded { limit, .. } if limit.contains("maxStorageBufferBindingSize")),
            )
        },
    );
}

/// Weights whose dequantized values pass f16's 65504 stay off the tensor cores (which round
/// each weight to f16: they would turn into infinities) and still give the right product; the
/// bound from the blocks' scales is the largest weight exactly.
#[test]
fn weights_past_f16_range_stay_off_the_tensor_cores() {
    on_every_adapter("qmatmul_f16_range", |ctx| {
        let (m, n, k) = (MATVEC_MAX_M + 5, 70, 96);
        for format in QuantFormat::ALL {
            // Rows ×1000 and one ×10⁵: every format's blocks reach past 65504 there.
            let mut v = random(40, n * k, -1.0, 1.0);
            v[3 * k..4 * k].iter_mut().for_each(|x| *x *= 1e5);
            let bytes = quant::quantize(format, &v)?;
            let wf = quant::dequantize(format, &bytes)?;
            let largest = wf.iter().fold(0.0f32, |a, w| a.max(w.abs()));
            let bound = quant::max_weight(format, &bytes);
            if !(largest <= bound && bound <= largest * 1.2 + 1.0) {
                return Err(Error::invalid(
                    "max_weight",
                    format!("{format}: bound {bound} for a largest weight of {largest}"),
                ));
            }
            let w = QuantMatrix::upload(ctx, format, n, k, &bytes)?;
            if w.fits_f16 {
                return Err(Error::invalid(
                    "fits_f16",
                    format!("{format}: weights up to {largest} said to fit f16"),
                ));
            }
            for dtype in dtypes(ctx) {
                let op = QMatmul::new(m);
                if op.on_tensor_cores(ctx, dtype, &w) {
                    return Err(Error::invalid(
                        "fits_f16",
                        "out-of-range weights on tensor cores",
                    ));
                }
                // Small activations keep every output inside f16.
                let (x, xv) = upload(ctx, &random(41, m * k, -1e-4, 1e-4), &[m, k], dtype)?;
                let y = poisoned(ctx, &[m, n], dtype)?;
                op.run(ctx, &x, &w, &y)?;
                let got = block(y.to_f32(ctx))?;
                let want = op.reference(&xv, &wf, n, k, &[]);
                let mag = qmatmul::weight_magnitudes(format, &bytes)?;
                let rounding = op.rounding(ctx, dtype, &w);
                let bounds = op.error_bounds(dtype, rounding, &xv, &mag, n, k, &[], &want);
                assert_close("out-of-range weights", &got, &want, |i| bounds[i])?;
            }
        }
        Ok(())
    });
}
