// A decoder layer's attention block for one token, in one dispatch: RMSNorm, the head's Q, K
// and V rows, RoPE, the KV-cache append, attention over the cache, and the head's share of the
// O projection. The decode step's other four dispatches of this block (the Q/K/V product,
// the attention, the O projection and the dependency waits between them) are what bounds
// a small model's decode on a large GPU, not its bytes (benches/NOTES.md).
//
// One workgroup per query head h (G = nh / nkv heads share KV head g = h / G), the new token
// at position pos, x = row 0 of the residual stream `resid` [1 + nh, H]:
//
//   xn = RMSNorm(x)·γ                                  (Zhang & Sennrich, 2019)
//   q = RoPE(xn·W_q[h]ᵀ)·scale, k = RoPE(xn·W_k[g]ᵀ), v = xn·W_v[g]ᵀ   (rows of W_qkv)
//   K[pos, g] = k, V[pos, g] = v                       (the first head of the group writes)
//   o = softmax(q·K[0..=pos, g]ᵀ)·V[0..=pos, g]        (Vaswani et al., 2017; GQA)
//   resid[1 + h] = o·W_o[:, h·dh .. (h + 1)·dh]ᵀ       (the head's partial O product)
//
// The partial products stay pending in rows 1..=nh of the stream: the next products add them
// as they read it (shaders/qmatmul.wgsl, XPARTS and YPARTS), so no dispatch sums them. Every
// head's K and V for the new token are computed by each of its G workgroups (G × spans in
// `partial`; each its own copy in workgroup memory, rounded to T as the cache holds it): no
// workgroup reads a cache row another writes in this dispatch.
//
// Past MAXKEYS keys one workgroup per head is too few and its scores do not fit workgroup
// memory: `partial` runs a workgroup per (query head, span of `span` keys), each computing
// the head's Q (and the group's K and V) and its span's softmax statistics and unnormalised
// output (m, l, o: flash-decoding, Dao et al., 2023); `merge_o` rescales the spans to their
// common maximum, normalises, and writes the head's O share as `main` does. Two dispatches
// instead of the unfused four (Q/K/V, attention, its merge, the O projection).
//
// A lone workgroup per head hides no latency behind other warps, so, as in kv_attention.wgsl,
// the weights' loads of each phase are issued together into registers before any is used
// (trip counts fixed at compile time: H, DH are defines).
//
// Defines: T, WG (invocations), H (hidden width, a multiple of 32), DH (head width, a multiple
// of 32), G, MAXKEYS (the longest context `main` takes, the longest span, the most spans; a
// multiple of WG), TPR (lanes a row of W_qkv), wq_FORMAT and wo_FORMAT (the two matrices'
// formats), the //@WQ and //@WO blocks (shaders/include/quant_blocks.wgsl with prefixes wq_
// and wo_), the //@REDUCE block (shaders/include/reduce.wgsl).

