//! The transaction each worker runs, one per workload.

use sqlx::Transaction;

use super::{Schema, Transfer};
use crate::backend::LabDb;
use crate::error::TxError;

/// The workloads' transactions, generic over the database.
impl Schema {
    /// The transfer transaction: read, refuse or debit, credit, ledger row.
    pub async fn transfer<DB: LabDb>(
        &self,
        tx: &mut Transaction<'_, DB>,
        t: &Transfer,
    ) -> Result<(), TxError> {
        let s = &self.sql;
        let [balance] = DB::fetch_one(tx, s.select_balance.clone(), &[t.from]).await?;
        let refused = TxError::InsufficientFunds {
            account: t.from,
            balance,
            amount: t.amount,
        };
        if balance < t.amount {
            return Err(refused);
        }
        let debited = DB::execute(tx, s.debit.clone(), &[t.amount, t.from, t.amount]).await?;
        if debited == 0 {
            // A concurrent transfer spent the money since we looked (READ COMMITTED).
            return Err(refused);
        }
        DB::execute(tx, s.credit.clone(), &[t.amount, t.to]).await?;
        let ledger_row = [t.id, t.from, t.to, t.amount];
        DB::execute(tx, s.insert_ledger.clone(), &ledger_row).await?;
        Ok(())
    }

    /// The hot-rows transaction: read the row, add one to it.
    pub async fn bump<DB: LabDb>(
        &self,
        tx: &mut Transaction<'_, DB>,
        row_id: i64,
    ) -> Result<(), TxError> {
        let s = &self.sql;
        let [_counter] = DB::fetch_one(tx, s.select_counter.clone(), &[row_id]).await?;
        DB::execute(tx, s.bump_counter.clone(), &[row_id]).await?;
        Ok(())
    }

    /// The history transaction: ask the server its port, insert the call's row; returns
    /// the port (the node the commit lands on, if it commits).
    pub async fn record<DB: LabDb>(
        &self,
        tx: &mut Transaction<'_, DB>,
        call_id: i64,
    ) -> Result<i64, TxError> {
        let s = &self.sql;
        let [port] = DB::fetch_one(tx, s.server_port.clone(), &[]).await?;
        DB::execute(tx, s.insert_history.clone(), &[call_id, port]).await?;
        Ok(port)
    }
}
