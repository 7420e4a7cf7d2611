// The interface both attention kernels share (attention.wgsl, attention_tiled.wgsl; the
// launcher in crates/ridge-kernels/src/attention.rs packs Params): strided head layouts
// (element offset, batch, sequence and head strides; head dims contiguous), the bindings,
// the workgroup's work. Inserted at their //@IO line, with the loads of four head dims.
// Binding 5 is each kernel's own: the block-CSR row pointers (attention.wgsl) or the work
// list (attention_tiled.wgsl); 8 is the tiled kernel's partial outputs.

struct Layout { offset: u32, batch: u32, seq: u32, head: u32 }

struct Params {
    batch: u32, heads: u32, seq: u32, q_blocks: u32,
    q: Layout, k: Layout, v: Layout, o: Layout,
    scale: f32, k_blocks: u32, slots: u32, merges: u32, // the last two: attention_tiled.wgsl
}

@group(0) @binding(0) var<uniform> p: Params;
// QKV is T, or vec4<T> where every offset and stride of Q, K and V is a multiple of 4
// elements: one 16-byte (f32) or 8-byte (f16) load per four head dims instead of four loads.
// The launcher appends load_q, load_k and load_v (four head dims from element i, as f32) for
// the chosen form.
@group(0) @binding(1) var<storage, read> q: array<QKV>;
@group(0) @binding(2) var<storage, read> k: array<QKV>;
@group(0) @binding(3) var<storage, read> v: array<QKV>;
@group(0) @binding(4) var<storage, read> lengths: array<u32>;
@group(0) @binding(6) var<storage, read> col_idx: array<u32>;
@group(0) @binding(7) var<storage, read_write> o: array<T>;

// (batch, head, query block or work item) of workgroup number wg (a linear grid, q_blocks
// per (batch, head), fastest).
fn work_of(wg: u32) -> vec3<u32> {
    let bh = wg / p.q_blocks;
    return vec3<u32>(bh / p.heads, bh % p.heads, wg % p.q_blocks);
}

fn at(l: Layout, b: u32, s: u32, h: u32) -> u32 {
    return l.offset + b * l.batch + s * l.seq + h * l.head;
}

