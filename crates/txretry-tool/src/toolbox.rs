//! The toolbox: registered tools, their effective policies, and the gate that decides what a
//! caller is offered and may invoke.

use std::collections::HashMap;
use std::error::Error;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::time::Duration;

use txretry_core::{GiveUpEvent, PolicyError, RetryEvent, RetryPolicy};

use crate::Once;
use crate::config::{ConfigError, ToolConfig, ToolboxConfig};
use crate::tool::{OnceSetting, PrepareFn, Tool, ToolDescriptor};

type RetryHook = Arc<dyn Fn(&RetryEvent<'_>) + Send + Sync>;
type GiveUpHook = Arc<dyn Fn(&GiveUpEvent<'_>) + Send + Sync>;

/// Who is asking: the caller's roles, and optionally the persona and the agent it speaks
/// as. The toolbox offers it the tools that pass all three layers (see
/// [`Toolbox::offered`]).
///
/// ```
/// use txretry_tool::Caller;
///
/// let caller = Caller::new(["support"]).persona("refunds").agent("helpdesk");
/// assert_eq!(caller.roles(), ["support"]);
/// assert_eq!(caller.get_persona(), Some("refunds"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    roles: Vec<String>,
    persona: Option<String>,
    agent: Option<String>,
}

impl Caller {
    /// A caller with these roles, no persona and no agent.
    pub fn new<I>(roles: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        Caller {
            roles: roles.into_iter().map(Into::into).collect(),
            persona: None,
            agent: None,
        }
    }

    /// Speaks as this persona: only the tools on the persona's allow-list are offered. An
    /// unknown persona is offered nothing.
    #[must_use]
    pub fn persona(mut self, persona: impl Into<String>) -> Self {
        self.persona = Some(persona.into());
        self
    }

    /// Runs as this agent: only the tools on the agent's list are offered. An unknown
    /// agent is offered nothing.
    #[must_use]
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = Some(agent.into());
        self
    }

    /// The caller's roles.
    pub fn roles(&self) -> &[String] {
        &self.roles
    }

    /// The persona, if any.
    pub fn get_persona(&self) -> Option<&str> {
        self.persona.as_deref()
    }

    /// The agent, if any.
    pub fn get_agent(&self) -> Option<&str> {
        self.agent.as_deref()
    }
}

/// Maps keyed by the names the code registered (tools, personas, agents), looked up with
/// the names callers send. FNV-1a instead of SipHash: a lookup costs a few nanoseconds,
/// and hash flooding needs attacker-chosen *keys*, which these maps never hold.
type Names<V> = HashMap<String, V, BuildHasherDefault<Fnv>>;

struct Fnv(u64);

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

/// A registered tool with everything resolved at build time.
pub(crate) struct Entry {
    pub(crate) descriptor: ToolDescriptor,
    roles: Option<Box<[String]>>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) prepare: Box<PrepareFn>,
    /// The effective policy with the toolbox's hooks: the invocation loop runs under it.
    pub(crate) loop_policy: RetryPolicy,
    /// The same, with a no-op give-up hook: handed to the handler (the invocation reports
    /// the give-up once, itself).
    pub(crate) handler_policy: RetryPolicy,
    pub(crate) level: &'static str,
    /// Exactly once: how keys are made and where calls are recorded.
    pub(crate) once: Option<Once>,
}

pub(crate) struct Inner {
    pub(crate) tools: Vec<Entry>,
    index: Names<usize>,
    /// Per persona, per tool index: allowed.
    personas: Names<Box<[bool]>>,
    agents: Names<Box<[bool]>>,
}

impl Inner {
    /// The tool's index, if it exists and passes the gate for `caller`: registered ∩ the
    /// caller's roles ∩ the persona's list ∩ the agent's list. Unknown and not offered
    /// are the same `None`.
    pub(crate) fn gate(&self, caller: &Caller, name: &str) -> Option<usize> {
        let index = *self.index.get(name)?;
        self.allows(caller, index).then_some(index)
    }

