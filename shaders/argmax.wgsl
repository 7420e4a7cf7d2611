// The index of the largest value of each row (greedy decoding's pick from the logits): one
// workgroup per row, each invocation scanning a strided slice, then a tree over the
// workgroup. Ties go to the lowest index (as torch.argmax and NumPy do). A row holding NaN or
// an infinity gives 0xFFFFFFFF, so the host refuses non-finite logits instead of picking
// from them.
//
// Defines: T (storage type), WG (a power of two).

struct Params { rows: u32, cols: u32, pad0: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;

var<workgroup> best_value: array<f32, WG>;
var<workgroup> best_index: array<u32, WG>;
var<workgroup> bad: atomic<u32>;

const NONE: u32 = 0xFFFFFFFFu;

// Whether (va, ia) beats (vb, ib): larger, or equal and earlier.
fn beats(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    return va > vb || (va == vb && ia < ib);
}

@compute @workgroup_size(WG)
fn argmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.x;
    if lid == 0u { atomicStore(&bad, 0u); }
    workgroupBarrier();
    var v = -3.0e38;
    var i = NONE;
    var finite = true;
    for (var c = lid; c < p.cols; c += WG) {
        let value = f32(x[row * p.cols + c]);
        // NaN fails every comparison; ±inf is past the largest f32.
        if !(abs(value) <= 3.4028234e38) { finite = false; }
        if i == NONE || beats(value, c, v, i) {
            v = value;
            i = c;
        }
    }
    if !finite { atomicStore(&bad, 1u); }
    best_value[lid] = v;
    best_index[lid] = i;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s && best_index[lid + s] != NONE
            && (best_index[lid] == NONE
                || beats(best_value[lid + s], best_index[lid + s], best_value[lid], best_index[lid])) {
            best_value[lid] = best_value[lid + s];
            best_index[lid] = best_index[lid + s];
        }
        workgroupBarrier();
    }
    let any_bad = atomicLoad(&bad);
    if lid == 0u {
        ids[row] = select(best_index[0], NONE, any_bad != 0u);
    }
}
