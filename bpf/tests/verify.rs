//! The static check of what the kernel's verifier refuses (`onic_bpf::verify`), on a clang-built
//! object whose sections the kernel refuses one for one reason each (`bpf/tests/c/kernel_refuses.c`).

mod common;

use onic_bpf::{LoadOptions, Loader};

fn load(sec: &str, checks: bool) -> Result<onic_bpf::Loaded, String> {
    Loader::new(LoadOptions::default())
        .kernel_checks(checks)
        .load(&common::object("kernel_refuses.o"), Some(sec))
        .map_err(|e| e.to_string())
}

#[test]
fn what_the_kernel_refuses_is_refused_at_load_with_its_words() {
    for (sec, words) in [
        ("xdp/egress", "invalid bpf_context access off=20 size=4"),
        ("xdp/narrow", "invalid bpf_context access off=12 size=2"),
        ("xdp/ctx_write", "invalid bpf_context access off=16 size=4"),
        ("xdp/stack", "invalid write to stack R10 off=-520 size=8"),
        ("xdp/map_arg", "expected prog array map for tail call"),
        ("xdp/ctx_arg", "R1 type=scalar expected=ctx"),
        ("xdp/null", "R1 invalid mem access 'scalar'"),
        ("xdp/pkt_helper", "helper access to the packet is not allowed"),
        ("xdp/pkt_perf", "helper access to the packet is not allowed"),
        ("xdp/pkt_printk", "helper access to the packet is not allowed"),
        ("xdp/pkt_load", "helper access to the packet is not allowed"),
        ("xdp/pkt_store", "helper access to the packet is not allowed"),
        ("xdp/pkt_fib", "helper access to the packet is not allowed"),
        ("xdp/pkt_mtu", "helper access to the packet is not allowed"),
        (
            "xdp/pkt_past",
            "invalid access to packet, off=64 size=1, R2(id=0,off=64,r=64) | R2 offset is outside of the packet",
        ),
        (
            "xdp/pkt_unchecked",
            "invalid access to packet, off=12 size=1, R1(id=0,off=12,r=0)",
        ),
        ("xdp/pkt_adjusted", "R6 invalid mem access 'scalar'"),
        // On the branch where the pointer lies past the end, nothing may be read through it.
        ("xdp/pkt_gt_bad", "R2 offset is outside of the packet"),
        ("xdp/end_ge_bad", "R2 offset is outside of the packet"),
    ] {
        let e = load(sec, true).err().unwrap_or_else(|| panic!("{sec} loaded"));
        assert!(
            e.contains(words) && e.contains("the kernel's verifier refuses it"),
            "{sec}: {e}"
        );
        if sec.ends_with("_bad") {
            assert!(!e.contains("invalid access to packet"), "{sec}: {e}");
        }
        // Without the check the engine loads it, and the interpreter checks at run time.
        load(sec, false).unwrap_or_else(|e| panic!("{sec}: {e}"));
    }
}

