//! CO-RE ("compile once, run everywhere") relocations: the instructions whose constants clang
//! left to the loader (field offsets and sizes, whether a field, type or enum value exists, enum
//! values, type sizes), recorded in `.BTF.ext` against the object's own BTF, resolved against
//! the BTF of the kernel the program runs on: `/sys/kernel/btf/vmlinux` when the caller passes
//! it ([`crate::Loader::kernel_btf`]), otherwise the engine's own description of the UAPI types
//! XDP programs read ([`BUILTIN`]: `xdp_md`, `ethhdr`, `iphdr`, `ipv6hdr`, `tcphdr`, `udphdr`,
//! `icmphdr`, `vlan_hdr`...).
//!
//! As libbpf does (kernel `Documentation/bpf/llvm_reloc.rst`, `libbpf/relo_core.c` for the
//! rules, not the code): a local type is matched with target types of the same kind whose names
//! agree up to a `___flavour` suffix; an access string `0:2:1` (index into the root pointer, then
//! member or element indexes) is followed member by member, by name, through the target. What
//! the target lacks makes an `*_EXISTS` relocation 0; any other relocation against a missing
//! field or type refuses the program if it can reach the instruction.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::btf::{self, Btf};
use crate::insn::{class, Insn};

/// The compiled description of the UAPI types (`bpf/src/core_types.c`, built by `cargo xtask
/// bpf-objects` into `bpf/objects/core_types.o` and checked like every prebuilt object).
pub const BUILTIN: &[u8] = include_bytes!("../objects/core_types.o");

/// Relocation kinds (`enum bpf_core_relo_kind`).
mod kind {
    pub const FIELD_BYTE_OFFSET: u32 = 0;
    pub const FIELD_BYTE_SIZE: u32 = 1;
    pub const FIELD_EXISTS: u32 = 2;
    pub const FIELD_SIGNED: u32 = 3;
    pub const FIELD_LSHIFT_U64: u32 = 4;
    pub const FIELD_RSHIFT_U64: u32 = 5;
    pub const TYPE_ID_LOCAL: u32 = 6;
    pub const TYPE_ID_TARGET: u32 = 7;
    pub const TYPE_EXISTS: u32 = 8;
    pub const TYPE_SIZE: u32 = 9;
    pub const ENUMVAL_EXISTS: u32 = 10;
    pub const ENUMVAL_VALUE: u32 = 11;
    pub const TYPE_MATCHES: u32 = 12;
}

/// One CO-RE relocation: the section it belongs to, the byte of the instruction in it, the
/// local type, the access string, the kind.
#[derive(Clone, Copy, Debug)]
pub struct Relo<'a> {
    /// Code section name.
    pub section: &'a str,
    /// Byte offset of the instruction in its section.
    pub insn_off: u32,
    type_id: u32,
    access: &'a str,
    kind: u32,
}

