//! The decoder's own kernels against their f64 references: RoPE with the KV-cache append,
//! causal grouped-query attention over a KV cache (one span and split across workgroups),
//! and argmax.

use ridge::core::{Context, DType, Error, Result, Tensor};
use ridge::kernels::argmax;
use ridge::kernels::{KvAttention, KvLoads, PairLayout, RopeQkv, RopeTable};

use crate::harness::*;

#[test]
fn rope_rotates_q_and_k_and_appends_k_and_v() {
    on_every_adapter("rope_qkv", |ctx| {
        for dtype in dtypes(ctx) {
            for layout in [PairLayout::Adjacent, PairLayout::Halves] {
                // SmolLM2's heads (9 over 3, width 64) and an odd little one (3 over 1, 6).
                for (t, nh, nkv, dh, pos0) in
                    [(5, 9, 3, 64, 0), (1, 9, 3, 64, 4090), (7, 3, 1, 6, 11)]
                {
                    let capacity = pos0 + t + 3;
                    let base = 100_000.0;
                    let table = RopeTable::new(ctx, capacity, dh, base)?;
                    let op = RopeQkv {
                        tokens: t,
                        heads: nh,
                        kv_heads: nkv,
                        head_dim: dh,
                        pos0,
                        layout,
                    };
                    let n = t * (nh + 2 * nkv) * dh;
                    let (qkv, xv) =
                        upload(ctx, &random(3, n, -2.0, 2.0), &[t, nh + 2 * nkv, dh], dtype)?;
                    let q = poisoned(ctx, &[t, nh, dh], dtype)?;
                    let kc = poisoned(ctx, &[capacity, nkv, dh], dtype)?;
                    let vc = poisoned(ctx, &[capacity, nkv, dh], dtype)?;
                    op.run(ctx, &qkv, &table, &q, &kc, &vc)?;
                    let (wq, wk, wv) = op.reference(&xv, base);
                    let rows = pos0 * nkv * dh..(pos0 + t) * nkv * dh;
                    let kg = block(kc.to_f32(ctx))?[rows.clone()].to_vec();
                    let vg = block(vc.to_f32(ctx))?[rows].to_vec();
                    let qg = block(q.to_f32(ctx))?;
                    let what = format!("{layout:?} t={t} nh={nh} dh={dh} pos0={pos0} {dtype}");
                    let bound = |want: &[f32], i: usize| {
                        // Each output mixes two inputs of magnitude < 2.
                        RopeQkv::error_bound(dtype, 2.0, 2.0, want[i])
                    };
                    assert_close(&format!("q {what}"), &qg, &wq, |i| bound(&wq, i))?;
                    assert_close(&format!("k {what}"), &kg, &wk, |i| bound(&wk, i))?;
                    assert_close(&format!("v {what}"), &vg, &wv, |_| 0.0)?;
                }
            }
        }
        Ok(())
    });
}

/// Attention of `tokens` queries from position `pos0` with (query heads, KV heads, head width).
fn kv_op(
    tokens: usize,
    pos0: usize,
    (heads, kv_heads, head_dim): (usize, usize, usize),
) -> KvAttention {
    KvAttention {
        tokens,
        heads,
        kv_heads,
        head_dim,
        pos0,
    }
}

fn attention_case(ctx: &Context, op: KvAttention, dtype: DType, seed: u64) -> Result<()> {
    let (nh, nkv, dh) = (op.heads, op.kv_heads, op.head_dim);
    let capacity = op.context() + 5;
    let kv_len = op.context() * nkv * dh;
    // Cache rows past the context are poisoned: the kernel must never read them.
    let mut kvals = random(seed, kv_len, -1.0, 1.0);
    let mut vvals = random(seed + 1, kv_len, -1.0, 1.0);
    let pad = vec![f32::NAN; (capacity - op.context()) * nkv * dh];
    kvals.extend(&pad);
    vvals.extend(&pad);
    let (kc, kv) = upload(ctx, &kvals, &[capacity, nkv, dh], dtype)?;
    let (vc, vv) = upload(ctx, &vvals, &[capacity, nkv, dh], dtype)?;
    // Large queries make peaked softmaxes: the trap is an unstable exp.
    let (q, qv) = upload(
        ctx,
        &random(seed + 2, op.tokens * nh * dh, -4.0, 4.0),
        &[op.tokens, nh, dh],
        dtype,
    )?;
    let out = poisoned(ctx, &[op.tokens, nh, dh], dtype)?;
    op.run(ctx, &q, &kc, &vc, &out)?;
    let got = block(out.to_f32(ctx))?;
    let want = op.reference(&qv, &kv[..kv_len], &vv[..kv_len]);
    let score_max = 4.0 * dh as f64 / (dh as f64).sqrt();
    let tensor_cores = op.on_tensor_cores(ctx, dtype);
    assert_close("kv_attention", &got, &want, |i| {
        op.error_bound(dtype, tensor_cores, 1.0, score_max, want[i])
    })
    .map_err(|e| {
        Error::invalid(
            "kv_attention",
            format!(
                "{op:?} {dtype} spans {:?}, tensor cores {tensor_cores}: {e}",
                op.split(ctx.is_cpu_driver())
            ),
        )
    })
}

