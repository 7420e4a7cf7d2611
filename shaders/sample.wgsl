// Sampling the next token on the GPU: a repetition penalty, a temperature, top-k and top-p
// (nucleus) over one row of logits, and a draw from a counter-based generator, so that a
// sampled decode step's id feeds the next step without the logits leaving the GPU.
//
// Three passes (entry points), one dispatch each:
//   sample_scale    a workgroup per block of BLOCK tokens: z = penalized logit into w, the
//                   block's largest z and whether it held NaN or ±∞;
//   sample_weights  a workgroup per block: w = exp((z − max z) ÷ temperature) (the
//                   softmax's numerator; the largest token's is exactly 1), the block's
//                   sum, and every token whose weight is at least TAU appended to the
//                   candidates (their count kept past CAP);
//   sample_pick     one workgroup: the tokens at or above a weight are a prefix of the
//                   descending order, so when the candidates are all there (count ≤ CAP)
//                   and hold top-k's and top-p's cut, sorting them decides the kept set and
//                   the draw walks it in descending order, as the host sampler does. Else
//                   (flat logits) the cut is found by multisection on the weights' bits
//                   (PROBES thresholds a pass over the vocabulary: the largest weight whose
//                   tokens at or above it reach the cut's count or mass; tokens tied with it
//                   are all kept) and the draw walks the kept tokens in id order. Keeping
//                   every token (top-p 1, no top-k) draws in id order at once.
// The pick writes the id (0xFFFFFFFF for a row with NaN or ±∞) and, with a penalty, marks
// the id in `seen` for the steps after it.
//
// Defines: T (the logits' storage type).

const WG: u32 = 256u;
const ITEMS: u32 = 4u;
const BLOCK: u32 = 1024u; // WG * ITEMS
const CAP: u32 = 1024u; // 4 * WG: two compare-exchanges an invocation a sorting stage
const PROBES: u32 = 8u;
const NONE: u32 = 0xFFFFFFFFu;
const TAU: f32 = 0.000244140625; // 2^-12
const ONE_PAST: u32 = 0x3F800001u; // just above bitcast<u32>(1.0): no weight reaches it
const LARGEST: f32 = 3.4028234e38;

