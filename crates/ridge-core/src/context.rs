//! The adapter, the device and everything Ridge keeps per device.
//!
//! A [`Context`] owns one wgpu device created with the adapter's *own* limits (not WebGPU's
//! conservative defaults) and the optional features Ridge can use. It also owns the pipeline
//! cache, the command recorder that batches dispatches into few submissions, and the profiler.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::pipeline::{PipelineCache, RuntimeChecks};
use crate::recorder::Recorder;

/// Environment variable that picks an adapter: a backend name (`vulkan`, `gl`, `metal`,
/// `dx12`, `webgpu`), a case-insensitive substring of the adapter's name, or an index into the
/// list that `ridge info` prints.
pub const ADAPTER_ENV: &str = "RIDGE_ADAPTER";

/// Optional features Ridge asks for whenever the adapter has them. Cooperative matrices
/// (tensor cores) are an experimental wgpu feature; subgroup barriers and pipeline caches
/// are wgpu extensions; all three native only.
pub fn wanted_features() -> wgpu::Features {
    let all = wgpu::Features::SHADER_F16
        | wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
        | wgpu::Features::SUBGROUP;
    if cfg!(target_arch = "wasm32") {
        all
    } else {
        all | wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
            | wgpu::Features::SUBGROUP_BARRIER
            | wgpu::Features::PIPELINE_CACHE
    }
}

/// What identifies an adapter for tuning tables and reports: the same GPU, driver and backend
/// give the same fingerprint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Fingerprint {
    /// PCI vendor id (0x10de NVIDIA, 0x1002 AMD, 0x8086 Intel, 0x106b Apple; 0x10005 Mesa).
    pub vendor_id: u32,
    /// PCI device id (0 where the backend does not report one).
    pub device_id: u32,
    /// wgpu backend: `vulkan`, `gl`, `metal`, `dx12` or `webgpu`.
    pub backend: String,
    /// Driver name and version as the backend reports them.
    pub driver: String,
    /// Adapter name.
    pub name: String,
}

impl Fingerprint {
    /// The fingerprint of an adapter's info.
    pub fn of(info: &wgpu::AdapterInfo) -> Self {
        let driver = match (info.driver.is_empty(), info.driver_info.is_empty()) {
            (false, false) => format!("{} {}", info.driver, info.driver_info),
            (false, true) => info.driver.clone(),
            _ => info.driver_info.clone(),
        };
        Self {
            vendor_id: info.vendor,
            device_id: info.device,
            backend: info.backend.to_str().to_string(),
            driver,
            name: info.name.clone(),
        }
    }
}

/// Options for creating a [`Context`]. The defaults take the adapter from `RIDGE_ADAPTER` or
/// the best one present, with all its limits and every wanted feature it has.
#[derive(Clone, Debug, Default)]
pub struct ContextOptions {
    /// Adapter selector; `None` reads `RIDGE_ADAPTER`.
    pub adapter: Option<String>,
    /// Limits to request instead of the adapter's own (each is capped at the adapter's).
    /// Tests use this to exercise limit handling cheaply.
    pub limits: Option<wgpu::Limits>,
    /// Features to leave out even if the adapter has them (tests of fallbacks).
    pub without_features: wgpu::Features,
    /// The adapter's name where the backend reports none: wgpu's WebGPU backend gives empty
    /// strings, so the page passes what `GPUAdapter.info` says. It names the adapter in
    /// reports, fingerprints and tuning tables.
    pub adapter_name: Option<String>,
    /// Folder of the driver's pipeline cache (see [`crate::disk::DriverCache`]); `None`
    /// means [`crate::cache_dir`]`/pipelines`. Leaving out `PIPELINE_CACHE` in
    /// `without_features` turns the disk cache off.
    pub pipeline_cache_dir: Option<std::path::PathBuf>,
    /// Compile naga's run-time checks into the shaders even where the driver bounds buffer
    /// accesses itself (see [`RuntimeChecks`]; `RIDGE_SHADER_CHECKS=1` does the same).
    pub shader_checks: bool,
}

