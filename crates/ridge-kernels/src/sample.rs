//! Sampling the next token on the GPU (`shaders/sample.wgsl`): a repetition penalty, a
//! temperature, top-k and top-p over one row of logits and a draw from a counter-based
//! generator, three dispatches, the id left in a u32 tensor. A sampled decode step then
//! feeds the next step as greedy decoding's argmax does: the host records step t + 1 while
//! the GPU runs step t and reads back 4 bytes, not the vocabulary's logits (the host's pick
//! after reading them back took 3–14 ms a token on the H100 machine: benches/NOTES.md,
//! 2026-12-05 third session).
//!
//! Semantics (those of Hugging Face `transformers`' logits processors, as the host sampler):
//! the penalty divides positive (multiplies negative) logits of the marked ids once each, the
//! temperature divides, top-k keeps the k largest (the softmax over them alone), top-p the
//! shortest prefix of the descending order whose probability reaches `top_p`. The draw:
//! where the kept tokens are decided by the candidates (every token whose weight relative to
//! the largest is at least 2^-12, up to 1024 of them: SmolLM2's first chat reply's logits have
//! 97 at temperature 0.7, 439 at 1), the
//! draw walks them in descending order as the host sampler does; else (flat logits) the kept
//! set is found by multisection on the weights, every token tied with the cut's weight kept,
//! and the draw walks the kept tokens in id order (the same distribution). Weights and sums
//! are f32 (the host sampler's f64); the draw has 24 bits.
//!
//! Shapes: logits `[vocab]` (or `[1, vocab]`), f32 or f16; ids u32 `[1]`. A row holding NaN or
//! ±∞ gives [`NON_FINITE`](crate::argmax::NON_FINITE).

use ridge_core::{Context, DType, Error, Result, Tensor};
use ridge_model::OpCost;

use crate::launch::{self, Launch, Params};
use crate::shaders::{self, SAMPLE, Variant};

/// Tokens a workgroup of the first two passes takes.
const BLOCK: usize = 1024;
/// Candidates the pick sorts.
pub const CAPACITY: usize = 1024;
/// A candidate's least weight relative to the largest logit's.
pub const TAU: f64 = 1.0 / 4096.0;

/// How the next token is chosen: the parameters of the host sampler (`ridge_nn::sampling`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SampleSpec {
    /// Divides the logits (> 0; 0 picks the largest penalized logit).
    pub temperature: f32,
    /// Keep the k largest (0: all).
    pub top_k: usize,
    /// Keep the shortest prefix of the descending order whose probability reaches it (1: all).
    pub top_p: f32,
    /// Divides positive (multiplies negative) logits of the marked ids (1: off).
    pub repetition_penalty: f32,
    /// Seed of the counter-based generator (the step is the counter).
    pub seed: u64,
}

impl SampleSpec {
    /// Errors with [`Error::InvalidArgument`] for a temperature below 0 or not finite,
    /// `top_p` outside (0, 1], a penalty ≤ 0 or not finite.
    pub fn validate(&self) -> Result<()> {
        let ok = self.temperature.is_finite()
            && self.temperature >= 0.0
            && self.top_p > 0.0
            && self.top_p <= 1.0
            && self.repetition_penalty.is_finite()
            && self.repetition_penalty > 0.0;
        if ok {
            Ok(())
        } else {
            Err(Error::invalid("sample", format!("bad parameters {self:?}")))
        }
    }

    /// The temperature's reciprocal and top-k the kernel runs: temperature 0 is top-k 1 at
    /// temperature 1 (the largest penalized logit, ties to the lowest id).
    fn kernel_terms(&self, vocab: usize) -> (f32, u32, f32) {
        if self.temperature == 0.0 {
            return (1.0, 1, 1.0);
        }
        let k = if self.top_k >= vocab { 0 } else { self.top_k };
        // 1 / T past f32's range (T below ~3e-39) is its largest value: the pick is then
        // the limit's, the largest logit, with no ∞ · 0 in the kernel.
        ((1.0 / self.temperature).min(f32::MAX), k as u32, self.top_p)
    }
}

