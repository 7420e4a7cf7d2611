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
// Layer norm rows of at most 4·WG units are held in registers (four per invocation) and read
// once; longer rows are read three times (the mean pass, the moments pass and the output).
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

// The value at column c of the row at base, 0 past the row.
fn held(base: u32, c: u32) -> VF {
    if c >= p.cols { return VF(0.0); }
    return VF(x[base + c]);
}

// x - m at column c, 0 past the row (so padding adds nothing to the moments).
fn centered(v: VF, m: f32, c: u32) -> VF {
    return select(VF(0.0), v - m, c < p.cols);
}

// y at column c from its centred value d.
fn put(base: u32, c: u32, d: VF, correction: f32, inv: f32) {
    if c >= p.cols { return; }
    var v = (d - correction) * inv;
    if AFFINE { v = v * VF(gamma[c]) + VF(beta[c]); }
    y[base + c] = V(v);
}

// Layer norm of a row of at most 4·WG units held in registers: the same two-pass moments as
// below, x read once.
fn layer_norm_held(base: u32, lid: u32, n: f32) {
    let c0 = lid;
    let c1 = lid + WG;
    let c2 = lid + 2u * WG;
    let c3 = lid + 3u * WG;
    let x0 = held(base, c0);
    let x1 = held(base, c1);
    let x2 = held(base, c2);
    let x3 = held(base, c3);
    let m = workgroup_sum(hsum(x0 + x1 + x2 + x3), lid) / n;
    let d0 = centered(x0, m, c0);
    let d1 = centered(x1, m, c1);
    let d2 = centered(x2, m, c2);
    let d3 = centered(x3, m, c3);
    let t1 = workgroup_sum(hsum(d0 + d1 + d2 + d3), lid);
    let t2 = workgroup_sum(hsum(d0 * d0 + d1 * d1 + d2 * d2 + d3 * d3), lid);
    let correction = t1 / n;
    let inv = inverseSqrt(max((t2 - t1 * correction) / n, 0.0) + p.eps);
    put(base, c0, d0, correction, inv);
    put(base, c1, d1, correction, inv);
    put(base, c2, d2, correction, inv);
    put(base, c3, d3, correction, inv);
}

@compute @workgroup_size(WG)
fn layer_norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let row = row_index(wid, nwg);
    if row >= p.rows { return; }
    let base = row * p.cols;
    let n = f32(p.n);
    if p.cols <= 4u * WG {
        layer_norm_held(base, lid, n);
        return;
    }

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
