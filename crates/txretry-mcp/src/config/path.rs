//! The path of the field at a place of a YAML file (`tools.t2.roles`), read from the
//! indentation and from the line itself: what a YAML error names when the parser gives only
//! a line and a column.

/// The path of the field at line `line`, column `column` (both 1-based, the column in
/// characters) of `text`: the keys enclosing the line, the line's own item number when it
/// is a sequence item, then the keys on the line whose value holds the column
/// (`max_connections` in `max_connections: lots`, `order_id.type` in
/// `order_id: { type: int }`). A place on a key names the mapping the key is in (an unknown
/// key), unless `about_value`: then it names the key (serde places a value's refusal by a
/// visitor on its key).
pub fn at(text: &str, line: u64, column: u64, about_value: bool) -> String {
    let mut path = at_line(text, line);
    let lines: Vec<&str> = text.lines().collect();
    let Some(i) = index(line).filter(|&i| i < lines.len()) else {
        return path;
    };
    if lines[i].trim_start().starts_with("- ") {
        let n = item_number(&lines, i, indentation(lines[i]));
        path.push_str(&format!("[{n}]"));
    }
    for key in keys_holding(lines[i], column, about_value) {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(&key);
    }
    path
}

/// The keys enclosing line `line` (1-based) of `text`, joined with dots; a sequence item
/// is `[n]`.
pub fn at_line(text: &str, line: u64) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = index(line) else {
        return String::new();
    };
    if start >= lines.len() {
        return String::new();
    }
    let mut parts = Vec::new();
    let mut indent = indentation(lines[start]);
    let mut i = start;
    while i > 0 && indent > 0 {
        i -= 1;
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let here = indentation(line);
        if here >= indent {
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ") {
            let n = item_number(&lines, i, here);
            // An error below the item's first key is under that key.
            if let Some(key) = key_of(item)
                && here + 2 < indent
            {
                parts.push(key);
            }
            parts.push(format!("[{n}]"));
        } else if let Some(key) = key_of(trimmed) {
            parts.push(key);
        }
        indent = here;
    }
    let mut path = String::new();
    for part in parts.iter().rev() {
        if !path.is_empty() && !part.starts_with('[') {
            path.push('.');
        }
        path.push_str(part);
    }
    path
}

/// A 1-based line number as an index.
fn index(line: u64) -> Option<usize> {
    usize::try_from(line).ok()?.checked_sub(1)
}

/// The number of the sequence item starting at line `i`, indented `here`: the items before
/// it at the same indentation.
fn item_number(lines: &[&str], i: usize, here: usize) -> usize {
    lines[..i]
        .iter()
        .rev()
        .take_while(|l| l.trim().is_empty() || indentation(l) >= here)
        .filter(|l| indentation(l) == here && l.trim_start().starts_with("- "))
        .count()
}

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The key of a `key: …` line.
fn key_of(line: &str) -> Option<String> {
    let (key, _) = line.split_once(':')?;
    let key = key.trim().trim_matches(['"', '\'']);
    (!key.is_empty() && !key.contains(' ')).then(|| key.to_owned())
}

/// The keys on `line` whose values hold character `column` (1-based), outermost first:
/// the line's own key, then those of the flow mappings (`{ … }`) around the column; and
/// with `on_key`, the key starting at the column.
fn keys_holding(line: &str, column: u64, on_key: bool) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let end = usize::try_from(column)
        .map_or(chars.len(), |c| c.saturating_sub(1))
        .min(chars.len());
    // The keys whose values are still open, each with its flow depth.
    let mut open: Vec<(usize, String)> = Vec::new();
    let mut depth = 0;
    let mut token = String::new();
    let mut quote = None;
    for (i, &c) in chars[..end].iter().enumerate() {
        if let Some(q) = quote {
            quote = (c != q).then_some(q);
            continue;
        }
        match c {
            // A quote opens a scalar only at its start (`don't` is plain text).
            '"' | '\'' if token.trim().is_empty() => quote = Some(c),
            '{' | '[' => {
                depth += 1;
                token.clear();
            }
            '}' | ']' | ',' => {
                // The pair at this depth ends; a closing bracket ends its collection too.
                open.retain(|(d, _)| *d < depth);
                if c != ',' {
                    depth -= usize::from(depth > 0);
                }
                token.clear();
            }
            // `key: value` (a `:` inside a plain scalar, as in a URL, is not followed by a
            // space).
            ':' if chars
                .get(i + 1)
                .is_none_or(|n| n.is_whitespace() || (depth > 0 && ",]}".contains(*n))) =>
            {
                let key = token.trim().trim_start_matches("- ");
                let key = key.trim_matches(['"', '\'']);
                if !key.is_empty() {
                    open.retain(|(d, _)| *d < depth);
                    open.push((depth, key.to_owned()));
                }
                token.clear();
            }
            _ => token.push(c),
        }
    }
    let mut keys: Vec<String> = open.into_iter().map(|(_, key)| key).collect();
    let rest: String = chars[end..].iter().collect();
    if on_key
        && let Some((key, after)) = rest.split_once(':')
        && after.chars().next().is_none_or(char::is_whitespace)
        && !key.is_empty()
        && !key.contains([' ', '{', '[', ','])
    {
        keys.push(key.trim_matches(['"', '\'']).to_owned());
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::{at, at_line};

    const YAML: &str = "sources:\n  shop:\n    url: x\ntools:\n  a:\n    statements:\n      - sql: one\n      - sql: two\n        expct: 1\n  b:\n    retries: 3\n";

    #[test]
    fn paths_follow_the_indentation() {
        assert_eq!(at_line(YAML, 11), "tools.b");
        assert_eq!(at_line(YAML, 9), "tools.a.statements[1]");
        assert_eq!(at_line(YAML, 3), "sources.shop");
        assert_eq!(at_line(YAML, 1), "");
        assert_eq!(at_line(YAML, 99), "");
    }

    #[test]
    fn a_place_in_a_value_names_its_key() {
        // On the key: the mapping it is in (an unknown key is the mapping's problem).
        assert_eq!(at(YAML, 11, 5, false), "tools.b");
        assert_eq!(at(YAML, 11, 5, true), "tools.b.retries");
        assert_eq!(at(YAML, 3, 10, false), "sources.shop.url");
        assert_eq!(at(YAML, 8, 14, false), "tools.a.statements[1].sql");
        let flow = "tools:\n  t:\n    parameters:\n      id: { type: int, enum: [0, 5] }\n    expect: {rows: -1, error: \"a: b\"}\n";
        assert_eq!(at(flow, 4, 19, false), "tools.t.parameters.id.type");
        assert_eq!(at(flow, 4, 34, false), "tools.t.parameters.id.enum");
        assert_eq!(at(flow, 5, 20, false), "tools.t.expect.rows");
        assert_eq!(at(flow, 5, 35, false), "tools.t.expect.error");
        assert_eq!(at("a: http://x:1/y", 1, 15, false), "a");
        assert_eq!(at("a: http://x:1/y", 1, 4, true), "a");
        assert_eq!(at("r: { jitter: 2 }", 1, 6, true), "r.jitter");
    }
}
