// Products with block-quantized weights, dequantized in registers: y = x·Wᵀ, W [N, K] in
// Q8_0, Q4_0 or Q4_1 (ggml's blocks of 32, repacked: see crates/ridge-kernels/src/quant.rs),
// x [M, K] and y in T (f32 or f16), f32 accumulation.
//
// matvec (decode and short prompts, small M): TPR invocations share a row of W, each taking
//   every TPR-th block and dotting it with x's matching 32 values; a tree over the TPR partial
//   sums. One workgroup holds (WG / TPR)·RPT rows of W and MROWS rows of x (the grid's z
//   counts groups of MROWS rows): with MROWS > 1 each block is dequantized once into
//   registers and dotted with every row, so W is read once per MROWS rows of x; with RPT > 1
//   (large matrices, one row of x) each invocation loads x's block once and dots it with RPT
//   rows' blocks, RPT weight loads in flight. A block's quant words come in one 16-byte load
//   (two for Q8_0).
//   With WORDS a lane takes one quant word of a block at a time (4 or 8 weights), so that
//   neighbouring lanes read neighbouring values of x.
//   With INT8X (one row of x) the workgroup first rounds x's blocks to 8 bits in workgroup
//   memory (ggml's Q8_0 rounding: d = max|x|/127, q = round(x/d)), and each block's product
//   is d_w·d_x·Σ q_w·q_x by packed 4 × 8-bit integer dot products (dot4I8Packed: one
//   instruction for four weights where the float path spends about four a weight), as
//   llama.cpp's integer matrix-vector kernels do. The only rounding beyond the float path's
//   is x's: at most d_x/2 a value.
// matmul (prefill): BM × 64 tiles of y (BM = 64, or 32 where 64-row tiles would leave a
//   large GPU's units idle), one block of K (32) per step: x's tile and W's dequantized
//   tile staged in workgroup memory, a 4 × 4 register tile per invocation.
// matmul_coop (prefill with f16 activations where the adapter has tensor cores): the same
//   product on cooperative matrices, from shaders/include/qmatmul_coop.wgsl at //@COOP.
// gather (embedding lookup): out[t, c] = W[ids[t], c], dequantized.
//
// Prologue: NORM multiplies each row of x by its inverse RMS, 1/√(mean(x²) + eps), and by γ
// (RMSNorm, Zhang & Sennrich 2019) as it is read: the norm before a product costs no dispatch
// and no round trip through memory. matvec sums x² over the blocks it reads anyway and
// scales the reduced dot products; matmul's workgroup computes its rows' RMS first (a row
// of K values is a few KB).
//
// Epilogue ROPE (W is [W_q; W_k; W_v], rows permuted for RoPE on adjacent pairs as llama.cpp
// stores them): row pairs (2j, 2j + 1) of a Q or K head are rotated by the angle of x's row's
// position, pos0 + m, from an f64 table; Q goes to y [M, heads, head_dim], K and V to the KV
// cache at that position (the //@ROPE block: its bindings exist only in ROPE variants).
//
// Epilogues: RESIDUAL adds the product to y (y += x·Wᵀ: the residual stream); GLU takes
// W's rows in pairs (2i: gate, 2i + 1: up, interleaved at load) and writes
// y[:, i] = silu(gate)·up (SwiGLU; Shazeer, "GLU Variants Improve Transformer", 2020), so y
// has N / 2 columns. A decode step after the fused attention block
// (shaders/decode_attention.wgsl) leaves each head's share of the O projection pending in rows
// 1.. of the stream: the next products add them as they read it (XPARTS: x's row plus its
// pending rows, normalised by the NORM prologue) or with their residual (YPARTS).
//
// The blocks' weights and dot products: shaders/include/quant_blocks.wgsl, at //@QUANT_BLOCKS.
//
// Defines: T, FORMAT (0 Q8_0, 1 Q4_0, 2 Q4_1), QW (quant words per block: 8 or 4), WG, BM,
// TPR (a power of two dividing WG), MROWS (rows of x per matvec workgroup), RPT (rows of W per
// matvec invocation, with MROWS = 1), WORDS (with MROWS = 1: a row's lanes take its quant
// words instead of its blocks), INT8X and XB (with MROWS = 1 and not WORDS: x rounded to 8
// bits, XB = K / 32 blocks of it in workgroup memory; XB = 1 otherwise), SGL (lanes of a row summed by subgroup shuffles: a power of
// two up to TPR, 1 without subgroups), NORM, RESIDUAL, GLU, ROPE, XPARTS and YPARTS (partial sums
// pending in rows 1.. of x, or of y under RESIDUAL, with M = 1; 0 elsewhere); the //@ROPE block defines
// rope_store, //@ROW_SHUFFLE the shuffles.

