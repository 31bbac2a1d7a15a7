//! Registered memory as the table lends it to the engine: a pointer and a length, read and
//! written by copies (`ptr::copy_nonoverlapping`), by address (the kernel's `sendmmsg`) or by
//! loads through the pointer (the ICRC), never as a Rust slice.
//!
//! The application may read or write its registered memory while the NIC does: a program
//! spinning on a buffer that an RDMA WRITE fills (`ib_write_lat` does), or changing a buffer
//! a peer reads. A `&mut [u8]` over those bytes would tell the compiler that nothing else
//! touches them while it lives, and a `&[u8]` that nothing changes them: both false, which
//! is undefined behaviour in Rust's model whether or not the optimiser ever exploits it. A
//! copy through raw pointers asserts nothing about other accesses. (The race itself stays, as
//! with a DMA engine: what the application sees of bytes the NIC is writing is unspecified.)
//!
//! The send path holds to the same rule: a payload pinned in registered memory ([`ReadPin`])
//! reaches the transport as [`Bytes`] (the pieces of an
//! [`OutPacket`](crate::transport::OutPacket)), which hand it to the kernel by address, copy
//! it, or checksum it through the pointer ([`Bytes::update_icrc`]); no slice is formed over
//! it anywhere on the way.
//!
//! [`ReadPin`]: super::ReadPin

use core::marker::PhantomData;
use core::ptr;

use softrnic_wire::icrc::Icrc;

/// Registered bytes to read, for the life of the table's lock on their region; or bytes of
/// the caller's own ([`Bytes::from_slice`]), where one type stands for both (the pieces of a
/// packet).
#[derive(Clone, Copy)]
pub struct Bytes<'a> {
    ptr: *const u8,
    len: usize,
    _lock: PhantomData<&'a [u8]>,
}

// SAFETY: `Bytes` is a shared, read-only view, as `&[u8]` is, but read by copies only; its
// validity is tied to `'a` (a lock or a borrow), not to a thread.
unsafe impl Send for Bytes<'_> {}
// SAFETY: as for `Send`: nothing is written through it.
unsafe impl Sync for Bytes<'_> {}

impl core::fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len)
    }
}

impl<'a> From<&'a [u8]> for Bytes<'a> {
    fn from(bytes: &'a [u8]) -> Bytes<'a> {
        Bytes::from_slice(bytes)
    }
}

impl<'a, const N: usize> From<&'a [u8; N]> for Bytes<'a> {
    fn from(bytes: &'a [u8; N]) -> Bytes<'a> {
        Bytes::from_slice(bytes)
    }
}

/// Registered bytes to write (and read), for the life of the table's exclusive lock on their
/// region.
pub struct BytesMut<'a> {
    ptr: *mut u8,
    len: usize,
    _lock: PhantomData<&'a ()>,
}

impl<'a> Bytes<'a> {
    /// # Safety
    /// `ptr..ptr + len` must be valid for reads for `'a`.
    pub(super) unsafe fn new(ptr: *const u8, len: usize) -> Bytes<'a> {
        Bytes {
            ptr,
            len,
            _lock: PhantomData,
        }
    }

    /// Bytes of a buffer of the caller's own (a copy, or a test's).
    pub fn from_slice(bytes: &'a [u8]) -> Bytes<'a> {
        // SAFETY: a slice is valid for reads for its lifetime.
        unsafe { Bytes::new(bytes.as_ptr(), bytes.len()) }
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte (for system calls that take memory by address).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Copies the bytes into `dst`, which must be exactly as long (as `copy_from_slice`).
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn copy_to(&self, dst: &mut [u8]) {
        assert_eq!(dst.len(), self.len, "copy_to: lengths differ");
        // SAFETY: `ptr..ptr + len` is readable (`new`'s contract) and `dst` writable for as
        // many bytes; `dst` is the caller's own, so the two do not overlap.
        unsafe { ptr::copy_nonoverlapping(self.ptr, dst.as_mut_ptr(), self.len) }
    }

    /// Appends the bytes to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.len);
        let end = out.len();
        // SAFETY: `reserve` made room for `len` bytes after `end`; they are initialised by
        // the copy before the length covers them. `out` is the caller's own: no overlap.
        unsafe {
            ptr::copy_nonoverlapping(self.ptr, out.as_mut_ptr().add(end), self.len);
            out.set_len(end + self.len);
        }
    }

    /// A copy of the bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.append_to(&mut out);
        out
    }

    /// The first byte, if any.
    pub fn first(&self) -> Option<u8> {
        // SAFETY: one readable byte when there is one (`new`'s contract).
        (self.len > 0).then(|| unsafe { ptr::read(self.ptr) })
    }

    /// The bytes before `mid` and those from it on; `None` if `mid` is past the end.
    pub fn split_at(&self, mid: usize) -> Option<(Bytes<'a>, Bytes<'a>)> {
        if mid > self.len {
            return None;
        }
        // SAFETY: both parts lie within `ptr..ptr + len`, readable for `'a`.
        unsafe {
            Some((
                Bytes::new(self.ptr, mid),
                Bytes::new(self.ptr.add(mid), self.len - mid),
            ))
        }
    }

    /// Feeds the bytes to the ICRC `icrc` (IBTA A17.4.2), read through the pointer.
    pub fn update_icrc(&self, icrc: &mut Icrc) {
        // SAFETY: `ptr..ptr + len` is readable for `'a` (`new`'s contract); others writing it
        // meanwhile is what `update_raw` allows.
        unsafe { icrc.update_raw(self.ptr, self.len) }
    }
}

