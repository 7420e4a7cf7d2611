//! The efficiency terms of [`super`] fitted to published llama.cpp measurements
//! (`data/published.json`), and the model checked against those rows: in-sample, and with
//! each GPU's rows left out of the fit.
//!
//! Fitting ([`Efficiency::fit_all`]): a group with at least [`MIN_ROWS`] decode rows from
//! [`MIN_GPUS`] GPUs fits `bandwidth` and `layer_overhead_s` to them, minimising the summed
//! absolute log error of its decode rows over a grid (bandwidth 0.20–1.00 by 0.01, overhead
//! 0–500 µs by 2.5 µs: every fifth point, then all points near the best); then, with prefill
//! rows from [`MIN_GPUS`] GPUs, `compute` minimises that of its prefill rows (0.05–1.00 by
//! 0.01, the same way) on each [`Roof`], and the roof whose best fits best is kept. A group
//! with too few rows or GPUs for a term takes it from the group above. The absolute (not
//! squared) log error keeps a row published 2–5× off its peers (an early driver, a regressed
//! build) from dragging its group's terms: the median error is what the model is judged by.
//! A bandwidth's decode times are priced once for every overhead (the overhead adds a fixed
//! time per step), so a fit costs one pricing per bandwidth, not per grid point.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::{Efficiency, Phase, Roof, UnitOp, phase_time, phase_units, vendor};
use crate::decoder::{DecoderShape, ModelWeights, Quant};
use crate::hardware::{self, GpuSpec};

/// Fewest decode rows a vendor (or a backend on a vendor's GPUs) needs for bandwidth and
/// overhead terms of its own.
pub const MIN_ROWS: usize = 3;

/// Fewest GPUs whose rows a group needs for a term of its own: the terms of fewer GPUs are
/// theirs, not their vendor's or backend's (one GPU's rows left out, two still remain).
pub const MIN_GPUS: usize = 3;

/// llama.cpp's backends a published row may name, as spelled there.
pub const BACKENDS: [&str; 5] = ["CUDA", "Metal", "ROCm", "SYCL", "Vulkan"];

/// One published measurement (`data/published.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// A spec-table GPU name.
    pub gpu: String,
    /// llama.cpp's backend (`CUDA`, `Metal`, `ROCm`, `Vulkan`, `SYCL`).
    pub backend: String,
    /// A decoder preset.
    pub model: String,
    /// Format or mix.
    pub quant: String,
    /// llama-bench's test: `pp512` (prompt of 512 tokens) or `tg128` (128 generated).
    pub test: String,
    /// Published tokens per second.
    pub tokens_per_s: f64,
    /// Where it was published.
    pub source: String,
    /// Remarks (the exact model or GPU variant).
    #[serde(default)]
    pub note: Option<String>,
    /// Why the row is neither fitted nor checked: a later build's row of the same GPU,
    /// backend, model, format, test and flash-attention setting is in the file (the model
    /// predicts today's llama.cpp).
    #[serde(default)]
    pub superseded: Option<String>,
}

impl Published {
    /// The phase and token count of [`Published::test`] (`pp512` → prefill of 512).
    pub fn phase(&self) -> Option<(Phase, usize)> {
        let (phase, n) = if let Some(n) = self.test.strip_prefix("pp") {
            (Phase::Prefill, n)
        } else {
            (Phase::Decode, self.test.strip_prefix("tg")?)
        };
        n.parse().ok().filter(|&n| n > 0).map(|n| (phase, n))
    }
}

/// Every row of `data/published.json`, superseded ones too (parsed once).
fn file_rows() -> &'static [Published] {
    #[derive(Deserialize)]
    struct Doc {
        rows: Vec<Published>,
    }
    static ROWS: OnceLock<Vec<Published>> = OnceLock::new();
    ROWS.get_or_init(|| {
        serde_json::from_str::<Doc>(include_str!("../../../data/published.json"))
            .expect("data/published.json is valid (tested)")
            .rows
    })
}

/// Every published row the model is fitted to and checked against: the file's rows but
/// those [`Published::superseded`] by a later build's.
pub fn published() -> Vec<Published> {
    file_rows()
        .iter()
        .filter(|r| r.superseded.is_none())
        .cloned()
        .collect()
}

/// The backends the published rows name on `vendor`'s GPUs, sorted.
pub fn backends_of(vendor: &str) -> Vec<String> {
    let table = hardware::table();
    let mut named: Vec<String> = published()
        .into_iter()
        .filter(|r| {
            table
                .iter()
                .any(|g| g.name == r.gpu && self::vendor(g) == vendor)
        })
        .map(|r| r.backend)
        .collect();
    named.sort();
    named.dedup();
    named
}

