//! A MessagePack reader for the AMDGPU code-object metadata note
//! (`NT_AMDGPU_METADATA`, a msgpack map since code object v3): values
//! borrowed from the note's bytes, every length checked against what is
//! left, nesting and item counts bounded, so a hostile note is an error,
//! never a panic or an allocation it asked for.

/// How deep maps and arrays may nest (the metadata nests 4 levels).
const MAX_DEPTH: usize = 16;
/// The most items (map entries count twice) one note may hold in all.
const MAX_ITEMS: usize = 4_000_000;

/// One decoded value; strings and binaries borrow the note.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(Vec<Value<'a>>),
    Map(Vec<(Value<'a>, Value<'a>)>),
    /// An extension value (type, bytes): kept, never interpreted.
    Ext(i8, &'a [u8]),
}

impl<'a> Value<'a> {
    /// The value of `key` in a map whose keys are strings.
    pub(crate) fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Map(entries) => entries
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if *s == key.as_bytes()))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&'a str> {
        match self {
            Value::Str(s) => std::str::from_utf8(s).ok(),
            _ => None,
        }
    }

    pub(crate) fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    pub(crate) fn as_array(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }
}

/// Decodes the one value `bytes` holds (trailing bytes are an error).
pub(crate) fn decode(bytes: &[u8]) -> Result<Value<'_>, String> {
    let mut r = Reader {
        bytes,
        at: 0,
        items: 0,
    };
    let value = r.value(0)?;
    if r.at != bytes.len() {
        return Err(format!(
            "msgpack: {} bytes after the value at {}",
            bytes.len() - r.at,
            r.at
        ));
    }
    Ok(value)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    items: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|e| *e <= self.bytes.len());
        let Some(end) = end else {
            return Err(format!(
                "msgpack: {n} bytes at {} run past the end ({} bytes)",
                self.at,
                self.bytes.len()
            ));
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    }

    fn int(&mut self, n: usize) -> Result<i64, String> {
        let raw = self.uint(n)?;
        let shift = 64 - 8 * n as u32;
        Ok(((raw << shift) as i64) >> shift)
    }

    fn count(&mut self, n: usize, weight: usize) -> Result<usize, String> {
        let count = self.uint(n)? as usize;
        self.items = self.items.saturating_add(count.saturating_mul(weight));
        if self.items > MAX_ITEMS || count > self.bytes.len() - self.at {
            return Err(format!(
                "msgpack: {count} items at {} is more than the note holds",
                self.at
            ));
        }
        Ok(count)
    }

    fn value(&mut self, depth: usize) -> Result<Value<'a>, String> {
        if depth > MAX_DEPTH {
            return Err(format!("msgpack: nested deeper than {MAX_DEPTH}"));
        }
        let tag = self.take(1)?[0];
        Ok(match tag {
            0x00..=0x7f => Value::Int(i64::from(tag)),
            0xe0..=0xff => Value::Int(i64::from(tag as i8)),
            0x80..=0x8f => self.map(usize::from(tag & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(tag & 0x0f), depth)?,
            0xa0..=0xbf => Value::Str(self.take(usize::from(tag & 0x1f))?),
            0xc0 => Value::Nil,
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.uint(1 << (tag - 0xc4))? as usize;
                Value::Bin(self.take(n)?)
            }
            0xc7..=0xc9 => {
                let n = self.uint(1 << (tag - 0xc7))? as usize;
                let kind = self.take(1)?[0] as i8;
                Value::Ext(kind, self.take(n)?)
            }
            0xca => Value::Float(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => Value::Float(f64::from_bits(self.uint(8)?)),
            0xcc..=0xcf => {
                let v = self.uint(1 << (tag - 0xcc))?;
                Value::Int(i64::try_from(v).map_err(|_| "msgpack: integer above i64".to_owned())?)
            }
            0xd0..=0xd3 => Value::Int(self.int(1 << (tag - 0xd0))?),
            0xd4..=0xd8 => {
                let kind = self.take(1)?[0] as i8;
                Value::Ext(kind, self.take(1 << (tag - 0xd4))?)
            }
            0xd9..=0xdb => {
                let n = self.uint(1 << (tag - 0xd9))? as usize;
                Value::Str(self.take(n)?)
            }
            0xdc | 0xdd => {
                let n = self.count(2 << (tag - 0xdc), 1)?;
                self.array_items(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.count(2 << (tag - 0xde), 2)?;
                self.map_items(n, depth)?
            }
            0xc1 => return Err(format!("msgpack: the unused tag 0xc1 at {}", self.at - 1)),
        })
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value<'a>, String> {
        self.items += n;
        self.array_items(n, depth)
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value<'a>, String> {
        self.items += 2 * n;
        self.map_items(n, depth)
    }

    fn array_items(&mut self, n: usize, depth: usize) -> Result<Value<'a>, String> {
        let mut items = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        Ok(Value::Array(items))
    }

    fn map_items(&mut self, n: usize, depth: usize) -> Result<Value<'a>, String> {
        let mut entries = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            entries.push((k, v));
        }
        Ok(Value::Map(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_shapes_the_metadata_uses() {
        // {"a": [1, -1, 300, "xy"], "b": true}
        let bytes = [
            0x82, 0xa1, b'a', 0x94, 0x01, 0xff, 0xcd, 0x01, 0x2c, 0xa2, b'x', b'y', 0xa1, b'b',
            0xc3,
        ];
        let v = decode(&bytes).unwrap();
        let a = v.get("a").and_then(Value::as_array).unwrap();
        assert_eq!(a[0].as_u64(), Some(1));
        assert_eq!(a[1], Value::Int(-1));
        assert_eq!(a[2].as_u64(), Some(300));
        assert_eq!(a[3].as_str(), Some("xy"));
        assert_eq!(v.get("b"), Some(&Value::Bool(true)));
    }

    #[test]
    fn hostile_notes_are_errors_not_panics_or_huge_allocations() {
        // an array32 claiming 4 billion items, a str32 past the end
        assert!(decode(&[0xdd, 0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a']).is_err());
        // nesting deeper than allowed
        assert!(decode(&[0x91; 64]).is_err());
        // every prefix of a valid value fails cleanly
        let bytes = [0x81, 0xa1, b'k', 0x92, 0xcc, 0xff, 0xd0, 0x80];
        assert!(decode(&bytes).is_ok());
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n]).is_err());
        }
        assert!(decode(&[0xc1]).is_err());
    }
}