/// The GPU buffers one generation's sampled steps share: the weights, the blocks' partial
/// results, the candidates and the penalty's marked ids (a bit each).
pub struct Sampler {
    spec: SampleSpec,
    vocab: usize,
    blocks: usize,
    weights: Tensor,
    part: Tensor,
    candidates: Tensor,
    seen: Tensor,
}

/// Cost of one pick: the logits read, the weights written and read back twice (three
/// passes), ~8 operations a token; more on the multisection's path.
pub fn cost(vocab: usize, dtype: DType) -> OpCost {
    let n = vocab as f64;
    OpCost::new(8.0 * n, n * (dtype.size() as f64 + 12.0) + 4.0)
}

impl Sampler {
    /// Buffers for sampling rows of `vocab` logits with `spec`, the ids of `seen` marked for
    /// the penalty (the prompt's; each pick marks its own).
    ///
    /// Errors: [`Error::InvalidArgument`] for a vocabulary of 0, bad parameters or a seen id
    /// outside the vocabulary; limit errors.
    pub fn new(ctx: &Context, vocab: usize, spec: SampleSpec, seen: &[u32]) -> Result<Self> {
        let name = "sample";
        spec.validate()?;
        if vocab == 0 {
            return Err(Error::invalid(name, "a vocabulary of 0 tokens"));
        }
        launch::fits_u32(name, "tokens", vocab)?;
        let blocks = vocab.div_ceil(BLOCK);
        let max = ctx.limits().max_compute_workgroups_per_dimension as usize;
        if blocks > max {
            return Err(Error::LimitExceeded {
                what: format!("{name}: {vocab} tokens"),
                limit: "maxComputeWorkgroupsPerDimension",
                requested: blocks as u64,
                allowed: max as u64,
            });
        }
        let mut mask = vec![0u32; vocab.div_ceil(32)];
        for &id in seen {
            if id as usize >= vocab {
                return Err(Error::invalid(
                    name,
                    format!("seen id {id} is outside the vocabulary of {vocab}"),
                ));
            }
            mask[id as usize / 32] |= 1 << (id % 32);
        }
        Ok(Self {
            spec,
            vocab,
            blocks,
            // Whole vec4s for the pick (the first pass writes the padding's weights 0).
            weights: Tensor::empty(ctx, &[vocab.div_ceil(4) * 4], DType::F32)?,
            part: Tensor::empty(ctx, &[3 * blocks], DType::F32)?,
            candidates: Tensor::from_slice(
                ctx,
                &vec![0u32; 4 + 2 * CAPACITY],
                &[4 + 2 * CAPACITY],
            )?,
            seen: Tensor::from_slice(ctx, &mask, &[mask.len()])?,
        })
    }

    /// The parameters.
    pub fn spec(&self) -> &SampleSpec {
        &self.spec
    }

    /// Records the pick of step `step` (the generator's counter) from `logits` into `ids`.
    ///
    /// Errors: as [`Sampler::sample_with_draw`].
    pub fn sample(&self, ctx: &Context, logits: &Tensor, step: u32, ids: &Tensor) -> Result<()> {
        self.launch(ctx, logits, step, -1.0, ids)
    }

    /// Records the pick with the draw `u` ∈ [0, 1) instead of the generator's.
    ///
    /// Errors: [`Error::Shape`] unless `logits` holds one row of the vocabulary and `ids` one
    /// element; dtype errors unless `logits` is a float the adapter runs and `ids` is u32;
    /// [`Error::InvalidArgument`] for `u` outside [0, 1).
    pub fn sample_with_draw(
        &self,
        ctx: &Context,
        logits: &Tensor,
        u: f32,
        ids: &Tensor,
    ) -> Result<()> {
        if !(0.0..1.0).contains(&u) {
            return Err(Error::invalid("sample", format!("draw {u} outside [0, 1)")));
        }
        self.launch(ctx, logits, 0, u, ids)
    }

