-- The tables of orders.yaml, on SQLite, Postgres or MySQL/MariaDB.
CREATE TABLE accounts (id BIGINT PRIMARY KEY, cents BIGINT NOT NULL);
CREATE TABLE orders (
    id BIGINT PRIMARY KEY,
    account BIGINT NOT NULL,
    status VARCHAR(16) NOT NULL,
    cents BIGINT NOT NULL
);
-- One row per transfer: its primary key would refuse a doubled one.
CREATE TABLE ledger (
    request_id VARCHAR(64) PRIMARY KEY,
    from_account BIGINT NOT NULL,
    to_account BIGINT NOT NULL,
    cents BIGINT NOT NULL
);
INSERT INTO accounts (id, cents) VALUES (1, 10000), (2, 10000), (3, 10000);
INSERT INTO orders (id, account, status, cents) VALUES (7, 1, 'open', 2500), (8, 2, 'open', 400), (9, 3, 'shipped', 900);
