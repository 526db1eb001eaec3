//! `onic run --route`: the IPv4 routes `bpf_fib_lookup` answers from (`SimHost::routes`).
//!
//! A route is `PREFIX/LEN dev PORT [neigh MAC] [src MAC]`: frames to `PREFIX/LEN` leave through
//! port `PORT` (0 or 1, interface `PORT + 1`) towards the next hop at `neigh` (the address the
//! kernel's neighbour table would give; without it the neighbour is unresolved and lookups
//! answer `BPF_FIB_LKUP_RET_NO_NEIGH`), from the port's address `src` (default
//! `00:0a:35:00:00:0P`, the reference driver's OUI and the port number: the model's ports have
//! no address of their own). The longest matching prefix wins, as in the kernel's FIB.

use onic_bpf::Route;

/// Most `--route` options.
pub const MAX_ROUTES: usize = 10_000;

/// The default source address of port `port`.
#[must_use]
pub const fn port_mac(port: u8) -> [u8; 6] {
    [0x00, 0x0a, 0x35, 0x00, 0x00, port]
}

/// Parses every `--route`, with interface indexes from `ifindex_base` (port 0's).
///
/// # Errors
///
/// Too many routes, or the first that is malformed, with what was expected.
pub fn parse_all(specs: &[String], ifindex_base: u32) -> Result<Vec<Route>, String> {
    if specs.len() > MAX_ROUTES {
        return Err(format!(
            "--route given {} times; at most {MAX_ROUTES} routes",
            specs.len()
        ));
    }
    specs.iter().map(|s| parse(s, ifindex_base)).collect()
}

/// Parses one route.
///
/// # Errors
///
/// What is malformed, with the form expected.
pub fn parse(spec: &str, ifindex_base: u32) -> Result<Route, String> {
    let err = |what: String| {
        format!("--route '{spec}': {what} (expected PREFIX/LEN dev PORT [neigh MAC] [src MAC], e.g. 10.0.0.0/24 dev 1 neigh 02:00:00:00:00:02)")
    };
    let mut words = spec.split_whitespace();
    let (dst, len) = prefix(words.next().unwrap_or("")).map_err(err)?;
    let (mut port, mut neigh, mut src) = (None, None, None);
    while let Some(key) = words.next() {
        let value = words
            .next()
            .ok_or_else(|| err(format!("'{key}' without a value")))?;
        match key {
            "dev" => {
                port = Some(
                    value
                        .parse::<u8>()
                        .ok()
                        .filter(|&p| p < 2)
                        .ok_or_else(|| err(format!("port '{value}': the model has ports 0 and 1")))?,
                )
            }
            "neigh" => neigh = Some(mac(value).map_err(err)?),
            "src" => src = Some(mac(value).map_err(err)?),
            _ => return Err(err(format!("unknown word '{key}'"))),
        }
    }
    let port = port.ok_or_else(|| err("no 'dev PORT'".into()))?;
    Ok((
        dst,
        len,
        ifindex_base + u32::from(port),
        src.unwrap_or(port_mac(port)),
        neigh,
    ))
}

/// `A.B.C.D/LEN`.
fn prefix(s: &str) -> Result<([u8; 4], u8), String> {
    let (addr, len) = s
        .split_once('/')
        .ok_or_else(|| format!("prefix '{s}' has no /LEN"))?;
    let addr: std::net::Ipv4Addr = addr.parse().map_err(|_| format!("'{addr}' is no IPv4 address"))?;
    let len = len
        .parse::<u8>()
        .ok()
        .filter(|&l| l <= 32)
        .ok_or_else(|| format!("prefix length '{len}' is not 0 to 32"))?;
    Ok((addr.octets(), len))
}

/// `aa:bb:cc:dd:ee:ff`.
fn mac(s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("'{s}' is no MAC address (six hex bytes separated by ':')");
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next().ok_or_else(bad)?;
        if p.is_empty() || p.len() > 2 {
            return Err(bad());
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_parse_with_defaults_and_refuse_what_is_malformed() {
        let r = parse("10.1.0.0/16 dev 1 neigh 02:00:00:00:00:0b", 1).unwrap();
        assert_eq!(r, ([10, 1, 0, 0], 16, 2, port_mac(1), Some([2, 0, 0, 0, 0, 0xb])));
        // Without a neighbour the next hop is unresolved.
        let r = parse("10.0.0.0/8 dev 1", 1).unwrap();
        assert_eq!(r, ([10, 0, 0, 0], 8, 2, port_mac(1), None));
        let r = parse("0.0.0.0/0  neigh 2:0:0:0:0:1 src 02:aa:bb:cc:dd:ee dev 0", 1).unwrap();
        assert_eq!(
            r,
            (
                [0; 4],
                0,
                1,
                [2, 0xaa, 0xbb, 0xcc, 0xdd, 0xee],
                Some([2, 0, 0, 0, 0, 1])
            )
        );
        for (bad, says) in [
            ("", "has no /LEN"),
            ("10.0.0.0 dev 1 neigh 02:00:00:00:00:01", "has no /LEN"),
            ("10.0.0.0/33 dev 1 neigh 02:00:00:00:00:01", "not 0 to 32"),
            ("10.0.0/8 dev 1 neigh 02:00:00:00:00:01", "no IPv4 address"),
            ("10.0.0.0/8 dev 2 neigh 02:00:00:00:00:01", "ports 0 and 1"),
            ("10.0.0.0/8 neigh 02:00:00:00:00:01", "no 'dev PORT'"),
            ("10.0.0.0/8 dev 1 neigh 02:00:00:00:00", "no MAC address"),
            ("10.0.0.0/8 dev 1 neigh 02:00:00:00:00:01:07", "no MAC address"),
            ("10.0.0.0/8 dev 1 neigh 02:00:00:00:00:100", "no MAC address"),
            ("10.0.0.0/8 dev 1 neigh", "without a value"),
            (
                "10.0.0.0/8 dev 1 neigh 02:00:00:00:00:01 via 10.0.0.1",
                "unknown word 'via'",
            ),
        ] {
            let e = parse(bad, 1).unwrap_err();
            assert!(
                e.contains(says) && e.contains("expected PREFIX/LEN"),
                "{bad}: {e}"
            );
        }
        let many = vec!["10.0.0.0/8 dev 0 neigh 02:00:00:00:00:01".to_string(); MAX_ROUTES + 1];
        assert!(parse_all(&many, 1).unwrap_err().contains("at most"));
        assert_eq!(parse_all(&many[..2], 1).unwrap().len(), 2);
    }
}
