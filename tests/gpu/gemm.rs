//! GEMM against its f64 reference: odd shapes, transposes, batches, α/β, bias, f16, limits.

use proptest::prelude::*;
use ridge::core::{DType, Error, Result, Tensor, wgpu};
use ridge::kernels::{Gemm, GemmConfig, GemmKernel};

use crate::harness::*;

/// Runs `g` on seeded data and checks every element against `Gemm::error_bounds`.
pub fn check(
    ctx: &ridge::core::Context,
    g: Gemm,
    dtype: DType,
    bias: bool,
    a_batches: usize,
    b_batches: usize,
    seed: u64,
) -> Result<()> {
    check_kernel(
        ctx,
        g,
        None,
        [dtype, dtype],
        bias,
        a_batches,
        b_batches,
        seed,
    )
}

/// As [`check`], with `kernel` instead of the one the tuning table picks (`None`: that one),
/// A and B stored as `dtype` and C and the bias as `output`.
#[allow(clippy::too_many_arguments)]
fn check_kernel(
    ctx: &ridge::core::Context,
    g: Gemm,
    kernel: Option<GemmKernel>,
    [dtype, output]: [DType; 2],
    bias: bool,
    a_batches: usize,
    b_batches: usize,
    seed: u64,
) -> Result<()> {
    let [ar, ac] = g.a_dims();
    let [br, bc] = g.b_dims();
    let (a_data, b_data) = (
        random(seed, a_batches * ar * ac, -1.0, 1.0),
        random(seed + 1, b_batches * br * bc, -1.0, 1.0),
    );
    let (a, a_vals) = upload(ctx, &a_data, &[a_batches, ar, ac], dtype)?;
    let (b, b_vals) = upload(ctx, &b_data, &[b_batches, br, bc], dtype)?;
    let bias_t = if bias {
        Some(upload(
            ctx,
            &random(seed + 2, g.n, -1.0, 1.0),
            &[g.n],
            output,
        )?)
    } else {
        None
    };
    let c_shape = [g.batch, g.m, g.n];
    let (c, c_old) = if g.beta != 0.0 {
        upload(
            ctx,
            &random(seed + 3, g.batch * g.m * g.n, -1.0, 1.0),
            &c_shape,
            output,
        )?
    } else {
        (
            poisoned(ctx, &c_shape, output)?,
            vec![f32::NAN; g.batch * g.m * g.n],
        )
    };
    let bias_ref = bias_t.as_ref().map(|t| &t.0);
    match kernel {
        Some(kernel) => g.run_with(ctx, kernel, &a, &b, bias_ref, &c)?,
        None => g.run(ctx, &a, &b, bias_ref, &c)?,
    }
    let got = block(c.to_f32(ctx))?;

    let bias_vals = bias_t.as_ref().map(|t| t.1.as_slice());
    let want = g.reference(&a_vals, &b_vals, bias_vals, &c_old);
    let bounds = g.error_bounds(output, &a_vals, &b_vals, bias_vals, &c_old, &want);
    assert_close("gemm", &got, &want, |i| bounds[i])
        .map_err(|e| Error::invalid("gemm", format!("{g:?} {dtype}→{output} bias={bias}: {e}")))
}

#[test]
fn odd_shapes_every_transpose_and_dtype() {
    on_every_adapter("gemm_odd_shapes", |ctx| {
        let shapes = [
            (1, 1, 1),
            (0, 5, 3),
            (5, 0, 3),
            (4, 6, 0),
            (1, 67, 1),
            (7, 13, 61),
            (64, 64, 16),
            (65, 63, 17),
            (127, 3, 129),
        ];
        let mut seed = 0;
        for dtype in dtypes(ctx) {
            for (m, n, k) in shapes {
                for (trans_a, trans_b) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    seed += 10;
                    let g = Gemm {
                        trans_a,
                        trans_b,
                        ..Gemm::new(m, n, k)
                    };
                    check(ctx, g, dtype, seed % 20 == 0, 1, 1, seed)?;
                }
            }
        }
        Ok(())
    });
}

