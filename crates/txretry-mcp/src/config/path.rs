//! The path of the field at a line of a YAML file (`tools.t2`), read from the indentation:
//! what a YAML error names when the parser gives only a line.

/// The keys enclosing line `line` (1-based) of `text`, joined with dots; a sequence item
/// is `[n]`.
pub fn at_line(text: &str, line: u64) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = usize::try_from(line).ok().and_then(|l| l.checked_sub(1)) else {
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
            // A sequence item: count the items before it at the same indentation.
            let n = lines[..i]
                .iter()
                .rev()
                .take_while(|l| l.trim().is_empty() || indentation(l) >= here)
                .filter(|l| indentation(l) == here && l.trim_start().starts_with("- "))
                .count();
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

fn indentation(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// The key of a `key: …` line.
fn key_of(line: &str) -> Option<String> {
    let (key, _) = line.split_once(':')?;
    let key = key.trim().trim_matches(['"', '\'']);
    (!key.is_empty() && !key.contains(' ')).then(|| key.to_owned())
}

#[cfg(test)]
mod tests {
    use super::at_line;

    const YAML: &str = "sources:\n  shop:\n    url: x\ntools:\n  a:\n    statements:\n      - sql: one\n      - sql: two\n        expct: 1\n  b:\n    retries: 3\n";

    #[test]
    fn paths_follow_the_indentation() {
        assert_eq!(at_line(YAML, 11), "tools.b");
        assert_eq!(at_line(YAML, 9), "tools.a.statements[1]");
        assert_eq!(at_line(YAML, 3), "sources.shop");
        assert_eq!(at_line(YAML, 1), "");
        assert_eq!(at_line(YAML, 99), "");
    }
}