    pub(crate) fn allows(&self, caller: &Caller, index: usize) -> bool {
        let entry = &self.tools[index];
        if let Some(roles) = &entry.roles
            && !roles.iter().any(|role| caller.roles.contains(role))
        {
            return false;
        }
        let listed = |lists: &Names<Box<[bool]>>, name: &Option<String>| match name {
            None => true,
            Some(name) => lists.get(name).is_some_and(|allowed| allowed[index]),
        };
        listed(&self.personas, &caller.persona) && listed(&self.agents, &caller.agent)
    }
}

/// A set of tools, the agent-level policy and hooks, and the persona and agent allow-lists.
/// Build it once with [`Toolbox::builder`]; it is immutable, cheap to clone (an `Arc`) and
/// `Send + Sync`.
///
/// - [`offered`](Toolbox::offered) lists what a [`Caller`] may use;
/// - [`invoke`](Toolbox::invoke) runs one tool call: the gate before every attempt, the
///   arguments checked before the first, one retry budget for the whole call.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use txretry_core::RetryPolicy;
/// use txretry_tool::{BoxError, Caller, InvokeError, Tool, ToolContext, Toolbox};
///
/// #[derive(Deserialize, JsonSchema)]
/// struct CancelOrder {
///     order_id: i64,
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let toolbox = Toolbox::builder()
///     .policy(RetryPolicy::builder().max_attempts(3).build()?)
///     .on_retry(|e| eprintln!("{:?} retried after attempt {}", e.tool, e.attempt))
///     .tool(
///         Tool::new("cancel_order", "Cancel an open order.", |ctx: ToolContext, args: CancelOrder| async move {
///             // A real handler runs its transaction with the invocation's policy:
///             //   txretry_sqlx::transaction(&pool, ctx.policy(), async move |tx| { … }).await?;
///             assert_eq!(ctx.policy().max_attempts(), 3);
///             if args.order_id != 42 {
///                 return Err::<String, BoxError>("order not found".into());
///             }
///             Ok(format!("order {} cancelled", args.order_id))
///         })
///         .roles(["support"]),
///     )
///     .persona("refunds", ["cancel_order"])
///     .build()?;
///
/// let support = Caller::new(["support"]).persona("refunds");
/// assert_eq!(toolbox.offered(&support).len(), 1);
/// assert!(toolbox.offered(&Caller::new(["sales"])).is_empty());
///
/// let out = toolbox.invoke(&support, "cancel_order", serde_json::json!({"order_id": 42}), "call-1").await?;
/// assert_eq!(out, "order 42 cancelled");
///
/// // A business error surfaces once, as the handler said it.
/// let err = toolbox.invoke(&support, "cancel_order", serde_json::json!({"order_id": 7}), "call-2").await.unwrap_err();
/// assert_eq!(err.to_string(), "cancel_order: order not found");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Toolbox {
    pub(crate) inner: Arc<Inner>,
}

impl Toolbox {
    /// A builder with no tools, no policy (tools without one then use
    /// `RetryPolicy::default()`), no hooks and no lists.
    pub fn builder() -> ToolboxBuilder {
        ToolboxBuilder::default()
    }

    /// The tools `caller` may use, in registration order: every registered tool that
    /// passes all three layers of the gate.
    ///
    /// - **roles**: a tool with a role list needs one of the caller's roles;
    /// - **persona**: when the caller names a persona, only the tools on its list;
    /// - **agent**: when the caller names an agent, only the tools on its list.
    ///
    /// An absent list does not restrict its layer; an empty list allows nothing; a persona
    /// or agent the toolbox does not know allows nothing (fail-closed).
    pub fn offered(&self, caller: &Caller) -> Vec<&ToolDescriptor> {
        let inner = &*self.inner;
        (0..inner.tools.len())
            .filter(|&index| inner.allows(caller, index))
            .map(|index| &inner.tools[index].descriptor)
            .collect()
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.inner.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.inner.tools.is_empty()
    }
}