/// Every tiling the autotuner may pick, on shapes whose leading dimensions are multiples of
/// 8 or 4 (so the 16-byte loads of f32 and f16 run) but not of any tile, and on one made of
/// whole tiles (the loads without bounds checks), batched with a shared operand (unbatched
/// for split-K tilings, which split only those), some with the GELU epilogue: the pipelined
/// staging must be right for each of them.
///
/// Each operand's loads are generated on their own (`codegen::interior_loads` and the
/// bounds-checked loads take one operand's orientation), so each path needs each operand
/// both ways, not every pair: the bounds-checked shapes take (N, N) and (T, T), the whole
/// tiles (N, T) and (T, N) — every transpose pair once a tiling, in four pipelines where all
/// four pairs on both paths made eight. `odd_shapes_every_transpose_and_dtype` runs all four
/// pairs with the tilings the shipped table picks. On CPU drivers a GEMM pipeline takes
/// LLVM 1–2 s to compile, and this test's were the GPU tests' largest compile
/// (benches/NOTES.md, 2026-12-06, fifth session): there each tiling runs in one dtype, the
/// dtypes taking turns (2026-12-07, seventh session), so every tiling and both dtypes' loads
/// still run; GPUs run every tiling in every dtype.
#[test]
fn every_tuning_candidate_with_vector_loads() {
    on_every_adapter("gemm_candidates", |ctx| {
        let mut seed = 500;
        let dtypes = dtypes(ctx);
        let lists: Vec<Vec<GemmKernel>> = dtypes
            .iter()
            .map(|&t| GemmKernel::candidates(ctx, t))
            .collect();
        for (d, &dtype) in dtypes.iter().enumerate() {
            for (i, &kernel) in lists[d].iter().enumerate() {
                // The dtypes whose candidates hold this tiling (split-K's are f32's only).
                let owners: Vec<usize> = (0..lists.len())
                    .filter(|&o| lists[o].contains(&kernel))
                    .collect();
                let turn = owners.iter().position(|&o| o == d).unwrap_or_default();
                if !in_turn(ctx, i, turn, owners.len()) {
                    continue;
                }
                let (batch, [bm, bn, bk]) = match kernel {
                    GemmKernel::Tiled(c) => (
                        if c.splits > 1 { 1 } else { 2 },
                        [c.bm, c.bn, c.bk * c.splits],
                    ),
                    GemmKernel::Coop(c) => (2, [c.bm(), c.bn(), c.bk]),
                };
                let whole = (2 * bm as usize, bn as usize, 3 * bk as usize);
                for (m, n, k) in [(4, 4, 4), (40, 136, 24), (260, 44, 68), whole] {
                    let pairs = if (m, n, k) == whole {
                        [(false, true), (true, false)]
                    } else {
                        [(false, false), (true, true)]
                    };
                    for (trans_a, trans_b) in pairs {
                        seed += 10;
                        let g = Gemm {
                            batch,
                            trans_a,
                            trans_b,
                            beta: if seed % 30 == 0 { 0.5 } else { 0.0 },
                            gelu: seed % 70 == 0,
                            ..Gemm::new(m, n, k)
                        };
                        check_kernel(
                            ctx,
                            g,
                            Some(kernel),
                            [dtype, dtype],
                            seed % 20 == 0,
                            batch,
                            1,
                            seed,
                        )
                        .map_err(|e| Error::invalid("gemm", format!("{kernel:?}: {e}")))?;
                    }
                }
            }
        }
        Ok(())
    });
}

