//! Sampling on the GPU (`ridge::kernels::sample`) against its f64 reference: the kept set of
//! top-k and top-p, the draw's walk, the penalty's marks, the generator, bad input.

use ridge::core::{DType, Error, Result, Tensor};
use ridge::kernels::argmax::NON_FINITE;
use ridge::kernels::sample::{self, SampleSpec, Sampler};

use crate::harness::*;

fn spec(temperature: f32, top_k: usize, top_p: f32, repetition_penalty: f32) -> SampleSpec {
    SampleSpec {
        temperature,
        top_k,
        top_p,
        repetition_penalty,
        seed: 7,
    }
}

/// Logits of `vocab` tokens: `spread` wide, with `peaks` tokens lifted `lift` above the rest
/// (a trained model's few likely tokens; spread 2 and no peak: flat, every token a
/// candidate, the multisection's path).
fn logits(seed: u64, vocab: usize, spread: f32, peaks: usize, lift: f32) -> Vec<f32> {
    let mut x = random(seed, vocab, -spread, 0.0);
    let picks = random(seed + 1, peaks, 0.0, vocab as f32);
    let lifts = random(seed + 2, peaks, 0.0, 3.0);
    for (p, l) in picks.iter().zip(&lifts) {
        x[*p as usize] = lift + l;
    }
    x
}

/// The pick of every case is among the reference's ids for a draw and a top-p cut moved by up
/// to 1e-4 of the mass (the kernel sums in f32), one id unless the decision lies that close to
/// flipping, at most 64 (a flat vocabulary's neighbours in the walk): peaked logits (the candidates
/// decide, the walk in descending order), a few hundred candidates, flat logits (more
/// candidates than the 1024 the pick sorts: multisection, the walk in id order), a vocabulary
/// of one and of three, top-k alone, top-p alone, both, every token, temperature 0 with a
/// penalty (the largest penalized logit), penalized ids among the likely ones.
#[test]
fn sampling_picks_as_its_reference() {
    on_every_adapter("sample", |ctx| {
        let specs = [
            spec(0.7, 0, 0.9, 1.1),
            spec(1.0, 40, 1.0, 1.0),
            spec(1.3, 50, 0.8, 1.2),
            spec(1.0, 0, 1.0, 1.0),
            spec(0.5, 0, 0.5, 1.0),
            spec(0.0, 0, 1.0, 1.3),
            spec(0.9, 3, 1.0, 1.0),
        ];
        let draws = [0.0, 0.13, 0.5, 0.77, 0.9999];
        let mut exact = 0;
        let mut total = 0;
        for dtype in dtypes(ctx) {
            for (case, (vocab, spread, peaks, lift)) in [
                (49_159, 12.0, 6, 4.0),
                (1000, 25.0, 0, 0.0),
                (2003, 25.0, 0, 0.0),
                (4099, 2.0, 0, 0.0),
                (1, 1.0, 0, 0.0),
                (3, 3.0, 0, 0.0),
            ]
            .into_iter()
            .enumerate()
            {
                let x = logits(40 + case as u64, vocab, spread, peaks, lift);
                let (t, xv) = upload(ctx, &x, &[1, vocab], dtype)?;
                let likely = ridge::kernels::argmax::reference(&xv, vocab)[0];
                let seen = [likely, (vocab as u32 - 1) / 2, vocab as u32 - 1];
                for s in &specs {
                    // The sampler's buffers may come back from the pool holding old values.
                    let stale = Tensor::empty(ctx, &[vocab.div_ceil(4) * 4], DType::F32)?;
                    stale.poison(ctx);
                    drop(stale);
                    let sampler = Sampler::new(ctx, vocab, *s, &seen)?;
                    // Each pick marks its id for the penalty of the picks after it.
                    let mut marked = seen.to_vec();
                    for &u in &draws {
                        let ids = poisoned(ctx, &[1], DType::U32)?;
                        sampler.sample_with_draw(ctx, &t, u, &ids)?;
                        let got = block(ids.to_vec::<u32>(ctx))?[0];
                        let want = sample::reference(&xv, s, &marked, u as f64, 1e-4);
                        if s.repetition_penalty != 1.0 {
                            marked.push(got);
                        }
                        total += 1;
                        if want.len() == 1 {
                            exact += 1;
                        }
                        if !want.contains(&got) || want.len() > 64 {
                            return Err(Error::invalid(
                                "sample",
                                format!(
                                    "{dtype} vocabulary {vocab} (spread {spread}, {peaks} peaks) {s:?} u {u}: {got}, not among {want:?}"
                                ),
                            ));
                        }
                    }
                }
            }
        }
        // The peaked and few-hundred-candidate cases decide one id (a third of the picks).
        if exact * 3 < total {
            return Err(Error::invalid(
                "sample",
                format!("only {exact} of {total} picks decided one id"),
            ));
        }
        Ok(())
    });
}

