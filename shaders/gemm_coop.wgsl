// GEMM on cooperative matrices (tensor cores): C = alpha * op(A) * op(B) + beta * C (+ bias)
// (then GELU with ACT_GELU), f16 operands (C and the bias f16 or f32), f16 x f16 products accumulated in f32, batched,
// row-major.
//
// A workgroup is SG_M x SG_N subgroups of 32 invocations; each subgroup owns a
// (16*FM) x (16*FN) block of C as FM x FN cooperative 16x16 f32 accumulators, so the
// workgroup tile is BM = 16*FM*SG_M by BN = 16*FN*SG_N. Per k step of 16 a subgroup loads FM
// fragments of A and FN of B from workgroup memory for FM*FN multiply-adds, so larger FM, FN
// mean fewer workgroup reads per tensor-core operation.
//
// Each BK-deep slice of A and B is staged in workgroup memory in its stored layout (the
// contiguous dimension stays contiguous: A is M x K, or K x M with TRANS_A, read as a
// column-major fragment then; B likewise), every staged row padded by 8 halves (16 bytes) so
// that the eight 16-byte rows a fragment load reads fall in distinct banks. Global loads are
// 16 bytes (mat2x4<f16>, eight halves) along the contiguous dimension when VA / VB = 8 (the
// launcher checks alignment and that the contiguous extent is a multiple of 8), else one
// half each; out-of-range elements load as 0, so any M, N, K works.
//
// Software pipelining as in gemm.wgsl: the next slice is loaded into registers while the
// current one is multiplied; STAGES = 2 double-buffers the staged slices. The register loads, stores and the unrolled k steps with their
// FM x FN named accumulators are generated (the //@ markers).
//
// The epilogue goes through a 16 x 16 f32 scratch tile per subgroup to apply alpha, beta, the
// bias and the activation and to store only the elements inside C. Only the subgroup shares
// its scratch, so subgroup barriers order it (a workgroup barrier per fragment cost as many
// barriers as the main loop at K = 384).
//
// The launcher runs this only where the adapter offers f16 x f16 -> f32 16x16x16 cooperative
// matrices at subgroup size 32 (NVIDIA tensor cores through naga's wgpu_cooperative_matrix
// extension); everywhere else the tiled SIMT kernel in gemm.wgsl runs.
//
// Defines (prepended): SG_M, SG_N, FM, FN, BK (a multiple of 16), STAGES (1 or 2), AT and BT (f16 or
// mat2x4<f16>), VA and VB (1 or 8), TC (C's and the bias's type: f16, or f32 for an f32 result),
// TRANS_A, TRANS_B, HAS_BIAS, ACT_GELU. Fragment strides are
// consts (naga 30.0.2's SPIR-V writer fails on cooperative loads whose stride reads a uniform
// inside a loop).

