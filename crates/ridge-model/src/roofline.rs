//! The roofline model (Williams, Waterman & Patterson, "Roofline: an insightful visual
//! performance model for multicore architectures", CACM 52(4), 2009).
//!
//! attainable FLOP/s = min(peak, intensity × bandwidth); the ridge point is the intensity
//! peak ÷ bandwidth where the two meet. Predicted time of an op:
//! `max(FLOPs ÷ peak, bytes ÷ bandwidth) + per-dispatch overhead`.

use serde::{Deserialize, Serialize};

use crate::cost::OpCost;

/// Where a set of ceilings comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum CeilingSource {
    /// A row of the hardware spec table (vendor datasheet figures).
    Spec(String),
    /// Measured by Ridge on the adapter itself.
    Measured(String),
    /// Given by the user.
    Custom(String),
}

/// The two roofs and the fixed cost of a dispatch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// Peak arithmetic throughput, FLOP/s.
    pub peak_flops: f64,
    /// Peak memory bandwidth, bytes/s.
    pub bandwidth: f64,
    /// Fixed time per dispatch, seconds (0 for datasheet ceilings, which do not state one).
    pub dispatch_overhead_s: f64,
    /// Where the numbers come from.
    pub source: CeilingSource,
}

/// Which roof limits an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Bound {
    /// FLOPs ÷ peak ≥ bytes ÷ bandwidth: left of nothing, right of the ridge point.
    Compute,
    /// bytes ÷ bandwidth > FLOPs ÷ peak: left of the ridge point.
    Memory,
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bound::Compute => "compute",
            Bound::Memory => "memory",
        })
    }
}

/// A predicted time and its parts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    /// Predicted time, seconds: max(compute, memory) + overhead.
    pub seconds: f64,
    /// FLOPs ÷ peak, seconds.
    pub compute_s: f64,
    /// Bytes ÷ bandwidth, seconds.
    pub memory_s: f64,
    /// The dispatch overhead, seconds.
    pub overhead_s: f64,
    /// Which roof applies.
    pub bound: Bound,
}

impl Ceilings {
    /// Ceilings from TFLOP/s and GB/s (10¹² FLOP/s, 10⁹ bytes/s).
    pub fn new(tflops: f64, gbps: f64, dispatch_overhead_s: f64, source: CeilingSource) -> Self {
        Self {
            peak_flops: tflops * 1e12,
            bandwidth: gbps * 1e9,
            dispatch_overhead_s,
            source,
        }
    }

    /// The ridge point, FLOP/byte: peak ÷ bandwidth.
    pub fn ridge_point(&self) -> f64 {
        self.peak_flops / self.bandwidth
    }

    /// Attainable FLOP/s at `intensity` FLOP/byte: min(peak, intensity × bandwidth).
    pub fn attainable(&self, intensity: f64) -> f64 {
        self.peak_flops.min(intensity * self.bandwidth)
    }

    /// Predicted time of `cost` (see the module docs).
    pub fn predict(&self, cost: &OpCost) -> Prediction {
        let compute_s = cost.flops / self.peak_flops;
        let memory_s = cost.bytes / self.bandwidth;
        let bound = if compute_s >= memory_s {
            Bound::Compute
        } else {
            Bound::Memory
        };
        Prediction {
            seconds: compute_s.max(memory_s) + self.dispatch_overhead_s,
            compute_s,
            memory_s,
            overhead_s: self.dispatch_overhead_s,
            bound,
        }
    }

    /// Share of the roofline an op reached: attainable time (without overhead) ÷ measured
    /// time, in [0, 1] when the ceilings are right. `None` for an unmeasured time.
    pub fn fraction_of_roofline(&self, cost: &OpCost, measured_s: f64) -> Option<f64> {
        (measured_s.is_finite() && measured_s > 0.0).then(|| {
            let p = self.predict(cost);
            p.compute_s.max(p.memory_s) / measured_s
        })
    }
}

/// Median of |log2(measured ÷ predicted)| over pairs of (measured, predicted) seconds:
/// 0 is perfect, 0.32 is within 1.25× (log2 1.25), 1 is 2× off. `None` without pairs.
pub fn median_abs_log2_error(pairs: &[(f64, f64)]) -> Option<f64> {
    let mut e: Vec<f64> = pairs
        .iter()
        .filter(|(m, p)| *m > 0.0 && *p > 0.0 && m.is_finite() && p.is_finite())
        .map(|(m, p)| (m / p).log2().abs())
        .collect();
    if e.is_empty() {
        return None;
    }
    e.sort_by(f64::total_cmp);
    let mid = e.len() / 2;
    Some(if e.len() % 2 == 1 {
        e[mid]
    } else {
        (e[mid - 1] + e[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> Ceilings {
        Ceilings::new(66.9, 4800.0, 0.0, CeilingSource::Spec("H200".into()))
    }

    #[test]
    fn ridge_point_is_peak_over_bandwidth() {
        assert!((h200().ridge_point() - 66.9e12 / 4.8e12).abs() < 1e-12);
    }

    #[test]
    fn attainable_is_the_lower_roof() {
        let c = h200();
        assert_eq!(c.attainable(1.0), 4.8e12);
        assert_eq!(c.attainable(1000.0), c.peak_flops);
        assert!((c.attainable(c.ridge_point()) - 66.9e12).abs() < 1.0);
    }

    #[test]
    fn predictions_pick_the_binding_roof_and_add_overhead() {
        let c = Ceilings {
            dispatch_overhead_s: 5e-6,
            ..h200()
        };
        // A copy of 1 GB: memory-bound, 2 GB moved at 4.8 TB/s.
        let p = c.predict(&OpCost::new(0.0, 2e9));
        assert_eq!(p.bound, Bound::Memory);
        assert!((p.seconds - (2e9 / 4.8e12 + 5e-6)).abs() < 1e-15);
        // 4096³ GEMM: 137 GFLOP over 201 MB — compute-bound.
        let n = 4096.0f64;
        let p = c.predict(&OpCost::new(2.0 * n * n * n, 12.0 * n * n));
        assert_eq!(p.bound, Bound::Compute);
        // A memory-bound op's time scales with its bytes.
        let a = c.predict(&OpCost::new(0.0, 1e9)).memory_s;
        let b = c.predict(&OpCost::new(0.0, 4e9)).memory_s;
        assert!((b / a - 4.0).abs() < 1e-12);
    }

    #[test]
    fn accuracy_metric() {
        assert_eq!(
            median_abs_log2_error(&[(2.0, 1.0), (1.0, 1.0), (1.0, 4.0)]),
            Some(1.0)
        );
        assert_eq!(median_abs_log2_error(&[]), None);
        assert!((median_abs_log2_error(&[(1.25, 1.0)]).unwrap() - 1.25f64.log2()).abs() < 1e-12);
    }
}
