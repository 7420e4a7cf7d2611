// Reading ggml's blocks of 32 weights (Q8_0, Q4_0, Q4_1, repacked: see
// crates/ridge-kernels/src/quant.rs) from a matrix's quant and scale buffers. A template:
// the launcher replaces `QB_` with a prefix, so that one shader can read two matrices
// (`QB_quants` and `QB_scales` are its bindings, `QB_FORMAT` its format: 0 Q8_0, 1 Q4_0,
// 2 Q4_1); shaders/qmatmul.wgsl takes it with no prefix, at its //@QUANT_BLOCKS line.
//
// Weight of a block with scale d (and minimum m): Q8_0 d·q, Q4_0 d·(q − 8), Q4_1 d·q + m.
// A block's dot product is d·Σ q·x (Q4_0 subtracts 8 from q first, exactly) plus m·Σ x.

fn QB_qword(i: u32) -> u32 {
    return QB_quants[i >> 2u][i & 3u];
}

// The scale d (x) and minimum m (y, 0 but for Q4_1) of block b (counted row-major).
fn QB_scale_min(b: u32) -> vec2<f32> {
    if QB_FORMAT == 2u { return unpack2x16float(QB_scales[b]); }
    let w = unpack2x16float(QB_scales[b >> 1u]);
    return vec2<f32>(select(w.x, w.y, (b & 1u) == 1u), 0.0);
}

// The four signed bytes of w.
fn QB_bytes_i8(w: u32) -> vec4<f32> {
    // Shifting each byte to the top, then arithmetically back, sign-extends it.
    let s = vec4<i32>(bitcast<i32>(w << 24u), bitcast<i32>(w << 16u), bitcast<i32>(w << 8u),
                      bitcast<i32>(w));
    return vec4<f32>(s >> vec4<u32>(24u));
}

// The low (weights 4i..4i+3 of a block) and high (16+4i..) nibbles of quant word i, less
// `offset` (8 for Q4_0, 0 for Q4_1).
fn QB_nibbles_lo(w: u32, offset: f32) -> vec4<f32> {
    let n = vec4<u32>(w, w >> 8u, w >> 16u, w >> 24u) & vec4<u32>(15u);
    return vec4<f32>(n) - offset;
}
fn QB_nibbles_hi(w: u32, offset: f32) -> vec4<f32> {
    let n = vec4<u32>(w >> 4u, w >> 12u, w >> 20u, w >> 28u) & vec4<u32>(15u);
    return vec4<f32>(n) - offset;
}

// Quant vec4 i of block b (i < QB_QV: two for Q8_0's 32 bytes, one for Q4's 16): a block's
// loads, which a caller may issue ahead of their use (QB_dot_loaded).
const QB_QV: u32 = select(1u, 2u, QB_FORMAT == 0u);
fn QB_load(b: u32, i: u32) -> vec4<u32> {
    return QB_quants[QB_QV * b + i];
}

// Σ w·x over one block given its quant vec4s (`hi` unused but for Q8_0) and (d, m), and a
// block of x whose values sum to sx (used by Q4_1 only: its minimum times Σ x, taken once per
// block of x however many rows use it).
fn QB_dot_loaded(lo: vec4<u32>, hi: vec4<u32>, sm: vec2<f32>, xb: array<vec4<f32>, 8>,
                 sx: f32) -> f32 {
    var qx = 0.0;
    if QB_FORMAT == 0u {
        for (var i = 0u; i < 4u; i++) {
            qx += dot(QB_bytes_i8(lo[i]), xb[i]) + dot(QB_bytes_i8(hi[i]), xb[4u + i]);
        }
        return sm.x * qx;
    }
    let offset = select(0.0, 8.0, QB_FORMAT == 1u);
    for (var i = 0u; i < 4u; i++) {
        qx += dot(QB_nibbles_lo(lo[i], offset), xb[i]) + dot(QB_nibbles_hi(lo[i], offset), xb[4u + i]);
    }
    return sm.x * qx + sm.y * sx;
}

// Σ w·x over block b of W (counted row-major) and a block of x summing to sx.
fn QB_block_dot(xb: array<vec4<f32>, 8>, sx: f32, b: u32) -> f32 {
    return QB_dot_loaded(QB_load(b, 0u), QB_load(b, QB_QV - 1u), QB_scale_min(b), xb, sx);
}
