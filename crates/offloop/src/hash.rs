//! Value and schema hashes.
//!
//! Both algorithms hash the same canonical bytes (sorted-key compact JSON in
//! `JSON.stringify` form, see [`crate::json`]); only the digest differs. `Sha256` reproduces
//! the Tusk JS `JsonSchemaHelper` hashes byte for byte; `Blake3` (the default) is the same
//! contract, faster. Record and replay both go through [`HashAlgorithm::hex`].

use std::fmt;
use std::str::FromStr;

/// The digest used for value and schema hashes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum HashAlgorithm {
    /// BLAKE3, 256-bit, lower-case hex. The default.
    #[default]
    Blake3,
    /// SHA-256, lower-case hex: the Tusk Drift JS SDK's `JsonSchemaHelper` hashes.
    Sha256,
}

impl HashAlgorithm {
    /// Lower-case hex digest of `bytes`.
    pub fn hex(self, bytes: &[u8]) -> String {
        match self {
            HashAlgorithm::Blake3 => blake3::hash(bytes).to_hex().to_string(),
            HashAlgorithm::Sha256 => {
                use sha2::Digest;
                to_hex(&sha2::Sha256::digest(bytes))
            }
        }
    }

    /// The 256-bit digest of `bytes` (what [`HashAlgorithm::hex`] prints).
    pub fn digest(self, bytes: &[u8]) -> [u8; 32] {
        match self {
            HashAlgorithm::Blake3 => *blake3::hash(bytes).as_bytes(),
            HashAlgorithm::Sha256 => {
                use sha2::Digest;
                sha2::Sha256::digest(bytes).into()
            }
        }
    }

    /// [`HashAlgorithm::digest`] of a short text that recurs, memoized per thread. Schema
    /// texts do: every request of one query shape has the same schema, and a digest of a few
    /// hundred bytes costs more than looking it up (blake3 and sha256 compress 64-byte blocks
    /// one after another at that size). Texts over 4 KiB are digested directly.
    pub fn digest_recurring(self, bytes: &[u8]) -> [u8; 32] {
        const MAX_TEXT: usize = 4096;
        const MAX_ENTRIES: usize = 4096;
        type Seen = rustc_hash::FxHashMap<(HashAlgorithm, u64), (Box<[u8]>, [u8; 32])>;
        thread_local! {
            static SEEN: std::cell::RefCell<Seen> = Default::default();
        }
        if bytes.len() > MAX_TEXT {
            return self.digest(bytes);
        }
        SEEN.with(|cell| {
            let Ok(mut seen) = cell.try_borrow_mut() else {
                return self.digest(bytes);
            };
            // Keyed by a fast hash of the text; the text itself is compared on a hit.
            let key = (self, {
                use std::hash::{BuildHasher, BuildHasherDefault};
                BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(bytes)
            });
            if let Some((text, d)) = seen.get(&key) {
                if **text == *bytes {
                    return *d;
                }
            }
            if seen.len() >= MAX_ENTRIES {
                seen.clear();
            }
            let d = self.digest(bytes);
            seen.insert(key, (bytes.into(), d));
            d
        })
    }

    /// [`HashAlgorithm::digest_recurring`] in the hex form of [`HashAlgorithm::hex`].
    pub fn hex_recurring(self, bytes: &[u8]) -> String {
        to_hex(&self.digest_recurring(bytes))
    }

    /// The name accepted by [`FromStr`] and the JS option `hashAlgorithm`.
    pub fn name(self) -> &'static str {
        match self {
            HashAlgorithm::Blake3 => "blake3",
            HashAlgorithm::Sha256 => "sha256",
        }
    }
}

impl fmt::Display for HashAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HashAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "blake3" => Ok(HashAlgorithm::Blake3),
            "sha256" => Ok(HashAlgorithm::Sha256),
            other => Err(format!(
                "unknown hashAlgorithm {other:?}: expected \"blake3\" or \"sha256\""
            )),
        }
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 0xf) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recurring_digests_equal_direct_ones() {
        let long = vec![b'x'; 5000];
        let texts: [&[u8]; 4] = [b"{}", br#"{"properties":{},"type":6}"#, b"", &long];
        for _ in 0..3 {
            for algo in [HashAlgorithm::Blake3, HashAlgorithm::Sha256] {
                for t in texts {
                    assert_eq!(algo.digest_recurring(t), algo.digest(t));
                    assert_eq!(algo.hex_recurring(t), algo.hex(t));
                }
            }
        }
        // More distinct texts than the memo holds: still exact.
        for i in 0..5000 {
            let t = format!("{{\"i\":{i}}}");
            assert_eq!(
                HashAlgorithm::Blake3.digest_recurring(t.as_bytes()),
                HashAlgorithm::Blake3.digest(t.as_bytes())
            );
        }
    }

    #[test]
    fn reference_tv0_empty_object() {
        // tusk-drift-spec §7 TV0.
        assert_eq!(
            HashAlgorithm::Sha256.hex(b"{}"),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(HashAlgorithm::Blake3.hex(b"{}").len(), 64);
        assert_eq!("sha256".parse::<HashAlgorithm>(), Ok(HashAlgorithm::Sha256));
        assert!("md5".parse::<HashAlgorithm>().is_err());
    }
}
