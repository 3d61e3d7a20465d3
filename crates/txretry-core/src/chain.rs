//! Seeing any supported error type as `&dyn Error`, and walking its causes.

use std::error::Error;
use std::ops::Deref;

/// An error type the retry loop can classify: any `E: Error + 'static`, `anyhow::Error`,
/// `Box<dyn Error + Send + Sync>` and `Box<dyn Error>`.
///
/// The `Via` parameter only tells the blanket implementations apart (coherence forbids
/// one blanket for both `Error` types and the boxed/`anyhow` ones); the compiler infers
/// it, so callers never name it.
pub trait AsError<Via> {
    /// The error as a trait object, for classification.
    fn as_error(&self) -> &(dyn Error + 'static);
}

/// [`AsError`] marker for types that implement [`Error`] themselves.
#[doc(hidden)]
#[derive(Debug)]
pub enum ViaError {}
/// [`AsError`] marker for types that dereference to `dyn Error + Send + Sync`
/// (`anyhow::Error`, `Box<dyn Error + Send + Sync>`).
#[doc(hidden)]
#[derive(Debug)]
pub enum ViaDerefSendSync {}
/// [`AsError`] marker for types that dereference to `dyn Error` (`Box<dyn Error>`).
#[doc(hidden)]
#[derive(Debug)]
pub enum ViaDeref {}

impl<E: Error + 'static> AsError<ViaError> for E {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

impl<E: Deref<Target = dyn Error + Send + Sync + 'static>> AsError<ViaDerefSendSync> for E {
    fn as_error(&self) -> &(dyn Error + 'static) {
        &**self
    }
}

impl<E: Deref<Target = dyn Error + 'static>> AsError<ViaDeref> for E {
    fn as_error(&self) -> &(dyn Error + 'static) {
        &**self
    }
}

/// Longest chain ever walked, whatever depth is asked for: a `source()` cycle that the
/// identity check below cannot see (a vtable duplicated across codegen units) still ends.
pub(crate) const MAX_LINKS: usize = 64;

/// The error and up to `depth` levels of `source()`. Stops early at a `source()` that
/// returns the error itself (or the root), so a self-referential chain cannot loop.
pub(crate) fn links<'e>(
    error: &'e (dyn Error + 'static),
    depth: usize,
) -> impl Iterator<Item = &'e (dyn Error + 'static)> {
    let root = error;
    let mut next = Some(error);
    let mut remaining = depth.saturating_add(1).min(MAX_LINKS);
    std::iter::from_fn(move || {
        if remaining == 0 {
            return None;
        }
        remaining -= 1;
        let current = next?;
        next = current
            .source()
            .filter(|s| !same(*s, current) && !same(*s, root));
        Some(current)
    })
}

/// Same object: same address *and* same type. The address alone is not enough, since a
/// wrapper's first field lives at the wrapper's own address.
fn same<'a>(a: &'a (dyn Error + 'static), b: &'a (dyn Error + 'static)) -> bool {
    #[allow(ambiguous_wide_pointer_comparisons)] // comparing the vtable is the point
    std::ptr::eq(a, b)
}
