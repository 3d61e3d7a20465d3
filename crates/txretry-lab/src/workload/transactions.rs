//! The transaction each worker runs, one per workload.

use sqlx::{ColumnIndex, Decode, Encode, Executor, IntoArguments, Row, Transaction, Type};

use super::{Schema, Transfer};
use crate::backend::LabDb;
use crate::error::TxError;

/// The workloads' transactions, generic over the database.
impl Schema {
    /// The transfer transaction: read, refuse or debit, credit, ledger row.
    pub async fn transfer<DB>(
        &self,
        tx: &mut Transaction<'_, DB>,
        t: &Transfer,
    ) -> Result<(), TxError>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
        usize: ColumnIndex<DB::Row>,
    {
        let s = &self.sql;
        let row = sqlx::query(s.select_balance.clone())
            .bind(t.from)
            .fetch_one(&mut **tx)
            .await?;
        let balance: i64 = row.try_get(0usize)?;
        let refused = TxError::InsufficientFunds {
            account: t.from,
            balance,
            amount: t.amount,
        };
        if balance < t.amount {
            return Err(refused);
        }
        let debited = sqlx::query(s.debit.clone())
            .bind(t.amount)
            .bind(t.from)
            .bind(t.amount)
            .execute(&mut **tx)
            .await?;
        if DB::rows_affected(&debited) == 0 {
            // A concurrent transfer spent the money since we looked (READ COMMITTED).
            return Err(refused);
        }
        sqlx::query(s.credit.clone())
            .bind(t.amount)
            .bind(t.to)
            .execute(&mut **tx)
            .await?;
        sqlx::query(s.insert_ledger.clone())
            .bind(t.id)
            .bind(t.from)
            .bind(t.to)
            .bind(t.amount)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The hot-rows transaction: read the row, add one to it.
    pub async fn bump<DB>(&self, tx: &mut Transaction<'_, DB>, row_id: i64) -> Result<(), TxError>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
        usize: ColumnIndex<DB::Row>,
    {
        let s = &self.sql;
        let row = sqlx::query(s.select_counter.clone())
            .bind(row_id)
            .fetch_one(&mut **tx)
            .await?;
        let _counter: i64 = row.try_get(0usize)?;
        sqlx::query(s.bump_counter.clone())
            .bind(row_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// The history transaction: ask the server its port, insert the call's row; returns
    /// the port (the node the commit lands on, if it commits).
    pub async fn record<DB>(
        &self,
        tx: &mut Transaction<'_, DB>,
        call_id: i64,
    ) -> Result<i64, TxError>
    where
        DB: LabDb,
        for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
        DB::Arguments: IntoArguments<DB>,
        i64: Type<DB> + for<'q> Encode<'q, DB> + for<'r> Decode<'r, DB>,
        usize: ColumnIndex<DB::Row>,
    {
        let s = &self.sql;
        let row = sqlx::query(s.server_port.clone())
            .fetch_one(&mut **tx)
            .await?;
        let port: i64 = row.try_get(0usize)?;
        sqlx::query(s.insert_history.clone())
            .bind(call_id)
            .bind(port)
            .execute(&mut **tx)
            .await?;
        Ok(port)
    }
}
