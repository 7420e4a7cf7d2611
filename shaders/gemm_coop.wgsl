// GEMM on cooperative matrices (tensor cores): C = alpha * op(A) * op(B) + beta * C (+ bias),
// f16 storage, f16 x f16 products accumulated in f32, batched, row-major.
//
// A workgroup is SG_M x SG_N subgroups of 32 invocations; each subgroup owns a 32 x 32 block
// of C as 2 x 2 cooperative 16x16 f32 accumulators, so the workgroup tile is
// BM = 32*SG_M by BN = 32*SG_N. Each step stages a BK-deep slice of op(A) (BM x BK) and op(B)
// (BK x BN) in workgroup memory as f16 (zero-filled outside the matrices, so any M, N, K
// works), then every subgroup runs BK/16 rounds of four 16x16x16 multiply-adds. The epilogue
// goes through a 16 x 16 f32 scratch tile per subgroup to apply alpha, beta and the bias and
// to store only the elements inside C.
//
// The launcher runs this only where the adapter offers f16 x f16 -> f32 16x16x16 cooperative
// matrices at subgroup size 32 (NVIDIA tensor cores through naga's wgpu_cooperative_matrix
// extension); everywhere else the tiled SIMT kernel in gemm.wgsl runs.
//
// Defines (prepended): SG_M, SG_N, BK (a multiple of 16), TRANS_A, TRANS_B, HAS_BIAS.
// Strides are consts or lets computed before the loops (naga 30.0.2's SPIR-V writer fails on
// cooperative loads whose stride reads a uniform inside a loop).




struct Params {
    m: u32, n: u32, k: u32, batch: u32,
    lda: u32, ldb: u32, ldc: u32, tiles_n: u32,
    stride_a: u32, stride_b: u32, stride_c: u32, tiles_m: u32,
    alpha: f32, beta: f32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<f16>;
@group(0) @binding(2) var<storage, read> b: array<f16>;
@group(0) @binding(3) var<storage, read> bias: array<f16>;
@group(0) @binding(4) var<storage, read_write> c: array<f16>;

const BM: u32 = SG_M * 32u;
const BN: u32 = SG_N * 32u;
const THREADS: u32 = SG_M * SG_N * 32u;

var<workgroup> a_tile: array<f16, BM * BK>;        // a_tile[m * BK + k]
var<workgroup> b_tile: array<f16, BK * BN>;        // b_tile[k * BN + n]
var<workgroup> scratch: array<f32, SG_M * SG_N * 256u>; // one 16 x 16 tile per subgroup

fn load_a(base: u32, row: u32, col: u32) -> f16 {
    if row >= p.m || col >= p.k { return f16(0.0); }
    if TRANS_A { return a[base + col * p.lda + row]; }
    return a[base + row * p.lda + col];
}

fn load_b(base: u32, row: u32, col: u32) -> f16 {
    if row >= p.k || col >= p.n { return f16(0.0); }
    if TRANS_B { return b[base + col * p.ldb + row]; }
    return b[base + row * p.ldb + col];
}

// Applies the epilogue to one 16 x 16 accumulator tile staged in this subgroup's scratch.
fn store_tile(sg: u32, lane: u32, c_base: u32, row0: u32, col0: u32) {
    for (var e = lane; e < 256u; e += 32u) {
        let row = row0 + e / 16u;
        let col = col0 + e % 16u;
        if row < p.m && col < p.n {
            let ci = c_base + row * p.ldc + col;
            var v = p.alpha * scratch[sg * 256u + e];
            if p.beta != 0.0 { v += p.beta * f32(c[ci]); }
            if HAS_BIAS { v += f32(bias[col]); }
            c[ci] = f16(v);
        }
    }
}

@compute @workgroup_size(THREADS)
fn gemm_coop(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let wg = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    let per_batch = p.tiles_m * p.tiles_n;
    if wg >= per_batch * p.batch { return; }
    let batch = wg / per_batch;
    let tile = wg % per_batch;
    let m0 = (tile / p.tiles_n) * BM;
    let n0 = (tile % p.tiles_n) * BN;
    let a_base = batch * p.stride_a;
    let b_base = batch * p.stride_b;
    let c_base = batch * p.stride_c;
    let sg = tid / 32u;
    let lane = tid % 32u;
    let sm = (sg / SG_N) * 32u; // this subgroup's rows within the tile
    let sn = (sg % SG_N) * 32u; // and columns

    var acc00 = coop_mat16x16<f32, C>();
    var acc01 = coop_mat16x16<f32, C>();
    var acc10 = coop_mat16x16<f32, C>();
    var acc11 = coop_mat16x16<f32, C>();

    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        for (var i = tid; i < BM * BK; i += THREADS) {
            var mm: u32; var kk: u32;
            if TRANS_A { mm = i % BM; kk = i / BM; } else { kk = i % BK; mm = i / BK; }
            a_tile[mm * BK + kk] = load_a(a_base, m0 + mm, k0 + kk);
        }
        for (var i = tid; i < BK * BN; i += THREADS) {
            var kk: u32; var nn: u32;
            if TRANS_B { kk = i % BK; nn = i / BK; } else { nn = i % BN; kk = i / BN; }
            b_tile[kk * BN + nn] = load_b(b_base, k0 + kk, n0 + nn);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < BK; kk += 16u) {
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&a_tile[sm * BK + kk], BK);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&a_tile[(sm + 16u) * BK + kk], BK);
            let b0 = coopLoadT<coop_mat16x16<f16, B>>(&b_tile[kk * BN + sn], BN);
            let b1 = coopLoadT<coop_mat16x16<f16, B>>(&b_tile[kk * BN + sn + 16u], BN);
            acc00 = coopMultiplyAdd(a0, b0, acc00);
            acc01 = coopMultiplyAdd(a0, b1, acc01);
            acc10 = coopMultiplyAdd(a1, b0, acc10);
            acc11 = coopMultiplyAdd(a1, b1, acc11);
        }
        workgroupBarrier();
    }

    let row0 = m0 + sm;
    let col0 = n0 + sn;
    coopStoreT(acc00, &scratch[sg * 256u], 16u);
    workgroupBarrier();
    store_tile(sg, lane, c_base, row0, col0);
    workgroupBarrier();
    coopStoreT(acc01, &scratch[sg * 256u], 16u);
    workgroupBarrier();
    store_tile(sg, lane, c_base, row0, col0 + 16u);
    workgroupBarrier();
    coopStoreT(acc10, &scratch[sg * 256u], 16u);
    workgroupBarrier();
    store_tile(sg, lane, c_base, row0 + 16u, col0);
    workgroupBarrier();
    coopStoreT(acc11, &scratch[sg * 256u], 16u);
    workgroupBarrier();
    store_tile(sg, lane, c_base, row0 + 16u, col0 + 16u);
}