/// Split-K ([`GemmConfig::splits`]) with every transpose, α, β, the bias and GELU: on K that
/// the requested count divides (vec4 loads where the slice offsets allow them), on K that
/// only a smaller count divides, and on prime K (no split). Each workspace comes from the
/// buffer pool after a poisoned buffer of its size was dropped there, so an element a slice
/// left unwritten shows as NaN. Batched and f16 GEMMs never split.
#[test]
fn split_k_matches_the_reference() {
    on_every_adapter("gemm_split_k", |ctx| {
        let tiling = |splits| {
            GemmKernel::Tiled(GemmConfig {
                splits,
                ..GemmConfig::DEFAULT
            })
        };
        let mut seed = 900;
        // (m, n, k, splits asked, splits run)
        for (m, n, k, ask, run) in [
            (37, 45, 96, 4, 4),
            (128, 384, 384, 8, 8),
            (5, 7, 30, 4, 3),
            (1, 1, 2, 8, 2),
            (70, 3, 61, 8, 1),
        ] {
            for t in 0..4 {
                seed += 10;
                let g = Gemm {
                    trans_a: t % 2 == 1,
                    trans_b: t >= 2,
                    alpha: 0.75,
                    beta: if t == 1 || t == 2 { 0.5 } else { 0.0 },
                    gelu: t >= 2,
                    ..Gemm::new(m, n, k)
                };
                assert_eq!(g.splits(ctx, tiling(ask), DType::F32), run, "{g:?}");
                let junk = Tensor::empty(ctx, &[run, m, n], DType::F32)?;
                junk.poison(ctx);
                drop(junk);
                check_kernel(
                    ctx,
                    g,
                    Some(tiling(ask)),
                    [DType::F32; 2],
                    t != 1,
                    1,
                    1,
                    seed,
                )?;
            }
        }
        let g = Gemm::new(64, 64, 64);
        assert_eq!(g.splits(ctx, tiling(4), DType::F16), 1);
        assert_eq!(Gemm { batch: 2, ..g }.splits(ctx, tiling(4), DType::F32), 1);
        check_kernel(
            ctx,
            Gemm { batch: 2, ..g },
            Some(tiling(4)),
            [DType::F32; 2],
            true,
            2,
            1,
            seed,
        )
    });
}

#[test]
fn alpha_beta_bias_and_batches() {
    on_every_adapter("gemm_alpha_beta", |ctx| {
        for dtype in dtypes(ctx) {
            let g = Gemm {
                batch: 3,
                alpha: -0.5,
                beta: 0.75,
                trans_b: true,
                ..Gemm::new(33, 70, 45)
            };
            check(ctx, g, dtype, true, 3, 3, 100)?;
            // One A (or B) shared by every batch entry.
            check(ctx, Gemm { beta: 0.0, ..g }, dtype, false, 1, 3, 200)?;
            check(ctx, Gemm { beta: 0.0, ..g }, dtype, true, 3, 1, 300)?;
            // K = 0: C = β·C + bias.
            check(ctx, Gemm { k: 0, ..g }, dtype, true, 3, 3, 400)?;
            // GELU after α, β and the bias (the feed-forward up projection), pre-activations
            // up to ±8 so that both tails of erf are exercised.
            let wide = Gemm {
                gelu: true,
                alpha: 4.0,
                ..g
            };
            check(ctx, wide, dtype, true, 3, 3, 500)?;
            check(ctx, Gemm { beta: 0.0, ..wide }, dtype, false, 1, 3, 600)?;
        }
        Ok(())
    });
}

#[test]
fn f16_storage_accumulates_in_f32() {
    on_every_adapter("gemm_f16_overflow", |ctx| {
        if !ctx.has_f16() {
            return Ok(());
        }
        // Every product is 200·200 = 4e4 and K = 64 of them sum to 2.56e6, far beyond f16's
        // 65,504; α = 1/1024 brings the result back to 2500. Only f32 accumulation gets it.
        let (m, n, k) = (5, 9, 64);
        let a = Tensor::from_slice(ctx, &vec![half::f16::from_f32(200.0); m * k], &[m, k])?;
        let b = Tensor::from_slice(ctx, &vec![half::f16::from_f32(200.0); k * n], &[k, n])?;
        let c = poisoned(ctx, &[m, n], DType::F16)?;
        Gemm {
            alpha: 1.0 / 1024.0,
            ..Gemm::new(m, n, k)
        }
        .run(ctx, &a, &b, None, &c)?;
        let got = block(c.to_f32(ctx))?;
        assert_close("gemm f16", &got, &vec![2500.0; m * n], |_| 0.0)
    });
}