struct Params {
    vocab: u32,
    blocks: u32,
    top_k: u32,      // 0: off
    penalize: u32,   // 1: divide (multiply) the seen tokens' positive (negative) logits
    inv_temperature: f32,
    penalty: f32,
    top_p: f32,      // ≥ 1: off
    fixed_u: f32,    // < 0: draw from the generator; else this draw, in [0, 1)
    seed_lo: u32,
    seed_hi: u32,
    step: u32,
    vocab4: u32,     // ⌈vocab / 4⌉: the weights as vec4 (the padding's weights 0)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<T>;
@group(0) @binding(2) var<storage, read_write> seen: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> w: array<f32>;
// [blocks] largest z, [blocks] sums of weights, [blocks] 1 where a block held NaN or ±∞.
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
// [0] the candidates' count; from 4: CAP weights' bits, then CAP ids.
@group(0) @binding(5) var<storage, read_write> cand: array<atomic<u32>>;
@group(0) @binding(6) var<storage, read_write> ids: array<u32>;
// The pick's view of the weights (binding 3's buffer, which it does not write), 4 a load.
@group(0) @binding(7) var<storage, read> w4: array<vec4<f32>>;

var<workgroup> red: array<f32, WG>;
var<workgroup> red_bad: atomic<u32>;
var<workgroup> block_count: atomic<u32>;
var<workgroup> block_base: u32;

fn finite(v: f32) -> bool {
    // NaN fails every comparison; ±inf is past the largest f32.
    return abs(v) <= LARGEST;
}

@compute @workgroup_size(WG)
fn sample_scale(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let b = wid.x;
    if b == 0u && lid == 0u {
        atomicStore(&cand[0], 0u);
    }
    if lid == 0u {
        atomicStore(&red_bad, 0u);
    }
    workgroupBarrier();
    var m = -LARGEST;
    var bad = false;
    for (var j = 0u; j < ITEMS; j++) {
        let i = b * BLOCK + j * WG + lid;
        if i < p.vocab {
            var z = f32(x[i]);
            if !finite(z) {
                bad = true;
                z = 0.0;
            }
            if p.penalize != 0u && (atomicLoad(&seen[i / 32u]) & (1u << (i % 32u))) != 0u {
                // A penalty far from 1 may pass f32's range: the largest finite value keeps
                // the token first (or last), and z − max z stays a number.
                z = clamp(select(z * p.penalty, z / p.penalty, z > 0.0), -LARGEST, LARGEST);
            }
            w[i] = z;
            m = max(m, z);
        } else if i < 4u * p.vocab4 {
            w[i] = 0.0; // the last vec4's padding: no weight (a pooled buffer holds old values)
        }
    }
    if bad {
        atomicStore(&red_bad, 1u);
    }
    let top = wg_reduce(lid, m, true);
    if lid == 0u {
        part[b] = top;
        part[2u * p.blocks + b] = f32(atomicLoad(&red_bad));
    }
}

@compute @workgroup_size(WG)
fn sample_weights(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let b = wid.x;
    var m = -LARGEST;
    for (var i = lid; i < p.blocks; i += WG) {
        m = max(m, part[i]);
    }
    let top = wg_reduce(lid, m, true);
    if lid == 0u {
        atomicStore(&block_count, 0u);
    }
    workgroupBarrier();
    // The block's candidates take consecutive slots: one global atomic a workgroup (one a
    // token serialized on the counter over a flat vocabulary).
    var sum = 0.0;
    var v: array<f32, ITEMS>;
    var mine: array<u32, ITEMS>;
    for (var j = 0u; j < ITEMS; j++) {
        let i = b * BLOCK + j * WG + lid;
        mine[j] = NONE;
        if i < p.vocab {
            // Scaled after the subtraction: z − max z ≤ 0, so a temperature near 0 (1/T up
            // to f32's largest) sends the others to exp(−∞) = 0 and the largest to 1.
            v[j] = exp((w[i] - top) * p.inv_temperature);
            w[i] = v[j];
            sum += v[j];
            if v[j] >= TAU {
                mine[j] = atomicAdd(&block_count, 1u);
            }
        }
    }
    workgroupBarrier();
    if lid == 0u {
        block_base = atomicAdd(&cand[0], atomicLoad(&block_count));
    }
    let base = workgroupUniformLoad(&block_base);
    for (var j = 0u; j < ITEMS; j++) {
        let slot = base + mine[j];
        if mine[j] != NONE && slot < CAP {
            atomicStore(&cand[4u + slot], bitcast<u32>(v[j]));
            atomicStore(&cand[4u + CAP + slot], b * BLOCK + j * WG + lid);
        }
    }
    let total = wg_sum(lid, sum);
    if lid == 0u {
        part[p.blocks + b] = total;
    }
}

// ---- the pick (one workgroup)

fn weight(i: u32) -> f32 {
    return w4[i / 4u][i % 4u];
}

// The candidates (weights' bits [0, CAP), ids [CAP, 2 CAP)) or, on the multisection's path,
// the thresholds' partial sums (f32 bits, PROBES * WG): 8 KB either way (WebGPU's floor for a
// workgroup's memory is 16 KB).
var<workgroup> pool: array<u32, 2048>;
var<workgroup> scan: array<f32, WG>;
var<workgroup> found: atomic<u32>;
var<workgroup> tally: array<atomic<u32>, 10>; // PROBES + 2
var<workgroup> last: atomic<u32>;
var<workgroup> sh_u: u32;
var<workgroup> sh_lo: u32;
var<workgroup> sh_hi: u32;
var<workgroup> sh_a: u32;
var<workgroup> sh_b: u32;
var<workgroup> sh_r: f32;
var<workgroup> sh_f: f32;

// Hash of Jarzynski & Olano, "Hash Functions for GPU Rendering" (JCGT 9(3), 2020): PCG's
// output permutation on one LCG step.
fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// The step's draw in [0, 1): 24 bits of a hash of the seed and the step.
fn draw() -> f32 {
    let h = pcg(p.step ^ pcg(p.seed_lo ^ pcg(p.seed_hi)));
    return f32(h >> 8u) * (1.0 / 16777216.0);
}

// The sum (or, with take_max, the largest) over the workgroup of each invocation's v, the
// same in every invocation. Call from uniform control flow.
fn wg_reduce(lid: u32, v: f32, take_max: bool) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        if lid < s {
            red[lid] = select(red[lid] + red[lid + s], max(red[lid], red[lid + s]), take_max);
        }
        workgroupBarrier();
    }
    if lid == 0u {
        sh_f = red[0];
    }
    return workgroupUniformLoad(&sh_f);
}

