// erf(x) from the Chebyshev fit of erfc in Numerical Recipes (Press et al., 3rd ed., §6.2.2):
// fractional error below 1.2e-7 for every x; component-wise for vectors (VF is f32 or
// vec4<f32>, defined by the including shader).
fn erf_approx(x: VF) -> VF {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
        t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
        t * (-0.82215223 + t * 0.17087277))))))));
    let erfc = t * exp(-z * z + poly);
    return select(erfc - 1.0, 1.0 - erfc, x >= VF(0.0));
}

// GELU(x) = x/2 * (1 + erf(x / sqrt(2)))  (Hendrycks & Gimpel, 2016), the form BERT uses.
fn gelu(x: VF) -> VF {
    return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752));
}