#[test]
fn kv_attention_prefill_and_decode_split_and_whole() {
    on_every_adapter("kv_attention", |ctx| {
        let mut seed = 40;
        let dtypes = dtypes(ctx);
        for (d, &dtype) in dtypes.iter().enumerate() {
            // Decode at depths of one tile, one wide tile (256) and a part, exactly two (the
            // widest without a split), one past them (spans of 128), a few spans, and past 64
            // spans of 128 (four KV heads want 64: spans of two tiles, the last ragged);
            // prefills whole, split, and long. Heads: SmolLM2's 9 over 3 (one quad of
            // heads), plain multi-head, a width of 80 (20 quads: 3 key lanes, 4 idle), 5 per
            // KV head and 8 (two quads), 128 (two rounds of value loads), 16 (16 key lanes)
            // and 260 (a row in 5 rounds of key loads, two quads an invocation).
            for (tokens, pos0) in [
                (1, 0),
                (1, 1),
                (1, 200),
                (1, 300),
                (1, 511),
                (1, 512),
                (1, 1500),
                (1, 9000),
                (13, 0),
                (17, 50),
                (130, 3),
                // Where the tensor cores take prompts (f16): one whole query tile from 0, and
                // from a ragged position (keys not whole tiles of 32).
                (64, 0),
                (97, 40),
                // Keys split into spans of 256 and merged (tensor cores): two spans, the
                // second ragged, and four from a cached prefix (early query tiles' late
                // spans hold no visible key).
                (200, 300),
                (70, 700),
            ] {
                for (heads, (nh, nkv, dh)) in [
                    (9, 3, 64),
                    (4, 4, 32),
                    (6, 2, 80),
                    (10, 2, 64),
                    (8, 1, 32),
                    (4, 2, 128),
                    (4, 4, 16),
                    (2, 1, 260),
                ]
                .into_iter()
                .enumerate()
                {
                    seed += 1;
                    // The heads are compiled in: on a CPU driver each set of heads runs in
                    // one dtype, so every depth and every set of heads still runs.
                    if !in_turn(ctx, heads, d, dtypes.len()) {
                        continue;
                    }
                    attention_case(ctx, kv_op(tokens, pos0, (nh, nkv, dh)), dtype, seed)?;
                }
            }
        }
        Ok(())
    });
}

/// Every way of loading the cache on every adapter (a GPU's, with key rows shared by four
/// lanes or not, and a CPU driver's), whichever the adapter takes: decode within one wide
/// tile, past it, split, and a prompt; head widths a multiple of 16 (rows shared by four
/// lanes: quads split evenly, one and two rounds of loads, and 80: five quads a lane, the
/// second round part-empty) and 36 (not a multiple of 16: a lane a row either way).
#[test]
fn kv_attention_each_way_of_loading_keys() {
    on_every_adapter("kv_attention_loads", |ctx| {
        let mut seed = 900;
        for loads in [KvLoads::GPU_SHARED_ROWS, KvLoads::GPU, KvLoads::CPU] {
            KvLoads::forced(Some(loads), || -> Result<()> {
                for (tokens, pos0) in [(1, 0), (1, 130), (1, 300), (1, 700), (5, 20)] {
                    for (nh, nkv, dh) in [(9, 3, 64), (4, 2, 128), (6, 2, 80), (3, 1, 36)] {
                        seed += 1;
                        let op = kv_op(tokens, pos0, (nh, nkv, dh));
                        attention_case(ctx, op, DType::F32, seed).map_err(|e| {
                            Error::invalid("kv_attention", format!("{loads:?}: {e}"))
                        })?;
                    }
                }
                Ok(())
            })?;
        }
        Ok(())
    });
}