fn wg_sum(lid: u32, v: f32) -> f32 {
    return wg_reduce(lid, v, false);
}

// scan[lid] becomes the inclusive prefix sum of scan[0..=lid].
fn inclusive_scan(lid: u32) {
    workgroupBarrier();
    for (var off = 1u; off < WG; off <<= 1u) {
        var t = 0.0;
        if lid >= off {
            t = scan[lid - off];
        }
        workgroupBarrier();
        scan[lid] += t;
        workgroupBarrier();
    }
}

// Whether (wa, ia) comes before (wb, ib) in the descending order (ties: the lower id first).
fn before(wa: f32, ia: u32, wb: f32, ib: u32) -> bool {
    return wa > wb || (wa == wb && ia < ib);
}

fn cw(e: u32) -> f32 {
    return bitcast<f32>(pool[e]);
}

// Sorts the first n candidates in the descending order (a bitonic network over the least
// power of two ≥ n, at most CAP; past n only padding, which sorts last): 28 stages for a
// trained model's ~100 candidates at temperature 0.7 instead of CAP's 55. n is uniform.
fn sort_candidates(lid: u32, n: u32) {
    var size = 2u;
    while size < min(n, CAP) {
        size <<= 1u;
    }
    for (var k = 2u; k <= size; k <<= 1u) {
        for (var j = k >> 1u; j > 0u; j >>= 1u) {
            for (var t = lid; t < size / 2u; t += WG) {
                let i = 2u * j * (t / j) + (t % j);
                let l = i + j;
                let up = (i & k) == 0u;
                let wi = pool[i];
                let ii = pool[CAP + i];
                let wl = pool[l];
                let il = pool[CAP + l];
                let l_first = before(bitcast<f32>(wl), il, bitcast<f32>(wi), ii);
                let i_first = before(bitcast<f32>(wi), ii, bitcast<f32>(wl), il);
                if (up && l_first) || (!up && i_first) {
                    pool[i] = wl;
                    pool[CAP + i] = il;
                    pool[l] = wi;
                    pool[CAP + l] = ii;
                }
            }
            workgroupBarrier();
        }
    }
}

// The sorted candidates' weights become their inclusive prefix sums.
fn prefix_candidates(lid: u32) {
    let per = CAP / WG;
    var own = 0.0;
    for (var c = 0u; c < per; c++) {
        own += max(cw(per * lid + c), 0.0);
    }
    scan[lid] = own;
    inclusive_scan(lid);
    var run = 0.0;
    if lid > 0u {
        run = scan[lid - 1u];
    }
    for (var c = 0u; c < per; c++) {
        let e = per * lid + c;
        run += max(cw(e), 0.0);
        pool[e] = bitcast<u32>(run);
    }
    workgroupBarrier();
}

