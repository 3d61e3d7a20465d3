//! An error's text for the model: the error and the causes that add to it.

use std::error::Error;

/// Longest chain of causes followed: a `source()` cycle still ends.
const MAX_CAUSES: usize = 16;

/// `error`'s text followed by each cause's that adds something (`db error: ERROR:
/// duplicate key value violates unique constraint "orders_pkey"`). Some drivers put the
/// server's message only in a cause (tokio-postgres says just `db error`), and a model, or
/// a recorded `once` answer, told only that learns nothing. A cause whose text is already
/// there (sqlx's `error returned from database: …` wraps its own cause's message) is left
/// out, as is an empty one.
pub(crate) fn with_causes(error: &(dyn Error + 'static)) -> String {
    let mut text = own_text(error);
    let mut cause = error.source();
    for _ in 0..MAX_CAUSES {
        let Some(current) = cause else { break };
        let more = own_text(current);
        if !more.is_empty() && !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        cause = current.source();
    }
    text
}

/// `error`'s own text; for a Postgres server's error through sqlx, without what sqlx's
/// `Display` appends, ` at line N` (txretry-sqlx's `describe`).
fn own_text(error: &(dyn Error + 'static)) -> String {
    let text = error.to_string();
    #[cfg(feature = "sqlx-postgres")]
    let text = txretry_sqlx::describe::without_source_line(error, text);
    text
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::fmt;

    use super::with_causes;

    #[derive(Debug)]
    struct Wrapper(&'static str, Option<Box<dyn Error + 'static>>);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref()
        }
    }

    fn chain(texts: &[&'static str]) -> Wrapper {
        texts
            .iter()
            .rev()
            .fold(None, |inner: Option<Wrapper>, text| {
                Some(Wrapper(text, inner.map(|e| Box::new(e) as Box<dyn Error>)))
            })
            .expect("one error at least")
    }

    #[test]
    fn causes_that_add_are_appended() {
        // tokio-postgres' shape: the message is only in the cause.
        let error = chain(&["db error", "ERROR: duplicate key value"]);
        assert_eq!(with_causes(&error), "db error: ERROR: duplicate key value");
        // sqlx's shape: the cause's message is already in the text.
        let error = chain(&["error returned from database: gone", "gone"]);
        assert_eq!(with_causes(&error), "error returned from database: gone");
        let error = chain(&["order 7 not found"]);
        assert_eq!(with_causes(&error), "order 7 not found");
        let error = chain(&["a", "", "b"]);
        assert_eq!(with_causes(&error), "a: b");
    }

    #[test]
    fn a_long_chain_ends() {
        let error = chain(&["x"; 40]);
        assert_eq!(with_causes(&error), "x");
        let texts: Vec<&'static str> = (0..40)
            .map(|i| &*Box::leak(format!("e{i}.").into_boxed_str()))
            .collect();
        let text = with_causes(&chain(&texts));
        assert_eq!(text.matches(": ").count(), 16, "{text}");
    }
}
