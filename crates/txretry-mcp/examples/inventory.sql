-- The tables of inventory.yaml, on SQLite, Postgres or MySQL/MariaDB.
CREATE TABLE stock (sku VARCHAR(32) PRIMARY KEY, available BIGINT NOT NULL);
CREATE TABLE reservations (
    order_ref VARCHAR(64) NOT NULL,
    sku VARCHAR(32) NOT NULL,
    qty BIGINT NOT NULL,
    PRIMARY KEY (order_ref, sku)
);
INSERT INTO stock (sku, available) VALUES ('bolt', 100), ('nut', 50), ('gear', 3);