#[test]
fn what_the_kernel_loads_is_loaded() {
    for sec in [
        "xdp/devmap",
        "xdp/fine",
        "xdp/pkt_allowed",
        "xdp/pkt_gt",
        "xdp/pkt_ge",
        "xdp/pkt_lt",
        "xdp/pkt_le",
        "xdp/end_gt",
        "xdp/end_ge",
        "xdp/end_lt",
        "xdp/end_le",
    ] {
        load(sec, true).unwrap_or_else(|e| panic!("{sec}: {e}"));
    }
    // Every object of the engine's own tests and os-linux/xdp loads with the check, but for
    // what the kernel refuses.
    for entry in std::fs::read_dir(common::object_path("")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !name.ends_with(".o") || name == "kernel_refuses.o" || name == "core_types.o" {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        for p in onic_bpf::list_programs(&bytes)
            .unwrap()
            .iter()
            .filter(|p| p.is_xdp)
        {
            let with = Loader::new(LoadOptions::default()).load(&bytes, Some(&p.name));
            let without = Loader::new(LoadOptions::default())
                .kernel_checks(false)
                .load(&bytes, Some(&p.name));
            // faults.o's packet reads without a bounds check fault on purpose: the kernel
            // refuses them, and so does the check.
            let refused =
                name == "faults.o" && ["past_the_end", "under_the_start"].contains(&p.name.as_str());
            assert_eq!(
                with.is_ok(),
                without.is_ok() && !refused,
                "{name} {}: {:?}",
                p.name,
                with.err()
            );
        }
    }
}

/// Hand-assembled programs for what clang does not emit on demand: each side of the check's
/// packet range tracking, and where it gives up rather than refuse what the kernel loads.
mod ranges {
    use onic_bpf::insn::{self, Insn};
    use onic_bpf::Program;

    fn i(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn::new(op, dst, src, off, imm)
    }

    const EXIT: Insn = Insn::EXIT;

    /// `r{d} = ctx->field` (0 data, 4 data_end, 8 data_meta).
    fn ctx(d: u8, field: i16) -> Insn {
        i(0x61, d, 1, field, 0)
    }

    /// `r0 = *(u8 *)(r{s} + off)`.
    fn byte(s: u8, off: i16) -> Insn {
        i(0x71, 0, s, off, 0)
    }

    fn check(code: Vec<Insn>) -> Result<(), String> {
        let p = Program::from_insns("raw", code);
        onic_bpf::validate::validate(&p).map_err(|e| e.to_string())?;
        onic_bpf::verify::check(&p, &[], false).map_err(|e| e.to_string())
    }

    /// r2 = data, r3 = data_end, r4 = data + 14, then `jump` (to the exit) and a read of byte
    /// `at` through r2 on the fall-through.
    fn after(jump: Insn, at: i16) -> Result<(), String> {
        check(vec![
            i(0xb7, 0, 0, 0, 0),
            ctx(2, 0),
            ctx(3, 4),
            i(0xbf, 4, 2, 0, 0),
            i(0x07, 4, 0, 0, 14),
            jump,
            byte(2, at),
            EXIT,
        ])
    }

    #[test]
    fn a_strict_comparison_proves_one_byte_more() {
        // Not `data + 14 > end`: bytes 0..14. Not `data + 14 >= end`: bytes 0..15 (Linux 6.1's
        // find_good_pkt_pointers), and so for the forms with data_end on the left.
        after(i(0x2d, 4, 3, 1, 0), 13).unwrap();
        let e = after(i(0x2d, 4, 3, 1, 0), 14).unwrap_err();
        assert!(
            e.contains("invalid access to packet, off=14 size=1, R2(id=0,off=14,r=14)"),
            "{e}"
        );
        after(i(0x3d, 4, 3, 1, 0), 14).unwrap();
        let e = after(i(0x3d, 4, 3, 1, 0), 15).unwrap_err();
        assert!(e.contains("off=15 size=1, R2(id=0,off=15,r=15)"), "{e}");
        // Not `end <= data + 14` is `data + 14 < end`; not `end < data + 14` is `<=`.
        after(i(0xbd, 3, 4, 1, 0), 14).unwrap();
        after(i(0xad, 3, 4, 1, 0), 13).unwrap();
        let e = after(i(0xad, 3, 4, 1, 0), 14).unwrap_err();
        assert!(e.contains("r=14)"), "{e}");
        // A 32-bit comparison proves nothing, as in the kernel.
        let e = after(i(0x2e, 4, 3, 1, 0), 0).unwrap_err();
        assert!(e.contains("off=0 size=1, R2(id=0,off=0,r=0)"), "{e}");
    }

    #[test]
    fn a_known_number_in_a_register_moves_a_pointer_as_a_constant_does() {
        for mov in [i(0xb7, 5, 0, 0, 14), i(0xb4, 5, 0, 0, 14)] {
            let code = vec![
                i(0xb7, 0, 0, 0, 0),
                ctx(2, 0),
                ctx(3, 4),
                mov,
                i(0xbf, 4, 2, 0, 0),
                i(0x0f, 4, 5, 0, 0),
                i(0x2d, 4, 3, 1, 0),
                byte(2, 13),
                EXIT,
            ];
            check(code).unwrap();
        }
    }

    #[test]
    fn metadata_is_bounded_by_data() {
        let meta = |at: i16| {
            check(vec![
                i(0xb7, 0, 0, 0, 0),
                ctx(2, 8),
                ctx(3, 0),
                i(0xbf, 4, 2, 0, 0),
                i(0x07, 4, 0, 0, 4),
                i(0x2d, 4, 3, 1, 0),
                i(0x61, 0, 2, at, 0),
                EXIT,
            ])
        };
        meta(0).unwrap();
        let e = meta(4).unwrap_err();
        assert!(
            e.contains("invalid access to packet, off=4 size=4, R2(id=0,off=4,r=4)"),
            "{e}"
        );
    }

    #[test]
    fn what_the_kernel_may_prove_beyond_the_check_is_not_refused() {
        // data spilled and filled: the kernel keeps the pointer's id through the stack, so its
        // comparison bounds r2 too; the check does not follow the stack.
        check(vec![
            i(0xb7, 0, 0, 0, 0),
            ctx(2, 0),
            ctx(3, 4),
            i(0x7b, 10, 2, -8, 0),
            i(0x79, 6, 10, -8, 0),
            i(0x07, 6, 0, 0, 20),
            i(0x2d, 6, 3, 1, 0),
            byte(2, 19),
            EXIT,
        ])
        .unwrap();
        // A function that compares its argument with data_end and returns 1 where it fits: the
        // kernel follows each return on its own, so the caller's read after `r0 != 0` is safe.
        check(vec![
            ctx(6, 0),
            ctx(2, 4),
            i(0xbf, 1, 6, 0, 0),
            i(insn::CALL, 0, insn::pseudo::CALL, 0, 3),
            i(0x15, 0, 0, 1, 0),
            byte(6, 13),
            EXIT,
            // the function
            i(0xb7, 0, 0, 0, 0),
            i(0x07, 1, 0, 0, 14),
            i(0x2d, 1, 2, 1, 0),
            i(0xb7, 0, 0, 0, 1),
            EXIT,
        ])
        .unwrap();
    }

    #[test]
    fn a_pointer_known_past_the_end_decides_its_next_comparison() {
        // r4 = data + 14 > end is taken; there `r4 <= end` cannot hold, so the read behind it is
        // never reached (the kernel's is_pkt_ptr_branch_taken); on the other path it is checked.
        let code = |bad: i16| {
            vec![
                i(0xb7, 0, 0, 0, 0),
                ctx(2, 0),
                ctx(3, 4),
                i(0xbf, 4, 2, 0, 0),
                i(0x07, 4, 0, 0, 14),
                i(0x2d, 4, 3, 1, 0),
                EXIT,
                i(0xbd, 4, 3, 1, 0),
                EXIT,
                byte(2, bad),
                EXIT,
            ]
        };
        check(code(100)).unwrap();
        // The same read with the comparison the other way round is reached.
        let mut reached = code(100);
        reached[7] = i(0x2d, 4, 3, 1, 0);
        let e = check(reached).unwrap_err();
        assert!(e.contains("off=100 size=1, R2(id=0,off=100,r=0)"), "{e}");
    }
}
