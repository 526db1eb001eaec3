//! The onic side: the engine on one frame laid out as the kernel's test run lays it out
//! ([`onic_bpf::bundle::test_run`]: 256 bytes of headroom in a zeroed 4096-byte page), received on
//! queue 0 of port 0 (interface 1, as the test run's loopback device), on CPU 0. Each frame gets a
//! freshly loaded engine, so that every frame starts from the maps as the object declares them,
//! as the kernel side does by restoring its maps.

use onic_bpf::{bundle, LoadOptions, Loader, SimHost, XdpEngine};

use crate::{MapState, Outcome};

/// The running kernel's BTF, which the kernel side's CO-RE relocations are resolved against
/// (read once).
fn kernel_btf() -> Option<&'static [u8]> {
    static BTF: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    BTF.get_or_init(|| std::fs::read("/sys/kernel/btf/vmlinux").ok())
        .as_deref()
}

/// What the kernel side does for a map of maps that declares no inner map
/// ([`onic_libbpf::INNER`]): a new array of 4-byte keys and values in entry 0.
fn give_inner_maps(maps: &mut Vec<onic_bpf::Map>) -> Result<(), String> {
    for outer in 0..maps.len() {
        let d = maps[outer].def();
        if !d.map_type.is_map_of_maps() || d.key_size != 4 || maps[outer].inner_template().is_some() {
            continue;
        }
        let def = onic_bpf::MapDef {
            name: format!("{}.inner", d.name),
            map_type: onic_bpf::MapType::Array,
            key_size: 4,
            value_size: 4,
            max_entries: onic_libbpf::INNER,
            flags: 0,
            read_only: false,
        };
        maps.push(onic_bpf::Map::new(def, LoadOptions::default().cpus)?);
        let inner = maps.len() - 1;
        onic_bpf::maps::set_inner(maps, outer, &0u32.to_le_bytes(), inner)?;
    }
    Ok(())
}

/// What the kernel side does with the programs named `classifier_<i>`
/// ([`onic_libbpf::tail_slot`]): each loaded and put into entry `i` of every program array.
fn fill_jump_tables(loader: &Loader<'_>, bytes: &[u8], loaded: &mut onic_bpf::Loaded) -> Result<(), String> {
    let arrays: Vec<usize> = (0..loaded.maps.len())
        .filter(|&m| loaded.maps[m].def().map_type == onic_bpf::MapType::ProgArray)
        .collect();
    if arrays.is_empty() {
        return Ok(());
    }
    for info in loaded.programs.clone() {
        let Some(i) = onic_libbpf::tail_slot(&info.name) else {
            continue;
        };
        let other = loader.load(bytes, Some(&info.name)).map_err(|e| e.to_string())?;
        loaded.tail_programs.push(other.program);
        let n = loaded.tail_programs.len() as u32;
        for &m in &arrays {
            // An index beyond the map is refused, as the kernel refuses it.
            let _ = loaded.maps[m].host_set(&i.to_le_bytes(), &n.to_le_bytes());
        }
    }
    Ok(())
}

/// A program the engine accepted: the object's bytes and the function to load.
pub struct Onic<'a> {
    loader: Loader<'static>,
    /// The program as loaded: every frame gets a copy (loading again would resolve the CO-RE
    /// relocations against the kernel's BTF again, for the same result).
    loaded: onic_bpf::Loaded,
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
        give_inner_maps(&mut loaded.maps)?;
        fill_jump_tables(&loader, bytes, &mut loaded)?;
        Ok(Self {
            loader,
            loaded,
            _bytes: std::marker::PhantomData,
        })
    }

    /// Why a host without the kernel (the bare-metal image, which loads the object with the
    /// engine's defaults and nothing else) could not run this program as it runs here: CO-RE
    /// relocations that need the kernel's BTF, inner maps or tail call tables this side adds.
    pub fn needs_more_than_the_object(bytes: &[u8], func: &str, entries: u32) -> Option<String> {
        let loader = Loader::new(LoadOptions::default())
            .unsized_max_entries(entries)
            .prog_type_xdp(true);
        let loaded = match loader.load(bytes, Some(func)) {
            Ok(l) => l,
            Err(e) => {
                return Some(format!(
                    "loads only with the kernel's BTF (the bundle carries none): {e}"
                ))
            }
        };
        let needs = |m: &onic_bpf::Map| {
            let d = m.def();
            if d.map_type == onic_bpf::MapType::ProgArray {
                Some("a tail call table the harness fills")
            } else if d.map_type.is_map_of_maps() && m.inner_template().is_none() {
                Some("an inner map the harness adds")
            } else {
                None
            }
        };
        loaded
            .maps
            .iter()
            .find_map(needs)
            .map(|what| format!("needs {what}"))
    }

    /// Runs the program on `frame` with fresh maps (the test run's layout,
    /// [`onic_bpf::bundle::test_run`]): the outcome and the maps' entries after the run (map
    /// name, sorted (key, CPU 0's value)).
    pub fn run(&self, frame: &[u8]) -> (Outcome, MapState) {
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
        (out, maps)
    }
}