// The first of the first n prefix sums above `limit` (strictly when `strict`), NONE if none.
fn first_past(lid: u32, n: u32, limit: f32, strict: bool) -> u32 {
    if lid == 0u {
        atomicStore(&found, NONE);
    }
    workgroupBarrier();
    for (var e = lid; e < n; e += WG) {
        if cw(e) > limit || (!strict && cw(e) >= limit) {
            atomicMin(&found, e);
        }
    }
    workgroupBarrier();
    if lid == 0u {
        sh_u = atomicLoad(&found);
    }
    return workgroupUniformLoad(&sh_u);
}

// The largest weight's bits v ≥ lo such that the tokens whose weight's bits are ≥ v number
// (count) or weigh (!count) at least `goal`; given that those ≥ lo do. Each pass over the
// vocabulary narrows the bracket [lo, hi) to one of PROBES + 1 parts; once at most CAP
// tokens lie inside it, they are gathered, sorted, and the cut read off their prefix sums.
fn multisection(lid: u32, lo0: u32, goal: f32, count: bool) -> u32 {
    var lo = lo0;
    var hi = ONE_PAST;
    var inside = NONE; // tokens with bits in [lo, hi), once counted
    var beyond = 0.0; // their count or weight at or past hi
    loop {
        if hi - lo <= 1u {
            break;
        }
        if inside <= CAP {
            return cut_among_few(lid, lo, hi, goal - beyond, count);
        }
        if lid < PROBES + 2u {
            atomicStore(&tally[lid], 0u);
        }
        workgroupBarrier();
        let step = max((hi - lo) / (PROBES + 1u), 1u);
        var acc: array<f32, PROBES>;
        var n: array<u32, PROBES>;
        var q: array<u32, PROBES>;
        for (var j = 0u; j < PROBES; j++) {
            acc[j] = 0.0;
            n[j] = 0u;
            q[j] = min(lo + step * (j + 1u), hi - 1u);
        }
        // Tokens at or past hi count for every probe: summed once. Below the lowest probe:
        // nothing. Only those inside the bracket are compared with each probe.
        var above = 0.0;
        var above_n = 0u;
        var in_n = 0u;
        for (var i4 = lid; i4 < p.vocab4; i4 += WG) {
            let v4 = w4[i4];
            for (var c = 0u; c < 4u; c++) {
                let v = v4[c];
                let key = bitcast<u32>(v);
                let add = select(v, 1.0, count);
                if key >= hi {
                    above += add;
                    above_n += 1u;
                } else if key >= lo {
                    in_n += 1u;
                    if key >= q[0] {
                        for (var j = 0u; j < PROBES; j++) {
                            let past = key >= q[j];
                            acc[j] += select(0.0, add, past);
                            n[j] += u32(past);
                        }
                    }
                }
            }
        }
        for (var j = 0u; j < PROBES; j++) {
            acc[j] += above;
            atomicAdd(&tally[j], n[j]);
        }
        atomicAdd(&tally[PROBES], in_n);
        atomicAdd(&tally[PROBES + 1u], above_n);
        let above_all = wg_sum(lid, above);
        for (var j = 0u; j < PROBES; j++) {
            pool[j * WG + lid] = bitcast<u32>(acc[j]);
        }
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s >>= 1u) {
            if lid < s {
                for (var j = 0u; j < PROBES; j++) {
                    pool[j * WG + lid] = bitcast<u32>(
                        bitcast<f32>(pool[j * WG + lid]) + bitcast<f32>(pool[j * WG + lid + s]),
                    );
                }
            }
            workgroupBarrier();
        }
        if lid == 0u {
            // Counts at or past lo, and past hi; the new bracket's ends take the probes'.
            var n_lo = atomicLoad(&tally[PROBES + 1u]) + atomicLoad(&tally[PROBES]);
            var n_hi = atomicLoad(&tally[PROBES + 1u]);
            var s_hi = above_all;
            var nlo = lo;
            var nhi = hi;
            for (var j = 0u; j < PROBES; j++) {
                let qj = q[j];
                let sj = bitcast<f32>(pool[j * WG]);
                let nj = atomicLoad(&tally[PROBES + 1u]) + atomicLoad(&tally[j]);
                if sj >= goal {
                    if qj > nlo {
                        nlo = qj;
                        n_lo = nj;
                    }
                } else if qj < nhi {
                    nhi = qj;
                    n_hi = nj;
                    s_hi = sj;
                }
            }
            sh_lo = nlo;
            sh_hi = nhi;
            sh_u = n_lo - n_hi;
            sh_f = s_hi;
        }
        lo = workgroupUniformLoad(&sh_lo);
        hi = workgroupUniformLoad(&sh_hi);
        inside = workgroupUniformLoad(&sh_u);
        beyond = workgroupUniformLoad(&sh_f);
    }
    return lo;
}

