//! Compute pipelines, compiled once per (shader, defines, entry point, override constants).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::disk::DriverCache;

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
///
/// Cheap to clone, hash and compare once built: the text is shared, its hash computed once,
/// and clones of one value compare by pointer. A GEMM's generated blocks run to tens of
/// kilobytes, and the pipeline lookup of every launch hashes and compares its defines
/// (kernels that generate blocks memoize their defines, [`Defines`] clones included).
#[derive(Clone, Debug, Default)]
pub struct Defines(Arc<DefinesText>);

#[derive(Clone, Debug, Default)]
struct DefinesText {
    enables: Vec<&'static str>,
    lines: Vec<String>,
    blocks: Vec<(String, String)>,
    hash: std::sync::OnceLock<u64>,
}

impl DefinesText {
    fn parts(&self) -> (&[&'static str], &[String], &[(String, String)]) {
        (&self.enables, &self.lines, &self.blocks)
    }
}

impl PartialEq for Defines {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.parts() == other.0.parts()
    }
}

impl Eq for Defines {}

impl std::hash::Hash for Defines {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let h = self.0.hash.get_or_init(|| {
            use std::hash::{BuildHasher, BuildHasherDefault};
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default()
                .hash_one(self.0.parts())
        });
        state.write_u64(*h);
    }
}

impl Defines {
    /// No defines.
    pub fn new() -> Self {
        Self::default()
    }
    /// The text to change, its cached hash dropped.
    fn text(&mut self) -> &mut DefinesText {
        let t = Arc::make_mut(&mut self.0);
        t.hash = std::sync::OnceLock::new();
        t
    }
    /// Adds `enable name;` (e.g. `f16`), once.
    pub fn enable(mut self, name: &'static str) -> Self {
        if !self.0.enables.contains(&name) {
            self.text().enables.push(name);
        }
        self
    }
    /// Adds `alias name = ty;`.
    pub fn alias(mut self, name: &str, ty: &str) -> Self {
        self.text().lines.push(format!("alias {name} = {ty};"));
        self
    }
    /// Adds `const name: u32 = value;`.
    pub fn u32(mut self, name: &str, value: u32) -> Self {
        self.text()
            .lines
            .push(format!("const {name}: u32 = {value}u;"));
        self
    }
    /// Adds `const name: bool = value;`.
    pub fn bool(mut self, name: &str, value: bool) -> Self {
        self.text()
            .lines
            .push(format!("const {name}: bool = {value};"));
        self
    }
    /// Replaces the line `//@name` in the body with `code`.
    pub fn block(mut self, name: &str, code: String) -> Self {
        self.text().blocks.push((format!("//@{name}"), code));
        self
    }
    /// The WGSL text to prepend.
    pub fn header(&self) -> String {
        let mut s = String::new();
        for e in &self.0.enables {
            s.push_str(&format!("enable {e};\n"));
        }
        for l in &self.0.lines {
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
            match self
                .0
                .blocks
                .iter()
                .find(|(marker, _)| line.trim() == marker)
            {
                Some((_, code)) => body.push_str(code),
                None => body.push_str(line),
            }
            body.push('\n');
        }
        // Browsers compile subgroup built-ins only under `enable subgroups;` (naga here has
        // no such directive); Ridge builds such code only for devices with subgroups.
        let subgroups = if cfg!(target_arch = "wasm32") && uses_subgroups(&body) {
            "enable subgroups;\n"
        } else {
            ""
        };
        format!(
            "// {}.wgsl with Ridge defines\n{subgroups}{}\n{}",
            shader.name,
            self.header(),
            body
        )
    }
}

/// Whether WGSL code calls a subgroup built-in or reads a subgroup built-in value (comments
/// aside).
pub fn uses_subgroups(wgsl: &str) -> bool {
    wgsl.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .any(|code| code.contains("subgroup"))
}

