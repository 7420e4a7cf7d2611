// Fused multi-head attention with register-blocked tiles: O = softmax(scale·Q·Kᵀ + mask)·V
// without materialising the n × n scores (flash-attention tiling with an online softmax:
// Dao et al., "FlashAttention", NeurIPS 2022; Milakov & Gimelshein, 2018), computed like a
// tiled GEMM. Same bindings, parameters and masks as attention.wgsl, which serves the head
// widths and adapters this one does not fit.
//
// A workgroup owns BQ query rows of one (batch, head) and walks key tiles of BKV keys: all of
// them, or one work item: a run of its query block's tiles, or with SPARSE of its block-CSR
// row (then BQ = the block = SUB·BKV: a block of 64 is walked as two tiles of 32 keys, with
// the tiling of dense attention). A row longer than that (BigBird's global rows visit every
// block; dense rows when a launch has too few workgroups to fill the GPU) is cut into several
// items, each writing its unnormalised output with the row maxima and sums to a partial slot;
// `merge` then combines a row's slots (split-KV as in Flash-Decoding, Dao et al. 2023; the
// merge is the online softmax's).
// Without the split one workgroup walking a global row is the critical path of the launch.
// Invocation (x, y) of the (BKV/4) × (BQ/4) workgroup owns query rows 4y..4y+3 and, per tile:
//   1. scores for keys 4x..4x+3 as a 4 × 4 register block, from Qᵀ and Kᵀ staged in workgroup
//      memory as vec4 over rows and keys: two vec4 reads per 16 FMAs;
//   2. the row maxima across the row's BKV/4 invocations (the generated ROW_MAX block): by
//      subgroup shuffles where the adapter has subgroups (they are neighbouring lanes of
//      one subgroup: no barrier, no workgroup memory), else through workgroup memory (one
//      vec4 per invocation, BKV/4 reads); then
//      p = exp(s − m) for its 16 scores, written transposed for step 3; its share of the row
//      sums l stays in registers (every invocation rescales by the same row maxima);
//   3. O[rows, dims] += P·V for the output dims (x + j·BKV/4)·4.. (+3), j < OQ, as a 4 × 4·OQ
//      register block (generated, the //@ blocks): one P and OQ V vec4 reads per 16·OQ FMAs.
// Software pipelining: the next key tile is loaded into registers (kr*, vr*, generated) while
// the current one is computed, and staged after the next barrier. The scale is applied to Q
// on loading, so f16 storage cannot overflow in QKᵀ; scores and
// sums are f32 whatever T is. Masks: keys ≥ lengths[batch] (padding) and, with CAUSAL, keys
// after the query. A query row whose keys are all masked gives zeros. Masked scores hold
// the lowest finite f32.
//
// Step 3 reads only probabilities written by invocations of its own row quad, neighbouring
// lanes of one subgroup: the generated ROW_SYNC block is a subgroup barrier where the adapter
// has them with the ROW_MAX shuffles, else a workgroup barrier.
//
// Sparse tiles: every invocation reads the block-CSR column index itself; only a causal
// layout, which may skip a block, passes it through workgroupUniformLoad (two barriers).
// The work item is read once, through workgroupUniformLoad: its query block and length
// decide control flow.
//
// Defines: T, DH (head dim), BQ, BKV (multiples of 4; DH a multiple of BKV: OQ = DH / BKV;
// BKV·DH/4 a multiple of the invocation count), CAUSAL, SPARSE, SUB (key tiles per sparse
// block; 1 when dense), ITEMS (a work list: always with SPARSE, dense when its rows are cut
// too); the ROW_MAX block folds
// `mine` (this invocation's maxima of its four rows) into mx.

//@IO

// With ITEMS: work items [query block, first tile (dense) or col_idx entry (sparse), end,
// partial slot or NO_SLOT], q_blocks per (batch, head), then `merges` rows to merge
// [query block, first slot, slots, 0]. Without: one item per query block, every tile.
@group(0) @binding(5) var<storage, read> work: array<vec4<u32>>;
// Partial outputs, slot s of (batch, head) bh, query row r of the block at
// ((bh · slots + s) · BQ + r) · (DQ4 + 1): DQ4 vec4 of unnormalised O, then (m, l, 0, 0).
@group(0) @binding(8) var<storage, read_write> partial: array<vec4<f32>>;

