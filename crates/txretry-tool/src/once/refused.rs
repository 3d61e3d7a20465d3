//! Why a `once` tool's call was refused.

/// Why a `once` tool's call was refused: it was used in a way that would break "exactly
/// once". Returned as [`InvokeError::OnceRefused`](crate::InvokeError::OnceRefused); never
/// retried. Except [`NotDeclared`](OnceRefused::NotDeclared): a tool not declared `once`
/// has no record to note the refusal in, so it reaches the handler only, as
/// [`OnceError::Refused`](crate::OnceError::Refused); a handler that returns it fails the
/// call as a business failure ([`FailureKind::Business`](crate::FailureKind::Business)),
/// with this message.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OnceRefused {
    /// [`ToolContext::once`](crate::ToolContext#method.once) was called by a tool that is not
    /// declared `once` ([`Tool::once`](crate::Tool::once),
    /// [`ToolboxBuilder::once`](crate::ToolboxBuilder::once)). Nothing ran.
    #[error(
        "ToolContext::once is only for tools declared once (Tool::once or ToolboxBuilder::once)"
    )]
    NotDeclared,
    /// The idempotency key could not be had (the arguments do not fit the key function's
    /// type), or is empty, longer than 255 bytes or holds a NUL character. The handler did
    /// not run.
    #[error("no usable idempotency key: {0}")]
    InvalidKey(String),
    /// The handler started a second `ToolContext::once` transaction in one run. It was
    /// refused before it began; the first one's work stands (and is recorded).
    #[error("a once tool runs one transaction per call: a second ToolContext::once was refused")]
    SecondTransaction,
    /// A transaction under [`ToolContext::policy`](crate::ToolContext::policy) committed
    /// during a run of a `once` tool's handler, outside `ToolContext::once`: its work is not
    /// covered by the record, so a repeated call would do it again. When it committed
    /// before `ToolContext::once` was called, that call was refused before it began; when
    /// it committed after (or without) it, this is reported when the run ends.
    #[error(
        "a once tool runs one transaction per call, through ToolContext::once: {transactions} other transaction{} committed under the tool's policy, and a repeated call would run {} again",
        plural(*.transactions),
        pronoun(*.transactions)
    )]
    CommittedOutside {
        /// How many such transactions committed.
        transactions: u32,
    },
}

/// `s` for several transactions.
fn plural(transactions: u32) -> &'static str {
    if transactions == 1 { "" } else { "s" }
}

/// `it` for one transaction, `them` for several.
fn pronoun(transactions: u32) -> &'static str {
    if transactions == 1 { "it" } else { "them" }
}
