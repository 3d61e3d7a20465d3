//! Contention keys: the values a transaction names with
//! [`TxOptions::contends_on`](crate::TxOptions::contends_on), and their stable 64-bit hash.
//!
//! The hash is specified here byte for byte (see [`ContentionKey`]) rather than borrowed
//! from `std::hash`, whose output may change between Rust releases: two services built
//! separately, in any language, can compute the same hash for the same key.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

/// A value that names what a transaction contends on: a row, an account, a tenant.
///
/// Keys are compared by a 64-bit hash ([`KeyHash`]) of a canonical byte encoding, so equal
/// values of different Rust types name the same key: `42_i32`, `42_i64` and `42_u64` are
/// one key, and `"account"` is the same key whether it is a `&str`, a `String` or an
/// `Arc<str>`. The encoding and the hash are fixed: they never depend on the Rust release,
/// the build, the platform or the process, and changing them is a breaking change.
///
/// # Encoding
///
/// Each value writes a one-byte tag, then its content. Multi-byte numbers are
/// little-endian.
///
/// | Value | Bytes |
/// |-------|-------|
/// | any integer (`i8`…`i128`, `u8`…`u128`, `isize`, `usize`) whose value fits in `i128` | `0x01`, then the value as `i128` (two's complement), 16 bytes |
/// | a `u128` above `i128::MAX` | `0x02`, then the value as `u128`, 16 bytes |
/// | `bool` | `0x03`, then `0x00` (false) or `0x01` (true) |
/// | `char` | `0x04`, then its Unicode scalar value as `u32`, 4 bytes |
/// | `str`, `String`, `Cow<str>`, … | `0x05`, then the length in bytes as `u64` (8 bytes), then the UTF-8 bytes |
/// | a tuple of 1 to 4 keys | `0x06`, then the arity as one byte, then each element's encoding in order |
/// | a slice, array or `Vec` of keys | `0x07`, then the number of elements as `u64` (8 bytes), then each element's encoding in order |
///
/// References, `Box`, `Rc`, `Arc` and `Cow` encode as the value they point to; a byte
/// slice is a sequence of integers like any other. So an
/// integer is always 17 bytes: `42` is `01 2a 00 … 00`, and `-1` is `01 ff … ff`. Two
/// different keys never have the same encoding (their hashes can still collide, with
/// probability about 2⁻⁶⁴ per pair; a collision only makes two transactions take turns
/// needlessly).
///
/// # Hash
///
/// The hash is 64-bit [FNV-1a](http://www.isthe.com/chongo/tech/comp/fnv/) of the
/// encoding: start from the offset basis `0xcbf29ce484222325`; for each byte, XOR it into
/// the low 8 bits, then multiply by the prime `0x100000001b3` modulo 2⁶⁴. Where a signed
/// 64-bit number is needed (Postgres `pg_advisory_xact_lock(bigint)`), the `u64` is
/// reinterpreted bit for bit as an `i64` ([`KeyHash::to_i64`]).
///
/// These values are pinned; they can never change:
///
/// ```
/// use txretry_core::KeyHash;
///
/// assert_eq!(KeyHash::of(42).to_u64(), 0x456b_cd54_8ffd_c786);
/// assert_eq!(KeyHash::of(-1).to_u64(), 0xee46_e925_45cc_b71c);
/// assert_eq!(KeyHash::of("account").to_u64(), 0xaffe_5916_9f4a_a7c2);
/// assert_eq!(KeyHash::of(("account", 42)).to_u64(), 0xcec6_cacd_78fe_11c7);
/// // As a Postgres bigint:
/// assert_eq!(KeyHash::of(("account", 42)).to_i64(), -3_546_924_672_660_663_865);
///
/// // The same value is the same key whatever its Rust type.
/// assert_eq!(KeyHash::of(42_i32), KeyHash::of(42_u64));
/// assert_eq!(KeyHash::of(42_u8), KeyHash::of(42_i128));
/// assert_eq!(KeyHash::of(("account", 42_i64)), KeyHash::of((String::from("account"), 42_u16)));
/// ```
///
/// # Your own key types
///
/// Implement the trait by writing a value that already is a key, usually a tuple with a
/// name, so that your type encodes canonically too:
///
/// ```
/// use txretry_core::{ContentionKey, KeyEncoder, KeyHash, TxOptions};
///
/// struct AccountId(i64);
///
/// impl ContentionKey for AccountId {
///     fn write_key(&self, out: &mut KeyEncoder) {
///         ("account", self.0).write_key(out);
///     }
/// }
///
/// assert_eq!(KeyHash::of(AccountId(42)), KeyHash::of(("account", 42)));
/// let options = TxOptions::new().contends_on(AccountId(42));
/// # let _ = options;
/// ```
pub trait ContentionKey {
    /// Writes this key's canonical encoding (see the [trait](ContentionKey) docs).
    fn write_key(&self, out: &mut KeyEncoder);
}

