//! The module build's kernel side (feature `kernel` on `x86_64-unknown-none` only): what a
//! static library needs to live inside the kernel (heap, panic handler, printk logger), the
//! hardware backend over the kernel's MMIO and DMA API, and the `extern "C"` entry points that
//! the C glue (`os-linux/kernel/onic_main.c`) calls.

mod backend;
mod entry;
mod ffi;
mod heap;
mod kos;
mod lock;
mod panic;
mod printk;