struct Params {
    m: u32, n: u32, k: u32, blocks: u32,
    eps: f32, pos0: u32, heads: u32, kv_heads: u32,
    head_dim: u32, pad0: u32, pad1: u32, pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<T>>;
// The quant words, a block's 4 (8 for Q8_0) as one (two) 16-byte loads; qword(i) is word i.
@group(0) @binding(2) var<storage, read> quants: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> scales: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<T>;
@group(0) @binding(5) var<storage, read> ids: array<u32>;
@group(0) @binding(6) var<storage, read> gamma: array<vec4<T>>;

// Vec4 c (of K/4) of row `row` of x as stored, with XPARTS partial sums added: x's rows
// 1..=XPARTS (M = 1), the outputs a fused decode attention left pending for this product.
fn xraw(row: u32, c: u32) -> vec4<f32> {
    let kv = p.k / 4u;
    var v = vec4<f32>(x[row * kv + c]);
    for (var j = 1u; j <= XPARTS; j++) { v += vec4<f32>(x[j * kv + c]); }
    return v;
}

// Vec4 c (of K/4) of row `row` of x, times γ under NORM (the inverse RMS is applied later).
fn xval(row: u32, c: u32) -> vec4<f32> {
    var v = vec4<f32>(x[row * (p.k / 4u) + c]);
    if NORM { v *= vec4<f32>(gamma[c]); }
    return v;
}

//@QUANT_BLOCKS

// The 32 weights of block b, dequantized: weights 4i..4i+3 in element i.
fn block_weights(b: u32) -> array<vec4<f32>, 8> {
    var w: array<vec4<f32>, 8>;
    let sm = scale_min(b);
    if FORMAT == 0u {
        for (var i = 0u; i < 8u; i++) { w[i] = bytes_i8(qword(b * 8u + i)) * sm.x; }
        return w;
    }
    let offset = select(0.0, 8.0, FORMAT == 1u);
    for (var i = 0u; i < 4u; i++) {
        let q = qword(b * 4u + i);
        w[i] = nibbles_lo(q, offset) * sm.x + sm.y;
        w[4u + i] = nibbles_hi(q, offset) * sm.x + sm.y;
    }
    return w;
}

// Σ w·x over block b of W and a block of x rounded to 8 bits (INT8X): its packed values (words
// 0–3 in xa, 4–7 in xb: values 4i..4i+3 in word i), and (d_x, d_x·Σ q_x). Q4 nibbles are 0–15,
// the same as signed bytes, so Q4_0's −8 is taken once from Σ q_x.
fn block_dot_i8(xa: vec4<u32>, xb: vec4<u32>, xs: vec2<f32>, b: u32) -> f32 {
    let sm = scale_min(b);
    var lo: vec4<u32>;
    var hi: vec4<u32>;
    if FORMAT == 0u {
        lo = quants[2u * b];
        hi = quants[2u * b + 1u];
    } else {
        let q = quants[b];
        lo = q & vec4<u32>(0x0F0F0F0Fu);
        hi = (q >> vec4<u32>(4u)) & vec4<u32>(0x0F0F0F0Fu);
    }
    let qx = dot4I8Packed(lo.x, xa.x) + dot4I8Packed(lo.y, xa.y) + dot4I8Packed(lo.z, xa.z)
        + dot4I8Packed(lo.w, xa.w) + dot4I8Packed(hi.x, xb.x) + dot4I8Packed(hi.y, xb.y)
        + dot4I8Packed(hi.z, xb.z) + dot4I8Packed(hi.w, xb.w);
    let v = xs.x * f32(qx);
    if FORMAT == 1u { return sm.x * (v - 8.0 * xs.y); }
    return sm.x * v + sm.y * xs.y;
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// Writes one product (or, with GLU, one gate/up pair) to y at row m, column n of W.
fn store(m: u32, n: u32, v: f32) {
    let i = m * p.n + n;
    if RESIDUAL {
        // YPARTS: the pending partial sums in y's rows 1..=YPARTS join the stream (M = 1).
        var r = f32(y[i]);
        for (var j = 1u; j <= YPARTS; j++) { r += f32(y[j * p.n + n]); }
        y[i] = T(r + v);
    } else {
        y[i] = T(v);
    }
}
fn store_glu(m: u32, n: u32, gate: f32, up: f32) {
    y[m * (p.n / 2u) + n / 2u] = T(silu(gate) * up);
}

//@ROPE

// Rows of W a workgroup covers: WG / TPR invocations across, RPT rows each.
const ROWS_WG: u32 = (WG / TPR) * RPT;
// Partial sums: [row of x][row of W in the workgroup][lane].
var<workgroup> partial: array<f32, MROWS * RPT * WG>;
// NORM: partial Σ x² of each row of x, [row of x][invocation].
var<workgroup> squares: array<f32, MROWS * WG>;
// INT8X: x's blocks rounded to 8 bits (two vec4s of packed values a block), their (d, d·Σ q)
// and, for NORM, their Σ x² (before γ).
var<workgroup> x8: array<vec4<u32>, 2u * XB>;
var<workgroup> x8_scale: array<vec2<f32>, XB>;
var<workgroup> x8_squares: array<f32, XB>;

// INT8X's prologue: block b of row `row` of x (times γ under NORM) rounded to 8 bits.
fn round_x_block(row: u32, b: u32) {
    var v: array<vec4<f32>, 8>;
    var amax = 0.0;
    var ss = 0.0;
    for (var j = 0u; j < 8u; j++) {
        let raw = xraw(row, b * 8u + j);
        ss += dot(raw, raw);
        v[j] = raw;
        if NORM { v[j] *= vec4<f32>(gamma[b * 8u + j]); }
        let a = abs(v[j]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    // A block of zeros (or of values too small for 127/amax) rounds to zeros.
    let inv = select(0.0, 127.0 / amax, amax > 1e-30);
    var words: array<u32, 8>;
    var sum = 0;
    for (var j = 0u; j < 8u; j++) {
        let q = vec4<i32>(round(v[j] * inv));
        sum += q.x + q.y + q.z + q.w;
        words[j] = pack4xI8Clamp(q);
    }
    x8[2u * b] = vec4<u32>(words[0], words[1], words[2], words[3]);
    x8[2u * b + 1u] = vec4<u32>(words[4], words[5], words[6], words[7]);
    let d = amax / 127.0;
    x8_scale[b] = vec2<f32>(d, d * f32(sum));
    if NORM { x8_squares[b] = ss; }
}

// Block `kb` of row `row` of x (times γ under NORM), its Σ x² (before γ) and, for Q4_1, the
// sum of its values (after γ).
struct XBlock {
    v: array<vec4<f32>, 8>,
    ss: f32,
    s: f32,
}
fn x_block(row: u32, kb: u32) -> XBlock {
    var b: XBlock;
    b.ss = 0.0;
    b.s = 0.0;
    for (var j = 0u; j < 8u; j++) {
        let v = xraw(row, kb * 8u + j);
        b.ss += dot(v, v);
        b.v[j] = v;
        if NORM { b.v[j] *= vec4<f32>(gamma[kb * 8u + j]); }
        if FORMAT == 2u { b.s += dot(b.v[j], vec4<f32>(1.0)); }
    }
    return b;
}

@compute @workgroup_size(WG)
fn matvec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let r = lid / TPR;
    let lane = lid % TPR;
    let base = (wid.x + wid.y * nwg.x) * ROWS_WG;
    let m0 = wid.z * MROWS;
    // acc[i · RPT + j]: row m0 + i of x against row base + r·RPT + j of W. ss[i]: Σ x² of
    // the blocks of row m0 + i this invocation read: the TPR lanes of a row of W read every
    // block of x once, so their sum is the row's Σ x² (NORM's RMS costs no pass of its own).
    var acc: array<f32, MROWS * RPT>;
    var ss: array<f32, MROWS>;
    for (var i = 0u; i < MROWS * RPT; i++) { acc[i] = 0.0; }
    for (var i = 0u; i < MROWS; i++) { ss[i] = 0.0; }
    if INT8X {
        for (var b = lid; b < p.blocks; b += WG) { round_x_block(m0, b); }
        workgroupBarrier();
    }
    if MROWS == 1u && INT8X {
        for (var b = lane; b < p.blocks; b += TPR) {
            // x's block once from workgroup memory, dotted with RPT rows of W (rows past N
            // read row N − 1, as below).
            let xa = x8[2u * b];
            let xb = x8[2u * b + 1u];
            let xs = x8_scale[b];
            if NORM { ss[0] += x8_squares[b]; }
            for (var j = 0u; j < RPT; j++) {
                let n = min(base + r * RPT + j, p.n - 1u);
                acc[j] += block_dot_i8(xa, xb, xs, n * p.blocks + b);
            }
        }
    } else if MROWS == 1u && WORDS {
        // Lanes take a row's quant words, not whole blocks: neighbouring lanes read
        // neighbouring vec4s of x (a warp's loads of x touch 4–8 cache lines, not 32 as with a
        // block a lane). Word i of block b: Q8_0 weights 4i..4i+3 (x's vec4 8b + i); Q4
        // weights 4i..4i+3 and 16 + 4i.. (vec4s 8b + i and 8b + 4 + i).
        for (var u = lane; u < p.blocks * QW; u += TPR) {
            let b = u / QW;
            let i = u % QW;
            let raw_a = xraw(m0, b * 8u + i);
            var xa = raw_a;
            if NORM { xa *= vec4<f32>(gamma[b * 8u + i]); }
            ss[0] += dot(raw_a, raw_a);
            var xb = vec4<f32>(0.0);
            if FORMAT != 0u {
                let raw_b = xraw(m0, b * 8u + 4u + i);
                xb = raw_b;
                if NORM { xb *= vec4<f32>(gamma[b * 8u + 4u + i]); }
                ss[0] += dot(raw_b, raw_b);
            }
            let sx = dot(xa + xb, vec4<f32>(1.0));
            for (var j = 0u; j < RPT; j++) {
                let n = base + r * RPT + j;
                if n < p.n {
                    let blk = n * p.blocks + b;
                    let w = qword(blk * QW + i);
                    let sm = scale_min(blk);
                    if FORMAT == 0u {
                        acc[j] += sm.x * dot(bytes_i8(w), xa);
                    } else {
                        let offset = select(0.0, 8.0, FORMAT == 1u);
                        let qx = dot(nibbles_lo(w, offset), xa) + dot(nibbles_hi(w, offset), xb);
                        acc[j] += sm.x * qx + sm.y * sx;
                    }
                }
            }
        }
    } else if MROWS == 1u {
        for (var b = lane; b < p.blocks; b += TPR) {
            // x's block once, dotted with RPT rows of W: RPT blocks of weights in flight.
            let xb = x_block(m0, b);
            ss[0] += xb.ss;
            for (var j = 0u; j < RPT; j++) {
                // Rows past N read row N − 1 (their sums are never stored): no branch around
                // the loads, so that the RPT rows' loads issue together.
                let n = min(base + r * RPT + j, p.n - 1u);
                acc[j] += block_dot(xb.v, xb.s, n * p.blocks + b);
            }
        }
    } else {
        let n = base + r * RPT;
        if n < p.n {
            for (var b = lane; b < p.blocks; b += TPR) {
                let w = block_weights(n * p.blocks + b);
                for (var i = 0u; i < MROWS; i++) {
                    if m0 + i < p.m {
                        let xb = x_block(m0 + i, b);
                        ss[i] += xb.ss;
                        var s = 0.0;
                        for (var j = 0u; j < 8u; j++) { s += dot(w[j], xb.v[j]); }
                        acc[i * RPT] += s;
                    }
                }
            }
        }
    }
    // Sums over groups of SGL neighbouring lanes by subgroup shuffles (the generated
    // ROW_SHUFFLE block; SGL = 1 and no block where the adapter lacks subgroups), then a tree
    // in workgroup memory over the TPR / SGL group sums: no barrier at all when a row's lanes
    // fit in one subgroup.
//@ROW_SHUFFLE
    for (var i = 0u; i < MROWS; i++) {
        if NORM { squares[i * WG + lid] = ss[i]; }
        for (var j = 0u; j < RPT; j++) {
            partial[(i * ROWS_WG + r * RPT + j) * TPR + lane] = acc[i * RPT + j];
        }
    }
    workgroupBarrier();
    for (var s = TPR / 2u; s >= SGL; s >>= 1u) {
        if lane < s {
            for (var i = 0u; i < MROWS; i++) {
                if NORM { squares[i * WG + lid] += squares[i * WG + lid + s]; }
                for (var j = 0u; j < RPT; j++) {
                    let at = (i * ROWS_WG + r * RPT + j) * TPR + lane;
                    partial[at] += partial[at + s];
                }
            }
        }
        workgroupBarrier();
    }
    // Output o of the workgroup: row m0 + o / ROWS_WG of x, row base + o % ROWS_WG of W.
    for (var o = lid; o < MROWS * ROWS_WG; o += WG) {
        let i = o / ROWS_WG;
        let m = m0 + i;
        let local = o % ROWS_WG;
        let n = base + local;
        if m >= p.m || n >= p.n { continue; }
        // 1/RMS of row m, from the Σ x² of the lanes of this output's row of W.
        var inv = 1.0;
        if NORM { inv = inverseSqrt(squares[i * WG + (local / RPT) * TPR] / f32(p.k) + p.eps); }
        let v = partial[o * TPR] * inv;
        if GLU {
            if (local & 1u) == 0u { store_glu(m, n, v, partial[(o + 1u) * TPR] * inv); }
        } else if ROPE {
            if (local & 1u) == 0u { rope_store(m, n, v, partial[(o + 1u) * TPR] * inv); }
        } else {
            store(m, n, v);
        }
    }
}

// BM (64 or 32, a define): rows of x a tile covers; four invocations a row.
const BN: u32 = 64u;
const WGS: u32 = BM * 4u;
var<workgroup> xs: array<f32, 32u * BM>; // [32][BM]: x's tile, k-major
var<workgroup> ws: array<f32, 2048>; // [32][BN]: W's tile dequantized, k-major
var<workgroup> row_inv: array<f32, BM>; // NORM: the inverse RMS of the tile's rows

// Dequantizes part `part` (0..3) of block b, 8 weights, into column `col` of ws; zeros
// when `live` is false (rows past N).
fn stage_weights(b: u32, part: u32, col: u32, live: bool) {
    if !live {
        for (var j = 0u; j < 4u; j++) {
            ws[(4u * part + j) * BN + col] = 0.0;
            ws[(16u + 4u * part + j) * BN + col] = 0.0;
        }
        return;
    }
    let sm = scale_min(b);
    if FORMAT == 0u {
        let lo = bytes_i8(qword(b * 8u + 2u * part)) * sm.x;
        let hi = bytes_i8(qword(b * 8u + 2u * part + 1u)) * sm.x;
        for (var j = 0u; j < 4u; j++) {
            ws[(8u * part + j) * BN + col] = lo[j];
            ws[(8u * part + 4u + j) * BN + col] = hi[j];
        }
        return;
    }
    let w = qword(b * 4u + part);
    let offset = select(0.0, 8.0, FORMAT == 1u);
    let lo = nibbles_lo(w, offset) * sm.x + sm.y;
    let hi = nibbles_hi(w, offset) * sm.x + sm.y;
    for (var j = 0u; j < 4u; j++) {
        ws[(4u * part + j) * BN + col] = lo[j];
        ws[(16u + 4u * part + j) * BN + col] = hi[j];
    }
}

@compute @workgroup_size(WGS)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n0 = wid.x * BN;
    let m0 = wid.y * BM;
    let tx = lid % 16u; // columns n0 + 4·tx ..
    let ty = lid / 16u; // rows m0 + 4·ty ..
    var acc: array<f32, 16>;
    for (var i = 0u; i < 16u; i++) { acc[i] = 0.0; }
    let kv = p.k / 4u;
    if NORM {
        // Four invocations a row: Σ x² over a quarter of its vec4s each (ws as scratch).
        let row = lid / 4u;
        var s = 0.0;
        if m0 + row < p.m {
            for (var c = lid % 4u; c < kv; c += 4u) {
                let v = vec4<f32>(x[(m0 + row) * kv + c]);
                s += dot(v, v);
            }
        }
        ws[lid] = s;
        workgroupBarrier();
        if lid % 4u == 0u {
            let total = ws[lid] + ws[lid + 1u] + ws[lid + 2u] + ws[lid + 3u];
            row_inv[row] = inverseSqrt(total / f32(p.k) + p.eps);
        }
        workgroupBarrier();
    }
    for (var b = 0u; b < p.blocks; b++) {
        // x's tile: BM rows × 8 vec4s.
        for (var i = lid; i < BM * 8u; i += WGS) {
            let row = i / 8u;
            let c = i % 8u;
            var v = vec4<f32>(0.0);
            if m0 + row < p.m {
                v = xval(m0 + row, b * 8u + c);
                if NORM { v *= row_inv[row]; }
            }
            xs[(4u * c) * BM + row] = v.x;
            xs[(4u * c + 1u) * BM + row] = v.y;
            xs[(4u * c + 2u) * BM + row] = v.z;
            xs[(4u * c + 3u) * BM + row] = v.w;
        }
        // W's tile: four invocations per row, 8 weights each.
        for (var row = lid / 4u; row < BN; row += WGS / 4u) {
            stage_weights((n0 + row) * p.blocks + b, lid % 4u, row, n0 + row < p.n);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 32u; kk++) {
            let a = vec4<f32>(xs[kk * BM + 4u * ty], xs[kk * BM + 4u * ty + 1u],
                              xs[kk * BM + 4u * ty + 2u], xs[kk * BM + 4u * ty + 3u]);
            let w = vec4<f32>(ws[kk * BN + 4u * tx], ws[kk * BN + 4u * tx + 1u],
                              ws[kk * BN + 4u * tx + 2u], ws[kk * BN + 4u * tx + 3u]);
            for (var i = 0u; i < 4u; i++) {
                acc[4u * i] += a[i] * w.x;
                acc[4u * i + 1u] += a[i] * w.y;
                acc[4u * i + 2u] += a[i] * w.z;
                acc[4u * i + 3u] += a[i] * w.w;
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i++) {
        let m = m0 + 4u * ty + i;
        if m >= p.m { break; }
        for (var j = 0u; j < 4u; j++) {
            let n = n0 + 4u * tx + j;
            if n >= p.n { break; }
            if GLU {
                if (j & 1u) == 0u { store_glu(m, n, acc[4u * i + j], acc[4u * i + j + 1u]); }
            } else if ROPE {
                if (j & 1u) == 0u { rope_store(m, n, acc[4u * i + j], acc[4u * i + j + 1u]); }
            } else {
                store(m, n, acc[4u * i + j]);
            }
        }
    }
}

// The weight at column c of block b.
fn weight(b: u32, c: u32) -> f32 {
    let sm = scale_min(b);
    if FORMAT == 0u {
        let w = qword(b * 8u + c / 4u);
        return sm.x * f32(bitcast<i32>(w << (24u - (c % 4u) * 8u)) >> 24u);
    }
    let w = qword(b * 4u + (c % 16u) / 4u);
    let q = f32((w >> ((c % 4u) * 8u + (c / 16u) * 4u)) & 15u);
    if FORMAT == 1u { return sm.x * (q - 8.0); }
    return q * sm.x + sm.y;
}

// out[t, c] = W[ids[t], c] for p.m ids, rows of p.k; an id ≥ p.n gives zeros.
@compute @workgroup_size(WG)
fn gather(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * WG + lid;
    if i >= p.m * p.k { return; }
    let id = ids[i / p.k];
    let c = i % p.k;
    var v = 0.0;
    if id < p.n { v = weight(id * p.blocks + c / 32u, c % 32u); }
    y[i] = T(v);
}

//@COOP
