// Fused multi-head attention, dense or block-sparse (BigBird): O = softmax(scale·Q·Kᵀ + mask)·V
// without materialising the n × n scores: flash-attention-style tiling with an online softmax
// (Dao et al., "FlashAttention", NeurIPS 2022; Milakov & Gimelshein, 2018).
//
// A workgroup owns BQ query rows of one (batch, head). It keeps them, scaled, in workgroup
// memory as f32, then walks key blocks of BK keys (all of them, or with SPARSE the block-CSR
// row of its query block): stage K and V, compute the BQ × BK scores, update each row's
// running max m, sum l and output accumulator o (rescaled by exp(m_old − m_new)), next block.
// TPR invocations share a query row: each computes BK/TPR of the row's scores and owns DH/TPR
// of its output dims (generated vec4 accumulators, //@ blocks). Scores are f32 whatever T is,
// and the scale is applied to Q on loading, so f16 storage cannot overflow in QKᵀ.
//
// Masks: keys ≥ lengths[batch] (padding) and, with CAUSAL, keys after the query. A query row
// whose keys are all masked gives zeros. Masked scores are marked with the lowest finite f32
// (no infinity constant in WGSL).
//
// Layouts are strided (element offset, batch, sequence and head strides; head dims
// contiguous), so Q, K and V can be read straight out of a packed [B, S, 3, H, D] projection
// and O written as [B, S, H, D].
//
// Defines: T, DH (head dim, a multiple of 4), BQ, BK, TPR (divides BK; DH/TPR a multiple of 4),
// CAUSAL, SPARSE (then BQ = BK = the layout's block size).

//@IO

@group(0) @binding(5) var<storage, read> row_ptr: array<u32>;

const DH4: u32 = DH / 4u;
const DPT4: u32 = DH / TPR / 4u;
const THREADS: u32 = BQ * TPR;
const LOWEST: f32 = -0x1.fffffep+127f; // -f32::MAX, exact (a decimal literal above it is refused by Tint)

var<workgroup> q_s: array<vec4<f32>, BQ * DH4>;
var<workgroup> k_s: array<vec4<f32>, BK * DH4>;
var<workgroup> v_s: array<vec4<f32>, BK * DH4>;
var<workgroup> s_s: array<f32, BQ * BK>;
var<workgroup> shared_u32: u32;

@compute @workgroup_size(THREADS)
fn attention(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
    let wg = wid.x + wid.y * nwg.x + wid.z * nwg.x * nwg.y;
    if wg >= p.batch * p.heads * p.q_blocks { return; }
    let w = work_of(wg);
    let b = w.x;
    let h = w.y;
    let qb = w.z;
    let r = tid / TPR;
    let c = tid % TPR;
    let qi = qb * BQ + r;
    let len = min(lengths[b], p.seq);

    for (var i = tid; i < BQ * DH4; i += THREADS) {
        let row = qb * BQ + i / DH4;
        var x = vec4<f32>();
        if row < p.seq { x = load_q(at(p.q, b, row, h) + (i % DH4) * 4u) * p.scale; }
        q_s[i] = x;
    }

    var m = LOWEST;
    var l = 0.0;
    //@DECLARE

    if tid == 0u {
        if SPARSE { shared_u32 = row_ptr[qb + 1u] - row_ptr[qb]; } else { shared_u32 = p.k_blocks; }
    }
    let blocks = workgroupUniformLoad(&shared_u32);
    for (var t = 0u; t < blocks; t++) {
        if tid == 0u {
            if SPARSE { shared_u32 = col_idx[row_ptr[qb] + t]; } else { shared_u32 = t; }
        }
        let kb = workgroupUniformLoad(&shared_u32);
        // With a causal mask, key blocks entirely after this query block contribute nothing.
        if CAUSAL && kb * BK > qb * BQ + BQ - 1u { continue; }
        for (var i = tid; i < BK * DH4; i += THREADS) {
            let key = kb * BK + i / DH4;
            var kx = vec4<f32>();
            var vx = vec4<f32>();
            if key < len {
                kx = load_k(at(p.k, b, key, h) + (i % DH4) * 4u);
                vx = load_v(at(p.v, b, key, h) + (i % DH4) * 4u);
            }
            k_s[i] = kx;
            v_s[i] = vx;
        }
        workgroupBarrier();
        for (var jj = 0u; jj < BK / TPR; jj++) {
            let j = c + jj * TPR;
            var s = 0.0;
            for (var d = 0u; d < DH4; d++) { s += dot(q_s[r * DH4 + d], k_s[j * DH4 + d]); }
            let key = kb * BK + j;
            let masked = key >= len || (CAUSAL && key > qi);
            s_s[r * BK + j] = select(s, LOWEST, masked);
        }
        workgroupBarrier();
        var mx = m;
        for (var j = 0u; j < BK; j++) {
            let s = s_s[r * BK + j];
            if s != LOWEST { mx = max(mx, s); }
        }
        // exp(m − mx) ≤ 1; with nothing seen yet (m = LOWEST, l = 0) it is 0 and so is l·0.
        let corr = exp(m - mx);
        l *= corr;
        //@RESCALE
        for (var j = 0u; j < BK; j++) {
            let s = s_s[r * BK + j];
            if s == LOWEST { continue; }
            let pj = exp(s - mx);
            l += pj;
            let vb = j * DH4 + c * DPT4;
            //@UPDATE
        }
        m = mx;
        workgroupBarrier();
    }

    if qi < p.seq {
        var inv = 0.0;
        if l > 0.0 { inv = 1.0 / l; }
        let ob = at(p.o, b, qi, h) + c * DPT4 * 4u;
        //@STORE
    }
}