/// One adapter and a device on it, with Ridge's per-device state.
pub struct Context {
    adapter: wgpu::Adapter,
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    features: wgpu::Features,
    pipelines: PipelineCache,
    coop_f16: bool,
    int8_dot: bool,
    placeholder: crate::Tensor,
    buffers: Arc<crate::pool::BufferPool>,
    pub(crate) recorder: Mutex<Recorder>,
    tuning: std::sync::RwLock<Option<Arc<dyn crate::tuning::Tuning>>>,
    errors: Arc<Mutex<Vec<String>>>,
    lost: Arc<Mutex<Option<String>>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish_non_exhaustive()
    }
}

/// A new wgpu instance over every backend compiled in (`WGPU_BACKEND` can narrow it).
pub fn instance() -> wgpu::Instance {
    wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env())
}

/// Every adapter on every backend, best first (discrete before integrated before virtual
/// before CPU; native APIs before GL).
pub async fn adapters() -> Vec<wgpu::Adapter> {
    let instance = instance();
    // The browser has one adapter; ask for it directly so that a refusal reaches the console.
    #[cfg(target_arch = "wasm32")]
    let mut list = match instance.request_adapter(&Default::default()).await {
        Ok(a) => vec![a],
        Err(e) => {
            web_sys::console::error_1(&format!("Ridge: requestAdapter failed: {e}").into());
            vec![]
        }
    };
    #[cfg(not(target_arch = "wasm32"))]
    let mut list = instance.enumerate_adapters(wgpu::Backends::all()).await;
    list.sort_by_key(|a| rank(&a.get_info()));
    list
}

fn rank(info: &wgpu::AdapterInfo) -> (u8, u8) {
    let device = match info.device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    let backend = match info.backend {
        wgpu::Backend::Vulkan | wgpu::Backend::Metal | wgpu::Backend::Dx12 => 0,
        wgpu::Backend::BrowserWebGpu => 1,
        _ => 2,
    };
    (device, backend)
}

/// The adapters that `selector` picks from `list` (see [`ADAPTER_ENV`]).
pub fn select(list: Vec<wgpu::Adapter>, selector: &str) -> Vec<wgpu::Adapter> {
    let wanted = selector.trim().to_lowercase();
    if let Ok(index) = wanted.parse::<usize>() {
        return list.into_iter().nth(index).into_iter().collect();
    }
    list.into_iter()
        .filter(|a| {
            let info = a.get_info();
            info.backend.to_str() == wanted || info.name.to_lowercase().contains(&wanted)
        })
        .collect()
}

impl Context {
    /// A context on the adapter `RIDGE_ADAPTER` names, or on the best adapter present.
    ///
    /// Errors: [`Error::NoAdapter`] when none exists or none matches; [`Error::RequestDevice`]
    /// when the driver refuses a device.
    pub async fn new() -> Result<Self> {
        Self::with_options(ContextOptions::default()).await
    }

    /// A context chosen and configured by `options`.
    pub async fn with_options(options: ContextOptions) -> Result<Self> {
        let selector = options
            .adapter
            .clone()
            .or_else(|| std::env::var(ADAPTER_ENV).ok().filter(|s| !s.is_empty()));
        let all = adapters().await;
        let present = all.iter().map(|a| describe(&a.get_info())).collect();
        let candidates = match &selector {
            Some(s) => select(all, s),
            None => all,
        };
        let adapter = candidates.into_iter().next().ok_or(Error::NoAdapter {
            wanted: selector,
            present,
        })?;
        Self::on_adapter(adapter, &options).await
    }

    /// A context on a given adapter (the GPU test harness makes one per adapter present).
    pub async fn on_adapter(adapter: wgpu::Adapter, options: &ContextOptions) -> Result<Self> {
        let desc = device_descriptor(&adapter, options);
        let (device, queue) =
            adapter
                .request_device(&desc)
                .await
                .map_err(|e| Error::RequestDevice {
                    adapter: adapter.get_info().name,
                    message: e.to_string(),
                })?;
        Ok(Self::from_device(adapter, device, queue, options))
    }

