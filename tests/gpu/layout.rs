//! Permutes, transposes and NCHW ↔ NHWC: exact equality with the reference.

use proptest::prelude::*;
use ridge::core::{Context, DType, Error, Result, Tensor};
use ridge::kernels::layout::{self, NCHW_TO_NHWC, NHWC_TO_NCHW, TransposeTiling};

use crate::harness::*;

/// Permutes only move data, so the result must equal the reference bit for bit.
fn check(ctx: &Context, shape: &[usize], perm: &[usize], dtype: DType, seed: u64) -> Result<()> {
    check_with(ctx, shape, perm, dtype, TransposeTiling::DEFAULT, seed)
}

/// [`check`] with the transpose kernel's tiling given.
fn check_with(
    ctx: &Context,
    shape: &[usize],
    perm: &[usize],
    dtype: DType,
    tiling: TransposeTiling,
    seed: u64,
) -> Result<()> {
    let n = shape.iter().product();
    let (x, xv) = upload(ctx, &random(seed, n, -100.0, 100.0), shape, dtype)?;
    let out_shape = layout::permuted_shape(shape, perm)?;
    let y = poisoned(ctx, &out_shape, dtype)?;
    layout::permute_with(ctx, &x, perm, &y, tiling)?;
    let want = layout::reference(&xv, shape, perm);
    assert_close("permute", &block(y.to_f32(ctx))?, &want, |_| 0.0).map_err(|e| {
        Error::invalid(
            "permute",
            format!("{shape:?} by {perm:?} {dtype} {tiling:?}: {e}"),
        )
    })
}

/// Every tiling the bench compares, on tails in both directions and grids that are not
/// square: shapes whose rows and columns are multiples of 4 (the vec4 tilings move vec4s)
/// and shapes where they are not (those tilings fall back to single elements), f32 and f16.
#[test]
fn every_transpose_tiling_is_exact() {
    on_every_adapter("layout_tilings", |ctx| {
        let mut seed = 100;
        for (tile, rows_per_pass, width) in [
            (32, 8, 1),
            (32, 4, 1),
            (32, 2, 1),
            (16, 4, 1),
            (64, 4, 1),
            (32, 8, 4),
            (32, 4, 4),
            (32, 2, 4),
            (64, 16, 4),
            (64, 8, 4),
        ] {
            let tiling = TransposeTiling {
                tile,
                rows_per_pass,
                width,
            };
            // (shape, perm, the transpose's rows and columns, whether they are multiples of 4)
            for (shape, perm, aligned) in [
                (&[67, 131][..], &[1, 0][..], false),
                (&[200, 33][..], &[1, 0][..], false),
                (&[2, 37, 5, 11][..], &NCHW_TO_NHWC[..], false),
                (&[68, 132][..], &[1, 0][..], true),
                (&[36, 200][..], &[1, 0][..], true),
                (&[2, 36, 4, 5][..], &NCHW_TO_NHWC[..], true),
                (&[3, 4, 7, 12][..], &NHWC_TO_NCHW[..], true),
            ] {
                let x = Tensor::empty(ctx, shape, DType::F32)?;
                let (r, c) = if perm.len() == 2 {
                    (shape[0], shape[1])
                } else if perm == NCHW_TO_NHWC {
                    (shape[1], shape[2] * shape[3])
                } else {
                    (shape[1] * shape[2], shape[3])
                };
                let want = if aligned { width } else { 1 };
                assert_eq!(tiling.width_for(r, c, &x, &x), want, "{shape:?} {tiling:?}");
                for dtype in dtypes(ctx) {
                    seed += 1;
                    check_with(ctx, shape, perm, dtype, tiling, seed)?;
                }
            }
        }
        // A tiling that does not divide is refused.
        let bad = TransposeTiling {
            rows_per_pass: 5,
            ..TransposeTiling::DEFAULT
        };
        expect_err(
            "tiling",
            check_with(ctx, &[4, 4], &[1, 0], DType::F32, bad, 1),
            |e| matches!(e, Error::InvalidArgument { .. }),
        )
    });
}

