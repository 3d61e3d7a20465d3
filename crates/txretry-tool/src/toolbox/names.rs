//! Maps keyed by registered names (tools, personas, agents), hashed with FNV-1a.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Maps keyed by the names the code registered (tools, personas, agents), looked up with
/// the names callers send. FNV-1a instead of SipHash: a lookup costs a few nanoseconds,
/// and hash flooding needs attacker-chosen *keys*, which these maps never hold.
pub(super) type Names<V> = HashMap<String, V, BuildHasherDefault<Fnv>>;

pub(super) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = (self.0 ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}