/// Receives a key's canonical encoding and hashes it as it goes (FNV-1a 64; see
/// [`ContentionKey`]). Only the [`ContentionKey`] implementations here write raw bytes,
/// so every key, including your own types, encodes canonically.
#[derive(Debug)]
pub struct KeyEncoder {
    state: u64,
}

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

const TAG_INT: u8 = 0x01;
const TAG_BIG_UINT: u8 = 0x02;
const TAG_BOOL: u8 = 0x03;
const TAG_CHAR: u8 = 0x04;
const TAG_STR: u8 = 0x05;
const TAG_TUPLE: u8 = 0x06;
const TAG_SEQ: u8 = 0x07;

impl KeyEncoder {
    fn new() -> Self {
        KeyEncoder {
            state: FNV_OFFSET_BASIS,
        }
    }

    #[inline]
    fn bytes(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.state ^= u64::from(byte);
            self.state = self.state.wrapping_mul(FNV_PRIME);
        }
    }

    #[inline]
    fn tag(&mut self, tag: u8) {
        self.bytes(&[tag]);
    }

    #[inline]
    fn int(&mut self, value: i128) {
        self.tag(TAG_INT);
        self.bytes(&value.to_le_bytes());
    }

    #[inline]
    fn len(&mut self, len: usize) {
        // usize is at most 64 bits on every platform Rust supports.
        self.bytes(&(len as u64).to_le_bytes());
    }

    fn seq<T: ContentionKey>(&mut self, items: &[T]) {
        self.tag(TAG_SEQ);
        self.len(items.len());
        for item in items {
            item.write_key(self);
        }
    }
}

/// The stable 64-bit hash of a [`ContentionKey`]: FNV-1a 64 of its canonical encoding.
/// Admission compares keys by it; see [`ContentionKey`] for the exact definition.
///
/// ```
/// use txretry_core::KeyHash;
///
/// let hash = KeyHash::of(("account", 42));
/// assert_eq!(hash, KeyHash::of(("account", 42_u64)));
/// assert_eq!(hash.to_i64(), hash.to_u64() as i64);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyHash(u64);

impl KeyHash {
    /// The hash of `key`.
    #[inline]
    pub fn of<K: ContentionKey>(key: K) -> KeyHash {
        let mut out = KeyEncoder::new();
        key.write_key(&mut out);
        KeyHash(out.state)
    }

    /// The hash as an unsigned number.
    #[inline]
    pub const fn to_u64(self) -> u64 {
        self.0
    }

    /// The same 64 bits reinterpreted as a signed number (two's complement), e.g. for
    /// Postgres `pg_advisory_xact_lock(bigint)`.
    #[inline]
    pub const fn to_i64(self) -> i64 {
        self.0 as i64
    }
}

macro_rules! int_keys {
    ($($t:ty),*) => {$(
        impl ContentionKey for $t {
            #[inline]
            fn write_key(&self, out: &mut KeyEncoder) {
                // Lossless: every one of these types fits in i128.
                out.int(*self as i128);
            }
        }
    )*};
}

int_keys!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, usize);

impl ContentionKey for u128 {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        match i128::try_from(*self) {
            Ok(value) => out.int(value),
            Err(_) => {
                out.tag(TAG_BIG_UINT);
                out.bytes(&self.to_le_bytes());
            }
        }
    }
}

impl ContentionKey for bool {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        out.bytes(&[TAG_BOOL, u8::from(*self)]);
    }
}

impl ContentionKey for char {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        out.tag(TAG_CHAR);
        out.bytes(&u32::from(*self).to_le_bytes());
    }
}

impl ContentionKey for str {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        out.tag(TAG_STR);
        out.len(self.len());
        out.bytes(self.as_bytes());
    }
}

impl ContentionKey for String {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        self.as_str().write_key(out);
    }
}

impl<T: ContentionKey + ?Sized> ContentionKey for &T {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        (**self).write_key(out);
    }
}

impl<T: ContentionKey + ?Sized> ContentionKey for Box<T> {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        (**self).write_key(out);
    }
}

impl<T: ContentionKey + ?Sized> ContentionKey for Rc<T> {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        (**self).write_key(out);
    }
}

impl<T: ContentionKey + ?Sized> ContentionKey for Arc<T> {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        (**self).write_key(out);
    }
}

impl<T: ContentionKey + ToOwned + ?Sized> ContentionKey for Cow<'_, T> {
    #[inline]
    fn write_key(&self, out: &mut KeyEncoder) {
        (**self).write_key(out);
    }
}

impl<T: ContentionKey> ContentionKey for [T] {
    fn write_key(&self, out: &mut KeyEncoder) {
        out.seq(self);
    }
}

impl<T: ContentionKey, const N: usize> ContentionKey for [T; N] {
    fn write_key(&self, out: &mut KeyEncoder) {
        out.seq(self);
    }
}

impl<T: ContentionKey> ContentionKey for Vec<T> {
    fn write_key(&self, out: &mut KeyEncoder) {
        out.seq(self);
    }
}

