// tensor_peak: the multiply-add throughput of cooperative matrices (tensor cores) as WGSL
// reaches them, f16 x f16 -> f32 at 16 x 16 x 16 (2 * 16^3 = 8192 FLOPs per multiply-add).
// Each subgroup of 32 loads one A and one B fragment from `src` once, then runs ITERS
// iterations of 8 independent multiply-adds, each into its own accumulator, so the tensor
// cores' latency is hidden and no memory traffic is timed. Each accumulator starts from and
// ends in its own slot of `dst` (slots repeat every 64 subgroups; the values do not matter,
// only that no two chains are alike and nothing can be optimised away). Small operands
// (the launcher uploads values near 0.01) add about 2 per run: every sum stays finite.
//
// The roofline model's tensor-core ceiling: what a GEMM on cooperative matrices could reach
// on this adapter through this API (NVIDIA's Vulkan driver, for one, maps these to the
// warp-level MMA instructions, not Hopper's warpgroup ones).
//
// tensor_tile: the same, with the operands read from workgroup memory as a tiled GEMM's
// inner loop reads them: a 64 x 64 A tile and a 64 x 64 B tile, row-major, each row padded
// by 8 halves as gemm_coop.wgsl pads them; per iteration each subgroup loads 4 A and 4 B
// fragments of one of two 16-deep k slices for 16 multiply-adds into 16 accumulators, as
// gemm_coop's 4 x 4 fragments per subgroup do per k step. Against tensor_peak it shows what
// feeding the tensor cores from workgroup memory costs, apart from global memory and
// barriers. Then a GEMM's main loop is rebuilt a piece at a time, per 32-deep slice (two k
// steps): BARRIERS adds its two workgroup barriers; STAGE stores each invocation's share of
// the next slice (64 halves, as eight 16-byte loads' worth) between them, 2 bytes a store or
// (TW = 4) 8; GLOAD loads those values from global memory at the start of the slice (16 bytes
// a load from `g`, small enough to stay in L2), as the GEMM's pipeline registers are loaded;
// AHEAD stages them a slice later, so that each load has a whole slice to arrive. The rate
// lost at each step is what that piece costs (benches/NOTES.md, run 50).
//
// Defines: WG (128: the staging layout assumes it), ITERS (even), BARRIERS, STAGE, GLOAD,
// AHEAD, TT and TW (the tile's element type and its halves); block STAGE_STORES.
// Linear workgroup grid; `p.n` workgroups do work.

struct Params { n: u32, pad0: u32, pad1: u32, pad2: u32 }

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<f16>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<mat2x4<f16>>;

@compute @workgroup_size(WG)
fn tensor_peak(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    if wg >= p.n { return; }
    let slot = ((wg * (WG / 32u) + lid / 32u) % 64u) * 8u * 256u;
    let a = coopLoadT<coop_mat16x16<f16, A>>(&src[0], 16u);
    let b = coopLoadT<coop_mat16x16<f16, B>>(&src[256], 16u);
    var c0 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 0u], 16u);
    var c1 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 256u], 16u);
    var c2 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 512u], 16u);
    var c3 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 768u], 16u);
    var c4 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 1024u], 16u);
    var c5 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 1280u], 16u);
    var c6 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 1536u], 16u);
    var c7 = coopLoadT<coop_mat16x16<f32, C>>(&dst[slot + 1792u], 16u);
    for (var k = 0u; k < ITERS; k++) {
        c0 = coopMultiplyAdd(a, b, c0);
        c1 = coopMultiplyAdd(a, b, c1);
        c2 = coopMultiplyAdd(a, b, c2);
        c3 = coopMultiplyAdd(a, b, c3);
        c4 = coopMultiplyAdd(a, b, c4);
        c5 = coopMultiplyAdd(a, b, c5);
        c6 = coopMultiplyAdd(a, b, c6);
        c7 = coopMultiplyAdd(a, b, c7);
    }
    coopStoreT(c0, &dst[slot], 16u);
    coopStoreT(c1, &dst[slot + 256u], 16u);
    coopStoreT(c2, &dst[slot + 512u], 16u);
    coopStoreT(c3, &dst[slot + 768u], 16u);
    coopStoreT(c4, &dst[slot + 1024u], 16u);
    coopStoreT(c5, &dst[slot + 1280u], 16u);
    coopStoreT(c6, &dst[slot + 1536u], 16u);
    coopStoreT(c7, &dst[slot + 1792u], 16u);
}

