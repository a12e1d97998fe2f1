//! Wire primitives: LEB128 varints, zigzag, and bounded cursors.

use crate::error::{BufferTooSmall, DecodeError};

/// Bytes the canonical varint of `v` takes (1..=10).
pub fn varint_len(v: u64) -> usize {
    // 7 payload bits per byte; `| 1` makes zero take one byte.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Zigzag: maps signed to unsigned so small magnitudes stay small (0, -1, 1, -2 → 0, 1, 2, 3).
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes into a caller-owned buffer and keeps counting past its end, so an
/// overflow reports exactly how many bytes the whole output needs.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Writer { buf, pos: 0 }
    }

    /// Bytes written (or that would have been written) so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Whether everything written so far fits.
    pub(crate) fn fits(&self) -> bool {
        self.pos <= self.buf.len()
    }

    /// Forgets everything written after `pos` (which must be an earlier `pos()`).
    pub(crate) fn rewind(&mut self, pos: usize) {
        self.pos = self.pos.min(pos);
    }

    /// The written bytes, or how many were needed.
    pub(crate) fn finish(self) -> Result<usize, BufferTooSmall> {
        if self.fits() {
            Ok(self.pos)
        } else {
            Err(BufferTooSmall { needed: self.pos })
        }
    }

    /// Moves the bytes in `from..pos` left by `by` bytes (closing a gap left
    /// for a length prefix that turned out shorter).
    pub(crate) fn shift_left(&mut self, from: usize, by: usize) {
        if by == 0 {
            return;
        }
        let end = self.pos.min(self.buf.len());
        if from < end && from >= by {
            self.buf.copy_within(from..end, from - by);
        }
        self.pos -= by;
    }

    /// Writes the canonical varint of `v` at an earlier position `at`,
    /// leaving `pos` alone (fills a placeholder reserved with zeros).
    pub(crate) fn put_varint_at(&mut self, at: usize, v: u64) {
        let mut tmp = [0u8; 10];
        let mut t = Writer::new(&mut tmp);
        t.varint(v);
        let n = t.pos;
        if let Some(dst) = self.buf.get_mut(at..at + n) {
            dst.copy_from_slice(&tmp[..n]);
        }
    }

    pub(crate) fn u8(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.pos) {
            *slot = b;
        }
        self.pos += 1;
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        if let Some(dst) = self.buf.get_mut(self.pos..self.pos + bytes.len()) {
            dst.copy_from_slice(bytes);
        }
        self.pos += bytes.len();
    }

    pub(crate) fn u32_le(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    pub(crate) fn u64_le(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Writes `v` as a canonical LEB128 varint.
    #[inline]
    pub(crate) fn varint(&mut self, mut v: u64) {
        if let Some(dst) = self.buf.get_mut(self.pos..self.pos + 10) {
            // Fast path: room for the longest varint, no per-byte checks.
            let mut i = 0;
            while v >= 0x80 {
                dst[i] = (v as u8) | 0x80;
                v >>= 7;
                i += 1;
            }
            dst[i] = v as u8;
            self.pos += i + 1;
        } else {
            while v >= 0x80 {
                self.u8((v as u8) | 0x80);
                v >>= 7;
            }
            self.u8(v as u8);
        }
    }

    /// Writes a signed value as a zigzag varint.
    #[inline]
    pub(crate) fn svarint(&mut self, v: i64) {
        self.varint(zigzag(v));
    }
}

/// Reads from untrusted bytes; every method returns a typed error instead of panicking.
#[derive(Clone, Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Bytes read so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::UnexpectedEnd)?;
        self.pos += 1;
        Ok(b)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).ok_or(DecodeError::UnexpectedEnd)?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(DecodeError::UnexpectedEnd)?;
        self.pos = end;
        Ok(s)
    }

    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.bytes(N)?);
        Ok(a)
    }

    pub(crate) fn u32_le(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub(crate) fn u64_le(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Reads a canonical LEB128 varint of at most 64 bits.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.u8()?;
            let payload = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                // The tenth byte may only carry the 64th bit.
                return Err(DecodeError::VarintOverflow);
            }
            v |= payload << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    // A trailing zero group: a shorter encoding exists.
                    return Err(DecodeError::NonCanonicalVarint);
                }
                return Ok(v);
            }
        }
        Err(DecodeError::VarintOverflow)
    }

    pub(crate) fn svarint(&mut self) -> Result<i64, DecodeError> {
        Ok(unzigzag(self.varint()?))
    }

    pub(crate) fn varint_u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        u32::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange(field))
    }

    pub(crate) fn varint_u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        u16::try_from(self.varint()?).map_err(|_| DecodeError::OutOfRange(field))
    }

    /// A count of items that each take at least `min_item_bytes`, capped by
    /// `limit` and by what the remaining bytes could hold — so a hostile
    /// count can never size an allocation.
    pub(crate) fn count(
        &mut self,
        limit: usize,
        min_item_bytes: usize,
        field: &'static str,
    ) -> Result<usize, DecodeError> {
        let n = self.varint()?;
        let fit = self.remaining() / min_item_bytes.max(1);
        match usize::try_from(n) {
            Ok(n) if n <= limit && n <= fit => Ok(n),
            _ => Err(DecodeError::TooMany(field)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> ([u8; 10], usize) {
        let mut b = [0u8; 10];
        let mut w = Writer::new(&mut b);
        w.varint(v);
        let n = w.finish().unwrap();
        (b, n)
    }

    #[test]
    fn varint_boundaries() {
        for (v, len) in [
            (0, 1),
            (127, 1),
            (128, 2),
            (16383, 2),
            (16384, 3),
            (u64::MAX, 10),
        ] {
            let (b, n) = enc(v);
            assert_eq!(n, len, "{v}");
            assert_eq!(varint_len(v), len);
            assert_eq!(Reader::new(&b[..n]).varint(), Ok(v));
        }
    }

    #[test]
    fn varint_rejects_noncanonical_and_overflow() {
        assert_eq!(
            Reader::new(&[0x80, 0x00]).varint(),
            Err(DecodeError::NonCanonicalVarint)
        );
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).varint(),
            Err(DecodeError::VarintOverflow)
        );
        assert_eq!(
            Reader::new(&[0x80]).varint(),
            Err(DecodeError::UnexpectedEnd)
        );
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0, -1, 1, -2, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn writer_counts_past_the_end() {
        let mut b = [0u8; 2];
        let mut w = Writer::new(&mut b);
        w.varint(300);
        w.varint(300);
        assert_eq!(w.finish(), Err(BufferTooSmall { needed: 4 }));
    }
}
