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

mod reader;
mod types;
mod writer;

use std::collections::HashMap;

use crate::file::FileBytes;
use reader::Reader;
pub use types::GgmlType;
pub use writer::Writer;

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

/// As a user reads it in a message: `0 (UINT32)`, `"llama" (STRING)`, `an ARRAY of 3`.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.type_name();
        match self {
            Value::U8(v) => write!(f, "{v} ({t})"),
            Value::I8(v) => write!(f, "{v} ({t})"),
            Value::U16(v) => write!(f, "{v} ({t})"),
            Value::I16(v) => write!(f, "{v} ({t})"),
            Value::U32(v) => write!(f, "{v} ({t})"),
            Value::I32(v) => write!(f, "{v} ({t})"),
            Value::F32(v) => write!(f, "{v} ({t})"),
            Value::Bool(v) => write!(f, "{v} ({t})"),
            Value::String(v) => write!(f, "{v:?} ({t})"),
            Value::Array(v) => write!(f, "an {t} of {}", v.len()),
            Value::U64(v) => write!(f, "{v} ({t})"),
            Value::I64(v) => write!(f, "{v} ({t})"),
            Value::F64(v) => write!(f, "{v} ({t})"),
        }
    }
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
        let mut r = Reader::new(file.bytes());
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
                    message: match v {
                        Value::U32(a) => format!("{a} is not a power of two"),
                        other => format!(
                            "a {} ({other}) where a UINT32 power of two belongs",
                            other.type_name()
                        ),
                    },
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
        // An alignment of 0, 3, or of another type: named in words, not Rust's.
        for (value, says) in [
            (Value::U32(0), "0 is not a power of two"),
            (Value::U32(3), "3 is not a power of two"),
            (Value::String("32".into()), "a STRING"),
        ] {
            let bytes = Writer::new().meta("general.alignment", value).finish();
            let err = parse(bytes)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(says) && !err.contains("U32("), "{err}");
        }
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
