//! Comparing a kernel's output with its f64 reference under a per-element error bound.
//!
//! Each op states its bound next to its reference (`error_bound` / `error_bounds`), derived
//! from the unit roundoff of f32 accumulation and of the storage type; tests, `ridge check`
//! and the browser page all compare through [`compare`].

use ridge_core::DType;

/// f32 unit roundoff u = 2⁻²⁴ (IEEE 754 binary32, round to nearest).
pub const U32: f64 = 5.960464477539063e-8;
/// f16 unit roundoff u = 2⁻¹¹ (IEEE 754 binary16, round to nearest).
pub const U16: f64 = 4.8828125e-4;

/// Unit roundoff of a storage type: the relative error of the final rounding of an output.
pub fn unit_roundoff(dtype: DType) -> f64 {
    match dtype {
        DType::F32 => U32,
        DType::F16 => U16,
        DType::U32 => 0.0,
    }
}

/// Largest error of rounding `value` to `dtype` (round to nearest): u·|value| for normal
/// numbers, plus half the spacing of subnormals (2⁻²⁵ in f16, 2⁻¹⁵⁰ in f32), which bounds the
/// absolute error where the relative one does not hold — an f16 output of 1e-5 is subnormal
/// and can be off by 3e-8, far more than u·|value| = 5e-9 (seen on the H200's tensor-core
/// GEMM, correctly rounded).
pub fn storage_rounding(dtype: DType, value: f64) -> f64 {
    let half_subnormal = match dtype {
        DType::F32 => 2f64.powi(-150),
        DType::F16 => 2f64.powi(-25),
        DType::U32 => 0.0,
    };
    unit_roundoff(dtype) * value.abs() + half_subnormal
}

/// Higham's γ_k = k·u / (1 − k·u) for f32: the bound on the relative error of a k-term dot
/// product summed in any order, fused multiply-adds included (Higham, "Accuracy and
/// Stability of Numerical Algorithms", 2nd ed., §3.1, Lemma 3.1 and eq. 3.4).
pub fn gamma(k: usize) -> f64 {
    let ku = k as f64 * U32;
    ku / (1.0 - ku)
}

/// The worst element of a comparison, relative to its bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Element index.
    pub index: usize,
    /// The kernel's value.
    pub got: f32,
    /// The reference value.
    pub want: f32,
    /// |got − want|.
    pub error: f64,
    /// The element's bound.
    pub bound: f64,
}

/// The result of [`compare`].
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Largest |got − want| over all elements (NaN if any output is NaN where the reference is not).
    pub max_abs_error: f64,
    /// Largest error ÷ bound over all elements.
    pub worst_ratio: f64,
    /// The element furthest beyond its bound, if any is beyond it.
    pub violation: Option<Violation>,
}

impl Comparison {
    /// Whether every element is within its bound.
    pub fn passed(&self) -> bool {
        self.violation.is_none()
    }
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.violation {
            None => write!(f, "max |error| {:.3e}, within bound", self.max_abs_error),
            Some(v) => write!(
                f,
                "element {}: got {}, want {}, |error| {:.3e} > bound {:.3e}",
                v.index, v.got, v.want, v.error, v.bound
            ),
        }
    }
}

/// Compares element by element: `|got[i] − want[i]| ≤ bound(i)`. Equal values (infinities
/// included) always pass; NaN in `got` never does unless `want` is NaN too. Different
/// lengths fail at the first missing index.
pub fn compare(got: &[f32], want: &[f32], bound: impl Fn(usize) -> f64) -> Comparison {
    let mut max_abs_error: f64 = 0.0;
    let mut worst_ratio: f64 = 0.0;
    let mut violation: Option<Violation> = None;
    for i in 0..got.len().max(want.len()) {
        let (g, w) = (
            got.get(i).copied().unwrap_or(f32::NAN),
            want.get(i).copied().unwrap_or(f32::NAN),
        );
        let same = g == w || (g.is_nan() && w.is_nan() && i < got.len().min(want.len()));
        let error = if same {
            0.0
        } else {
            (g as f64 - w as f64).abs()
        };
        let error = if error.is_nan() { f64::INFINITY } else { error };
        max_abs_error = max_abs_error.max(error);
        let b = bound(i);
        let ratio = if error == 0.0 { 0.0 } else { error / b };
        if ratio > worst_ratio {
            worst_ratio = ratio;
        }
        if ratio > 1.0 && violation.as_ref().is_none_or(|v| ratio > v.error / v.bound) {
            violation = Some(Violation {
                index: i,
                got: g,
                want: w,
                error,
                bound: b,
            });
        }
    }
    Comparison {
        max_abs_error,
        worst_ratio,
        violation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_finds_the_worst_violation() {
        let c = compare(&[1.0, 2.0, 3.5], &[1.0, 2.1, 3.0], |_| 0.2);
        assert!(!c.passed());
        assert_eq!(c.violation.unwrap().index, 2);
        assert!((c.max_abs_error - 0.5).abs() < 1e-9);
        assert!(compare(&[1.0, 2.0], &[1.0, 2.1], |_| 0.2).passed());
    }

    #[test]
    fn nan_and_length_mismatch_fail_infinities_match() {
        assert!(!compare(&[f32::NAN], &[1.0], |_| 1e9).passed());
        assert!(!compare(&[1.0], &[1.0, 2.0], |_| 1e9).passed());
        assert!(compare(&[f32::INFINITY], &[f32::INFINITY], |_| 0.0).passed());
        assert!(!compare(&[f32::INFINITY], &[f32::NEG_INFINITY], |_| 1e30).passed());
    }

    #[test]
    fn gamma_is_k_times_u_to_first_order() {
        assert!((gamma(1000) / (1000.0 * U32) - 1.0).abs() < 1e-4);
        assert_eq!(gamma(0), 0.0);
    }
}
