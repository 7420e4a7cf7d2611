//! The tables shipped in `crates/ridge-tune/tables/`, one per adapter family.

use ridge_core::Fingerprint;

/// (family, JSON) of every shipped table.
pub const TABLES: &[(&str, &str)] = &[
    ("llvmpipe", include_str!("../tables/llvmpipe.json")),
    ("swiftshader", include_str!("../tables/swiftshader.json")),
    (
        "nvidia-hopper",
        include_str!("../tables/nvidia-hopper.json"),
    ),
    (
        "nvidia-ampere",
        include_str!("../tables/nvidia-ampere.json"),
    ),
    ("nvidia-ada", include_str!("../tables/nvidia-ada.json")),
    ("amd-rdna", include_str!("../tables/amd-rdna.json")),
    ("amd-cdna", include_str!("../tables/amd-cdna.json")),
    ("apple-m", include_str!("../tables/apple-m.json")),
    ("intel-xe", include_str!("../tables/intel-xe.json")),
];

/// The family of an adapter, from its vendor id and name.
pub fn family(fp: &Fingerprint) -> Option<&'static str> {
    let name = fp.name.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| name.contains(w));
    Some(match fp.vendor_id {
        _ if has(&["llvmpipe"]) => "llvmpipe",
        _ if has(&["swiftshader"]) => "swiftshader",
        0x10de if has(&["h100", "h200", "gh200", "h800"]) => "nvidia-hopper",
        0x10de if has(&["rtx 40", "l4", "l40", "rtx 6000 ada", "ada"]) => "nvidia-ada",
        0x10de => "nvidia-ampere",
        0x1002 if has(&["mi100", "mi200", "mi210", "mi250", "mi300", "instinct"]) => "amd-cdna",
        0x1002 => "amd-rdna",
        0x106b => "apple-m",
        _ if has(&["apple"]) => "apple-m",
        0x8086 => "intel-xe",
        _ => return None,
    })
}

/// The shipped table's JSON for a family.
pub fn json(family: &str) -> Option<&'static str> {
    TABLES.iter().find(|(f, _)| *f == family).map(|(_, j)| *j)
}
