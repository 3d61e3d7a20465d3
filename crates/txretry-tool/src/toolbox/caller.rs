//! Who is asking: the caller a toolbox offers tools to.

#[cfg(doc)]
use super::Toolbox;

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
