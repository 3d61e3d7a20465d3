//! A tool: a name, a description, typed arguments with their JSON Schema, a handler (async,
//! or blocking), and the options that decide how an invocation may be retried.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use txretry_core::RetryPolicy;

use crate::descriptor::ToolDescriptor;
use crate::{Once, ToolContext};

/// The one error type every handler's error is erased to: `Box<dyn Error + Send + Sync>`.
///
/// A handler may return any `E: Into<BoxError>`: your own error enum, a driver's error, a
/// runner's [`TxError`](txretry_core::TxError) (what `?` on a runner call gives), an
/// `anyhow::Error` (anyhow converts into it), or a plain `String` / `&str` for a business
/// refusal. The boxed value *is* your error, unchanged: the retry decision classifies it
/// through its `source()` chain with the policy's classifier (typed codes first, never its
/// text flattened to a string), and you get it back from
/// [`ToolAttempt::error`](crate::ToolAttempt::error) to `downcast_ref` it.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// What one attempt of a handler produced, before the invocation loop judges it.
pub(crate) enum AttemptError {
    /// The handler returned `Err`.
    Handler(BoxError),
    /// The handler returned `Ok`, but its output could not be serialized to JSON.
    Output(serde_json::Error),
}

pub(crate) type AttemptResult = Result<Value, AttemptError>;

/// One attempt, ready to run: a future to poll in place, or a job for a blocking thread.
pub(crate) enum Attempt {
    Async(Pin<Box<dyn Future<Output = AttemptResult> + Send>>),
    Blocking(Box<dyn FnOnce() -> AttemptResult + Send>),
}

/// Starts the attempts of one invocation; it holds the arguments parsed for the first one.
pub(crate) type StartFn = dyn FnMut(ToolContext, &Value) -> Result<Attempt, String> + Send;

/// Validates the arguments of an invocation (parsing them once) and returns its starter.
pub(crate) type PrepareFn = dyn Fn(&Value) -> Result<Box<StartFn>, String> + Send + Sync;

/// Whether a tool is `once`: as the toolbox says, or declared either way.
#[derive(Clone, Debug, Default)]
pub(crate) enum OnceSetting {
    #[default]
    Toolbox,
    On(Once),
    Off,
}

/// A tool a [`Toolbox`](crate::Toolbox) can offer: a named handler with typed arguments.
///
/// Build it with [`Tool::new`] (async handler) or [`Tool::blocking`] (a blocking handler,
/// run on tokio's blocking threads), then set its options:
///
/// | option | default | meaning |
/// |---|---|---|
/// | [`roles`](Tool::roles) | none: any caller's roles | only callers with one of these roles are offered the tool |
/// | [`retry`](Tool::retry) | none: the toolbox's policy | this tool's own retry policy |
/// | [`restart_safe`](Tool::restart_safe) | `true` | the handler may run again from the start |
/// | [`idempotent`](Tool::idempotent) | `false` | a timed-out or ambiguous attempt may be run again |
/// | [`timeout`](Tool::timeout) | none | a limit on each attempt |
/// | [`read_only`](Tool::read_only) | `false` | a hint for clients (MCP annotations) |
/// | [`once`](Tool::once) | the toolbox's ([`ToolboxBuilder::once`](crate::ToolboxBuilder::once)) | exactly once per idempotency key |
///
/// ```
/// use std::time::Duration;
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use txretry_tool::{BoxError, Tool, ToolContext};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct GetOrder {
///     /// The order's id.
///     order_id: i64,
/// }
///
/// let tool = Tool::new("get_order", "Look an order up by id.", |_ctx: ToolContext, args: GetOrder| async move {
///     Ok::<_, BoxError>(format!("order {} is open", args.order_id))
/// })
/// .roles(["support", "admin"])
/// .read_only(true)
/// .idempotent(true)
/// .timeout(Duration::from_secs(5));
/// assert_eq!(tool.descriptor().name(), "get_order");
/// assert_eq!(tool.descriptor().input_schema()["required"][0], "order_id");
/// ```
pub struct Tool {
    pub(crate) descriptor: ToolDescriptor,
    pub(crate) roles: Option<Vec<String>>,
    pub(crate) policy: Option<RetryPolicy>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) prepare: Box<PrepareFn>,
    pub(crate) once: OnceSetting,
    pub(crate) blocking: bool,
}

