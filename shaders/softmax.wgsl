// Softmax over the last axis with an optional additive mask; one workgroup per row.
//
// y[r, c] = exp(v[r, c] - max_r) / sum_c exp(v[r, c] - max_r),  v = scale * x[r, c] + mask
// where the mask row is r / mask_group (so a [batch, keys] padding mask serves
// [batch, heads, queries, keys] scores with mask_group = heads * queries).
//
// One pass keeps a running (max, sum) pair per invocation (the online softmax of Milakov &
// Gimelshein, 2018), pairs are merged across the workgroup, a second pass writes. Elements
// equal to -inf are masked out; a row with every element masked gives zeros, never NaN.
// No infinity appears as a constant (WGSL forbids it): -inf is detected as "below the lowest
// finite f32", and an empty running pair is (LOWEST, 0).
//
// Defines: T (storage type), WG (a power of two), HAS_MASK.

struct Params { rows: u32, cols: u32, mask_group: u32, scale: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read> mask: array<T>;
@group(0) @binding(3) var<storage, read_write> y: array<T>;

const LOWEST: f32 = -0x1.fffffep+127f; // -f32::MAX, exact (a decimal literal above it is refused by Tint)

var<workgroup> part_max: array<f32, WG>;
var<workgroup> part_sum: array<f32, WG>;

fn value(row: u32, c: u32) -> f32 {
    var v = p.scale * f32(x[row * p.cols + c]);
    if HAS_MASK { v += f32(mask[(row / p.mask_group) * p.cols + c]); }
    return v;
}

fn masked(v: f32) -> bool { return v < LOWEST; }

@compute @workgroup_size(WG)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    if row >= p.rows { return; }

    // exp(m - v) <= 1 and exp(v - m) <= 1 below: no overflow, and an argument that
    // overflows to -inf gives 0.
    var m = LOWEST;
    var s = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let v = value(row, c);
        if masked(v) { continue; }
        if v > m {
            s = s * exp(m - v) + 1.0;
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    part_max[lid] = m;
    part_sum[lid] = s;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride >>= 1u) {
        if lid < stride {
            let m1 = part_max[lid];
            let m2 = part_max[lid + stride];
            let mm = max(m1, m2);
            part_sum[lid] = part_sum[lid] * exp(m1 - mm) + part_sum[lid + stride] * exp(m2 - mm);
            part_max[lid] = mm;
        }
        workgroupBarrier();
    }
    let row_max = part_max[0];
    let row_sum = part_sum[0];

    for (var c = lid; c < p.cols; c += WG) {
        var out = 0.0;
        let v = value(row, c);
        if row_sum > 0.0 && !masked(v) { out = exp(v - row_max) / row_sum; }
        y[row * p.cols + c] = T(out);
    }
}
