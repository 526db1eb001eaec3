//! The program's address space. Registers hold 64-bit values; an address is a region number in
//! the upper 32 bits and an offset in the lower 32. Every load and store is resolved through
//! [`region`] and checked against the bounds of that region alone, so no arithmetic on a pointer
//! can reach memory outside what the program was given:
//!
//! | region | what | offsets allowed |
//! | --- | --- | --- |
//! | [`CTX`] | the `struct xdp_md` context | loads of its six 4-byte fields |
//! | [`STACK`] | the stack: [`MAX_FRAMES`] frames of [`FRAME_SIZE`] bytes | `0..STACK_SIZE` |
//! | [`PACKET`] | the frame's page, offsets from its start | metadata start .. data end |
//! | [`MAP_HANDLE`] | map handles (`&my_map`) | none: only helpers take them |
//! | [`MAP_BASE`] + n | values of map n | within one value of the storage |
//!
//! Offsets are stored with a bias of [`BIAS`] (2 GiB), so that pointer arithmetic that goes below
//! a region's start (`data - 300`) stays in that region and is reported as outside it. Values below
//! `1 << 32` are plain numbers; dereferencing one faults (a NULL check the program left out
//! becomes XDP_ABORTED).

/// Region of the context.
pub const CTX: u64 = 1;
/// Region of the stack.
pub const STACK: u64 = 2;
/// Region of the packet page.
pub const PACKET: u64 = 3;
/// Region of map handles.
pub const MAP_HANDLE: u64 = 4;
/// Region of function addresses (`bpf_loop` callbacks): the offset is an instruction slot.
pub const FUNC: u64 = 5;
/// First region of map values.
pub const MAP_BASE: u64 = 0x100;
/// Most maps per object.
pub const MAX_MAPS: usize = 0x1000;
/// Added to every offset in an address.
pub const BIAS: u32 = 0x8000_0000;
/// Bytes of stack per call frame (the kernel's limit).
pub const FRAME_SIZE: usize = 512;
/// Deepest call chain (the kernel's `MAX_CALL_FRAMES`).
pub const MAX_FRAMES: usize = 8;
/// Bytes of stack in all.
pub const STACK_SIZE: usize = FRAME_SIZE * MAX_FRAMES;

/// Where an address points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// Not an address.
    None,
    /// The context, at this offset.
    Ctx(u32),
    /// The stack, at this offset from its lowest byte.
    Stack(u32),
    /// The packet page, at this offset.
    Packet(u32),
    /// A map handle.
    MapHandle(usize),
    /// The function at this instruction slot.
    Func(u32),
    /// Map `n`'s value storage, at this offset.
    MapValue(usize, u32),
}

/// Resolves an address.
#[must_use]
pub const fn region(addr: u64) -> Region {
    // Below the region's start, the offset wraps to at least 2 GiB: beyond every region.
    let off = (addr as u32).wrapping_sub(BIAS);
    match addr >> 32 {
        CTX => Region::Ctx(off),
        STACK => Region::Stack(off),
        PACKET => Region::Packet(off),
        MAP_HANDLE => Region::MapHandle(off as usize),
        FUNC => Region::Func(off),
        r if r >= MAP_BASE && r < MAP_BASE + MAX_MAPS as u64 => {
            Region::MapValue((r - MAP_BASE) as usize, off)
        }
        _ => Region::None,
    }
}

/// The address of offset `off` in region `r`.
#[must_use]
pub const fn addr(r: u64, off: u32) -> u64 {
    (r << 32) | off.wrapping_add(BIAS) as u64
}

/// The handle of map `m`.
#[must_use]
pub const fn map_handle(m: usize) -> u64 {
    addr(MAP_HANDLE, m as u32)
}

/// The address of byte `off` of map `m`'s value storage.
#[must_use]
pub const fn map_value_addr(m: usize, off: u32) -> u64 {
    addr(MAP_BASE + m as u64, off)
}

/// An address as a person reads it: `packet+316`, `stack+4088`, `map 2+8`, or the raw number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown(pub u64);

impl core::fmt::Display for Shown {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let signed = |o: u32| o as i32;
        match region(self.0) {
            Region::Ctx(o) => write!(f, "ctx{:+}", signed(o)),
            Region::Stack(o) => write!(f, "stack{:+}", signed(o)),
            Region::Packet(o) => write!(f, "packet{:+}", signed(o)),
            Region::MapHandle(m) => write!(f, "map handle {m}"),
            Region::Func(s) => write!(f, "function at instruction {s}"),
            Region::MapValue(m, o) => write!(f, "map {m}{:+}", signed(o)),
            Region::None => write!(f, "{:#x}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_resolve() {
        assert_eq!(region(0), Region::None);
        assert_eq!(region(0xffff_ffff), Region::None);
        assert_eq!(region(addr(STACK, 4088)), Region::Stack(4088));
        assert_eq!(region(map_value_addr(3, 8)), Region::MapValue(3, 8));
        assert_eq!(region(map_handle(2)), Region::MapHandle(2));
        assert_eq!(region(addr(MAP_BASE + MAX_MAPS as u64, 0)), Region::None);
        assert_eq!(region(u64::MAX), Region::None);
        // Pointer arithmetic below a region's start stays in the region, far beyond its end.
        assert_eq!(
            region(addr(PACKET, 0).wrapping_sub(300)),
            Region::Packet(u32::MAX - 299)
        );
        assert_eq!(region(addr(STACK, 0)), Region::Stack(0));
        assert_eq!(
            std::format!("{}", Shown(addr(PACKET, 0).wrapping_sub(300))),
            "packet-300"
        );
        assert_eq!(std::format!("{}", Shown(map_value_addr(2, 8))), "map 2+8");
        assert_eq!(std::format!("{}", Shown(7)), "0x7");
    }
}
