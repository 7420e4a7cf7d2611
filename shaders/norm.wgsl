// Layer norm and RMS norm over the last axis; one workgroup per row.
//
// layer_norm: y = (x - mean) / sqrt(var + eps) * gamma + beta   (Ba et al., 2016)
// rms_norm:   y = x / sqrt(mean(x^2) + eps) * gamma             (Zhang & Sennrich, 2019)
//
// The variance is never E[x^2] - E[x]^2. It uses the corrected two-pass algorithm
// (Chan, Golub & LeVeque, "Algorithms for computing the sample variance", 1983): a first pass
// for the mean m, a second for s1 = sum(x - m) and s2 = sum((x - m)^2), then
// mean = m + s1/n and var = (s2 - s1^2/n) / n. A constant row gives x - mean = 0 exactly,
// hence y = beta and never NaN; a row with a large mean keeps its small variance.
//
// Rows whose length is a multiple of 4 are read and written as vec4 (V = vec4<T>): 16-byte
// accesses, as the stream-copy ceiling uses. `cols` counts V units; `n` is the true length.
//
// Defines: T (storage type), V (T or vec4<T>), VF (f32 or vec4<f32>), WG (invocations per
// workgroup, a power of two), AFFINE; the //@LANES block defines hsum and hmax (sum and
// max of a VF's lanes).

struct Params { rows: u32, cols: u32, eps: f32, n: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<V>;
@group(0) @binding(2) var<storage, read> gamma: array<V>;
@group(0) @binding(3) var<storage, read> beta: array<V>;
@group(0) @binding(4) var<storage, read_write> y: array<V>;

//@LANES

var<workgroup> partial: array<f32, WG>;

// Sum of v over the workgroup (tree reduction); every invocation gets the result.
fn workgroup_sum(v: f32, lid: u32) -> f32 {
    partial[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s { partial[lid] += partial[lid + s]; }
        workgroupBarrier();
    }
    let total = partial[0];
    workgroupBarrier();
    return total;
}

fn row_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
}

@compute @workgroup_size(WG)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg);
    if row >= p.rows { return; }
    let base = row * p.cols;
    let n = f32(p.n);

    var s0 = 0.0;
    for (var c = lid; c < p.cols; c += WG) { s0 += hsum(VF(x[base + c])); }
    let m = workgroup_sum(s0, lid) / n;

    var s1 = 0.0;
    var s2 = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let d = VF(x[base + c]) - m;
        s1 += hsum(d);
        s2 += hsum(d * d);
    }
    let t1 = workgroup_sum(s1, lid);
    let t2 = workgroup_sum(s2, lid);
    // mean = m + correction, kept as two terms: rounding m + correction to one f32 would cost
    // up to half an ulp of the mean, i.e. u·|mean|/σ of the output (1e-3 at mean 1e4, σ 0.6).
    let correction = t1 / n;
    let variance = max((t2 - t1 * correction) / n, 0.0);
    let inv = inverseSqrt(variance + p.eps);

    for (var c = lid; c < p.cols; c += WG) {
        var v = ((VF(x[base + c]) - m) - correction) * inv;
        if AFFINE { v = v * VF(gamma[c]) + VF(beta[c]); }
        y[base + c] = V(v);
    }
}

@compute @workgroup_size(WG)
fn rms_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg);
    if row >= p.rows { return; }
    let base = row * p.cols;

    var s2 = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let v = VF(x[base + c]);
        s2 += hsum(v * v);
    }
    let inv = inverseSqrt(workgroup_sum(s2, lid) / f32(p.n) + p.eps);

    for (var c = lid; c < p.cols; c += WG) {
        var v = VF(x[base + c]) * inv;
        if AFFINE { v = v * VF(gamma[c]); }
        y[base + c] = V(v);
    }
}