#[test]
fn kv_attention_refuses_what_it_cannot_run() {
    on_every_adapter("kv_attention_errors", |ctx| {
        let q = Tensor::empty(ctx, &[1, 9, 64], DType::F32)?;
        let kc = Tensor::empty(ctx, &[8, 3, 64], DType::F32)?;
        let out = Tensor::empty(ctx, &[1, 9, 64], DType::F32)?;
        let op = KvAttention {
            tokens: 1,
            heads: 9,
            kv_heads: 3,
            head_dim: 64,
            pos0: 8,
        };
        expect_err(
            "past the cache",
            op.run(ctx, &q, &kc, &kc.clone(), &out),
            |e| matches!(e, Error::Shape { .. }),
        )?;
        let odd = KvAttention {
            heads: 2,
            kv_heads: 1,
            head_dim: 30,
            ..op
        };
        let q30 = Tensor::empty(ctx, &[1, 2, 30], DType::F32)?;
        let kc30 = Tensor::empty(ctx, &[16, 1, 30], DType::F32)?;
        expect_err(
            "a head width of 30",
            odd.run(ctx, &q30, &kc30, &kc30.clone(), &q30.clone()),
            |e| matches!(e, Error::Shape { .. }),
        )?;
        let wide = KvAttention {
            heads: 64,
            kv_heads: 1,
            head_dim: 64,
            pos0: 0,
            ..op
        };
        let q = Tensor::empty(ctx, &[1, 64, 64], DType::F32)?;
        let kc = Tensor::empty(ctx, &[8, 1, 64], DType::F32)?;
        expect_err(
            "64 heads per KV head",
            wide.run(ctx, &q, &kc, &kc.clone(), &q.clone()),
            |e| matches!(e, Error::InvalidArgument { .. }),
        )?;
        Ok(())
    });
}

/// Rows longer than a chunk ([`argmax::CHUNK`]) run in two passes (a partial per chunk, then
/// their merge): ties across chunks and within one invocation's strided scan, the last
/// column, a NaN and an infinity in a later chunk than the maximum, rows of one value, a
/// chunk and a value past it. The ids start poisoned.
#[test]
fn argmax_picks_the_first_maximum_and_flags_non_finite_rows() {
    on_every_adapter("argmax", |ctx| {
        for dtype in dtypes(ctx) {
            let cols = 49_152 + 7;
            let mut x = random(9, 5 * cols, -10.0, 10.0);
            x[cols + 9000] = 50.0; // row 1: a tie across chunks, the first wins
            x[cols + 5] = 50.0;
            x[cols + 5 + 3 * 256] = 50.0; // ties later in one invocation's strided scan
            x[cols + 5 + 8 * 256] = 50.0;
            x[2 * cols + cols - 1] = 60.0; // row 2: the last column (a chunk of 7)
            x[3 * cols + 17] = 60.0; // row 3: NaN in a later chunk than the maximum
            x[3 * cols + 30_000] = f32::NAN;
            x[4 * cols + cols - 2] = f32::INFINITY; // row 4: +inf
            let (t, xv) = upload(ctx, &x, &[5, cols], dtype)?;
            let ids = Tensor::from_slice(ctx, &[7u32; 5], &[5])?;
            argmax::argmax(ctx, &t, &ids)?;
            let got = block(ids.to_vec::<u32>(ctx))?;
            let want = argmax::reference(&xv, cols);
            let none = argmax::NON_FINITE;
            if got != want || got[1] != 5 || got[2] != cols as u32 - 1 || got[3..] != [none; 2] {
                return Err(Error::invalid(
                    "argmax",
                    format!("{dtype}: {got:?} vs {want:?}"),
                ));
            }
            // Rows of one pass (shorter than a workgroup, one chunk) and of two (a value past
            // a chunk).
            let chunk = argmax::CHUNK;
            for cols in [1, 3, 300, chunk, chunk + 1, 3 * chunk - 1] {
                let x = random(10 + cols as u64, 2 * cols, -10.0, 10.0);
                let (t, xv) = upload(ctx, &x, &[2, cols], dtype)?;
                let ids = Tensor::from_slice(ctx, &[7u32; 2], &[2])?;
                argmax::argmax(ctx, &t, &ids)?;
                let got = block(ids.to_vec::<u32>(ctx))?;
                let want = argmax::reference(&xv, cols);
                if got != want {
                    return Err(Error::invalid(
                        "argmax",
                        format!("{dtype} {cols} columns: {got:?} vs {want:?}"),
                    ));
                }
            }
        }
        Ok(())
    });
}