/// Every CO-RE relocation of `.BTF.ext`.
///
/// # Errors
///
/// A malformed section.
pub fn relocations<'a>(ext: &'a [u8], btf: &Btf<'a>) -> Result<Vec<Relo<'a>>, String> {
    let u32_at = |b: &[u8], o: usize| {
        b.get(o..o + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    if ext.get(0..2) != Some(&[0x9f, 0xeb][..]) {
        return Err(".BTF.ext: bad magic".into());
    }
    let hdr_len = u32_at(ext, 4).ok_or(".BTF.ext: short header")? as usize;
    if hdr_len < 32 {
        return Ok(Vec::new());
    }
    let (off, len) = (u32_at(ext, 24), u32_at(ext, 28));
    let (Some(off), Some(len)) = (off, len) else {
        return Err(".BTF.ext: short header".into());
    };
    let start = hdr_len.checked_add(off as usize).ok_or(".BTF.ext: bad offset")?;
    let body = start
        .checked_add(len as usize)
        .and_then(|e| ext.get(start..e))
        .ok_or(".BTF.ext: CO-RE records out of bounds")?;
    let mut out = Vec::new();
    if body.is_empty() {
        return Ok(out);
    }
    let rec = u32_at(body, 0).ok_or(".BTF.ext: truncated CO-RE records")? as usize;
    if rec < 16 {
        return Err(".BTF.ext: CO-RE records shorter than 16 bytes".into());
    }
    let mut p = 4;
    while p < body.len() {
        let (Some(name), Some(n)) = (u32_at(body, p), u32_at(body, p + 4)) else {
            return Err(".BTF.ext: truncated CO-RE records".into());
        };
        let section = btf.name(name);
        p += 8;
        for _ in 0..n {
            let f = |i: usize| u32_at(body, p + 4 * i).ok_or(".BTF.ext: truncated CO-RE records");
            out.push(Relo {
                section,
                insn_off: f(0)?,
                type_id: f(1)?,
                access: btf.name(f(2)?),
                kind: f(3)?,
            });
            p += rec;
        }
    }
    Ok(out)
}

/// What a walk along an access string found: the field's bit offset from the root, its type,
/// its bit size when it is a bitfield.
#[derive(Clone, Copy, Debug)]
struct Field {
    bit_off: u64,
    ty: u32,
    bitfield: Option<u32>,
}

/// The name without a `___flavour` suffix.
fn essential(name: &str) -> &str {
    name.find("___").map_or(name, |i| &name[..i])
}

/// Follows `access` from type `root` in `b`, matching members of other BTF by name: `names[i]`
/// is the member name wanted at step i (None: follow the index itself, as in the local BTF).
fn walk(b: &Btf<'_>, root: u32, idx: &[u32], names: Option<&[&str]>) -> Result<Option<Field>, String> {
    let (root, rt) = b.skip_mods(root)?;
    let size = u64::from(b.size_of(root, 0)?);
    let mut f = Field {
        bit_off: u64::from(idx[0]) * size * 8,
        ty: root,
        bitfield: None,
    };
    let _ = rt;
    for (step, &i) in idx.iter().enumerate().skip(1) {
        let (id, t) = b.skip_mods(f.ty)?;
        match t.kind {
            btf::KIND_STRUCT | btf::KIND_UNION => {
                let member = match names {
                    None => Some(i as usize),
                    Some(n) => find_member(b, &t, n[step - 1])?,
                };
                let Some(m) = member.filter(|&m| m < t.vlen) else {
                    return Ok(None);
                };
                let off = b.extra_u32(&t, 3 * m + 2)?;
                let (bits, bit_off) = if t.kflag {
                    (off >> 24, off & 0xff_ffff)
                } else {
                    (0, off)
                };
                f.bit_off += u64::from(bit_off);
                f.ty = b.extra_u32(&t, 3 * m + 1)?;
                f.bitfield = (bits != 0).then_some(bits);
            }
            btf::KIND_ARRAY => {
                let elem = b.extra_u32(&t, 0)?;
                let n = b.extra_u32(&t, 2)?;
                if names.is_some() && i >= n && n != 0 {
                    return Ok(None);
                }
                f.bit_off += u64::from(i) * u64::from(b.size_of(elem, 0)?) * 8;
                f.ty = elem;
                f.bitfield = None;
            }
            k => return Err(format!("CO-RE access through type {id} of kind {k}")),
        }
    }
    Ok(Some(f))
}

/// The index of the member named `name` of struct `t` (no anonymous-member search beyond one
/// level of exact names).
fn find_member(b: &Btf<'_>, t: &btf::Type, name: &str) -> Result<Option<usize>, String> {
    for m in 0..t.vlen {
        if b.name(b.extra_u32(t, 3 * m)?) == name {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// The member names along `idx` in the local BTF (for matching them in the target).
fn member_names<'a>(b: &Btf<'a>, root: u32, idx: &[u32]) -> Result<Vec<&'a str>, String> {
    let mut names = Vec::new();
    let mut ty = root;
    for &i in &idx[1..] {
        let (_, t) = b.skip_mods(ty)?;
        match t.kind {
            btf::KIND_STRUCT | btf::KIND_UNION => {
                let m = i as usize;
                if m >= t.vlen {
                    return Err(format!(
                        "CO-RE access string names member {m} of {} members",
                        t.vlen
                    ));
                }
                names.push(b.name(b.extra_u32(&t, 3 * m)?));
                ty = b.extra_u32(&t, 3 * m + 1)?;
            }
            btf::KIND_ARRAY => {
                names.push("");
                ty = b.extra_u32(&t, 0)?;
            }
            k => return Err(format!("CO-RE access through a type of kind {k}")),
        }
    }
    Ok(names)
}

/// Target types of the same kind and essential name as local type `id`.
fn candidates(local: &Btf<'_>, id: u32, target: &Btf<'_>) -> Result<Vec<u32>, String> {
    let (_, t) = local.skip_mods(id)?;
    let name = essential(local.name(t.name_off));
    if name.is_empty() {
        return Err("CO-RE relocation against an anonymous type".into());
    }
    let mut out = Vec::new();
    for cand in 1..=target.count() {
        let c = target.ty(cand)?;
        let same_kind = c.kind == t.kind
            || (matches!(c.kind, btf::KIND_ENUM | btf::KIND_ENUM64)
                && matches!(t.kind, btf::KIND_ENUM | btf::KIND_ENUM64));
        if same_kind && essential(target.name(c.name_off)) == name {
            out.push(cand);
        }
    }
    Ok(out)
}

/// Bytes and offset of the smallest aligned load of 1, 2, 4 or 8 bytes that holds a bitfield.
fn bitfield_load(bit_off: u64, bits: u32, mem_size: u64) -> Option<(u64, u64)> {
    let mut sz = mem_size.max(1);
    let mut off = bit_off / 8 / sz * sz;
    while bit_off + u64::from(bits) - off * 8 > sz * 8 {
        if sz >= 8 {
            return None;
        }
        sz *= 2;
        off = bit_off / 8 / sz * sz;
    }
    Some((sz, off))
}

/// The value of a field relocation for `f` of BTF `b`.
fn field_value(b: &Btf<'_>, kind: u32, f: Field) -> Result<u64, String> {
    let size = u64::from(b.size_of(f.ty, 0)?);
    let (load_sz, load_off) = match f.bitfield {
        Some(bits) => bitfield_load(f.bit_off, bits, size).ok_or("a bitfield no 8-byte load holds")?,
        None => (size, f.bit_off / 8),
    };
    Ok(match kind {
        kind::FIELD_BYTE_OFFSET => load_off,
        kind::FIELD_BYTE_SIZE => load_sz,
        kind::FIELD_EXISTS => 1,
        kind::FIELD_SIGNED => {
            let (_, t) = b.skip_mods(f.ty)?;
            u64::from(match t.kind {
                btf::KIND_INT => (b.extra_u32(&t, 0)? >> 24) & 1 != 0,
                btf::KIND_ENUM | btf::KIND_ENUM64 => t.kflag,
                _ => false,
            })
        }
        kind::FIELD_LSHIFT_U64 => match f.bitfield {
            Some(bits) => 64 - (f.bit_off + u64::from(bits) - load_off * 8),
            None => 64 - load_sz * 8,
        },
        kind::FIELD_RSHIFT_U64 => match f.bitfield {
            Some(bits) => 64 - u64::from(bits),
            None => 64 - load_sz * 8,
        },
        k => return Err(format!("CO-RE relocation kind {k} is not a field relocation")),
    })
}

/// Index and value of enumerator `i` of enum `t`, or of the one named `name`.
fn enumerator<'a>(
    b: &Btf<'a>,
    t: &btf::Type,
    pick: Result<usize, &str>,
) -> Result<Option<(&'a str, u64)>, String> {
    let wide = t.kind == btf::KIND_ENUM64;
    let step = if wide { 3 } else { 2 };
    for m in 0..t.vlen {
        let name = b.name(b.extra_u32(t, step * m)?);
        if pick == Ok(m) || pick == Err(name) {
            let lo = b.extra_u32(t, step * m + 1)?;
            let v = if wide {
                u64::from(lo) | (u64::from(b.extra_u32(t, step * m + 2)?) << 32)
            } else if t.kflag {
                lo as i32 as i64 as u64
            } else {
                u64::from(lo)
            };
            return Ok(Some((name, v)));
        }
    }
    Ok(None)
}

/// The value relocation `r` takes against `target`; `None`: the target has no such field, type
/// or enumerator (0 for the `*_EXISTS` kinds, a refusal for the others).
///
/// # Errors
///
/// A malformed record or a kind the engine does not know.
pub fn resolve(local: &Btf<'_>, target: &Btf<'_>, r: &Relo<'_>) -> Result<Option<u64>, String> {
    let idx: Vec<u32> = r
        .access
        .split(':')
        .map(|x| {
            x.parse::<u32>()
                .map_err(|_| format!("CO-RE access string '{}'", r.access))
        })
        .collect::<Result<_, _>>()?;
    if idx.is_empty() {
        return Err("empty CO-RE access string".into());
    }
    let cands = candidates(local, r.type_id, target)?;
    match r.kind {
        kind::FIELD_BYTE_OFFSET..=kind::FIELD_RSHIFT_U64 => {
            let names = member_names(local, r.type_id, &idx)?;
            for c in cands {
                if let Some(f) = walk(target, c, &idx, Some(&names))? {
                    return field_value(target, r.kind, f).map(Some);
                }
            }
            Ok((r.kind == kind::FIELD_EXISTS).then_some(0))
        }
        kind::TYPE_ID_LOCAL => Ok(Some(u64::from(r.type_id))),
        kind::TYPE_ID_TARGET => Ok(cands.first().map(|&c| u64::from(c))),
        kind::TYPE_EXISTS | kind::TYPE_MATCHES => Ok(Some(u64::from(!cands.is_empty()))),
        kind::TYPE_SIZE => match cands.first() {
            Some(&c) => Ok(Some(u64::from(target.size_of(c, 0)?))),
            None => Ok(None),
        },
        kind::ENUMVAL_EXISTS | kind::ENUMVAL_VALUE => {
            let (_, lt) = local.skip_mods(r.type_id)?;
            let (name, _) =
                enumerator(local, &lt, Ok(idx[0] as usize))?.ok_or("CO-RE access names no enumerator")?;
            for c in cands {
                let (_, ct) = target.skip_mods(c)?;
                if let Some((_, v)) = enumerator(target, &ct, Err(name))? {
                    return Ok(Some(if r.kind == kind::ENUMVAL_EXISTS { 1 } else { v }));
                }
            }
            Ok((r.kind == kind::ENUMVAL_EXISTS).then_some(0))
        }
        k => Err(format!("CO-RE relocation kind {k} is not supported")),
    }
}

/// Writes `value` into the instruction at `at` as clang left room for it: the immediate of an
/// arithmetic instruction or `lddw`, the offset of a load or store.
///
/// # Errors
///
/// Another instruction, or a value that does not fit.
pub fn patch(code: &mut [Insn], at: usize, value: u64) -> Result<(), String> {
    let ins = code.get(at).copied().ok_or("CO-RE relocation outside the code")?;
    let too_big = || format!("CO-RE value {value} does not fit the instruction");
    match ins.op & 7 {
        _ if ins.op == crate::insn::LDDW => {
            code[at].imm = value as u32 as i32;
            code.get_mut(at + 1).ok_or("lddw without its second half")?.imm = (value >> 32) as i32;
        }
        class::ALU | class::ALU64 => {
            code[at].imm = i32::try_from(value as i64).map_err(|_| too_big())?;
        }
        class::LDX | class::ST | class::STX => {
            code[at].off = i16::try_from(value).map_err(|_| too_big())?;
        }
        _ => return Err(format!("CO-RE relocation on opcode {:#04x}", ins.op)),
    }
    Ok(())
}
