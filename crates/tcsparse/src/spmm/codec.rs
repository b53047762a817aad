//! The byte codec of the prepared-plan cache's payload (`cache.rs`), shared with the kernel
//! families (`family/`), which encode and decode their own parameters with it: little-endian
//! writes, and a [`Reader`] whose every read is bounds-checked (a short or damaged payload is a
//! [`StaleOrCorrupt`] reason, never a panic).

/// Why an entry was not trusted.
pub(crate) type StaleOrCorrupt = String;

/// Appends `x` little endian.
pub(crate) fn put_u32(out: &mut Vec<u8>, x: u32) {
    out.extend_from_slice(&x.to_le_bytes());
}

/// Little-endian u32s from bytes whose length is a multiple of 4 (one copy on little-endian
/// hosts, whatever the bytes' alignment).
pub(crate) fn u32s_le(bytes: &[u8]) -> Vec<u32> {
    if cfg!(target_endian = "little") {
        let n = bytes.len() / 4;
        let mut v = vec![0u32; n];
        bytemuck::cast_slice_mut::<u32, u8>(&mut v).copy_from_slice(&bytes[..4 * n]);
        v
    } else {
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }
}

/// Reads a payload front to back; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    pub(crate) b: &'a [u8],
}

impl Reader<'_> {
    pub(crate) fn u8(&mut self) -> Result<u8, StaleOrCorrupt> {
        let (&x, rest) = self.b.split_first().ok_or("corrupt: payload too short")?;
        self.b = rest;
        Ok(x)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, StaleOrCorrupt> {
        if self.b.len() < 4 {
            return Err("corrupt: payload too short".into());
        }
        let (x, rest) = self.b.split_at(4);
        self.b = rest;
        Ok(u32::from_le_bytes(x.try_into().map_err(|_| "u32")?))
    }
    /// A u32 length `n ≤ max` and the `4n` bytes after it, as u32s.
    pub(crate) fn u32_array(&mut self, max: usize, what: &str) -> Result<Vec<u32>, StaleOrCorrupt> {
        let n = self.u32()? as usize;
        if n > max || self.b.len() < 4 * n {
            return Err(format!("corrupt: {what} of {n} entries"));
        }
        let (x, rest) = self.b.split_at(4 * n);
        self.b = rest;
        Ok(u32s_le(x))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, StaleOrCorrupt> {
        let lo = u64::from(self.u32()?);
        let hi = u64::from(self.u32()?);
        Ok(lo | hi << 32)
    }
}
