//! One xz stream of many blocks, as `xz -T` writes them: each chunk is
//! compressed as a one-block stream by liblzma, its block is cut out with
//! the sizes its index records, and the blocks are joined under one stream
//! header, one index and one footer (so dpkg, lintian and `xz -t`, which
//! read a single stream, read them).

use std::io::{self, Write};

use flate2::Crc;

/// Stream header: magic, flags (check CRC64), CRC32 of the flags.
pub(super) const XZ_HEADER: [u8; 12] = [
    0xfd, b'7', b'z', b'X', b'Z', 0, 0, 0x04, 0xe6, 0xd6, 0xb4, 0x46,
];

/// One xz block of `data` and its unpadded size: the single block of a
/// one-shot xz stream at `preset`, cut out of that stream with the sizes
/// its index records (nothing for no data).
pub(super) fn xz_block(preset: u32, data: &[u8]) -> io::Result<(Vec<u8>, u64)> {
    if data.is_empty() {
        return Ok((Vec::new(), 0));
    }
    let stream = xz2::stream::Stream::new_easy_encoder(preset, xz2::stream::Check::Crc64)
        .map_err(io::Error::other)?;
    let mut enc = xz2::write::XzEncoder::new_stream(Vec::with_capacity(data.len() / 4), stream);
    enc.write_all(data)?;
    let xz = enc.finish()?;
    let bad = || io::Error::other("liblzma wrote a stream of an unexpected shape");
    if xz.len() < 24 || xz[..12] != XZ_HEADER {
        return Err(bad());
    }
    let footer = &xz[xz.len() - 12..];
    let index_len =
        (u32::from_le_bytes([footer[4], footer[5], footer[6], footer[7]]) as usize + 1) * 4;
    let index_at = xz
        .len()
        .checked_sub(12 + index_len)
        .filter(|&at| at >= 12)
        .ok_or_else(bad)?;
    let mut index = &xz[index_at..xz.len() - 12];
    if index.first() != Some(&0) {
        return Err(bad());
    }
    index = &index[1..];
    let records = varint(&mut index).ok_or_else(bad)?;
    let unpadded = varint(&mut index).ok_or_else(bad)?;
    let uncompressed = varint(&mut index).ok_or_else(bad)?;
    if records != 1
        || uncompressed != data.len() as u64
        || unpadded.div_ceil(4) * 4 != (index_at - 12) as u64
    {
        return Err(bad());
    }
    Ok((xz[12..index_at].to_vec(), unpadded))
}

fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..9 {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= ((b & 0x7f) as u64) << (7 * i);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// The stream's index: a record per block, padded to 4 bytes, CRC32.
pub(super) fn xz_index(records: &[(u64, u64)]) -> Vec<u8> {
    let mut index = vec![0u8];
    put_varint(&mut index, records.len() as u64);
    for &(unpadded, uncompressed) in records {
        put_varint(&mut index, unpadded);
        put_varint(&mut index, uncompressed);
    }
    while index.len() % 4 != 0 {
        index.push(0);
    }
    let crc = crc32(&index);
    index.extend_from_slice(&crc.to_le_bytes());
    index
}

/// Stream footer: CRC32, backward size, flags, magic.
pub(super) fn xz_footer(index_len: usize) -> [u8; 12] {
    let mut f = [0u8; 12];
    f[4..8].copy_from_slice(&((index_len / 4 - 1) as u32).to_le_bytes());
    f[8..10].copy_from_slice(&[0, 0x04]);
    let crc = crc32(&f[4..10]);
    f[..4].copy_from_slice(&crc.to_le_bytes());
    f[10..].copy_from_slice(b"YZ");
    f
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = Crc::new();
    crc.update(bytes);
    crc.sum()
}