struct Params {
    nh: u32, nkv: u32, pos: u32, eps: f32,
    scale: f32, span: u32, splits: u32, pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> resid: array<vec4<T>>;
@group(0) @binding(2) var<storage, read> gamma: array<vec4<T>>;
@group(0) @binding(3) var<storage, read> wq_quants: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> wq_scales: array<u32>;
@group(0) @binding(5) var<storage, read> wo_quants: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read> wo_scales: array<u32>;
@group(0) @binding(7) var<storage, read> rope_table: array<vec2<f32>>;
@group(0) @binding(8) var<storage, read_write> k_cache: array<vec4<T>>;
@group(0) @binding(9) var<storage, read_write> v_cache: array<vec4<T>>;
// The spans' records of a split context (partial writes, merge_o reads).
@group(0) @binding(10) var<storage, read_write> part: array<f32>;

//@WQ
//@WO

const H4: u32 = H / 4u;
// Blocks of 32 in a row of W_qkv (K = H) and in a head's columns of W_o.
const HB: u32 = H / 32u;
const NB: u32 = DH / 32u;
const DH4: u32 = DH / 4u;
// Rows of W_qkv a workgroup takes (its head's Q, its group's K and V), rows a pass covers
// (TPR lanes each), passes (RPT rows an invocation), blocks a lane takes in a row.
const QKV_ROWS: u32 = 3u * DH;
const RR: u32 = WG / TPR;
const RPT: u32 = (QKV_ROWS + RR - 1u) / RR;
const BPL: u32 = (HB + TPR - 1u) / TPR;
// Rows an invocation sums from their lanes.
const RSUM: u32 = (QKV_ROWS + WG - 1u) / WG;
// A lane's blocks loaded at once: at most 16 blocks' words an invocation in registers.
const ECH: u32 = min(BPL, max(1u, 16u / RPT));
// Keys an invocation scores; value lanes (key lanes KL, each a quad of dimensions).
const KPT: u32 = MAXKEYS / WG;
const KL: u32 = WG / DH4;
const KPL: u32 = (MAXKEYS + KL - 1u) / KL;
// Value rows loaded at once.
const VCHUNK: u32 = 8u;
const MASKED: f32 = -1e30;

var<workgroup> xn: array<vec4<f32>, H4>;
// `red1` and `reduce1` (shaders/include/reduce.wgsl); red1 also stages RoPE's output.
//@REDUCE
// The Q/K/V rows' lane sums [row][lane], then (first QKV_ROWS) the rows themselves.
var<workgroup> rowpart: array<f32, QKV_ROWS * TPR>;
var<workgroup> qv: array<vec4<f32>, DH4>;
var<workgroup> knew: array<vec4<f32>, DH4>;
var<workgroup> vnew: array<vec4<f32>, DH4>;
var<workgroup> scores: array<f32, MAXKEYS>;
var<workgroup> vred: array<vec4<f32>, WG>;
var<workgroup> os: array<vec4<f32>, DH4>;

// Row r (< QKV_ROWS) of this workgroup's Q/K/V rows: its row of W_qkv [(nh + 2·nkv)·DH, H].
fn qkv_row(r: u32, head: u32, g: u32) -> u32 {
    if r < DH { return head * DH + r; }
    if r < 2u * DH { return p.nh * DH + g * DH + r - DH; }
    return (p.nh + p.nkv) * DH + g * DH + r - 2u * DH;
}

// ECH blocks of each of this invocation's RPT rows of W_qkv from a lane's block e0 on, the
// chunk's loads issued together (a row past QKV_ROWS or a block past a row's end reads the
// last one: never used).
struct QkvLoads {
    lo: array<vec4<u32>, RPT * ECH>,
    hi: array<vec4<u32>, RPT * ECH>,
    sm: array<vec2<f32>, RPT * ECH>,
}
fn qkv_loads(e0: u32, head: u32, g: u32, r0: u32, lane: u32) -> QkvLoads {
    var l: QkvLoads;
    for (var j = 0u; j < RPT; j++) {
        let n = qkv_row(min(r0 + j * RR, QKV_ROWS - 1u), head, g);
        for (var e = 0u; e < ECH; e++) {
            let blk = n * HB + min(lane + (e0 + e) * TPR, HB - 1u);
            l.lo[j * ECH + e] = wq_load(blk, 0u);
            if wq_QV == 2u { l.hi[j * ECH + e] = wq_load(blk, 1u); }
            l.sm[j * ECH + e] = wq_scale_min(blk);
        }
    }
    return l;
}

// The NB blocks of rows 4·q4..4·q4 + 3 of W_o at the head's columns.
struct OLoads {
    lo: array<vec4<u32>, 4u * NB>,
    hi: array<vec4<u32>, 4u * NB>,
    sm: array<vec2<f32>, 4u * NB>,
}
fn o_loads(q4: u32, head: u32) -> OLoads {
    var l: OLoads;
    for (var r = 0u; r < 4u; r++) {
        for (var bb = 0u; bb < NB; bb++) {
            let blk = (4u * q4 + r) * HB + head * NB + bb;
            l.lo[r * NB + bb] = wo_load(blk, 0u);
            if wo_QV == 2u { l.hi[r * NB + bb] = wo_load(blk, 1u); }
            l.sm[r * NB + bb] = wo_scale_min(blk);
        }
    }
    return l;
}

// A block of 32 values of a vec4 array in workgroup memory, and their sum.
fn xn_block(b: u32) -> array<vec4<f32>, 8> {
    var v: array<vec4<f32>, 8>;
    for (var j = 0u; j < 8u; j++) { v[j] = xn[8u * b + j]; }
    return v;
}
fn os_block(b: u32) -> array<vec4<f32>, 8> {
    var v: array<vec4<f32>, 8>;
    for (var j = 0u; j < 8u; j++) { v[j] = os[8u * b + j]; }
    return v;
}
fn block_sum(v: array<vec4<f32>, 8>) -> f32 {
    var s = vec4<f32>(0.0);
    for (var j = 0u; j < 8u; j++) { s += v[j]; }
    return s.x + s.y + s.z + s.w;
}

// The block's first phases for query head `head` (KV head g): the stream's row 0 normalised
// into xn, its Q/K/V rows, RoPE, then q, the new k and v in workgroup memory; `append`: this
// workgroup writes k and v to the cache at pos.
fn project(head: u32, g: u32, lid: u32, append: bool) {
    let lane = lid % TPR;
    let r0 = lid / TPR;

    // The first of this invocation's Q/K/V weights, issued before the norm.
    var loads = qkv_loads(0u, head, g, r0, lane);
    // RMSNorm of the stream's row 0.
    var ss = 0.0;
    for (var c = lid; c < H4; c += WG) {
        let v = vec4<f32>(resid[c]);
        ss += dot(v, v);
        xn[c] = v * vec4<f32>(gamma[c]);
    }
    let inv = inverseSqrt(reduce1(ss, lid, false) / f32(H) + p.eps);
    for (var c = lid; c < H4; c += WG) { xn[c] *= inv; }
    workgroupBarrier();

    // The Q/K/V rows: TPR lanes a row, ECH of a lane's blocks loaded at a time, the lanes'
    // sums met in workgroup memory.
    var acc: array<f32, RPT>;
    for (var j = 0u; j < RPT; j++) { acc[j] = 0.0; }
    for (var e0 = 0u; e0 < BPL; e0 += ECH) {
        if e0 > 0u { loads = qkv_loads(e0, head, g, r0, lane); }
        for (var e = 0u; e < ECH; e++) {
            let b = lane + (e0 + e) * TPR;
            if e0 + e < BPL && b < HB {
                let xb = xn_block(b);
                let sx = block_sum(xb);
                for (var j = 0u; j < RPT; j++) {
                    let i = j * ECH + e;
                    acc[j] += wq_dot_loaded(loads.lo[i], loads.hi[i], loads.sm[i], xb, sx);
                }
            }
        }
    }
    for (var j = 0u; j < RPT; j++) {
        let r = r0 + j * RR;
        if r < QKV_ROWS { rowpart[r * TPR + lane] = acc[j]; }
    }
    workgroupBarrier();
    // Row lid + i·WG's lanes summed (rows past the workgroup where 3·DH > WG).
    var rows: array<f32, RSUM>;
    for (var i = 0u; i < RSUM; i++) {
        rows[i] = 0.0;
        let r = lid + i * WG;
        if r < QKV_ROWS {
            for (var l = 0u; l < TPR; l++) { rows[i] += rowpart[r * TPR + l]; }
        }
    }
    workgroupBarrier();
    for (var i = 0u; i < RSUM; i++) {
        let r = lid + i * WG;
        if r < QKV_ROWS { rowpart[r] = rows[i]; }
    }
    workgroupBarrier();

    // RoPE on adjacent pairs of Q and K at position pos (the table's f64 angles); Q scaled.
    // Invocation i < DH/2 rotates Q's pair i, DH/2 ≤ i < DH K's.
    if lid < DH {
        let d = (lid % (DH / 2u)) * 2u;
        let r = select(d, DH + d, lid >= DH / 2u);
        let cs = rope_table[p.pos * (DH / 2u) + d / 2u];
        let x0 = rowpart[r];
        let x1 = rowpart[r + 1u];
        let s = select(1.0, p.scale, lid < DH / 2u);
        red1[r] = (x0 * cs.x - x1 * cs.y) * s;
        red1[r + 1u] = (x0 * cs.y + x1 * cs.x) * s;
    }
    workgroupBarrier();
    // Q, K and V as vec4s (K and V rounded to T, as the cache holds them).
    if lid < DH4 {
        let at = lid * 4u;
        qv[lid] = vec4<f32>(red1[at], red1[at + 1u], red1[at + 2u], red1[at + 3u]);
        let k = vec4<T>(vec4<f32>(red1[DH + at], red1[DH + at + 1u], red1[DH + at + 2u], red1[DH + at + 3u]));
        let v = vec4<T>(vec4<f32>(rowpart[2u * DH + at], rowpart[2u * DH + at + 1u],
                                  rowpart[2u * DH + at + 2u], rowpart[2u * DH + at + 3u]));
        knew[lid] = vec4<f32>(k);
        vnew[lid] = vec4<f32>(v);
        if append {
            let c = (p.pos * p.nkv + g) * DH4 + lid;
            k_cache[c] = k;
            v_cache[c] = v;
        }
    }
    workgroupBarrier();
}

// Scores of keys start..end (at most MAXKEYS; the cache's rows before pos, the new key at
// pos) into `scores` as weights exp(s − m): returns (m, l), l = Σ weights.
fn attend_scores(g: u32, lid: u32, start: u32, end: u32) -> vec2<f32> {
    var m_local = MASKED;
    for (var u = 0u; u < KPT; u++) {
        let i = lid + u * WG;
        let j = start + i;
        var s = MASKED;
        if j < min(end, p.pos) {
            var kr: array<vec4<f32>, DH4>;
            let row = (j * p.nkv + g) * DH4;
            for (var c = 0u; c < DH4; c++) { kr[c] = vec4<f32>(k_cache[row + c]); }
            s = 0.0;
            for (var c = 0u; c < DH4; c++) { s += dot(qv[c], kr[c]); }
        } else if j == p.pos && j < end {
            s = 0.0;
            for (var c = 0u; c < DH4; c++) { s += dot(qv[c], knew[c]); }
        }
        scores[i] = s;
        m_local = max(m_local, s);
    }
    let m = reduce1(m_local, lid, true);
    var l_local = 0.0;
    for (var u = 0u; u < KPT; u++) {
        let i = lid + u * WG;
        let w = select(0.0, exp(scores[i] - m), start + i < end);
        scores[i] = w;
        l_local += w;
    }
    return vec2<f32>(m, reduce1(l_local, lid, false));
}

// Σ weight·value over keys start..end into `os`, times `norm`: invocation (c, kl) sums quad
// c of keys kl, kl + KL, …, VCHUNK rows' loads at once (invocations past KL·DH4, where DH4
// does not divide WG, sum nothing).
fn attend_values(g: u32, lid: u32, start: u32, end: u32, norm: f32) {
    let c = lid % DH4;
    let kl = lid / DH4;
    let n = end - start;
    var o = vec4<f32>(0.0);
    for (var u0 = 0u; u0 < KPL; u0 += VCHUNK) {
        if kl >= KL || kl + u0 * KL >= n { break; }
        var vr: array<vec4<f32>, VCHUNK>;
        for (var u = 0u; u < VCHUNK; u++) {
            let j = start + kl + (u0 + u) * KL;
            vr[u] = vec4<f32>(0.0);
            if j < min(end, p.pos) { vr[u] = vec4<f32>(v_cache[(j * p.nkv + g) * DH4 + c]); }
            if j == p.pos { vr[u] = vnew[c]; }
        }
        for (var u = 0u; u < VCHUNK; u++) {
            let i = kl + (u0 + u) * KL;
            if i < n { o += scores[i] * vr[u]; }
        }
    }
    vred[lid] = o;
    workgroupBarrier();
    if lid < DH4 {
        var total = vec4<f32>(0.0);
        for (var r = 0u; r < KL; r++) { total += vred[r * DH4 + lid]; }
        os[lid] = total * norm;
    }
    workgroupBarrier();
}

// The head's share of the O projection from `os`: invocation i takes rows 4i..4i+3 of W_o
// [H, H] (then 4(i + WG).. where H is wider), its NB blocks at columns h·DH.., into row
// 1 + head of the stream (`ol`: the first rows' loads, issued earlier).
fn o_share(head: u32, lid: u32, first: OLoads) {
    var ol = first;
    for (var q4 = lid; q4 < H4; q4 += WG) {
        if q4 != lid { ol = o_loads(q4, head); }
        var out = vec4<f32>(0.0);
        for (var bb = 0u; bb < NB; bb++) {
            let ob = os_block(bb);
            let sx = block_sum(ob);
            for (var r = 0u; r < 4u; r++) {
                let i = r * NB + bb;
                out[r] += wo_dot_loaded(ol.lo[i], ol.hi[i], ol.sm[i], ob, sx);
            }
        }
        resid[(1u + head) * H4 + q4] = vec4<T>(out);
    }
}

// A context of at most MAXKEYS keys: the whole block, one workgroup per query head.
@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.x;
    let g = head / G;
    // The group's first head appends K and V to the cache.
    project(head, g, lid, head % G == 0u);
    let ml = attend_scores(g, lid, 0u, p.pos + 1u);
    // This invocation's first rows of W_o, loaded while the values are summed (not sooner:
    // with heads of 128 they are 160 words of registers).
    let ol = o_loads(min(lid, H4 - 1u), head);
    attend_values(g, lid, 0u, p.pos + 1u, 1.0 / ml.y);
    o_share(head, lid, ol);
}

