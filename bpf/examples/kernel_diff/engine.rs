//! The onic side: the engine on one frame laid out as the kernel's test run lays it out
//! ([`onic_bpf::bundle::test_run`]: 256 bytes of headroom in a zeroed 4096-byte page), received on
//! queue 0 of port 0 (interface 1, as the test run's loopback device), on CPU 0. Each frame gets a
//! freshly loaded engine, so that every frame starts from the maps as the object declares them,
//! as the kernel side does by restoring its maps.

use onic_bpf::bundle::{self, Setup};
use onic_bpf::{LoadOptions, Loader, SimHost, XdpEngine};

use crate::{MapState, Outcome};

/// The running kernel's BTF, which the kernel side's CO-RE relocations are resolved against
/// (read once).
fn kernel_btf() -> Option<&'static [u8]> {
    static BTF: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    BTF.get_or_init(|| std::fs::read("/sys/kernel/btf/vmlinux").ok())
        .as_deref()
}

/// What the kernel side does to the maps after the load ([`onic_libbpf::LoadOptions`]'s
/// `tail_calls` and `inner_maps`), as the bundle carries it for the bare-metal image: every
/// program named `classifier_<i>` into entry `i` of every program array that has one
/// ([`onic_libbpf::tail_slot`]), and a map of maps of 4-byte keys that declares no inner map
/// given an [`onic_libbpf::INNER`]-entry array of 4-byte values in entry 0.
fn harness_setup(loaded: &onic_bpf::Loaded) -> Vec<Setup> {
    let mut out = Vec::new();
    for m in &loaded.maps {
        let d = m.def();
        if d.map_type == onic_bpf::MapType::ProgArray {
            for info in &loaded.programs {
                // An index beyond the map is left out, as the kernel refuses it.
                if let Some(key) = onic_libbpf::tail_slot(&info.name).filter(|&i| i < d.max_entries) {
                    out.push(Setup::TailCall {
                        map: d.name.clone(),
                        key,
                        func: info.name.clone(),
                    });
                }
            }
        } else if d.map_type.is_map_of_maps() && d.key_size == 4 && m.inner_template().is_none() {
            out.push(Setup::InnerArray {
                map: d.name.clone(),
                key: 0,
                value_size: 4,
                max_entries: onic_libbpf::INNER,
            });
        }
    }
    out
}

/// A program the engine accepted: the object's bytes and the function to load.
pub struct Onic<'a> {
    loader: Loader<'static>,
    /// The program as loaded: every frame gets a copy (loading again would resolve the CO-RE
    /// relocations against the kernel's BTF again, for the same result).
    loaded: onic_bpf::Loaded,
    /// What was done to the maps after the load (the bundle carries it).
    pub setup: Vec<Setup>,
    _bytes: std::marker::PhantomData<&'a [u8]>,
}

impl<'a> Onic<'a> {
    /// Loads `func` of `bytes` once to see whether the engine takes it. A map declared without
    /// `max_entries` gets `entries` entries, as on the kernel side; the program is loaded as XDP
    /// whatever its section (the harness only asks for programs libbpf types as XDP); CO-RE
    /// relocations are resolved against the running kernel's BTF, as libbpf resolves them.
    pub fn load(bytes: &'a [u8], func: &'a str, entries: u32) -> Result<Self, String> {
        let mut loader = Loader::new(LoadOptions::default())
            .unsized_max_entries(entries)
            .prog_type_xdp(true);
        if let Some(btf) = kernel_btf() {
            loader = loader.kernel_btf(btf);
        }
        let mut loaded = loader.load(bytes, Some(func)).map_err(|e| e.to_string())?;
        let setup = harness_setup(&loaded);
        bundle::set_up(&loader, bytes, &mut loaded, &setup)?;
        Ok(Self {
            loader,
            loaded,
            setup,
            _bytes: std::marker::PhantomData,
        })
    }

    /// Why a host without the kernel (the bare-metal image, which loads the object with the
    /// engine's defaults and does the bundle's [`Setup`]) could not run this program as it runs
    /// here: CO-RE relocations that need the kernel's BTF.
    pub fn needs_more_than_the_object(bytes: &[u8], func: &str, entries: u32) -> Option<String> {
        let loader = Loader::new(LoadOptions::default())
            .unsized_max_entries(entries)
            .prog_type_xdp(true);
        loader
            .load(bytes, Some(func))
            .err()
            .map(|e| format!("loads only with the kernel's BTF (the bundle carries none): {e}"))
    }

    /// Runs the program on `frame` with fresh maps (the test run's layout,
    /// [`onic_bpf::bundle::test_run`]): the outcome, the maps' entries after the run (map
    /// name, sorted (key, CPU 0's value)), and the records its ring buffers handed the host
    /// ([`onic_bpf::bundle::ring_records`]).
    pub fn run(&self, frame: &[u8]) -> (Outcome, MapState, bundle::Records) {
        let opts = *self.loader.options();
        let loaded = self.loaded.clone();
        let mut e = XdpEngine::new(loaded, SimHost::new(opts.cpus, 1), opts.budget);
        let out = match bundle::test_run(&mut e, frame) {
            bundle::Outcome::Ran { verdict, meta, frame } => Outcome::Ran {
                verdict,
                meta,
                frame,
                note: e.host().lines.last().cloned().unwrap_or_default(),
            },
            bundle::Outcome::Refused(why) => Outcome::Refused(why),
        };
        let maps = e
            .maps()
            .iter()
            .map(|m| {
                let entries = m
                    .entries()
                    .into_iter()
                    .map(|(k, copies)| (k, copies.first().map(|c| c.to_vec()).unwrap_or_default()))
                    .collect();
                (m.def().name.clone(), entries)
            })
            .collect();
        (out, maps, bundle::ring_records(&e))
    }
}
