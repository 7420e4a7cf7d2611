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
// Rows whose length is a multiple of 4 are read and written as vec4 (V = vec4<T>, 16-byte
// accesses for f32); the running pair then advances four elements at a time (one max over
// the lanes, one rescale). `cols` counts V units.
//
// Defines: T (storage type), V (T or vec4<T>), VF (f32 or vec4<f32>), WG (a power of two),
// HAS_MASK; the //@LANES block defines hsum and hmax (sum and max of a VF's lanes).

struct Params { rows: u32, cols: u32, mask_group: u32, scale: f32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<V>;
@group(0) @binding(2) var<storage, read> mask: array<V>;
@group(0) @binding(3) var<storage, read_write> y: array<V>;

const LOWEST: f32 = -0x1.fffffep+127f; // -f32::MAX, exact (a decimal literal above it is refused by Tint)

//@LANES

var<workgroup> part_max: array<f32, WG>;
var<workgroup> part_sum: array<f32, WG>;

fn value(row: u32, c: u32) -> VF {
    var v = p.scale * VF(x[row * p.cols + c]);
    if HAS_MASK { v += VF(mask[(row / p.mask_group) * p.cols + c]); }
    return v;
}

@compute @workgroup_size(WG)
fn softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let row = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    if row >= p.rows { return; }

    // exp(m - mm) <= 1 and exp(v - mm) <= 1 below: no overflow, and an argument that
    // overflows to -inf gives 0. Masked lanes are selected away, never summed.
    var m = LOWEST;
    var s = 0.0;
    for (var c = lid; c < p.cols; c += WG) {
        let v = value(row, c);
        let vm = hmax(v);
        if vm < LOWEST { continue; } // every lane masked
        let mm = max(m, vm);
        s = s * exp(m - mm) + hsum(select(exp(v - mm), VF(0.0), v < VF(LOWEST)));
        m = mm;
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
    let inv = select(0.0, 1.0 / row_sum, row_sum > 0.0);

    for (var c = lid; c < p.cols; c += WG) {
        let v = value(row, c);
        y[row * p.cols + c] = V(select(exp(v - row_max) * inv, VF(0.0), v < VF(LOWEST)));
    }
}
