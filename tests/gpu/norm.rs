//! Layer norm and RMS norm against the f64 reference.

use proptest::prelude::*;
use ridge::core::{Context, DType, Error, Result, Tensor};
use ridge::kernels::{Norm, NormKind};

use crate::harness::*;

fn check(
    ctx: &Context,
    norm: Norm,
    dtype: DType,
    affine: bool,
    x: &[f32],
    seed: u64,
) -> Result<()> {
    let (xt, xv) = upload(ctx, x, &[norm.rows, norm.cols], dtype)?;
    let params = if affine {
        let g = upload(
            ctx,
            &random(seed + 1, norm.cols, 0.5, 2.0),
            &[norm.cols],
            dtype,
        )?;
        let b = upload(
            ctx,
            &random(seed + 2, norm.cols, -1.0, 1.0),
            &[norm.cols],
            dtype,
        )?;
        Some((g, b))
    } else {
        None
    };
    let y = poisoned(ctx, &[norm.rows, norm.cols], dtype)?;
    let gamma = params.as_ref().map(|p| &p.0);
    let beta = params
        .as_ref()
        .filter(|_| norm.kind == NormKind::LayerNorm)
        .map(|p| &p.1);
    norm.run(ctx, &xt, gamma.map(|g| &g.0), beta.map(|b| &b.0), &y)?;
    let got = block(y.to_f32(ctx))?;
    let want = norm.reference(
        &xv,
        gamma.map(|g| g.1.as_slice()),
        beta.map(|b| b.1.as_slice()),
    );
    let bounds = norm.error_bounds(
        dtype,
        &want,
        gamma.map(|g| g.1.as_slice()),
        beta.map(|b| b.1.as_slice()),
    );
    assert_close(norm.name(), &got, &want, |i| bounds[i])
        .map_err(|e| Error::invalid("norm", format!("{norm:?} {dtype} affine={affine}: {e}")))
}

#[test]
fn odd_shapes_both_kinds_both_dtypes() {
    on_every_adapter("norm_shapes", |ctx| {
        let mut seed = 0;
        for dtype in dtypes(ctx) {
            for kind in [NormKind::LayerNorm, NormKind::RmsNorm] {
                for (rows, cols) in [
                    (1, 1),
                    (3, 2),
                    (5, 7),
                    (2, 255),
                    (2, 256),
                    (3, 257),
                    (67, 384),
                    (2, 4099),
                ] {
                    for affine in [false, true] {
                        seed += 10;
                        let norm = Norm {
                            kind,
                            rows,
                            cols,
                            eps: 1e-5,
                        };
                        check(
                            ctx,
                            norm,
                            dtype,
                            affine,
                            &random(seed, rows * cols, -3.0, 3.0),
                            seed,
                        )?;
                    }
                }
            }
        }
        Ok(())
    });
}

#[test]
fn large_mean_keeps_its_small_variance() {
    // Rows with mean 1e4 and spread 1: E[x²] − E[x]² in f32 loses every digit here
    // (x² ≈ 1e8, u·1e8 ≈ 6), the corrected two-pass algorithm does not.
    on_every_adapter("norm_large_mean", |ctx| {
        let (rows, cols) = (4, 1000);
        let x: Vec<f32> = random(42, rows * cols, -1.0, 1.0)
            .iter()
            .map(|v| 1e4 + v)
            .collect();
        check(
            ctx,
            Norm {
                kind: NormKind::LayerNorm,
                rows,
                cols,
                eps: 1e-12,
            },
            DType::F32,
            true,
            &x,
            42,
        )
    });
}