/// A published row with what the model predicts for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    /// The row.
    pub row: Published,
    /// Its vendor.
    pub vendor: String,
    /// Its phase.
    pub phase: Phase,
    /// Predicted tokens/s.
    pub predicted: f64,
}

impl Checked {
    /// predicted ÷ published.
    pub fn ratio(&self) -> f64 {
        self.predicted / self.row.tokens_per_s
    }
}

/// The model's pieces for one published row: shape, weights, GPU, phase and tokens.
fn row_problem(r: &Published) -> Option<(DecoderShape, ModelWeights, GpuSpec, Phase, usize)> {
    let s = DecoderShape::preset(&r.model)?;
    let w = ModelWeights::of(&s, Quant::parse(&r.quant)?);
    let gpu = hardware::table().into_iter().find(|g| g.name == r.gpu)?;
    let (phase, n) = r.phase()?;
    Some((s, w, gpu, phase, n))
}

/// The unit-efficiency op times of a row's run (one step) and its step count and tokens.
type RowUnits = (Vec<UnitOp>, f64, f64, usize);

fn row_units(r: &Published) -> Option<(Phase, String, RowUnits)> {
    let (s, w, gpu, phase, n) = row_problem(r)?;
    let (units, steps) = phase_units(&s, &w, &gpu, phase, [1, n, 0]);
    Some((
        phase,
        vendor(&gpu).to_string(),
        (units, steps, n as f64, s.layers),
    ))
}

