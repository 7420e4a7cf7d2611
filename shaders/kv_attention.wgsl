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
// A lone workgroup per span cannot hide a load's latency behind other warps, so every loop
// over memory has a trip count fixed at compile time (DH is a define) and issues all its
// loads before it uses any: one memory latency per phase of a tile, not one per row.
// Scores: invocation i owns key j0 + i of the tile; it loads the key's whole row, KCHUNK
// vec4s at a time, or (KLANES = 4: KvLoads::GPU_SHARED_ROWS, no adapter's default until
// measured) four neighbouring invocations load four keys' rows together, each a quarter of
// every row, and meet in workgroup memory: a warp's load then reads 8 rows' pieces of four
// vec4s, not 32 rows' single vec4s. Values (VCHUNK rows loaded at
// once): invocation i owns dimensions 4c..4c+3 (c = i mod DH4) of the keys j0 + kl,
// j0 + kl + KL, … (kl = i / DH4, KL = WG / DH4 key lanes), loaded together; the key lanes'
// sums are added once, after the span. Masked and absent keys score −1e30 and
// weigh exactly 0.
//
// Defines: T, WG (= TILE), G, DH (a multiple of 4; of 16 with KLANES = 4), SPLIT, CHUNK (loads
// issued together), KLANES (1 or 4: lanes a key row's scores take);
// the parameters and bindings 0–4 are shaders/include/kv_attention_io.wgsl, at //@IO; the
// merge's reduction shaders/include/reduce.wgsl, at //@REDUCE.

//@IO
@group(0) @binding(5) var<storage, read_write> part: array<f32>;

const TILE: u32 = WG;
const MASKED: f32 = -1e30;
// Quads of dimensions in a head.
const DH4: u32 = DH / 4u;
// Key rows are loaded KCHUNK vec4s at a time (CHUNK: 16 on GPUs, registers for 64
// dimensions; 4 on CPU drivers, where such arrays spill).
const KCHUNK: u32 = CHUNK;
// With KLANES = 4 (a define: 1 or 4) a key row's quads are spread over KLANES neighbouring
// lanes (a group): QPK quads a lane, KSTEP of them (times KLANES keys) loaded at once,
// KGROUPS groups.
const QPK: u32 = DH4 / KLANES;
// Four lanes a row (the partial sums meet as vec4s), each row's quads split evenly.
const_assert KLANES == 1u || (KLANES == 4u && DH4 % KLANES == 0u);
const KSTEP: u32 = max(1u, CHUNK / KLANES);
const KGROUPS: u32 = WG / KLANES;
// Value phase: key lanes, dimension quads per invocation, keys per lane in a tile.
const KL: u32 = max(1u, WG / DH4);
const QPT: u32 = (DH4 + WG - 1u) / WG;
const KPL: u32 = (TILE + KL - 1u) / KL;
// Value rows loaded at once.
const VCHUNK: u32 = CHUNK;
// Dimensions per invocation in the merge.
const DPT: u32 = (DH + WG - 1u) / WG;

// Query heads in quads: one reduction over the workgroup serves four heads' maxima (or sums)
// at once, so a tile costs two reductions per four heads, not two per head.
const HQ: u32 = (G + 3u) / 4u;

var<workgroup> qs: array<vec4<f32>, G * DH4>;
var<workgroup> scores: array<f32, G * TILE>;
var<workgroup> red: array<vec4<f32>, WG>;
// The merge's single lanes: `red1` and `reduce1` (shaders/include/reduce.wgsl).
//@REDUCE

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

// Index of partial record (t, head, span): m, l, then DH output values.
fn record(t: u32, head: u32, span: u32) -> u32 {
    return ((t * p.nh + head) * p.splits + span) * (DH + 2u);
}

