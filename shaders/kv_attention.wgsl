// Causal attention of queries against a KV cache, with grouped-query heads (Ainslie et al.,
// "GQA", 2023) and the keys split across workgroups (flash-decoding: Dao et al., 2023):
//
//   out[t, h] = softmax(q[t, h]·K[0..=pos0+t, h/G]ᵀ · scale) · V[0..=pos0+t, h/G]
//
// q [T, nh, dh]; k_cache, v_cache [capacity, nkv, dh]; G = nh / nkv query heads share a KV
// head. A workgroup takes one token t, one KV head g (its G query heads, so each key and
// value row is read once for all of them) and one span of `chunk` keys, walked in tiles of
// TILE keys with the online softmax (Milakov & Gimelshein, 2018): a running maximum m,
// denominator l and unnormalised output per head. Query t sees keys 0..=pos0 + t.
//
// partial: with SPLIT, writes (m, l, output) per (t, head, span) to `part`; merge rescales
//   the spans to their common maximum and normalises. Without SPLIT (one span) partial
//   writes out directly.
//
// Invocation i owns dimensions i, i + WG, … (DPT of them) of every head; while scoring, it
// owns key j0 + i of the tile. Masked and absent keys score −1e30 and weigh exactly 0.
//
// Defines: T, WG (= TILE), G, DPT (dims per invocation: ⌈dh / WG⌉), SPLIT.

