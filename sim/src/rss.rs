//! The shell's RSS hash (hardware.md §9.4), written out bit by bit from the spec rather than
//! borrowed from the driver: a 108-bit input vector X built from the frame, and the XOR of the 32
//! key bits starting at every bit position j where X has a 1.

use onic_hal::regs::shell::HASH_KEY_WORDS;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: u16 = 0x8100;

fn byte(frame: &[u8], i: usize) -> u8 {
    frame.get(i).copied().unwrap_or(0)
}

fn be16(frame: &[u8], i: usize) -> u16 {
    u16::from_be_bytes([byte(frame, i), byte(frame, i + 1)])
}

/// The 32 key bits starting at bit `j` of the 320-bit key integer (word k holds bits 32k..32k+31).
fn window(key: &[u32; HASH_KEY_WORDS], j: usize) -> u32 {
    let lo = u64::from(key.get(j / 32).copied().unwrap_or(0));
    let hi = u64::from(key.get(j / 32 + 1).copied().unwrap_or(0));
    ((lo | hi << 32) >> (j % 32)) as u32
}

/// Places `n` bytes of the frame starting at `at` into X from bit `pos` up, byte after byte, each
/// byte's bit b at X bit pos + 8n + b.
fn put(x: &mut u128, pos: u32, frame: &[u8], at: usize, n: usize) {
    for i in 0..n {
        *x |= u128::from(byte(frame, at + i)) << (pos + 8 * i as u32);
    }
}

/// The 108-bit input vector X of hardware.md §9.4 for a frame (bytes from the first destination-MAC
/// byte).
#[must_use]
pub fn input_vector(frame: &[u8]) -> u128 {
    let mut x = 0u128;
    let outer = be16(frame, 12);
    let ip = if outer == ETHERTYPE_IPV4 {
        Some(14)
    } else if outer == ETHERTYPE_VLAN && be16(frame, 16) == ETHERTYPE_IPV4 {
        Some(18)
    } else {
        None
    };
    match ip {
        Some(ip) => {
            // X bits 0-3 (VLAN nibble) stay 0: the RTL's pipeline register is normally clear.
            put(&mut x, 4, frame, ip + 9, 1);
            put(&mut x, 12, frame, ip + 12, 4);
            put(&mut x, 44, frame, ip + 16, 4);
            let ihl = usize::from(byte(frame, ip) & 0xF);
            if ihl >= 5 {
                put(&mut x, 76, frame, ip + 4 * ihl, 4);
            }
        }
        None if outer == ETHERTYPE_VLAN => {
            // The RTL quirk: a tagged frame whose inner type is not IPv4 still has 4 "L4" bytes
            // hashed when the low nibble of byte 18 reads as an IHL of 5 or more.
            let nibble = usize::from(byte(frame, 18) & 0xF);
            if nibble >= 5 {
                put(&mut x, 76, frame, 18 + 4 * nibble, 4);
            }
        }
        None => {}
    }
    x
}

/// The shell's hash of a frame under `key` (10 register words, word k = key bytes 4k..4k+3 with
/// byte 4k in bits 7..0).
#[must_use]
pub fn shell_hash(key: &[u32; HASH_KEY_WORDS], frame: &[u8]) -> u32 {
    let x = input_vector(frame);
    (0..108)
        .filter(|j| (x >> j) & 1 == 1)
        .fold(0, |h, j| h ^ window(key, j))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use onic_hal::regs::shell::DEFAULT_HASH_KEY_WORDS;

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: [u8; 4]) -> Vec<u8> {
        let mut f = alloc::vec![0u8; 14];
        f[12] = 0x08;
        let mut ip = alloc::vec![0x45, 0, 0, 40, 0, 0, 0, 0, 64, proto, 0, 0];
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&l4);
        f.resize(64, 0);
        f
    }

    #[test]
    fn window_is_32_key_bits_from_j() {
        let k = &DEFAULT_HASH_KEY_WORDS;
        let bit = |i: usize| (k[i / 32] >> (i % 32)) & 1;
        for j in 0..108 {
            let slow = (0..32).fold(0u32, |w, b| w | bit(j + b) << b);
            assert_eq!(window(k, j), slow, "j = {j}");
        }
    }

    #[test]
    fn spec_vectors() {
        let k = &DEFAULT_HASH_KEY_WORDS;
        let udp = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], [0x04, 0xD2, 0x16, 0x2E]);
        assert_eq!(shell_hash(k, &udp), 0x2F39E0E6);
        assert_eq!(shell_hash(k, &udp) & 0x7F, 102);
        let tcp = ipv4(6, [192, 168, 1, 10], [192, 168, 1, 20], [0x9C, 0x40, 0x00, 0x50]);
        assert_eq!(shell_hash(k, &tcp), 0x40DB35BD);
        let icmp = ipv4(1, [10, 0, 0, 1], [10, 0, 0, 2], [0x08, 0x00, 0x12, 0x34]);
        assert_eq!(shell_hash(k, &icmp), 0x4D1589D1);
        let mut v6 = alloc::vec![0u8; 80];
        v6[12] = 0x86;
        v6[13] = 0xDD;
        v6[14] = 0x60;
        assert_eq!(shell_hash(k, &v6), 0);
    }

    #[test]
    fn vlan_tagged_ipv4_hashes_like_untagged() {
        let k = &DEFAULT_HASH_KEY_WORDS;
        let udp = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], [0x04, 0xD2, 0x16, 0x2E]);
        let mut tagged = udp[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        tagged.extend_from_slice(&udp[12..]);
        assert_eq!(shell_hash(k, &tagged), 0x2F39E0E6);
    }

    #[test]
    fn tagged_non_ipv4_quirk_hashes_ports_only() {
        let k = &DEFAULT_HASH_KEY_WORDS;
        // 81 00 tag, inner type 86 DD (IPv6), byte 18 = 0x65: nibble 5, "ports" at byte 38.
        let mut f = alloc::vec![0u8; 64];
        f[12] = 0x81;
        f[16] = 0x86;
        f[17] = 0xDD;
        f[18] = 0x65;
        f[38..42].copy_from_slice(&[1, 2, 3, 4]);
        let mut x = 0u128;
        put(&mut x, 76, &f, 38, 4);
        assert_eq!(input_vector(&f), x);
        assert_ne!(shell_hash(k, &f), 0);
        f[18] = 0x64;
        assert_eq!(shell_hash(k, &f), 0);
    }
}