const RQ: u32 = BQ / 4u;   // row quads: invocations along y
const KQ: u32 = BKV / 4u;  // key quads: invocations along x
const THREADS: u32 = RQ * KQ;
const DQ4: u32 = DH / 4u;  // vec4s per head row
const LOWEST: f32 = -0x1.fffffep+127f; // -f32::MAX, exact (a decimal literal above it is refused by Tint)

var<workgroup> q_t: array<vec4<f32>, DH * RQ>;  // q_t[d * RQ + row / 4][row % 4], scaled
var<workgroup> k_t: array<vec4<f32>, DH * KQ>;  // k_t[d * KQ + key / 4][key % 4]
var<workgroup> v_s: array<vec4<f32>, BKV * DQ4>; // v_s[key * DQ4 + d / 4][d % 4]
var<workgroup> p_s: array<vec4<f32>, BKV * RQ>; // p_s[key * RQ + row / 4][row % 4]
var<workgroup> red: array<vec4<f32>, THREADS>;  // red[y * KQ + x]: per-invocation row values
var<workgroup> shared_u32: u32;
var<workgroup> item_s: vec4<u32>;
const NO_SLOT: u32 = 0xffffffffu;

// Key tile number t (in tiles of BKV keys) of a work item starting at `first`: a tile
// (dense), or sub-tile t % SUB of block-CSR entry first + t / SUB.
fn tile_index(first: u32, t: u32) -> u32 {
    if SPARSE { return col_idx[first + t / SUB] * SUB + t % SUB; }
    return first + t;
}

// Where row r of partial slot s of (batch, head) bh starts.
fn slot_row(bh: u32, s: u32, r: u32) -> u32 {
    return ((bh * p.slots + s) * BQ + r) * (DQ4 + 1u);
}

fn max4(a: vec4<f32>) -> f32 { return max(max(a.x, a.y), max(a.z, a.w)); }
fn sum4(a: vec4<f32>) -> f32 { return (a.x + a.y) + (a.z + a.w); }

// Scores are kept in base 2 (Q is scaled by log2(e) too), so exp(x) = exp2(x · log2(e))
// costs one exp2.
const LOG2E: f32 = 1.4426950408889634;

// exp(s − m) for the unmasked scores of one row, 0 for the masked ones.
fn probs(s: vec4<f32>, m: f32) -> vec4<f32> {
    return select(exp2(s - m), vec4<f32>(0.0), s == vec4<f32>(LOWEST));
}

