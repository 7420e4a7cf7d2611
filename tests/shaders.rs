//! CPU-only: every shader variant Ridge builds parses and validates with naga and translates
//! to SPIR-V (Vulkan), MSL (Metal), HLSL (DX12) and GLSL (GL) — Ridge's Metal and DX12
//! coverage on machines without that hardware.

use naga::back::{glsl, hlsl, msl, spv};
use naga::valid::{Capabilities, ValidationFlags, Validator};
use ridge::core::DType;
use ridge::kernels::shaders;

fn translate(
    name: &str,
    entry: &str,
    source: &str,
    f16: bool,
    spirv_only: bool,
) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .map_err(|e| e.emit_to_string(source))?;
    let ep = module
        .entry_points
        .iter()
        .find(|e| e.name == entry)
        .ok_or_else(|| format!("{name}: no entry point {entry}"))?;
    if ep.stage != naga::ShaderStage::Compute {
        return Err(format!("{name}::{entry} is not a compute entry point"));
    }

    spv::write_vec(&module, &info, &spv::Options::default(), None)
        .map_err(|e| format!("SPIR-V: {e}"))?;
    if spirv_only {
        return Ok(());
    }
    msl::write_string(
        &module,
        &info,
        &msl::Options::default(),
        &msl::PipelineOptions::default(),
    )
    .map_err(|e| format!("MSL: {e}"))?;
    let hlsl_options = hlsl::Options {
        // f16 needs shader model 6.2 (16-bit types); DXC, wgpu's DX12 compiler, has it.
        shader_model: hlsl::ShaderModel::V6_2,
        ..Default::default()
    };
    let mut out = String::new();
    hlsl::Writer::new(&mut out, &hlsl_options, &hlsl::PipelineOptions::default())
        .write(&module, &info, None)
        .map_err(|e| format!("HLSL: {e}"))?;

    // GLSL has no 16-bit floats; wgpu's GL backend never offers shader-f16.
    if !f16 {
        let options = glsl::Options {
            version: glsl::Version::Embedded {
                version: 310,
                is_webgl: false,
            },
            ..Default::default()
        };
        let pipeline = glsl::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: entry.to_string(),
            multiview: None,
        };
        let mut out = String::new();
        glsl::Writer::new(
            &mut out,
            &module,
            &info,
            &options,
            &pipeline,
            Default::default(),
        )
        .and_then(|mut w| w.write())
        .map_err(|e| format!("GLSL ES 3.10: {e}"))?;
    }
    Ok(())
}

/// Decimal float literals whose magnitude exceeds their type's largest finite value. naga
/// rounds `3.40282347e38` to f32::MAX, but Tint (Chrome's WGSL compiler) refuses any literal
/// above it ("cannot be represented as 'f32'", WGSL §6.2.1 and §14.1 "Literal
/// expressions": the value must be in range), so such shaders fail only in the browser.
fn out_of_range_literals(source: &str) -> Vec<String> {
    let bytes = source.as_bytes();
    let mut bad = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            || (bytes[i] == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
        let joined = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if !starts || joined {
            i += 1;
            continue;
        }
        let start = i;
        if source[i..].starts_with("0x") || source[i..].starts_with("0X") {
            // Hex literals: skip (their exponent is explicit and Ridge writes them exactly).
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric() || b".+-".contains(&bytes[i]))
            {
                if b"+-".contains(&bytes[i]) && !b"pP".contains(&bytes[i - 1]) {
                    break;
                }
                i += 1;
            }
            continue;
        }
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        if i < bytes.len() && b"eE".contains(&bytes[i]) {
            i += 1;
            if i < bytes.len() && b"+-".contains(&bytes[i]) {
                i += 1;
            }
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
        }
        let digits = &source[start..i];
        let suffix = bytes.get(i).copied();
        let max = match suffix {
            Some(b'h') => 65504.0,
            Some(b'i' | b'u') => continue,
            _ => f32::MAX as f64,
        };
        if let Ok(v) = digits.parse::<f64>()
            && v > max
        {
            bad.push(digits.to_string());
        }
    }
    bad
}

#[test]
fn literal_range_check_catches_what_tint_refuses() {
    assert_eq!(
        out_of_range_literals("const L: f32 = -3.40282347e38;"),
        ["3.40282347e38"]
    );
    assert_eq!(
        out_of_range_literals("let x = 65520.0h; let y = vec4(1e3);"),
        ["65520.0"]
    );
    assert!(
        out_of_range_literals("const L = -0x1.fffffep+127f; let a = 3.4028234e38f; x1e99")
            .is_empty()
    );
}

#[test]
fn every_variant_validates_and_translates_to_every_backend() {
    let variants = shaders::all_variants();
    assert!(
        variants.len() > 20,
        "suspiciously few variants: {}",
        variants.len()
    );
    let mut failures = Vec::new();
    for (shader, entry, defines) in &variants {
        let source = defines.apply(shader);
        let f16 = source.contains("enable f16;");
        // naga's cooperative-matrix extension is Vulkan-only; Ridge runs it only there.
        let spirv_only = source.contains("enable wgpu_cooperative_matrix;");
        let bad = out_of_range_literals(&source);
        if !bad.is_empty() {
            failures.push(format!(
                "{}: literals out of range (Tint refuses them): {bad:?}",
                shader.name
            ));
        }
        if let Err(e) = translate(shader.name, entry, &source, f16, spirv_only) {
            failures.push(format!(
                "{}::{entry} with\n{}{e}",
                shader.name,
                defines.header()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_shader_file_is_built_and_every_entry_point_covered() {
    let variants = shaders::all_variants();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    for file in std::fs::read_dir(&dir).expect("shaders/ exists") {
        let path = file.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("wgsl") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let mine: Vec<_> = variants.iter().filter(|(s, _, _)| s.name == stem).collect();
        assert!(
            !mine.is_empty(),
            "shaders/{stem}.wgsl is not built by any launcher"
        );
        // Every @compute entry point in the file appears among the variants.
        let text = std::fs::read_to_string(&path).unwrap();
        let source = mine[0].2.apply(mine[0].0);
        let module = naga::front::wgsl::parse_str(&source).expect("parses");
        for ep in &module.entry_points {
            assert!(
                mine.iter().any(|(_, e, _)| *e == ep.name),
                "shaders/{stem}.wgsl: entry point {} is never built",
                ep.name
            );
        }
        assert_eq!(
            mine[0].0.body, text,
            "{stem}: the compiled-in source is stale"
        );
    }
    // Both storage types are covered.
    for dtype in [DType::F32, DType::F16] {
        let alias = format!("alias T = {};", dtype.wgsl());
        assert!(variants.iter().any(|(_, _, d)| d.header().contains(&alias)));
    }
}
