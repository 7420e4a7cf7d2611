//! A reader of GGUF, llama.cpp's model file (spec: `ggml/docs/gguf.md` in the ggml
//! repository; versions 2 and 3, little-endian).
//!
//! Layout: magic `GGUF`, version (u32), tensor count and metadata count (u64), the metadata
//! (key string, value type u32, value), the tensor infos (name, dimension count u32, the
//! dimensions u64 innermost first, ggml type u32, data offset u64 relative to the data
//! section), padding to `general.alignment` (default 32), then the tensor data.
//!
//! Every count, length and offset in a file is untrusted: each is checked against the bytes
//! that remain before anything is allocated from it, so a corrupt or hostile file gets a
//! [`GgufError`] naming the problem, never a panic or a huge allocation. The tensor data is
//! not copied: [`Gguf::data`] borrows it from the (memory-mapped) file.

use std::collections::HashMap;

use crate::file::FileBytes;

/// Why a file is not a GGUF file Ridge can read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GgufError {
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: it starts with {found:?}, not \"GGUF\"")]
    Magic {
        /// The first bytes found.
        found: String,
    },
    /// A version other than 2 or 3 (1 used 32-bit counts and is obsolete).
    #[error("GGUF version {0} is not supported (Ridge reads versions 2 and 3)")]
    Version(u32),
    /// The file ends inside the header.
    #[error("truncated: {what} at byte {offset} needs {need} bytes, the file has {len}")]
    Truncated {
        /// What was being read.
        what: String,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        need: u64,
        /// The file's length.
        len: u64,
    },
    /// A count that the file's size cannot hold (it would otherwise allocate from it).
    #[error("{what}: a count of {count} cannot fit in the {left} bytes left in the file")]
    Count {
        /// What is counted.
        what: String,
        /// The count read.
        count: u64,
        /// Bytes left after it.
        left: u64,
    },
    /// A malformed value: bad UTF-8, an unknown value type, a bool other than 0 or 1, …
    #[error("{what}: {message}")]
    Invalid {
        /// What holds it.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// A metadata key or tensor name given twice.
    #[error("{0:?} appears twice")]
    Duplicate(String),
    /// A tensor's ggml type id that ggml does not define.
    #[error("tensor {tensor:?} has ggml type id {id}, which is not a ggml type")]
    UnknownType {
        /// The tensor.
        tensor: String,
        /// The type id.
        id: u32,
    },
    /// A tensor's dimensions are empty, zero, more than 4, overflow, or not whole blocks.
    #[error("tensor {tensor:?}: {message}")]
    Shape {
        /// The tensor.
        tensor: String,
        /// What is wrong.
        message: String,
    },
    /// A tensor's data lies (partly) outside the file or is misaligned.
    #[error(
        "tensor {tensor:?}: its data at bytes {start}..{end} lies outside the file of {len} bytes"
    )]
    OutOfBounds {
        /// The tensor.
        tensor: String,
        /// First byte (absolute).
        start: u64,
        /// One past the last byte (absolute).
        end: u64,
        /// The file's length.
        len: u64,
    },
    /// Two tensors' data share bytes: a writer lays each tensor out after the one before
    /// (ggml's `gguf_init_from_file` expects every offset to follow its predecessor's end), so
    /// a shared range is a corrupt table, and one tensor's weights would be read as another's.
    #[error(
        "tensors {first:?} (bytes {first_start}..{first_end}) and {second:?} (from byte \
         {second_start}) share data: the tensor table is corrupt"
    )]
    Overlap {
        /// The tensor that starts first.
        first: String,
        /// Its first byte (absolute).
        first_start: u64,
        /// One past its last byte.
        first_end: u64,
        /// The tensor whose data starts inside it.
        second: String,
        /// Its first byte.
        second_start: u64,
    },
}

/// A ggml tensor type: its id in GGUF files, name, and block geometry (elements per block,
/// bytes per block), from ggml's `ggml_type_traits` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType {
    /// The id stored in GGUF files.
    pub id: u32,
    /// ggml's name (`Q4_0`, `F32`, …).
    pub name: &'static str,
    /// Elements per block (1 for plain types).
    pub block: u64,
    /// Bytes per block.
    pub block_bytes: u64,
}

