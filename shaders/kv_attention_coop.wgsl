// Causal attention of a prompt's queries against a KV cache on cooperative matrices (tensor
// cores), f16 storage: the prefill form of shaders/kv_attention.wgsl (same parameters and
// bindings, shaders/include/kv_attention_io.wgsl at //@IO, and the same result),
//
//   out[t, h] = softmax(q[t, h]·K[0..=pos0+t, h/G]ᵀ · scale) · V[0..=pos0+t, h/G],
//
// as flash attention (Dao et al., "FlashAttention", 2022) with the online softmax (Milakov &
// Gimelshein, 2018). A workgroup takes BQ = 64 tokens of one query head, four subgroups of 32
// invocations with 16 tokens each, and walks the keys its last token sees in tiles of BK = 32:
//   1. K's and V's tile rows (f16, zero past the context), read into registers while the
//      previous tile was computed, are staged in workgroup memory;
//   2. each subgroup multiplies its Q fragments (16 × DH, held in registers from the start)
//      by the K tile: S (16 × 32, f32), stored to its scratch, scaled by scale·log2(e) as it
//      is read;
//   3. two lanes a row take 16 scores each: the causal mask, the row's running maximum (the
//      two lanes meet through workgroup memory), P = exp2(S − m) rounded to f16, their share
//      of the row sum, the factor exp2(m_old − m) that rescales the row's output;
//   4. P·V one 16-column slice of V at a time into a fresh accumulator, stored to the
//      scratch, and added to the output the lanes hold in registers (lane l: column l mod 16
//      of rows l / 16 + 2i) after rescaling it.
// Scores are in base 2 (exp2 only); masked scores (−1e30) weigh exactly 0, and a row that has
// seen no visible key yet keeps l = 0 and o = 0. Rows past the prompt compute and are not
// written.
//
// Key split (SPLIT; flash-decoding's, Dao et al. 2023, applied to a prompt): a causal
// prompt's last query tile walks every key while its first walks one tile, so without a
// split the longest workgroup sets the time. The grid's z is the span of p.chunk keys (a
// multiple of BK) a workgroup walks; it writes each row's (m in natural units, l, the
// unnormalised output) to `part` in kv_attention.wgsl's record layout, and that shader's
// merge pass combines the spans (a span no key of a row falls in has l = 0 and weighs
// nothing). Without SPLIT p.chunk covers the context and the rows are written normalised.
//
// Numerics against kv_attention.wgsl (f32 from f16 inputs): P is rounded to f16 for P·V
// (u₁₆ = 2⁻¹¹ relative a weight; the row sum takes the unrounded values); Q, K and V enter
// as stored, products are exact in f32 and accumulate in f32.
//
// Defines: T (f16), DH (a multiple of 16), SPLIT; the //@QFRAG, //@SCORES and //@PV blocks are
// generated for DH / 16 fragments (crates/ridge-kernels/src/kv_attention.rs).

//@IO
@group(0) @binding(5) var<storage, read_write> part: array<f32>;

const BQ: u32 = 64u;
const BK: u32 = 32u;
const DH4: u32 = DH / 4u;
const KS: u32 = DH + 8u; // a staged K, V or Q row: DH halves and 8 of padding
const PS: u32 = BK + 8u; // a staged row of P
const VOFF: u32 = BK * KS; // V's tile after K's
const MASKED: f32 = -1e30;
const LOG2E: f32 = 1.4426950408889634;
const LN2: f32 = 0.6931471805599453;

// A (token, head, span)'s record in `part`: m, l, then the DH outputs (kv_attention.wgsl's).
fn record(t: u32, head: u32, span: u32) -> u32 {
    return ((t * p.nh + head) * p.splits + span) * (DH + 2u);
}

// K's tile then V's; before the walk, the workgroup's 64 rows of Q (BQ·KS = 2·BK·KS).
var<workgroup> kv: array<f16, 2u * BK * KS>;
var<workgroup> sc: array<f32, 4u * 16u * BK>; // per subgroup: S (16 × BK), then P·V slices
var<workgroup> ps: array<f16, 4u * 16u * PS>; // per subgroup: P (16 × BK)
var<workgroup> red: array<f32, 128>; // the two lanes of a row meet here
var<workgroup> alpha: array<f32, 64>; // per row: this tile's rescaling of the output

// One tile's K and V rows as loaded (each invocation's KVP vec4s of each), staged later.
const KVP: u32 = BK * DH4 / 128u;
struct KvRaw {
    k: array<vec4<T>, KVP>,
    v: array<vec4<T>, KVP>,
}

// Rows j0.. of both caches for KV head g: zero past the context.
fn load_kv(j0: u32, g: u32, ctx_len: u32, lid: u32) -> KvRaw {
    var r: KvRaw;
    for (var e = 0u; e < KVP; e++) {
        let i = lid + 128u * e;
        let key = i / DH4;
        r.k[e] = vec4<T>(0.0);
        r.v[e] = vec4<T>(0.0);
        if j0 + key < ctx_len {
            let at = ((j0 + key) * p.nkv + g) * DH4 + i % DH4;
            r.k[e] = k_cache[at];
            r.v[e] = v_cache[at];
        }
    }
    return r;
}

