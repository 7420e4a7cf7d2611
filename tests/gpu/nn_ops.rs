//! The ops a Transformer needs beyond the basics: embedding lookup and mean pooling.

use ridge::core::{DType, Error, Tensor};
use ridge::kernels::{MeanPool, embedding};

use crate::harness::*;

#[test]
fn embedding_gathers_rows_and_zeroes_bad_ids() {
    on_every_adapter("nn_embedding", |ctx| {
        for dtype in dtypes(ctx) {
            let (vocab, hidden) = (37, 19);
            let (table, tv) = upload(
                ctx,
                &random(1, vocab * hidden, -1.0, 1.0),
                &[vocab, hidden],
                dtype,
            )?;
            let ids_v: Vec<u32> = vec![0, 36, 5, 5, 99, 1, 17];
            let ids = Tensor::from_slice(ctx, &ids_v, &[7])?;
            let out = poisoned(ctx, &[7, hidden], dtype)?;
            embedding::gather(ctx, &table, &ids, &out)?;
            assert_close(
                "gather",
                &block(out.to_f32(ctx))?,
                &embedding::reference(&tv, hidden, &ids_v),
                |_| 0.0,
            )?;
        }
        let table = Tensor::empty(ctx, &[4, 3], DType::F32)?;
        let float_ids = Tensor::empty(ctx, &[2], DType::F32)?;
        expect_err(
            "ids dtype",
            embedding::gather(
                ctx,
                &table,
                &float_ids,
                &Tensor::empty(ctx, &[2, 3], DType::F32)?,
            ),
            |e| matches!(e, Error::DType { .. }),
        )
    });
}

#[test]
fn mean_pool_counts_only_valid_tokens() {
    on_every_adapter("nn_mean_pool", |ctx| {
        // Full, one token, empty, clamped; then whole steps of eight tokens, steps and a
        // tail of seven, fewer than a step.
        let cases: [(usize, [u32; 4]); 2] = [(9, [9, 1, 0, 20]), (37, [16, 23, 37, 7])];
        for dtype in dtypes(ctx) {
            for (normalize, (seq, len_v)) in [false, true]
                .into_iter()
                .zip(cases)
                .chain([(true, cases[0]), (false, cases[1])])
            {
                let pool = MeanPool {
                    batch: 4,
                    seq,
                    hidden: 300,
                    normalize,
                };
                let shape = [4, seq, 300];
                let (x, xv) = upload(ctx, &random(3, 4 * seq * 300, -2.0, 2.0), &shape, dtype)?;
                let lengths = Tensor::from_slice(ctx, &len_v, &[4])?;
                let out = poisoned(ctx, &[4, 300], dtype)?;
                pool.run(ctx, &x, &lengths, &out)?;
                let want = pool.reference(&xv, &len_v);
                assert_close("mean_pool", &block(out.to_f32(ctx))?, &want, |i| {
                    pool.error_bound(dtype, 2.0, want[i])
                })?;
            }
        }
        Ok(())
    });
}