/// ggml's types by id (ids 4, 5 and 31–33, 36–38 are retired and absent).
const GGML_TYPES: &[GgmlType] = &[
    t(0, "F32", 1, 4),
    t(1, "F16", 1, 2),
    t(2, "Q4_0", 32, 18),
    t(3, "Q4_1", 32, 20),
    t(6, "Q5_0", 32, 22),
    t(7, "Q5_1", 32, 24),
    t(8, "Q8_0", 32, 34),
    t(9, "Q8_1", 32, 36),
    t(10, "Q2_K", 256, 84),
    t(11, "Q3_K", 256, 110),
    t(12, "Q4_K", 256, 144),
    t(13, "Q5_K", 256, 176),
    t(14, "Q6_K", 256, 210),
    t(15, "Q8_K", 256, 292),
    t(16, "IQ2_XXS", 256, 66),
    t(17, "IQ2_XS", 256, 74),
    t(18, "IQ3_XXS", 256, 98),
    t(19, "IQ1_S", 256, 50),
    t(20, "IQ4_NL", 32, 18),
    t(21, "IQ3_S", 256, 110),
    t(22, "IQ2_S", 256, 82),
    t(23, "IQ4_XS", 256, 136),
    t(24, "I8", 1, 1),
    t(25, "I16", 1, 2),
    t(26, "I32", 1, 4),
    t(27, "I64", 1, 8),
    t(28, "F64", 1, 8),
    t(29, "IQ1_M", 256, 56),
    t(30, "BF16", 1, 2),
    t(34, "TQ1_0", 256, 54),
    t(35, "TQ2_0", 256, 66),
    t(39, "MXFP4", 32, 17),
];

const fn t(id: u32, name: &'static str, block: u64, block_bytes: u64) -> GgmlType {
    GgmlType {
        id,
        name,
        block,
        block_bytes,
    }
}

impl GgmlType {
    /// The type with GGUF id `id`, if ggml defines it.
    pub fn from_id(id: u32) -> Option<Self> {
        GGML_TYPES.iter().copied().find(|t| t.id == id)
    }

    /// The type named `name` (`Q4_0`, …), if ggml defines it.
    pub fn from_name(name: &str) -> Option<Self> {
        GGML_TYPES.iter().copied().find(|t| t.name == name)
    }

    /// Bytes of `elements` values, `None` unless they are whole blocks (or on overflow).
    pub fn bytes(&self, elements: u64) -> Option<u64> {
        if !elements.is_multiple_of(self.block) {
            return None;
        }
        (elements / self.block).checked_mul(self.block_bytes)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `UINT8`.
    U8(u8),
    /// `INT8`.
    I8(i8),
    /// `UINT16`.
    U16(u16),
    /// `INT16`.
    I16(i16),
    /// `UINT32`.
    U32(u32),
    /// `INT32`.
    I32(i32),
    /// `FLOAT32`.
    F32(f32),
    /// `BOOL`.
    Bool(bool),
    /// `STRING` (UTF-8).
    String(String),
    /// `ARRAY`: values of one type (arrays may nest).
    Array(Vec<Value>),
    /// `UINT64`.
    U64(u64),
    /// `INT64`.
    I64(i64),
    /// `FLOAT64`.
    F64(f64),
}

impl Value {
    /// The GGUF type name (`UINT32`, `STRING`, …).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::U8(_) => "UINT8",
            Value::I8(_) => "INT8",
            Value::U16(_) => "UINT16",
            Value::I16(_) => "INT16",
            Value::U32(_) => "UINT32",
            Value::I32(_) => "INT32",
            Value::F32(_) => "FLOAT32",
            Value::Bool(_) => "BOOL",
            Value::String(_) => "STRING",
            Value::Array(_) => "ARRAY",
            Value::U64(_) => "UINT64",
            Value::I64(_) => "INT64",
            Value::F64(_) => "FLOAT64",
        }
    }

    /// An integer of any width, if this is one and it is ≥ 0.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// A float of either width (or an integer), as f64.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v as f64),
            _ => self.as_u64().map(|v| v as f64),
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements, if this is an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(v) => Some(v),
            _ => None,
        }
    }
}

/// One tensor's description.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight`, …).
    pub name: String,
    /// Dimensions as GGUF stores them, innermost (contiguous) first: a `[rows, cols]`
    /// matrix is `[cols, rows]`.
    pub dims: Vec<u64>,
    /// Storage type.
    pub ggml_type: GgmlType,
    /// Absolute byte offset of its data in the file.
    pub start: u64,
    /// Bytes of data.
    pub bytes: u64,
}