impl Efficiency {
    /// Every fit, computed once from the published rows (module docs).
    pub fn fitted() -> &'static [Efficiency] {
        static FITS: OnceLock<Vec<Efficiency>> = OnceLock::new();
        FITS.get_or_init(|| Self::fit_all(&fit_rows(|_| true)))
    }

    /// The fits over `rows`: every vendor's over all its backends, every backend's on a
    /// vendor's GPUs, then the pooled one (`all vendors`). A group with fewer than
    /// [`MIN_ROWS`] decode rows takes bandwidth and overhead from the group above it (a
    /// backend's from its vendor's, a vendor's from all vendors'), one without prefill rows
    /// its compute term.
    fn fit_all(rows: &[FitRow]) -> Vec<Efficiency> {
        let pooled = Self::fit("all vendors", None, rows.iter().collect(), None);
        let mut vendors: Vec<&str> = rows.iter().map(|r| r.vendor.as_str()).collect();
        vendors.sort();
        vendors.dedup();
        let mut fits = Vec::new();
        for v in vendors {
            let own: Vec<&FitRow> = rows.iter().filter(|r| r.vendor == v).collect();
            let vendor_fit = Self::fit(v, None, own.clone(), Some(&pooled));
            let mut backends: Vec<&str> = own.iter().map(|r| r.backend.as_str()).collect();
            backends.sort();
            backends.dedup();
            // A vendor of one backend: its terms are that backend's.
            if backends.len() > 1 {
                for b in backends {
                    let mine: Vec<&FitRow> =
                        own.iter().copied().filter(|r| r.backend == b).collect();
                    fits.push(Self::fit(v, Some(b), mine, Some(&vendor_fit)));
                }
            }
            fits.push(vendor_fit);
        }
        fits.push(pooled);
        fits
    }

    /// The fit over `rows` (module docs), terms its rows cannot fit taken from `above`.
    fn fit(
        vendor: &str,
        backend: Option<&str>,
        rows: Vec<&FitRow>,
        above: Option<&Efficiency>,
    ) -> Efficiency {
        let error = |e: &Efficiency, phase: Phase| -> f64 {
            rows.iter()
                .filter(|r| r.phase == phase)
                .map(|r| {
                    let (units, steps, tokens, layers) = &r.units;
                    let t = phase_time(units, *steps, *tokens, *layers, e);
                    (t.tokens_per_s / r.published).ln().abs()
                })
                .sum()
        };
        let count = |phase: Phase| rows.iter().filter(|r| r.phase == phase).count();
        let (decode, prefill) = (count(Phase::Decode), count(Phase::Prefill));
        let gpus = |phase: Phase| {
            let mut g: Vec<&str> = rows
                .iter()
                .filter(|r| r.phase == phase)
                .map(|r| r.gpu.as_str())
                .collect();
            g.sort();
            g.dedup();
            g.len()
        };
        let own_decode = decode >= MIN_ROWS && gpus(Phase::Decode) >= MIN_GPUS;
        let own_prefill = gpus(Phase::Prefill) >= MIN_GPUS;
        let mut best = Efficiency {
            vendor: vendor.into(),
            backend: backend.map(str::to_string),
            rows: (decode, prefill),
            bandwidth: 1.0,
            compute: 1.0,
            roof: Roof::Matrix,
            layer_overhead_s: 0.0,
            own_decode_terms: above.is_none() || own_decode,
            own_compute_term: above.is_none() || own_prefill,
        };
        match above.filter(|_| !own_decode) {
            Some(a) => {
                best.bandwidth = a.bandwidth;
                best.layer_overhead_s = a.layer_overhead_s;
            }
            None => {
                // Bandwidth in hundredths (20..=100) and overhead in steps of 2.5 µs
                // (0..=200): every fifth point of the grid first, then every point within
                // one coarse step of the best. The overhead adds `steps × layers × o` to a
                // row's time, so each bandwidth's times are priced once for all overheads.
                let at_bandwidth = |b: i32| -> Vec<(f64, f64, f64, f64)> {
                    let e = Efficiency {
                        bandwidth: b as f64 / 100.0,
                        layer_overhead_s: 0.0,
                        ..best.clone()
                    };
                    rows.iter()
                        .filter(|r| r.phase == Phase::Decode)
                        .map(|r| {
                            let (units, steps, tokens, layers) = &r.units;
                            let t = phase_time(units, *steps, *tokens, *layers, &e);
                            (t.seconds, steps * *layers as f64, *tokens, r.published)
                        })
                        .collect()
                };
                let decode_err = |priced: &[(f64, f64, f64, f64)], o: i32| -> f64 {
                    priced
                        .iter()
                        .map(|&(s, per_o, tokens, published)| {
                            let seconds = s + per_o * o as f64 * 2.5e-6;
                            (tokens / seconds / published).ln().abs()
                        })
                        .sum()
                };
                let best_over = |bs: Vec<i32>, os: Vec<i32>| -> (i32, i32) {
                    let (_, b, o) = bs
                        .into_iter()
                        .flat_map(|b| {
                            let priced = at_bandwidth(b);
                            os.iter()
                                .map(|&o| (decode_err(&priced, o), b, o))
                                .collect::<Vec<_>>()
                        })
                        .reduce(|a, c| if c.0 < a.0 { c } else { a })
                        .expect("a grid of at least one point");
                    (b, o)
                };
                let (b0, o0) = best_over(
                    (20..=100).step_by(5).collect(),
                    (0..=200).step_by(5).collect(),
                );
                let (b, o) = best_over(
                    ((b0 - 4).max(20)..=(b0 + 4).min(100)).collect(),
                    ((o0 - 4).max(0)..=(o0 + 4).min(200)).collect(),
                );
                best.bandwidth = b as f64 / 100.0;
                best.layer_overhead_s = o as f64 * 2.5e-6;
            }
        }
        match above.filter(|_| !own_prefill) {
            Some(a) => {
                best.compute = a.compute;
                best.roof = a.roof;
            }
            None => {
                // Each roof's best fraction; the roof whose best fits the prefill rows best
                // (the first of `Roof::ALL` on a tie).
                let prefill_err = |c: i32, roof: Roof| {
                    let e = Efficiency {
                        compute: c as f64 / 100.0,
                        roof,
                        ..best.clone()
                    };
                    (error(&e, Phase::Prefill), e)
                };
                let fitted = |roof: Roof| {
                    let c0 = min_by_error((5..=100).step_by(5), |c| prefill_err(c, roof).0);
                    let c = min_by_error((c0 - 4).max(5)..=(c0 + 4).min(100), |c| {
                        prefill_err(c, roof).0
                    });
                    prefill_err(c, roof)
                };
                best = Roof::ALL
                    .into_iter()
                    .map(fitted)
                    .reduce(|a, b| if b.0 < a.0 { b } else { a })
                    .expect("three roofs")
                    .1;
            }
        }
        best
    }
}

/// The point of `grid` with the smallest `error` (the first of equals).
fn min_by_error<P: Copy>(grid: impl Iterator<Item = P>, error: impl Fn(P) -> f64) -> P {
    grid.map(|p| (error(p), p))
        .reduce(|a, b| if b.0 < a.0 { b } else { a })
        .expect("a grid of at least one point")
        .1
}

/// A published row as the fit uses it.
struct FitRow {
    phase: Phase,
    gpu: String,
    vendor: String,
    backend: String,
    /// Unit-efficiency op times, steps, tokens, layers.
    units: RowUnits,
    /// Published tokens/s.
    published: f64,
}

