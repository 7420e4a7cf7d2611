//! Kinds swept again merged into a report of the same adapter ([`BenchReport::with_kinds_of`],
//! `ridge bench --op … --onto REPORT`).

use super::{Accuracy, BenchReport, Measured, ReportError, Row};
use crate::roofline::Ceilings;

/// Whether a kind is one a field of the matrix-vector launch rule governs.
type Governs = fn(&str) -> bool;

/// A one-row product's kind (`qmatvec`, `rms_qmatvec_rope_int8`, …).
fn one_row_product(op: &str) -> bool {
    op.contains("qmatvec") && !op.ends_with("_rows")
}

/// A short prompt's product's kind (`qmatvec_rows`, …).
fn short_prompt_product(op: &str) -> bool {
    op.contains("qmatvec") && op.ends_with("_rows")
}

impl BenchReport {
    /// This report with `sweep`'s kinds in place of its own rows of those kinds, for kinds
    /// swept again after their kernel changed (`ridge bench --op … --onto REPORT`): its
    /// ceilings and its other kinds' rows kept, the new rows after the kept rows that came
    /// before the first replaced one. Each new row's roofline prediction is priced by this
    /// report's ceilings (the same roof, f16 or tensor cores, its sweep priced it by), then
    /// the accuracy and the per-op terms are computed again.
    ///
    /// The matrix-vector launch rule the report records (`int8_storage_bytes`,
    /// `lane_rows`, `prompt_lane_rows`) becomes the sweep's: where a field differs, every
    /// kind of the report it governs (the one-row products' for the first two, the short
    /// prompts' `…_rows` for the third) must be in the sweep.
    ///
    /// Errors: [`ReportError::OtherAdapter`] where the two reports' adapter, backend or
    /// driver differ; [`ReportError::StaleKinds`] where the launch rule changed and a kind
    /// it governs was not swept again.
    pub fn with_kinds_of(&self, sweep: &BenchReport) -> Result<BenchReport, ReportError> {
        let who = |r: &BenchReport| format!("{} ({}, {})", r.adapter, r.backend, r.driver);
        if who(self) != who(sweep) {
            return Err(ReportError::OtherAdapter {
                report: who(self),
                sweep: who(sweep),
            });
        }
        let kinds: std::collections::HashSet<&str> =
            sweep.rows.iter().map(|r| r.op.as_str()).collect();
        let (mine, theirs) = (&self.measured, &sweep.measured);
        let rules = [
            (
                "int8_storage_bytes",
                mine.int8_storage_bytes != theirs.int8_storage_bytes,
                one_row_product as Governs,
            ),
            (
                "lane_rows",
                mine.lane_rows != theirs.lane_rows,
                one_row_product,
            ),
            (
                "prompt_lane_rows",
                mine.prompt_lane_rows != theirs.prompt_lane_rows,
                short_prompt_product,
            ),
        ];
        for (field, changed, governs) in rules {
            let stale: std::collections::BTreeSet<&str> = self
                .rows
                .iter()
                .map(|r| r.op.as_str())
                .filter(|op| changed && governs(op) && !kinds.contains(op))
                .collect();
            if !stale.is_empty() {
                return Err(ReportError::StaleKinds {
                    field,
                    kinds: stale.into_iter().collect::<Vec<_>>().join(", "),
                });
            }
        }
        let at = self
            .rows
            .iter()
            .position(|r| kinds.contains(r.op.as_str()))
            .unwrap_or(self.rows.len());
        let mut rows: Vec<Row> = self.rows[..at]
            .iter()
            .filter(|r| !kinds.contains(r.op.as_str()))
            .cloned()
            .collect();
        rows.extend(sweep.rows.iter().map(|r| self.repriced(sweep, r)));
        rows.extend(
            self.rows[at..]
                .iter()
                .filter(|r| !kinds.contains(r.op.as_str()))
                .cloned(),
        );
        let measured = Measured {
            int8_storage_bytes: theirs.int8_storage_bytes,
            lane_rows: theirs.lane_rows,
            prompt_lane_rows: theirs.prompt_lane_rows,
            ..mine.clone()
        };
        let mut merged = BenchReport {
            measured,
            accuracy_measured: Accuracy::of(&rows, |r| Some(r.predicted_measured_ms)),
            accuracy_spec: Accuracy::of(&rows, |r| r.predicted_spec_ms),
            rows,
            calibration: None,
            ..self.clone()
        };
        merged.calibration = Some(crate::calibrate::Calibration::fit(&merged));
        Ok(merged)
    }

