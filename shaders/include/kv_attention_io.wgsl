// The interface both KV-cache attention shaders share (kv_attention.wgsl and its tensor-core
// prompt form kv_attention_coop.wgsl; the launcher in crates/ridge-kernels/src/kv_attention.rs
// packs Params): q [T, nh, dh], the caches [capacity, nkv, dh] and out [T, nh, dh]. Inserted
// at their //@IO line. Binding 5 (the split's partial outputs) is kv_attention.wgsl's own.

struct Params {
    tokens: u32, nh: u32, nkv: u32, dh: u32,
    pos0: u32, splits: u32, chunk: u32, scale: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> q: array<vec4<T>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<T>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<T>>;
@group(0) @binding(4) var<storage, read_write> out: array<T>;
