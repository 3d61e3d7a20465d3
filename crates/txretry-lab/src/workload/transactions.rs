//! The transaction each worker runs, one per workload: chosen as a [`Job`] before it
//! starts, then attempted (a retry attempts the same job).

use sqlx::Transaction;

use super::{MAX_AMOUNT, Schema, Transfer};
use crate::backend::LabDb;
use crate::cli::Workload;
use crate::error::TxError;

/// One transaction, chosen by a worker before it starts.
#[derive(Clone, Copy, Debug)]
pub enum Job {
    /// Move money (transfer).
    Transfer(Transfer),
    /// Add one to this row (hot-rows).
    Bump(i64),
    /// Insert this call id (history).
    Record(i64),
}

impl Job {
    /// What the invariant check counts the job by: the transfer id (the ledger's key), the
    /// row or the call id.
    pub fn key(&self) -> i64 {
        match *self {
            Job::Transfer(t) => t.id,
            Job::Bump(row) => row,
            Job::Record(call_id) => call_id,
        }
    }

    /// The rows the job contends on (for admission): both accounts, the row, or none
    /// (history rows are the job's own).
    pub fn contends_on(&self) -> Vec<i64> {
        match *self {
            Job::Transfer(t) => vec![t.from, t.to],
            Job::Bump(row) => vec![row],
            Job::Record(_) => Vec::new(),
        }
    }
}

impl Schema {
    /// The next job of `worker`, whose `seq`-th it is: random accounts and amount, a random
    /// row, or the next call id. Transfer and call ids are unique per worker and sequence.
    pub fn next_job(&self, rng: &mut fastrand::Rng, worker: u32, seq: u32) -> Job {
        let rows = i64::from(self.rows());
        let id = (i64::from(worker) << 32) | i64::from(seq);
        match self.workload() {
            Workload::Transfer => {
                let from = rng.i64(1..=rows);
                let mut to = rng.i64(1..rows);
                if to >= from {
                    to += 1;
                }
                Job::Transfer(Transfer {
                    id,
                    from,
                    to,
                    amount: rng.i64(1..=MAX_AMOUNT),
                })
            }
            Workload::HotRows => Job::Bump(rng.i64(1..=rows)),
            Workload::History => Job::Record(id),
        }
    }

    /// One attempt of `job`; for a history call, the port of the server it ran on (the
    /// node the commit lands on, if it commits).
    pub async fn attempt<DB: LabDb>(
        &self,
        tx: &mut Transaction<'_, DB>,
        job: &Job,
    ) -> Result<Option<i64>, TxError> {
        match *job {
            Job::Transfer(t) => self.transfer(tx, &t).await.map(|()| None),
            Job::Bump(row) => self.bump(tx, row).await.map(|()| None),
            Job::Record(call_id) => self.record(tx, call_id).await.map(Some),
        }
    }
    /// The transfer transaction: read, refuse or debit, credit, ledger row.
    async fn transfer<DB: LabDb>(
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
    async fn bump<DB: LabDb>(
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
    async fn record<DB: LabDb>(
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
