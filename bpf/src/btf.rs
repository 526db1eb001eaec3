//! Just enough BTF to read map definitions: the type section of `.BTF`, the `.maps` data section's
//! variables, and for each the anonymous struct clang emits for `__uint(...)` / `__type(...)`
//! members. Also the header of `.BTF.ext`, to find CO-RE relocations (refused).
//!
//! The format (kernel `Documentation/bpf/btf.rst`): a header, a type section of variable-length
//! records numbered from 1 (0 is `void`), a string section. `__uint(name, N)` is a member of type
//! "pointer to array of N ints", `__type(name, T)` a member of type "pointer to T".

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

const MAGIC: u16 = 0xeb9f;
pub(crate) const KIND_INT: u32 = 1;
pub(crate) const KIND_PTR: u32 = 2;
pub(crate) const KIND_ARRAY: u32 = 3;
pub(crate) const KIND_STRUCT: u32 = 4;
pub(crate) const KIND_UNION: u32 = 5;
pub(crate) const KIND_ENUM: u32 = 6;
pub(crate) const KIND_TYPEDEF: u32 = 8;
pub(crate) const KIND_VOLATILE: u32 = 9;
pub(crate) const KIND_CONST: u32 = 10;
pub(crate) const KIND_RESTRICT: u32 = 11;
pub(crate) const KIND_VAR: u32 = 14;
pub(crate) const KIND_DATASEC: u32 = 15;
pub(crate) const KIND_FLOAT: u32 = 16;
pub(crate) const KIND_TYPE_TAG: u32 = 18;
pub(crate) const KIND_ENUM64: u32 = 19;
/// Most type references followed in one chain (typedefs, qualifiers).
const MAX_CHAIN: usize = 32;
/// The members a BTF map definition may have.
pub const MAP_MEMBERS: [&str; 10] = [
    "type",
    "max_entries",
    "map_flags",
    "key_size",
    "value_size",
    "key",
    "value",
    "pinning",
    "numa_node",
    "values",
];

/// One type record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Type {
    pub(crate) kind: u32,
    /// The kind flag (bitfield offsets in struct members; signedness of enums).
    pub(crate) kflag: bool,
    pub(crate) name_off: u32,
    pub(crate) vlen: usize,
    /// Size (INT, STRUCT, ...) or referenced type (PTR, TYPEDEF, VAR, ...).
    pub(crate) size_or_type: u32,
    /// Offset of the kind-specific data in the type section.
    extra: usize,
}

/// A parsed `.BTF` section.
#[derive(Debug)]
pub struct Btf<'a> {
    types: Vec<Type>,
    type_data: &'a [u8],
    strings: &'a [u8],
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// The fields of one BTF-defined map, as declared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MapFields {
    /// `type`.
    pub map_type: Option<u32>,
    /// `max_entries`.
    pub max_entries: Option<u32>,
    /// `map_flags`.
    pub flags: Option<u32>,
    /// `key_size`, or the size of the `key` type.
    pub key_size: Option<u32>,
    /// `value_size`, or the size of the `value` type.
    pub value_size: Option<u32>,
    /// `__array(values, T)` of a map of maps or a program array: the type `T` (a map definition
    /// struct or a function prototype) and the member's byte offset in the definition, where
    /// the initial entries' pointers lie.
    pub values: Option<(u32, u32)>,
}

/// Bytes per extra record of a kind, times `vlen` where it has one.
fn extra_len(kind: u32, vlen: usize) -> Result<usize, String> {
    Ok(match kind {
        KIND_INT | KIND_VAR | 17 => 4,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
        KIND_ENUM | 13 => 8 * vlen,
        KIND_PTR | 7 | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | 12 | KIND_FLOAT
        | KIND_TYPE_TAG => 0,
        k => return Err(format!("BTF type kind {k} is unknown")),
    })
}

impl<'a> Btf<'a> {
    /// Parses a `.BTF` section.
    ///
    /// # Errors
    ///
    /// A description of what is malformed.
    pub fn parse(b: &'a [u8]) -> Result<Self, String> {
        let bad = |what: &str| format!(".BTF: {what}");
        let magic = b.get(0..2).map(|m| u16::from_le_bytes([m[0], m[1]]));
        if magic != Some(MAGIC) {
            return Err(bad("bad magic"));
        }
        let hdr_len = u32_at(b, 4).ok_or_else(|| bad("short header"))? as usize;
        let field = |o| {
            u32_at(b, o)
                .map(|v| v as usize)
                .ok_or_else(|| bad("short header"))
        };
        let (type_off, type_len, str_off, str_len) = (field(8)?, field(12)?, field(16)?, field(20)?);
        let body = b
            .get(hdr_len..)
            .ok_or_else(|| bad("header longer than the section"))?;
        let range = |o: usize, l: usize| o.checked_add(l).and_then(|e| body.get(o..e));
        let type_data = range(type_off, type_len).ok_or_else(|| bad("type section out of bounds"))?;
        let strings = range(str_off, str_len).ok_or_else(|| bad("string section out of bounds"))?;
        let mut types = Vec::new();
        let mut off = 0;
        while off < type_data.len() {
            let (name_off, info, st) = match (
                u32_at(type_data, off),
                u32_at(type_data, off + 4),
                u32_at(type_data, off + 8),
            ) {
                (Some(a), Some(b), Some(c)) => (a, b, c),
                _ => return Err(bad("truncated type record")),
            };
            let kind = (info >> 24) & 0x1f;
            let vlen = (info & 0xffff) as usize;
            let extra = off + 12;
            off = extra + extra_len(kind, vlen).map_err(|e| bad(&e))?;
            if off > type_data.len() {
                return Err(bad("truncated type record"));
            }
            types.push(Type {
                kind,
                kflag: info >> 31 != 0,
                name_off,
                vlen,
                size_or_type: st,
                extra,
            });
        }
        Ok(Self {
            types,
            type_data,
            strings,
        })
    }