// Stores a loaded tile: K at 0, V at VOFF.
fn stage_kv(r: KvRaw, lid: u32) {
    for (var e = 0u; e < KVP; e++) {
        let i = lid + 128u * e;
        let s = (i / DH4) * KS + 4u * (i % DH4);
        kv[s] = r.k[e].x;
        kv[s + 1u] = r.k[e].y;
        kv[s + 2u] = r.k[e].z;
        kv[s + 3u] = r.k[e].w;
        kv[VOFF + s] = r.v[e].x;
        kv[VOFF + s + 1u] = r.v[e].y;
        kv[VOFF + s + 2u] = r.v[e].z;
        kv[VOFF + s + 3u] = r.v[e].w;
    }
}

@compute @workgroup_size(128)
fn prefill_coop(@builtin(workgroup_id) wid: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let q0 = wid.x * BQ;
    let h = wid.y;
    let g = h / (p.nh / p.nkv);
    let sg = lid / 32u;
    let lane = lid % 32u;
    let ctx_len = p.pos0 + p.tokens;
    // Q's 64 rows (as stored: exact in f16) into the K/V staging area.
    for (var i = lid; i < BQ * DH4; i += 128u) {
        let r = i / DH4;
        let c = i % DH4;
        var v = vec4<f32>(0.0);
        if q0 + r < p.tokens { v = vec4<f32>(q[((q0 + r) * p.nh + h) * DH4 + c]); }
        let s = r * KS + 4u * c;
        kv[s] = f16(v.x);
        kv[s + 1u] = f16(v.y);
        kv[s + 2u] = f16(v.z);
        kv[s + 3u] = f16(v.w);
    }
    workgroupBarrier();
    // This subgroup's Q fragments, qf0.. (DH / 16 of them).
    //@QFRAG
    workgroupBarrier();

    // Softmax lanes: row sr of the subgroup's 16, keys 16·sh.. of a tile.
    let sr = lane / 2u;
    let sh = lane % 2u;
    let qpos = p.pos0 + q0 + sg * 16u + sr; // the row's position: keys ≤ qpos are visible
    var m = MASKED;
    var l = 0.0;
    // Output lanes: column lane mod 16 of rows lane / 16 + 2i of each 16-column slice.
    var o: array<f32, DH / 2u>; // [slice][i]: DH / 16 slices × 8
    for (var i = 0u; i < DH / 2u; i++) { o[i] = 0.0; }
    let last = min(ctx_len, p.pos0 + q0 + BQ); // keys the workgroup's last row sees
    // This workgroup's span of keys (all of them without SPLIT).
    let span = wid.z;
    let k_begin = span * p.chunk;
    let k_end = min(last, k_begin + p.chunk);
    let srow = sg * 16u * BK;
    let qscale = p.scale * LOG2E; // scores in base 2
    let prow = sg * 16u * PS;
    // The next tile's rows are requested while this one is computed.
    var raw = load_kv(k_begin, g, ctx_len, lid);
    for (var j0 = k_begin; j0 < k_end; j0 += BK) {
        stage_kv(raw, lid);
        workgroupBarrier();
        if j0 + BK < k_end { raw = load_kv(j0 + BK, g, ctx_len, lid); }
        // S = Q·Kᵀ: BK / 16 fragments of 16 keys, stored row-major (stride BK).
        //@SCORES
        subgroupBarrier();
        // The online softmax of this lane's 16 scores.
        var s: array<f32, 16>;
        var mx = MASKED;
        for (var e = 0u; e < 16u; e++) {
            let key = j0 + 16u * sh + e;
            var v = sc[srow + sr * BK + 16u * sh + e] * qscale;
            if key > qpos || key >= ctx_len { v = MASKED; }
            s[e] = v;
            mx = max(mx, v);
        }
        red[lid] = mx;
        subgroupBarrier();
        let m_new = max(m, max(mx, red[lid ^ 1u]));
        let a = exp2(m - m_new);
        var sum = 0.0;
        for (var e = 0u; e < 16u; e++) {
            let pe = select(exp2(s[e] - m_new), 0.0, s[e] == MASKED);
            sum += pe;
            ps[prow + sr * PS + 16u * sh + e] = f16(pe);
        }
        l = l * a + sum;
        m = m_new;
        if sh == 0u { alpha[sg * 16u + sr] = a; }
        subgroupBarrier();
        // O = O·α + P·V, one 16-column slice at a time through the scratch.
        //@PV
        workgroupBarrier();
    }
    // The row sums: the two lanes' shares.
    red[lid] = l;
    subgroupBarrier();
    if sh == 0u { alpha[sg * 16u + sr] = l + red[lid + 1u]; }
    subgroupBarrier();
    // The rows' maxima for the output lanes (this subgroup's part of `red`, read above).
    if sh == 0u { red[sg * 32u + sr] = m; }
    subgroupBarrier();
    for (var i = 0u; i < 8u; i++) {
        let r = lane / 16u + 2u * i;
        let t = q0 + sg * 16u + r;
        if t >= p.tokens { continue; }
        if SPLIT {
            let rec = record(t, h, span);
            if lane % 16u == 0u {
                part[rec] = red[sg * 32u + r] * LN2;
                part[rec + 1u] = alpha[sg * 16u + r];
            }
            for (var j = 0u; j < DH / 16u; j++) {
                part[rec + 2u + 16u * j + lane % 16u] = o[j * 8u + i];
            }
        } else {
            let inv = 1.0 / alpha[sg * 16u + r];
            for (var j = 0u; j < DH / 16u; j++) {
                out[(t * p.nh + h) * DH + 16u * j + lane % 16u] = T(o[j * 8u + i] * inv);
            }
        }
    }
}
