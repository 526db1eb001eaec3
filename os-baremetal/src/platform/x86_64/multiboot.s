/*
 * The multiboot v1 header, assembled only without feature pvh-only (QEMU prefers multiboot when it
 * finds this header, and falls back to the PVH note otherwise). See boot.s.
 */

/* Multiboot v1 header: magic, flags (bit 1: memory info wanted, bit 16: address fields valid),
 * checksum, then header/load/load_end/bss_end/entry addresses. */
.section .multiboot_header, "a"
.balign 4
multiboot_header:
    .long 0x1BADB002
    .long 0x00010002
    .long -(0x1BADB002 + 0x00010002)
    .long multiboot_header
    .long __image_start
    .long __image_data_end
    .long __image_end
    .long boot32_entry
