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
    ] {
        let e = load(sec, true).err().unwrap_or_else(|| panic!("{sec} loaded"));
        assert!(
            e.contains(words) && e.contains("the kernel's verifier refuses it"),
            "{sec}: {e}"
        );
        // Without the check the engine loads it, and the interpreter checks at run time.
        load(sec, false).unwrap_or_else(|e| panic!("{sec}: {e}"));
    }
}

#[test]
fn what_the_kernel_loads_is_loaded() {
    for sec in ["xdp/devmap", "xdp/fine", "xdp/pkt_allowed"] {
        load(sec, true).unwrap_or_else(|e| panic!("{sec}: {e}"));
    }
    // Every object of the engine's own tests and os-linux/xdp loads with the check.
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
            assert_eq!(
                with.is_ok(),
                without.is_ok(),
                "{name} {}: {:?}",
                p.name,
                with.err()
            );
        }
    }
}
