// The tiled quantized product on cooperative matrices (tensor cores), inserted at `//@COOP`
// of shaders/qmatmul.wgsl in its tensor-core variants (f16 activations, adapters with
// f16 × f16 → f32 16×16×16 cooperative matrices at subgroup size 32).
//
// A workgroup is 2 × 2 subgroups of 32 invocations and computes a BM × 64 tile of y (rows of
// x by rows of W; BM = 64, or 32 where 64-row tiles would launch too few workgroups to fill a
// large GPU); each subgroup owns BM/2 × 32 of it as BM/32 × 2 accumulators of 16 × 16 f32.
// One quantization block of K (32) a step: x's BM × 32 slice (times γ and the row's inverse
// RMS under NORM, rounded to f16) and W's 64 × 32 slice dequantized to f16 are staged in
// workgroup memory, each in its stored layout (x row-major: A; W's rows: Bᵀ), rows padded by
// 8 halves so a fragment's eight 16-byte rows fall in distinct banks. The words of the block
// after next are read into registers while the current one is multiplied. The accumulators
// go through a 16 × 16 f32 scratch tile per subgroup to the same epilogues as the SIMT kernel (store,
// residual, SwiGLU, RoPE + KV append), which take columns in pairs: lane l owns columns
// 2(l mod 8), +1 of rows l / 8 + 4i.
//
// Numerics: products of f16 operands are exact in f32 and accumulate in f32; what changes
// against the SIMT kernel is that each dequantized weight d·q (+ m) is rounded to f16, and
// under NORM x·γ/RMS as well (≤ 2u₁₆ relative per term, u₁₆ = 2⁻¹¹). The launcher takes this
// kernel only for matrices whose dequantized weights all fit f16 (QuantMatrix::fits_f16).
// Fragment strides are consts (naga's SPIR-V writer fails on cooperative loads whose stride
// reads a uniform inside a loop).

const CN: u32 = 64u; // the tile's columns (rows of W)
const CS: u32 = 40u; // a staged row: 32 halves and 8 of padding
const CXI: u32 = 128u / BM; // invocations a staged row of x: 2 or 4
const CXV: u32 = 8u / CXI; // x's vec4s an invocation stages a step: 4 or 2
var<workgroup> cx: array<f16, BM * CS>; // [BM][CS]: x's slice
var<workgroup> cw: array<f16, CN * CS>; // [CN][CS]: W's slice, dequantized
var<workgroup> cscratch: array<f32, 1024>; // [subgroup][16 × 16]; NORM's Σx² first

// Raw words of one block step: x's CXV vec4s (row lid / CXI, vec4s CXV·(lid mod CXI)..) and
// W's two parts (16 weights each) of row lid / 2.
struct CoopRaw {
    xv: array<vec4<T>, 4>,
    w: array<u32, 4>,
    s: u32,
}

fn coop_load(m0: u32, n0: u32, b: u32, lid: u32) -> CoopRaw {
    var r: CoopRaw;
    let xr = lid / CXI;
    let kv = p.k / 4u;
    for (var j = 0u; j < CXV; j++) {
        r.xv[j] = vec4<T>(0.0);
        if m0 + xr < p.m { r.xv[j] = x[(m0 + xr) * kv + b * 8u + (lid % CXI) * CXV + j]; }
    }
    let row = lid / 2u;
    let hf = lid % 2u;
    let n = n0 + row;
    r.s = 0u;
    for (var j = 0u; j < 4u; j++) { r.w[j] = 0u; }
    if n < p.n {
        let blk = n * p.blocks + b;
        // Q8_0: words 4·half .. +3 (weights 16·half ..); Q4: words 2·half, +1.
        let words = select(2u, 4u, FORMAT == 0u);
        for (var j = 0u; j < words; j++) { r.w[j] = qword(blk * QW + hf * words + j); }
        if FORMAT == 2u {
            r.s = scales[blk];
        } else {
            r.s = scales[blk >> 1u] >> (16u * (blk & 1u));
        }
    }
    return r;
}

// `inv`: the inverse RMS of x's row lid / CXI (NORM).
fn coop_stage(r: CoopRaw, lid: u32, inv: f32, b: u32) {
    for (var j = 0u; j < CXV; j++) {
        let c = (lid % CXI) * CXV + j; // the vec4 within the block
        var v = vec4<f32>(r.xv[j]);
        if NORM { v *= vec4<f32>(gamma[b * 8u + c]) * inv; }
        let at = (lid / CXI) * CS + 4u * c;
        cx[at] = f16(v.x);
        cx[at + 1u] = f16(v.y);
        cx[at + 2u] = f16(v.z);
        cx[at + 3u] = f16(v.w);
    }
    let row = lid / 2u;
    let hf = lid % 2u;
    var sm = unpack2x16float(r.s);
    if FORMAT != 2u { sm.y = 0.0; }
    let base = row * CS;
    if FORMAT == 0u {
        for (var j = 0u; j < 4u; j++) {
            let q = bytes_i8(r.w[j]) * sm.x;
            let at = base + hf * 16u + 4u * j;
            cw[at] = f16(q.x);
            cw[at + 1u] = f16(q.y);
            cw[at + 2u] = f16(q.z);
            cw[at + 3u] = f16(q.w);
        }
        return;
    }
    let offset = select(0.0, 8.0, FORMAT == 1u);
    for (var j = 0u; j < 2u; j++) {
        // Word i = 2·half + j: weights 4i.. (low nibbles) and 16 + 4i.. (high).
        let i = 2u * hf + j;
        let lo = nibbles_lo(r.w[j], offset) * sm.x + sm.y;
        let hi = nibbles_hi(r.w[j], offset) * sm.x + sm.y;
        for (var e = 0u; e < 4u; e++) {
            cw[base + 4u * i + e] = f16(lo[e]);
            cw[base + 16u + 4u * i + e] = f16(hi[e]);
        }
    }
}