#[test]
fn nchw_nhwc_both_ways_odd_sizes() {
    on_every_adapter("layout_nchw", |ctx| {
        let mut seed = 0;
        for dtype in dtypes(ctx) {
            for shape in [
                [1, 3, 5, 7],
                [2, 33, 9, 7],
                [3, 64, 8, 8],
                [1, 1, 1, 1],
                [2, 1, 31, 33],
                [2, 70, 1, 1],
                // C and H·W multiples of 4, not of the tile.
                [2, 36, 9, 12],
                [1, 132, 12, 11],
            ] {
                seed += 1;
                check(ctx, &shape, &NCHW_TO_NHWC, dtype, seed)?;
                check(ctx, &shape, &NHWC_TO_NCHW, dtype, seed)?;
            }
        }
        Ok(())
    });
}

#[test]
fn transposes_and_general_permutes() {
    on_every_adapter("layout_permutes", |ctx| {
        check(ctx, &[1, 1], &[1, 0], DType::F32, 1)?;
        check(ctx, &[67, 131], &[1, 0], DType::F32, 2)?;
        check(ctx, &[5, 32, 64], &[0, 2, 1], DType::F32, 3)?;
        check(ctx, &[132, 260], &[1, 0], DType::F32, 11)?; // tail tiles both ways
        check(ctx, &[2, 3, 4, 5, 6, 7], &[5, 3, 1, 0, 2, 4], DType::F32, 4)?;
        check(ctx, &[7, 1, 3, 1, 5], &[4, 3, 2, 1, 0], DType::F32, 5)?;
        check(ctx, &[2, 3, 4], &[0, 1, 2], DType::F32, 6)?; // identity
        check(ctx, &[2, 0, 4], &[2, 0, 1], DType::F32, 7)?; // zero-size
        check(ctx, &[], &[], DType::F32, 8) // a scalar
    });
}

#[test]
fn more_tiles_than_one_grid_dimension() {
    on_every_adapter_with(
        "layout_folded_grid",
        |a| with_limits(a, |l| l.max_compute_workgroups_per_dimension = 4),
        |ctx| {
            check(ctx, &[3, 70, 100], &[0, 2, 1], DType::F32, 9)?; // 3·3·4 = 36 tiles
            check(ctx, &[3, 40, 100], &[2, 0, 1], DType::F32, 10) // general kernel, 47 workgroups
        },
    );
}

#[test]
fn bad_inputs_give_typed_errors() {
    on_every_adapter("layout_bad_inputs", |ctx| {
        let x = Tensor::empty(ctx, &[2, 3, 4], DType::F32)?;
        let y = Tensor::empty(ctx, &[4, 3, 2], DType::F32)?;
        let invalid = |e: &Error| matches!(e, Error::InvalidArgument { .. });
        expect_err("perm", layout::permute(ctx, &x, &[0, 0, 1], &y), invalid)?;
        expect_err("perm", layout::permute(ctx, &x, &[0, 1], &y), invalid)?;
        expect_err("out", layout::permute(ctx, &x, &[0, 2, 1], &y), |e| {
            matches!(e, Error::Shape { .. })
        })?;
        expect_err("alias", layout::permute(ctx, &x, &[0, 1, 2], &x), invalid)
    });
}

fn shape_and_perm() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    proptest::collection::vec(1usize..9, 1..=6).prop_flat_map(|shape| {
        let n = shape.len();
        (Just(shape), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, failure_persistence: None, max_shrink_iters: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_permutes_are_exact((shape, perm) in shape_and_perm(), seed in 0u64..1000) {
        on_every_adapter("layout_proptest", |ctx| check(ctx, &shape, &perm, DType::F32, seed));
    }
}
