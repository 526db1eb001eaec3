//! `cargo xtask vm-bench`: the module's throughput tables, measured in one VM boot with the
//! configurations side by side (`os-linux/vm/bench.sh` is the guest's `/init`). Not part of CI.
//!
//! (a) the RX memory model: `page_pool` against a page allocated and mapped per packet
//!     (`rx_page_pool=0`), iperf3 UDP per frame size and TCP;
//! (b) XDP: not built in (`xdp=0`), built in with no program, an XDP_PASS program, iperf3 UDP per
//!     frame size;
//! (c) XDP_DROP per frame size: the kernel's pktgen sends from port 0, Debian's `xdp-bench drop`
//!     drops on port 1, the rate is the driver's `rx_xdp_drop` over the sending time.
//!
//! The guest prints `BENCH <table> <configuration> <what> <value> <unit>` lines; they are turned
//! into markdown tables with ratios against the first configuration of each table.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use crate::kmod;
use crate::root;
use crate::vm::{build_xdp, initramfs, run_guest, Machine, VM_CMDLINE};

pub const USAGE: &str = "usage: cargo xtask vm-bench [--kernel 6.1|6.12] [--secs N]";

/// One figure the guest reported.
struct Figure {
    table: String,
    config: String,
    what: String,
    value: u64,
    unit: String,
}

fn parse_args(args: &[String]) -> Result<(String, u32), String> {
    let mut kernel = "6.1".to_string();
    let mut secs = 5;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--kernel" => kernel = it.next().cloned().ok_or(USAGE)?,
            "--secs" => {
                secs = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .filter(|s| (1..=60).contains(s))
                    .ok_or("--secs takes 1..=60")?;
            }
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    Ok((kernel, secs))
}

fn figures(console: &[String]) -> Vec<Figure> {
    console
        .iter()
        .filter_map(|l| {
            let mut w = l.trim().strip_prefix("BENCH ")?.split_whitespace();
            Some(Figure {
                table: w.next()?.into(),
                config: w.next()?.into(),
                what: w.next()?.into(),
                value: w.next()?.parse().ok()?,
                unit: w.next()?.into(),
            })
        })
        .collect()
}

/// One markdown table: a row per measured quantity, a column per configuration (in the order
/// the guest ran them), each with its ratio to the first configuration.
fn table(figs: &[&Figure]) -> String {
    let mut configs: Vec<&str> = Vec::new();
    let mut rows: Vec<(&str, &str)> = Vec::new();
    let mut v: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for f in figs {
        if !configs.contains(&f.config.as_str()) {
            configs.push(&f.config);
        }
        if !rows.iter().any(|(w, _)| *w == f.what) {
            rows.push((&f.what, &f.unit));
        }
        v.insert((&f.what, &f.config), f.value);
    }
    let mut out = format!("| figure | unit | {} |\n", configs.join(" | "));
    out.push_str(&format!("| --- | --- |{}\n", " --- |".repeat(configs.len())));
    for (what, unit) in rows {
        let base = v.get(&(what, configs[0])).copied().unwrap_or(0);
        let cells: Vec<String> = configs
            .iter()
            .enumerate()
            .map(|(i, c)| match v.get(&(what, c)) {
                Some(&x) if i > 0 && base > 0 => format!("{x} ({:.2}×)", x as f64 / base as f64),
                Some(&x) => x.to_string(),
                None => "-".into(),
            })
            .collect();
        out.push_str(&format!("| {what} | {unit} | {} |\n", cells.join(" | ")));
    }
    out
}

/// `cargo xtask vm-bench`.
pub fn vm_bench(args: &[String]) -> Result<ExitCode, String> {
    let (kernel, secs) = parse_args(args)?;
    let k = *kmod::select(&kernel)?.first().ok_or("no kernel selected")?;
    kmod::ensure_host_packages()?;
    let obj = kmod::build_rust_object()?;
    let xdp = build_xdp()?;
    let r = kmod::fetch(k)?;
    let ko = kmod::build_module(&r, &obj)?;
    let pktgen = kmod::image_module(&r, "net/core/pktgen.ko")?;
    let img = initramfs(
        &r,
        &ko,
        &xdp,
        &root().join("os-linux/vm/bench.sh"),
        &[(pktgen, "lib/modules/pktgen.ko")],
    )?;
    let append = format!("{VM_CMDLINE} onic_bench_secs={secs}");
    let run = run_guest(
        &r,
        &Machine::debian(),
        &img,
        Duration::from_secs(3600),
        "tcg",
        &append,
        "",
    )?;
    if !run.console.iter().any(|l| l.trim() == "VM-BENCH DONE") {
        return Err(format!(
            "vm-bench: the guest did not finish (QEMU status {:?})",
            run.status
        ));
    }
    let figs = figures(&run.console);
    println!(
        "==== vm-bench: Linux {}, {} s per figure, {:.0} s in all",
        r.abi,
        secs,
        run.elapsed.as_secs_f64()
    );
    let mut tables: Vec<&str> = Vec::new();
    for f in &figs {
        if !tables.contains(&f.table.as_str()) {
            tables.push(&f.table);
        }
    }
    for t in tables {
        let in_table: Vec<&Figure> = figs.iter().filter(|f| f.table == t).collect();
        println!("\n{t}\n\n{}", table(&in_table));
    }
    Ok(ExitCode::SUCCESS)
}
