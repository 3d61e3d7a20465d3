//! `txretry-mcp check`: the config's problems that need its databases. Every source is
//! opened, every statement prepared on its source (the database parses it and resolves its
//! tables and columns), and every `:capture.column` checked against the columns the
//! capturing statement returns. On Postgres, whose columns are typed when prepared, a
//! statement is prepared with its captured values typed as calls bind them, and a column
//! no call could turn into JSON is refused.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{AssertSqlSafe, Column, Executor, SqlSafeStr, TypeInfo};

use crate::config::{Config, ConfigError, OncePlan, ReturnsPlan, StatementPlan, ToolPlan};
use crate::engine::postgres::{self, ColumnKind};
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
        // Each capture's columns, as the database describes them: name and type.
        let mut columns: Captured = HashMap::new();
        let mut returns_rows = false;
        for statement in &tool.statements {
            for reference in statement.statement.refs() {
                if let Ref::Column(capture, column) = reference
                    && let Some(known) = columns.get(capture.as_str())
                    && !known.iter().any(|(name, _)| name == column)
                {
                    let names: Vec<&str> = known.iter().map(|(name, _)| name.as_str()).collect();
                    problems.push(statement.sql.error(format!(
                        "{reference}: the statement capturing {capture:?} returns no column {column:?} (it returns {})",
                        names.join(", ")
                    )));
                }
            }
            match describe(pool, tool, statement, &columns).await {
                Ok(described) => {
                    prepared += 1;
                    returns_rows |= !described.is_empty();
                    if is_postgres(pool) {
                        for (name, type_name) in &described {
                            if matches!(postgres::column_kind(type_name), ColumnKind::Unreadable) {
                                let why = postgres::unreadable_column(name, type_name);
                                problems.push(statement.sql.error(why));
                            }
                        }
                    }
                    if let Some(capture) = &statement.capture {
                        if described.is_empty() {
                            problems.push(statement.sql.error(format!(
                                "captures {capture:?} but returns no rows (add RETURNING, or capture a SELECT)"
                            )));
                        }
                        columns.insert(capture.as_str(), described);
                    }
                }
                Err(error) => problems.push(statement.sql.error(format!(
                    "the database refused it: {}",
                    txretry_sqlx::describe::describe(&error)
                ))),
            }
        }
        if let Some(once) = &tool.once
            && let Err(problem) = records_table(pool, once).await
        {
            problems.push(problem);
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

/// The columns of each capture so far: name and type name, as the database describes them.
type Captured<'a> = HashMap<&'a str, Vec<(String, String)>>;

fn is_postgres(pool: &Pool) -> bool {
    matches!(pool, Pool::Postgres(_) | Pool::Primary(_))
}

/// Prepares a statement of `tool` on a connection of `pool` (on Postgres, with its
/// parameters' declared types and its captured values' types, as calls prepare it); the
/// columns it returns, each with its type's name.
async fn describe(
    pool: &Pool,
    tool: &ToolPlan,
    statement: &StatementPlan,
    captured: &Captured<'_>,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    fn names<S: sqlx::Statement>(prepared: &S) -> Vec<(String, String)> {
        prepared
            .columns()
            .iter()
            .map(|c| (c.name().to_owned(), c.type_info().name().to_owned()))
            .collect()
    }
    let sql = || AssertSqlSafe(Arc::clone(&statement.prepared.sql)).into_sql_str();
    // Postgres: the SQL and parameter types a call prepares. A captured value binds as
    // what its column reads as (an INT4 as an integer, a `::text` as a string), NULL
    // aside, which Postgres types itself.
    let typed = || {
        let kinds = statement.prepared.binds.iter().map(|bind| match bind {
            Ref::Param(name) => tool.params.get(name).map(|decl| decl.kind),
            Ref::Column(capture, column) => captured
                .get(capture.as_str())
                .and_then(|columns| columns.iter().find(|(name, _)| name == column))
                .and_then(|(_, type_name)| match postgres::column_kind(type_name) {
                    ColumnKind::Value(kind) => Some(kind),
                    ColumnKind::Null | ColumnKind::Unreadable => None,
                }),
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

/// The columns a `once` tool's records need (txretry-tool's DDL).
const RECORD_COLUMNS: [&str; 7] = [
    "tool",
    "call_key",
    "status",
    "output",
    "error_kind",
    "error_message",
    "created_at",
];

/// A `once` tool's records' table, when it exists already, has the records' columns: one
/// of the application's own, named by mistake, failed every call (as a business error)
/// with a missing column. A table that does not exist yet is created by the first call.
async fn records_table(pool: &Pool, once: &OncePlan) -> Result<(), ConfigError> {
    let default = txretry_tool::Once::new();
    let table = once.table.as_deref().unwrap_or(default.table_name());
    // The name is bound, never spliced into the SQL.
    let postgres = async |pool: &sqlx::PgPool| {
        sqlx::query_scalar(
            "SELECT attname::text FROM pg_attribute \
             WHERE attrelid = to_regclass(quote_ident($1)) AND attnum > 0 AND NOT attisdropped",
        )
        .bind(table)
        .fetch_all(pool)
        .await
    };
    let found: Result<Vec<String>, sqlx::Error> = match pool {
        Pool::Postgres(pool) => postgres(pool).await,
        Pool::Primary(pool) => postgres(&pool.pool()).await,
        Pool::MySql(pool) => {
            sqlx::query_scalar(
                "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
                 WHERE table_schema = DATABASE() AND table_name = ?",
            )
            .bind(table)
            .fetch_all(pool)
            .await
        }
        Pool::Sqlite(pool) => {
            sqlx::query_scalar("SELECT name FROM pragma_table_info(?)")
                .bind(table)
                .fetch_all(pool)
                .await
        }
    };
    let columns = found.map_err(|e| {
        once.field.error(format!(
            "could not read the columns of {table:?}: {}",
            txretry_sqlx::describe::describe(&e)
        ))
    })?;
    if columns.is_empty() {
        return Ok(());
    }
    let missing: Vec<&str> = RECORD_COLUMNS
        .into_iter()
        .filter(|need| !columns.iter().any(|c| c.eq_ignore_ascii_case(need)))
        .collect();
    if !missing.is_empty() {
        return Err(once.field.error(format!(
            "the table {table:?} exists but is not a table of call records (no column {}): name another with once.table",
            missing.join(", ")
        )));
    }
    // MySQL takes a claim in such a table without complaint (`ON DUPLICATE KEY` finds no
    // key: every call inserts a row of its own), and the records go wrong; Postgres and
    // SQLite refuse every claim, loudly.
    if let Pool::MySql(pool) = pool {
        let unique: Vec<String> = sqlx::query_scalar(
            "SELECT CAST(GROUP_CONCAT(LOWER(column_name) ORDER BY seq_in_index) AS CHAR) \
             FROM information_schema.statistics \
             WHERE table_schema = DATABASE() AND table_name = ? AND non_unique = 0 \
             GROUP BY index_name",
        )
        .bind(table)
        .fetch_all(pool)
        .await
        .map_err(|e| {
            once.field.error(format!(
                "could not read the keys of {table:?}: {}",
                txretry_sqlx::describe::describe(&e)
            ))
        })?;
        if !unique.iter().any(|columns| columns == "tool,call_key") {
            return Err(once.field.error(format!(
                "the table {table:?} has no primary key on (tool, call_key), which the records need: calls with one key would each insert a record and run again; create it from the records' DDL, or name another with once.table"
            )));
        }
    }
    Ok(())
}