// The epilogue of one 16 × 16 accumulator staged in this subgroup's scratch at (m, n).
fn coop_store(sg: u32, lane: u32, m: u32, n: u32) {
    let c = 2u * (lane % 8u);
    for (var i = 0u; i < 4u; i++) {
        let r = lane / 8u + 4u * i;
        let row = m + r;
        let col = n + c;
        if row >= p.m || col >= p.n { continue; }
        let v0 = cscratch[sg * 256u + r * 16u + c];
        let v1 = cscratch[sg * 256u + r * 16u + c + 1u];
        if GLU {
            store_glu(row, col, v0, v1);
        } else if ROPE {
            rope_store(row, col, v0, v1);
        } else {
            store(row, col, v0);
            if col + 1u < p.n { store(row, col + 1u, v1); }
        }
    }
}

@compute @workgroup_size(128)
fn matmul_coop(@builtin(workgroup_id) wid: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * CN;
    let m0 = wid.y * BM;
    let sg = lid / 32u;
    let lane = lid % 32u;
    let sm = (sg / 2u) * (BM / 2u); // this subgroup's rows within the tile
    let sn = (sg % 2u) * 32u; // and columns
    // NORM: the inverse RMS of this invocation's row of x (CXI invocations a row).
    var inv = 1.0;
    if NORM {
        let row = lid / CXI;
        var s = 0.0;
        if m0 + row < p.m {
            for (var c = lid % CXI; c < p.k / 4u; c += CXI) {
                let v = vec4<f32>(x[(m0 + row) * (p.k / 4u) + c]);
                s += dot(v, v);
            }
        }
        cscratch[lid] = s;
        workgroupBarrier();
        var t = 0.0;
        for (var i = 0u; i < CXI; i++) { t += cscratch[row * CXI + i]; }
        inv = inverseSqrt(t / f32(p.k) + p.eps);
        workgroupBarrier();
    }
    var a00 = coop_mat16x16<f32, C>();
    var a01 = coop_mat16x16<f32, C>();
    var a10 = coop_mat16x16<f32, C>();
    var a11 = coop_mat16x16<f32, C>();
    // Two blocks in flight: block b + 2's words are requested while block b is multiplied,
    // so a load has two steps to land before it is staged.
    var raw = coop_load(m0, n0, 0u, lid);
    var next = raw;
    if p.blocks > 1u { next = coop_load(m0, n0, 1u, lid); }
    for (var b = 0u; b < p.blocks; b++) {
        coop_stage(raw, lid, inv, b);
        workgroupBarrier();
        raw = next;
        if b + 2u < p.blocks { next = coop_load(m0, n0, b + 2u, lid); }
        for (var kk = 0u; kk < 32u; kk += 16u) {
            let x0 = coopLoadT<coop_mat16x16<f16, A>>(&cx[sm * CS + kk], CS);
            let w0 = coopLoad<coop_mat16x16<f16, B>>(&cw[sn * CS + kk], CS);
            let w1 = coopLoad<coop_mat16x16<f16, B>>(&cw[(sn + 16u) * CS + kk], CS);
            a00 = coopMultiplyAdd(x0, w0, a00);
            a01 = coopMultiplyAdd(x0, w1, a01);
            if BM == 64u {
                let x1 = coopLoadT<coop_mat16x16<f16, A>>(&cx[(sm + 16u) * CS + kk], CS);
                a10 = coopMultiplyAdd(x1, w0, a10);
                a11 = coopMultiplyAdd(x1, w1, a11);
            }
        }
        workgroupBarrier();
    }
    coopStoreT(a00, &cscratch[sg * 256u], 16u);
    subgroupBarrier();
    coop_store(sg, lane, m0 + sm, n0 + sn);
    subgroupBarrier();
    coopStoreT(a01, &cscratch[sg * 256u], 16u);
    subgroupBarrier();
    coop_store(sg, lane, m0 + sm, n0 + sn + 16u);
    if BM == 32u { return; }
    subgroupBarrier();
    coopStoreT(a10, &cscratch[sg * 256u], 16u);
    subgroupBarrier();
    coop_store(sg, lane, m0 + sm + 16u, n0 + sn);
    subgroupBarrier();
    coopStoreT(a11, &cscratch[sg * 256u], 16u);
    subgroupBarrier();
    coop_store(sg, lane, m0 + sm + 16u, n0 + sn + 16u);
}
