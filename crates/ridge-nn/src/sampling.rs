//! Choosing the next token from logits: greedy, or sampled after a repetition penalty,
//! temperature, top-k and top-p, from a seeded generator (the order and definitions of
//! Hugging Face `transformers`' logits processors). The draws are the GPU sampler's
//! (`ridge_kernels::sample::draw`, counter-based: pick n of a reply takes draw n of its seed),
//! so a reply picked here and one picked on the GPU follow the same seed to the same tokens
//! but where their roundings (f64 here, f32 there) decide a near tie differently.

use ridge_kernels::sample::{CAPACITY, TAU};

use crate::error::{Error, Result};

/// How the next token is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Divides the logits before sampling; 0 picks the largest logit (greedy).
    pub temperature: f32,
    /// Keep only the `top_k` largest logits (0: all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probabilities sum to at least `top_p`
    /// (nucleus sampling, Holtzman et al., 2020); 1 keeps all.
    pub top_p: f32,
    /// Divides positive (multiplies negative) logits of tokens already in the prompt or
    /// the reply by this (Keskar et al., "CTRL", 2019); 1 is off.
    pub repetition_penalty: f32,
    /// Seed of the random generator: the same seed gives the same reply.
    pub seed: u64,
}

impl Default for Sampling {
    fn default() -> Self {
        Self::greedy()
    }
}

impl Sampling {
    /// Always the largest logit.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            repetition_penalty: 1.0,
            seed: 0,
        }
    }

    /// Whether the pick needs only the argmax of the raw logits (no penalty, temperature 0).
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0 && self.repetition_penalty == 1.0
    }

    /// Errors with [`Error::Input`] naming the first parameter out of range: a temperature
    /// below 0 or not finite, `top_p` outside (0, 1], a repetition penalty ≤ 0 or not finite.
    pub fn validate(&self) -> Result<()> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(Error::Input(format!(
                "temperature {} must be a finite number ≥ 0 (0 is greedy)",
                self.temperature
            )));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(Error::Input(format!(
                "top-p {} must be in (0, 1]",
                self.top_p
            )));
        }
        if !(self.repetition_penalty.is_finite() && self.repetition_penalty > 0.0) {
            return Err(Error::Input(format!(
                "repetition penalty {} must be a finite number > 0 (1 is off)",
                self.repetition_penalty
            )));
        }
        Ok(())
    }
}

/// A [`Sampling`] with its place in the seed's stream of draws.
pub struct Sampler {
    sampling: Sampling,
    /// Sampled picks made: the counter of the next draw.
    step: u32,
}

impl Sampler {
    /// A sampler at the first draw of `sampling.seed`.
    ///
    /// Errors: as [`Sampling::validate`].
    pub fn new(sampling: Sampling) -> Result<Self> {
        sampling.validate()?;
        Ok(Self { sampling, step: 0 })
    }

    /// The parameters.
    pub fn sampling(&self) -> &Sampling {
        &self.sampling
    }

