//! What a built toolbox holds: each tool resolved at build time, and the gate.

use std::time::Duration;

use txretry_core::RetryPolicy;

use super::Caller;
use super::names::Names;
use crate::Once;
use crate::ToolDescriptor;
use crate::tool::PrepareFn;

/// A registered tool with everything resolved at build time.
pub(crate) struct Entry {
    pub(crate) descriptor: ToolDescriptor,
    pub(super) roles: Option<Box<[String]>>,
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

/// A toolbox's registered tools and its persona and agent lists: what the gate checks.
pub(crate) struct Registry {
    pub(crate) tools: Vec<Entry>,
    pub(super) index: Names<usize>,
    /// Per persona, per tool index: allowed.
    pub(super) personas: Names<Box<[bool]>>,
    pub(super) agents: Names<Box<[bool]>>,
}

impl Registry {
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
            && !roles.iter().any(|role| caller.roles().contains(role))
        {
            return false;
        }
        let listed = |lists: &Names<Box<[bool]>>, name: Option<&str>| match name {
            None => true,
            Some(name) => lists.get(name).is_some_and(|allowed| allowed[index]),
        };
        listed(&self.personas, caller.get_persona()) && listed(&self.agents, caller.get_agent())
    }
}