// Index of span s's record for `head` in `part`: m, l, then DH unnormalised output values.
fn record(head: u32, s: u32) -> u32 {
    return (head * p.splits + s) * (DH + 2u);
}

// A longer context, first pass: workgroup (head, s) attends over keys s·span.. (span ≤
// MAXKEYS) and writes its record (flash-decoding: Dao et al., 2023). Every span's workgroups
// compute the head's Q (and K, V: the same fixed loops); the span holding pos appends.
@compute @workgroup_size(WG)
fn partial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.x;
    let s = wid.y;
    let g = head / G;
    let start = s * p.span;
    let end = min(start + p.span, p.pos + 1u);
    project(head, g, lid, head % G == 0u && p.pos < end);
    let ml = attend_scores(g, lid, start, end);
    attend_values(g, lid, start, end, 1.0);
    let rec = record(head, s);
    if lid == 0u {
        part[rec] = ml.x;
        part[rec + 1u] = ml.y;
    }
    if lid < DH4 {
        for (var i = 0u; i < 4u; i++) { part[rec + 2u + 4u * lid + i] = os[lid][i]; }
    }
}

// Second pass, one workgroup per query head: the spans rescaled to their common maximum
// (weights in `scores`, splits ≤ MAXKEYS) and normalised into `os`, then the head's share of
// the O projection.
@compute @workgroup_size(WG)
fn merge_o(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.x;
    let ol = o_loads(min(lid, H4 - 1u), head);
    var m_local = MASKED;
    for (var s = lid; s < p.splits; s += WG) { m_local = max(m_local, part[record(head, s)]); }
    let m = reduce1(m_local, lid, true);
    var l_local = 0.0;
    for (var s = lid; s < p.splits; s += WG) {
        let r = record(head, s);
        let w = exp(part[r] - m);
        scores[s] = w;
        l_local += w * part[r + 1u];
    }
    let l = reduce1(l_local, lid, false);
    if lid < DH4 {
        var o = vec4<f32>(0.0);
        for (var s = 0u; s < p.splits; s++) {
            let r = record(head, s) + 2u + 4u * lid;
            o += scores[s] * vec4<f32>(part[r], part[r + 1u], part[r + 2u], part[r + 3u]);
        }
        os[lid] = o / l;
    }
    workgroupBarrier();
    o_share(head, lid, ol);
}