// The cut among the at most CAP tokens with bits in [lo, hi): they are gathered and sorted,
// and the cut is the bits of the first whose count (count) or prefix weight (!count) with the
// rest reaches `goal` (the goal less what lies at or past hi); lo if rounding leaves it short.
fn cut_among_few(lid: u32, lo: u32, hi: u32, goal: f32, count: bool) -> u32 {
    if lid == 0u {
        atomicStore(&found, 0u);
    }
    for (var e = lid; e < CAP; e += WG) {
        pool[e] = bitcast<u32>(-1.0);
        pool[CAP + e] = NONE;
    }
    workgroupBarrier();
    for (var i = lid; i < 4u * p.vocab4; i += WG) {
        let key = bitcast<u32>(weight(i));
        if key >= lo && key < hi {
            let slot = atomicAdd(&found, 1u);
            if slot < CAP {
                pool[slot] = key;
                pool[CAP + slot] = key;
            }
        }
    }
    workgroupBarrier();
    if lid == 0u {
        sh_u = min(atomicLoad(&found), CAP);
    }
    let m = workgroupUniformLoad(&sh_u);
    sort_candidates(lid, m);
    var at = NONE;
    if count {
        // The n-th largest, n = goal less the count past hi (at least 1 by the bracket).
        at = min(u32(max(ceil(goal), 1.0)), m) - 1u;
    } else {
        prefix_candidates(lid);
        at = first_past(lid, m, goal, false);
    }
    // Through workgroup memory: the cut bounds the next multisection's uniform loop.
    if lid == 0u {
        sh_lo = select(pool[CAP + min(at, CAP - 1u)], lo, at == NONE || at >= m);
    }
    return workgroupUniformLoad(&sh_lo);
}

// The weight of the tokens whose weight's bits are ≥ cut.
fn mass_from(lid: u32, cut: u32) -> f32 {
    var s = 0.0;
    for (var i4 = lid; i4 < p.vocab4; i4 += WG) {
        let v4 = w4[i4];
        for (var c = 0u; c < 4u; c++) {
            if bitcast<u32>(v4[c]) >= cut {
                s += v4[c];
            }
        }
    }
    return wg_sum(lid, s);
}