    /// A context on a device that already exists, e.g. the one the dashboard's renderer
    /// shares in the browser (where an adapter gives one device). The device should have
    /// been requested with [`device_descriptor`]; Ridge uses whatever features and limits it
    /// has. Ridge installs its own uncaptured-error and device-lost handlers on it.
    pub fn from_device(
        adapter: wgpu::Adapter,
        device: wgpu::Device,
        queue: wgpu::Queue,
        options: &ContextOptions,
    ) -> Self {
        let mut info = adapter.get_info();
        if let Some(name) = options
            .adapter_name
            .as_ref()
            .filter(|_| info.name.is_empty())
        {
            info.name = name.clone();
        }
        // Errors that slip past Ridge's own validation are kept and returned by the next
        // call that waits on the GPU, instead of wgpu's default of panicking.
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = errors.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            tracing::error!("uncaptured GPU error: {e}");
            if let Ok(mut v) = sink.lock() {
                v.push(e.to_string());
            }
        }));
        let lost = Arc::new(Mutex::new(None));
        let lost_sink = lost.clone();
        device.set_device_lost_callback(move |reason, message| {
            if let Ok(mut l) = lost_sink.lock() {
                *l = Some(format!("{reason:?}: {message}"));
            }
        });

        let features = device.features();
        let limits = device.limits();
        let coop_f16 = features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
            && features.contains(wgpu::Features::SHADER_F16)
            && features.contains(wgpu::Features::SUBGROUP | wgpu::Features::SUBGROUP_BARRIER)
            && info.subgroup_min_size == 32
            && info.subgroup_max_size == 32
            && adapter.cooperative_matrix_properties().iter().any(|p| {
                (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
                    && p.ab_type == wgpu::CooperativeScalarType::F16
                    && p.cr_type == wgpu::CooperativeScalarType::F32
            });
        // naga implements WGSL's packed 4 × 8-bit dot products for every native backend; a
        // browser says whether its WGSL has them.
        #[cfg(target_arch = "wasm32")]
        let int8_dot = instance()
            .wgsl_language_features()
            .contains(wgpu::WgslLanguageFeatures::Packed4x8IntegerDotProduct);
        #[cfg(not(target_arch = "wasm32"))]
        let int8_dot = true;
        #[cfg(not(target_arch = "wasm32"))]
        let driver_cache = {
            let dir = options
                .pipeline_cache_dir
                .clone()
                .unwrap_or_else(|| crate::cache_dir().join("pipelines"));
            crate::disk::DriverCache::open(&device, &info, &dir)
        };
        #[cfg(target_arch = "wasm32")]
        let driver_cache = None;
        let placeholder = crate::Tensor::from_buffer(
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("ridge placeholder binding"),
                size: 16,
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            }),
            &[4],
            crate::DType::F32,
        );
        tracing::info!("ridge context on {}", describe(&info));
        let checks = RuntimeChecks::for_backend(info.backend, options.shader_checks);
        Self {
            adapter,
            device,
            queue,
            info,
            limits,
            features,
            pipelines: PipelineCache::new(driver_cache, checks),
            coop_f16,
            int8_dot,
            placeholder,
            buffers: Arc::default(),
            recorder: Mutex::new(Recorder::default()),
            tuning: std::sync::RwLock::new(None),
            errors,
            lost,
        }
    }

    /// The wgpu adapter.
    pub fn adapter(&self) -> &wgpu::Adapter {
        &self.adapter
    }
    /// The wgpu device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }
    /// The wgpu queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
    /// The adapter's description from the driver.
    pub fn info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }
    /// Whether the adapter is a CPU driver (lavapipe, llvmpipe, SwiftShader, WARP): kernels
    /// whose best shape differs there choose by it.
    pub fn is_cpu_driver(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }
    /// The limits the device was created with.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }
    /// The features the device was created with.
    pub fn features(&self) -> wgpu::Features {
        self.features
    }
    /// The adapter, the features and the limits of this context's device, as `ridge info`
    /// shows them.
    pub fn report(&self) -> AdapterReport {
        AdapterReport::of(&self.info, self.features, &self.limits, 0, true)
    }

    /// This adapter's fingerprint (the key of its tuning table).
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.info)
    }
    /// The pipeline cache.
    pub fn pipelines(&self) -> &PipelineCache {
        &self.pipelines
    }
    /// A small storage buffer to bind where a kernel's optional input (a bias, a mask, an
    /// affine weight) is absent: WGSL bindings must be bound even when a define disables
    /// their use.
    pub fn placeholder(&self) -> &crate::Tensor {
        &self.placeholder
    }
    pub(crate) fn buffer_pool(&self) -> &Arc<crate::pool::BufferPool> {
        &self.buffers
    }
    /// Bytes of device memory held in free, recyclable tensor buffers.
    pub fn pooled_bytes(&self) -> u64 {
        self.buffers.pooled_bytes()
    }
    /// Bytes of device memory in tensor buffers: those tensors use and the free ones.
    pub fn allocated_bytes(&self) -> u64 {
        self.buffers.allocated_bytes()
    }
    /// Gives every free tensor buffer back to the device (after a model is dropped, say);
    /// returns the bytes released. Later tensors allocate afresh.
    pub fn release_free_buffers(&self) -> u64 {
        let released = self.buffers.trim();
        self.recorder().forget_bind_groups();
        released
    }
    /// `name (backend, device type)`, for messages.
    pub fn describe(&self) -> String {
        describe(&self.info)
    }

    /// Whether WGSL `f16` storage and arithmetic are available (`shader-f16`).
    pub fn has_f16(&self) -> bool {
        self.features.contains(wgpu::Features::SHADER_F16)
    }
    /// Whether compute passes can be timed with GPU timestamps.
    pub fn has_timestamps(&self) -> bool {
        self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }
    /// Whether 16×16×16 f16 × f16 → f32 cooperative matrices (tensor cores) are available at
    /// subgroup size 32, with subgroup operations and barriers, as Ridge's tensor-core GEMM
    /// needs.
    pub fn has_coop_f16(&self) -> bool {
        self.coop_f16
    }
    /// Whether WGSL's packed 4 × 8-bit integer dot products (`dot4I8Packed`, the language
    /// feature `packed_4x8_integer_dot_product`) compile here: always natively (naga), where
    /// the browser has them on the web.
    pub fn has_int8_dot(&self) -> bool {
        self.int8_dot
    }
    /// Whether WGSL subgroup operations are available.
    pub fn has_subgroups(&self) -> bool {
        self.features.contains(wgpu::Features::SUBGROUP)
    }
    /// Whether `subgroupBarrier()` is available (a native wgpu extension).
    pub fn has_subgroup_barrier(&self) -> bool {
        self.features.contains(wgpu::Features::SUBGROUP_BARRIER)
    }

    /// Installs the tuning table the kernels consult (`None` leaves them to their
    /// heuristics).
    pub fn set_tuning(&self, tuning: Option<Arc<dyn crate::tuning::Tuning>>) {
        *self.tuning.write().unwrap_or_else(|e| e.into_inner()) = tuning;
    }

    /// The tuning installed (tables, or the autotuner's fixed candidate), if any.
    pub fn tuning(&self) -> Option<Arc<dyn crate::tuning::Tuning>> {
        self.tuning
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The tuned variant for `op` on `shape` and `dtype`, if a table is installed and has one.
    pub fn tuned(
        &self,
        op: &str,
        shape: &[usize],
        dtype: crate::DType,
    ) -> Option<crate::tuning::VariantParams> {
        let tuning = self.tuning.read().unwrap_or_else(|e| e.into_inner());
        tuning.as_ref()?.variant(op, shape, dtype)
    }

    /// Errors with [`Error::MissingFeature`] unless the device has `feature`.
    pub fn require(&self, what: &str, feature: wgpu::Features) -> Result<()> {
        if self.features.contains(feature) {
            return Ok(());
        }
        Err(Error::MissingFeature {
            what: what.to_string(),
            feature: feature_name(feature),
            // Name and backend: one GPU can be present through two backends (lavapipe's
            // Vulkan has shader-f16, llvmpipe's GL does not).
            adapter: format!("{} ({})", self.info.name, self.info.backend.to_str()),
        })
    }

    /// Errors with [`Error::LimitExceeded`] unless `bytes` fit one storage-buffer binding.
    pub fn check_binding(&self, what: &str, bytes: u64) -> Result<()> {
        let allowed = self.limits.max_storage_buffer_binding_size;
        if bytes > allowed {
            return Err(Error::LimitExceeded {
                what: what.to_string(),
                limit: "maxStorageBufferBindingSize",
                requested: bytes,
                allowed,
            });
        }
        Ok(())
    }

    /// Spreads `total` workgroups over the x, y and z dimensions of a dispatch so that none
    /// exceeds `maxComputeWorkgroupsPerDimension` (65,535 on most adapters). Kernels rebuild
    /// the linear index as `x + y·nx + z·nx·ny` and skip indices ≥ `total`.
    ///
    /// Errors: [`Error::LimitExceeded`] when even x·y·z at the limit cannot hold `total`.
    pub fn fold_workgroups(&self, what: &str, total: u64) -> Result<[u32; 3]> {
        fold_workgroups(
            what,
            total,
            self.limits.max_compute_workgroups_per_dimension,
        )
    }

    /// Returns the first GPU error recorded since the last check (device lost, or a wgpu
    /// validation error that Ridge's own checks missed), and clears the rest.
    pub fn take_error(&self) -> Result<()> {
        if let Some(lost) = self.lost.lock().ok().and_then(|l| l.clone()) {
            return Err(Error::DeviceLost(lost));
        }
        let mut errors = self
            .errors
            .lock()
            .map_err(|_| Error::Gpu("poisoned".into()))?;
        match errors.drain(..).next() {
            Some(first) => Err(Error::Gpu(first)),
            None => Ok(()),
        }
    }

    /// Blocks until the GPU has finished all submitted work (native only; in the browser
    /// the event loop drives completion and this returns at once).
    pub fn wait(&self) -> Result<()> {
        self.poll(None)
    }

    /// Blocks until the GPU has finished submission `index` (from [`Context::submit`]), not
    /// the work submitted after it (native only, as [`Context::wait`]).
    pub fn wait_for(&self, index: wgpu::SubmissionIndex) -> Result<()> {
        self.poll(Some(index))
    }

    fn poll(&self, submission_index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index,
                timeout: None,
            })
            .map_err(|e| Error::DeviceLost(e.to_string()))?;
        #[cfg(target_arch = "wasm32")]
        let _ = submission_index;
        self.take_error()
    }
}

