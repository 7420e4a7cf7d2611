// GEMM: C = alpha * op(A) * op(B) + beta * C (+ bias[n]), batched, row-major.
//
// Tiling: a workgroup computes a BM x BN tile of C, staging BK-deep slices of op(A) and op(B)
// in workgroup memory as vec4 (four rows of A, four columns of B); each invocation keeps a
// TM x TN register block of accumulators (f32 whatever T is) as TM x TN/4 vec4 variables.
// Invocation (x, y) owns the row quads y + i*WG_Y and the column quads x + j*WG_X, so one k
// step costs it TM/4 + TN/4 vec4 reads of workgroup memory for TM*TN FMAs, and neighbouring
// invocations read neighbouring words. Each staged row is padded by one vec4 so that the
// strided stores of a transposed slice fall in distinct banks.
//
// Software pipelining: the next slice is loaded from memory into registers (ar*, br*) while
// the current one is multiplied, and stored to workgroup memory after it, so memory latency
// overlaps arithmetic. With STAGES = 2 the staged slices are double-buffered (the next slice
// goes to the other buffer: one barrier per slice instead of two, twice the workgroup
// memory); the tuning table chooses. With VA = 4 (VB = 4) A (B) is read as vec4 along its
// contiguous stored dimension, 16 bytes per load for f32 (the launcher sets it when the
// leading dimension and batch stride are multiples of 4). Out-of-range rows, columns and k
// load as 0 and are never stored, so any M, N, K works.
//
// The register block, the pipeline registers and the unrolled k steps are generated (the //@
// markers): every one is a named variable with constant indices. A private array indexed in a loop instead ends
// up in local memory on some drivers (0.35 TFLOP/s on the H200, benches/NOTES.md).
//
// Defines (prepended by Ridge): T (A's and B's storage type), TC (C's and the bias's: T, or f32
// for f16 operands), AT and BT (T or vec4<T>), CT (TC or vec4<TC>), VA, VB and VC
// (1 or 4, their widths; CT is also the bias's type), BM, BN, BK, TM, TN (multiples of 4; BM*BK a multiple of VA times the
// invocation count, BN*BK of VB times it), STAGES (1 or 2), TRANS_A, TRANS_B, HAS_BIAS, ACT_GELU. With
// TRANS_A, A is stored K x M (lda = M); otherwise M x K (lda = K). With TRANS_B, B is stored
// N x K; otherwise K x N.
// The workgroup grid is linear (x + y*nx + z*nx*ny) so that it can exceed 65,535 in x.

struct Params {
    m: u32, n: u32, k: u32, batch: u32,
    lda: u32, ldb: u32, ldc: u32, tiles_n: u32,
    stride_a: u32, stride_b: u32, stride_c: u32, tiles_m: u32,
    alpha: f32, beta: f32, pad0: u32, pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> a: array<AT>;
@group(0) @binding(2) var<storage, read> b: array<BT>;
@group(0) @binding(3) var<storage, read> bias: array<CT>;
@group(0) @binding(4) var<storage, read_write> c: array<CT>;

const WG_X: u32 = BN / TN;
const WG_Y: u32 = BM / TM;
const THREADS: u32 = WG_X * WG_Y;
const AS: u32 = BM / 4u + 1u; // vec4s per staged k row of A, padded
const BS: u32 = BN / 4u + 1u; // vec4s per staged k row of B, padded

const A_SLICE: u32 = BK * AS; // vec4s per staged slice of A
const B_SLICE: u32 = BK * BS;

// a_tile[slot * A_SLICE + k * AS + m / 4][m % 4], b_tile[slot * B_SLICE + k * BS + n / 4][n % 4]
var<workgroup> a_tile: array<vec4<f32>, STAGES * A_SLICE>;
var<workgroup> b_tile: array<vec4<f32>, STAGES * B_SLICE>;

// (m, k) of the first element of load i of the A slice and (k, n) of load i of the B
// slice, numbered so that consecutive invocations read consecutive addresses of the stored
// matrices.
fn a_pos(i: u32) -> vec2<u32> {
    if TRANS_A { return vec2<u32>(i % (BM / VA) * VA, i / (BM / VA)); }
    return vec2<u32>(i / (BK / VA), i % (BK / VA) * VA);
}

fn b_pos(i: u32) -> vec2<u32> {
    if TRANS_B { return vec2<u32>(i % (BK / VB) * VB, i / (BK / VB)); }
    return vec2<u32>(i / (BN / VB), i % (BN / VB) * VB);
}

// Zero where lane index + first >= end (the part of a vec4 past the matrix edge).
fn inside(v: vec4<f32>, first: u32, end: u32) -> vec4<f32> {
    return select(v, vec4<f32>(), vec4<u32>(first) + vec4<u32>(0u, 1u, 2u, 3u) >= vec4<u32>(end));
}

// load_a(base, m, k) and load_b(base, k, n): f32, or vec4<f32> along the stored contiguous
// dimension with VA / VB = 4 (generated for the widths chosen).
//@LOADERS

// gelu(x) (the erf form, shaders/include/gelu.wgsl, with VF = f32, or vec4<f32> with VC = 4).
//@GELU

// The epilogue, C = act(alpha * acc + beta * C + bias) inside C only (generated for VC):
// element by element, or with VC = 4 a vec4 of C and of the bias per load and store, the
// bias read once per column quad and a row quad's C values read before any is written.
// beta == 0 never reads C, so whatever C held (NaN included) is ignored.
//@EPILOGUE

@compute @workgroup_size(WG_X, WG_Y, 1)
fn gemm(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
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

    //@DECLARE

    // The first slice into registers; then, per slice: registers to workgroup memory, load
    // the next slice into registers, multiply the staged one (the k steps unrolled, each
    // step's reads issued before the previous step's multiply-adds).
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
        //@FMA
        so = (ro + 1u) % STAGES;
        // One buffer: wait until every invocation has read it before overwriting it.
        if STAGES == 1u { workgroupBarrier(); }
        if k1 < p.k {
            //@STAGE
        }
        workgroupBarrier();
        ro = so;
    }

    //@STORE
}