// Narrows [sh_a, sh_b) to the share of one invocation (consecutive ids) where the draw sh_r
// lands among the kept tokens (bits ≥ cut) in id order; sh_r drops by the kept weight
// before that share. Past every kept weight (rounding): the last share that keeps one, and
// sh_r past any weight, so that the walk ends on its last kept token.
fn narrow(lid: u32, cut: u32) {
    let a0 = workgroupUniformLoad(&sh_a);
    let b0 = workgroupUniformLoad(&sh_b);
    let len = (b0 - a0 + WG - 1u) / WG;
    let a = min(a0 + lid * len, b0);
    let e = min(a + len, b0);
    var s = 0.0;
    for (var i = a; i < e; i++) {
        let v = weight(i);
        if bitcast<u32>(v) >= cut {
            s += v;
        }
    }
    scan[lid] = s;
    if lid == 0u {
        atomicStore(&found, NONE);
        atomicStore(&last, 0u);
    }
    inclusive_scan(lid);
    let r = sh_r;
    if s > 0.0 {
        atomicMax(&last, lid);
        if scan[lid] > r {
            atomicMin(&found, lid);
        }
    }
    workgroupBarrier();
    if lid == 0u {
        var j = atomicLoad(&found);
        if j == NONE {
            j = atomicLoad(&last);
            sh_r = LARGEST;
        } else if j > 0u {
            sh_r = r - scan[j - 1u];
        }
        sh_a = min(a0 + j * len, b0);
        sh_b = min(a0 + j * len + len, b0);
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn sample_pick(@builtin(local_invocation_index) lid: u32) {
    var bad = 0.0;
    var total_part = 0.0;
    for (var i = lid; i < p.blocks; i += WG) {
        bad = max(bad, part[2u * p.blocks + i]);
        total_part += part[p.blocks + i];
    }
    if wg_sum(lid, bad) > 0.0 {
        if lid == 0u {
            ids[0] = NONE;
        }
        return;
    }
    let total = wg_sum(lid, total_part);
    if lid == 0u {
        sh_u = atomicLoad(&cand[0]);
    }
    let count = workgroupUniformLoad(&sh_u);
    let k_on = p.top_k != 0u && p.top_k < p.vocab;
    let p_on = p.top_p < 1.0;
    let u = select(draw(), p.fixed_u, p.fixed_u >= 0.0);

    // The candidates, when they hold every token at or above TAU and decide the cut.
    var kept = 0u;
    if (k_on || p_on) && count <= CAP {
        for (var e = lid; e < CAP; e += WG) {
            if e < count {
                pool[e] = atomicLoad(&cand[4u + e]);
                pool[CAP + e] = atomicLoad(&cand[4u + CAP + e]);
            } else {
                pool[e] = bitcast<u32>(-1.0);
                pool[CAP + e] = NONE;
            }
        }
        workgroupBarrier();
        sort_candidates(lid, count);
        prefix_candidates(lid);
        // Top-k: the k largest, the softmax over them alone; else over every token.
        var limit = count;
        var mass = total;
        var k_held = true;
        if k_on {
            if p.top_k <= count {
                limit = p.top_k;
                mass = cw(p.top_k - 1u);
            } else {
                k_held = false;
            }
        }
        if k_held {
            if p_on {
                let cut = first_past(lid, limit, p.top_p * mass, false);
                if cut != NONE {
                    kept = cut + 1u;
                } else if k_on {
                    kept = limit; // rounding left the k short of top-p: all kept
                }
            } else {
                kept = limit;
            }
        }
        if kept > 0u {
            let r = u * cw(kept - 1u);
            let at = first_past(lid, kept, r, true);
            if lid == 0u {
                let id = pool[CAP + select(kept - 1u, at, at != NONE)];
                ids[0] = id;
                if p.penalize != 0u {
                    atomicOr(&seen[id / 32u], 1u << (id % 32u));
                }
            }
            return;
        }
    }

    // Every token: the cut by multisection where top-k or top-p is on; the draw in id order.
    var cut = 0u;
    if k_on {
        cut = multisection(lid, 0u, f32(p.top_k), true);
    }
    if p_on {
        cut = multisection(lid, cut, p.top_p * mass_from(lid, cut), false);
    }
    if lid == 0u {
        sh_a = 0u;
        sh_b = p.vocab;
    }
    let mass = mass_from(lid, cut);
    if lid == 0u {
        sh_r = u * mass;
    }
    workgroupBarrier();
    narrow(lid, cut);
    narrow(lid, cut);
    narrow(lid, cut);
    if lid == 0u {
        var r = sh_r;
        var id = NONE;
        var last_kept = NONE;
        for (var i = sh_a; i < sh_b; i++) {
            let v = weight(i);
            if bitcast<u32>(v) >= cut {
                last_kept = i;
                if r < v {
                    id = i;
                    break;
                }
                r -= v;
            }
        }
        if id == NONE {
            id = last_kept;
        }
        ids[0] = id;
        if p.penalize != 0u && id != NONE {
            atomicOr(&seen[id / 32u], 1u << (id % 32u));
        }
    }
}