macro_rules! tuple_keys {
    ($($arity:literal => ($($name:ident . $i:tt),+)),* $(,)?) => {$(
        impl<$($name: ContentionKey),+> ContentionKey for ($($name,)+) {
            #[inline]
            fn write_key(&self, out: &mut KeyEncoder) {
                out.bytes(&[TAG_TUPLE, $arity]);
                $(self.$i.write_key(out);)+
            }
        }
    )*};
}

tuple_keys! {
    1 => (A.0),
    2 => (A.0, B.1),
    3 => (A.0, B.1, C.2),
    4 => (A.0, B.1, C.2, D.3),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fnv1a(bytes: &[u8]) -> u64 {
        let mut out = KeyEncoder::new();
        out.bytes(bytes);
        out.state
    }

    /// The documented encoding of an integer, built by hand.
    fn int(value: i128) -> Vec<u8> {
        let mut bytes = vec![0x01];
        bytes.extend_from_slice(&value.to_le_bytes());
        bytes
    }

    /// The documented encoding of a string, built by hand.
    fn string(s: &str) -> Vec<u8> {
        let mut bytes = vec![0x05];
        bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
        bytes.extend_from_slice(s.as_bytes());
        bytes
    }

    fn hash(key: impl ContentionKey) -> u64 {
        KeyHash::of(key).to_u64()
    }

    #[test]
    fn fnv1a_matches_the_published_test_vectors() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn keys_hash_their_documented_encoding() {
        assert_eq!(hash(42), fnv1a(&int(42)));
        assert_eq!(hash(-1_i8), fnv1a(&int(-1)));
        assert_eq!(hash(i128::MIN), fnv1a(&int(i128::MIN)));
        let mut big = vec![0x02];
        big.extend_from_slice(&u128::MAX.to_le_bytes());
        assert_eq!(hash(u128::MAX), fnv1a(&big));
        assert_eq!(hash(true), fnv1a(&[0x03, 0x01]));
        assert_eq!(hash(false), fnv1a(&[0x03, 0x00]));
        assert_eq!(hash('é'), fnv1a(&[0x04, 0xe9, 0x00, 0x00, 0x00]));
        assert_eq!(hash("account"), fnv1a(&string("account")));
        let mut pair = vec![0x06, 2];
        pair.extend(string("account"));
        pair.extend(int(42));
        assert_eq!(hash(("account", 42)), fnv1a(&pair));
        let mut seq = vec![0x07];
        seq.extend_from_slice(&2_u64.to_le_bytes());
        seq.extend(int(1));
        seq.extend(int(2));
        assert_eq!(hash([1, 2]), fnv1a(&seq));
        assert_eq!(hash(&[1_u8, 2][..]), fnv1a(&seq));
        assert_eq!(hash(vec![1_i64, 2]), fnv1a(&seq));
    }

    #[test]
    fn equal_values_are_one_key_whatever_their_type() {
        let h = hash(42_i32);
        let by_ref: &i32 = &42;
        let by_ref_ref: &&i32 = &by_ref;
        for other in [
            hash(42_i8),
            hash(42_i16),
            hash(42_i64),
            hash(42_i128),
            hash(42_isize),
            hash(42_u8),
            hash(42_u16),
            hash(42_u32),
            hash(42_u64),
            hash(42_u128),
            hash(42_usize),
            hash(by_ref),
            hash(by_ref_ref),
            hash(Box::new(42)),
        ] {
            assert_eq!(other, h);
        }
        assert_eq!(hash(-7_i8), hash(-7_i128));
        assert_eq!(hash(i128::MAX as u128), hash(i128::MAX));
        let s = hash("tenant");
        assert_eq!(hash(String::from("tenant")), s);
        assert_eq!(hash(Arc::<str>::from("tenant")), s);
        assert_eq!(hash(Rc::<str>::from("tenant")), s);
        assert_eq!(hash(Cow::Borrowed("tenant")), s);
        assert_eq!(hash(Box::<str>::from("tenant")), s);
        assert_eq!(hash([1, 2]), hash(vec![1_u64, 2]));
    }

    #[test]
    fn different_values_are_different_keys() {
        let distinct = [
            hash(-1),
            hash(u128::MAX),
            hash(1),
            hash(true),
            hash('1'),
            hash("1"),
            hash((1,)),
            hash([1]),
            hash(("ab", "c")),
            hash(("a", "bc")),
            hash(("a", 1)),
            hash((1, "a")),
            hash(("a", 1, 2)),
            hash(("a", (1, 2))),
            hash(""),
            hash(0),
            hash(false),
            hash('\0'),
        ];
        for (i, a) in distinct.iter().enumerate() {
            for b in &distinct[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn the_signed_view_is_the_same_bits() {
        let h = KeyHash::of(("account", 42));
        assert_eq!(h.to_i64().cast_unsigned(), h.to_u64());
        assert_eq!(KeyHash(u64::MAX).to_i64(), -1);
    }
}
