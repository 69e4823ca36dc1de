//! Little-endian bytes read a little at a time, naming the offset of what
//! is missing: the binary formats' common reader.

/// Bytes that end before `what`, which begins at `at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Short {
    pub at: usize,
    pub what: &'static str,
}

pub struct Reader<'a> {
    pub b: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(b: &'a [u8], at: usize) -> Self {
        Reader { b, at }
    }

    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Short> {
        let short = || Short { at: self.at, what };
        let end = self.at.checked_add(n).ok_or_else(short)?;
        let s = self.b.get(self.at..end).ok_or_else(short)?;
        self.at = end;
        Ok(s)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, Short> {
        Ok(self.take(1, what)?[0])
    }

    pub fn u16(&mut self, what: &'static str) -> Result<u16, Short> {
        let s = self.take(2, what)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32, Short> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64, Short> {
        let s = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }

    /// Bytes left after the cursor.
    pub fn left(&self) -> usize {
        self.b.len().saturating_sub(self.at)
    }
}
