//! The lab's plain-text tables (the comparison of runs and the sweep's), laid out by
//! comfy-table: no borders, a row of dashes under the header, two spaces between columns,
//! names left-aligned and numbers right-aligned.

use comfy_table::{CellAlignment, ContentLineStyle, LineStyle, Table, TableStyle};

/// No borders; a dashed line under the header; a blank junction between columns (with one
/// space of padding on the right of each, that is two spaces).
const PLAIN: TableStyle = TableStyle::new()
    .header_lines(ContentLineStyle::none().junction(' '))
    .header_separator(LineStyle::none().fill('-').junction('-'))
    .content_lines(ContentLineStyle::none().junction(' '));

/// `header` over `rows`, one line each (trailing spaces trimmed, a newline after each); the
/// columns for which `left` is true are left-aligned, the others right-aligned.
pub fn render(header: &[&str], rows: Vec<Vec<String>>, left: impl Fn(usize) -> bool) -> String {
    let mut table = Table::new();
    table
        .load_style(PLAIN)
        .set_header(header.to_vec())
        .add_rows(rows);
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 1));
        column.set_cell_alignment(if left(i) {
            CellAlignment::Left
        } else {
            CellAlignment::Right
        });
    }
    let mut out = table.trim_fmt();
    out.push('\n');
    out
}
