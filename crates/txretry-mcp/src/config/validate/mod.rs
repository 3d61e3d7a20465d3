//! Every check a config gets before anything is served, short of a database: names that
//! exist, placeholders that are declared (and declarations that are used), captures made
//! before they are read, policies that build, tokens that are set.

use std::collections::HashMap;

use indexmap::IndexMap;
use serde_saphyr::{Location, Spanned};
use txretry_core::RetryPolicy;
use txretry_tool::PolicyConfig;

use txretry_sqlx::redact::redact_url as redact;

use super::env::expand;
use super::file::File;
use super::{Config, ConfigError, Engine, Located, Source, TokenPlan};

/// The problems found so far.
#[derive(Default)]
struct Problems(Vec<ConfigError>);

impl Problems {
    fn at(&mut self, field: impl Into<String>, at: Location, message: impl Into<String>) {
        self.0.push(ConfigError::at(field, at, message));
    }
}

#[cfg(test)]
mod tests;
mod tool;

use self::tool::check_tool;

pub(super) fn validate(
    file: File,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, Vec<ConfigError>> {
    let mut problems = Problems::default();

    if file.sources.is_empty() {
        problems.at("sources", Location::UNKNOWN, "no source is declared");
    }
    let mut sources = IndexMap::new();
    for (name, source) in &file.sources {
        let field = format!("sources.{name}");
        if let Some(source) = check_source(name, source, &field, env, &mut problems) {
            sources.insert(name.clone(), source);
        }
    }

    let default_retry = file.defaults.retry.as_ref().and_then(|retry| {
        policy(
            retry,
            &RetryPolicy::default(),
            "defaults.retry",
            &mut problems,
        )
    });
    let base = default_retry.clone().unwrap_or_default();
    if let Some(timeout) = &file.defaults.timeout
        && timeout.value.is_zero()
    {
        problems.at(
            "defaults.timeout",
            timeout.referenced,
            "must be longer than zero",
        );
    }

    if file.tools.is_empty() {
        problems.at("tools", Location::UNKNOWN, "no tool is declared");
    }
    // Each tool's toolset policy (at most one toolset may set it).
    let mut toolset_retry: HashMap<&str, (&str, RetryPolicy)> = HashMap::new();
    let mut toolsets = IndexMap::new();
    for (set, decl) in &file.toolsets {
        let field = format!("toolsets.{set}");
        if !is_name(set) {
            problems.at(&field, decl.referenced, NAME_RULE);
        }
        let retry = decl
            .value
            .retry
            .as_ref()
            .and_then(|retry| policy(retry, &base, &format!("{field}.retry"), &mut problems));
        let mut names: Vec<String> = Vec::new();
        for (i, tool) in decl.value.tools.iter().enumerate() {
            let item = format!("{field}.tools[{i}]");
            if !file.tools.contains_key(&tool.value) {
                problems.at(
                    item,
                    tool.referenced,
                    format!("no tool is named {:?}", tool.value),
                );
                continue;
            }
            if names.contains(&tool.value) {
                problems.at(
                    format!("{field}.tools"),
                    tool.referenced,
                    format!("lists {:?} twice", tool.value),
                );
                continue;
            }
            if let Some(retry) = &retry {
                let own = file.tools[&tool.value].value.retry.is_some();
                match toolset_retry.get(tool.value.as_str()) {
                    Some((other, _)) if !own => problems.at(
                        item,
                        tool.referenced,
                        format!(
                            "{:?} is in toolsets {other:?} and {set:?}, which both set a retry policy: give the tool its own",
                            tool.value
                        ),
                    ),
                    _ => {
                        toolset_retry.insert(tool.value.as_str(), (set.as_str(), retry.clone()));
                    }
                }
            }
            names.push(tool.value.clone());
        }
        if names.is_empty() && decl.value.tools.is_empty() {
            problems.at(&field, decl.referenced, "lists no tool");
        }
        toolsets.insert(set.clone(), names);
    }

    let mut tools = Vec::new();
    for (name, decl) in &file.tools {
        let field = format!("tools.{name}");
        let under = toolset_retry
            .get(name.as_str())
            .map_or(&base, |(_, retry)| retry);
        let plan = check_tool(
            name,
            decl,
            &field,
            &file.sources,
            &sources,
            under,
            &mut problems,
        );
        let tool_retry = match (&plan, toolset_retry.get(name.as_str())) {
            (Some(plan), _) if plan.retry.is_some() => None,
            (_, Some((_, retry))) => Some(retry.clone()),
            _ => None,
        };
        if let Some(mut plan) = plan {
            if plan.retry.is_none() {
                plan.retry = tool_retry;
            }
            if plan.timeout.is_none() {
                plan.timeout = file.defaults.timeout.as_ref().map(|t| t.value);
            }
            if decl.value.max_rows.is_none() {
                plan.max_rows = file.defaults.max_rows.unwrap_or(super::DEFAULT_MAX_ROWS);
            }
            tools.push(plan);
        }
    }

    let mut tokens: Vec<TokenPlan> = Vec::new();
    for (i, token) in file.auth.tokens.iter().enumerate() {
        let field = format!("auth.tokens[{i}]");
        let var = &token.value.env;
        if let Some(set) = &token.value.toolset
            && !file.toolsets.contains_key(&set.value)
        {
            problems.at(
                format!("{field}.toolset"),
                set.referenced,
                format!("no toolset is named {:?}", set.value),
            );
        }
        // A bearer token is compared trimmed (auth.rs): it is checked, and kept, trimmed.
        match env(&var.value).map(|value| value.trim().to_owned()) {
            Some(value) if value.chars().count() >= 16 => {
                if let Some(other) = tokens.iter().find(|t| t.token == value) {
                    problems.at(
                        format!("{field}.env"),
                        var.referenced,
                        format!("{} holds the same token as {}", var.value, other.env),
                    );
                }
                tokens.push(TokenPlan {
                    token: value,
                    env: var.value.clone(),
                    roles: token.value.roles.clone(),
                    toolset: token.value.toolset.as_ref().map(|s| s.value.clone()),
                });
            }
            Some(_) => problems.at(
                format!("{field}.env"),
                var.referenced,
                format!(
                    "the token in {} is shorter than 16 characters (spaces around it do not count)",
                    var.value
                ),
            ),
            None => problems.at(
                format!("{field}.env"),
                var.referenced,
                format!("the environment variable {} is not set", var.value),
            ),
        }
    }

    if problems.0.is_empty() {
        Ok(Config {
            sources,
            default_retry,
            toolsets,
            tools,
            tokens,
        })
    } else {
        Err(problems.0)
    }
}

const NAME_RULE: &str = "a name is 1 to 64 of A-Z, a-z, 0-9, _ and -";

/// A tool or toolset name that every MCP client accepts.
fn is_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A parameter or capture name: it is written in SQL as `:name`.
fn is_identifier(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_source(
    name: &str,
    source: &Spanned<super::file::SourceDecl>,
    field: &str,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Problems,
) -> Option<Source> {
    let url_field = format!("{field}.url");
    let at = source.value.url.referenced;
    let url = match expand(&source.value.url.value, env) {
        Ok(url) => url,
        Err(why) => {
            problems.at(url_field, at, why);
            return None;
        }
    };
    let engine = match engine_of(&url) {
        Ok(engine) => engine,
        Err(why) => {
            problems.at(url_field, at, why);
            return None;
        }
    };
    // At least 1: refused otherwise when the file is read.
    let max_connections = source.value.max_connections.unwrap_or(8);
    Some(Source {
        name: name.to_owned(),
        shown: redact(&url),
        url,
        engine,
        max_connections,
        field: Located {
            field: format!("{field}.url"),
            at,
        },
    })
}

/// The engine a source URL names, or why it names none (without quoting the URL).
fn engine_of(url: &str) -> Result<Engine, String> {
    use txretry_sqlx::database_url::{self, Engine as Named};
    match database_url::engine(url) {
        Ok(Named::Postgres) => Ok(Engine::Postgres),
        Ok(Named::MySql) => Ok(Engine::MySql),
        Ok(Named::Sqlite) => Ok(Engine::Sqlite),
        Err(why) => Err(why.to_string()),
    }
}

/// `config` over `base`, or `None` with the problem noted.
fn policy(
    config: &Spanned<PolicyConfig>,
    base: &RetryPolicy,
    field: &str,
    problems: &mut Problems,
) -> Option<RetryPolicy> {
    match config.value.build_on(base, field) {
        Ok(policy) => Some(policy),
        Err(error) => {
            problems.at(error.field(), config.referenced, error.message());
            None
        }
    }
}