@compute @workgroup_size(KQ, RQ, 1)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_id) lid: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
    let wg = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    if wg >= p.batch * p.heads * p.q_blocks { return; }
    let w = work_of(wg);
    let b = w.x;
    let h = w.y;
    if tid == 0u {
        if ITEMS { item_s = work[w.z]; } else { item_s = vec4<u32>(w.z, 0u, p.k_blocks, NO_SLOT); }
    }
    let item = workgroupUniformLoad(&item_s);
    let qb = item.x;
    let x = lid.x;
    let y = lid.y;
    let q0 = qb * BQ;                     // first query row of the workgroup
    let rows = vec4<u32>(q0 + 4u * y) + vec4<u32>(0u, 1u, 2u, 3u);
    let len = min(lengths[b], p.seq);

    // Qᵀ, scaled; consecutive invocations take consecutive rows (distinct banks). Every
    // load first (generated, qv*), then the first key tile's, then the stores of Q (Q_STAGE):
    // a short work item cannot hide loads that wait on each other.
    //@Q_LOAD

    var m = vec4<f32>(LOWEST); // running row maxima
    var l = vec4<f32>();       // this invocation's share of the row sums
    //@DECLARE

    var tiles = (item.z - item.y) * SUB;
    // With a causal mask, dense key tiles entirely after this query block contribute nothing.
    if CAUSAL && !SPARSE {
        let last = (q0 + BQ - 1u) / BKV + 1u;
        tiles = select(0u, min(item.z, last) - item.y, item.y < last);
    }
    // Kᵀ is staged with consecutive invocations on consecutive keys, V on consecutive dims.
    if tiles > 0u {
        let kn = tile_index(item.y, 0u);
        //@KV_LOAD
    }
    //@Q_STAGE
    for (var t = 0u; t < tiles; t++) {
        // kb decides control flow only when causal (a skipped block): only then does it need
        // to be provably uniform.
        var kb_uniform = item.y + t;
        if SPARSE && CAUSAL {
            if tid == 0u { shared_u32 = tile_index(item.y, t); }
            kb_uniform = workgroupUniformLoad(&shared_u32);
        }
        let k0 = select(kb_uniform, tile_index(item.y, t), SPARSE && !CAUSAL) * BKV;
        // Sparse and causal: blocks entirely after this query block contribute nothing.
        let skip = CAUSAL && kb_uniform * BKV > q0 + BQ - 1u;
        if !skip {
            //@KV_STAGE
        }
        workgroupBarrier();
        if t + 1u < tiles {
            let kn = tile_index(item.y, t + 1u);
            //@KV_LOAD
        }
        if skip { continue; }

        // 1. Scores of rows 4y.. and keys 4x.., one vec4 of keys per row.
        var s0 = vec4<f32>(); var s1 = vec4<f32>(); var s2 = vec4<f32>(); var s3 = vec4<f32>();
        // Four dims per step, their eight reads first: independent loads in flight.
        for (var d = 0u; d < DH; d += 4u) {
            let qa0 = q_t[d * RQ + y];
            let qa1 = q_t[(d + 1u) * RQ + y];
            let qa2 = q_t[(d + 2u) * RQ + y];
            let qa3 = q_t[(d + 3u) * RQ + y];
            let kv0 = k_t[d * KQ + x];
            let kv1 = k_t[(d + 1u) * KQ + x];
            let kv2 = k_t[(d + 2u) * KQ + x];
            let kv3 = k_t[(d + 3u) * KQ + x];
            s0 = fma(vec4<f32>(qa0.x), kv0, s0);
            s1 = fma(vec4<f32>(qa0.y), kv0, s1);
            s2 = fma(vec4<f32>(qa0.z), kv0, s2);
            s3 = fma(vec4<f32>(qa0.w), kv0, s3);
            s0 = fma(vec4<f32>(qa1.x), kv1, s0);
            s1 = fma(vec4<f32>(qa1.y), kv1, s1);
            s2 = fma(vec4<f32>(qa1.z), kv1, s2);
            s3 = fma(vec4<f32>(qa1.w), kv1, s3);
            s0 = fma(vec4<f32>(qa2.x), kv2, s0);
            s1 = fma(vec4<f32>(qa2.y), kv2, s1);
            s2 = fma(vec4<f32>(qa2.z), kv2, s2);
            s3 = fma(vec4<f32>(qa2.w), kv2, s3);
            s0 = fma(vec4<f32>(qa3.x), kv3, s0);
            s1 = fma(vec4<f32>(qa3.y), kv3, s1);
            s2 = fma(vec4<f32>(qa3.z), kv3, s2);
            s3 = fma(vec4<f32>(qa3.w), kv3, s3);
        }
        let keys = vec4<u32>(k0 + 4u * x) + vec4<u32>(0u, 1u, 2u, 3u);
        let pad = keys >= vec4<u32>(len);
        if CAUSAL {
            s0 = select(s0, vec4<f32>(LOWEST), pad | (keys > vec4<u32>(rows.x)));
            s1 = select(s1, vec4<f32>(LOWEST), pad | (keys > vec4<u32>(rows.y)));
            s2 = select(s2, vec4<f32>(LOWEST), pad | (keys > vec4<u32>(rows.z)));
            s3 = select(s3, vec4<f32>(LOWEST), pad | (keys > vec4<u32>(rows.w)));
        } else {
            s0 = select(s0, vec4<f32>(LOWEST), pad);
            s1 = select(s1, vec4<f32>(LOWEST), pad);
            s2 = select(s2, vec4<f32>(LOWEST), pad);
            s3 = select(s3, vec4<f32>(LOWEST), pad);
        }

        // 2. Row maxima over the tile, probabilities, sums; O rescaled.
        var mx = m;
        let mine = vec4<f32>(max4(s0), max4(s1), max4(s2), max4(s3));
        //@ROW_MAX
        // exp(m − mx) ≤ 1; with nothing seen yet (m = mx = LOWEST) it is 1, and l, O are 0.
        let corr = exp2(m - mx);
        m = mx;
        let p0 = probs(s0, mx.x);
        let p1 = probs(s1, mx.y);
        let p2 = probs(s2, mx.z);
        let p3 = probs(s3, mx.w);
        l = l * corr + vec4<f32>(sum4(p0), sum4(p1), sum4(p2), sum4(p3));
        p_s[(4u * x) * RQ + y] = vec4<f32>(p0.x, p1.x, p2.x, p3.x);
        p_s[(4u * x + 1u) * RQ + y] = vec4<f32>(p0.y, p1.y, p2.y, p3.y);
        p_s[(4u * x + 2u) * RQ + y] = vec4<f32>(p0.z, p1.z, p2.z, p3.z);
        p_s[(4u * x + 3u) * RQ + y] = vec4<f32>(p0.w, p1.w, p2.w, p3.w);
        //@RESCALE
        //@ROW_SYNC

        // 3. O += P·V.
        // Four keys per step, each key's reads before its multiply-adds.
        for (var j = 0u; j < BKV; j += 4u) {
            {
                let pa = p_s[j * RQ + y];
                let vb = j * DQ4 + x;
                //@PV
            }
            {
                let pa = p_s[(j + 1u) * RQ + y];
                let vb = (j + 1u) * DQ4 + x;
                //@PV
            }
            {
                let pa = p_s[(j + 2u) * RQ + y];
                let vb = (j + 2u) * DQ4 + x;
                //@PV
            }
            {
                let pa = p_s[(j + 3u) * RQ + y];
                let vb = (j + 3u) * DQ4 + x;
                //@PV
            }
        }
        workgroupBarrier();
    }

    // The row sums: this invocation's shares plus its row neighbours'.
    red[y * KQ + x] = l;
    workgroupBarrier();
    var total = vec4<f32>();
    for (var i = 0u; i < KQ; i++) { total += red[y * KQ + i]; }
    if item.w == NO_SLOT {
        let inv = select(vec4<f32>(0.0), 1.0 / total, total > vec4<f32>(0.0));
        //@STORE
    } else {
        let bh = b * p.heads + h;
        //@PARTIAL
    }
}