/// The generator: step t's pick is the reference's for the host twin of the shader's draw
/// (`sample::draw`), so a seed gives the same stream of picks; the penalty's marks persist
/// from one step to the next on the GPU (at temperature 0 with a penalty, the same logits
/// give the largest, then the second largest once the first is marked).
#[test]
fn sampling_steps_follow_the_generator_and_mark_their_picks() {
    on_every_adapter("sample", |ctx| {
        let vocab = 3001;
        let x = logits(77, vocab, 8.0, 12, 3.0);
        let t = Tensor::from_slice(ctx, &x, &[vocab])?;
        let s = spec(0.8, 0, 0.95, 1.0);
        let sampler = Sampler::new(ctx, vocab, s, &[])?;
        let mut distinct = std::collections::HashSet::new();
        for step in 0..24u32 {
            let ids = poisoned(ctx, &[1], DType::U32)?;
            sampler.sample(ctx, &t, step, &ids)?;
            let got = block(ids.to_vec::<u32>(ctx))?[0];
            let u = sample::draw(s.seed, step) as f64;
            let want = sample::reference(&x, &s, &[], u, 1e-4);
            if !want.contains(&got) {
                return Err(Error::invalid(
                    "sample",
                    format!("step {step}: {got}, not among {want:?}"),
                ));
            }
            distinct.insert(got);
        }
        if distinct.len() < 3 {
            return Err(Error::invalid(
                "sample",
                format!("24 steps drew only {distinct:?}"),
            ));
        }
        // Marks.
        let mut x = random(78, vocab, -5.0, 0.0);
        x[100] = 10.0;
        x[2000] = 9.0;
        let t = Tensor::from_slice(ctx, &x, &[vocab])?;
        let greedy = Sampler::new(ctx, vocab, spec(0.0, 0, 1.0, 2.0), &[])?;
        let mut picks = Vec::new();
        for step in 0..2 {
            let ids = poisoned(ctx, &[1], DType::U32)?;
            greedy.sample(ctx, &t, step, &ids)?;
            picks.push(block(ids.to_vec::<u32>(ctx))?[0]);
        }
        if picks != [100, 2000] {
            return Err(Error::invalid(
                "sample",
                format!("penalized greedy picks {picks:?}"),
            ));
        }
        Ok(())
    });
}

/// Temperatures near 0 (1/T past f32's range) and penalties whose products pass it pick
/// their limits — the largest logit; the boosted seen token; the next largest when the
/// largest is sunk — never the non-finite id (which blamed the model's weights).
#[test]
fn sampling_takes_extreme_temperatures_and_penalties_to_their_limits() {
    on_every_adapter("sample", |ctx| {
        let vocab = 3001;
        let mut x = random(21, vocab, -3.0, 3.0);
        x[1234] = 5.0; // the largest
        x[77] = 4.999; // next, within 1e-3
        x[2999] = 2.5; // positive, boosted by a tiny penalty
        let t = Tensor::from_slice(ctx, &x, &[vocab])?;
        for (s, seen, want) in [
            (spec(1e-45, 0, 1.0, 1.0), vec![], 1234u32),
            (spec(1e-38, 0, 0.9, 1.0), vec![], 1234),
            (spec(1e-30, 40, 1.0, 1.0), vec![], 1234),
            (spec(0.0, 0, 1.0, 1e-39), vec![2999], 2999),
            (spec(1.0, 0, 0.9, 1e-39), vec![2999], 2999),
            (spec(0.0, 0, 1.0, 3e38), vec![1234], 77),
            (spec(1e-40, 0, 1.0, 3e38), vec![1234, 5], 77),
        ] {
            // A fresh sampler a step: a penalized pick marks its id for the steps after it.
            for step in 0..4 {
                let sampler = Sampler::new(ctx, vocab, s, &seen)?;
                let ids = poisoned(ctx, &[1], DType::U32)?;
                sampler.sample(ctx, &t, step, &ids)?;
                let got = block(ids.to_vec::<u32>(ctx))?[0];
                if got != want {
                    return Err(Error::invalid(
                        "sample",
                        format!("{s:?} seen {seen:?}, step {step}: {got}, not {want}"),
                    ));
                }
            }
        }
        Ok(())
    });
}