#[test]
fn constant_row_gives_beta_not_nan() {
    on_every_adapter("norm_constant_row", |ctx| {
        for value in [0.1f32, -3.7, 1e4, 0.0] {
            let cols = 384;
            let norm = Norm {
                kind: NormKind::LayerNorm,
                rows: 1,
                cols,
                eps: 1e-12,
            };
            let x = Tensor::from_slice(ctx, &vec![value; cols], &[1, cols])?;
            let g = Tensor::from_slice(ctx, &random(1, cols, 0.5, 2.0), &[cols])?;
            let beta = random(2, cols, -1.0, 1.0);
            let b = Tensor::from_slice(ctx, &beta, &[cols])?;
            let y = poisoned(ctx, &[1, cols], DType::F32)?;
            norm.run(ctx, &x, Some(&g), Some(&b), &y)?;
            assert_close("constant row", &block(y.to_f32(ctx))?, &beta, |_| 0.0)?;
        }
        Ok(())
    });
}

#[test]
fn more_rows_than_one_grid_dimension() {
    on_every_adapter_with(
        "norm_folded_grid",
        |a| with_limits(a, |l| l.max_compute_workgroups_per_dimension = 4),
        |ctx| {
            for kind in [NormKind::LayerNorm, NormKind::RmsNorm] {
                let norm = Norm {
                    kind,
                    rows: 61,
                    cols: 33,
                    eps: 1e-5,
                };
                check(
                    ctx,
                    norm,
                    DType::F32,
                    true,
                    &random(3, 61 * 33, -2.0, 2.0),
                    3,
                )?;
            }
            Ok(())
        },
    );
}

#[test]
fn bad_inputs_give_typed_errors() {
    on_every_adapter("norm_bad_inputs", |ctx| {
        let t = |shape: &[usize]| Tensor::empty(ctx, shape, DType::F32);
        let ln = Norm {
            kind: NormKind::LayerNorm,
            rows: 2,
            cols: 8,
            eps: 1e-5,
        };
        let (x, y, g) = (t(&[2, 8])?, t(&[2, 8])?, t(&[8])?);
        let shape = |e: &Error| matches!(e, Error::Shape { .. });
        let invalid = |e: &Error| matches!(e, Error::InvalidArgument { .. });
        expect_err("x", ln.run(ctx, &t(&[2, 9])?, None, None, &y), shape)?;
        expect_err(
            "rows",
            ln.run(ctx, &t(&[3, 8])?, None, None, &t(&[3, 8])?),
            shape,
        )?;
        expect_err("y", ln.run(ctx, &x, None, None, &t(&[16])?), shape)?;
        expect_err(
            "gamma",
            ln.run(ctx, &x, Some(&t(&[7])?), Some(&g), &y),
            shape,
        )?;
        expect_err("gamma only", ln.run(ctx, &x, Some(&g), None, &y), invalid)?;
        expect_err(
            "eps",
            Norm { eps: -1.0, ..ln }.run(ctx, &x, None, None, &y),
            invalid,
        )?;
        expect_err(
            "eps nan",
            Norm {
                eps: f32::NAN,
                ..ln
            }
            .run(ctx, &x, None, None, &y),
            invalid,
        )?;
        let rms = Norm {
            kind: NormKind::RmsNorm,
            ..ln
        };
        expect_err(
            "rms beta",
            rms.run(ctx, &x, Some(&g), Some(&g), &y),
            invalid,
        )?;
        expect_err("alias", ln.run(ctx, &x, None, None, &x), invalid)
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, max_shrink_iters: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_rows_match_the_reference(
        rows in 1usize..20, cols in 1usize..700, rms: bool, affine: bool,
        offset in -100.0f32..100.0, spread in 0.01f32..50.0, seed in 0u64..1000,
    ) {
        on_every_adapter("norm_proptest", |ctx| {
            let kind = if rms { NormKind::RmsNorm } else { NormKind::LayerNorm };
            let x: Vec<f32> = random(seed, rows * cols, -spread, spread).iter().map(|v| v + offset).collect();
            check(ctx, Norm { kind, rows, cols, eps: 1e-6 }, DType::F32, affine, &x, seed)
        });
    }
}
