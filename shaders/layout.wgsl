// Layout conversions.
//
// permute:   general permutation of up to 6 dims; one output element per invocation.
//            out[i] = in[sum_d coord_d(i) * in_stride[perm[d]]], coordinates of the output.
// transpose: batched 2-D transpose [batch, rows, cols] -> [batch, cols, rows] through a
//            TILE x (TILE + 1) workgroup tile (the +1 column avoids bank conflicts), so both
//            the read and the write are coalesced. NCHW <-> NHWC reduce to this. Each
//            invocation moves PER = TILE / ROWS_PER_PASS elements; its PER loads are
//            generated unrolled (the //@LOAD block: vals0, vals1, ...) and all issued before
//            the first store to workgroup memory (//@STAGE), so PER loads are in flight at
//            once: a loop starting at the invocation's row is not unrolled by every
//            compiler, and then waits for each load in turn. With VW = 4 each load is a vec4
//            of four consecutive columns and each write a vec4 of four consecutive output
//            columns (read down four tile rows): a quarter of the memory instructions for
//            the same bytes (the launcher needs rows and columns multiples of 4).
//
// Defines: T (storage type), VW (elements per transpose load and write, 1 or 4), V and VF
// (T and f32, or their vec4s), WG (permute invocations per workgroup), TILE, ROWS_PER_PASS
// (the transpose workgroup is TILE / VW x ROWS_PER_PASS); blocks LOAD, STAGE and WRITE
// (the writes, unrolled the same way). The permute runs with VW = 1.

struct Params {
    // permute
    n: u32, ndim: u32, pad0: u32, pad1: u32,
    out_shape: array<vec4<u32>, 2>,
    in_stride: array<vec4<u32>, 2>, // input stride of the dim each output dim comes from
    // transpose
    batch: u32, rows: u32, cols: u32, tiles_c: u32,
    tiles_r: u32, pad2: u32, pad3: u32, pad4: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<V>;
@group(0) @binding(2) var<storage, read_write> dst: array<V>;

var<workgroup> tile: array<f32, TILE * (TILE + 1u)>;

@compute @workgroup_size(WG)
fn permute(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
    if i >= p.n { return; }
    var rest = i;
    var at = 0u;
    for (var d = i32(p.ndim) - 1; d >= 0; d--) {
        let extent = p.out_shape[d / 4][d % 4];
        at += (rest % extent) * p.in_stride[d / 4][d % 4];
        rest /= extent;
    }
    dst[i] = src[at];
}

@compute @workgroup_size(TILE / VW, ROWS_PER_PASS)
fn transpose(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>) {
    let wg = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    let per_batch = p.tiles_r * p.tiles_c;
    if wg >= per_batch * p.batch { return; }
    let b = wg / per_batch;
    let t = wg % per_batch;
    let r0 = (t / p.tiles_c) * TILE;
    let c0 = (t % p.tiles_c) * TILE;
    let base = b * p.rows * p.cols;

    let tx = lid.x * VW; // the invocation's first tile column (loads), tile row (writes)
    let col = c0 + tx;
    let in_cols = col < p.cols;
    //@LOAD
    //@STAGE
    workgroupBarrier();
    // Output is [cols, rows]: walk it row by row so that writes are coalesced too.
    let out_col = r0 + tx;
    let in_rows = out_col < p.rows;
    //@WRITE
}