/// NaN or ±∞ anywhere gives the non-finite id; bad shapes, dtypes, parameters, seen ids and
/// draws are refused before any dispatch.
#[test]
fn sampling_refuses_non_finite_logits_and_bad_input() {
    on_every_adapter("sample", |ctx| {
        let vocab = 2500;
        let s = spec(1.0, 0, 0.9, 1.0);
        let sampler = Sampler::new(ctx, vocab, s, &[3])?;
        for (at, bad) in [
            (0, f32::NAN),
            (2499, f32::INFINITY),
            (1234, f32::NEG_INFINITY),
        ] {
            let mut x = random(5, vocab, -3.0, 3.0);
            x[at] = bad;
            let t = Tensor::from_slice(ctx, &x, &[vocab])?;
            let ids = poisoned(ctx, &[1], DType::U32)?;
            sampler.sample(ctx, &t, 0, &ids)?;
            let got = block(ids.to_vec::<u32>(ctx))?[0];
            if got != NON_FINITE {
                return Err(Error::invalid("sample", format!("{bad} at {at}: {got}")));
            }
        }
        let t = Tensor::from_slice(ctx, &random(6, vocab, -3.0, 3.0), &[vocab])?;
        let ids = Tensor::empty(ctx, &[1], DType::U32)?;
        let bad = |r: Result<()>, what: &str| {
            expect_err(what, r, |e| {
                matches!(
                    e,
                    Error::InvalidArgument { .. } | Error::Shape { .. } | Error::DType { .. }
                )
            })
        };
        let short = Tensor::from_slice(ctx, &random(7, vocab - 1, -3.0, 3.0), &[vocab - 1])?;
        bad(sampler.sample(ctx, &short, 0, &ids), "short logits")?;
        let two = Tensor::empty(ctx, &[2], DType::U32)?;
        bad(sampler.sample(ctx, &t, 0, &two), "two ids")?;
        let f_ids = Tensor::empty(ctx, &[1], DType::F32)?;
        bad(sampler.sample(ctx, &t, 0, &f_ids), "f32 ids")?;
        bad(sampler.sample_with_draw(ctx, &t, 1.0, &ids), "draw 1")?;
        bad(
            sampler.sample_with_draw(ctx, &t, f32::NAN, &ids),
            "draw NaN",
        )?;
        for (what, s) in [
            ("temperature -1", spec(-1.0, 0, 1.0, 1.0)),
            ("temperature NaN", spec(f32::NAN, 0, 1.0, 1.0)),
            ("top-p 0", spec(1.0, 0, 0.0, 1.0)),
            ("top-p 1.5", spec(1.0, 0, 1.5, 1.0)),
            ("penalty 0", spec(1.0, 0, 1.0, 0.0)),
        ] {
            bad(Sampler::new(ctx, vocab, s, &[]).map(|_| ()), what)?;
        }
        bad(Sampler::new(ctx, 0, s, &[]).map(|_| ()), "no vocabulary")?;
        bad(
            Sampler::new(ctx, vocab, s, &[vocab as u32]).map(|_| ()),
            "seen id outside",
        )?;
        Ok(())
    });
}