impl TensorInfo {
    /// The shape outermost first (row-major), as the rest of Ridge writes shapes.
    pub fn shape(&self) -> Vec<usize> {
        self.dims.iter().rev().map(|&d| d as usize).collect()
    }

    /// Number of elements.
    pub fn elements(&self) -> u64 {
        self.dims.iter().product()
    }
}

/// [`GgufError::Overlap`] for the first two tensors (by start) whose data ranges intersect;
/// tensors of no bytes cannot exist (a zero dimension is refused before).
fn overlap(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut by_start: Vec<&TensorInfo> = tensors.iter().collect();
    by_start.sort_by_key(|t| t.start);
    for pair in by_start.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.start < a.start + a.bytes {
            return Err(GgufError::Overlap {
                first: a.name.clone(),
                first_start: a.start,
                first_end: a.start + a.bytes,
                second: b.name.clone(),
                second_start: b.start,
            });
        }
    }
    Ok(())
}

/// A parsed GGUF file: metadata, tensor infos, and the file's bytes.
pub struct Gguf {
    file: FileBytes,
    /// The format version (2 or 3).
    pub version: u32,
    metadata: Vec<(String, Value)>,
    keys: HashMap<String, usize>,
    tensors: Vec<TensorInfo>,
    names: HashMap<String, usize>,
    /// Alignment of the tensor data (`general.alignment`, default 32).
    pub alignment: u64,
}

/// Arrays nested deeper than this are refused (the spec allows nesting; no model uses more
/// than one level).
const MAX_DEPTH: usize = 4;
/// Dimensions per tensor (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

