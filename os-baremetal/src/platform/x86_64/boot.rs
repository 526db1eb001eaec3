//! Boot: the entry code (multiboot v1 with the a.out kludge, or PVH) in `boot.s`, and what the
//! loader hands over.

use core::arch::global_asm;

global_asm!(include_str!("boot.s"));

#[cfg(not(feature = "pvh-only"))]
global_asm!(include_str!("multiboot.s"));

/// EAX at entry through multiboot v1.
pub const MULTIBOOT_MAGIC: u32 = 0x2BAD_B002;
/// `magic` field of the PVH `hvm_start_info` structure.
pub const PVH_MAGIC: u32 = 0x336E_C578;

/// How the image was entered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootProtocol {
    /// Multiboot v1; the memory above 1 MiB in KiB if the loader reported it.
    Multiboot {
        /// `mem_upper` of the multiboot information (KiB above 1 MiB), when flag bit 0 is set.
        mem_upper_kib: Option<u32>,
    },
    /// PVH; the version of the `hvm_start_info` structure.
    Pvh {
        /// `version` field of `hvm_start_info`.
        version: u32,
    },
    /// Neither signature matched.
    Unknown {
        /// EAX at entry.
        magic: u32,
    },
}

impl BootProtocol {
    /// Identifies the protocol from the two registers the entry code saved.
    ///
    /// # Safety
    ///
    /// `info` must be the EBX the loader passed (a multiboot information or `hvm_start_info`
    /// pointer, both in identity-mapped low memory), or any value when `magic` is neither
    /// multiboot's nor 0.
    #[must_use]
    pub unsafe fn identify(magic: u32, info: u32) -> Self {
        let ptr = info as usize as *const u32;
        if magic == MULTIBOOT_MAGIC {
            // SAFETY: the multiboot information starts with `flags` and `mem_lower`/`mem_upper`
            // (offsets 0, 4, 8), readable at `info` per the caller's promise.
            let (flags, upper) = unsafe { (ptr.read_volatile(), ptr.add(2).read_volatile()) };
            return Self::Multiboot {
                mem_upper_kib: (flags & 1 != 0).then_some(upper),
            };
        }
        if magic == 0 && info != 0 {
            // SAFETY: under PVH, EBX points to `hvm_start_info` (`magic`, `version`, ...).
            let (m, version) = unsafe { (ptr.read_volatile(), ptr.add(1).read_volatile()) };
            if m == PVH_MAGIC {
                return Self::Pvh { version };
            }
        }
        Self::Unknown { magic }
    }
}

unsafe extern "C" {
    /// Lowest byte of the boot stack (from `boot.s`).
    static boot_stack_bottom: u8;
    /// One past the highest byte of the boot stack.
    static boot_stack_top: u8;
    /// First byte of the image (from the linker script).
    static __image_start: u8;
    /// One past the last byte of the image, zeroed part included.
    static __image_end: u8;
}

/// The boot stack as an address range.
#[must_use]
pub fn stack_range() -> (usize, usize) {
    (
        core::ptr::addr_of!(boot_stack_bottom) as usize,
        core::ptr::addr_of!(boot_stack_top) as usize,
    )
}

/// The image's memory as an address range.
#[must_use]
pub fn image_range() -> (usize, usize) {
    (
        core::ptr::addr_of!(__image_start) as usize,
        core::ptr::addr_of!(__image_end) as usize,
    )
}

/// Word written over the unused part of the stack at boot, to measure how deep it got.
const STACK_PAINT: u64 = 0x5AC4_5AC4_5AC4_5AC4;
/// Bytes below the current stack pointer left alone when painting (the caller's own frames).
const PAINT_MARGIN: usize = 4096;

/// Paints the stack below the caller's frame so that [`stack_peak`] can measure the deepest use.
pub fn paint_stack() {
    let (bottom, _) = stack_range();
    let marker = 0u8;
    let here = core::ptr::addr_of!(marker) as usize;
    let end = here.saturating_sub(PAINT_MARGIN) & !7;
    let mut p = bottom;
    while p < end {
        // SAFETY: [bottom, end) is part of the boot stack below every live frame (the current
        // frame minus a margin that covers this function's own use), so nothing reads it; the
        // address is 8-byte aligned.
        unsafe { (p as *mut u64).write_volatile(STACK_PAINT) };
        p += 8;
    }
}

/// Deepest stack use since [`paint_stack`], in bytes.
#[must_use]
pub fn stack_peak() -> usize {
    let (bottom, top) = stack_range();
    let mut p = bottom;
    // SAFETY: reads 8-byte aligned words of the boot stack below the deepest frame ever written,
    // or the first word that frame wrote; plain stack memory, valid for reads.
    while p < top && unsafe { (p as *const u64).read_volatile() } == STACK_PAINT {
        p += 8;
    }
    top - p
}