/// The published rows that `keep` keeps, ready to fit.
fn fit_rows(keep: impl Fn(&Published) -> bool) -> Vec<FitRow> {
    published()
        .iter()
        .filter(|r| keep(r))
        .filter_map(|r| {
            let (phase, vendor, units) = row_units(r)?;
            Some(FitRow {
                phase,
                gpu: r.gpu.clone(),
                vendor,
                backend: r.backend.clone(),
                units,
                published: r.tokens_per_s,
            })
        })
        .collect()
}

/// Every published row the model can place, with its prediction under `fits` (the terms of
/// its backend on its vendor's GPUs, else of its vendor, else the pooled ones).
fn check_with(rows: Vec<Published>, fits: impl Fn(&Published) -> Vec<Efficiency>) -> Vec<Checked> {
    rows.into_iter()
        .filter_map(|r| {
            let (phase, vendor, (units, steps, tokens, layers)) = row_units(&r)?;
            let fits = fits(&r);
            let e = Efficiency::of(&fits, &vendor, Some(&r.backend));
            let predicted = phase_time(&units, steps, tokens, layers, e).tokens_per_s;
            Some(Checked {
                row: r,
                vendor,
                phase,
                predicted,
            })
        })
        .collect()
}

/// Every published row the model can place, with its prediction (in-sample: the terms were
/// fitted to these rows).
pub fn check_published() -> Vec<Checked> {
    check_with(published(), |_| Efficiency::fitted().to_vec())
}

/// Every published row predicted with terms fitted without its GPU's rows (leave one GPU
/// out): how the model does on a GPU it has not seen.
pub fn check_held_out() -> Vec<Checked> {
    let mut gpus: Vec<String> = published().into_iter().map(|r| r.gpu).collect();
    gpus.sort();
    gpus.dedup();
    let folds: Vec<(String, Vec<Efficiency>)> = gpus
        .into_iter()
        .map(|g| {
            let fits = Efficiency::fit_all(&fit_rows(|r| r.gpu != g));
            (g, fits)
        })
        .collect();
    check_with(published(), |r| {
        folds
            .iter()
            .find(|(g, _)| *g == r.gpu)
            .map(|(_, f)| f.clone())
            .unwrap_or_default()
    })
}

