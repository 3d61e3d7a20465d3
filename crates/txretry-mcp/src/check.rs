//! `txretry-mcp check`: the config's problems that need its databases. Every source is
//! opened, every statement prepared on its source (the database parses it and resolves its
//! tables and columns), and every `:capture.column` checked against the columns the
//! capturing statement returns.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{AssertSqlSafe, Column, Executor, SqlSafeStr};

use crate::config::{Config, ConfigError, ReturnsPlan, StatementPlan, ToolPlan};
use crate::engine::postgres;
use crate::source::Pool;
use crate::sql::Ref;

/// Opens every source; the pools, or the problems (one per source that does not answer).
pub async fn open(config: &Config) -> Result<HashMap<String, Arc<Pool>>, Vec<ConfigError>> {
    let mut pools = HashMap::new();
    let mut problems = Vec::new();
    for (name, source) in &config.sources {
        match Pool::open(source).await {
            Ok(pool) => {
                pools.insert(name.clone(), Arc::new(pool));
            }
            Err(error) => problems.push(
                source
                    .field
                    .error(format!("cannot connect to {}: {error}", source.shown)),
            ),
        }
    }
    if problems.is_empty() {
        Ok(pools)
    } else {
        for pool in pools.values() {
            pool.close().await;
        }
        Err(problems)
    }
}

/// Prepares every statement of every tool on its source; returns how many were prepared,
/// or the problems.
pub async fn prepare(
    config: &Config,
    pools: &HashMap<String, Arc<Pool>>,
) -> Result<usize, Vec<ConfigError>> {
    let mut problems = Vec::new();
    let mut prepared = 0;
    for tool in &config.tools {
        let pool = &pools[&tool.source];
        // Each capture's columns, as the database describes them.
        let mut columns: HashMap<&str, Vec<String>> = HashMap::new();
        let mut returns_rows = false;
        for statement in &tool.statements {
            for reference in statement.statement.refs() {
                if let Ref::Column(capture, column) = reference
                    && let Some(known) = columns.get(capture.as_str())
                    && !known.contains(column)
                {
                    problems.push(statement.sql.error(format!(
                        "{reference}: the statement capturing {capture:?} returns no column {column:?} (it returns {})",
                        known.join(", ")
                    )));
                }
            }
            match describe(pool, tool, statement).await {
                Ok(names) => {
                    prepared += 1;
                    returns_rows |= !names.is_empty();
                    if let Some(capture) = &statement.capture {
                        if names.is_empty() {
                            problems.push(statement.sql.error(format!(
                                "captures {capture:?} but returns no rows (add RETURNING, or capture a SELECT)"
                            )));
                        }
                        columns.insert(capture.as_str(), names);
                    }
                }
                Err(error) => problems.push(
                    statement
                        .sql
                        .error(format!("the database refused it: {error}")),
                ),
            }
        }
        if matches!(tool.returns, ReturnsPlan::Rows | ReturnsPlan::Row) && !returns_rows {
            problems.push(
                tool.returns_field
                    .error("no statement returns rows: say `returns: affected`, or a template"),
            );
        }
    }
    if problems.is_empty() {
        Ok(prepared)
    } else {
        Err(problems)
    }
}

/// Prepares a statement of `tool` on a connection of `pool` (on Postgres, with its
/// parameters' declared types, as calls prepare it); the names of the columns it returns.
async fn describe(
    pool: &Pool,
    tool: &ToolPlan,
    statement: &StatementPlan,
) -> Result<Vec<String>, sqlx::Error> {
    fn names<S: sqlx::Statement>(prepared: &S) -> Vec<String> {
        prepared
            .columns()
            .iter()
            .map(|c| c.name().to_owned())
            .collect()
    }
    let sql = || AssertSqlSafe(Arc::clone(&statement.prepared.sql)).into_sql_str();
    // Postgres: the SQL and parameter types a call prepares (a capture's type is its
    // value's, known only when a call runs).
    let typed = || {
        let kinds = statement.prepared.binds.iter().map(|bind| match bind {
            Ref::Param(name) => tool.params.get(name).map(|decl| decl.kind),
            Ref::Column(..) => None,
        });
        let (sql, types) = postgres::typed(&statement.prepared.sql, kinds);
        (AssertSqlSafe(sql).into_sql_str(), types)
    };
    Ok(match pool {
        Pool::Postgres(pool) => {
            let (sql, types) = typed();
            names(&pool.prepare_with(sql, &types).await?)
        }
        Pool::Primary(pool) => {
            let (sql, types) = typed();
            names(&pool.pool().prepare_with(sql, &types).await?)
        }
        Pool::MySql(pool) => names(&pool.prepare(sql()).await?),
        Pool::Sqlite(pool) => names(&pool.prepare(sql()).await?),
    })
}