    /// Number of types (ids 1..=count).
    pub(crate) fn count(&self) -> u32 {
        self.types.len() as u32
    }

    pub(crate) fn ty(&self, id: u32) -> Result<Type, String> {
        id.checked_sub(1)
            .and_then(|i| self.types.get(i as usize))
            .copied()
            .ok_or_else(|| format!(".BTF: type {id} does not exist"))
    }

    /// The string at `off` of the string section.
    #[must_use]
    pub fn name(&self, off: u32) -> &'a str {
        let s = self.strings.get(off as usize..).unwrap_or(&[]);
        let end = s.iter().position(|&c| c == 0).unwrap_or(s.len());
        core::str::from_utf8(&s[..end]).unwrap_or("")
    }

    pub(crate) fn extra_u32(&self, t: &Type, i: usize) -> Result<u32, String> {
        u32_at(self.type_data, t.extra + 4 * i).ok_or_else(|| ".BTF: truncated record".to_string())
    }

    /// Follows typedefs and qualifiers.
    pub(crate) fn skip_mods(&self, mut id: u32) -> Result<(u32, Type), String> {
        for _ in 0..MAX_CHAIN {
            let t = self.ty(id)?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type
                }
                _ => return Ok((id, t)),
            }
        }
        Err(".BTF: type chain too long".into())
    }

    /// Size in bytes of type `id`.
    pub(crate) fn size_of(&self, id: u32, depth: usize) -> Result<u32, String> {
        if depth > MAX_CHAIN {
            return Err(".BTF: type nesting too deep".into());
        }
        let (_, t) = self.skip_mods(id)?;
        match t.kind {
            KIND_INT | KIND_STRUCT | KIND_UNION | KIND_ENUM | KIND_ENUM64 | KIND_FLOAT | KIND_DATASEC => {
                Ok(t.size_or_type)
            }
            KIND_PTR => Ok(8),
            KIND_ARRAY => {
                let elem = self.size_of(self.extra_u32(&t, 0)?, depth + 1)?;
                elem.checked_mul(self.extra_u32(&t, 2)?)
                    .ok_or_else(|| ".BTF: array size overflows".to_string())
            }
            k => Err(format!(".BTF: type {id} (kind {k}) has no size")),
        }
    }

    /// The variables of data section `name` (e.g. `.maps`): (variable name, its type).
    ///
    /// # Errors
    ///
    /// A malformed record.
    pub fn datasec_vars(&self, name: &str) -> Result<Vec<(&'a str, u32)>, String> {
        let mut out = Vec::new();
        for t in &self.types {
            if t.kind != KIND_DATASEC || self.name(t.name_off) != name {
                continue;
            }
            for i in 0..t.vlen {
                let var = self.ty(self.extra_u32(t, 3 * i)?)?;
                if var.kind != KIND_VAR {
                    return Err(format!(".BTF: entry {i} of {name} is not a variable"));
                }
                out.push((self.name(var.name_off), var.size_or_type));
            }
        }
        Ok(out)
    }

    /// Reads the map definition struct of type `id` (the type of a `.maps` variable).
    ///
    /// Every member is known and given once, so no more than [`MAP_MEMBERS`] are read: many maps
    /// may share one struct, and a struct of 65 535 members would otherwise be read in full for
    /// each of them.
    ///
    /// # Errors
    ///
    /// A member the engine does not understand (e.g. `values`, for maps of maps), one given
    /// twice, or a malformed definition.
    pub fn map_fields(&self, id: u32) -> Result<MapFields, String> {
        let (_, st) = self.skip_mods(id)?;
        if st.kind != KIND_STRUCT {
            return Err("its BTF type is not a struct".into());
        }
        let mut f = MapFields::default();
        let mut seen = [false; MAP_MEMBERS.len()];
        for i in 0..st.vlen {
            let name = self.name(self.extra_u32(&st, 3 * i)?);
            let known = MAP_MEMBERS
                .iter()
                .position(|&m| m == name)
                .ok_or_else(|| format!("member '{name}' is not supported"))?;
            if core::mem::replace(&mut seen[known], true) {
                return Err(format!("member '{name}' is given more than once"));
            }
            let mty = self.extra_u32(&st, 3 * i + 1)?;
            if name == "values" {
                let bits = self.extra_u32(&st, 3 * i + 2)?;
                // The offset is in bits; a definition struct has no bitfields.
                let off = if st.kflag { bits & 0x00ff_ffff } else { bits };
                f.values = Some((self.array_pointee(mty)?, off / 8));
                continue;
            }
            let (_, ptr) = self.skip_mods(mty)?;
            if ptr.kind != KIND_PTR {
                return Err(format!("member '{name}' is not declared with __uint or __type"));
            }
            let target = ptr.size_or_type;
            let uint = || -> Result<u32, String> {
                let (_, arr) = self.skip_mods(target)?;
                if arr.kind != KIND_ARRAY {
                    return Err(format!("member '{name}' is not declared with __uint"));
                }
                self.extra_u32(&arr, 2)
            };
            match name {
                "type" => f.map_type = Some(uint()?),
                "max_entries" => f.max_entries = Some(uint()?),
                "map_flags" => f.flags = Some(uint()?),
                "key_size" => f.key_size = Some(uint()?),
                "value_size" => f.value_size = Some(uint()?),
                "key" => f.key_size = Some(self.size_of(target, 0)?),
                "value" => f.value_size = Some(self.size_of(target, 0)?),
                // The rest of MAP_MEMBERS: accepted, without meaning here.
                _ => {}
            }
        }
        Ok(f)
    }
}