impl<'a> BytesMut<'a> {
    /// # Safety
    /// `ptr..ptr + len` must be valid for reads and writes for `'a`.
    pub(super) unsafe fn new(ptr: *mut u8, len: usize) -> BytesMut<'a> {
        BytesMut {
            ptr,
            len,
            _lock: PhantomData,
        }
    }

    /// Bytes of a buffer of the caller's own (a copy, or a test's).
    pub fn from_slice(bytes: &'a mut [u8]) -> BytesMut<'a> {
        // SAFETY: a mutable slice is valid for reads and writes for its lifetime.
        unsafe { BytesMut::new(bytes.as_mut_ptr(), bytes.len()) }
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of the first byte (for an aligned atomic store).
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// The same bytes, to read.
    pub fn as_bytes(&self) -> Bytes<'_> {
        // SAFETY: readable for as long as `self` is borrowed (`new`'s contract).
        unsafe { Bytes::new(self.ptr, self.len) }
    }

    /// Copies `src`, which must be exactly as long, into the bytes (as `copy_from_slice`).
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn copy_from(&mut self, src: &[u8]) {
        assert_eq!(src.len(), self.len, "copy_from: lengths differ");
        // SAFETY: `ptr..ptr + len` is writable (`new`'s contract) and `src` readable for as
        // many bytes; `src` is the caller's own, not registered memory lent by this lock.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.ptr, self.len) }
    }

    /// Copies the bytes into `dst` (see [`Bytes::copy_to`]).
    ///
    /// # Panics
    /// If the lengths differ.
    pub fn copy_to(&self, dst: &mut [u8]) {
        self.as_bytes().copy_to(dst)
    }

    /// The native-endian 64-bit word the 8 bytes hold, and then `f` of it stored in its
    /// place (an atomic's read-modify-write, under the exclusive lock).
    ///
    /// # Panics
    /// If there are not exactly 8 bytes.
    pub fn update_u64(&mut self, f: impl FnOnce(u64) -> u64) -> u64 {
        assert_eq!(self.len, 8, "update_u64: not a 64-bit word");
        // SAFETY: 8 readable and writable bytes (`new`'s contract), at any alignment.
        unsafe {
            let word = self.ptr.cast::<u64>();
            let orig = ptr::read_unaligned(word);
            ptr::write_unaligned(word, f(orig));
            orig
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_in_and_out() {
        let mut region = [0u8; 8];
        BytesMut::from_slice(&mut region).copy_from(b"abcdefgh");
        let mut out = [0u8; 8];
        Bytes::from_slice(&region).copy_to(&mut out);
        assert_eq!(&out, b"abcdefgh");
        let mut v = b"<".to_vec();
        Bytes::from_slice(&region[2..4]).append_to(&mut v);
        assert_eq!(v, b"<cd");
    }

    #[test]
    fn splits_and_first_bytes() {
        let region = *b"abcdef";
        let b = Bytes::from(&region);
        let (head, tail) = b.split_at(2).unwrap();
        assert_eq!(
            (head.to_vec(), tail.to_vec()),
            (b"ab".to_vec(), b"cdef".to_vec())
        );
        assert_eq!(tail.first(), Some(b'c'));
        assert_eq!(b.split_at(6).map(|(_, t)| t.first()), Some(None));
        assert!(b.split_at(7).is_none());
    }

    #[test]
    fn the_icrc_read_through_the_pointer_is_the_one_over_a_slice() {
        let region: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let mut bth = [0u8; 12];
        let mut by_slice = Icrc::start_masked(&mut bth, 0).unwrap();
        let mut by_ptr = by_slice.clone();
        by_slice.update(&region);
        Bytes::from_slice(&region).update_icrc(&mut by_ptr);
        assert_eq!(by_ptr.finish(), by_slice.finish());
    }

    #[test]
    fn update_u64_reads_then_stores() {
        let mut region = [0u8; 9];
        region[1..].copy_from_slice(&7u64.to_ne_bytes());
        let mut b = BytesMut::from_slice(&mut region[1..]);
        assert_eq!(b.update_u64(|x| x + 5), 7);
        assert_eq!(region[1..], 12u64.to_ne_bytes());
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn a_short_source_is_refused() {
        let mut region = [0u8; 4];
        BytesMut::from_slice(&mut region).copy_from(b"abc");
    }
}
