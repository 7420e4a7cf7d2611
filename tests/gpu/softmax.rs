//! Softmax against the f64 reference: masks, large magnitudes, fully masked rows.

use proptest::prelude::*;
use ridge::core::{Context, DType, Error, Result, Tensor};
use ridge::kernels::Softmax;

use crate::harness::*;

fn check(ctx: &Context, sm: Softmax, dtype: DType, x: &[f32], mask: Option<&[f32]>) -> Result<()> {
    let (xt, xv) = upload(ctx, x, &[sm.rows, sm.cols], dtype)?;
    let mask_t = match mask {
        Some(m) => Some(upload(ctx, m, &[m.len() / sm.cols.max(1), sm.cols], dtype)?),
        None => None,
    };
    let y = poisoned(ctx, &[sm.rows, sm.cols], dtype)?;
    sm.run(ctx, &xt, mask_t.as_ref().map(|m| &m.0), &y)?;
    let got = block(y.to_f32(ctx))?;
    let want = sm.reference(&xv, mask_t.as_ref().map(|m| m.1.as_slice()));
    assert_close("softmax", &got, &want, |i| sm.error_bound(dtype, want[i]))
        .map_err(|e| Error::invalid("softmax", format!("{sm:?} {dtype}: {e}")))
}

#[test]
fn odd_shapes_and_scales() {
    on_every_adapter("softmax_shapes", |ctx| {
        let mut seed = 0;
        for dtype in dtypes(ctx) {
            for (rows, cols) in [
                (1, 1),
                (2, 2),
                (3, 7),
                (5, 255),
                (2, 256),
                (3, 257),
                (7, 1000),
                (2, 4096),
                (2, 4099),
            ] {
                seed += 10;
                let sm = Softmax {
                    scale: 0.125,
                    ..Softmax::new(rows, cols)
                };
                check(ctx, sm, dtype, &random(seed, rows * cols, -8.0, 8.0), None)?;
            }
        }
        Ok(())
    });
}

#[test]
fn large_magnitudes_are_stable() {
    on_every_adapter("softmax_large", |ctx| {
        let cols = 300;
        let mut x = random(5, 4 * cols, -1000.0, 1000.0);
        x[cols + 3] = -3e38; // a huge negative value next to ordinary ones
        x[2 * cols..3 * cols].fill(-3e38); // a whole row at -3e38: uniform, not NaN
        x[3 * cols + 7] = 3e38; // one huge positive value takes everything
        check(ctx, Softmax::new(4, cols), DType::F32, &x, None)
    });
}

#[test]
fn masks_padding_and_fully_masked_rows() {
    on_every_adapter("softmax_masked", |ctx| {
        // Attention-style: scores [batch 2, heads 3, queries 4, keys], mask [2, keys]; 36
        // keys run the vec4 kernel with padding that ends inside one vec4 and fills the next.
        for keys in [37, 36] {
            let (batch, group) = (2, 3 * 4);
            let mut mask = vec![0f32; batch * keys];
            mask[30..keys].fill(f32::NEG_INFINITY); // batch 0: the last keys are padding
            mask[keys..].fill(f32::NEG_INFINITY); // batch 1: every key masked
            mask[keys + 5] = -2.5; // an ordinary additive bias among -inf
            mask[keys + 5] = f32::NEG_INFINITY;
            for dtype in dtypes(ctx) {
                let sm = Softmax {
                    rows: batch * group,
                    cols: keys,
                    scale: 0.5,
                    mask_group: group,
                };
                check(
                    ctx,
                    sm,
                    dtype,
                    &random(9, batch * group * keys, -4.0, 4.0),
                    Some(&mask),
                )?;
                // The fully masked batch must be exactly zero.
                let x = Tensor::from_slice(
                    ctx,
                    &random(9, batch * group * keys, -4.0, 4.0),
                    &[batch * group, keys],
                )?;
                let m = Tensor::from_slice(ctx, &mask, &[batch, keys])?;
                let y = poisoned(ctx, &[batch * group, keys], DType::F32)?;
                sm.run(ctx, &x, Some(&m), &y)?;
                let got = block(y.to_f32(ctx))?;
                if got[group * keys..].iter().any(|&v| v != 0.0) {
                    return Err(Error::invalid(
                        "softmax",
                        format!("a fully masked row of {keys} keys is not all zeros"),
                    ));
                }
            }
        }
        // Additive (finite) masks are added, not treated as masking.
        let mask: Vec<f32> = random(11, 3 * 10, -5.0, 5.0);
        check(
            ctx,
            Softmax {
                rows: 6,
                cols: 10,
                scale: 1.0,
                mask_group: 2,
            },
            DType::F32,
            &random(12, 60, -1.0, 1.0),
            Some(&mask),
        )
    });
}

#[test]
fn more_rows_than_one_grid_dimension() {
    on_every_adapter_with(
        "softmax_folded_grid",
        |a| with_limits(a, |l| l.max_compute_workgroups_per_dimension = 4),
        |ctx| {
            check(
                ctx,
                Softmax::new(63, 19),
                DType::F32,
                &random(4, 63 * 19, -3.0, 3.0),
                None,
            )
        },
    );
}

#[test]
fn bad_inputs_give_typed_errors() {
    on_every_adapter("softmax_bad_inputs", |ctx| {
        let t = |shape: &[usize]| Tensor::empty(ctx, shape, DType::F32);
        let sm = Softmax::new(4, 8);
        let (x, y) = (t(&[4, 8])?, t(&[4, 8])?);
        let shape = |e: &Error| matches!(e, Error::Shape { .. });
        expect_err("x", sm.run(ctx, &t(&[4, 9])?, None, &y), shape)?;
        expect_err("y", sm.run(ctx, &x, None, &t(&[8, 4])?), shape)?;
        expect_err("mask", sm.run(ctx, &x, Some(&t(&[3, 8])?), &y), shape)?;
        let grouped = Softmax {
            mask_group: 3,
            ..sm
        };
        expect_err("group", grouped.run(ctx, &x, Some(&t(&[1, 8])?), &y), shape)?;
        expect_err("alias", sm.run(ctx, &x, None, &x), |e| {
            matches!(e, Error::InvalidArgument { .. })
        })
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, failure_persistence: None, max_shrink_iters: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_rows_match_the_reference(rows in 1usize..20, cols in 1usize..600, magnitude in 0.1f32..200.0, seed in 0u64..1000) {
        on_every_adapter("softmax_proptest", |ctx| {
            check(ctx, Softmax::new(rows, cols), DType::F32, &random(seed, rows * cols, -magnitude, magnitude), None)
        });
    }
}