impl Btf<'_> {
    /// The `T` of an `__array(values, T)` member's type (an array of pointers to `T`).
    fn array_pointee(&self, id: u32) -> Result<u32, String> {
        let (_, arr) = self.skip_mods(id)?;
        if arr.kind != KIND_ARRAY {
            return Err("member 'values' is not declared with __array".into());
        }
        let (_, ptr) = self.skip_mods(self.extra_u32(&arr, 0)?)?;
        if ptr.kind != KIND_PTR {
            return Err("member 'values' is not an array of pointers".into());
        }
        Ok(self.skip_mods(ptr.size_or_type)?.0)
    }
}

/// Whether a `.BTF.ext` section carries CO-RE relocations for code section `sec` (named through
/// the `.BTF` strings).
///
/// # Errors
///
/// A malformed header.
pub fn has_core_relocs(ext: &[u8], btf: &Btf<'_>, sec: &str) -> Result<bool, String> {
    if ext.get(0..2).map(|m| u16::from_le_bytes([m[0], m[1]])) != Some(MAGIC) {
        return Err(".BTF.ext: bad magic".into());
    }
    let hdr_len = u32_at(ext, 4).ok_or(".BTF.ext: short header")? as usize;
    // The CO-RE fields exist from header length 32 on.
    if hdr_len < 32 {
        return Ok(false);
    }
    let (Some(off), Some(len)) = (u32_at(ext, 24), u32_at(ext, 28)) else {
        return Err(".BTF.ext: short header".into());
    };
    let start = hdr_len.checked_add(off as usize).ok_or(".BTF.ext: bad offset")?;
    let body = start
        .checked_add(len as usize)
        .and_then(|end| ext.get(start..end))
        .ok_or(".BTF.ext: CO-RE records out of bounds")?;
    if body.is_empty() {
        return Ok(false);
    }
    let rec_size = u32_at(body, 0).ok_or(".BTF.ext: truncated CO-RE records")? as usize;
    let mut p = 4;
    while p < body.len() {
        let (Some(name_off), Some(n)) = (u32_at(body, p), u32_at(body, p + 4)) else {
            return Err(".BTF.ext: truncated CO-RE records".into());
        };
        if n > 0 && btf.name(name_off) == sec {
            return Ok(true);
        }
        let skip = (n as usize)
            .checked_mul(rec_size)
            .ok_or(".BTF.ext: bad CO-RE record count")?;
        p = p
            .checked_add(8 + skip)
            .ok_or(".BTF.ext: bad CO-RE record count")?;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_sections_are_errors() {
        assert!(Btf::parse(&[]).is_err());
        assert!(Btf::parse(&[0x9f, 0xeb, 1, 0, 24, 0, 0, 0]).is_err());
        // Header claiming a type section beyond the data.
        let mut h = alloc::vec![0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
        for v in [0u32, 100, 0, 0] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        assert!(Btf::parse(&h).is_err());
        // An empty but well-formed section.
        let mut h = alloc::vec![0x9f, 0xeb, 1, 0, 24, 0, 0, 0];
        for v in [0u32, 0, 0, 1] {
            h.extend_from_slice(&v.to_le_bytes());
        }
        h.push(0);
        let b = Btf::parse(&h).unwrap();
        assert!(b.datasec_vars(".maps").unwrap().is_empty());
        assert!(b.map_fields(1).is_err());
    }
}
