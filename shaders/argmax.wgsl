// The index of the largest value of each row (greedy decoding's pick from the logits). Ties
// go to the lowest index (as torch.argmax and NumPy do). A row holding NaN or an infinity
// gives 0xFFFFFFFF, so the host refuses non-finite logits instead of picking from them.
//
// A row of at most CHUNK values: `argmax`, one workgroup per row, each invocation scanning a
// strided slice, then a tree over the workgroup. A longer row (a vocabulary): `argmax_chunks`,
// its chunks of CHUNK values each reduced by a workgroup of their own into a (value, index)
// partial (one workgroup walking 49,152 logits took 20 µs on the H200, its loads the bound:
// benches/NOTES.md run 158), then `argmax_merge`, one workgroup per row over its partials.
//
// Defines: T (storage type), WG (a power of two), CHUNK (values per workgroup of a long row).

struct Params { rows: u32, cols: u32, chunks: u32, pad1: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;
// [rows, chunks] partials: the chunk's largest value's bits and its index (NONE: non-finite).
@group(0) @binding(3) var<storage, read_write> partial: array<vec2<u32>>;

var<workgroup> best_value: array<f32, WG>;
var<workgroup> best_index: array<u32, WG>;
var<workgroup> bad: atomic<u32>;

const NONE: u32 = 0xFFFFFFFFu;

// Whether (va, ia) beats (vb, ib): larger, or equal and earlier.
fn beats(va: f32, ia: u32, vb: f32, ib: u32) -> bool {
    return va > vb || (va == vb && ia < ib);
}

// Each invocation's best of the values x[row_start + c] for c in [begin + lid, end) step WG,
// folded over the workgroup into best_value[0] / best_index[0]; `bad` is set where a value
// is NaN or ±∞. Call from uniform control flow after `bad` was cleared and a barrier.
fn best_of(row_start: u32, begin: u32, end: u32, lid: u32) {
    var v = -3.0e38;
    var i = NONE;
    var finite = true;
    for (var c = begin + lid; c < end; c += WG) {
        let value = f32(x[row_start + c]);
        // NaN fails every comparison; ±inf is past the largest f32.
        if !(abs(value) <= 3.4028234e38) { finite = false; }
        if i == NONE || beats(value, c, v, i) {
            v = value;
            i = c;
        }
    }
    if !finite { atomicStore(&bad, 1u); }
    fold(lid, v, i);
}

// Folds every invocation's (v, i) (i = NONE: none) into best_value[0] / best_index[0].
fn fold(lid: u32, v: f32, i: u32) {
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
}

// A row of at most CHUNK values: one workgroup per row.
@compute @workgroup_size(WG)
fn argmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.x;
    if lid == 0u { atomicStore(&bad, 0u); }
    workgroupBarrier();
    best_of(row * p.cols, 0u, p.cols, lid);
    let any_bad = atomicLoad(&bad) != 0u;
    if lid == 0u {
        ids[row] = select(best_index[0], NONE, any_bad);
    }
}

// A longer row: workgroup (chunk, row) writes its chunk's partial.
@compute @workgroup_size(WG)
fn argmax_chunks(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let chunk = wid.x;
    let row = wid.y;
    if lid == 0u { atomicStore(&bad, 0u); }
    workgroupBarrier();
    let begin = chunk * CHUNK;
    best_of(row * p.cols, begin, min(begin + CHUNK, p.cols), lid);
    let any_bad = atomicLoad(&bad) != 0u;
    if lid == 0u {
        let best = select(best_index[0], NONE, any_bad);
        partial[row * p.chunks + chunk] = vec2(bitcast<u32>(best_value[0]), best);
    }
}

// One workgroup per row: the best of its chunks' partials; a non-finite chunk makes it NONE.
@compute @workgroup_size(WG)
fn argmax_merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.x;
    if lid == 0u { atomicStore(&bad, 0u); }
    workgroupBarrier();
    var v = -3.0e38;
    var i = NONE;
    for (var c = lid; c < p.chunks; c += WG) {
        let part = partial[row * p.chunks + c];
        let value = bitcast<f32>(part.x);
        if part.y == NONE {
            atomicStore(&bad, 1u);
        } else if i == NONE || beats(value, part.y, v, i) {
            v = value;
            i = part.y;
        }
    }
    fold(lid, v, i);
    let any_bad = atomicLoad(&bad) != 0u;
    if lid == 0u {
        ids[row] = select(best_index[0], NONE, any_bad);
    }
}
