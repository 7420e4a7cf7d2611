//! Compute pipelines, compiled once per (shader, defines, entry point, override constants).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A shader file: its name (the file stem in `shaders/`) and its WGSL text.
#[derive(Clone, Copy, Debug)]
pub struct ShaderSource {
    /// File stem, e.g. `gemm`.
    pub name: &'static str,
    /// The WGSL body; [`Defines`] are prepended to it.
    pub body: &'static str,
}

/// The one template step Ridge's shaders use: `enable` directives, an element-type alias and
/// `const` declarations prepended to a shader body, and generated blocks put in place of
/// `//@NAME` marker lines (unrolled register tiles, whose size is a define). One WGSL source
/// serves every variant.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Defines {
    enables: Vec<&'static str>,
    lines: Vec<String>,
    blocks: Vec<(String, String)>,
}

impl Defines {
    /// No defines.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds `enable name;` (e.g. `f16`), once.
    pub fn enable(mut self, name: &'static str) -> Self {
        if !self.enables.contains(&name) {
            self.enables.push(name);
        }
        self
    }
    /// Adds `alias name = ty;`.
    pub fn alias(mut self, name: &str, ty: &str) -> Self {
        self.lines.push(format!("alias {name} = {ty};"));
        self
    }
    /// Adds `const name: u32 = value;`.
    pub fn u32(mut self, name: &str, value: u32) -> Self {
        self.lines.push(format!("const {name}: u32 = {value}u;"));
        self
    }
    /// Adds `const name: bool = value;`.
    pub fn bool(mut self, name: &str, value: bool) -> Self {
        self.lines.push(format!("const {name}: bool = {value};"));
        self
    }
    /// Replaces the line `//@name` in the body with `code`.
    pub fn block(mut self, name: &str, code: String) -> Self {
        self.blocks.push((format!("//@{name}"), code));
        self
    }
    /// The WGSL text to prepend.
    pub fn header(&self) -> String {
        let mut s = String::new();
        for e in &self.enables {
            s.push_str(&format!("enable {e};\n"));
        }
        for l in &self.lines {
            s.push_str(l);
            s.push('\n');
        }
        s
    }
    /// The complete WGSL module: header, then body.
    pub fn apply(&self, shader: &ShaderSource) -> String {
        // Only a line that is exactly the marker is replaced; a comment naming it is kept.
        let mut body = String::with_capacity(shader.body.len());
        for line in shader.body.lines() {
            match self.blocks.iter().find(|(marker, _)| line.trim() == marker) {
                Some((_, code)) => body.push_str(code),
                None => body.push_str(line),
            }
            body.push('\n');
        }
        format!(
            "// {}.wgsl with Ridge defines\n{}\n{}",
            shader.name,
            self.header(),
            body
        )
    }
}

/// Identifies one compiled pipeline.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PipelineKey {
    /// Shader file stem.
    pub shader: &'static str,
    /// Entry point.
    pub entry: &'static str,
    /// The template defines.
    pub defines: Defines,
}

/// A cache of compiled compute pipelines (auto layouts). Thread-safe; each key compiles once.
#[derive(Default)]
pub struct PipelineCache {
    modules: Mutex<HashMap<(&'static str, Defines), wgpu::ShaderModule>>,
    pipelines: Mutex<HashMap<PipelineKey, Arc<wgpu::ComputePipeline>>>,
    compiled: std::sync::atomic::AtomicUsize,
}

impl PipelineCache {
    /// The pipeline for `shader` + `defines` + `entry`, compiling it on first use.
    ///
    /// Compilation errors are not returned here (wgpu reports them asynchronously); they
    /// surface from the next [`crate::Context::take_error`], which every read-back calls.
    pub fn get(
        &self,
        device: &wgpu::Device,
        shader: &ShaderSource,
        entry: &'static str,
        defines: &Defines,
    ) -> Arc<wgpu::ComputePipeline> {
        let key = PipelineKey {
            shader: shader.name,
            entry,
            defines: defines.clone(),
        };
        let mut pipelines = self.pipelines.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = pipelines.get(&key) {
            return p.clone();
        }
        let mut modules = self.modules.lock().unwrap_or_else(|e| e.into_inner());
        let module = modules
            .entry((shader.name, defines.clone()))
            .or_insert_with(|| {
                device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(shader.name),
                    source: wgpu::ShaderSource::Wgsl(defines.apply(shader).into()),
                })
            });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: None,
            module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[],
                // Every kernel writes workgroup memory before reading it.
                zero_initialize_workgroup_memory: false,
            },
            cache: None,
        });
        self.compiled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pipeline = Arc::new(pipeline);
        pipelines.insert(key, pipeline.clone());
        pipeline
    }

    /// How many pipelines have been compiled (each key once).
    pub fn compiled(&self) -> usize {
        self.compiled.load(std::sync::atomic::Ordering::Relaxed)
    }
}