    fn launch(
        &self,
        ctx: &Context,
        logits: &Tensor,
        step: u32,
        u: f32,
        ids: &Tensor,
    ) -> Result<()> {
        let name = "sample";
        ids.expect_dtype(name, DType::U32)?;
        if logits.numel() != self.vocab || ids.numel() != 1 {
            return Err(Error::shape(
                name,
                format!(
                    "logits {:?} and ids {:?} for a vocabulary of {}",
                    logits.shape(),
                    ids.shape(),
                    self.vocab
                ),
            ));
        }
        launch::float_dtype(ctx, name, logits.dtype())?;
        launch::no_alias(name, ids, &[logits])?;
        let s = &self.spec;
        let (inv_t, top_k, top_p) = s.kernel_terms(self.vocab);
        let params = Params::new()
            .u(self.vocab as u32)
            .u(self.blocks as u32)
            .u(top_k)
            .u(u32::from(s.repetition_penalty != 1.0))
            .f(inv_t)
            .f(s.repetition_penalty)
            .f(top_p)
            .f(u)
            .u(s.seed as u32)
            .u((s.seed >> 32) as u32)
            .u(step)
            .u(self.vocab.div_ceil(4) as u32);
        let defines = launch::memoized(name, &logits.dtype(), |&dtype| {
            shaders::storage_defines(dtype)
        });
        let blocks = self.blocks as u32;
        Launch {
            label: "sample_scale",
            shader: &SAMPLE,
            entry: "sample_scale",
            defines: defines.clone(),
            params: params.clone(),
            buffers: vec![
                (1, logits),
                (2, &self.seen),
                (3, &self.weights),
                (4, &self.part),
                (5, &self.candidates),
            ],
            workgroups: [blocks, 1, 1],
        }
        .run(ctx)?;
        Launch {
            label: "sample_weights",
            shader: &SAMPLE,
            entry: "sample_weights",
            defines: defines.clone(),
            params: params.clone(),
            buffers: vec![(3, &self.weights), (4, &self.part), (5, &self.candidates)],
            workgroups: [blocks, 1, 1],
        }
        .run(ctx)?;
        Launch {
            label: "sample_pick",
            shader: &SAMPLE,
            entry: "sample_pick",
            defines,
            params,
            buffers: vec![
                (2, &self.seen),
                (4, &self.part),
                (5, &self.candidates),
                (6, ids),
                (7, &self.weights),
            ],
            workgroups: [1, 1, 1],
        }
        .run(ctx)
    }
}

/// The shader's draw for `seed` and `step`, on the host (to hold the generator in tests).
pub fn draw(seed: u64, step: u32) -> f32 {
    fn pcg(v: u32) -> u32 {
        let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
        let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
        (word >> 22) ^ word
    }
    let h = pcg(step ^ pcg(seed as u32 ^ pcg((seed >> 32) as u32)));
    (h >> 8) as f32 / 16_777_216.0
}

