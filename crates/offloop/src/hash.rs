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
