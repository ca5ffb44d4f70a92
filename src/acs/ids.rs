//! UUIDs as ACS writes them (`request_id`, `session_id`, `turn_id`, `nonce`): the `8-4-4-4-12`
//! lowercase form of 16 bytes, made random ([`random_v4`]), derived from a seed so a run is
//! reproducible ([`v4_from_seed`]), or counted ([`counter`], for tests and generated traces);
//! and the 128 bits of one read back ([`uuid_bits`]). The syntax check the decoder applies is
//! [`crate::acs::envelope::is_uuid`].

use std::io::Read as _;

use crate::acs::crypto;

/// The `8-4-4-4-12` lowercase hex form of 16 bytes, as they are.
pub fn format(b: &[u8; 16]) -> String {
    let h = crypto::hex(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Sets the version (4) and variant (RFC 4122) bits of 16 bytes and formats them.
pub fn format_v4(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    format(&b)
}

/// A version 4 layout UUID derived from a seed (the first 16 bytes of its SHA-256): the same
/// seed gives the same id every run.
pub fn v4_from_seed(seed: &str) -> String {
    let h = crypto::sha256(seed.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    format_v4(b)
}

/// A random (v4) UUID from the OS, or, if `/dev/urandom` is missing, from the clock, the
/// process id and `salt` (so two ids made in the same instant differ).
pub fn random_v4(salt: u64) -> String {
    let mut b = [0u8; 16];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !ok {
        // WebAssembly has neither a process id nor (without an installed clock) a time: a
        // counter keeps its ids distinct.
        static DRAWN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = DRAWN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (t, pid) = if cfg!(target_arch = "wasm32") {
            (super::time::now_ms() as u128, 0)
        } else {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            (t, std::process::id())
        };
        let h = crypto::sha256(format!("{t}:{pid}:{salt}:{n}").as_bytes());
        b.copy_from_slice(&h[..16]);
    }
    format_v4(b)
}

/// A counted UUID, `HHHHHHHH-0000-4000-8000-LLLLLLLLLLLL` (`hi` and the low 48 bits of `lo` in
/// hex): distinct, readable ids for tests and generated traces.
pub fn counter(hi: u32, lo: u64) -> String {
    format!("{hi:08x}-0000-4000-8000-{:012x}", lo & 0xffff_ffff_ffff)
}

/// A UUID's 128 bits: any 32 hex digits (either case) with any dashes; `None` for anything
/// else.
pub fn uuid_bits(s: &str) -> Option<u128> {
    let b = s.as_bytes();
    // The canonical 8-4-4-4-12 form (every id Warden is handed): digits in fixed places, read
    // eight at a time as four words of the 32 digits.
    if b.len() == 36 && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-') {
        let word = |parts: [&[u8]; 2]| {
            let mut w = [0u8; 8];
            w[..parts[0].len()].copy_from_slice(parts[0]);
            w[parts[0].len()..].copy_from_slice(parts[1]);
            hex8(w)
        };
        let g = [
            word([&b[0..4], &b[4..8]])?,
            word([&b[9..13], &b[14..18]])?,
            word([&b[19..23], &b[24..28]])?,
            word([&b[28..32], &b[32..36]])?,
        ];
        return Some(g.iter().fold(0u128, |v, &w| (v << 32) | u128::from(w)));
    }
    let mut v: u128 = 0;
    let mut digits = 0;
    // Byte by byte: a non-ASCII byte is no hex digit, as a non-ASCII char was not.
    for &c in b {
        if c == b'-' {
            continue;
        }
        let digit = hex_digit(c)?;
        if digits == 32 {
            return None;
        }
        v = (v << 4) | u128::from(digit);
        digits += 1;
    }
    (digits == 32).then_some(v)
}

/// Eight ASCII hex digits (either case), first digit first, as 32 bits; `None` if any byte is
/// not one. Every byte at once: each test sets the high bit of the bytes it holds for.
fn hex8(digits: [u8; 8]) -> Option<u32> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = ONES * 0x80;
    // The first digit in the top byte.
    let w = u64::from_be_bytes(digits);
    // Bytes in `lo..=hi` (for bytes under 0x80: no sum carries into the next byte).
    let within = |x: u64, lo: u64, hi: u64| {
        x.wrapping_add(ONES * (0x80 - lo)) & !x.wrapping_add(ONES * (0x7f - hi)) & HIGH
    };
    // Letters lower-cased (setting bit 5 leaves digits as they are, and maps only `A`–`F`
    // and `a`–`f` into `a`–`f`); digits are checked on the bytes as they came.
    let lower = w | (ONES * 0x20);
    let digit = within(w, 0x30, 0x39);
    let letter = within(lower, 0x61, 0x66);
    if w & HIGH != 0 || (digit | letter) != HIGH {
        return None;
    }
    // Each byte's value: a digit's low four bits, a letter's low four bits plus 9.
    let nibbles = (lower & (ONES * 0x0f)) + (letter >> 7) * 9;
    // Pack the eight nibbles, first digit highest: pairs, then quads, then all eight.
    let x = (nibbles | (nibbles >> 4)) & 0x00ff_00ff_00ff_00ff;
    let x = (x | (x >> 8)) & 0x0000_ffff_0000_ffff;
    Some(((x | (x >> 16)) & 0xffff_ffff) as u32)
}

fn hex_digit(c: u8) -> Option<u8> {
    let d = HEX[c as usize];
    (d & 0x80 == 0).then_some(d)
}

/// Each byte's value as a hex digit, or `0x80` for a byte that is none.
static HEX: [u8; 256] = {
    let mut t = [0x80u8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acs::envelope::is_uuid;

    /// The reading `uuid_bits` had before its byte-wise fast path.
    fn uuid_bits_by_chars(s: &str) -> Option<u128> {
        let mut v: u128 = 0;
        let mut digits = 0;
        for c in s.chars() {
            if c == '-' {
                continue;
            }
            if digits == 32 {
                return None;
            }
            v = (v << 4) | u128::from(c.to_digit(16)?);
            digits += 1;
        }
        (digits == 32).then_some(v)
    }

    proptest::proptest! {
        /// The word-at-a-time reading of the canonical form agrees with the char reading, on
        /// ids with dashes in place whose digits are any bytes near the hex ranges.
        #[test]
        fn the_canonical_form_reads_as_the_char_reading_did(
            digits in proptest::collection::vec(
                proptest::prop_oneof![
                    60 => proptest::sample::select(b"0123456789abcdefABCDEF".to_vec()),
                    1 => proptest::sample::select(
                        b"/:@`gGzZ\x10\x19\x1a\x7f\x20\x2f\x3a\x40\x47\x60\x67".to_vec()
                    ),
                    1 => 0u8..0x80,
                ],
                32,
            ),
        ) {
            let mut s = String::new();
            for (i, d) in digits.iter().enumerate() {
                if matches!(i, 8 | 12 | 16 | 20) {
                    s.push('-');
                }
                s.push(char::from(*d));
            }
            proptest::prop_assert_eq!(uuid_bits(&s), uuid_bits_by_chars(&s), "{:?}", s);
        }
    }

    #[test]
    fn uuid_bits_reads_as_the_char_reading_did() {
        for s in [
            "5e55e55e-0000-4000-8000-00000000be7c",
            "5E55E55E-0000-4000-8000-00000000BE7C",
            "5e55e55e000040008000000000000000be7c",
            "5e55e55e-0000-4000-8000-00000000be7",
            "5e55e55e-0000-4000-8000-00000000be7cc",
            "-e55e55e-0000-4000-8000-00000000be7c",
            "5e55e55e-0000-4000-8000-0000000-be7c",
            "5e55e55g-0000-4000-8000-00000000be7c",
            "5e55e55é-000-4000-8000-00000000be7c",
            "5e55e55e--0000-4000-8000-00000000be7c",
            "5e55-e55e-0000-4000-8000-00000000be7c",
            "",
            "-",
        ] {
            assert_eq!(uuid_bits(s), uuid_bits_by_chars(s), "{s:?}");
        }
    }

    #[test]
    fn shapes() {
        let b: [u8; 16] = std::array::from_fn(|i| i as u8 * 17);
        assert_eq!(format(&b), "00112233-4455-6677-8899-aabbccddeeff");
        assert_eq!(format_v4(b), "00112233-4455-4677-8899-aabbccddeeff");
        assert_eq!(counter(7, 42), "00000007-0000-4000-8000-00000000002a");
        let seeded = v4_from_seed("a seed");
        assert_eq!(seeded, v4_from_seed("a seed"));
        assert_ne!(seeded, v4_from_seed("another"));
        for id in [seeded, random_v4(1), counter(u32::MAX, u64::MAX)] {
            assert!(is_uuid(&id), "{id}");
            assert_eq!(&id[14..15], "4", "{id}");
            assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"), "{id}");
        }
    }

    #[test]
    fn bits() {
        assert_eq!(
            uuid_bits("00000000-0000-4000-8000-00000000002a"),
            Some((0x4000_8000u128 << 48) | 42)
        );
        assert_eq!(
            uuid_bits("00000000000040008000000000000000"),
            Some(0x4000_8000u128 << 48)
        );
        assert_eq!(uuid_bits("0000000-0000-4000-8000-00000000002a"), None);
        assert_eq!(uuid_bits("00000000-0000-4000-8000-00000000002a0"), None);
        assert_eq!(uuid_bits("g0000000-0000-4000-8000-00000000002a"), None);
    }
}
