//! Element-wise ops against the f64 reference, including a grid beyond 65,535 workgroups.

use ridge::core::{Context, DType, Error, Result, Tensor};
use ridge::kernels::{Binary, Unary, binary, unary};

use crate::harness::*;

fn check_unary(ctx: &Context, op: Unary, dtype: DType, shape: &[usize], seed: u64) -> Result<()> {
    let n = shape.iter().product();
    let (x, xv) = upload(ctx, &random(seed, n, -6.0, 6.0), shape, dtype)?;
    let y = poisoned(ctx, shape, dtype)?;
    unary(ctx, op, &x, &y)?;
    let want = op.reference(&xv);
    assert_close(op.name(), &block(y.to_f32(ctx))?, &want, |i| {
        op.error_bound(dtype, xv[i], want[i])
    })
    .map_err(|e| Error::invalid(op.name(), format!("{shape:?} {dtype}: {e}")))
}

fn check_binary(
    ctx: &Context,
    op: Binary,
    dtype: DType,
    shape: &[usize],
    b_shape: &[usize],
    seed: u64,
) -> Result<()> {
    let (n, nb) = (shape.iter().product(), b_shape.iter().product());
    let (a, av) = upload(ctx, &random(seed, n, -6.0, 6.0), shape, dtype)?;
    let (b, bv) = upload(ctx, &random(seed + 1, nb, -1.0, 1.0), b_shape, dtype)?;
    let out_shape = ridge::kernels::elementwise::broadcast_shape("test", shape, b_shape)?;
    let y = poisoned(ctx, &out_shape, dtype)?;
    binary(ctx, op, &a, &b, &y)?;
    let want = op.reference(&av, shape, &bv, b_shape)?;
    // GELU's bound depends on its argument, the sum.
    let x = Binary::Add.reference(&av, shape, &bv, b_shape)?;
    assert_close(op.name(), &block(y.to_f32(ctx))?, &want, |i| {
        op.error_bound(dtype, x[i], want[i])
    })
    .map_err(|e| Error::invalid(op.name(), format!("{shape:?} {b_shape:?} {dtype}: {e}")))
}

/// Broadcasts beyond a suffix, by strides: per-row values, outer sums, `a` broadcast over
/// `b`, size-1 dims in the middle, a scalar, empty dims, a 5-d case that merges to fewer.
#[test]
fn general_broadcasting_by_strides() {
    on_every_adapter("elementwise_broadcast", |ctx| {
        let mut seed = 700;
        for dtype in dtypes(ctx) {
            for (a, b) in [
                (&[3usize, 385][..], &[3usize, 1][..]),
                (&[7, 1], &[1, 13]),
                (&[13], &[7, 13]),
                (&[2, 1, 5], &[3, 1]),
                (&[2, 5, 1001], &[5, 1]),
                (&[4, 1, 3, 1, 2], &[1, 5, 3, 7, 1]),
                (&[257], &[1]),
                (&[1], &[3, 5]),
                (&[0, 3], &[1, 3]),
                (&[6, 9], &[1, 1, 6, 9]),
            ] {
                seed += 10;
                for op in [Binary::Add, Binary::BiasGelu] {
                    check_binary(ctx, op, dtype, a, b, seed)?;
                    check_binary(ctx, op, dtype, b, a, seed + 5)?;
                }
            }
        }
        Ok(())
    });
}

#[test]
fn every_op_on_odd_sizes() {
    on_every_adapter("elementwise_sizes", |ctx| {
        let mut seed = 0;
        for dtype in dtypes(ctx) {
            // Lengths that are multiples of 4 run four elements per invocation, the rest one.
            for shape in [
                &[0usize][..],
                &[1],
                &[4],
                &[255],
                &[257],
                &[3, 384],
                &[3, 385],
                &[2, 5, 1000],
                &[2, 5, 1001],
            ] {
                seed += 10;
                for op in [Unary::Scale(-1.75), Unary::Gelu] {
                    check_unary(ctx, op, dtype, shape, seed)?;
                }
                let last = &shape[shape.len() - 1..];
                for op in [Binary::Add, Binary::BiasGelu] {
                    check_binary(ctx, op, dtype, shape, shape, seed)?; // residual
                    check_binary(ctx, op, dtype, shape, last, seed)?; // bias
                }
            }
        }
        Ok(())
    });
}