/// f16 operands with an f32 C and bias (mixed precision): odd shapes, every transpose, α/β,
/// bias, GELU, batches with a shared operand, split-K, and the kernel the tuning table picks
/// (the tensor cores where the adapter has them).
#[test]
fn f16_operands_into_an_f32_result() {
    on_every_adapter("gemm_mixed", |ctx| {
        if !ctx.has_f16() {
            return Ok(());
        }
        let mut seed = 5000;
        for (m, n, k) in [(1, 1, 1), (7, 13, 61), (65, 63, 17), (33, 128, 96)] {
            for t in 0..4 {
                seed += 10;
                let g = Gemm {
                    trans_a: t % 2 == 1,
                    trans_b: t >= 2,
                    alpha: 0.75,
                    beta: if t == 1 { 0.5 } else { 0.0 },
                    gelu: t == 3,
                    batch: if t == 2 { 3 } else { 1 },
                    ..Gemm::new(m, n, k)
                };
                let mixed = [DType::F16, DType::F32];
                let a_batches = g.batch;
                check_kernel(ctx, g, None, mixed, t != 2, a_batches, 1, seed)?;
                let split = GemmKernel::Tiled(GemmConfig {
                    splits: 4,
                    ..GemmConfig::DEFAULT
                });
                check_kernel(ctx, g, Some(split), mixed, t != 2, a_batches, 1, seed + 1)?;
            }
        }
        // Sums past f16's range (65,504) and between its steps come back exactly: 64 products
        // of 200·200 are 2,560,000, plus a bias of 0.5 (f16 has no number within 1000 of it).
        let (m, n, k) = (3, 5, 64);
        let a = Tensor::from_slice(ctx, &vec![half::f16::from_f32(200.0); m * k], &[m, k])?;
        let b = Tensor::from_slice(ctx, &vec![half::f16::from_f32(200.0); k * n], &[k, n])?;
        let bias = Tensor::from_slice(ctx, &vec![0.5f32; n], &[n])?;
        let c = poisoned(ctx, &[m, n], DType::F32)?;
        Gemm::new(m, n, k).run(ctx, &a, &b, Some(&bias), &c)?;
        let got = block(c.to_f32(ctx))?;
        assert_close("gemm f16→f32", &got, &vec![2_560_000.5; m * n], |_| 0.0)
    });
}

#[test]
fn f16_outputs_in_the_subnormal_range_are_correctly_rounded() {
    // Regression (H200 tensor cores): 1.25 · 0.003 · 0.002 = 7.5e-6 is subnormal in f16 and can
    // only be right to half the subnormal spacing (3e-8), not to u·|value| (4e-9).
    on_every_adapter("gemm_f16_subnormal", |ctx| {
        if !ctx.has_f16() {
            return Ok(());
        }
        let g = Gemm {
            trans_a: true,
            trans_b: true,
            alpha: 1.25,
            ..Gemm::new(12, 8, 1)
        };
        let av: Vec<f32> = (0..12).map(|i| 0.003 * (1.0 + i as f32 / 7.0)).collect();
        let bv: Vec<f32> = (0..8).map(|j| -0.002 * (1.0 + j as f32 / 5.0)).collect();
        let (a, a_vals) = upload(ctx, &av, &[1, 12], DType::F16)?;
        let (b, b_vals) = upload(ctx, &bv, &[8, 1], DType::F16)?;
        let c = poisoned(ctx, &[12, 8], DType::F16)?;
        g.run(ctx, &a, &b, None, &c)?;
        let want = g.reference(&a_vals, &b_vals, None, &[]);
        let bounds = g.error_bounds(DType::F16, &a_vals, &b_vals, None, &[], &want);
        assert!(
            want.iter().all(|w| w.abs() < 6.1e-5),
            "the outputs must be f16 subnormals"
        );
        assert_close("gemm f16 subnormal", &block(c.to_f32(ctx))?, &want, |i| {
            bounds[i]
        })
    });
}

