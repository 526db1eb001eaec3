//! Panic handler: a Rust panic inside the kernel is a bug, so it becomes a kernel panic with the
//! message (the kernel prints the stack through the Rust frames, objtool made ORC data for them).

use core::fmt::Write;
use core::panic::PanicInfo;

use super::ffi;
use crate::text::FixedBuf;

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    let mut buf = FixedBuf::<192>::new();
    let _ = write!(buf, "{info}");
    let msg = buf.as_bytes();
    // SAFETY: the message is a valid byte range for the call; the C side does not return.
    unsafe { ffi::onic_rust_panic(msg.as_ptr(), msg.len()) };
    // SAFETY: not reached; `ud2` tells objtool (and the CPU) that control stops here.
    unsafe { core::arch::asm!("ud2", options(noreturn)) }
}