#[cfg(test)]
mod subgroup_tests {
    /// A comment naming subgroups is not a use; a built-in call or value is.
    #[test]
    fn subgroup_use_ignores_comments() {
        assert!(!super::uses_subgroups("// subgroup shuffles\nlet x = 1;"));
        assert!(super::uses_subgroups("let m = subgroupShuffleXor(v, 1u);"));
        assert!(super::uses_subgroups("@builtin(subgroup_size) n: u32,"));
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
/// With a [`DriverCache`] the driver's compiled code is kept on disk too: saved by
/// [`PipelineCache::save`] and, best effort, when the cache is dropped.
#[derive(Default)]
pub struct PipelineCache {
    modules: Mutex<HashMap<(&'static str, Defines), wgpu::ShaderModule>>,
    pipelines: Mutex<HashMap<PipelineKey, Arc<wgpu::ComputePipeline>>>,
    compiled: AtomicUsize,
    driver: Option<DriverCache>,
    saved: AtomicUsize,
    checks: RuntimeChecks,
    sources: Mutex<Vec<CompiledSource>>,
}

/// The WGSL one pipeline was compiled from, and its entry point ([`PipelineCache::sources`]).
#[derive(Clone, Debug)]
pub struct CompiledSource {
    /// File stem of the shader, e.g. `gemm`.
    pub shader: &'static str,
    /// Entry point.
    pub entry: &'static str,
    /// The whole WGSL source, defines applied.
    pub wgsl: String,
}

/// Whether naga adds its own run-time checks to Ridge's shaders: array indices clamped
/// (workgroup and private arrays, and buffers where the driver has no robust access), every
/// loop given an iteration bound, integer division guarded against zero.
///
/// [`RuntimeChecks::Driver`] leaves them out where the driver itself keeps buffer accesses in
/// bounds: Vulkan, whose `robustBufferAccess` wgpu enables (Vulkan 1.3 spec, §"Robust Buffer
/// Access"). Ridge's kernels are its own, index workgroup memory within bounds by
/// construction, bound every loop by a shape, and divide only by non-zero shapes, and the
/// tests run them this way on lavapipe. A clamp costs an integer instruction and an address
/// computation on every workgroup-memory read of the inner loops (benches/NOTES.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeChecks {
    /// naga's checks everywhere (wgpu's default).
    #[default]
    Naga,
    /// No naga checks; buffer robustness left to the driver. Only for Vulkan.
    Driver,
}

impl RuntimeChecks {
    /// Environment variable that forces naga's checks on (`1`), e.g. to rule them out when
    /// hunting a wrong result.
    pub const ENV: &'static str = "RIDGE_SHADER_CHECKS";

    /// [`RuntimeChecks::Driver`] on Vulkan unless `forced` or `RIDGE_SHADER_CHECKS=1`; naga's
    /// checks elsewhere.
    pub fn for_backend(backend: wgpu::Backend, forced: bool) -> Self {
        let forced = forced || std::env::var(Self::ENV).is_ok_and(|v| v == "1");
        if backend == wgpu::Backend::Vulkan && !forced {
            Self::Driver
        } else {
            Self::Naga
        }
    }
}

impl PipelineCache {
    /// An empty cache compiling through `driver` when given, with `checks`.
    pub fn new(driver: Option<DriverCache>, checks: RuntimeChecks) -> Self {
        Self {
            modules: Mutex::default(),
            pipelines: Mutex::default(),
            compiled: AtomicUsize::new(0),
            driver,
            saved: AtomicUsize::new(0),
            checks,
            sources: Mutex::default(),
        }
    }

    /// Every pipeline compiled so far, in order, from `first` on (the count
    /// [`PipelineCache::compiled`] returned before): what a tool that inspects the driver's
    /// compiled code (registers, spills) compiles again.
    pub fn sources(&self, first: usize) -> Vec<CompiledSource> {
        let sources = self.sources.lock().unwrap_or_else(|e| e.into_inner());
        sources.get(first..).unwrap_or_default().to_vec()
    }

    /// The run-time checks compiled into the shaders.
    pub fn checks(&self) -> RuntimeChecks {
        self.checks
    }

    /// The driver's on-disk pipeline cache, where the backend has one.
    pub fn driver(&self) -> Option<&DriverCache> {
        self.driver.as_ref()
    }

    /// Saves the driver's cache if pipelines were compiled since the last save; returns the
    /// file written.
    ///
    /// Errors: the file system's.
    pub fn save(&self) -> std::io::Result<Option<&std::path::Path>> {
        let compiled = self.compiled();
        match &self.driver {
            Some(d) if self.saved.swap(compiled, Ordering::Relaxed) != compiled => {
                d.save()?;
                Ok(Some(d.path()))
            }
            _ => Ok(None),
        }
    }

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
                let desc = wgpu::ShaderModuleDescriptor {
                    label: Some(shader.name),
                    source: wgpu::ShaderSource::Wgsl(defines.apply(shader).into()),
                };
                match self.checks {
                    RuntimeChecks::Naga => device.create_shader_module(desc),
                    // SAFETY: only chosen on Vulkan, where the driver keeps buffer accesses
                    // in bounds; Ridge's shaders index workgroup and private arrays in
                    // bounds, end every loop and never divide by zero (RuntimeChecks).
                    RuntimeChecks::Driver => unsafe {
                        device.create_shader_module_trusted(
                            desc,
                            wgpu::ShaderRuntimeChecks::unchecked(),
                        )
                    },
                }
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
            cache: self.driver.as_ref().map(DriverCache::cache),
        });
        self.compiled.fetch_add(1, Ordering::Relaxed);
        self.sources
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(CompiledSource {
                shader: shader.name,
                entry,
                wgsl: defines.apply(shader),
            });
        let pipeline = Arc::new(pipeline);
        pipelines.insert(key, pipeline.clone());
        pipeline
    }

    /// How many pipelines have been compiled (each key once).
    pub fn compiled(&self) -> usize {
        self.compiled.load(Ordering::Relaxed)
    }
}