/// The device Ridge requests on `adapter`: the adapter's own limits (or `options.limits`,
/// capped by them) and every feature of [`wanted_features`] it has, less
/// `options.without_features`.
pub fn device_descriptor(
    adapter: &wgpu::Adapter,
    options: &ContextOptions,
) -> wgpu::DeviceDescriptor<'static> {
    let own = adapter.limits();
    let limits = match &options.limits {
        Some(wanted) => wanted.clone().or_worse_values_from(&own),
        None => own,
    };
    let features = adapter.features() & wanted_features() & !options.without_features;
    let experimental = if features.contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX) {
        // SAFETY: wgpu's experimental features may have bugs; Ridge uses only cooperative
        // matrices, in one kernel whose results the GPU tests check against f64.
        unsafe { wgpu::ExperimentalFeatures::enabled() }
    } else {
        wgpu::ExperimentalFeatures::disabled()
    };
    wgpu::DeviceDescriptor {
        label: Some("ridge"),
        required_features: features,
        required_limits: limits,
        experimental_features: experimental,
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }
}

/// See [`Context::fold_workgroups`].
pub fn fold_workgroups(what: &str, total: u64, per_dim: u32) -> Result<[u32; 3]> {
    let l = per_dim.max(1) as u64;
    if total == 0 {
        return Ok([0, 0, 0]);
    }
    let x = total.min(l);
    let rest = total.div_ceil(x);
    let y = rest.min(l);
    let z = rest.div_ceil(y);
    if z > l {
        return Err(Error::LimitExceeded {
            what: what.to_string(),
            limit: "maxComputeWorkgroupsPerDimension³",
            requested: total,
            allowed: l * l * l,
        });
    }
    Ok([x as u32, y as u32, z as u32])
}