#[test]
fn more_workgroups_than_one_dimension_allows() {
    // With at most 4 workgroups per dimension and 64 × 64 tiles, 5 × 4 tiles × 2 batches = 40
    // workgroups need all three dimensions (4 · 4 · 3): the linear workgroup index must cover
    // them exactly.
    on_every_adapter_with(
        "gemm_folded_grid",
        |a| with_limits(a, |l| l.max_compute_workgroups_per_dimension = 4),
        |ctx| {
            let set = ridge::tune::TableSet::default();
            ctx.set_tuning(Some(std::sync::Arc::new(set)));
            let tiled = GemmKernel::Tiled(GemmConfig::DEFAULT);
            let g = Gemm {
                batch: 2,
                ..Gemm::new(5 * 64 - 3, 4 * 64 - 1, 9)
            };
            let (a, b) = (
                Tensor::from_slice(ctx, &random(1, 2 * g.m * 9, -1.0, 1.0), &[2, g.m, 9])?,
                Tensor::from_slice(ctx, &random(2, 9 * g.n, -1.0, 1.0), &[9, g.n])?,
            );
            let c = poisoned(ctx, &[2, g.m, g.n], DType::F32)?;
            g.run_with(ctx, tiled, &a, &b, None, &c)?;
            let want = g.reference(
                &block(a.to_vec::<f32>(ctx))?,
                &block(b.to_vec::<f32>(ctx))?,
                None,
                &[],
            );
            let bounds = g.error_bounds(
                DType::F32,
                &block(a.to_vec::<f32>(ctx))?,
                &block(b.to_vec::<f32>(ctx))?,
                None,
                &[],
                &want,
            );
            assert_close("folded gemm", &block(c.to_vec::<f32>(ctx))?, &want, |i| {
                bounds[i]
            })?;
            // 4³ = 64 workgroups at most: 65 tiles must be refused before dispatch.
            let g = Gemm::new(65 * 64, 1, 1);
            let a = Tensor::empty(ctx, &[g.m, 1], DType::F32)?;
            let b = Tensor::empty(ctx, &[1, 1], DType::F32)?;
            let c = Tensor::empty(ctx, &[g.m, 1], DType::F32)?;
            expect_err("gemm grid", g.run_with(ctx, tiled, &a, &b, None, &c), |e| {
                matches!(e, Error::LimitExceeded { .. })
            })
        },
    );
}

#[test]
fn regression_transposed_with_beta_and_bias() {
    on_every_adapter("gemm_regression_tt_beta", |ctx| {
        let g = Gemm {
            trans_a: true,
            trans_b: true,
            beta: 0.4416894,
            alpha: 1.25,
            ..Gemm::new(55, 14, 70)
        };
        check(ctx, g, DType::F32, true, 1, 1, 5)
    });
}