/// The median of |predicted ÷ published − 1| over `rows`, `None` when empty.
pub fn median_error<'a>(rows: impl Iterator<Item = &'a Checked>) -> Option<f64> {
    let mut e: Vec<f64> = rows.map(|c| (c.ratio() - 1.0).abs()).collect();
    if e.is_empty() {
        return None;
    }
    e.sort_by(f64::total_cmp);
    let n = e.len();
    Some(if n % 2 == 1 {
        e[n / 2]
    } else {
        (e[n / 2 - 1] + e[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_published_row_is_placed_and_sourced() {
        let rows = published();
        let checked = check_published();
        assert_eq!(
            checked.len(),
            rows.len(),
            "a row names an unknown GPU, model or test"
        );
        let mut gpus: Vec<&str> = rows.iter().map(|r| r.gpu.as_str()).collect();
        gpus.sort();
        gpus.dedup();
        assert!(gpus.len() >= 15, "{} GPUs", gpus.len());
        let mut vendors: Vec<&str> = checked.iter().map(|c| c.vendor.as_str()).collect();
        vendors.sort();
        vendors.dedup();
        assert!(vendors.len() >= 3, "{vendors:?}");
        assert!(
            rows.iter()
                .all(|r| r.source.len() > 20 && r.tokens_per_s > 0.0)
        );
    }

    #[test]
    fn a_superseded_row_has_a_kept_row_of_its_configuration() {
        // A row is superseded only by a later build's row of the same GPU, backend, model,
        // format and test, which the fit keeps; the superseded row itself is not checked.
        let config = |r: &Published| {
            (
                r.gpu.clone(),
                r.backend.clone(),
                r.model.clone(),
                r.quant.clone(),
                r.test.clone(),
            )
        };
        let kept = published();
        let superseded: Vec<&Published> = file_rows()
            .iter()
            .filter(|r| r.superseded.is_some())
            .collect();
        assert!(!superseded.is_empty());
        assert_eq!(kept.len() + superseded.len(), file_rows().len());
        for r in superseded {
            assert!(
                kept.iter().any(|k| config(k) == config(r)),
                "{r:?} has no kept row of its configuration"
            );
            assert!(!kept.contains(r));
        }
    }

    #[test]
    fn published_rates_are_predicted_within_the_goals() {
        // Goals: median error ≤ 20 % for decode and ≤ 35 % for prefill over all rows; no
        // vendor's median beyond 30 % (decode) and 50 % (prefill).
        let checked = check_published();
        let of = |phase: Phase, vendor: Option<&str>| {
            median_error(
                checked
                    .iter()
                    .filter(|c| c.phase == phase && vendor.is_none_or(|v| c.vendor == v)),
            )
        };
        let decode = of(Phase::Decode, None).unwrap();
        let prefill = of(Phase::Prefill, None).unwrap();
        assert!(decode <= 0.20, "decode median error {decode}");
        assert!(prefill <= 0.35, "prefill median error {prefill}");
        for v in ["NVIDIA", "AMD", "Apple", "Intel"] {
            if let Some(d) = of(Phase::Decode, Some(v)) {
                assert!(d <= 0.30, "{v} decode {d}");
            }
            if let Some(p) = of(Phase::Prefill, Some(v)) {
                assert!(p <= 0.50, "{v} prefill {p}");
            }
        }
    }

    #[test]
    fn rows_of_gpus_left_out_of_the_fit_meet_the_overall_goals() {
        // Each GPU's rows predicted with terms fitted without them: decode ≤ 20 %, prefill
        // ≤ 35 % median error over all rows (measured: 7 % and 12 %, 287 rows of 52 GPUs).
        let held = check_held_out();
        assert_eq!(held.len(), published().len());
        let of = |phase: Phase| median_error(held.iter().filter(|c| c.phase == phase)).unwrap();
        assert!(of(Phase::Decode) <= 0.20, "{}", of(Phase::Decode));
        assert!(of(Phase::Prefill) <= 0.35, "{}", of(Phase::Prefill));
    }

    #[test]
    fn a_backends_terms_serve_where_fitted_else_its_vendors() {
        let gpu = |name: &str| hardware::find(name).unwrap();
        let group =
            |name: &str, backend: Option<&str>| Efficiency::for_gpu(&gpu(name), backend).group();
        // AMD's rows name ROCm and Vulkan: each has terms of its own, and a prefill on one
        // is priced apart from the other.
        assert_eq!(group("RX 7900 XTX", Some("vulkan")), "AMD on Vulkan");
        assert_eq!(group("RX 7900 XTX", Some("ROCm")), "AMD on ROCm");
        let amd = |b| Efficiency::for_gpu(&gpu("RX 7900 XTX"), b);
        assert_ne!(amd(Some("Vulkan")).compute, amd(Some("ROCm")).compute);
        // No rows of that backend, or none named: the vendor's terms over all its backends.
        assert_eq!(group("RX 7900 XTX", Some("CUDA")), "AMD");
        assert_eq!(group("RX 7900 XTX", None), "AMD");
        // Apple's rows name one backend: its vendor's terms are that backend's.
        assert_eq!(group("M2 Max", Some("Metal")), "Apple");
        let fits = Efficiency::fitted();
        assert!(
            !fits
                .iter()
                .any(|e| e.vendor == "Apple" && e.backend.is_some())
        );
        assert!(fits.iter().any(|e| e.vendor == "all vendors"));
    }

    #[test]
    fn a_row_far_off_its_peers_barely_moves_its_groups_terms() {
        // AMD's decode rows, then the same with one row published 5× slower (a regressed
        // build): under the absolute log error the first row's prediction stays within 3 %
        // (it does not move); under a squared one it followed the outlier by 10 %.
        let rows = fit_rows(|r| r.gpu.contains("AMD"));
        let fit = |rows: &[FitRow]| Efficiency::fit("AMD", None, rows.iter().collect(), None);
        let before = fit(&rows);
        let mut with = fit_rows(|r| r.gpu.contains("AMD"));
        let first = with
            .iter()
            .position(|r| r.phase == Phase::Decode)
            .expect("AMD decode rows");
        let mut slow = fit_rows(|r| r.gpu.contains("AMD")).swap_remove(first);
        slow.published /= 5.0;
        with.push(slow);
        let after = fit(&with);
        let tokens_per_s = |e: &Efficiency| {
            let r = &rows[first];
            let (units, steps, tokens, layers) = &r.units;
            phase_time(units, *steps, *tokens, *layers, e).tokens_per_s
        };
        let moved = tokens_per_s(&after) / tokens_per_s(&before);
        assert!(
            moved > 0.97 && moved <= 1.0,
            "{moved}: {before:?} → {after:?}"
        );
    }

    #[test]
    fn fits_stay_physical() {
        for e in Efficiency::fitted() {
            assert!(e.bandwidth > 0.2 && e.bandwidth <= 1.0, "{e:?}");
            assert!(e.compute > 0.05 && e.compute <= 1.0, "{e:?}");
            assert!(e.layer_overhead_s < 5e-4, "{e:?}");
        }
    }
}