@compute @workgroup_size(WG)
fn partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let span = wid.x;
    let g = wid.y;
    let t = wid.z;
    let visible = p.pos0 + t + 1u;
    let start = span * p.chunk;
    let end = min(start + p.chunk, visible);

    for (var i = lid; i < G * DH4; i += WG) {
        qs[i] = vec4<f32>(q[(t * p.nh + g * G) * DH4 + i]) * p.scale;
    }
    // This invocation's value slots: quads c + e·WG (e < QPT) of key lane kl.
    let c = lid % DH4;
    let kl = lid / DH4;
    // This invocation's key group and lane in it (KLANES > 1).
    let kgrp = lid / KLANES;
    let ksub = lid % KLANES;
    var m: array<f32, G>;
    var l: array<f32, G>;
    var acc: array<vec4<f32>, G * QPT>;
    for (var h = 0u; h < G; h++) {
        m[h] = MASKED;
        l[h] = 0.0;
        for (var e = 0u; e < QPT; e++) { acc[h * QPT + e] = vec4<f32>(0.0); }
    }
    workgroupBarrier();

    let stride = p.nkv * DH4; // vec4s from one key row to the next
    for (var j0 = start; j0 < end; j0 += TILE) {
        // Scores of this tile: invocation lid ends with key j0 + lid's, for all G heads.
        let j = j0 + lid;
        var s: array<f32, G>;
        for (var h = 0u; h < G; h++) { s[h] = 0.0; }
        if KLANES == 1u {
            // The invocation loads its key's whole row.
            if j < end {
                let row = (j * p.nkv + g) * DH4;
                for (var c0 = 0u; c0 < DH4; c0 += KCHUNK) {
                    var kr: array<vec4<f32>, KCHUNK>;
                    for (var u = 0u; u < KCHUNK; u++) {
                        if c0 + u < DH4 { kr[u] = vec4<f32>(k_cache[row + c0 + u]); }
                    }
                    for (var u = 0u; u < KCHUNK; u++) {
                        if c0 + u < DH4 {
                            for (var h = 0u; h < G; h++) {
                                s[h] += dot(qs[h * DH4 + c0 + u], kr[u]);
                            }
                        }
                    }
                }
            }
        } else {
            // Lane ksub of group kgrp takes quads ksub, ksub + KLANES, … of keys
            // j0 + u·KGROUPS + kgrp (u < KLANES): a group's load reads KLANES·16 neighbouring
            // bytes of one key row, so a subgroup's load touches KLANES times fewer cache
            // lines than one row a lane.
            var kpart: array<f32, KLANES * G>;
            for (var i = 0u; i < KLANES * G; i++) { kpart[i] = 0.0; }
            for (var e0 = 0u; e0 < QPK; e0 += KSTEP) {
                var kr: array<vec4<f32>, KLANES * KSTEP>;
                for (var u = 0u; u < KLANES; u++) {
                    let jj = j0 + u * KGROUPS + kgrp;
                    let row = (jj * p.nkv + g) * DH4 + ksub;
                    for (var e = 0u; e < KSTEP; e++) {
                        if jj < end && e0 + e < QPK {
                            kr[u * KSTEP + e] = vec4<f32>(k_cache[row + (e0 + e) * KLANES]);
                        }
                    }
                }
                for (var u = 0u; u < KLANES; u++) {
                    for (var e = 0u; e < KSTEP; e++) {
                        if e0 + e < QPK {
                            let cq = ksub + (e0 + e) * KLANES;
                            for (var h = 0u; h < G; h++) {
                                kpart[u * G + h] += dot(qs[h * DH4 + cq], kr[u * KSTEP + e]);
                            }
                        }
                    }
                }
            }
            // Each invocation stores its four keys' partial sums as one vec4 (a store of one
            // component of a shared vector may rewrite the whole vector: a race); key
            // u·KGROUPS + kg's four sums are component u of its group's four vec4s, so that
            // invocation lid = u·KGROUPS + kg then holds key j0 + lid's score as above.
            let ku = lid / KGROUPS;
            let kg = lid % KGROUPS;
            for (var h = 0u; h < G; h++) {
                red[lid] = vec4<f32>(kpart[h], kpart[G + h], kpart[2u * G + h], kpart[3u * G + h]);
                workgroupBarrier();
                let b = KLANES * kg;
                s[h] = red[b][ku] + red[b + 1u][ku] + red[b + 2u][ku] + red[b + 3u][ku];
                workgroupBarrier();
            }
        }
        for (var quad = 0u; quad < HQ; quad++) {
            // Lane c holds head 4·quad + c; lanes past G stay masked and weigh 0.
            var score = vec4<f32>(MASKED);
            var m_old = vec4<f32>(MASKED);
            for (var c4 = 0u; c4 < 4u; c4++) {
                let h = 4u * quad + c4;
                if h < G {
                    m_old[c4] = m[h];
                    if j < end { score[c4] = s[h]; }
                }
            }
            let m_new = max(m_old, reduce_max(score, lid));
            let weight = select(vec4<f32>(0.0), exp(score - m_new), score > vec4<f32>(MASKED));
            let rescale = exp(m_old - m_new);
            let total = reduce_sum(weight, lid);
            for (var c4 = 0u; c4 < 4u; c4++) {
                let h = 4u * quad + c4;
                if h < G {
                    scores[h * TILE + lid] = weight[c4];
                    l[h] = l[h] * rescale[c4] + total[c4];
                    m[h] = m_new[c4];
                    for (var e = 0u; e < QPT; e++) { acc[h * QPT + e] *= rescale[c4]; }
                }
            }
        }
        workgroupBarrier();
        // Values: this lane's keys of the tile, all loads issued first.
        let n = min(TILE, end - j0);
        if kl < KL {
            for (var e = 0u; e < QPT; e++) {
                let ce = c + e * WG;
                if ce < DH4 {
                    for (var u0 = 0u; u0 < KPL; u0 += VCHUNK) {
                        var vr: array<vec4<f32>, VCHUNK>;
                        for (var u = 0u; u < VCHUNK; u++) {
                            let jj = kl + (u0 + u) * KL;
                            if u0 + u < KPL && jj < n {
                                vr[u] = vec4<f32>(v_cache[((j0 + jj) * p.nkv + g) * DH4 + ce]);
                            }
                        }
                        for (var u = 0u; u < VCHUNK; u++) {
                            let jj = kl + (u0 + u) * KL;
                            if u0 + u < KPL && jj < n {
                                for (var h = 0u; h < G; h++) {
                                    acc[h * QPT + e] += scores[h * TILE + jj] * vr[u];
                                }
                            }
                        }
                    }
                }
            }
        }
        workgroupBarrier();
    }

    // The key lanes' sums, head by head: lane 0 of each quad ends with the total.
    for (var h = 0u; h < G; h++) {
        let head = g * G + h;
        for (var e = 0u; e < QPT; e++) {
            let ce = c + e * WG;
            var total = acc[h * QPT + e];
            if KL > 1u {
                red[lid] = select(vec4<f32>(0.0), total, kl < KL);
                workgroupBarrier();
                if kl == 0u {
                    for (var r = 1u; r < KL; r++) { total += red[r * DH4 + c]; }
                }
                workgroupBarrier();
            }
            if kl == 0u && ce < DH4 {
                if SPLIT {
                    let rec = record(t, head, span);
                    if lid == 0u {
                        part[rec] = m[h];
                        part[rec + 1u] = l[h];
                    }
                    for (var i = 0u; i < 4u; i++) { part[rec + 2u + 4u * ce + i] = total[i]; }
                } else {
                    let o = total / l[h];
                    for (var i = 0u; i < 4u; i++) { out[(t * p.nh + head) * DH + 4u * ce + i] = T(o[i]); }
                }
            }
        }
    }
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
