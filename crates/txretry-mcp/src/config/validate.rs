//! Every check a config gets before anything is served, short of a database: names that
//! exist, placeholders that are declared (and declarations that are used), captures made
//! before they are read, policies that build, tokens that are set.

use std::collections::{HashMap, HashSet};

use indexmap::IndexMap;
use serde_saphyr::{Location, Spanned};
use txretry_core::{Isolation, RetryPolicy};
use txretry_tool::{Once, PolicyConfig};

use super::env::{expand, redact};
use super::file::{File, IsolationDecl, Returns, ToolDecl};
use super::{
    Config, ConfigError, Engine, ExpectPlan, Located, OncePlan, ReturnsPlan, Source, StatementPlan,
    TokenPlan, ToolPlan,
};
use crate::sql::{Ref, Statement};
use crate::template::Template;

/// The problems found so far.
#[derive(Default)]
struct Problems(Vec<ConfigError>);

impl Problems {
    fn at(&mut self, field: impl Into<String>, at: Location, message: impl Into<String>) {
        self.0.push(ConfigError::at(field, at, message));
    }
}

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
        let mut names = Vec::new();
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
        let plan = check_tool(name, decl, &field, &sources, under, &mut problems);
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
        match env(&var.value) {
            Some(value) if value.trim().len() >= 16 => {
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
                format!("the token in {} is shorter than 16 characters", var.value),
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
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    let engine = match scheme {
        "postgres" | "postgresql" => Engine::Postgres,
        "mysql" | "mariadb" => Engine::MySql,
        "sqlite" => Engine::Sqlite,
        _ => {
            problems.at(
                url_field,
                at,
                format!(
                    "{:?} is not a sqlite://, postgres:// or mysql:// URL",
                    redact(&url)
                ),
            );
            return None;
        }
    };
    let max_connections = source.value.max_connections.unwrap_or(8);
    if max_connections == 0 {
        problems.at(
            format!("{field}.max_connections"),
            source.referenced,
            "must be at least 1",
        );
    }
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

fn check_tool(
    name: &str,
    decl: &Spanned<ToolDecl>,
    field: &str,
    sources: &IndexMap<String, Source>,
    base: &RetryPolicy,
    problems: &mut Problems,
) -> Option<ToolPlan> {
    let before = problems.0.len();
    let tool = &decl.value;
    let here = decl.referenced;
    if !is_name(name) {
        problems.at(field, here, NAME_RULE);
    }
    if !sources.contains_key(&tool.source.value) && !sources.is_empty() {
        problems.at(
            format!("{field}.source"),
            tool.source.referenced,
            format!("no source is named {:?}", tool.source.value),
        );
    }
    if tool.description.trim().is_empty() {
        problems.at(format!("{field}.description"), here, "is empty");
    }

    let mut params = IndexMap::new();
    for (param, decl) in &tool.parameters {
        let pfield = format!("{field}.parameters.{param}");
        if !is_identifier(param) {
            problems.at(
                &pfield,
                decl.referenced,
                "a parameter name is a letter or _, then letters, digits or _",
            );
        }
        if let Err(why) = decl.value.check() {
            problems.at(&pfield, decl.referenced, why);
        }
        params.insert(param.clone(), decl.value.clone());
    }
    let mut used: HashSet<String> = HashSet::new();

    if tool.statements.is_empty() {
        problems.at(format!("{field}.statements"), here, "lists no statement");
    }
    // Captures made by the statements so far.
    let mut captures: Vec<String> = Vec::new();
    let mut statements = Vec::new();
    for (i, decl) in tool.statements.iter().enumerate() {
        let sfield = format!("{field}.statements[{i}]");
        let sql_at = decl.value.sql.referenced;
        let statement = match Statement::parse(&decl.value.sql.value) {
            Ok(statement) => statement,
            Err(why) => {
                problems.at(format!("{sfield}.sql"), sql_at, why.to_string());
                continue;
            }
        };
        for reference in statement.refs() {
            if let Err(why) = resolve(reference, &params, &captures, &mut used) {
                problems.at(format!("{sfield}.sql"), sql_at, why);
            }
        }
        let expect = decl.value.expect.as_ref().and_then(|expect| {
            let efield = format!("{sfield}.expect");
            let e = &expect.value;
            let (min, max) = match (e.rows, e.min_rows, e.max_rows) {
                (Some(n), None, None) => (n, n),
                (None, None, None) => {
                    problems.at(
                        &efield,
                        expect.referenced,
                        "says none of rows, min_rows, max_rows",
                    );
                    return None;
                }
                (None, min, max) => (min.unwrap_or(0), max.unwrap_or(u64::MAX)),
                (Some(_), _, _) => {
                    problems.at(
                        &efield,
                        expect.referenced,
                        "rows goes alone (or use min_rows / max_rows)",
                    );
                    return None;
                }
            };
            if min > max {
                problems.at(
                    &efield,
                    expect.referenced,
                    format!("min_rows ({min}) is above max_rows ({max})"),
                );
            }
            let template = template(&e.error, &format!("{efield}.error"), problems)?;
            for reference in template.refs() {
                if let Err(why) = resolve(reference, &params, &captures, &mut used) {
                    problems.at(
                        format!("{efield}.error"),
                        e.error.referenced,
                        in_template(reference, &why),
                    );
                }
            }
            Some(ExpectPlan {
                min,
                max,
                error: template,
            })
        });
        let capture = decl.value.capture.as_ref().map(|capture| {
            let cfield = format!("{sfield}.capture");
            if !is_identifier(&capture.value) {
                problems.at(
                    &cfield,
                    capture.referenced,
                    "a capture name is a letter or _, then letters, digits or _",
                );
            } else if params.contains_key(&capture.value) || captures.contains(&capture.value) {
                problems.at(
                    &cfield,
                    capture.referenced,
                    format!("{:?} is already a parameter or capture", capture.value),
                );
            }
            capture.value.clone()
        });
        if let Some(capture) = &capture {
            captures.push(capture.clone());
        }
        statements.push(StatementPlan {
            statement,
            capture,
            expect,
            sql: Located {
                field: format!("{sfield}.sql"),
                at: sql_at,
            },
        });
    }

    let returns = match tool.returns.as_ref().map(|r| (&r.value, r.referenced)) {
        None => ReturnsPlan::Default,
        Some((Returns::Rows, _)) => ReturnsPlan::Rows,
        Some((Returns::Row, _)) => ReturnsPlan::Row,
        Some((Returns::Affected, _)) => ReturnsPlan::Affected,
        Some((Returns::Template(text), _)) => {
            let rfield = format!("{field}.returns.template");
            match template(text, &rfield, problems) {
                Some(template) => {
                    for reference in template.refs() {
                        if let Err(why) = resolve(reference, &params, &captures, &mut used) {
                            problems.at(&rfield, text.referenced, in_template(reference, &why));
                        }
                    }
                    ReturnsPlan::Template(template)
                }
                None => ReturnsPlan::Rows,
            }
        }
    };

    let once = tool.once.as_ref().map(|once| {
        let ofield = format!("{field}.once");
        if tool.read_only {
            problems.at(
                &ofield,
                once.referenced,
                "a read-only tool has nothing to record: drop once or read_only",
            );
        }
        if once.value.key.is_empty() {
            problems.at(
                format!("{ofield}.key"),
                once.referenced,
                "names no parameter",
            );
        }
        let mut key = Vec::new();
        for (i, part) in once.value.key.iter().enumerate() {
            if params.contains_key(&part.value) {
                used.insert(part.value.clone());
                key.push(part.value.clone());
            } else {
                problems.at(
                    format!("{ofield}.key[{i}]"),
                    part.referenced,
                    format!("no parameter is named {:?}", part.value),
                );
            }
        }
        if let Some(table) = &once.value.table
            && let Err(why) = Once::new().table(&table.value)
        {
            problems.at(format!("{ofield}.table"), table.referenced, why.to_string());
        }
        OncePlan {
            key,
            table: once.value.table.as_ref().map(|t| t.value.clone()),
        }
    });

    for (param, decl) in &tool.parameters {
        if !used.contains(param) {
            problems.at(
                format!("{field}.parameters.{param}"),
                decl.referenced,
                "is declared but never used (in a statement, a template or the once key)",
            );
        }
    }

    let retry = tool
        .retry
        .as_ref()
        .and_then(|retry| policy(retry, base, &format!("{field}.retry"), problems));
    if let Some(timeout) = &tool.timeout
        && timeout.value.is_zero()
    {
        problems.at(
            format!("{field}.timeout"),
            timeout.referenced,
            "must be longer than zero",
        );
    }
    let isolation = tool.isolation.as_ref().map(|level| match level.value {
        IsolationDecl::ReadUncommitted => Isolation::ReadUncommitted,
        IsolationDecl::ReadCommitted => Isolation::ReadCommitted,
        IsolationDecl::RepeatableRead => Isolation::RepeatableRead,
        IsolationDecl::Serializable => Isolation::Serializable,
    });

    (problems.0.len() == before).then(|| ToolPlan {
        name: name.to_owned(),
        description: tool.description.clone(),
        source: tool.source.value.clone(),
        params,
        statements,
        returns,
        returns_field: Located {
            field: format!("{field}.returns"),
            at: tool.returns.as_ref().map_or(here, |r| r.referenced),
        },
        isolation,
        read_only: tool.read_only,
        once,
        idempotent: tool.idempotent,
        timeout: tool.timeout.as_ref().map(|t| t.value),
        retry,
        roles: tool.roles.clone(),
    })
}

fn template(text: &Spanned<String>, field: &str, problems: &mut Problems) -> Option<Template> {
    match Template::parse(&text.value) {
        Ok(template) => Some(template),
        Err(why) => {
            problems.at(field, text.referenced, why);
            None
        }
    }
}

/// Whether `reference` names a declared parameter or a column of an earlier capture; marks
/// the parameter used.
fn resolve(
    reference: &Ref,
    params: &IndexMap<String, super::ParamDecl>,
    captures: &[String],
    used: &mut HashSet<String>,
) -> Result<(), String> {
    match reference {
        Ref::Param(name) if params.contains_key(name) => {
            used.insert(name.clone());
            Ok(())
        }
        Ref::Param(name) if captures.contains(name) => Err(format!(
            "{reference} is a capture, a row: name one of its columns ({reference}.column)"
        )),
        Ref::Param(_) => Err(format!("{reference} is not a declared parameter")),
        Ref::Column(capture, _) if captures.contains(capture) => Ok(()),
        Ref::Column(capture, _) => Err(format!(
            "{reference}: no earlier statement captures {capture:?}"
        )),
    }
}

/// A placeholder's problem as a template writes the field: `{name}`, not `:name`.
fn in_template(reference: &Ref, why: &str) -> String {
    let written = match reference {
        Ref::Param(name) => format!("{{{name}}}"),
        Ref::Column(capture, column) => format!("{{{capture}.{column}}}"),
    };
    why.replace(&reference.to_string(), &written)
}
