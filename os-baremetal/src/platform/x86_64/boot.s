/*
 * Boot code of the onic-baremetal image (Intel syntax, assembled by rustc's global_asm!).
 *
 * QEMU's -kernel loader enters at boot32_entry in 32-bit protected mode with paging off, through
 * one of two doors:
 *   - multiboot v1: the header below sets flag bit 16 (the "a.out kludge"), so QEMU takes the load
 *     addresses from the header instead of parsing the ELF64 file, which its multiboot loader
 *     refuses. EAX = 0x2BADB002, EBX = physical address of the multiboot information.
 *   - PVH: the Xen ELF note XEN_ELFNOTE_PHYS32_ENTRY. QEMU uses it when there is no multiboot
 *     header (feature pvh-only). EBX = physical address of the hvm_start_info structure.
 *
 * From there: check that the CPU has long mode, build page tables that identity-map the low 4 GiB
 * with 2 MiB pages, enable PAE + long mode + paging, load a three-entry GDT, jump to 64-bit code,
 * switch to the boot stack and call kmain(boot_magic, boot_info) with the two boot registers.
 */

/* PVH entry point note: namesz, descsz, type 18 (XEN_ELFNOTE_PHYS32_ENTRY), "Xen", 32-bit entry. */
.section .note.onic_pvh, "a", @note
.balign 4
    .long 4
    .long 4
    .long 18
    .asciz "Xen"
    .balign 4
    .long boot32_entry

.section .text.boot32, "ax"
.code32
.global boot32_entry
boot32_entry:
    cli
    cld
    /* EBP and ESI carry the boot registers to kmain; the code below clobbers the others. */
    mov ebp, eax
    mov esi, ebx
    mov esp, offset boot_stack_top

    /* Long mode present? CPUID 0x80000001 EDX bit 29. */
    mov eax, 0x80000000
    cpuid
    cmp eax, 0x80000001
    jb .Lno_long_mode
    mov eax, 0x80000001
    cpuid
    test edx, 0x20000000
    jz .Lno_long_mode

    /* Zero the six page-table pages (PML4, PDPT, four page directories). */
    mov edi, offset boot_pml4
    mov ecx, 6 * 4096 / 4
    xor eax, eax
    rep stosd

    /* PML4[0] -> PDPT; PDPT[0..3] -> the four page directories (present | writable). */
    mov eax, offset boot_pdpt
    or eax, 3
    mov dword ptr [boot_pml4], eax
    mov eax, offset boot_pd
    or eax, 3
    xor ecx, ecx
.Lfill_pdpt:
    mov dword ptr [boot_pdpt + ecx * 8], eax
    add eax, 4096
    inc ecx
    cmp ecx, 4
    jne .Lfill_pdpt

    /* 2048 entries of 2 MiB (present | writable | page size): virtual = physical below 4 GiB. */
    xor ecx, ecx
.Lfill_pd:
    mov eax, ecx
    shl eax, 21
    or eax, 0x83
    mov dword ptr [boot_pd + ecx * 8], eax
    inc ecx
    cmp ecx, 2048
    jne .Lfill_pd

    /* CR3 = PML4, CR4.PAE, EFER.LME, then CR0.PG | CR0.WP | CR0.PE: long mode is active. */
    mov eax, offset boot_pml4
    mov cr3, eax
    mov eax, cr4
    or eax, 0x20
    mov cr4, eax
    mov ecx, 0xC0000080
    rdmsr
    or eax, 0x100
    wrmsr
    mov eax, cr0
    or eax, 0x80010001
    mov cr0, eax

    /* A far return loads CS with the 64-bit code selector. */
    lgdt [boot_gdt_pointer]
    mov eax, offset boot64_entry
    push 0x08
    push eax
    retf

.Lno_long_mode:
    /* isa-debug-exit with code 0x14 (see src/exit.rs), then stop. */
    mov dx, 0xF4
    mov eax, 0x14
    out dx, eax
.Lhalt32:
    hlt
    jmp .Lhalt32

.code64
boot64_entry:
    mov ax, 0x10
    mov ds, ax
    mov es, ax
    mov ss, ax
    xor eax, eax
    mov fs, ax
    mov gs, ax
    mov rsp, offset boot_stack_top
    /* The upper halves of the registers are undefined after the switch: zero-extend. */
    mov edi, ebp
    mov esi, esi
    xor ebp, ebp
    call kmain
.Lhalt64:
    cli
    hlt
    jmp .Lhalt64

/* Null descriptor, 0x08: 64-bit code (L=1, present, ring 0), 0x10: data (present, writable). */
.section .rodata.boot_gdt, "a"
.balign 16
boot_gdt:
    .quad 0
    .quad 0x00209A0000000000
    .quad 0x0000920000000000
boot_gdt_pointer:
    .word boot_gdt_pointer - boot_gdt - 1
    .long boot_gdt

/* Zeroed by the loader (multiboot: up to bss_end; PVH: the ELF segment's memsz). */
.section .bss.boot, "aw", @nobits
.balign 4096
boot_pml4:
    .skip 4096
boot_pdpt:
    .skip 4096
boot_pd:
    .skip 4 * 4096
.global boot_stack_bottom
.global boot_stack_top
.balign 4096
boot_stack_bottom:
    .skip 512 * 1024
boot_stack_top:
