//! `--report FILE`: a `ridge bench --json` report of the same adapter, whose fitted per-op
//! terms (`ridge_model::calibrate`, fitted on the report's kernel runs, never on the bench's
//! own) price each op of a forward beside the roofline.

use ridge::core::DType;
use ridge::model::calibrate::Calibration;
use ridge::model::report::BenchReport;
use ridge::model::{Ceilings, OpCost};

/// A report and its fitted terms, for ops stored in `dtype`.
pub struct Calibrated {
    report: BenchReport,
    fit: Calibration,
    dtype: String,
}

impl Calibrated {
    /// The report at `--report`, if given; its stored terms (the ones `ridge bench` printed),
    /// fitted here only for a report that predates them.
    ///
    /// Panics on an unreadable or malformed file (a bench, not a CLI).
    pub fn from_args(dtype: DType) -> Option<Self> {
        let path = super::value("--report")?;
        let text = std::fs::read_to_string(&path).expect("--report FILE");
        let report: BenchReport = serde_json::from_str(&text).expect("a ridge bench --json report");
        let fit = report
            .calibration
            .clone()
            .unwrap_or_else(|| Calibration::fit(&report));
        Some(Self {
            report,
            fit,
            dtype: dtype.to_string(),
        })
    }

    /// One launch of swept kind `kind` costing `cost`: its calibrated time, ms, and whether
    /// the report fitted that kind (else the roofline `ceil` priced it).
    pub fn predict(&self, kind: &str, cost: &OpCost, ceil: &Ceilings) -> (f64, bool) {
        match self
            .fit
            .predict(&self.report, kind, &self.dtype, cost.flops, cost.bytes)
        {
            Some(s) => (s * 1e3, true),
            None => (ceil.predict(cost).seconds * 1e3, false),
        }
    }
}

/// The calibrated column of an op table's row: `predicted` ms, `~` unless every op was fitted
/// (else the roofline priced it), and measured ÷ predicted.
pub fn cell(predicted: f64, fitted: bool, measured: Option<f64>) -> String {
    format!(
        "  calibrated {predicted:>8.4} ms {} {:>7}",
        if fitted { " " } else { "~" },
        measured.map_or(String::new(), |ms| format!("{:.2}×", ms / predicted))
    )
}
