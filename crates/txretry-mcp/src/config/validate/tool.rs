//! One tool's checks: its source and description, its parameters, each statement's
//! placeholders and capture and expectation, what it returns, `once`, its policy and
//! timeout.

use std::collections::HashSet;

use indexmap::IndexMap;
use serde_saphyr::Spanned;
use txretry_core::{Isolation, RetryPolicy};
use txretry_tool::Once;

use super::{NAME_RULE, Problems, is_identifier, is_name, policy};
use crate::config::file::{IsolationDecl, Returns, SourceDecl, ToolDecl};
use crate::config::{
    Engine, ExpectPlan, Located, OncePlan, ReturnsPlan, Source, StatementPlan, ToolPlan,
};
use crate::sql::{Dialect, Ref, Statement, Style};
use crate::template::Template;

/// `declared`: the file's sources; `sources`: those among them that loaded (a tool on one
/// that did not is not refused for it: the source's own problem says why, as does the
/// lack of any source).
pub(super) fn check_tool(
    name: &str,
    decl: &Spanned<ToolDecl>,
    field: &str,
    declared: &IndexMap<String, Spanned<SourceDecl>>,
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
    if !declared.contains_key(&tool.source.value) && !declared.is_empty() {
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
        let engine = sources.get(&tool.source.value).map(|source| source.engine);
        let dialect = match engine {
            Some(Engine::Postgres) => Dialect::Postgres,
            Some(Engine::MySql) => Dialect::MySql,
            Some(Engine::Sqlite) | None => Dialect::Sqlite,
        };
        let statement = match Statement::parse(&decl.value.sql.value, dialect) {
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
        let style = engine.map_or(Style::Question, Engine::style);
        statements.push(StatementPlan {
            prepared: statement.prepare(style),
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
        // A call that leaves every key parameter out has the key of every other such call:
        // the first one's record would answer them all, and their writes would never run.
        let always_given = |name: &String| {
            params
                .get(name)
                .is_some_and(|decl| decl.is_required() && decl.default.is_none())
        };
        if key.len() == once.value.key.len() && !key.is_empty() && !key.iter().any(always_given)
        {
            problems.at(
                format!("{ofield}.key"),
                once.referenced,
                "every parameter of the key can be left out, and calls that leave them out would share one record (only the first would run): put a required parameter without a default in the key",
            );
        }
        if let Some(table) = &once.value.table
            && let Err(why) = Once::new().table(&table.value)
        {
            problems.at(format!("{ofield}.table"), table.referenced, why.to_string());
        }
        OncePlan {
            key,
            table: once.value.table.as_ref().map(|t| t.value.clone()),
            field: match &once.value.table {
                Some(table) => Located {
                    field: format!("{ofield}.table"),
                    at: table.referenced,
                },
                None => Located {
                    field: ofield.clone(),
                    at: once.referenced,
                },
            },
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
        // The tool's own; one it does not set comes from `defaults` (see `validate`).
        max_rows: tool.max_rows.unwrap_or(super::super::DEFAULT_MAX_ROWS),
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
    params: &IndexMap<String, crate::config::ParamDecl>,
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