// O of the rows cut into several work items: per row, with m* the largest of its slots'
// maxima, O = Σ 2^(m_s − m*)·O_s ÷ Σ 2^(m_s − m*)·l_s (0 where every key was masked: all
// l_s are 0). One invocation per (batch, head, merged block, row, vec4 of dims).
@compute @workgroup_size(64)
fn merge(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let i = (wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y) * 64u + lid;
    if i >= p.batch * p.heads * p.merges * BQ * DQ4 { return; }
    let dq = i % DQ4;
    let r = (i / DQ4) % BQ;
    let e = (i / (DQ4 * BQ)) % p.merges;
    let bh = i / (DQ4 * BQ * p.merges);
    let mg = work[p.q_blocks + e];
    let row = mg.x * BQ + r;
    if row >= p.seq { return; }
    var mx = LOWEST;
    for (var s = 0u; s < mg.z; s++) { mx = max(mx, partial[slot_row(bh, mg.y + s, r) + DQ4].x); }
    var acc = vec4<f32>();
    var sum = 0.0;
    for (var s = 0u; s < mg.z; s++) {
        let at_s = slot_row(bh, mg.y + s, r);
        let ml = partial[at_s + DQ4];
        let weight = exp2(ml.x - mx);
        sum += weight * ml.y;
        acc += weight * partial[at_s + dq];
    }
    let out = select(vec4<f32>(0.0), acc / sum, sum > 0.0);
    let ob = at(p.o, bh / p.heads, row, bh % p.heads) + dq * 4u;
    o[ob] = T(out.x);
    o[ob + 1u] = T(out.y);
    o[ob + 2u] = T(out.z);
    o[ob + 3u] = T(out.w);
}
