//! `--report FILE`: a `ridge bench --json` report of the same adapter, whose fitted per-op
//! terms (`ridge_model::calibrate`, fitted on the report's kernel runs, never on the bench's
//! own) price each op of a forward beside the roofline.

use ridge::core::DType;
use ridge::model::calibrate;
use ridge::model::report::BenchReport;
use ridge::model::transformer::PlannedOp;
use ridge::model::{Ceilings, OpCost};

/// A report and its fitted terms, for ops stored in `dtype`.
pub struct Calibrated {
    cal: calibrate::Calibrated,
    dtype: String,
}

impl Calibrated {
    /// The report at `--report`, if given, with its terms ([`calibrate::Calibrated::new`]).
    ///
    /// Exits with status 2 and one line on an unreadable file or one that is not a report.
    pub fn from_args(dtype: DType) -> Option<Self> {
        let path = super::value("--report")?;
        let fail = |why: String| -> ! {
            eprintln!("--report {path}: {why}");
            std::process::exit(2)
        };
        let bytes = std::fs::read(&path).unwrap_or_else(|e| fail(e.to_string()));
        let report = BenchReport::parse(&bytes).unwrap_or_else(|e| fail(e.to_string()));
        Some(Self {
            cal: calibrate::Calibrated::new(report),
            dtype: dtype.to_string(),
        })
    }

    /// A warning when this adapter's copy bandwidth (`bandwidth_gbps`, measured now) is not
    /// within 2× of the report's: its terms were fitted on another adapter, or another state
    /// of this one (a lavapipe report taken before its kernels grew 10× faster priced MiniLM
    /// 13× slow without a word).
    pub fn warn_if_foreign(&self, bandwidth_gbps: f64) {
        let theirs = self.cal.report.measured.bandwidth_gbps;
        let ratio = bandwidth_gbps / theirs;
        if !(0.5..=2.0).contains(&ratio) {
            eprintln!(
                "warning: the report measured {theirs:.1} GB/s of copy bandwidth, this adapter \
                 {bandwidth_gbps:.1}: its fitted terms may not describe these kernels here"
            );
        }
    }

    /// One launch of swept kind `kind` costing `cost`: its calibrated time, ms, and whether
    /// the report fitted that kind (else the roofline `ceil` priced it).
    pub fn predict(&self, kind: &str, cost: &OpCost, ceil: &Ceilings) -> (f64, bool) {
        let (s, fitted) = self.cal.price(kind, &self.dtype, cost, ceil);
        (s * 1e3, fitted)
    }

    /// A decoder plan's ops priced in order ([`ridge::nn::llama::price_ops`]: a split
    /// attention's merge pass inside its fitted kind), every kind held against `ceil` where
    /// the report did not fit it.
    pub fn price_plan(
        &self,
        plan: &[ridge::nn::llama::PlannedOp],
        ceil: &Ceilings,
    ) -> Vec<ridge::nn::llama::OpPrice> {
        ridge::nn::llama::price_ops(plan, &self.cal, &self.dtype, |_| ceil.clone())
    }

    /// An encoder plan's `ops` priced and summed (a split GEMM as one launch of its kind:
    /// `ridge_model::calibrate::Calibrated::price_planned`): ms, and whether every kind was
    /// fitted.
    pub fn predict_all<'a>(
        &self,
        ops: impl IntoIterator<Item = &'a PlannedOp>,
        ceil: &Ceilings,
    ) -> (f64, bool) {
        ops.into_iter()
            .map(|op| self.cal.price_planned(op, &self.dtype, ceil))
            .fold((0.0, true), |(t, all), (s, fitted)| {
                (t + s * 1e3, all && fitted)
            })
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