    /// `row` of `sweep` with its roofline prediction and fraction priced by this report's
    /// measured ceilings: the roof (f16 or f32 FMA, tensor cores) whose price under `sweep`'s
    /// ceilings is the row's own.
    fn repriced(&self, sweep: &BenchReport, row: &Row) -> Row {
        let cost = row.cost();
        let f16 = row.dtype == "f16";
        let ms = |c: &Ceilings| c.predict(&cost).seconds * 1e3;
        let tensor = [false, true].into_iter().min_by(|&a, &b| {
            let off =
                |t| (ms(&sweep.measured.ceilings_for(f16, t)) - row.predicted_measured_ms).abs();
            off(a).total_cmp(&off(b))
        });
        let ceil = self.measured.ceilings_for(f16, tensor.unwrap_or(false));
        let p = ceil.predict(&cost);
        Row {
            predicted_measured_ms: p.seconds * 1e3,
            bound: p.bound,
            roofline_fraction: row
                .measured_ms
                .and_then(|m| ceil.fraction_of_roofline(&cost, m * 1e-3)),
            ..row.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of some kinds merged into a report of the same adapter replaces exactly those
    /// kinds' rows, priced by the report's ceilings; the same rows give the same report back;
    /// a sweep with another launch rule must bring every kind the rule governs; another
    /// adapter's rows are refused.
    #[test]
    fn kinds_swept_again_replace_their_rows() {
        let text = include_str!("../../../../benches/reports/lavapipe.json");
        let base = BenchReport::parse(text.as_bytes()).unwrap();
        let kind = |r: &Row| r.op == "qmatvec_rows";
        // A sweep of one kind in a slower state: half the copy rate, its roofline priced so.
        let mut sweep = base.clone();
        sweep.measured.bandwidth_gbps *= 0.5;
        sweep.rows.retain(kind);
        assert!(!sweep.rows.is_empty());
        for r in &mut sweep.rows {
            let c = sweep.measured.ceilings_for(r.dtype == "f16", false);
            r.predicted_measured_ms = c.predict(&r.cost()).seconds * 1e3;
        }
        // The rows by case (the sweep's rows of a kind come together, where the report's
        // kinds may interleave).
        let cases = |r: &BenchReport| {
            let mut rows = r.rows.clone();
            rows.sort_by(|a, b| (&a.op, &a.shape, &a.dtype).cmp(&(&b.op, &b.shape, &b.dtype)));
            rows
        };
        let same = base.with_kinds_of(&sweep).unwrap();
        assert_eq!(same.rows.len(), base.rows.len());
        for (a, b) in cases(&same).iter().zip(&cases(&base)) {
            let close = (a.predicted_measured_ms - b.predicted_measured_ms).abs()
                <= 1e-12 * b.predicted_measured_ms;
            assert!(
                a.op == b.op && a.shape == b.shape && close,
                "{a:?} against {b:?}"
            );
        }
        // Twice as slow: those rows and their kind's terms change, no other.
        for r in &mut sweep.rows {
            r.measured_ms = r.measured_ms.map(|m| 2.0 * m);
        }
        let slower = base.with_kinds_of(&sweep).unwrap();
        for (a, b) in cases(&slower).iter().zip(&cases(&base)) {
            let want = b.measured_ms.map(|m| if kind(b) { 2.0 * m } else { m });
            assert_eq!(a.measured_ms, want);
        }
        let terms = |r: &BenchReport, op: &str| {
            let c = r.calibration.as_ref().unwrap();
            let k = c.kinds.iter().find(|k| k.op == op && k.dtype == "f32");
            k.unwrap().fitted_error
        };
        assert_eq!(terms(&slower, "gemm"), terms(&base, "gemm"));
        assert_ne!(terms(&slower, "qmatvec_rows"), terms(&base, "qmatvec_rows"));
        // Swept with another launch rule for short prompts: the rule comes with the rows, and
        // every kind it governs must come too.
        sweep.measured.prompt_lane_rows = !base.measured.prompt_lane_rows;
        let e = base.with_kinds_of(&sweep).unwrap_err().to_string();
        assert!(
            e.contains("prompt_lane_rows") && e.contains("rms_qmatvec_swiglu_rows"),
            "{e}"
        );
        let mut all = base.clone();
        all.measured.prompt_lane_rows = sweep.measured.prompt_lane_rows;
        all.rows.retain(|r| r.op.ends_with("_rows"));
        let ruled = base.with_kinds_of(&all).unwrap();
        assert_eq!(
            ruled.measured.prompt_lane_rows,
            all.measured.prompt_lane_rows
        );
        let mut other = sweep.clone();
        other.adapter = "another adapter".into();
        let e = base.with_kinds_of(&other).unwrap_err().to_string();
        assert!(e.starts_with("a sweep of another adapter"), "{e}");
    }
}
