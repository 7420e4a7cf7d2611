//! Choosing the next token from logits: greedy, or sampled after a repetition penalty,
//! temperature, top-k and top-p, from a seeded generator (the order and definitions of
//! Hugging Face `transformers`' logits processors).

use rand::{RngExt, SeedableRng, rngs::StdRng};

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

/// A [`Sampling`] with its random generator.
pub struct Sampler {
    sampling: Sampling,
    rng: StdRng,
}

impl Sampler {
    /// A sampler seeded with `sampling.seed`.
    ///
    /// Errors: as [`Sampling::validate`].
    pub fn new(sampling: Sampling) -> Result<Self> {
        sampling.validate()?;
        Ok(Self {
            rng: StdRng::seed_from_u64(sampling.seed),
            sampling,
        })
    }

    /// The parameters.
    pub fn sampling(&self) -> &Sampling {
        &self.sampling
    }

    /// Picks a token from `logits` (changed in place by the penalty and temperature), given
    /// the ids seen so far.
    ///
    /// Errors: [`Error::Input`] when the logits hold NaN or an infinity (a corrupt model).
    pub fn pick(&mut self, logits: &mut [f32], seen: &[u32]) -> Result<u32> {
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
                    *v = if *v > 0.0 {
                        *v / s.repetition_penalty
                    } else {
                        *v * s.repetition_penalty
                    };
                }
            }
        }
        if s.temperature == 0.0 {
            return Ok(argmax(logits));
        }
        // Candidates by descending logit (ties: lower id first), cut by top-k.
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        let key = |i: &u32| logits[*i as usize];
        let keep = if s.top_k == 0 {
            order.len()
        } else {
            s.top_k.min(order.len())
        };
        if keep < order.len() {
            order.select_nth_unstable_by(keep - 1, |a, b| key(b).total_cmp(&key(a)).then(a.cmp(b)));
            order.truncate(keep);
        }
        order.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.cmp(b)));
        let max = key(&order[0]) as f64;
        let t = s.temperature as f64;
        let weights: Vec<f64> = order
            .iter()
            .map(|i| ((key(i) as f64 - max) / t).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        // Top-p: the shortest prefix whose probability reaches top_p (at least one token).
        let mut cum = 0.0;
        let mut cut = weights.len();
        for (n, w) in weights.iter().enumerate() {
            cum += w / total;
            if cum >= s.top_p as f64 {
                cut = n + 1;
                break;
            }
        }
        let kept: f64 = weights[..cut].iter().sum();
        let mut r = self.rng.random::<f64>() * kept;
        for (i, w) in order[..cut].iter().zip(&weights) {
            if r < *w {
                return Ok(*i);
            }
            r -= w;
        }
        Ok(order[cut - 1])
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
    let mut order: Vec<u32> = (0..v.len() as u32).collect();
    order.sort_by(|a, b| v[*b as usize].total_cmp(&v[*a as usize]).then(a.cmp(b)));
    order
        .into_iter()
        .take(k)
        .map(|i| (i, v[i as usize]))
        .collect()
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
    }
}
