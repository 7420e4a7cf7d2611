// A workgroup's reduction of one f32 an invocation: the sum, or with `take_max` the maximum;
// every invocation gets the result. Inserted at a shader's //@REDUCE line (WG, its workgroup
// size, a power of two), with the workgroup memory it goes through, `red1`, which the shader
// may also use as scratch between reductions.

var<workgroup> red1: array<f32, WG>;

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