    /// Picks a token from `logits` (changed in place by the repetition penalty), given the
    /// ids seen so far.
    ///
    /// Errors: [`Error::Input`] when the logits are empty or hold NaN or an infinity (a
    /// corrupt model).
    pub fn pick(&mut self, logits: &mut [f32], seen: &[u32]) -> Result<u32> {
        if logits.is_empty() {
            return Err(Error::Input("no logits to pick a token from".into()));
        }
        if let Some(i) = logits.iter().position(|v| !v.is_finite()) {
            return Err(Error::Input(format!(
                "the model produced a non-finite logit ({}) for token {i}: the weights may be corrupt",
                logits[i]
            )));
        }
        let s = self.sampling;
        if s.repetition_penalty != 1.0 {
            let mut done = std::collections::HashSet::new();
            for &id in seen {
                if let Some(v) = logits.get_mut(id as usize)
                    && done.insert(id)
                {
                    // A penalty far from 1 overflows f32: the largest finite value keeps
                    // the token first (or last), as the GPU sampler clamps it.
                    *v = if *v > 0.0 {
                        *v / s.repetition_penalty
                    } else {
                        *v * s.repetition_penalty
                    }
                    .clamp(-f32::MAX, f32::MAX);
                }
            }
        }
        if s.temperature == 0.0 {
            return Ok(argmax(logits));
        }
        // The one draw of this pick, taken before any candidate is looked at, so a seed
        // gives the same stream of picks however many candidate rounds a pick takes.
        let u = ridge_kernels::sample::draw(s.seed, self.step) as f64;
        self.step = self.step.wrapping_add(1);
        let t = s.temperature as f64;
        let descending = |a: &u32, b: &u32| {
            logits[*b as usize]
                .total_cmp(&logits[*a as usize])
                .then(a.cmp(b))
        };
        // Every token's weight relative to the largest logit's (the softmax's numerator).
        let max = logits.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
        let all: Vec<f64> = logits
            .iter()
            .map(|&v| ((v as f64 - max) / t).exp())
            .collect();
        let total: f64 = all.iter().sum();
        // The GPU sampler's walk: in descending order where its candidates (weights ≥ TAU,
        // at most CAPACITY of them) hold the kept tokens, else in id order. The host takes
        // the same walk, so a draw lands on the same token here and there.
        let candidates = all.iter().filter(|&&w| w >= TAU).count();
        let walk = |order: &[u32], n: usize, mass: f64, kept_from_candidates: bool| {
            let mut ids = order[..n].to_vec();
            if !kept_from_candidates {
                ids.sort_unstable();
            }
            let weights: Vec<f64> = ids.iter().map(|&i| all[i as usize]).collect();
            Kept::Cut { n, mass }.draw(&ids, &weights, u)
        };
        if s.top_k != 0 && s.top_k < logits.len() {
            // Top-k: the k largest logits, sorted; the softmax over them alone.
            let mut order: Vec<u32> = (0..logits.len() as u32).collect();
            order.select_nth_unstable_by(s.top_k - 1, descending);
            order.truncate(s.top_k);
            order.sort_by(descending);
            let weights: Vec<f64> = order.iter().map(|&i| all[i as usize]).collect();
            let mass_k = weights.iter().sum();
            let Kept::Cut { n, mass } = Kept::new(&weights, mass_k, s.top_p, true) else {
                unreachable!("an exhaustive prefix decides its cut")
            };
            let from_candidates = candidates <= CAPACITY && s.top_k <= candidates;
            return Ok(walk(&order, n, mass, from_candidates).unwrap_or(order[0]));
        }
        if s.top_p >= 1.0 {
            // Every token kept: walked in id order, as the GPU does (no candidates needed).
            let ids: Vec<u32> = (0..logits.len() as u32).collect();
            return Ok(walk(&ids, ids.len(), total, false).unwrap_or(ids[ids.len() - 1]));
        }
        // Top-p: its cut is a prefix of the descending order. Sorting every token (49,152
        // for SmolLM2) took ~1.7 ms a token; the tokens at or above a threshold are a prefix
        // of that order, so sorting them alone finds the cut whenever they hold it, else the
        // threshold drops and the cut is sought again (the last threshold holds every token).
        for threshold in [TAU, 2f64.powi(-40), 0.0] {
            let mut order: Vec<u32> = (0..logits.len() as u32)
                .filter(|&i| all[i as usize] >= threshold)
                .collect();
            order.sort_by(descending);
            let weights: Vec<f64> = order.iter().map(|&i| all[i as usize]).collect();
            if let Kept::Cut { n, mass } =
                Kept::new(&weights, total, s.top_p, order.len() == logits.len())
            {
                let from_candidates = candidates <= CAPACITY && n <= candidates;
                return Ok(walk(&order, n, mass, from_candidates).unwrap_or(order[0]));
            }
        }
        unreachable!("the threshold 0 keeps every token, where top-p's cut lies")
    }
}

/// What a sampled pick keeps of a prefix of the candidates in descending order: top-p's
/// cut (the shortest prefix whose probability reaches `top_p`; the whole prefix for `top_p`
/// = 1) and the kept weights' sum, which the draw scales to.
enum Kept {
    /// The first `n` candidates, their weights summing to `mass`.
    Cut { n: usize, mass: f64 },
    /// top-p's cut lies past the prefix.
    Undecided,
}

impl Kept {
    /// `weights`: the prefix's, descending; `total`: the mass the probabilities are taken
    /// over; `exhaustive`: whether the prefix holds every token of that mass.
    fn new(weights: &[f64], total: f64, top_p: f32, exhaustive: bool) -> Self {
        if top_p < 1.0 {
            let mut cum = 0.0;
            for (n, w) in weights.iter().enumerate() {
                cum += w / total;
                if cum >= top_p as f64 {
                    let mass = weights[..=n].iter().sum();
                    return Self::Cut { n: n + 1, mass };
                }
            }
            // Rounding may leave the sum of every probability short of top_p: all kept.
        }
        if exhaustive {
            return Self::Cut {
                n: weights.len(),
                mass: total,
            };
        }
        Self::Undecided
    }

