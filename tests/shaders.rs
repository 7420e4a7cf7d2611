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
