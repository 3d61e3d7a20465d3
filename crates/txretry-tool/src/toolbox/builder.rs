//! Building a toolbox: checking the names and lists, and resolving each tool's effective
//! policy (the tool's, the toolbox's or the default, then the config's keys, then the hooks).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use txretry_core::{GiveUpEvent, RetryEvent, RetryPolicy};

use super::names::Names;
use super::registry::{Entry, Registry};
use super::{BuildError, Toolbox};
use crate::Once;
use crate::config::{ConfigError, ToolConfig, ToolboxConfig};
use crate::tool::{OnceSetting, Tool};

type RetryHook = Arc<dyn Fn(&RetryEvent<'_>) + Send + Sync>;
type GiveUpHook = Arc<dyn Fn(&GiveUpEvent<'_>) + Send + Sync>;

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
    /// The event lists every attempt made under the call's budget, first to last: the
    /// transaction attempts of the runners the handler called with
    /// [`ToolContext::policy`](crate::ToolContext::policy), and each run of the handler
    /// that failed outside a runner. Its `outcome` has their verdicts, codes and phases
    /// (`outcome.attempts()` is their number, the one the failure's message gives), its
    /// `attempts` the same entries with each error's text, its `error` the last run's error.
    /// The same list is the failure's [`ToolFailure::history`](crate::ToolFailure::history).
    /// A runner that gave up inside the handler does not fire it (its policy has a no-op
    /// give-up hook); its own outcome is in the failure's
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
    /// left out, and so are [`read_only`](Tool::read_only) tools (nothing to record) and
    /// [`blocking`](Tool::blocking) tools (they opt in with their own [`Tool::once`] and
    /// record through `ToolContext::once_rusqlite`).
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
                    // A blocking tool may: `ToolContext::once_rusqlite` is blocking.
                    if descriptor.read_only {
                        return Err(BuildError::OnceNotAllowed {
                            tool: descriptor.name,
                            reason: "a read-only tool has nothing to record",
                        });
                    }
                    Some(once)
                }
                // Blocking tools opt in with their own `Tool::once`: a toolbox-wide `once`
                // made before blocking tools could be `once` must not change them.
                OnceSetting::Toolbox if !blocking && !descriptor.read_only => self.once.clone(),
                OnceSetting::Toolbox | OnceSetting::Off => None,
            };
            descriptor.once = once.is_some();
            let (loop_policy, handler_policy) = loop_and_handler_policies(&effective, &hooks)?;
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
            inner: Arc::new(Registry {
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
fn loop_and_handler_policies(
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