const TS: u32 = 64u + 8u; // halves per staged row: 64 columns, padded
// Two 64 x 64 tiles, A's then B's, as TT: f16 (TW = 1) or vec4<f16> (TW = 4, so that staging
// stores 8 bytes at a time; cooperative loads then count offsets and strides in vec4s).
var<workgroup> tile: array<TT, 2u * 64u * TS / TW>;

@compute @workgroup_size(WG)
fn tensor_tile(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let wg = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    for (var i = lid; i < 2u * 64u * TS / TW; i += WG) {
        tile[i] = TT(src[i % 512u]);
    }
    workgroupBarrier();
    if wg >= p.n { return; }
    let slot = ((wg * (WG / 32u) + lid / 32u) % 64u) * 16u * 256u;
    //@DECLARE
    // Staged values: eight 16-byte loads' worth per invocation (from src, or from g).
    var r0 = mat2x4<f16>(); var r1 = mat2x4<f16>(); var r2 = mat2x4<f16>(); var r3 = mat2x4<f16>();
    var r4 = mat2x4<f16>(); var r5 = mat2x4<f16>(); var r6 = mat2x4<f16>(); var r7 = mat2x4<f16>();
    // Loaded values: staged in the same slice, or (AHEAD) in the next one.
    var q0 = mat2x4<f16>(); var q1 = mat2x4<f16>(); var q2 = mat2x4<f16>(); var q3 = mat2x4<f16>();
    var q4 = mat2x4<f16>(); var q5 = mat2x4<f16>(); var q6 = mat2x4<f16>(); var q7 = mat2x4<f16>();
    let g_len = arrayLength(&g); // a power of two (ceilings.rs), so a mask wraps offsets
    for (var k = 0u; k < ITERS; k += 2u) {
        if GLOAD {
            let at = (wg * 977u + (k / 2u) * 1024u + lid) & (g_len - 1u);
            let e = min(at, g_len - 1024u);
            q0 = g[e]; q1 = g[e + 128u]; q2 = g[e + 256u];
            q3 = g[e + 384u]; q4 = g[e + 512u];
            q5 = g[e + 640u]; q6 = g[e + 768u];
            q7 = g[e + 896u];
        }
        {
            let at = 0u; // this step's k: A's first column, B's first row
            //@STEP
        }
        {
            let at = 16u;
            //@STEP
        }
        if BARRIERS { workgroupBarrier(); }
        if GLOAD && !AHEAD {
            r0 = q0; r1 = q1; r2 = q2; r3 = q3; r4 = q4; r5 = q5; r6 = q6; r7 = q7;
        }
        if STAGE {
            stage(lid, r0); stage(lid + 128u, r1); stage(lid + 256u, r2); stage(lid + 384u, r3);
            stage(lid + 512u, r4); stage(lid + 640u, r5); stage(lid + 768u, r6);
            stage(lid + 896u, r7);
        }
        if BARRIERS { workgroupBarrier(); }
        if AHEAD {
            r0 = q0; r1 = q1; r2 = q2; r3 = q3; r4 = q4; r5 = q5; r6 = q6; r7 = q7;
        }
    }
    //@STORE
}

// Stores eight halves as the GEMM stages a 16-byte load: chunk i of the 128 x 64 tile.
fn stage(i: u32, v: mat2x4<f16>) {
    let o = (i / 8u) * TS + (i % 8u) * 8u;
    //@STAGE_STORES
}