/// `name (backend, device type)`.
pub fn describe(info: &wgpu::AdapterInfo) -> String {
    format!(
        "{} ({}, {:?})",
        info.name,
        info.backend.to_str(),
        info.device_type
    )
}

/// What `ridge info` and the browser page show of an adapter: identity, the optional features
/// Ridge uses, subgroup sizes and the limits that bound its kernels (WebGPU's limit names,
/// W3C WebGPU §3.6.2 "Limits").
#[derive(Clone, Debug, Serialize)]
pub struct AdapterReport {
    /// Position in the enumeration.
    pub index: usize,
    /// Whether Ridge uses this adapter.
    pub selected: bool,
    /// Adapter name.
    pub name: String,
    /// wgpu backend.
    pub backend: String,
    /// Discrete, integrated, CPU, …
    pub device_type: String,
    /// What tuning tables key on.
    pub fingerprint: Fingerprint,
    /// WebGPU names of the optional features Ridge uses that the adapter has.
    pub features: Vec<&'static str>,
    /// Smallest and largest subgroup size, invocations.
    pub subgroup_size: [u32; 2],
    /// `(WebGPU limit name, value)`.
    pub limits: Vec<(&'static str, u64)>,
    /// Whether naga's run-time checks are compiled into Ridge's shaders on this backend.
    pub shader_checks: RuntimeChecks,
}

impl AdapterReport {
    /// The report of an adapter with these features and limits.
    pub fn of(
        info: &wgpu::AdapterInfo,
        features: wgpu::Features,
        limits: &wgpu::Limits,
        index: usize,
        selected: bool,
    ) -> Self {
        Self {
            index,
            selected,
            name: info.name.clone(),
            backend: info.backend.to_str().to_string(),
            device_type: format!("{:?}", info.device_type),
            fingerprint: Fingerprint::of(info),
            features: REPORTED_FEATURES
                .iter()
                .filter(|f| features.contains(**f))
                .map(|f| feature_name(*f))
                .collect(),
            subgroup_size: [info.subgroup_min_size, info.subgroup_max_size],
            limits: report_limits(limits),
            shader_checks: RuntimeChecks::for_backend(info.backend, false),
        }
    }
}

const REPORTED_FEATURES: [wgpu::Features; 8] = [
    wgpu::Features::SHADER_F16,
    wgpu::Features::TIMESTAMP_QUERY,
    wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES,
    wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS,
    wgpu::Features::SUBGROUP,
    wgpu::Features::SUBGROUP_BARRIER,
    wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX,
    wgpu::Features::PIPELINE_CACHE,
];

fn report_limits(l: &wgpu::Limits) -> Vec<(&'static str, u64)> {
    vec![
        (
            "maxStorageBufferBindingSize",
            l.max_storage_buffer_binding_size,
        ),
        ("maxBufferSize", l.max_buffer_size),
        (
            "maxComputeWorkgroupStorageSize",
            l.max_compute_workgroup_storage_size as u64,
        ),
        (
            "maxComputeInvocationsPerWorkgroup",
            l.max_compute_invocations_per_workgroup as u64,
        ),
        (
            "maxComputeWorkgroupSizeX",
            l.max_compute_workgroup_size_x as u64,
        ),
        (
            "maxComputeWorkgroupSizeY",
            l.max_compute_workgroup_size_y as u64,
        ),
        (
            "maxComputeWorkgroupsPerDimension",
            l.max_compute_workgroups_per_dimension as u64,
        ),
        (
            "maxStorageBuffersPerShaderStage",
            l.max_storage_buffers_per_shader_stage as u64,
        ),
        (
            "maxUniformBufferBindingSize",
            l.max_uniform_buffer_binding_size,
        ),
    ]
}

/// WebGPU's name for a single feature flag.
pub fn feature_name(feature: wgpu::Features) -> &'static str {
    match feature {
        f if f == wgpu::Features::SHADER_F16 => "shader-f16",
        f if f == wgpu::Features::TIMESTAMP_QUERY => "timestamp-query",
        f if f == wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES => "timestamp-query-inside-passes",
        f if f == wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS => {
            "timestamp-query-inside-encoders"
        }
        f if f == wgpu::Features::SUBGROUP => "subgroups",
        f if f == wgpu::Features::SUBGROUP_BARRIER => "subgroup-barrier (native)",
        f if f == wgpu::Features::PIPELINE_CACHE => "pipeline-cache (native)",
        f if f == wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX => {
            "cooperative-matrix (experimental)"
        }
        _ => "unnamed feature",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_keeps_every_dimension_within_the_limit() {
        for (total, l) in [
            (1u64, 65535u32),
            (65535, 65535),
            (65536, 65535),
            (10, 3),
            (27, 3),
        ] {
            let [x, y, z] = fold_workgroups("t", total, l).unwrap();
            assert!(x <= l && y <= l && z <= l, "{total} {l}: {x} {y} {z}");
            let cap = x as u64 * y as u64 * z as u64;
            assert!(cap >= total, "{total}: {x}·{y}·{z} too small");
            // no whole slab of the grid is wasted
            assert!(
                cap - total < x as u64 * y as u64,
                "{total}: {x}·{y}·{z} too large"
            );
        }
        assert_eq!(fold_workgroups("t", 0, 8).unwrap(), [0, 0, 0]);
        assert!(matches!(
            fold_workgroups("t", 28, 3),
            Err(Error::LimitExceeded { .. })
        ));
    }
}