#[test]
fn gelu_matches_erf_over_its_whole_range() {
    on_every_adapter("elementwise_gelu_range", |ctx| {
        // Every f32 step of 1/64 from -20 to 20, where erf saturates on both sides.
        let xs: Vec<f32> = (-1280..=1280).map(|i| i as f32 / 64.0).collect();
        let x = Tensor::from_slice(ctx, &xs, &[xs.len()])?;
        let y = poisoned(ctx, &[xs.len()], DType::F32)?;
        unary(ctx, Unary::Gelu, &x, &y)?;
        let want = Unary::Gelu.reference(&xs);
        assert_close("gelu", &block(y.to_f32(ctx))?, &want, |i| {
            Unary::Gelu.error_bound(DType::F32, xs[i], want[i])
        })
    });
}

#[test]
fn more_than_65535_workgroups() {
    // 2^24 + 1 elements at 256 per workgroup is 65,537 workgroups: beyond one dimension on
    // every adapter, so the grid must fold into y.
    on_every_adapter("elementwise_65536_workgroups", |ctx| {
        let n = (1 << 24) + 1;
        let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
        let xt = Tensor::from_slice(ctx, &x, &[n])?;
        let y = poisoned(ctx, &[n], DType::F32)?;
        unary(ctx, Unary::Scale(2.0), &xt, &y)?;
        let got = block(y.to_vec::<f32>(ctx))?;
        match (0..n).find(|&i| got[i] != 2.0 * x[i]) {
            None => Ok(()),
            Some(i) => Err(Error::invalid(
                "scale",
                format!("element {i}: got {}, want {}", got[i], 2.0 * x[i]),
            )),
        }
    });
}

#[test]
fn bad_inputs_give_typed_errors() {
    on_every_adapter("elementwise_bad_inputs", |ctx| {
        let t = |shape: &[usize]| Tensor::empty(ctx, shape, DType::F32);
        let (a, y) = (t(&[4, 6])?, t(&[4, 6])?);
        let shape = |e: &Error| matches!(e, Error::Shape { .. });
        expect_err("b", binary(ctx, Binary::Add, &a, &t(&[4])?, &y), shape)?;
        expect_err("b", binary(ctx, Binary::Add, &a, &t(&[5, 6])?, &y), shape)?;
        // `out` must have the broadcast shape, not `a`'s.
        let row = t(&[1, 6])?;
        expect_err(
            "out",
            binary(ctx, Binary::Add, &row, &t(&[4, 1])?, &t(&[1, 6])?),
            shape,
        )?;
        // Alternating broadcast dims cannot merge: 19 dims are more than the kernel runs.
        let (ra, rb): (Vec<usize>, Vec<usize>) = (0..19)
            .map(|d| if d % 2 == 0 { (2, 1) } else { (1, 2) })
            .unzip();
        let out = t(&[2; 19])?;
        expect_err(
            "rank",
            binary(ctx, Binary::Add, &t(&ra)?, &t(&rb)?, &out),
            |e| matches!(e, Error::InvalidArgument { .. }),
        )?;
        expect_err("y", unary(ctx, Unary::Gelu, &a, &t(&[6, 4])?), shape)?;
        expect_err("alias", unary(ctx, Unary::Gelu, &a, &a), |e| {
            matches!(e, Error::InvalidArgument { .. })
        })?;
        if ctx.has_f16() {
            let h = Tensor::empty(ctx, &[4, 6], DType::F16)?;
            expect_err("dtype", binary(ctx, Binary::Add, &a, &h, &y), |e| {
                matches!(e, Error::DType { .. })
            })?;
        }
        Ok(())
    });
}

#[test]
fn bindings_over_the_limit_are_refused_before_dispatch() {
    on_every_adapter_with(
        "elementwise_binding_limit",
        |a| with_limits(a, |l| l.max_storage_buffer_binding_size = 1 << 16),
        |ctx| {
            let x = Tensor::empty(ctx, &[1 << 15], DType::F32)?; // 128 KiB
            let y = Tensor::empty(ctx, &[1 << 15], DType::F32)?;
            expect_err("binding", unary(ctx, Unary::Gelu, &x, &y), |e| {
                matches!(
                    e,
                    Error::LimitExceeded {
                        limit: "maxStorageBufferBindingSize",
                        ..
                    }
                )
            })
        },
    );
}
