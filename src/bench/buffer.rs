//! Memory aligned for O_DIRECT.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

/// A heap buffer whose address is a multiple of `align`, as direct I/O
/// requires. Its address never changes, so the kernel may hold it during an
/// asynchronous I/O while the owner moves the handle around.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

// The buffer is plain bytes owned by one handle.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// Panics only if `len` is 0 or `align` is not a power of two, which
    /// are programming errors, not conditions of the machine.
    pub fn new(len: usize, align: usize) -> AlignedBuf {
        let layout = Layout::from_size_align(len, align.max(1))
            .expect("buffer alignment must be a power of two");
        assert!(len > 0, "an I/O buffer cannot be empty");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }

    pub fn len(&self) -> usize {
        self.layout.size()
    }

    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid for len bytes for as long as self lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned() {
        for align in [512usize, 4096] {
            let mut buf = AlignedBuf::new(8192, align);
            assert_eq!(buf.as_ptr() as usize % align, 0);
            assert_eq!(buf.len(), 8192);
            buf.as_mut_slice()[8191] = 1;
            assert_eq!(buf.as_slice()[8191], 1);
        }
    }
}