impl Gguf {
    /// Parses the header of `file` and checks every tensor's type, shape and data range.
    ///
    /// Errors: [`GgufError`] naming the first problem found.
    pub fn parse(file: FileBytes) -> Result<Self, GgufError> {
        let mut r = Reader {
            bytes: file.bytes(),
            at: 0,
        };
        let magic = r.take("the magic", 4)?;
        if magic != b"GGUF" {
            return Err(GgufError::Magic {
                found: String::from_utf8_lossy(magic).into_owned(),
            });
        }
        let version = r.u32("the version")?;
        if !(2..=3).contains(&version) {
            return Err(GgufError::Version(version));
        }
        let tensor_count = r.u64("the tensor count")?;
        let kv_count = r.u64("the metadata count")?;
        // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info
        // at least 8 + 4 + 8 + 4 + 8.
        r.fits("metadata entries", kv_count, 13)?;
        let mut metadata = Vec::with_capacity(kv_count as usize);
        let mut keys = HashMap::with_capacity(kv_count as usize);
        for i in 0..kv_count {
            let key = r.string(&format!("metadata key {i}"))?;
            let ty = r.u32(&format!("the type of {key:?}"))?;
            let value = r.value(&key, ty, 0)?;
            if keys.insert(key.clone(), metadata.len()).is_some() {
                return Err(GgufError::Duplicate(key));
            }
            metadata.push((key, value));
        }
        let alignment = match keys.get("general.alignment").map(|&i| &metadata[i].1) {
            None => 32,
            Some(Value::U32(a)) if *a > 0 && a.is_power_of_two() => u64::from(*a),
            Some(v) => {
                return Err(GgufError::Invalid {
                    what: "general.alignment".into(),
                    message: format!("{v:?} is not a power of two as UINT32"),
                });
            }
        };
        r.fits("tensor infos", tensor_count, 32)?;
        let mut infos = Vec::with_capacity(tensor_count as usize);
        for i in 0..tensor_count {
            let name = r.string(&format!("tensor name {i}"))?;
            let n_dims = r.u32(&format!("the dimension count of {name:?}"))?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(GgufError::Shape {
                    tensor: name,
                    message: format!("{n_dims} dimensions (ggml allows 1 to {MAX_DIMS})"),
                });
            }
            let dims = (0..n_dims)
                .map(|_| r.u64(&format!("the dimensions of {name:?}")))
                .collect::<Result<Vec<_>, _>>()?;
            let id = r.u32(&format!("the type of {name:?}"))?;
            let offset = r.u64(&format!("the data offset of {name:?}"))?;
            infos.push((name, dims, id, offset));
        }
        let data_start = r.at.div_ceil(alignment as usize) as u64 * alignment;
        let len = file.bytes().len() as u64;
        let mut tensors = Vec::with_capacity(infos.len());
        let mut names = HashMap::with_capacity(infos.len());
        for (name, dims, id, offset) in infos {
            let ggml_type = GgmlType::from_id(id).ok_or_else(|| GgufError::UnknownType {
                tensor: name.clone(),
                id,
            })?;
            let shape_err = |message: String| GgufError::Shape {
                tensor: name.clone(),
                message,
            };
            if dims.contains(&0) {
                return Err(shape_err(format!("a zero dimension in {dims:?}")));
            }
            let elements = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .ok_or_else(|| shape_err(format!("{dims:?} overflows")))?;
            if !dims[0].is_multiple_of(ggml_type.block) {
                return Err(shape_err(format!(
                    "rows of {} values are not whole {ggml_type} blocks of {}",
                    dims[0], ggml_type.block
                )));
            }
            let bytes = ggml_type
                .bytes(elements)
                .ok_or_else(|| shape_err(format!("{dims:?} overflows")))?;
            if !offset.is_multiple_of(alignment) {
                return Err(shape_err(format!(
                    "data offset {offset} is not a multiple of the alignment {alignment}"
                )));
            }
            let start = data_start.checked_add(offset);
            let end = start.and_then(|s| s.checked_add(bytes));
            match (start, end) {
                (Some(start), Some(end)) if end <= len => {
                    if names.insert(name.clone(), tensors.len()).is_some() {
                        return Err(GgufError::Duplicate(name));
                    }
                    tensors.push(TensorInfo {
                        name,
                        dims,
                        ggml_type,
                        start,
                        bytes,
                    });
                }
                _ => {
                    return Err(GgufError::OutOfBounds {
                        tensor: name,
                        start: start.unwrap_or(u64::MAX),
                        end: end.unwrap_or(u64::MAX),
                        len,
                    });
                }
            }
        }
        overlap(&tensors)?;
        Ok(Self {
            file,
            version,
            metadata,
            keys,
            tensors,
            names,
            alignment,
        })
    }

    /// The path that names the file in errors.
    pub fn path(&self) -> &std::path::Path {
        self.file.path()
    }

    /// The metadata value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.keys.get(key).map(|&i| &self.metadata[i].1)
    }

    /// Every metadata entry, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.metadata
    }

    /// Every tensor, in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.names.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of a tensor of this file (checked against the file's length at parse time).
    pub fn data(&self, info: &TensorInfo) -> &[u8] {
        &self.file.bytes()[info.start as usize..(info.start + info.bytes) as usize]
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn left(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    fn take(&mut self, what: &str, n: u64) -> Result<&'a [u8], GgufError> {
        if n > self.left() {
            return Err(GgufError::Truncated {
                what: what.into(),
                offset: self.at as u64,
                need: n,
                len: self.bytes.len() as u64,
            });
        }
        let s = &self.bytes[self.at..self.at + n as usize];
        self.at += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        Ok(self.take(what, N as u64)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Errors unless `count` items of at least `min_bytes` each fit in what is left.
    fn fits(&self, what: &str, count: u64, min_bytes: u64) -> Result<(), GgufError> {
        if count.checked_mul(min_bytes).is_none_or(|b| b > self.left()) {
            return Err(GgufError::Count {
                what: what.into(),
                count,
                left: self.left(),
            });
        }
        Ok(())
    }

    fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let n = self.u64(what)?;
        let bytes = self.take(what, n)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| GgufError::Invalid {
            what: what.into(),
            message: format!("not UTF-8 ({e})"),
        })
    }

    fn value(&mut self, key: &str, ty: u32, depth: usize) -> Result<Value, GgufError> {
        Ok(match ty {
            0 => Value::U8(self.array::<1>(key)?[0]),
            1 => Value::I8(self.array::<1>(key)?[0] as i8),
            2 => Value::U16(u16::from_le_bytes(self.array(key)?)),
            3 => Value::I16(i16::from_le_bytes(self.array(key)?)),
            4 => Value::U32(self.u32(key)?),
            5 => Value::I32(i32::from_le_bytes(self.array(key)?)),
            6 => Value::F32(f32::from_le_bytes(self.array(key)?)),
            7 => match self.array::<1>(key)?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => {
                    return Err(GgufError::Invalid {
                        what: key.into(),
                        message: format!("bool byte {b} (must be 0 or 1)"),
                    });
                }
            },
            8 => Value::String(self.string(key)?),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(GgufError::Invalid {
                        what: key.into(),
                        message: format!("arrays nested deeper than {MAX_DEPTH}"),
                    });
                }
                let elem = self.u32(key)?;
                let count = self.u64(key)?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    8 | 10..=12 => 8,
                    9 => 12,
                    _ => 1,
                };
                self.fits(key, count, min)?;
                let mut items = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    items.push(self.value(key, elem, depth + 1)?);
                }
                Value::Array(items)
            }
            10 => Value::U64(self.u64(key)?),
            11 => Value::I64(i64::from_le_bytes(self.array(key)?)),
            12 => Value::F64(f64::from_le_bytes(self.array(key)?)),
            other => {
                return Err(GgufError::Invalid {
                    what: key.into(),
                    message: format!("unknown value type {other}"),
                });
            }
        })
    }
}