struct Params {
    m: u32, n: u32, k: u32, batch: u32,
    lda: u32, ldb: u32, ldc: u32, tiles_n: u32,
    stride_a: u32, stride_b: u32, stride_c: u32, tiles_m: u32,
    alpha: f32, beta: f32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<AT>;
@group(0) @binding(2) var<storage, read> b: array<BT>;
@group(0) @binding(3) var<storage, read> bias: array<TC>;
@group(0) @binding(4) var<storage, read_write> c: array<TC>;

const BM: u32 = SG_M * FM * 16u;
const BN: u32 = SG_N * FN * 16u;
const THREADS: u32 = SG_M * SG_N * 32u;
// Staged slices in their stored layout: rows x columns, each row padded by 8 halves.
const A_ROWS: u32 = select(BM, BK, TRANS_A);
const A_COLS: u32 = select(BK, BM, TRANS_A);
const AS: u32 = A_COLS + 8u;
const B_ROWS: u32 = select(BK, BN, TRANS_B);
const B_COLS: u32 = select(BN, BK, TRANS_B);
const BS: u32 = B_COLS + 8u;

const A_SLICE: u32 = A_ROWS * AS; // halves per staged slice
const B_SLICE: u32 = B_ROWS * BS;

var<workgroup> a_tile: array<f16, STAGES * A_SLICE>; // STAGES slices, one after the other
var<workgroup> b_tile: array<f16, STAGES * B_SLICE>;
var<workgroup> scratch: array<f32, SG_M * SG_N * 256u>; // one 16 x 16 tile per subgroup

// Load i (of VA halves) of a staged A slice: (row, column) within the slice.
fn a_pos(i: u32) -> vec2<u32> {
    return vec2<u32>(i / (A_COLS / VA), i % (A_COLS / VA) * VA);
}

fn b_pos(i: u32) -> vec2<u32> {
    return vec2<u32>(i / (B_COLS / VB), i % (B_COLS / VB) * VB);
}

// load_a(base, row, col, rows, cols) and load_b(...): VA / VB halves of the stored matrix
// from (row, col), zero outside rows x cols; stage_a / stage_b store them to the slice
// (generated for the widths chosen).
//@LOADERS

// gelu(x) (the erf form, shaders/include/gelu.wgsl, with VF = f32).
//@GELU

// beta * C at (row, col), 0 outside C; beta == 0 never reads C, so whatever C held (NaN
// included) is ignored.
fn old_c(c_base: u32, row: u32, col: u32) -> f32 {
    if p.beta == 0.0 || row >= p.m { return 0.0; }
    return p.beta * f32(c[c_base + row * p.ldc + col]);
}

// C at (row, col) = act(alpha * acc + beta * C + bias), inside C only.
fn put_c(c_base: u32, row: u32, col: u32, acc: f32, old: f32, add: f32) {
    if row >= p.m { return; }
    var v = p.alpha * acc + old + add;
    if ACT_GELU { v = gelu(v); }
    c[c_base + row * p.ldc + col] = TC(v);
}

// Applies the epilogue to one 16 x 16 accumulator tile staged in this subgroup's scratch.
// Lane l owns column l % 16 and rows l / 16 + 2i (i < 8): one bias read, and the eight
// reads of C issued before any write (a loop waited on each read in turn, and MiniLM's
// residual projections read C).
fn store_tile(sg: u32, lane: u32, c_base: u32, row0: u32, col0: u32) {
    let col = col0 + lane % 16u;
    if col >= p.n { return; }
    let r = row0 + lane / 16u;
    let s = sg * 256u + lane;
    var add = 0.0;
    if HAS_BIAS { add = f32(bias[col]); }
    let o0 = old_c(c_base, r, col);
    let o1 = old_c(c_base, r + 2u, col);
    let o2 = old_c(c_base, r + 4u, col);
    let o3 = old_c(c_base, r + 6u, col);
    let o4 = old_c(c_base, r + 8u, col);
    let o5 = old_c(c_base, r + 10u, col);
    let o6 = old_c(c_base, r + 12u, col);
    let o7 = old_c(c_base, r + 14u, col);
    put_c(c_base, r, col, scratch[s], o0, add);
    put_c(c_base, r + 2u, col, scratch[s + 32u], o1, add);
    put_c(c_base, r + 4u, col, scratch[s + 64u], o2, add);
    put_c(c_base, r + 6u, col, scratch[s + 96u], o3, add);
    put_c(c_base, r + 8u, col, scratch[s + 128u], o4, add);
    put_c(c_base, r + 10u, col, scratch[s + 160u], o5, add);
    put_c(c_base, r + 12u, col, scratch[s + 192u], o6, add);
    put_c(c_base, r + 14u, col, scratch[s + 224u], o7, add);
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
    // Stored extents of A and B.
    let a_rows = select(p.m, p.k, TRANS_A);
    let a_cols = select(p.k, p.m, TRANS_A);
    let b_rows = select(p.k, p.n, TRANS_B);
    let b_cols = select(p.n, p.k, TRANS_B);
    let sg = tid / 32u;
    let lane = tid % 32u;
    let sm = (sg / SG_N) * FM * 16u; // this subgroup's rows within the tile
    let sn = (sg % SG_N) * FN * 16u; // and columns

    //@DECLARE

    var k1 = 0u;
    var ro = 0u; // the staged slice being multiplied
    var so = 0u; // where the next slice is staged
    //@LOAD
    //@STAGE
    workgroupBarrier();
    for (var k0 = 0u; k0 < p.k; k0 += BK) {
        k1 = k0 + BK;
        if k1 < p.k {
            //@LOAD
        }
        //@MMA
        so = (ro + 1u) % STAGES;
        // One buffer: wait until every invocation has read it before overwriting it.
        if STAGES == 1u { workgroupBarrier(); }
        if k1 < p.k {
            //@STAGE
        }
        workgroupBarrier();
        ro = so;
    }

    let row0 = m0 + sm;
    let col0 = n0 + sn;
    //@STORE
}