impl Tool {
    /// A tool with an async handler. The handler is called once per attempt with the
    /// attempt's [`ToolContext`] and the arguments, deserialized from the caller's JSON;
    /// its future must be `Send + 'static` (write `async move`, and clone what it needs
    /// from its surroundings, such as a pool, into the closure).
    ///
    /// Run every transaction of the handler through a txretry runner called with
    /// [`ctx.policy()`](ToolContext::policy): the runner then draws its retries from the
    /// invocation's one budget. Return `Err` with your own error for a business refusal
    /// ("order not found"): it is classified like any error (permanent unless it carries a
    /// transient database code), so it surfaces once. The `Ok` value is serialized to JSON
    /// once and returned as it is.
    pub fn new<A, O, E, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Tool
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize,
        E: Into<BoxError>,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        Tool::dynamic(
            name,
            description,
            schemars::schema_for!(A).to_value(),
            parse_args::<A>,
            handler,
        )
    }

    /// A tool whose arguments are known only at run time (tools declared in a config file):
    /// `input_schema` is what callers are shown, and `parse` checks a call's JSON arguments
    /// against it and turns them into the handler's `A`. An `Err` from `parse` is the
    /// invocation's [`InvokeError::InvalidArguments`](crate::InvokeError::InvalidArguments)
    /// (its message, as it is): the handler never runs. Everything else is as for
    /// [`Tool::new`].
    ///
    /// ```
    /// use serde_json::{Value, json};
    /// use txretry_tool::{BoxError, Tool, ToolContext};
    ///
    /// let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    /// let parse = |args: &Value| args.get("n").and_then(Value::as_i64).ok_or_else(|| "n: an integer is required".to_owned());
    /// let tool = Tool::dynamic("double", "Doubles n.", schema.clone(), parse, |_ctx: ToolContext, n: i64| async move {
    ///     Ok::<_, BoxError>(n * 2)
    /// });
    /// assert_eq!(tool.descriptor().input_schema(), &schema);
    /// ```
    pub fn dynamic<A, O, E, P, F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        parse: P,
        handler: F,
    ) -> Tool
    where
        A: Send + 'static,
        O: Serialize,
        E: Into<BoxError>,
        P: Fn(&Value) -> Result<A, String> + Send + Sync + 'static,
        F: Fn(ToolContext, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let parse = Arc::new(parse);
        let prepare = move |args: &Value| -> Result<Box<StartFn>, String> {
            // Parsed once up front (the check), and again for each later attempt.
            let mut first = Some(parse(args)?);
            let handler = Arc::clone(&handler);
            let parse = Arc::clone(&parse);
            Ok(Box::new(move |ctx: ToolContext, args: &Value| {
                let args = match first.take() {
                    Some(parsed) => parsed,
                    None => parse(args)?,
                };
                let future = handler(ctx, args);
                Ok(Attempt::Async(Box::pin(async move {
                    match future.await {
                        Ok(output) => serde_json::to_value(&output).map_err(AttemptError::Output),
                        Err(error) => Err(AttemptError::Handler(error.into())),
                    }
                })))
            }))
        };
        Tool::with_handler(
            name.into(),
            description.into(),
            input_schema,
            Box::new(prepare),
            false,
        )
    }

    /// A tool with a blocking handler (rusqlite-style code), run on tokio's blocking thread
    /// pool (`spawn_blocking`), one attempt at a time, under exactly the same decisions as
    /// an async tool: the invocation loop is the same, only the attempt runs elsewhere.
    ///
    /// A thread cannot be stopped from outside. When an attempt times out, the invocation
    /// marks it cancelled ([`ToolContext::is_cancelled`] turns true: check it between
    /// statements to stop early) and **waits for the thread to return** before it retries
    /// or returns, so two attempts never run at once; whatever that attempt returns after
    /// its timeout is discarded (it counts as timed out). Dropping the invocation likewise
    /// marks the running attempt cancelled, but cannot wait: the thread runs on by itself.
    pub fn blocking<A, O, E, F>(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: F,
    ) -> Tool
    where
        A: DeserializeOwned + JsonSchema + Send + 'static,
        O: Serialize,
        E: Into<BoxError>,
        F: Fn(ToolContext, A) -> Result<O, E> + Send + Sync + 'static,
    {
        let handler = Arc::new(handler);
        let prepare = move |args: &Value| -> Result<Box<StartFn>, String> {
            let mut first = Some(parse_args::<A>(args)?);
            let handler = Arc::clone(&handler);
            Ok(Box::new(move |ctx: ToolContext, args: &Value| {
                let args = match first.take() {
                    Some(parsed) => parsed,
                    None => parse_args::<A>(args)?,
                };
                let handler = Arc::clone(&handler);
                Ok(Attempt::Blocking(Box::new(move || {
                    match handler(ctx, args) {
                        Ok(output) => serde_json::to_value(&output).map_err(AttemptError::Output),
                        Err(error) => Err(AttemptError::Handler(error.into())),
                    }
                })))
            }))
        };
        Tool::with_handler(
            name.into(),
            description.into(),
            schemars::schema_for!(A).to_value(),
            Box::new(prepare),
            true,
        )
    }

    fn with_handler(
        name: String,
        description: String,
        input_schema: Value,
        prepare: Box<PrepareFn>,
        blocking: bool,
    ) -> Tool {
        Tool {
            descriptor: ToolDescriptor {
                name,
                description,
                input_schema,
                output_schema: None,
                restart_safe: true,
                idempotent: false,
                read_only: false,
                once: false,
            },
            roles: None,
            policy: None,
            timeout: None,
            prepare,
            once: OnceSetting::Toolbox,
            blocking,
        }
    }

    /// Only callers with at least one of these roles are offered (and may invoke) the tool.
    /// An empty list offers it to nobody.
    ///
    /// # Default
    /// No role list: the role layer does not restrict the tool (the persona and agent
    /// lists still do).
    #[must_use]
    pub fn roles<I>(mut self, roles: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.roles = Some(roles.into_iter().map(Into::into).collect());
        self
    }

    /// The tool's own retry policy; it wins over the toolbox's. `RetryPolicy::disabled()`
    /// means one attempt, no retry.
    ///
    /// # Default
    /// None: the toolbox's policy, or `RetryPolicy::default()` when the toolbox has none.
    #[must_use]
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Whether the handler may be run again from the start within one invocation. With
    /// `false` the handler runs at most once per invocation, whatever the error (the
    /// runners it calls still retry their own transactions in place, within the budget).
    ///
    /// Even a restart-safe handler is never re-run after an attempt in which something
    /// committed (a runner under [`ToolContext::policy`] succeeded): committed work is never
    /// done twice.
    ///
    /// # Default
    /// `true`.
    #[must_use]
    pub fn restart_safe(mut self, restart_safe: bool) -> Self {
        self.descriptor.restart_safe = restart_safe;
        self
    }

    /// Declares that running the tool twice has the same effect as running it once. Only
    /// then is an attempt that timed out, or whose commit is ambiguous (the connection was
    /// lost while committing), run again; the runners under [`ToolContext::policy`] are
    /// told nothing of it (pass `TxOptions::new().idempotent(true)` to them yourself).
    ///
    /// # Default
    /// `false`.
    #[must_use]
    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.descriptor.idempotent = idempotent;
        self
    }

    /// A limit on each attempt. An async attempt that runs out of time is cancelled (its
    /// future is dropped, which rolls back the transaction it had open) before anything
    /// else happens; it is retried only for an [`idempotent`](Tool::idempotent) tool,
    /// within the budget. See [`Tool::blocking`] for blocking tools.
    ///
    /// # Default
    /// None.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Declares that the tool only reads. A hint for clients (MCP's `readOnlyHint`); the
    /// toolbox does not enforce it (use `TxOptions::read_only` in the handler's runners).
    ///
    /// # Default
    /// `false`.
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.descriptor.read_only = read_only;
        self
    }

    /// Declares the tool *exactly once* (see [`Once`]): each call carries an idempotency key
    /// (the call id, or one derived from the arguments), and the handler does its database
    /// work in **one** [`ToolContext::once`](crate::ToolContext#method.once) transaction,
    /// which records the call's outcome (its output, or its business error) under the key in
    /// the same transaction as the work. A repeated call with the same key gets that recorded
    /// outcome without the transaction's work running again.
    ///
    /// What changes for the tool:
    /// - a timed-out attempt, or one whose COMMIT was ambiguous, is retried as for an
    ///   [`idempotent`](Tool::idempotent) tool (the record tells whether the first one
    ///   landed), and `ToolContext::once` retries an ambiguous COMMIT itself;
    /// - one transaction per run of the handler, the `ToolContext::once` one: a second
    ///   `ToolContext::once`, or a transaction committed under [`ToolContext::policy`]
    ///   outside it, is refused ([`OnceRefused`](crate::OnceRefused));
    /// - [`ToolboxBuilder::build`](crate::ToolboxBuilder::build) refuses `once` on a
    ///   [`read_only`](Tool::read_only) tool (it has nothing to record);
    /// - a [`blocking`](Tool::blocking) tool records through
    ///   `ToolContext::once_rusqlite` (feature `rusqlite`), the blocking one.
    ///
    /// # Default
    /// The toolbox's ([`ToolboxBuilder::once`](crate::ToolboxBuilder::once)), which is off
    /// unless set.
    #[must_use]
    pub fn once(mut self, once: Once) -> Self {
        self.once = OnceSetting::On(once);
        self
    }

    /// Opts the tool out of a toolbox-wide [`ToolboxBuilder::once`](crate::ToolboxBuilder::once).
    #[must_use]
    pub fn without_once(mut self) -> Self {
        self.once = OnceSetting::Off;
        self
    }

    /// Declares the JSON Schema of what the tool's calls answer (MCP's `outputSchema`): a
    /// promise to clients, not checked against the handler's output.
    ///
    /// # Default
    /// None.
    #[must_use]
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.descriptor.output_schema = Some(schema);
        self
    }

    /// What callers are told about the tool.
    pub fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.descriptor.name)
            .field("roles", &self.roles)
            .field("policy", &self.policy)
            .field("restart_safe", &self.descriptor.restart_safe)
            .field("idempotent", &self.descriptor.idempotent)
            .field("timeout", &self.timeout)
            .field("read_only", &self.descriptor.read_only)
            .field("once", &self.once)
            .finish_non_exhaustive()
    }
}

/// Deserializes a tool's arguments; on failure, says what was wrong and where
/// (`items[2].qty: invalid type: string "x", expected i64`).
fn parse_args<A: DeserializeOwned + JsonSchema>(args: &Value) -> Result<A, String> {
    // serde's derive also reads a struct from a list, by position (`[3]` as `{"id": 3}`);
    // callers are shown an object's schema, and an object is what a call must send.
    if args.is_array() && schemars::schema_for!(A).get("type") == Some(&Value::from("object")) {
        return Err("expected an object of named arguments, got a list".to_owned());
    }
    if let Ok(parsed) = A::deserialize(args) {
        return Ok(parsed);
    }
    // The rare path: parse again, tracking where the error is.
    serde_path_to_error::deserialize::<_, A>(args).map_err(|error| {
        let path = error.path().to_string();
        if path == "." {
            error.into_inner().to_string()
        } else {
            format!("{path}: {}", error.into_inner())
        }
    })
}
