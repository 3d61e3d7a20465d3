//! The config every case starts from, and the mistakes made in it: one each.

/// A valid config over orders.sql's tables; each case below changes one thing in it.
pub const BASE: &str = r#"sources:
  shop:
    url: ${CFG_DB_URL}
toolsets:
  viewer:
    tools: [get_order]
tools:
  get_order:
    source: shop
    description: Look an order up.
    read_only: true
    parameters:
      order_id: { type: integer, min: 1 }
    statements:
      - sql: SELECT id, account, status, cents FROM orders WHERE id = :order_id
    returns: row
  cancel_order:
    source: shop
    description: Cancel an open order and refund it.
    parameters:
      order_id: { type: integer, min: 1 }
    statements:
      - sql: UPDATE orders SET status = 'cancelled' WHERE id = :order_id AND status = 'open'
        expect: { rows: 1, error: "order {order_id} not open" }
      - sql: SELECT account, cents FROM orders WHERE id = :order_id
        capture: order
      - sql: UPDATE accounts SET cents = cents + :order.cents WHERE id = :order.account
    once: { key: [order_id] }
auth:
  tokens:
    - env: CFG_TOKEN
      roles: [support]
"#;

pub const TOKEN: &str = "cfg-token-0123456789abcdef";

/// One mistake: `from` replaced by `to` in [`BASE`]; the problem must be reported on the
/// first line containing `marker`, in `field`, with `message` in its text.
pub struct Case {
    pub name: &'static str,
    pub from: &'static str,
    pub to: &'static str,
    pub field: &'static str,
    pub marker: &'static str,
    pub message: &'static str,
}

/// Problems `check` finds without a database.
pub const STATIC_CASES: &[Case] = &[
    Case {
        name: "unknown key",
        from: "    read_only: true\n",
        to: "    read_only: true\n    readonly: true\n",
        field: "tools.get_order",
        marker: "    readonly: true",
        message: "readonly",
    },
    Case {
        name: "undeclared placeholder",
        from: "FROM orders WHERE id = :order_id\n",
        to: "FROM orders WHERE id = :order_id AND status = :state\n",
        field: "tools.get_order.statements[0].sql",
        marker: "AND status = :state",
        message: ":state is not a declared parameter",
    },
    Case {
        name: "declared but unused parameter",
        from: "      order_id: { type: integer, min: 1 }\n    statements:\n      - sql: SELECT",
        to: "      order_id: { type: integer, min: 1 }\n      note: { type: string }\n    statements:\n      - sql: SELECT",
        field: "tools.get_order.parameters.note",
        marker: "note: { type: string }",
        message: "never used",
    },
    Case {
        name: "capture used before it is made",
        from: "WHERE id = :order_id AND status = 'open'",
        to: "WHERE id = :order_id AND cents = :order.cents AND status = 'open'",
        field: "tools.cancel_order.statements[0].sql",
        marker: "AND cents = :order.cents",
        message: "no earlier statement captures \"order\"",
    },
    Case {
        name: "missing env var in a URL",
        from: "url: ${CFG_DB_URL}",
        to: "url: ${CFG_NO_SUCH_VAR}",
        field: "sources.shop.url",
        marker: "CFG_NO_SUCH_VAR",
        message: "the environment variable CFG_NO_SUCH_VAR is not set",
    },
    Case {
        name: "unknown source",
        from: "    source: shop\n    description: Cancel",
        to: "    source: shopp\n    description: Cancel",
        field: "tools.cancel_order.source",
        marker: "source: shopp",
        message: "no source is named \"shopp\"",
    },
    Case {
        name: "unknown toolset tool",
        from: "tools: [get_order]",
        to: "tools: [get_order, get_orders]",
        field: "toolsets.viewer.tools[1]",
        marker: "get_orders",
        message: "no tool is named \"get_orders\"",
    },
    Case {
        name: "bad retry policy",
        from: "    once: { key: [order_id] }\n",
        to: "    once: { key: [order_id] }\n    retry: { max_attempts: 0 }\n",
        field: "tools.cancel_order.retry.max_attempts",
        marker: "max_attempts: 0",
        message: "must be at least 1",
    },
    Case {
        name: "bad token env",
        from: "    - env: CFG_TOKEN\n",
        to: "    - env: CFG_SHORT_TOKEN\n",
        field: "auth.tokens[0].env",
        marker: "CFG_SHORT_TOKEN",
        message: "the token in CFG_SHORT_TOKEN is shorter than 16 characters",
    },
    Case {
        name: "unset token env",
        from: "    - env: CFG_TOKEN\n",
        to: "    - env: CFG_UNSET_TOKEN\n",
        field: "auth.tokens[0].env",
        marker: "CFG_UNSET_TOKEN",
        message: "the environment variable CFG_UNSET_TOKEN is not set",
    },
    Case {
        name: "once key naming no parameter",
        from: "once: { key: [order_id] }",
        to: "once: { key: [order] }",
        field: "tools.cancel_order.once.key[0]",
        marker: "once: { key: [order] }",
        message: "no parameter is named \"order\"",
    },
    Case {
        name: "once key of optional parameters only",
        from: "      order_id: { type: integer, min: 1 }\n    statements:\n      - sql: UPDATE",
        to: "      order_id: { type: integer, min: 1, required: false }\n    statements:\n      - sql: UPDATE",
        field: "tools.cancel_order.once.key",
        marker: "once: { key: [order_id] }",
        message: "every parameter of the key can be left out",
    },
    Case {
        name: "read_only and once",
        from: "    once: { key: [order_id] }\n",
        to: "    read_only: true\n    once: { key: [order_id] }\n",
        field: "tools.cancel_order.once",
        marker: "once: { key: [order_id] }",
        message: "a read-only tool has nothing to record",
    },
    Case {
        name: "pool size that is not a number",
        from: "    url: ${CFG_DB_URL}\n",
        to: "    url: ${CFG_DB_URL}\n    max_connections: lots\n",
        field: "sources.shop.max_connections",
        marker: "max_connections: lots",
        message: "expected a whole number from 1 to 4294967295",
    },
    Case {
        name: "roles not a list",
        from: "    read_only: true\n",
        to: "    read_only: true\n    roles: support\n",
        field: "tools.get_order.roles",
        marker: "roles: support",
        message: "expected a list, e.g. [support]",
    },
    Case {
        name: "parameter type not one of the types",
        from: "      order_id: { type: integer, min: 1 }\n    statements:\n      - sql: SELECT",
        to: "      order_id: { type: int, min: 1 }\n    statements:\n      - sql: SELECT",
        field: "tools.get_order.parameters.order_id.type",
        marker: "type: int,",
        message: "unknown value `int`: expected one of string, integer, number, boolean",
    },
    Case {
        name: "enum value outside the limits",
        from: "      order_id: { type: integer, min: 1 }\n    statements:\n      - sql: SELECT",
        to: "      order_id: { type: integer, min: 1, enum: [0, 5] }\n    statements:\n      - sql: SELECT",
        field: "tools.get_order.parameters.order_id",
        marker: "enum: [0, 5]",
        message: "enum value 0: must be at least 1",
    },
    Case {
        name: "template brace never closed, after non-ASCII text",
        from: "error: \"order {order_id} not open\"",
        to: "error: \"ordér {order_id not open\"",
        field: "tools.cancel_order.statements[0].expect.error",
        marker: "ordér {order_id",
        message: "never closed at character 7 (counting from 1;",
    },
    Case {
        name: "toolset listing a tool twice",
        from: "tools: [get_order]",
        to: "tools: [get_order, get_order]\n    retry: { max_attempts: 3 }",
        field: "toolsets.viewer.tools",
        marker: "tools: [get_order, get_order]",
        message: "lists \"get_order\" twice",
    },
    Case {
        name: "YAML 1.1 boolean",
        from: "    read_only: true\n",
        to: "    read_only: yes\n",
        field: "tools.get_order.read_only",
        marker: "    read_only: yes",
        message: "true or false expected",
    },
    Case {
        name: "several statements in one sql",
        from: "FROM orders WHERE id = :order_id\n",
        to: "FROM orders WHERE id = :order_id; DELETE FROM orders\n",
        field: "tools.get_order.statements[0].sql",
        marker: "DELETE FROM orders",
        message: "ends the statement and another follows",
    },
    Case {
        name: "max_rows of zero",
        from: "    read_only: true\n",
        to: "    read_only: true\n    max_rows: 0\n",
        field: "tools.get_order.max_rows",
        marker: "    max_rows: 0",
        message: "expected a whole number from 1",
    },
];

