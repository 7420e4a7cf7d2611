//! The cost of one op: FLOPs and minimal memory traffic.

use serde::{Deserialize, Serialize};

/// What one op costs: floating-point work and the fewest bytes it must move.
///
/// - `flops`: floating-point operations, a multiply-add counted as 2.
/// - `bytes`: bytes read + bytes written, each input read once and each output written once.
/// - `depth`: the reduction depth a workgroup walks in sequence, whatever the GPU's width:
///   K of a product, the keys a query sees in attention (on average); 0 where there is none.
///   Calibrated kinds that are compute-bound price it (`crate::calibrate`): a product too
///   small to fill the GPU takes time in proportion to K, not to its FLOPs.
/// - `tiled_flops`: the FLOPs of the whole workgroup tiles the kernel computes (a product's
///   output padded up to its tiles: 16 rows in 128-row tiles cost 128 rows), 0 where the
///   kernel's tiling is not known. Calibrated compute-bound kinds price the larger of the two
///   ([`OpCost::work_flops`]); the roofline keeps `flops`, the useful work.
/// - `workgroups`: the workgroups the kernel launches where the cost states them (Ridge's row
///   kernels — the norms, softmax — launch one a row), 0 where not stated. Calibrated kinds
///   may price a time per workgroup (`crate::calibrate`): a CPU driver runs a workgroup on a
///   thread at a fixed cost whatever its bytes.
/// - `invocations`: the invocations the kernel launches where the cost states them (the
///   matrix-vector products, whose launch shapes put 64 to 256 invocations in a workgroup), 0
///   where not stated. A calibrated kind whose launches all state them prices its time per
///   launch unit per invocation rather than per workgroup ([`OpCost::units`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpCost {
    /// Floating-point operations (multiply-add = 2).
    pub flops: f64,
    /// Fewest bytes read plus written, in bytes.
    pub bytes: f64,
    /// Reduction depth (elements walked in sequence), 0 for none.
    #[serde(default)]
    pub depth: f64,
    /// FLOPs of the whole tiles launched, padding included; 0 for unknown.
    #[serde(default)]
    pub tiled_flops: f64,
    /// Workgroups launched; 0 for not stated.
    #[serde(default)]
    pub workgroups: f64,
    /// Invocations launched; 0 for not stated.
    #[serde(default)]
    pub invocations: f64,
}

impl OpCost {
    /// A cost from FLOPs and bytes (no reduction depth).
    pub fn new(flops: f64, bytes: f64) -> Self {
        Self {
            flops,
            bytes,
            depth: 0.0,
            tiled_flops: 0.0,
            workgroups: 0.0,
            invocations: 0.0,
        }
    }

    /// The same cost launched as `workgroups` workgroups.
    pub fn with_workgroups(self, workgroups: usize) -> Self {
        Self {
            workgroups: workgroups as f64,
            ..self
        }
    }

    /// The same cost launched as `invocations` invocations.
    pub fn with_invocations(self, invocations: usize) -> Self {
        Self {
            invocations: invocations as f64,
            ..self
        }
    }

    /// The units of a launch a calibrated time per unit prices (`crate::calibrate`'s `W`):
    /// its invocations where the kind's are (`per_invocation`), else its workgroups (0 where
    /// not stated).
    pub fn units(&self, per_invocation: bool) -> f64 {
        if per_invocation {
            self.invocations
        } else {
            self.workgroups
        }
    }

    /// The same cost with reduction depth `depth` (elements).
    pub fn with_depth(self, depth: f64) -> Self {
        Self { depth, ..self }
    }

    /// The same cost launched as `tiles` workgroup tiles of `tile_flops` FLOPs each.
    pub fn with_tiles(self, tiles: usize, tile_flops: f64) -> Self {
        Self {
            tiled_flops: tiles as f64 * tile_flops,
            ..self
        }
    }

    /// The work a compute-bound launch's time follows: the whole tiles' FLOPs where known
    /// and larger, else the FLOPs.
    pub fn work_flops(&self) -> f64 {
        self.flops.max(self.tiled_flops)
    }

    /// Arithmetic intensity in FLOP/byte (Williams et al., CACM 2009). Zero bytes give
    /// `f64::INFINITY` when there is work, and 0 when there is none.
    pub fn intensity(&self) -> f64 {
        if self.bytes > 0.0 {
            self.flops / self.bytes
        } else if self.flops > 0.0 {
            f64::INFINITY
        } else {
            0.0
        }
    }

    /// Achieved GFLOP/s for a measured time in milliseconds; `None` for a time that is not a
    /// positive finite number (an unmeasured time never becomes a rate).
    pub fn gflops(&self, ms: f64) -> Option<f64> {
        rate(self.flops, ms)
    }

    /// Achieved GB/s (10⁹ bytes per second) for a measured time in milliseconds; `None` for a
    /// time that is not a positive finite number.
    pub fn gbps(&self, ms: f64) -> Option<f64> {
        rate(self.bytes, ms)
    }
}

/// Work and bytes add; the depth is the deeper of the two (an epilogue or a prologue added
/// to a product keeps the product's K), and so are the workgroups and invocations (the pieces
/// of one launch);
/// tiled work adds where either side knows its tiles (the other counted at its FLOPs).
impl std::ops::Add for OpCost {
    type Output = OpCost;
    fn add(self, rhs: OpCost) -> OpCost {
        let tiled = if self.tiled_flops > 0.0 || rhs.tiled_flops > 0.0 {
            self.work_flops() + rhs.work_flops()
        } else {
            0.0
        };
        OpCost {
            tiled_flops: tiled,
            workgroups: self.workgroups.max(rhs.workgroups),
            invocations: self.invocations.max(rhs.invocations),
            ..OpCost::new(self.flops + rhs.flops, self.bytes + rhs.bytes)
                .with_depth(self.depth.max(rhs.depth))
        }
    }
}

impl std::iter::Sum for OpCost {
    fn sum<I: Iterator<Item = OpCost>>(iter: I) -> OpCost {
        iter.fold(OpCost::default(), |a, b| a + b)
    }
}

/// `amount` per millisecond expressed per second in units of 10⁹.
fn rate(amount: f64, ms: f64) -> Option<f64> {
    (ms.is_finite() && ms > 0.0).then(|| amount / (ms * 1e-3) / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intensity_is_flops_per_byte() {
        assert_eq!(OpCost::new(200.0, 100.0).intensity(), 2.0);
        assert_eq!(OpCost::new(1.0, 0.0).intensity(), f64::INFINITY);
        assert_eq!(OpCost::new(0.0, 0.0).intensity(), 0.0);
    }

    /// Padded tiles count where they exceed the useful work, and survive a sum.
    #[test]
    fn tiled_work() {
        let c = OpCost::new(100.0, 1.0).with_tiles(2, 80.0);
        assert_eq!(c.work_flops(), 160.0);
        assert_eq!(OpCost::new(100.0, 1.0).work_flops(), 100.0);
        assert_eq!((c + OpCost::new(5.0, 1.0)).work_flops(), 165.0);
        assert_eq!(
            (OpCost::new(5.0, 1.0) + OpCost::new(7.0, 1.0)).tiled_flops,
            0.0
        );
    }

    #[test]
    fn rates_need_a_measured_time() {
        let c = OpCost::new(2e9, 1e9);
        assert_eq!(c.gflops(1000.0), Some(2.0));
        assert_eq!(c.gbps(1.0), Some(1000.0));
        assert_eq!(c.gflops(0.0), None);
        assert_eq!(c.gflops(f64::NAN), None);
        assert_eq!(c.gbps(-1.0), None);
    }
}