/// Writes a GGUF v3 file: for tests and fuzzing (a file with chosen metadata and tensors,
/// then mutated), and for random-weight files of a model's shape.
#[derive(Default)]
pub struct Writer {
    metadata: Vec<(String, Value)>,
    tensors: Vec<(String, Vec<u64>, u32, Vec<u8>)>,
}

impl Writer {
    /// An empty file.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a metadata entry.
    pub fn meta(mut self, key: &str, value: Value) -> Self {
        self.metadata.push((key.into(), value));
        self
    }

    /// Adds a tensor: `dims` innermost first, `ggml_type` an id, `data` its bytes.
    pub fn tensor(mut self, name: &str, dims: &[u64], ggml_type: u32, data: Vec<u8>) -> Self {
        self.tensors
            .push((name.into(), dims.to_vec(), ggml_type, data));
        self
    }

    /// The file's bytes (alignment 32).
    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_string(&mut out, key);
            out.extend_from_slice(&type_id(value).to_le_bytes());
            put_value(&mut out, value);
        }
        let mut offset = 0u64;
        let mut offsets = Vec::new();
        for (name, dims, ty, data) in &self.tensors {
            put_string(&mut out, name);
            out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offsets.push(offset);
            offset = (offset + data.len() as u64).div_ceil(32) * 32;
        }
        let start = out.len().div_ceil(32) * 32;
        out.resize(start, 0);
        for ((_, _, _, data), off) in self.tensors.iter().zip(offsets) {
            out.resize(start + off as usize, 0);
            out.extend_from_slice(data);
        }
        out
    }
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn type_id(v: &Value) -> u32 {
    match v {
        Value::U8(_) => 0,
        Value::I8(_) => 1,
        Value::U16(_) => 2,
        Value::I16(_) => 3,
        Value::U32(_) => 4,
        Value::I32(_) => 5,
        Value::F32(_) => 6,
        Value::Bool(_) => 7,
        Value::String(_) => 8,
        Value::Array(_) => 9,
        Value::U64(_) => 10,
        Value::I64(_) => 11,
        Value::F64(_) => 12,
    }
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(u8::from(*x)),
        Value::String(s) => put_string(out, s),
        Value::Array(items) => {
            let elem = items.first().map_or(4, type_id);
            out.extend_from_slice(&elem.to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn parse(bytes: Vec<u8>) -> Result<Gguf, GgufError> {
        Gguf::parse(FileBytes::from_bytes(Path::new("t.gguf"), bytes))
    }

    fn sample() -> Vec<u8> {
        Writer::new()
            .meta("general.architecture", Value::String("llama".into()))
            .meta("n", Value::U32(7))
            .meta(
                "list",
                Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
            )
            .meta("f", Value::F32(0.5))
            .tensor("w", &[32, 3], 8, vec![1; 3 * 34])
            .tensor("n", &[5], 0, vec![2; 20])
            .finish()
    }

    #[test]
    fn reads_what_the_writer_wrote() {
        let g = parse(sample()).unwrap();
        assert_eq!(g.version, 3);
        assert_eq!(g.get("n"), Some(&Value::U32(7)));
        assert_eq!(g.get("f").and_then(Value::as_f64), Some(0.5));
        assert_eq!(
            g.get("list").and_then(Value::as_array).map(<[_]>::len),
            Some(2)
        );
        let w = g.tensor("w").unwrap();
        assert_eq!(w.shape(), vec![3, 32]);
        assert_eq!(w.ggml_type.name, "Q8_0");
        assert_eq!(g.data(w), &[1u8; 102][..]);
        assert_eq!(g.data(g.tensor("n").unwrap()), &[2u8; 20][..]);
        assert!(w.start.is_multiple_of(32));
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic() {
        let full = sample();
        for n in 0..full.len() {
            let err = parse(full[..n].to_vec());
            assert!(
                err.is_err(),
                "a file cut at {n} of {} bytes parsed",
                full.len()
            );
        }
    }

    #[test]
    fn names_the_problem() {
        let mut bad = sample();
        bad[0] = b'X';
        assert!(matches!(parse(bad), Err(GgufError::Magic { .. })));
        let mut v1 = sample();
        v1[4] = 1;
        assert_eq!(parse(v1).err(), Some(GgufError::Version(1)));
        // A metadata count of 2^40: refused before allocating anything.
        let mut huge = sample();
        huge[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(matches!(parse(huge), Err(GgufError::Count { .. })));
        let odd = Writer::new().tensor("q", &[31, 2], 2, vec![0; 36]).finish();
        assert!(matches!(parse(odd), Err(GgufError::Shape { .. })));
        let unknown = Writer::new().tensor("q", &[4], 4, vec![0; 16]).finish();
        assert!(matches!(
            parse(unknown),
            Err(GgufError::UnknownType { id: 4, .. })
        ));
        let dup = Writer::new()
            .meta("k", Value::U8(1))
            .meta("k", Value::U8(2))
            .finish();
        assert_eq!(parse(dup).err(), Some(GgufError::Duplicate("k".into())));
        let bool2 = Writer::new().meta("b", Value::U8(2)).finish();
        let mut bool2 = bool2;
        // The value type of "b" sits after magic, version, counts (24 bytes) and the key.
        bool2[24 + 8 + 1] = 7;
        assert!(matches!(parse(bool2), Err(GgufError::Invalid { .. })));
    }

    #[test]
    fn data_past_the_end_is_out_of_bounds() {
        let mut bytes = Writer::new().tensor("n", &[8], 0, vec![0; 32]).finish();
        bytes.truncate(bytes.len() - 4);
        assert!(matches!(parse(bytes), Err(GgufError::OutOfBounds { .. })));
    }

    /// A tensor table whose second tensor points into the first's data (two tensors read
    /// from the same bytes), or at the same offset: refused by name; neighbours that only
    /// touch are fine.
    #[test]
    fn tensors_sharing_data_are_refused() {
        let good = Writer::new()
            .tensor("a", &[16], 0, vec![1; 64])
            .tensor("b", &[8], 0, vec![2; 32])
            .finish();
        assert!(parse(good.clone()).is_ok());
        // The offset of "b" (64: after a's 64 bytes) is the only u64 64 in the file.
        let at = (0..good.len() - 8)
            .rev()
            .find(|&i| good[i..i + 8] == 64u64.to_le_bytes())
            .unwrap();
        for offset in [32u64, 0] {
            let mut bad = good.clone();
            bad[at..at + 8].copy_from_slice(&offset.to_le_bytes());
            match parse(bad) {
                Err(GgufError::Overlap { first, second, .. }) => {
                    assert_eq!((first.as_str(), second.as_str()), ("a", "b"), "{offset}");
                }
                other => panic!("offset {offset}: {:?}", other.err()),
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        /// Any byte of a valid file changed to anything: an error or a file, never a panic,
        /// and every tensor of a file that parses lies inside it.
        #[test]
        fn mutated_files_never_panic(at in 0usize..400, byte in 0u8..=255, cut in 0usize..400) {
            let mut bytes = sample();
            let at = at % bytes.len();
            bytes[at] = byte;
            bytes.truncate(bytes.len() - cut % 8 * (cut % 2));
            if let Ok(g) = parse(bytes.clone()) {
                for t in g.tensors() {
                    proptest::prop_assert!(t.start + t.bytes <= bytes.len() as u64);
                    let _ = g.data(t);
                }
            }
        }
    }
}