/// Problems only the database finds.
pub const DATABASE_CASES: &[Case] = &[
    Case {
        name: "once table naming a table of the application's",
        from: "once: { key: [order_id] }",
        to: "once: { key: [order_id], table: accounts }",
        field: "tools.cancel_order.once.table",
        marker: "once: { key: [order_id], table: accounts }",
        message: "the table \"accounts\" exists but is not a table of call records (no column tool, call_key, status, output, error_kind, error_message, created_at)",
    },
    Case {
        name: "capture column the capturing statement does not return",
        from: "WHERE id = :order.account",
        to: "WHERE id = :order.acount",
        field: "tools.cancel_order.statements[2].sql",
        marker: "WHERE id = :order.acount",
        message: "returns no column \"acount\"",
    },
    Case {
        name: "SQL typo",
        from: "- sql: SELECT id, account, status, cents FROM orders",
        to: "- sql: SELEC id, account, status, cents FROM orders",
        field: "tools.get_order.statements[0].sql",
        marker: "SELEC id",
        message: "the database refused it",
    },
    Case {
        name: "unknown table",
        from: "UPDATE accounts SET",
        to: "UPDATE acounts SET",
        field: "tools.cancel_order.statements[2].sql",
        marker: "UPDATE acounts SET",
        message: "the database refused it",
    },
    Case {
        name: "returns a row, but no statement returns rows",
        from: "- sql: SELECT id, account, status, cents FROM orders WHERE id = :order_id",
        to: "- sql: UPDATE orders SET cents = cents WHERE id = :order_id",
        field: "tools.get_order.returns",
        marker: "returns: row",
        message: "no statement returns rows",
    },
];
