//! The rpm header structure (lib/header.c's on-disk form): magic, index
//! of (tag, type, offset, count) entries, data store, with the immutable
//! region tag first and its trailer last, as rpm >= 4.14 verifies it.

/// Data types of header entries (rpmtag.h `rpmTagType`).
#[derive(Debug, Clone)]
pub(crate) enum Value {
    Int16(Vec<u16>),
    Int32(Vec<u32>),
    Int64(Vec<u64>),
    Str(String),
    StrArray(Vec<String>),
    /// A translatable string; only the `C` locale is written.
    I18n(String),
}

impl Value {
    fn type_code(&self) -> u32 {
        match self {
            Value::Int16(_) => 3,
            Value::Int32(_) => 4,
            Value::Int64(_) => 5,
            Value::Str(_) => 6,
            Value::StrArray(_) => 8,
            Value::I18n(_) => 9,
        }
    }

    fn align(&self) -> usize {
        match self {
            Value::Int16(_) => 2,
            Value::Int32(_) => 4,
            Value::Int64(_) => 8,
            _ => 1,
        }
    }

    fn count(&self) -> usize {
        match self {
            Value::Int16(v) => v.len(),
            Value::Int32(v) => v.len(),
            Value::Int64(v) => v.len(),
            Value::Str(_) | Value::I18n(_) => 1,
            Value::StrArray(v) => v.len(),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let cstr = |out: &mut Vec<u8>, s: &str| {
            out.extend_from_slice(s.as_bytes());
            out.push(0);
        };
        match self {
            Value::Int16(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
            Value::Int32(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
            Value::Int64(v) => v
                .iter()
                .for_each(|x| out.extend_from_slice(&x.to_be_bytes())),
            Value::Str(s) | Value::I18n(s) => cstr(out, s),
            Value::StrArray(v) => v.iter().for_each(|s| cstr(out, s)),
        }
    }
}

const MAGIC: [u8; 8] = [0x8e, 0xad, 0xe8, 0x01, 0, 0, 0, 0];

/// A header being assembled; entries are written sorted by tag.
#[derive(Debug, Default)]
pub(crate) struct Header {
    entries: Vec<(u32, Value)>,
}

impl Header {
    pub(crate) fn new() -> Header {
        Header::default()
    }

    pub(crate) fn add(&mut self, tag: u32, value: Value) -> &mut Header {
        self.entries.push((tag, value));
        self
    }

    pub(crate) fn str(&mut self, tag: u32, s: impl Into<String>) -> &mut Header {
        self.add(tag, Value::Str(s.into()))
    }

    pub(crate) fn int32(&mut self, tag: u32, v: u32) -> &mut Header {
        self.add(tag, Value::Int32(vec![v]))
    }

    /// The header as rpm reads it, with `region` (62 for the signature
    /// header, 63 for the main header) as its immutable region.
    pub(crate) fn to_bytes(&self, region: u32) -> Vec<u8> {
        let mut entries: Vec<&(u32, Value)> = self.entries.iter().collect();
        entries.sort_by_key(|(tag, _)| *tag);
        let il = entries.len() + 1;
        let mut index = Vec::with_capacity(il * 16);
        let mut data = Vec::new();
        let push_index = |index: &mut Vec<u8>, tag: u32, ty: u32, offset: u32, count: u32| {
            for x in [tag, ty, offset, count] {
                index.extend_from_slice(&x.to_be_bytes());
            }
        };
        let mut rest = Vec::with_capacity(entries.len() * 16);
        for (tag, value) in entries {
            while data.len() % value.align() != 0 {
                data.push(0);
            }
            let offset = data.len() as u32;
            value.encode(&mut data);
            push_index(
                &mut rest,
                *tag,
                value.type_code(),
                offset,
                value.count() as u32,
            );
        }
        // Region trailer: an index entry stored in the data, pointing back
        // over the whole index (negative offset).
        let trailer_offset = data.len() as u32;
        let back = (-(il as i32 * 16)) as u32;
        for x in [region, 7, back, 16] {
            data.extend_from_slice(&x.to_be_bytes());
        }
        push_index(&mut index, region, 7, trailer_offset, 16);
        index.extend_from_slice(&rest);

        let mut out = Vec::with_capacity(16 + index.len() + data.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&(il as u32).to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend_from_slice(&index);
        out.extend_from_slice(&data);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn region_trailer_points_back_over_the_index() {
        let mut h = Header::new();
        h.str(1000, "x").add(1030, Value::Int16(vec![0o100644]));
        let b = h.to_bytes(63);
        let be = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
        assert_eq!(be(8), 3, "three index entries");
        let dl = be(12) as usize;
        let data = 16 + 3 * 16;
        assert_eq!(b.len(), data + dl);
        assert_eq!(
            (be(16), be(20), be(24), be(28)),
            (63, 7, dl as u32 - 16, 16)
        );
        let t = data + dl - 16;
        assert_eq!(be(t), 63);
        assert_eq!(be(t + 8) as i32, -48);
        // the int16 is aligned after "x\0"
        assert_eq!(be(16 + 32 + 8), 2);
    }
}