impl fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self
            .inner
            .tools
            .iter()
            .map(|e| e.descriptor.name.as_str())
            .collect();
        f.debug_struct("Toolbox")
            .field("tools", &names)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Toolbox`]. Every setting is checked by [`build`](ToolboxBuilder::build).
#[derive(Default)]
pub struct ToolboxBuilder {
    policy: Option<RetryPolicy>,
    on_retry: Option<RetryHook>,
    on_give_up: Option<GiveUpHook>,
    personas: Vec<(String, Vec<String>)>,
    agents: Vec<(String, Vec<String>)>,
    tools: Vec<Tool>,
    config: Option<ToolboxConfig>,
    once: Option<Once>,
}

impl ToolboxBuilder {
    /// The agent-level policy: used by every tool without a policy of its own.
    ///
    /// # Default
    /// None: `RetryPolicy::default()` (2 attempts, 150 ms linear backoff).
    #[must_use]
    pub fn policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Called before every retry of every tool call, whichever loop retries: the
    /// invocation's own (the handler runs again) or a runner's under
    /// [`ToolContext::policy`](crate::ToolContext::policy) (a transaction runs again).
    /// The event carries the tool's name, the call id and the policy level.
    ///
    /// It is installed on each tool's effective policy when the toolbox is built, and
    /// replaces any `on_retry` hook that policy had.
    ///
    /// # Default
    /// None (the events still go to `tracing`, target `txretry`, at debug level).
    #[must_use]
    pub fn on_retry<F>(mut self, hook: F) -> Self
    where
        F: Fn(&RetryEvent<'_>) + Send + Sync + 'static,
    {
        self.on_retry = Some(Arc::new(hook));
        self
    }

    /// Called once per tool call that ends on a failure other than a plain permanent one
    /// (retries ran out, a timeout, an ambiguous commit, a transient failure that could not
    /// be retried because something had committed or the tool is not restart-safe). It
    /// replaces any `on_give_up` hook of the tools' policies.
    ///
    /// The event's `outcome` is the invocation's: one history entry per run of the
    /// handler. A runner that gave up inside the handler does not fire it (its policy,
    /// [`ToolContext::policy`](crate::ToolContext::policy), has a no-op give-up hook); its
    /// transaction-level outcome is in the failure's
    /// [`ToolAttempt::runner_outcome`](crate::ToolAttempt::runner_outcome).
    ///
    /// # Default
    /// None (the event still goes to `tracing` at warn level).
    #[must_use]
    pub fn on_give_up<F>(mut self, hook: F) -> Self
    where
        F: Fn(&GiveUpEvent<'_>) + Send + Sync + 'static,
    {
        self.on_give_up = Some(Arc::new(hook));
        self
    }

    /// An allow-list for a persona: a caller speaking as `persona` is offered only these
    /// tools (and only those its roles and agent allow). An empty list allows nothing.
    #[must_use]
    pub fn persona<I>(mut self, persona: impl Into<String>, tools: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.personas
            .push((persona.into(), tools.into_iter().map(Into::into).collect()));
        self
    }

    /// An agent's tool list: a caller running as `agent` is offered only these tools. An
    /// empty list allows nothing.
    #[must_use]
    pub fn agent<I>(mut self, agent: impl Into<String>, tools: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<String>,
    {
        self.agents
            .push((agent.into(), tools.into_iter().map(Into::into).collect()));
        self
    }

    /// Declares every tool *exactly once* (see [`Tool::once`]) unless it says otherwise:
    /// tools with their own [`Tool::once`] keep it, tools with [`Tool::without_once`] are
    /// left out, and so are [`read_only`](Tool::read_only) and [`blocking`](Tool::blocking)
    /// tools (nothing to record; `ToolContext::once` is async).
    ///
    /// # Default
    /// None: only tools declared with [`Tool::once`] are `once`.
    #[must_use]
    pub fn once(mut self, once: Once) -> Self {
        self.once = Some(once);
        self
    }

    /// Registers a tool.
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Applies settings read from a file (see [`ToolboxConfig`]): the `agent` section is
    /// layered over the toolbox's policy, each `tools.<name>` section over that tool's
    /// policy and options. Keys present win over what the code set; keys absent keep it.
    ///
    /// The values are checked here; that every named tool exists is checked by
    /// [`build`](ToolboxBuilder::build). Applying a second config replaces the first.
    pub fn config(mut self, config: ToolboxConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        self.config = Some(config);
        Ok(self)
    }

    /// Checks everything and builds the toolbox: tool names valid (`[A-Za-z0-9_-]`, 1 to
    /// 64 characters, what model APIs and MCP clients accept) and unique; persona and agent
    /// names unique, and their lists naming registered tools only; the config valid for
    /// registered tools.
    ///
    /// Each tool's effective policy is resolved here, once: the tool's own, else the
    /// toolbox's, else `RetryPolicy::default()`, then the config's keys, then the toolbox's
    /// hooks.
    pub fn build(self) -> Result<Toolbox, BuildError> {
        let mut index = Names::with_capacity_and_hasher(self.tools.len(), Default::default());
        for (i, tool) in self.tools.iter().enumerate() {
            let name = &tool.descriptor.name;
            if !valid_name(name) {
                return Err(BuildError::InvalidToolName(name.clone()));
            }
            if index.insert(name.clone(), i).is_some() {
                return Err(BuildError::DuplicateTool(name.clone()));
            }
        }
        let lists = |kind: &'static str, lists: Vec<(String, Vec<String>)>| {
            let mut map = Names::with_capacity_and_hasher(lists.len(), Default::default());
            for (name, tools) in lists {
                let mut allowed = vec![false; self.tools.len()].into_boxed_slice();
                for tool in &tools {
                    let Some(&i) = index.get(tool) else {
                        return Err(BuildError::UnknownTool {
                            list: format!("{kind} {name:?}"),
                            tool: tool.clone(),
                        });
                    };
                    allowed[i] = true;
                }
                if map.insert(name.clone(), allowed).is_some() {
                    return Err(BuildError::DuplicateList {
                        kind,
                        name: name.clone(),
                    });
                }
            }
            Ok(map)
        };
        let personas = lists("persona", self.personas)?;
        let agents = lists("agent", self.agents)?;

        let mut tool_configs: HashMap<String, ToolConfig> = HashMap::new();
        let mut agent_config = None;
        if let Some(config) = self.config {
            for name in config.tools.keys() {
                if !index.contains_key(name) {
                    return Err(BuildError::Config(ConfigError::unknown_tool(name)));
                }
            }
            tool_configs = config.tools.into_iter().collect();
            agent_config = config.agent;
        }

        // The toolbox level: the code's policy, then the config's `agent` keys.
        let (toolbox_policy, toolbox_level) = match (self.policy, &agent_config) {
            (base, Some(agent)) => {
                let base = base.unwrap_or_default();
                (
                    Some(agent.build_on(&base, "agent").map_err(BuildError::Config)?),
                    "toolbox",
                )
            }
            (Some(policy), None) => (Some(policy), "toolbox"),
            (None, None) => (None, "default"),
        };

        let hooks = (self.on_retry, self.on_give_up);
        let mut tools = Vec::with_capacity(self.tools.len());
        for tool in self.tools {
            let Tool {
                mut descriptor,
                roles,
                policy,
                mut timeout,
                prepare,
                once,
                blocking,
            } = tool;
            let (mut effective, mut level) = match (policy, &toolbox_policy) {
                (Some(own), _) => (own, "tool"),
                (None, Some(toolbox)) => (toolbox.clone(), toolbox_level),
                (None, None) => (RetryPolicy::default(), "default"),
            };
            if let Some(config) = tool_configs.get(&descriptor.name) {
                let field = format!("tools.{}", descriptor.name);
                let policy = config.policy();
                if !policy.is_empty() {
                    effective = policy
                        .build_on(&effective, &field)
                        .map_err(BuildError::Config)?;
                    level = "tool";
                }
                if let Some(idempotent) = config.idempotent {
                    descriptor.idempotent = idempotent;
                }
                if let Some(restart_safe) = config.restart_safe {
                    descriptor.restart_safe = restart_safe;
                }
                if let Some(t) = config.timeout {
                    timeout = Some(t);
                }
            }
            let once = match once {
                OnceSetting::On(once) => {
                    let refused = if blocking {
                        Some("a blocking tool cannot run ToolContext::once, which is async")
                    } else if descriptor.read_only {
                        Some("a read-only tool has nothing to record")
                    } else {
                        None
                    };
                    if let Some(reason) = refused {
                        return Err(BuildError::OnceNotAllowed {
                            tool: descriptor.name,
                            reason,
                        });
                    }
                    Some(once)
                }
                OnceSetting::Toolbox if !blocking && !descriptor.read_only => self.once.clone(),
                OnceSetting::Toolbox | OnceSetting::Off => None,
            };
            descriptor.once = once.is_some();
            let (loop_policy, handler_policy) = derive(&effective, &hooks)?;
            tools.push(Entry {
                descriptor,
                roles: roles.map(Vec::into_boxed_slice),
                timeout,
                prepare,
                loop_policy,
                handler_policy,
                level,
                once,
            });
        }
        Ok(Toolbox {
            inner: Arc::new(Inner {
                tools,
                index,
                personas,
                agents,
            }),
        })
    }
}

impl fmt::Debug for ToolboxBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolboxBuilder")
            .field("policy", &self.policy)
            .field("on_retry", &self.on_retry.is_some())
            .field("on_give_up", &self.on_give_up.is_some())
            .field("personas", &self.personas)
            .field("agents", &self.agents)
            .field("tools", &self.tools)
            .field("config", &self.config)
            .field("once", &self.once)
            .finish()
    }
}

/// The policy the invocation loop runs under (with the toolbox's hooks) and the one handed
/// to the handler (the same, its give-up hook silenced).
fn derive(
    effective: &RetryPolicy,
    (on_retry, on_give_up): &(Option<RetryHook>, Option<GiveUpHook>),
) -> Result<(RetryPolicy, RetryPolicy), BuildError> {
    let mut builder = effective.to_builder();
    if let Some(hook) = on_retry {
        let hook = Arc::clone(hook);
        builder = builder.on_retry(move |event| hook(event));
    }
    if let Some(hook) = on_give_up {
        let hook = Arc::clone(hook);
        builder = builder.on_give_up(move |event| hook(event));
    }
    let handler = builder
        .clone()
        .on_give_up(|_| {})
        .build()
        .map_err(BuildError::Policy)?;
    let invocation = builder.build().map_err(BuildError::Policy)?;
    Ok((invocation, handler))
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why [`ToolboxBuilder::build`] refused the settings.
#[non_exhaustive]
#[derive(Debug)]
pub enum BuildError {
    /// Two tools have this name.
    DuplicateTool(String),
    /// A tool name is empty, longer than 64 characters, or has a character other than
    /// ASCII letters, digits, `_` and `-`.
    InvalidToolName(String),
    /// A persona or agent list names a tool that is not registered.
    UnknownTool {
        /// The list, e.g. `persona "refunds"`.
        list: String,
        /// The tool it names.
        tool: String,
    },
    /// Two persona lists (or two agent lists) have the same name.
    DuplicateList {
        /// `"persona"` or `"agent"`.
        kind: &'static str,
        /// The name.
        name: String,
    },
    /// The config is invalid for these tools (it names an unknown tool, or a value does not
    /// fit the policy it is layered over).
    Config(ConfigError),
    /// A policy could not be rebuilt with the toolbox's hooks.
    Policy(PolicyError),
    /// A tool declared [`once`](Tool::once) cannot be: it is blocking, or read-only.
    OnceNotAllowed {
        /// The tool.
        tool: String,
        /// Why.
        reason: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::DuplicateTool(name) => write!(f, "two tools are named {name:?}"),
            BuildError::InvalidToolName(name) => write!(
                f,
                "invalid tool name {name:?}: use 1 to 64 ASCII letters, digits, '_' or '-'"
            ),
            BuildError::UnknownTool { list, tool } => {
                write!(f, "{list} names {tool:?}, which is not a registered tool")
            }
            BuildError::DuplicateList { kind, name } => {
                write!(f, "two {kind} lists are named {name:?}")
            }
            BuildError::Config(e) => fmt::Display::fmt(e, f),
            BuildError::Policy(e) => fmt::Display::fmt(e, f),
            BuildError::OnceNotAllowed { tool, reason } => {
                write!(f, "tool {tool:?} cannot be once: {reason}")
            }
        }
    }
}

impl Error for BuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            BuildError::Config(e) => Some(e),
            BuildError::Policy(e) => Some(e),
            _ => None,
        }
    }
}