/// The ids a pick with the kernel's semantics may give (f64 reference): those the draw `u`
/// lands on when its point in the walk, and top-p's cut, move by up to `tolerance` of the
/// mass they are taken over (the kernel sums in f32: over a flat vocabulary every token is a
/// sliver of the mass). One id where the decision lies farther than that from flipping.
/// Seen ids are penalized once each.
pub fn reference(
    logits: &[f32],
    spec: &SampleSpec,
    seen: &[u32],
    u: f64,
    tolerance: f64,
) -> Vec<u32> {
    let s = spec;
    let mut z: Vec<f64> = logits.iter().map(|&v| v as f64).collect();
    let mut marked = vec![false; z.len()];
    for &id in seen {
        marked[id as usize] = true;
    }
    for (v, m) in z.iter_mut().zip(&marked) {
        if *m && s.repetition_penalty != 1.0 {
            let p = s.repetition_penalty as f64;
            let most = f32::MAX as f64; // the kernel clamps to f32's range
            *v = if *v > 0.0 { *v / p } else { *v * p }.clamp(-most, most);
        }
    }
    let (inv_t, top_k, top_p) = s.kernel_terms(z.len());
    let max = z.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let w: Vec<f64> = z
        .iter()
        .map(|&v| ((v - max) * inv_t as f64).exp())
        .collect();
    let total: f64 = w.iter().sum();
    let descending = |a: &usize, b: &usize| w[*b].total_cmp(&w[*a]).then(a.cmp(b));
    let mut order: Vec<usize> = (0..w.len()).collect();
    order.sort_by(descending);
    let candidates = w.iter().filter(|&&v| v >= TAU).count();
    let (k_on, p_on) = (top_k != 0, top_p < 1.0);
    let limit = if k_on { top_k as usize } else { w.len() };
    let mass_k = if k_on {
        order[..limit].iter().map(|&i| w[i]).sum()
    } else {
        total
    };
    // Top-p's cut for a target: the shortest prefix reaching it (all of top-k's where none).
    let cut = |target: f64| {
        let mut cum = 0.0;
        for (n, &i) in order[..limit].iter().enumerate() {
            cum += w[i];
            if cum >= target {
                return n + 1;
            }
        }
        limit
    };
    let kept_range = if p_on {
        let target = top_p as f64 * mass_k;
        cut(target - tolerance * mass_k)..=cut(target + tolerance * mass_k)
    } else {
        limit..=limit
    };
    let mut ids = Vec::new();
    for kept in kept_range {
        let by_candidates = (k_on || p_on)
            && candidates <= CAPACITY
            && kept <= candidates
            && (!k_on || limit <= candidates);
        let mut walk: Vec<usize> = order[..kept].to_vec();
        if !by_candidates {
            walk.sort();
        }
        let mass: f64 = walk.iter().map(|&i| w[i]).sum();
        let (lo, hi) = ((u - tolerance) * mass, (u + tolerance) * mass);
        let mut cum = 0.0;
        for &i in &walk {
            let before = cum;
            cum += w[i];
            if cum > lo && before <= hi {
                ids.push(i as u32);
            }
        }
        if hi >= cum {
            ids.push(*walk.last().unwrap() as u32);
        }
    }
    ids.sort_unstable();
    ids.dedup();
    ids
}

pub(crate) fn variants(dtype: DType) -> Vec<Variant> {
    ["sample_scale", "sample_weights", "sample_pick"]
        .into_iter()
        .map(|entry| (&SAMPLE, entry, shaders::storage_defines(dtype)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generator's draws over 65,536 steps fill 16 equal bins within 4 % of 4,096 each
    /// (a binomial's deviation there is 1.5 %), differ between seeds, stay in [0, 1).
    #[test]
    fn draws_are_uniform_and_follow_the_seed() {
        let mut bins = [0usize; 16];
        for step in 0..65_536 {
            let u = draw(7, step);
            assert!((0.0..1.0).contains(&u), "{u}");
            bins[(u * 16.0) as usize] += 1;
        }
        for b in bins {
            assert!((b as f64 / 4096.0 - 1.0).abs() < 0.04, "{bins:?}");
        }
        let same = (0..64).filter(|&s| draw(7, s) == draw(8, s)).count();
        let high = (0..64)
            .filter(|&s| draw(7, s) == draw(7 + (1 << 32), s))
            .count();
        assert!(same == 0 && high == 0, "{same} {high}");
    }

    /// The reference: temperature 0 picks the largest penalized logit; a penalty turns a
    /// positive logit's lead into another's; top-k 1 keeps the largest whatever the draw;
    /// every token kept walks in id order (a draw of 0 lands on token 0).
    #[test]
    fn the_reference_applies_penalty_temperature_and_top_k() {
        let x = [1.0, 3.0, 2.5, -1.0];
        let s = |t, k, pen| SampleSpec {
            temperature: t,
            top_k: k,
            top_p: 1.0,
            repetition_penalty: pen,
            seed: 0,
        };
        assert_eq!(reference(&x, &s(0.0, 0, 1.0), &[], 0.9, 0.0), [1]);
        assert_eq!(reference(&x, &s(0.0, 0, 1.5), &[1], 0.9, 0.0), [2]);
        assert_eq!(reference(&x, &s(1.0, 1, 1.0), &[], 0.99, 0.0), [1]);
        assert_eq!(reference(&x, &s(1.0, 0, 1.0), &[], 0.0, 0.0), [0]);
    }
}