    /// The token the draw `u` ∈ [0, 1) lands on, walking the kept tokens in `order` (the
    /// first `n`, `weights` theirs); `None` when undecided.
    fn draw(&self, order: &[u32], weights: &[f64], u: f64) -> Option<u32> {
        let Self::Cut { n, mass } = *self else {
            return None;
        };
        let mut r = u * mass;
        for (&id, &w) in order[..n].iter().zip(weights) {
            if r < w {
                return Some(id);
            }
            r -= w;
        }
        // Past the last kept weight by rounding: the last kept token.
        n.checked_sub(1).map(|last| order[last])
    }
}

/// The first index of the largest value.
pub fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best as u32
}

/// The `k` largest values as `(id, value)`, largest first (ties: lower id first).
pub fn top_k(v: &[f32], k: usize) -> Vec<(u32, f32)> {
    let descending = |a: &u32, b: &u32| v[*b as usize].total_cmp(&v[*a as usize]).then(a.cmp(b));
    let mut order: Vec<u32> = (0..v.len() as u32).collect();
    if k == 0 {
        return Vec::new();
    }
    if k < order.len() {
        order.select_nth_unstable_by(k - 1, descending);
        order.truncate(k);
    }
    order.sort_by(descending);
    order.into_iter().map(|i| (i, v[i as usize])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_is_the_first_maximum() {
        let mut s = Sampler::new(Sampling::greedy()).unwrap();
        assert_eq!(s.pick(&mut [1.0, 3.0, 3.0, -1.0], &[]).unwrap(), 1);
    }

    #[test]
    fn repetition_penalty_divides_positive_and_multiplies_negative_logits() {
        let mut s = Sampler::new(Sampling {
            repetition_penalty: 2.0,
            ..Sampling::greedy()
        })
        .unwrap();
        let mut l = [4.0, 3.0, -1.0];
        assert_eq!(s.pick(&mut l, &[0, 0, 2]).unwrap(), 1);
        assert_eq!(l, [2.0, 3.0, -2.0]);
    }

    #[test]
    fn top_k_one_and_tiny_top_p_are_greedy_and_seeds_repeat() {
        let logits = [0.5f32, 2.0, 1.9, -3.0];
        for sampling in [
            Sampling {
                temperature: 1.0,
                top_k: 1,
                ..Sampling::greedy()
            },
            Sampling {
                temperature: 1.0,
                top_p: 1e-6,
                ..Sampling::greedy()
            },
        ] {
            let mut s = Sampler::new(sampling).unwrap();
            for _ in 0..20 {
                assert_eq!(s.pick(&mut logits.clone(), &[]).unwrap(), 1);
            }
        }
        let run = |seed| {
            let mut s = Sampler::new(Sampling {
                temperature: 1.0,
                seed,
                ..Sampling::greedy()
            })
            .unwrap();
            (0..50)
                .map(|_| s.pick(&mut logits.clone(), &[]).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        // Probabilities follow the softmax: token 3 (e^-5 relative) almost never appears.
        let picks = run(1);
        assert!(picks.iter().filter(|&&p| p == 1 || p == 2).count() > 40);
    }

    /// The host's picks follow the GPU sampler's draws: pick n of a seed takes the kernel's
    /// draw n, so the kernel's f64 reference, given that draw, names the same token (where
    /// the decision lies clear of rounding; the reference then names one id). The same seed
    /// gives the same reply whether its logits are read back (`--top-logits`) or not.
    #[test]
    fn picks_follow_the_gpu_samplers_draws() {
        use ridge_kernels::sample::{SampleSpec, draw, reference};
        let logits: Vec<f32> = (0..500u32)
            .map(|i| ((i.wrapping_mul(2_654_435_761) >> 8) % 1000) as f32 / 150.0)
            .collect();
        let mut decided = 0;
        for (temperature, top_k, top_p, repetition_penalty) in [
            (1.0, 0, 1.0, 1.0),
            (0.7, 0, 0.9, 1.1),
            (1.3, 40, 0.95, 1.0),
            (0.5, 5, 1.0, 0.8),
        ] {
            let seed = 0x5EED_0000_0001 + top_k as u64;
            let sampling = Sampling {
                temperature,
                top_k,
                top_p,
                repetition_penalty,
                seed,
            };
            let spec = SampleSpec {
                temperature,
                top_k,
                top_p,
                repetition_penalty,
                seed,
            };
            let mut sampler = Sampler::new(sampling).unwrap();
            let mut seen = vec![3u32, 17, 17, 256];
            for step in 0..40 {
                let want = reference(&logits, &spec, &seen, draw(seed, step) as f64, 1e-5);
                let got = sampler.pick(&mut logits.clone(), &seen).unwrap();
                if let [one] = want[..] {
                    assert_eq!(got, one, "{sampling:?}, pick {step}");
                    decided += 1;
                } else {
                    assert!(
                        want.contains(&got),
                        "{sampling:?}, pick {step}: {got} of {want:?}"
                    );
                }
                seen.push(got);
            }
        }
        assert!(decided >= 150, "{decided} of 160 picks decided");
    }

    /// Temperatures near 0 and penalties far from 1 overflow f32 (1 / 1e-45; 10 / 1e-38):
    /// the pick is still the limit's (the largest logit; the boosted or sunk seen token),
    /// never an error blaming the model's logits.
    #[test]
    fn extreme_temperatures_and_penalties_pick_their_limits() {
        let logits = [1.0f32, 3.0, 2.999, -2.0];
        for temperature in [1e-30, 1e-38, 1e-45] {
            let mut s = Sampler::new(Sampling {
                temperature,
                seed: 3,
                ..Sampling::greedy()
            })
            .unwrap();
            for _ in 0..10 {
                assert_eq!(
                    s.pick(&mut logits.clone(), &[]).unwrap(),
                    1,
                    "{temperature}"
                );
            }
        }
        // 3 / 1e-39 and −2 · 3e38 pass f32's largest value.
        for (penalty, seen, want) in [
            (1e-38, 0u32, 0u32),
            (1e-39, 1, 1),
            (1e-38, 3, 1),
            (1e38, 1, 2),
            (3e38, 3, 1),
        ] {
            for temperature in [0.0, 1e-3] {
                let mut s = Sampler::new(Sampling {
                    temperature,
                    repetition_penalty: penalty,
                    ..Sampling::greedy()
                })
                .unwrap();
                let got = s.pick(&mut logits.clone(), &[seen]).unwrap();
                assert_eq!(
                    got, want,
                    "penalty {penalty}, seen {seen}, temperature {temperature}"
                );
            }
        }
    }

    #[test]
    fn bad_parameters_and_non_finite_logits_are_errors() {
        for bad in [
            Sampling {
                temperature: -1.0,
                ..Sampling::greedy()
            },
            Sampling {
                temperature: f32::NAN,
                ..Sampling::greedy()
            },
            Sampling {
                top_p: 2.0,
                ..Sampling::greedy()
            },
            Sampling {
                top_p: 0.0,
                ..Sampling::greedy()
            },
            Sampling {
                repetition_penalty: 0.0,
                ..Sampling::greedy()
            },
        ] {
            assert!(Sampler::new(bad).is_err(), "{bad:?}");
        }
        let mut s = Sampler::new(Sampling::greedy()).unwrap();
        assert!(s.pick(&mut [1.0, f32::NAN], &[]).is_err());
        assert!(s.pick(&mut [], &[]).is_err());
    }

    /// The sampler's definition, sorting every token (as transformers' processors do):
    /// the candidates by descending logit (ties: lower id first), cut to top-k, the softmax
    /// at the temperature, top-p's shortest prefix reaching `top_p` (every token at 1); the
    /// kept tokens walked as the GPU sampler walks them. Returns the kept tokens in the
    /// walk's order, their weights and the mass a draw scales to (the totals over every
    /// token summed in index order, as the sampler sums them).
    fn reference_kept(s: &Sampling, logits: &[f32]) -> (Vec<u32>, Vec<f64>, f64) {
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|a, b| {
            logits[*b as usize]
                .total_cmp(&logits[*a as usize])
                .then(a.cmp(b))
        });
        let top_k = s.top_k != 0 && s.top_k < logits.len();
        if top_k {
            order.truncate(s.top_k);
        }
        let max = logits[order[0] as usize] as f64;
        let weight = |i: u32| ((logits[i as usize] as f64 - max) / s.temperature as f64).exp();
        let total: f64 = if top_k {
            order.iter().map(|&i| weight(i)).sum()
        } else {
            (0..logits.len() as u32).map(weight).sum()
        };
        let mut cut = order.len();
        if s.top_p < 1.0 {
            let mut cum = 0.0;
            for (n, &i) in order.iter().enumerate() {
                cum += weight(i) / total;
                if cum >= s.top_p as f64 {
                    cut = n + 1;
                    break;
                }
            }
        }
        order.truncate(cut);
        let weights: Vec<f64> = order.iter().map(|&i| weight(i)).collect();
        let kept = if s.top_p >= 1.0 && !top_k {
            total
        } else {
            weights.iter().sum()
        };
        // The GPU sampler's walk (shaders/sample.wgsl): descending where its candidates
        // (weights ≥ TAU, at most CAPACITY) hold the kept tokens, else in id order.
        let candidates = (0..logits.len() as u32)
            .filter(|&i| weight(i) >= TAU)
            .count();
        let by_candidates = (top_k || s.top_p < 1.0)
            && candidates <= CAPACITY
            && cut <= candidates
            && (!top_k || s.top_k <= candidates);
        if !by_candidates {
            order.sort_unstable();
        }
        let weights = order.iter().map(|&i| weight(i)).collect();
        (order, weights, kept)
    }

    /// The token a draw `u` lands on, walking the kept tokens in order.
    fn reference_draw((order, weights, kept): &(Vec<u32>, Vec<f64>, f64), u: f64) -> u32 {
        let mut r = u * kept;
        for (&i, &w) in order.iter().zip(weights) {
            if r < w {
                return i;
            }
            r -= w;
        }
        order[order.len() - 1]
    }

    /// The sampler sorts only the tokens above a weight threshold, lowering it until they
    /// decide the pick: the same token as sorting every token, for peaked logits (decided by
    /// the first threshold), a peak over a long tail that top-p needs (the second), a tail
    /// beyond 2^-40 that only the last threshold holds, flat logits, ties, one token, and
    /// top-k with and without top-p.
    #[test]
    fn candidates_above_a_threshold_pick_as_sorting_every_token_does() {
        use rand::{RngExt, SeedableRng, rngs::StdRng};
        let mut rng = StdRng::seed_from_u64(11);
        let mut cases: Vec<Vec<f32>> = Vec::new();
        for n in [1usize, 2, 7, 1000, 49_152] {
            // Peaked, as a language model's logits: a few high, the rest spread.
            cases.push(
                (0..n)
                    .map(|i| {
                        let base = rng.random::<f32>() * 6.0 - 3.0;
                        if i % 97 == 5 { base + 12.0 } else { base }
                    })
                    .collect(),
            );
            // Flat: every weight within the first threshold.
            cases.push((0..n).map(|_| rng.random::<f32>() * 0.5).collect());
            // Ties: a handful of values.
            cases.push((0..n).map(|_| (rng.random::<u32>() % 4) as f32).collect());
        }
        // Ten tokens (weights 1 … e^-0.9, 6.5 together) over a tail of 40,000 at e^-9.5
        // (7.5e-5 each, under 2^-12; 3.0 together): top-p = 0.9 needs the tail.
        let mut tail = vec![-9.5f32; 40_000];
        for (i, v) in tail.iter_mut().skip(100).take(10).enumerate() {
            *v = -0.1 * i as f32;
        }
        cases.push(tail);
        // One token over 100,000 at e^-28 (6.9e-13 each, under 2^-40; 6.9e-8 together):
        // top-p = 0.99999994 (1 - 6e-8) needs the tail, which only the last threshold holds.
        let mut far = vec![-28.0f32; 100_000];
        far[7] = 0.0;
        cases.push(far);
        let mut picks = 0;
        for logits in &cases {
            for (temperature, top_k, top_p) in [
                (1.0, 0, 1.0),
                (0.7, 0, 0.9),
                (1.0, 0, 0.9),
                (2.0, 0, 0.95),
                (1.0, 0, 0.999_999_94),
                (0.7, 40, 1.0),
                (0.7, 40, 0.5),
                (1.0, 1, 1.0),
                (1.5, 3, 0.9),
            ] {
                let seed = picks as u64;
                let sampling = Sampling {
                    temperature,
                    top_k,
                    top_p,
                    seed,
                    ..Sampling::greedy()
                };
                let kept = reference_kept(&sampling, logits);
                let mut sampler = Sampler::new(sampling).unwrap();
                for step in 0..64 {
                    let u = ridge_kernels::sample::draw(seed, step) as f64;
                    let want = reference_draw(&kept, u);
                    let got = sampler.pick(&mut logits.clone(), &[]).unwrap();
                    assert_eq!(got, want, "{sampling:?} on {} logits", logits.len());
                    picks += 1;
                }
            }
        }
        assert_eq!(picks, cases.len() * 9 * 64);
    }

    #[test]
    fn top_k_lists_the_largest_values_first_ties_by_id() {
        let v = [1.0f32, 5.0, 3.0, 5.0, -2.0];
        assert_eq!(top_k(&v, 3), vec![(1, 5.0), (3, 5.0), (2, 3.0)]);
        assert_eq!(top_k(&v, 9).len(), 5);
        assert!(top_k(&v, 0).is_empty());
    }
}