struct Params {
    tokens: u32, nh: u32, nkv: u32, dh: u32,
    pos0: u32, splits: u32, chunk: u32, scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<T>;
@group(0) @binding(2) var<storage, read> k_cache: array<T>;
@group(0) @binding(3) var<storage, read> v_cache: array<T>;
@group(0) @binding(4) var<storage, read_write> out: array<T>;
@group(0) @binding(5) var<storage, read_write> part: array<f32>;

const TILE: u32 = WG;
const DPAD: u32 = DPT * WG;
const MASKED: f32 = -1e30;

// Query heads in quads: one reduction over the workgroup serves four heads' maxima (or sums)
// at once, so a tile costs two reductions per four heads, not two per head.
const HQ: u32 = (G + 3u) / 4u;

var<workgroup> qs: array<f32, G * DPAD>;
var<workgroup> scores: array<f32, G * TILE>;
var<workgroup> red: array<vec4<f32>, WG>;
// The merge's single lanes.
var<workgroup> red1: array<f32, WG>;

fn reduce_max(v: vec4<f32>, lid: u32) -> vec4<f32> {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s { red[lid] = max(red[lid], red[lid + s]); }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

fn reduce_sum(v: vec4<f32>, lid: u32) -> vec4<f32> {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s { red[lid] += red[lid + s]; }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier();
    return r;
}

// Index of partial record (t, head, span): m, l, then DPAD output values.
fn record(t: u32, head: u32, span: u32) -> u32 {
    return ((t * p.nh + head) * p.splits + span) * (DPAD + 2u);
}

@compute @workgroup_size(WG)
fn partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let span = wid.x;
    let g = wid.y;
    let t = wid.z;
    let visible = p.pos0 + t + 1u;
    let start = span * p.chunk;
    let end = min(start + p.chunk, visible);

    for (var h = 0u; h < G; h++) {
        for (var e = 0u; e < DPT; e++) {
            let d = lid + e * WG;
            var v = 0.0;
            if d < p.dh { v = f32(q[(t * p.nh + g * G + h) * p.dh + d]) * p.scale; }
            qs[h * DPAD + d] = v;
        }
    }
    var m: array<f32, G>;
    var l: array<f32, G>;
    var acc: array<f32, G * DPT>;
    for (var h = 0u; h < G; h++) {
        m[h] = MASKED;
        l[h] = 0.0;
        for (var e = 0u; e < DPT; e++) { acc[h * DPT + e] = 0.0; }
    }
    workgroupBarrier();

    for (var j0 = start; j0 < end; j0 += TILE) {
        // Scores of this tile: invocation lid takes key j0 + lid for all G heads.
        let j = j0 + lid;
        var s: array<f32, G>;
        for (var h = 0u; h < G; h++) { s[h] = 0.0; }
        if j < end {
            // Four loads in flight per step: a lone workgroup per span cannot hide one load's
            // latency behind other warps, so each step issues four before using any.
            let row = (j * p.nkv + g) * p.dh;
            var d = 0u;
            for (; d + 4u <= p.dh; d += 4u) {
                let k = vec4<f32>(f32(k_cache[row + d]), f32(k_cache[row + d + 1u]),
                                  f32(k_cache[row + d + 2u]), f32(k_cache[row + d + 3u]));
                for (var h = 0u; h < G; h++) {
                    let q = h * DPAD + d;
                    s[h] += dot(vec4<f32>(qs[q], qs[q + 1u], qs[q + 2u], qs[q + 3u]), k);
                }
            }
            for (; d < p.dh; d++) {
                let kd = f32(k_cache[row + d]);
                for (var h = 0u; h < G; h++) { s[h] += qs[h * DPAD + d] * kd; }
            }
        }
        for (var quad = 0u; quad < HQ; quad++) {
            // Lane c holds head 4·quad + c; lanes past G stay masked and weigh 0.
            var score = vec4<f32>(MASKED);
            var m_old = vec4<f32>(MASKED);
            for (var c = 0u; c < 4u; c++) {
                let h = 4u * quad + c;
                if h < G {
                    m_old[c] = m[h];
                    if j < end { score[c] = s[h]; }
                }
            }
            let m_new = max(m_old, reduce_max(score, lid));
            let weight = select(vec4<f32>(0.0), exp(score - m_new), score > vec4<f32>(MASKED));
            let rescale = exp(m_old - m_new);
            let total = reduce_sum(weight, lid);
            for (var c = 0u; c < 4u; c++) {
                let h = 4u * quad + c;
                if h < G {
                    scores[h * TILE + lid] = weight[c];
                    l[h] = l[h] * rescale[c] + total[c];
                    m[h] = m_new[c];
                    for (var e = 0u; e < DPT; e++) { acc[h * DPT + e] *= rescale[c]; }
                }
            }
        }
        workgroupBarrier();
        // Values: invocation lid takes its dimensions of every key of the tile.
        let n = min(TILE, end - j0);
        let stride = p.nkv * p.dh;
        var jj = 0u;
        for (; jj + 4u <= n; jj += 4u) {
            let row = ((j0 + jj) * p.nkv + g) * p.dh;
            for (var e = 0u; e < DPT; e++) {
                let d = lid + e * WG;
                if d < p.dh {
                    let v = vec4<f32>(f32(v_cache[row + d]), f32(v_cache[row + stride + d]),
                                      f32(v_cache[row + 2u * stride + d]),
                                      f32(v_cache[row + 3u * stride + d]));
                    for (var h = 0u; h < G; h++) {
                        let w = h * TILE + jj;
                        acc[h * DPT + e] += dot(vec4<f32>(scores[w], scores[w + 1u], scores[w + 2u],
                                                          scores[w + 3u]), v);
                    }
                }
            }
        }
        for (; jj < n; jj++) {
            let row = ((j0 + jj) * p.nkv + g) * p.dh;
            for (var e = 0u; e < DPT; e++) {
                let d = lid + e * WG;
                if d < p.dh {
                    let vd = f32(v_cache[row + d]);
                    for (var h = 0u; h < G; h++) {
                        acc[h * DPT + e] += scores[h * TILE + jj] * vd;
                    }
                }
            }
        }
        workgroupBarrier();
    }

    for (var h = 0u; h < G; h++) {
        let head = g * G + h;
        if SPLIT {
            let r = record(t, head, span);
            if lid == 0u {
                part[r] = m[h];
                part[r + 1u] = l[h];
            }
            for (var e = 0u; e < DPT; e++) {
                part[r + 2u + lid + e * WG] = acc[h * DPT + e];
            }
        } else {
            for (var e = 0u; e < DPT; e++) {
                let d = lid + e * WG;
                if d < p.dh { out[(t * p.nh + head) * p.dh + d] = T(acc[h * DPT + e] / l[h]); }
            }
        }
    }
}

fn reduce1(v: f32, lid: u32, take_max: bool) -> f32 {
    red1[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s {
            red1[lid] = select(red1[lid] + red1[lid + s], max(red1[lid], red1[lid + s]), take_max);
        }
        workgroupBarrier();
    }
    let r = red1[0];
    workgroupBarrier();
    return r;
}

// One workgroup per (head, token): the spans rescaled to their common maximum. Invocations
// read the spans' maxima and denominators in parallel; the weights of WG spans at a time
// land in workgroup memory, then each invocation sums its dimensions over them.
@compute @workgroup_size(WG)
fn merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.x;
    let t = wid.y;
    // A span with no visible key (l = 0) weighs nothing.
    var m_local = MASKED;
    for (var s = lid; s < p.splits; s += WG) {
        let r = record(t, head, s);
        if part[r + 1u] > 0.0 { m_local = max(m_local, part[r]); }
    }
    let m = reduce1(m_local, lid, true);
    var l = 0.0;
    var acc: array<f32, DPT>;
    for (var e = 0u; e < DPT; e++) { acc[e] = 0.0; }
    for (var s0 = 0u; s0 < p.splits; s0 += WG) {
        var w = 0.0;
        if s0 + lid < p.splits {
            let r = record(t, head, s0 + lid);
            w = select(0.0, exp(part[r] - m), part[r + 1u] > 0.0);
            l += w * part[r + 1u];
        }
        red1[lid] = w;
        workgroupBarrier();
        for (var s = s0; s < min(s0 + WG, p.splits); s++) {
            let ws = red1[s - s0];
            let r = record(t, head, s) + 2u + lid;
            for (var e = 0u; e < DPT; e++) { acc[e] += ws * part[r + e * WG]; }
        }
        workgroupBarrier();
    }
    l = reduce1(l, lid, false);
    for (var e = 0u; e < DPT; e++) {
        let d = lid + e * WG;
        if d < p.dh { out[(t * p.nh + head) * p.dh + d] = T(acc[e] / l); }
    }
}