impl Drop for PipelineCache {
    fn drop(&mut self) {
        if let Err(e) = self.save() {
            tracing::debug!("pipeline cache not saved: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, RandomState};

    /// Defines built twice alike are equal and hash alike (the pipeline cache finds the one
    /// pipeline); one more define, or a changed block, makes them differ; a clone taken before
    /// a change is not changed with it.
    #[test]
    fn defines_compare_by_content_and_hash_alike() {
        let build = |code: &str| {
            Defines::new()
                .enable("f16")
                .alias("T", "f16")
                .u32("BM", 64)
                .block("FMA", code.to_string())
        };
        let h = RandomState::new();
        let (a, b) = (build("acc += x;"), build("acc += x;"));
        assert_eq!(a, b);
        assert_eq!(h.hash_one(&a), h.hash_one(&b));
        assert_eq!(a.clone(), a);
        assert_ne!(a, build("acc -= x;"));
        let before = a.clone();
        let more = a.bool("GELU", true);
        assert_ne!(more, before);
        assert_ne!(h.hash_one(&more), h.hash_one(&before));
        assert!(!before.header().contains("GELU") && more.header().contains("GELU"));
    }

    #[test]
    fn checks_are_left_out_only_on_vulkan_and_only_unless_forced() {
        // (The environment variable is not set in tests; forcing takes its path.)
        assert_eq!(
            RuntimeChecks::for_backend(wgpu::Backend::Vulkan, false),
            RuntimeChecks::Driver
        );
        assert_eq!(
            RuntimeChecks::for_backend(wgpu::Backend::Vulkan, true),
            RuntimeChecks::Naga
        );
        for backend in [
            wgpu::Backend::Metal,
            wgpu::Backend::Dx12,
            wgpu::Backend::Gl,
            wgpu::Backend::BrowserWebGpu,
        ] {
            assert_eq!(
                RuntimeChecks::for_backend(backend, false),
                RuntimeChecks::Naga
            );
        }
    }
}
