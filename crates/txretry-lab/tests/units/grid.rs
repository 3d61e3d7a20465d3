//! `src/grid.rs`.

#[test]
fn plain_columns() {
    let text = txretry_lab::grid::render(
        &["name", "n"],
        vec![
            vec!["a".into(), "1000".into()],
            vec!["longer".into(), "2".into()],
        ],
        |i| i == 0,
    );
    // The dashes run on under the last column's padding.
    assert_eq!(
        text,
        "name       n\n-------------\na       1000\nlonger     2\n"
    );
}
