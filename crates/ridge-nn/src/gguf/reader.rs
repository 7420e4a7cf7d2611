//! The byte cursor that reads a GGUF header: every read checked against the bytes left.

use super::{GgufError, MAX_DEPTH, Value};

pub(super) struct Reader<'a> {
    bytes: &'a [u8],
    /// Where the next read starts.
    pub(super) at: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    fn left(&self) -> u64 {
        (self.bytes.len() - self.at) as u64
    }

    pub(super) fn take(&mut self, what: &str, n: u64) -> Result<&'a [u8], GgufError> {
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

    pub(super) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GgufError> {
        Ok(self.take(what, N as u64)?.try_into().expect("N bytes"))
    }

    pub(super) fn u32(&mut self, what: &str) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self, what: &str) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// Errors unless `count` items of at least `min_bytes` each fit in what is left.
    pub(super) fn fits(&self, what: &str, count: u64, min_bytes: u64) -> Result<(), GgufError> {
        if count.checked_mul(min_bytes).is_none_or(|b| b > self.left()) {
            return Err(GgufError::Count {
                what: what.into(),
                count,
                left: self.left(),
            });
        }
        Ok(())
    }

    pub(super) fn string(&mut self, what: &str) -> Result<String, GgufError> {
        let n = self.u64(what)?;
        let bytes = self.take(what, n)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| GgufError::Invalid {
            what: what.into(),
            message: format!("not UTF-8 ({e})"),
        })
    }

    pub(super) fn value(&mut self, key: &str, ty: u32, depth: usize) -> Result<Value, GgufError> {
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