#[test]
fn bad_inputs_give_typed_errors() {
    on_every_adapter("gemm_bad_inputs", |ctx| {
        let t = |shape: &[usize], dtype| Tensor::empty(ctx, shape, dtype);
        let g = Gemm::new(4, 5, 6);
        let (a, b, c) = (
            t(&[4, 6], DType::F32)?,
            t(&[6, 5], DType::F32)?,
            t(&[4, 5], DType::F32)?,
        );
        let shape = |e: &Error| matches!(e, Error::Shape { .. });
        expect_err(
            "wrong k",
            g.run(ctx, &t(&[4, 7], DType::F32)?, &b, None, &c),
            shape,
        )?;
        expect_err(
            "1-d a",
            g.run(ctx, &t(&[24], DType::F32)?, &b, None, &c),
            shape,
        )?;
        expect_err(
            "wrong c",
            g.run(ctx, &a, &b, None, &t(&[5, 4], DType::F32)?),
            shape,
        )?;
        expect_err(
            "bias",
            g.run(ctx, &a, &b, Some(&t(&[4], DType::F32)?), &c),
            shape,
        )?;
        let batched = Gemm { batch: 2, ..g };
        expect_err(
            "batch",
            batched.run(
                ctx,
                &t(&[3, 4, 6], DType::F32)?,
                &b,
                None,
                &t(&[2, 4, 5], DType::F32)?,
            ),
            shape,
        )?;
        if ctx.has_f16() {
            let dtype = |e: &Error| matches!(e, Error::DType { .. });
            let (a16, b16) = (t(&[4, 6], DType::F16)?, t(&[6, 5], DType::F16)?);
            expect_err("dtype", g.run(ctx, &a, &b16, None, &c), dtype)?;
            // Mixed precision goes one way only: f16 operands into f32, never f32 into f16.
            let c16 = t(&[4, 5], DType::F16)?;
            expect_err("f32 into f16", g.run(ctx, &a, &b, None, &c16), dtype)?;
            // The bias has C's type.
            let bias16 = t(&[5], DType::F16)?;
            expect_err("bias", g.run(ctx, &a16, &b16, Some(&bias16), &c), dtype)?;
        }
        expect_err(
            "alias",
            g.run(ctx, &a, &a.reshape(&[6, 4])?, None, &a.reshape(&[4, 6])?),
            |e| matches!(e, Error::Shape { .. } | Error::InvalidArgument { .. }),
        )?;
        let square = t(&[4, 4], DType::F32)?;
        expect_err(
            "alias",
            Gemm::new(4, 4, 4).run(ctx, &square, &t(&[4, 4], DType::F32)?, None, &square),
            |e| matches!(e, Error::InvalidArgument { .. }),
        )
    });
}

#[test]
fn f16_without_shader_f16_is_a_typed_error() {
    on_every_adapter_with(
        "gemm_no_f16",
        |_| ridge::core::ContextOptions {
            without_features: wgpu::Features::SHADER_F16,
            ..Default::default()
        },
        |ctx| {
            let a = Tensor::empty(ctx, &[2, 2], DType::F16)?;
            let c = Tensor::empty(ctx, &[2, 2], DType::F16)?;
            expect_err(
                "no f16",
                Gemm::new(2, 2, 2).run(ctx, &a, &a.clone(), None, &c),
                |e| {
                    matches!(
                        e,
                        Error::MissingFeature {
                            feature: "shader-f16",
                            ..
                        }
                    )
                },
            )
        },
    );
}

#[test]
fn bindings_over_the_limit_are_refused_before_dispatch() {
    on_every_adapter_with(
        "gemm_binding_limit",
        |a| with_limits(a, |l| l.max_storage_buffer_binding_size = 1 << 16),
        |ctx| {
            let (m, k) = (256, 128); // 128 KiB of A
            let a = Tensor::empty(ctx, &[m, k], DType::F32)?;
            let b = Tensor::empty(ctx, &[k, 1], DType::F32)?;
            let c = Tensor::empty(ctx, &[m, 1], DType::F32)?;
            expect_err(
                "binding",
                Gemm::new(m, 1, k).run(ctx, &a, &b, None, &c),
                |e| {
                    matches!(
                        e,
                        Error::LimitExceeded {
                            limit: "maxStorageBufferBindingSize",
                            ..
                        }
                    )
                },
            )
        },
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, max_shrink_iters: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_problems_match_the_reference(
        m in 1usize..80, n in 1usize..80, k in 0usize..90, batch in 1usize..3,
        trans_a: bool, trans_b: bool, bias: bool, beta in prop_oneof![Just(0.0f32), -1.0f32..1.0],
        seed in 0u64..1000,
    ) {
        on_every_adapter("gemm_proptest", |ctx| {
            let g = Gemm { batch, trans_a, trans_b, beta, alpha: 1.25, ..Gemm::new(m, n, k) };
            for dtype in dtypes(ctx) {
                check(ctx, g, dtype, bias, batch, batch, seed)?;
            }
            Ok(())
        });
    }
}
